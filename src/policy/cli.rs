//! Arguments of `check`, `policy` and `hook`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::config::Policy;
use super::report::{self, OutputFormat};
use super::workspace::Workspace;
use crate::cli::{Context, write_stdout};
use crate::error::{Error, Result};

/// Evaluate the policy file against model files (exit 0 clean, 1 violations, 2 error).
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Judge what is staged (the index blobs) instead of the working tree.
    #[arg(long)]
    pub staged: bool,
    /// Policy file (default: .weight-inspect.toml at the repository root).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output: one line per violation (text), JSON (schema 1), or GitHub Actions annotations.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Files or directories to check (default: every staged/tracked file a rule matches).
    #[arg(value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

impl CheckArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        let ws = Workspace::discover(self.policy.as_deref())?;
        let (policy, shown) = load(&ws, self.policy.as_ref())?;
        let report = super::run_check(&ws, &policy, &shown, self.staged, &self.paths)?;
        match self.format {
            OutputFormat::Text => {
                let (out, err) = report::text(&report);
                write_stdout(out.as_bytes())?;
                eprint!("{err}");
            }
            OutputFormat::Json => write_stdout(report::json(&report).as_bytes())?,
            OutputFormat::Github => write_stdout(report::github(&report).as_bytes())?,
        }
        Ok(ExitCode::from(report.exit_code()))
    }
}

/// Loads the policy named by `--policy` or found at the root; returns it and its name for
/// messages (relative to the current directory).
fn load(ws: &Workspace, arg: Option<&PathBuf>) -> Result<(Policy, String)> {
    let path = ws.policy_path(arg.map(PathBuf::as_path));
    let shown = ws.display(&path);
    if arg.is_none() && !path.exists() {
        return Err(Error::Other(format!(
            "no policy file: {shown} does not exist (create it, see docs/policy.md, or pass \
             --policy FILE)"
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&shown, e))?;
    Ok((Policy::parse(std::path::Path::new(&shown), &text)?, shown))
}

/// Edit or validate the policy file.
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Record the current structural hashes of PATHS as `expected_hash` entries (default:
    /// refresh every path already pinned), preserving the rest of the file.
    Pin {
        /// Policy file (default: .weight-inspect.toml at the repository root; created if
        /// missing).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Pin the staged versions instead of the working tree.
        #[arg(long)]
        staged: bool,
        /// Model files (or directories of them) to pin.
        #[arg(value_name = "PATHS")]
        paths: Vec<PathBuf>,
    },
    /// Check that the policy file is valid (exit 0), or print where it is not (exit 2).
    Validate {
        /// Policy file (default: .weight-inspect.toml at the repository root).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
}

impl PolicyArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        match self.command {
            PolicyCommand::Pin {
                policy,
                staged,
                paths,
            } => {
                let ws = Workspace::discover(policy.as_deref())?;
                let out = super::pin_paths(&ws, policy.as_deref(), staged, &paths)?;
                write_stdout(out.as_bytes())?;
                Ok(ExitCode::SUCCESS)
            }
            PolicyCommand::Validate { policy } => {
                let ws = Workspace::discover(policy.as_deref())?;
                let (policy, shown) = load(&ws, policy.as_ref())?;
                let n = policy.rules.len();
                let out = format!(
                    "{shown}: valid, {n} {}\n",
                    if n == 1 { "rule" } else { "rules" }
                );
                write_stdout(out.as_bytes())?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// Install or remove the native git pre-commit hook.
#[derive(Debug, clap::Args)]
pub struct HookArgs {
    #[command(subcommand)]
    pub command: HookCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Write the pre-commit hook (`weight-inspect check --staged`) into the repository.
    Install {
        /// Keep an existing foreign hook: it is moved to pre-commit.chained and runs first.
        #[arg(long)]
        chain: bool,
        /// Replace an existing foreign hook (a copy is kept as pre-commit.backup).
        #[arg(long, conflicts_with = "chain")]
        force: bool,
    },
    /// Remove the hook, restoring a chained one.
    Uninstall,
}

impl HookArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let hooks = super::hook::hooks_dir(&cwd)?;
        let ws = Workspace::discover(None)?;
        let hook_shown = ws.display(&hooks.join("pre-commit"));
        let out = match self.command {
            HookCommand::Install { chain, force } => {
                use super::hook::Installed;
                let mut out = match super::hook::install(&hooks, chain, force)? {
                    Installed::New => format!("installed {hook_shown}\n"),
                    Installed::Updated => format!("updated {hook_shown}\n"),
                    Installed::Chained(p) => format!(
                        "installed {hook_shown}; the previous hook now runs first from {}\n",
                        ws.display(&p)
                    ),
                    Installed::Replaced(p) => format!(
                        "replaced {hook_shown}; the previous hook is saved as {}\n",
                        ws.display(&p)
                    ),
                };
                let policy = ws.policy_path(None);
                if !policy.exists() {
                    out.push_str(&format!(
                        "note: {} does not exist yet; commits are refused until it does (see \
                         docs/policy.md)\n",
                        ws.display(&policy)
                    ));
                }
                out
            }
            HookCommand::Uninstall => super::hook::uninstall(&hooks)? + "\n",
        };
        write_stdout(out.as_bytes())?;
        Ok(ExitCode::SUCCESS)
    }
}
