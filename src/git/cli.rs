//! Arguments of the git commands (`textconv`, `git-diff-driver`, `git ...`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::GitError;
use super::install::{Mode, Scope};
use super::repo::{self, ModelSide};
use crate::cli::{Context, write_stdout};
use crate::error::{Error, Result};

/// Render a model file (or an LFS pointer to one) as stable lines for `diff.<driver>.textconv`.
#[derive(Debug, clap::Args)]
pub struct TextconvArgs {
    /// The file git hands over (a temporary copy of one side, or the work-tree file).
    pub file: PathBuf,
}

impl TextconvArgs {
    pub fn run(self, _ctx: &Context) -> Result<ExitCode> {
        // Exit 0 whatever happens: a failing textconv makes the whole `git diff` fail.
        let _ = write_stdout(super::textconv::render_file(&self.file).as_bytes());
        Ok(ExitCode::SUCCESS)
    }
}

/// git's external diff protocol: `path old-file old-hex old-mode new-file new-hex new-mode`.
#[derive(Debug, clap::Args)]
pub struct DriverArgs {
    /// The 7 (9 for a rename, 1 for an unmerged path) arguments git passes.
    #[arg(num_args = 0.., allow_hyphen_values = true)]
    pub args: Vec<std::ffi::OsString>,
}

impl DriverArgs {
    pub fn run(self, ctx: &Context) -> Result<ExitCode> {
        let color = super::driver::color_wanted(ctx);
        let _ = write_stdout(super::driver::run(&self.args, color).as_bytes());
        Ok(ExitCode::SUCCESS)
    }
}

/// `weight-inspect git install|uninstall|diff`.
#[derive(Debug, clap::Args)]
pub struct GitArgs {
    #[command(subcommand)]
    pub command: GitCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum GitCommand {
    /// Make weight-inspect git's diff driver for *.gguf and *.safetensors (works with LFS).
    Install(InstallArgs),
    /// Remove exactly what `install` added.
    Uninstall(UninstallArgs),
    /// Structural diff of the model files changed between two commits, or between a commit
    /// (default HEAD) and the work tree. Reads blobs with gix and only the header of LFS
    /// objects from the local store: nothing is smudged.
    Diff(GitDiffArgs),
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Configure ~/.gitconfig and the global attributes file instead of this repository.
    #[arg(long)]
    pub global: bool,
    /// Only the textconv driver (line diffs in `git diff`, `git log -p`, `git show`).
    #[arg(long, conflicts_with = "external")]
    pub textconv: bool,
    /// Only the external diff driver (`git diff`; `git log`/`git show` with --ext-diff).
    #[arg(long)]
    pub external: bool,
}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// Undo a `git install --global`.
    #[arg(long)]
    pub global: bool,
}

#[derive(Debug, clap::Args)]
pub struct GitDiffArgs {
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
}

impl GitArgs {
    pub fn run(self, ctx: &Context) -> Result<ExitCode> {
        match self.command {
            GitCommand::Install(args) => {
                let mode = match (args.textconv, args.external) {
                    (true, false) => Mode::Textconv,
                    (false, true) => Mode::External,
                    _ => Mode::Both,
                };
                let scope = if args.global {
                    Scope::Global
                } else {
                    Scope::Repository
                };
                let report = super::install::install(&cwd()?, scope, mode)?;
                write_stdout(report.as_bytes())?;
                Ok(ExitCode::SUCCESS)
            }
            GitCommand::Uninstall(args) => {
                let scope = if args.global {
                    Scope::Global
                } else {
                    Scope::Repository
                };
                let report = super::install::uninstall(&cwd()?, scope)?;
                write_stdout(report.as_bytes())?;
                Ok(ExitCode::SUCCESS)
            }
            GitCommand::Diff(args) => git_diff(args, ctx),
        }
    }
}

fn cwd() -> Result<PathBuf> {
    std::env::current_dir().map_err(|e| Error::io(".", e))
}

#[derive(Serialize)]
struct DiffReport {
    schema: u32,
    base: String,
    /// None: the work tree.
    head: Option<String>,
    files: Vec<FileReport>,
}

#[derive(Serialize)]
struct FileReport {
    status: &'static str,
    old_path: Option<String>,
    new_path: Option<String>,
    old: Option<SideReport>,
    new: Option<SideReport>,
    /// The core's structural diff (schema 1) when both sides are models.
    diff: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct SideReport {
    /// "model", "absent" (LFS object not present locally), "not-model" or "invalid".
    kind: &'static str,
    format: Option<&'static str>,
    structural_hash: Option<String>,
    lfs_oid: Option<String>,
    size: Option<u64>,
    note: Option<String>,
}

impl SideReport {
    fn of(side: &ModelSide) -> SideReport {
        let (kind, size) = match side {
            ModelSide::Model { artifact, .. } => ("model", Some(artifact.layout.file_size)),
            ModelSide::Absent { pointer } => ("absent", Some(pointer.size)),
            ModelSide::NotModel { size, .. } => ("not-model", Some(*size)),
            ModelSide::Invalid { size, .. } => ("invalid", Some(*size)),
        };
        let artifact = side.artifact();
        SideReport {
            kind,
            format: artifact.map(|a| a.format.name()),
            structural_hash: artifact.map(crate::identity::structural_hash),
            lfs_oid: side.pointer().map(|p| p.oid.clone()),
            size: side.pointer().map(|p| p.size).or(size),
            note: side.note(),
        }
    }
}

fn git_diff(args: GitDiffArgs, ctx: &Context) -> Result<ExitCode> {
    let cwd = cwd()?;
    let repo = repo::open_repo(&cwd)?;
    let (base, head) = match args.revs.as_slice() {
        [] => ("HEAD".to_owned(), None),
        [base] => (base.clone(), None),
        [base, head] => (base.clone(), Some(head.clone())),
        _ => unreachable!("clap limits revisions to two"),
    };
    let specs = pathspecs_from_cwd(&repo, &cwd, &args.paths);
    let filter = repo::PathFilter::new(&specs)?;
    let changes = repo::changed_model_files_filtered(&repo, &base, head.as_deref(), &filter)?;
    let head_label = head.clone().unwrap_or_else(|| "worktree".to_owned());
    let color = ctx.color_enabled(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let mut text = String::new();
    let mut files = Vec::new();
    for change in &changes {
        let old = change.old_side(&repo, &base)?;
        let new = change.new_side(&repo, &head_label)?;
        let blobs_differ = change.old_id.is_none() || change.new_id != change.old_id;
        if args.json {
            let diff = match (
                old.as_ref().and_then(ModelSide::artifact),
                new.as_ref().and_then(ModelSide::artifact),
            ) {
                (Some(a), Some(b)) => {
                    let d = crate::diff::StructuralDiff::between(a, b);
                    serde_json::from_str(&crate::render::json::diff(&d)).ok()
                }
                _ => None,
            };
            files.push(FileReport {
                status: change.status.name(),
                old_path: change.old_path.clone(),
                new_path: change.new_path.clone(),
                old: old.as_ref().map(SideReport::of),
                new: new.as_ref().map(SideReport::of),
                diff,
            });
        } else {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&super::driver::render_change(
                color,
                change.old_path.as_deref(),
                change.new_path.as_deref(),
                old.as_ref(),
                new.as_ref(),
                blobs_differ,
            ));
        }
    }
    if args.json {
        let report = DiffReport {
            schema: crate::SCHEMA_VERSION,
            base,
            head,
            files,
        };
        let mut json = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::Other(format!("cannot serialize the report: {e}")))?;
        json.push('\n');
        write_stdout(json.as_bytes())?;
    } else {
        write_stdout(text.as_bytes())?;
    }
    Ok(if args.exit_code && !changes.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// git's pathspecs are relative to the current directory; ours to the work-tree root.
fn pathspecs_from_cwd(repo: &gix::Repository, cwd: &Path, specs: &[String]) -> Vec<String> {
    let prefix = repo
        .workdir()
        .and_then(|root| {
            let root = root.canonicalize().ok()?;
            let cwd = cwd.canonicalize().ok()?;
            cwd.strip_prefix(&root).ok().map(Path::to_owned)
        })
        .unwrap_or_default();
    specs
        .iter()
        .map(|spec| {
            let mut parts: Vec<String> = prefix
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            for part in spec.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        parts.pop();
                    }
                    other => parts.push(other.to_owned()),
                }
            }
            parts.join("/")
        })
        .collect()
}

/// Reads `REV:path` through git, for `diff`/`inspect`/`id` arguments that are not files.
/// Returns None when `spec` is not of that form (an existing file, or no `:`).
///
/// `:path` reads the index. Paths are relative to the repository root unless they start with
/// `./` or `../` (relative to the current directory, as in git). LFS pointers are followed to
/// the local object store; only the header of the model is read.
pub fn read_rev_path(spec: &str) -> Option<Result<crate::Artifact>> {
    if Path::new(spec).exists() {
        return None;
    }
    let (rev, path) = spec.split_once(':')?;
    Some(read_rev_path_inner(spec, rev, path))
}

fn read_rev_path_inner(spec: &str, rev: &str, path: &str) -> Result<crate::Artifact> {
    let cwd = cwd()?;
    let repo = repo::open_repo(&cwd)?;
    // `:N:path` names an index stage (git's syntax for the sides of a conflict).
    let (stage, path) = match (rev, path.split_once(':')) {
        ("", Some((n @ ("0" | "1" | "2" | "3"), rest))) => (n, rest),
        _ => ("0", path),
    };
    let path = if path.starts_with("./") || path.starts_with("../") {
        pathspecs_from_cwd(&repo, &cwd, &[path.to_owned()]).remove(0)
    } else {
        path.trim_start_matches('/').to_owned()
    };
    let bytes = if rev.is_empty() {
        use gix::index::entry::Stage;
        let stage = match stage {
            "1" => Stage::Base,
            "2" => Stage::Ours,
            "3" => Stage::Theirs,
            _ => Stage::Unconflicted,
        };
        match repo::staged_id_at(&repo, &path, stage)? {
            Some(id) => Some(repo::blob_bytes(&repo, id)?),
            None => None,
        }
    } else {
        repo::read_blob(&repo, rev, &path)?
    };
    let Some(bytes) = bytes else {
        let place = if rev.is_empty() { "the index" } else { rev };
        return Err(GitError::Usage(format!("{spec}: {path} does not exist in {place}")).into());
    };
    match repo::model_artifact_from_blob(&repo, &bytes, spec) {
        ModelSide::Model { artifact, .. } => Ok(*artifact),
        ModelSide::Invalid { error, .. } => Err(Error::Other(error)),
        other => Err(Error::Other(format!(
            "{spec}: {}",
            other.note().unwrap_or_default()
        ))),
    }
}

/// Reads a work-tree file that is an LFS pointer (a checkout with `GIT_LFS_SKIP_SMUDGE=1`) as
/// the model it points to, from the local LFS store. None when `path` is not a pointer file.
/// For `crate::read::load`, so that `inspect`/`diff` accept such files.
pub fn read_lfs_pointer_file(path: &Path) -> Option<Result<crate::Artifact>> {
    repo::read_pointer_file(path)?;
    let label = path.display().to_string();
    Some(match repo::model_side_of_file(path) {
        ModelSide::Model { artifact, .. } => Ok(*artifact),
        ModelSide::Invalid { error, .. } => Err(Error::Other(error)),
        other => Err(Error::Other(format!(
            "{label}: {}",
            other.note().unwrap_or_default()
        ))),
    })
}
