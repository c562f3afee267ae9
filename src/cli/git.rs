//! The git commands: `textconv`, `git-diff-driver`, `git install|uninstall|diff`.

use std::path::PathBuf;

use crate::git::RemoteOptions;
use crate::git::{Mode, Scope};
use crate::output::{ColorChoice, Exit, Format, print, write_stdout};
use crate::render::report::DiffForm;

use super::cwd::cwd;
use super::error::Result;

/// Render a model file (or an LFS pointer to one) as stable lines for `diff.<driver>.textconv`.
#[derive(Debug, clap::Args)]
pub(crate) struct TextconvArgs {
    /// The file git hands over (a temporary copy of one side, or the work-tree file).
    pub file: PathBuf,
    /// Also the SHA-256 of each tensor's data, where the model's bytes are on this machine
    /// (reads the whole model; git's textconv cache keeps the result per blob).
    #[arg(long)]
    pub tensor_hashes: bool,
}

/// Exit 0 whatever happens: a failing textconv makes the whole `git diff` fail.
pub(super) fn textconv(args: TextconvArgs, remote: &RemoteOptions) -> Exit {
    if let Some(text) = super::signing::textconv_signature(&args.file) {
        let _ = write_stdout(text.as_bytes());
        return Exit::Clean;
    }
    // A `model.sig` that is no OMS bundle (a GPG signature) is left to git: its bytes as they are.
    if args.file.file_name().is_some_and(|n| n == "model.sig")
        && let Ok(bytes) = std::fs::read(&args.file)
    {
        let _ = write_stdout(&bytes);
        return Exit::Clean;
    }
    let options = crate::git::TextconvOptions {
        tensor_hashes: args.tensor_hashes,
    };
    let _ = write_stdout(crate::git::render_textconv(&args.file, remote, options).as_bytes());
    Exit::Clean
}

/// git's external diff protocol: `path old-file old-hex old-mode new-file new-hex new-mode`.
#[derive(Debug, clap::Args)]
pub(crate) struct DriverArgs {
    /// The 7 (9 for a rename, 1 for an unmerged path) arguments git passes.
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

/// Exit 0 whatever happens: git aborts the whole diff when its driver fails.
pub(super) fn diff_driver(args: DriverArgs, color: ColorChoice, remote: &RemoteOptions) -> Exit {
    let color = color.enabled_for_git();
    if let Some(text) = super::signing::signature_diff(&args.args) {
        let _ = write_stdout(text.as_bytes());
        return Exit::Clean;
    }
    let _ = write_stdout(crate::git::run_diff_driver(&args.args, color, remote).as_bytes());
    Exit::Clean
}

/// `weight-inspect git install|uninstall|diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct GitArgs {
    #[command(subcommand)]
    pub command: GitCommand,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum GitCommand {
    /// Make weight-inspect git's diff driver for GGUF, safetensors and PyTorch files (*.gguf,
    /// *.safetensors, *.pt, *.pth, *.ckpt, pytorch_model*.bin; works with LFS).
    Install(InstallArgs),
    /// Remove exactly what `install` added.
    Uninstall(UninstallArgs),
    /// Structural diff of the model files changed between two commits, or between a commit
    /// (default HEAD) and the work tree. Reads blobs with gix and only the header of LFS
    /// objects from the local store: nothing is smudged.
    Diff(GitDiffArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct InstallArgs {
    /// Configure ~/.gitconfig and the global attributes file instead of this repository.
    #[arg(long)]
    pub global: bool,
    /// Only the textconv driver (line diffs in `git diff`, `git log -p`, `git show`).
    #[arg(long, conflicts_with = "external")]
    pub textconv: bool,
    /// Only the external diff driver (`git diff`; `git log`/`git show` with --ext-diff).
    #[arg(long)]
    pub external: bool,
    /// Textconv renderings name each tensor's data digest, so `git log -p` shows which tensors
    /// a commit changed (reads each model version once; see docs/git.md).
    #[arg(long, conflicts_with = "external")]
    pub tensor_hashes: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// Undo a `git install --global`.
    #[arg(long)]
    pub global: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct GitDiffArgs {
    /// Zero revisions: HEAD against the work tree; one: REV against the work tree; two: REV
    /// against REV.
    #[arg(num_args = 0..=2, value_name = "REV")]
    pub revs: Vec<String>,
    /// Only these paths (files, directories or globs, relative to the current directory).
    #[arg(last = true, value_name = "PATHS")]
    pub paths: Vec<String>,
    /// Machine-readable output (schema 1).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a model file changed (like `git diff --exit-code`).
    #[arg(long)]
    pub exit_code: bool,
    /// Also compare weight values, for files whose two sides are on this machine (blobs, the
    /// work tree, LFS objects in the local store; nothing is downloaded).
    #[arg(long)]
    pub values: bool,
    /// With --values: the model the GGUF files were converted from (a safetensors or PyTorch
    /// file, relative to the current directory); each changed GGUF in its directory is also
    /// compared with it as a conversion (`diff --values SOURCE GGUF`).
    #[arg(long, value_name = "PATH", requires = "values")]
    pub reference: Option<String>,
    /// List every changed tensor on lines of its own, rather than changes that repeat as one
    /// line ("103 tensors: f32 -> f16").
    #[arg(long)]
    pub all: bool,
    /// Only a few lines per file: changes counted by kind, each side's bytes and parameters.
    #[arg(long, conflicts_with_all = ["json", "values", "name_only", "all"])]
    pub stat: bool,
    /// Only `PATH<TAB>TENSOR` for each tensor added, removed or changed.
    #[arg(long, conflicts_with_all = ["json", "values", "all"])]
    pub name_only: bool,
}

impl GitDiffArgs {
    /// The text form the flags chose.
    fn form(&self) -> DiffForm {
        DiffForm::from_flags(self.stat, self.name_only, self.all)
    }
}

pub(super) fn run(args: GitArgs, color: ColorChoice, remote: &RemoteOptions) -> Result<Exit> {
    let scope = |global: bool| {
        if global {
            Scope::Global
        } else {
            Scope::Repository
        }
    };
    match args.command {
        GitCommand::Install(args) => {
            let mode = match (args.textconv, args.external) {
                (true, false) => Mode::Textconv,
                (false, true) => Mode::External,
                _ => Mode::Both,
            };
            Ok(print(&crate::git::install_drivers(
                &cwd()?,
                scope(args.global),
                mode,
                args.tensor_hashes,
            )?)?)
        }
        GitCommand::Uninstall(args) => Ok(print(&crate::git::uninstall_drivers(
            &cwd()?,
            scope(args.global),
        )?)?),
        GitCommand::Diff(args) => {
            let options = crate::git::GitDiffOptions {
                revs: &args.revs,
                paths: &args.paths,
                format: Format::json_if(args.json),
                color: color.enabled(std::io::IsTerminal::is_terminal(&std::io::stdout())),
                values: args.values,
                reference: args.reference.as_deref(),
                remote,
                form: args.form(),
            };
            // Written as it is made; a reader that stops reading (a closed pipe) ends nothing.
            let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
            let mut closed = false;
            let mut write = |text: &str| {
                use std::io::Write;
                if closed {
                    return Ok(());
                }
                match stdout.write_all(text.as_bytes()) {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        closed = true;
                        Ok(())
                    }
                    other => other,
                }
            };
            let changed = crate::git::git_diff(&cwd()?, &options, &mut write)?;
            std::io::Write::flush(&mut stdout)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::BrokenPipe => Ok(()),
                    _ => Err(e),
                })
                .map_err(|e| crate::error::Error::io("<stdout>", e))?;
            Ok(Exit::found_if(args.exit_code && changed))
        }
    }
}
