//! Policy checks for model files (pre-commit hook and CI).

pub mod cli;
pub mod config;
pub mod pickle;

pub use config::{Policy, load_policy};
