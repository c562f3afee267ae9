//! Policy checks for model files (pre-commit hook and CI).

pub mod cli;
