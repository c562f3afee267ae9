//! `check`, `policy` and `hook`: the policy commands.

use std::path::PathBuf;

use crate::escape::shown;
use crate::git::RemoteOptions;
use crate::output::{ColorChoice, Exit, Format, Output, print};
use crate::policy::{Missing, Policy, PolicyError, PolicySource, Workspace};

use super::error::Result;

/// Evaluate the policy file against model files (exit 0 clean, 1 violations, 2 error).
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Judge what is staged (the index blobs) instead of the working tree: without PATHS, the
    /// files the commit adds, modifies or renames (--all: every staged file).
    #[arg(long)]
    pub staged: bool,
    /// With --staged and no PATHS: judge every staged file, not only what the commit brings
    /// (the files added, modified or renamed against HEAD).
    #[arg(long, requires = "staged", conflicts_with = "paths")]
    pub all: bool,
    /// Policy file (default: .weight-inspect.toml at the repository root).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Output: one line per violation (text), JSON (schema 1), GitHub Actions annotations, or
    /// SARIF 2.1.0 for code scanning.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Pass (exit 0) when the repository has no policy file, saying once how to add one,
    /// instead of refusing: what the hooks run, so that a hook installed before a policy
    /// exists lets every commit through. Plain `check` refuses.
    #[arg(long, conflicts_with = "policy")]
    pub allow_missing_policy: bool,
    /// Files or directories to check (default: every tracked file a rule matches; with
    /// --staged, the staged change).
    #[arg(value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
}

pub(super) fn check(args: CheckArgs, remote: &RemoteOptions) -> Result<Exit> {
    let output = Output::new(args.format, ColorChoice::Never);
    let ws = Workspace::discover(args.policy.as_deref(), remote)?;
    if args.allow_missing_policy && !ws.policy_path(None).exists() {
        let shown = ws.display(&ws.policy_path(None));
        eprintln!("{}", crate::policy::missing_policy_note(&shown));
        return Ok(Exit::Clean);
    }
    let (policy, shown) = load(&ws, args.policy.as_ref())?;
    let scope = if args.all {
        crate::policy::Scope::Everything
    } else {
        crate::policy::Scope::Change
    };
    let policy_in_repo = ws
        .relative(&ws.policy_path(args.policy.as_deref()))
        .ok()
        .filter(|p| !p.is_empty());
    let report = crate::policy::run_check(
        &ws,
        &policy,
        &shown,
        args.staged,
        scope,
        &args.paths,
        policy_in_repo,
    )?;
    output.print(&report)?;
    if matches!(args.format, Format::Text | Format::Sarif) {
        // The files that could not be checked, for the log (the SARIF has them too).
        eprint!("{}", report.text().1);
    }
    Ok(report.exit())
}

/// Loads the policy named by `--policy` or found at the root; returns it and its name for
/// messages (relative to the current directory).
fn load(ws: &Workspace, arg: Option<&PathBuf>) -> Result<(Policy, String), PolicyError> {
    let source = PolicySource::in_workspace(ws, arg.map(PathBuf::as_path), Missing::Refuse)?;
    Ok((source.parse()?, source.shown))
}

/// Edit or validate the policy file.
#[derive(Debug, clap::Args)]
pub(crate) struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum PolicyCommand {
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

pub(super) fn policy(args: PolicyArgs, remote: &RemoteOptions) -> Result<Exit> {
    match args.command {
        PolicyCommand::Pin {
            policy,
            staged,
            paths,
        } => {
            let ws = Workspace::discover(policy.as_deref(), remote)?;
            let out = crate::policy::pin_paths(&ws, policy.as_deref(), staged, &paths)?;
            Ok(print(&out)?)
        }
        PolicyCommand::Validate { policy } => {
            let ws = Workspace::discover(policy.as_deref(), remote)?;
            let (policy, shown_name) = load(&ws, policy.as_ref())?;
            let n = policy.rules.len();
            let out = format!(
                "{}: valid, {n} {}\n",
                shown(&shown_name),
                if n == 1 { "rule" } else { "rules" }
            );
            Ok(print(&out)?)
        }
    }
}

/// Install or remove the native git pre-commit hook.
#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    #[command(subcommand)]
    pub command: HookCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum HookCommand {
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

pub(super) fn hook(args: HookArgs) -> Result<Exit> {
    let cwd = super::cwd::cwd()?;
    let hooks = crate::git::hooks_dir(&cwd)?;
    let ws = Workspace::discover(None, &RemoteOptions::ONLINE)?;
    let hook_shown = shown(&ws.display(&hooks.join("pre-commit"))).into_owned();
    let out = match args.command {
        HookCommand::Install { chain, force } => {
            use crate::policy::Installed;
            let mut out = match crate::policy::install_hook(&hooks, chain, force)? {
                Installed::New => format!("installed {hook_shown}\n"),
                Installed::Updated => format!("updated {hook_shown}\n"),
                Installed::Chained(p) => format!(
                    "installed {hook_shown}; the previous hook now runs first from {}\n",
                    shown(&ws.display(&p))
                ),
                Installed::Replaced(p) => format!(
                    "replaced {hook_shown}; the previous hook is saved as {}\n",
                    shown(&ws.display(&p))
                ),
            };
            let policy = ws.policy_path(None);
            if !policy.exists() {
                out.push_str(&format!(
                    "note: {} does not exist yet; commits are refused until it does (see \
                     docs/policy.md)\n",
                    shown(&ws.display(&policy))
                ));
            }
            out
        }
        HookCommand::Uninstall => crate::policy::uninstall_hook(&hooks)? + "\n",
    };
    Ok(print(&out)?)
}
