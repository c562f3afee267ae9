//! Command-line arguments and thin handlers: each command parses its arguments here, calls the
//! library and prints. Library modules never import this module.

mod ci;
mod completions;
mod core;
mod cwd;
mod delta;
mod error;
mod git;
mod lineage;
mod policy;
mod signing;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use error::Result;

use crate::git::RemoteOptions;
use crate::output::{ColorChoice, Exit};

#[derive(Debug, Parser)]
#[command(
    name = "weight-inspect",
    version,
    about = "Structural identity and structural diffs for GGUF, safetensors and PyTorch model files",
    max_term_width = 100
)]
pub(crate) struct Cli {
    /// When to color output: auto (a terminal without NO_COLOR), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Never read headers of absent LFS objects from the LFS server (cached ones are used).
    #[arg(long, global = true)]
    pub offline: bool,
    /// The remote whose LFS server holds absent LFS objects (default: the branch's upstream
    /// remote, else origin).
    #[arg(long, global = true, value_name = "NAME")]
    pub remote: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show a model file's format, metadata, tensors, parameter counts and structural hash.
    Inspect(core::InspectArgs),
    /// Print a model file's structural identity.
    Id(core::IdArgs),
    /// Structural diff of two model files (exit 0 identical, 1 different, 2 error).
    Diff(core::DiffArgs),
    /// Stable line rendering for git's diff.<driver>.textconv (always exits 0).
    Textconv(git::TextconvArgs),
    /// git's external diff driver protocol (diff.<driver>.command).
    GitDiffDriver(git::DriverArgs),
    /// Git integration: install, uninstall, diff between revisions.
    Git(git::GitArgs),
    /// Check model files against the policy (.weight-inspect.toml).
    Check(policy::CheckArgs),
    /// Edit the policy file (pin structural hashes).
    Policy(policy::PolicyArgs),
    /// Install the pre-commit hook.
    Hook(policy::HookArgs),
    /// Pull-request report for GitHub Actions.
    Ci(ci::CiArgs),
    /// Compressed weight deltas (.wdelta): create, apply, inspect, verify, store, restore.
    Delta(delta::DeltaArgs),
    /// How a model was made from candidate parents: identical, cast, re-quantized, conversion,
    /// fine-tune, merge, adapter, extended, pruned or unrelated (exit 0 related, 1 not).
    Relate(lineage::RelateArgs),
    /// A CycloneDX 1.6 ML-BOM of models: files' SHA-256, structural hash, parameters, model
    /// card and the models they were made from.
    Bom(lineage::BomArgs),
    /// Verify an OpenSSF model signature (model_signing's model.sig), offline (exit 0
    /// verified, 1 not verified, 2 unreadable).
    Verify(signing::VerifyArgs),
    /// Sign a model directory with a key or a certificate (an OpenSSF model signature).
    Sign(signing::SignArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
}

/// Parses the command line and runs the command. Errors print as `weight-inspect: ...`, exit 2.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return argument_error(err),
    };
    let remote = RemoteOptions {
        offline: cli.offline,
        remote: cli.remote,
    };
    match run(cli.command, cli.color, &remote) {
        Ok(exit) => exit.into(),
        Err(err) => {
            let _ = std::io::stdout().flush();
            // Every error shows the paths and names it holds escaped (crate::escape);
            // terminal_safe is the net for text no rule reached (a message from a server).
            let message = err.to_string();
            eprintln!("weight-inspect: {}", crate::escape::terminal_safe(&message));
            Exit::Error.into()
        }
    }
}

fn run(command: Command, color: ColorChoice, remote: &RemoteOptions) -> Result<Exit> {
    match command {
        Command::Inspect(args) => core::inspect(args, color, remote),
        Command::Id(args) => core::id(args, remote),
        Command::Diff(args) => core::diff(args, color, remote),
        Command::Textconv(args) => Ok(git::textconv(args, remote)),
        Command::GitDiffDriver(args) => Ok(git::diff_driver(args, color, remote)),
        Command::Git(args) => git::run(args, color, remote),
        Command::Check(args) => policy::check(args, remote),
        Command::Policy(args) => policy::policy(args, remote),
        Command::Hook(args) => policy::hook(args),
        Command::Ci(args) => ci::run(args, remote),
        Command::Delta(args) => delta::run(args, remote),
        Command::Relate(args) => lineage::relate(args, color, remote),
        Command::Bom(args) => lineage::bom(args, remote),
        Command::Verify(args) => signing::verify(args, color),
        Command::Sign(args) => signing::sign(args, color),
        Command::Completions(args) => completions::completions(args, Cli::command()),
    }
}

/// A command line clap refuses (or help and version, which it prints). Its messages quote the
/// arguments as typed; when one holds a control or bidirectional character, the command line
/// is parsed again with every argument shown escaped, as every name we print, and that
/// refusal printed (clap strips no line break or CR of an argument, and on a terminal no
/// escape sequence).
fn argument_error(err: clap::Error) -> ExitCode {
    use crate::escape::{escape_name, needs_escape};
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let hostile = |a: &String| a.chars().any(|c| c != '\\' && needs_escape(c));
    if !err.use_stderr() || !args.iter().any(hostile) {
        err.exit()
    }
    let shown = args.iter().map(|a| escape_name(a).into_owned());
    match Cli::try_parse_from(shown) {
        Err(escaped) => escaped.exit(),
        // Accepted once escaped (an argument that is not UTF-8 reads as text once shown): the
        // first refusal, as plain text, its control and bidirectional characters escaped.
        Ok(_) => {
            let plain = err.render().to_string();
            eprint!("{}", crate::escape::terminal_safe(&plain));
            ExitCode::from(2)
        }
    }
}
