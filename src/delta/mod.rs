//! `.wdelta` compressed weight deltas.

pub mod cli;
