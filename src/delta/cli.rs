//! Arguments of `delta create|apply|inspect|verify|store|restore`.

use std::process::ExitCode;

use crate::cli::Context;
use crate::error::{Error, Result};

/// Compressed weight deltas (.wdelta).
#[derive(Debug, clap::Args)]
pub struct DeltaArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl DeltaArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("delta is not implemented yet".into()))
    }
}
