//! Command-line arguments. Each command parses its arguments here and hands off to the library.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::error::{Error, Result};
use crate::render::Palette;

#[derive(Debug, Parser)]
#[command(
    name = "weight-inspect",
    version,
    about = "Structural identity and structural diffs for GGUF and safetensors model files",
    max_term_width = 100
)]
pub struct Cli {
    /// When to color output: auto (a terminal without NO_COLOR), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a model file's format, metadata, tensors, parameter counts and structural hash.
    Inspect(InspectArgs),
    /// Print a model file's structural identity.
    Id(IdArgs),
    /// Structural diff of two model files (exit 0 identical, 1 different, 2 error).
    Diff(DiffArgs),
    /// Stable line rendering for git's diff.<driver>.textconv (always exits 0).
    Textconv(crate::git::cli::TextconvArgs),
    /// git's external diff driver protocol (diff.<driver>.command).
    GitDiffDriver(crate::git::cli::DriverArgs),
    /// Git integration: install, uninstall, diff between revisions.
    Git(crate::git::cli::GitArgs),
    /// Check model files against the policy (.weight-inspect.toml).
    Check(crate::policy::cli::CheckArgs),
    /// Edit the policy file (pin structural hashes).
    Policy(crate::policy::cli::PolicyArgs),
    /// Install the pre-commit hook.
    Hook(crate::policy::cli::HookArgs),
    /// Pull-request report for GitHub Actions.
    Ci(crate::ci::CiArgs),
    /// Compressed weight deltas (.wdelta): create, apply, inspect, verify, store, restore.
    Delta(crate::delta::cli::DeltaArgs),
}

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Model file, or REV:path inside a git repository.
    pub file: String,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
    /// Show every tensor instead of the first few.
    #[arg(long)]
    pub all: bool,
    /// With --json: include arrays in full rather than summarized.
    #[arg(long)]
    pub full_arrays: bool,
}

#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// Model file, or REV:path inside a git repository.
    pub file: String,
    /// Machine-readable output (schema 1).
    #[arg(long, conflicts_with = "canonical")]
    pub json: bool,
    /// Print the canonical JSON whose SHA-256 is the structural hash.
    #[arg(long)]
    pub canonical: bool,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Old side: a file, or REV:path inside a git repository.
    pub a: String,
    /// New side: a file, or REV:path inside a git repository.
    pub b: String,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
}

/// What every command may need beyond its own arguments.
#[derive(Debug, Clone)]
pub struct Context {
    pub color: ColorChoice,
}

impl Context {
    /// The palette for stdout: `auto` colors only a terminal, and only without NO_COLOR.
    pub fn palette(&self) -> Palette {
        Palette::new(self.color_enabled(std::io::stdout().is_terminal()))
    }

    /// Whether to color given whether the output is a terminal (or a pager git runs for us).
    pub fn color_enabled(&self, is_terminal: bool) -> bool {
        match self.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color(),
        }
    }
}

/// NO_COLOR set to a non-empty value turns color off (no-color.org).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Parses the command line and runs the command. Errors print as `weight-inspect: ...`, exit 2.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = Context { color: cli.color };
    match run(cli.command, &ctx) {
        Ok(code) => code,
        Err(err) => {
            let _ = std::io::stdout().flush();
            eprintln!("weight-inspect: {err}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command, ctx: &Context) -> Result<ExitCode> {
    match command {
        Command::Inspect(args) => {
            if let Some(delta) = crate::read::map_if_wdelta(Path::new(&args.file))? {
                return describe_wdelta(&args.file, &delta, args.json);
            }
            let artifact = crate::read::load(&args.file)?;
            let out = if args.json {
                crate::render::json::inspect(&artifact, args.full_arrays)
            } else {
                crate::render::text::inspect(&artifact, &ctx.palette(), args.all)
            };
            exit_without_freeing(artifact);
            print(&out)
        }
        Command::Id(args) => {
            if let Some(delta) = crate::read::map_if_wdelta(Path::new(&args.file))? {
                return describe_wdelta(&args.file, &delta, args.json);
            }
            let artifact = crate::read::load(&args.file)?;
            if args.canonical {
                let mut bytes = crate::identity::canonical_json(&artifact);
                bytes.push(b'\n');
                write_stdout(&bytes)?;
                return Ok(ExitCode::SUCCESS);
            }
            let out = if args.json {
                crate::render::json::id(&artifact)
            } else {
                crate::render::text::id(&artifact)
            };
            exit_without_freeing(artifact);
            print(&out)
        }
        Command::Diff(args) => {
            let a = crate::read::load(&args.a)?;
            let b = crate::read::load(&args.b)?;
            let diff = crate::diff::StructuralDiff::between(&a, &b);
            let out = if args.json {
                crate::render::json::diff(&diff)
            } else {
                crate::render::text::diff(&diff, &ctx.palette())
            };
            print(&out)?;
            Ok(if diff.is_identical() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Textconv(args) => args.run(ctx),
        Command::GitDiffDriver(args) => args.run(ctx),
        Command::Git(args) => args.run(ctx),
        Command::Check(args) => args.run(ctx),
        Command::Policy(args) => args.run(ctx),
        Command::Hook(args) => args.run(ctx),
        Command::Ci(args) => args.run(ctx),
        Command::Delta(args) => args.run(ctx),
    }
}

/// A `.wdelta` has no structural identity of schema 1: it is described (version, strategy,
/// parent hash, tensors) instead.
fn describe_wdelta(name: &str, bytes: &[u8], json: bool) -> Result<ExitCode> {
    let described = if json {
        crate::delta::describe_json(bytes)
    } else {
        crate::delta::describe(bytes)
    };
    let mut out = described.map_err(|e| Error::Other(format!("{name}: {e}")))?;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    print(&out)
}

/// The process ends right after printing: freeing a 262,144-token vocabulary string by string
/// would cost more than parsing it, and the OS reclaims the memory at once anyway.
fn exit_without_freeing<T>(value: T) {
    std::mem::forget(value);
}

fn print(text: &str) -> Result<ExitCode> {
    write_stdout(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth reporting.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<stdout>", e)),
    }
}
