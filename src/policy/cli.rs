//! Arguments of `check`, `policy` and `hook`.

use std::process::ExitCode;

use crate::cli::Context;
use crate::error::{Error, Result};

/// Evaluate the policy file against model files.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl CheckArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("check is not implemented yet".into()))
    }
}

/// Edit the policy file (`policy pin`).
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl PolicyArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("policy is not implemented yet".into()))
    }
}

/// Install the pre-commit hook (`hook install`).
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl HookArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("hook is not implemented yet".into()))
    }
}
