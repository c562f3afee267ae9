//! `weight-inspect ci`: pull-request reports for GitHub Actions.

use std::process::ExitCode;

use crate::cli::Context;
use crate::error::{Error, Result};

/// Report structural changes and policy violations between two commits.
#[derive(Debug, clap::Args)]
pub struct CiArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl CiArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("ci is not implemented yet".into()))
    }
}
