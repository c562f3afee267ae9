//! Arguments of the git commands (`textconv`, `git-diff-driver`, `git ...`).

use std::process::ExitCode;

use crate::cli::Context;
use crate::error::{Error, Result};

/// Render a model file (or an LFS pointer to one) as stable lines for `diff.<driver>.textconv`.
#[derive(Debug, clap::Args)]
pub struct TextconvArgs {
    pub file: std::path::PathBuf,
}

impl TextconvArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other("textconv is not implemented yet".into()))
    }
}

/// git's external diff protocol: `path old-file old-hex old-mode new-file new-hex new-mode`.
#[derive(Debug, clap::Args)]
pub struct DriverArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl DriverArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other(
            "git-diff-driver is not implemented yet".into(),
        ))
    }
}

/// `weight-inspect git install|uninstall|diff`.
#[derive(Debug, clap::Args)]
pub struct GitArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl GitArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        Err(Error::Other(
            "git subcommands are not implemented yet".into(),
        ))
    }
}

/// Reads `REV:path` through git, for `diff`/`inspect`/`id` arguments that are not files.
/// Returns None when `spec` is not of that form.
pub fn read_rev_path(_spec: &str) -> Option<Result<crate::Artifact>> {
    None
}
