//! Git integration: textconv, external diff driver, installer, and the gix fast path.

pub mod cli;
