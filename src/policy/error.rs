//! The policy adapter's errors. Errors of the core and of git keep their structure inside
//! (`#[from]`); every message is phrased for the user and names the file it is about.

use std::path::PathBuf;

use crate::escape::{shown, shown_path};

/// Why `check`, `policy` or `hook` could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy file cannot be read.
    #[error("{}: {source}", shown(.path))]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A mistake in the policy file, located by line and column.
    #[error("{}:{line}:{column}: {message}\n{snippet}", shown(.path))]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
        snippet: String,
    },
    /// A mistake in the policy file that TOML does not locate.
    #[error("{}: {message}", shown(.path))]
    InvalidNoSpan { path: String, message: String },
    /// The default policy file does not exist.
    #[error(
        "no policy file: {} does not exist (create it, see docs/policy.md, or pass --policy \
         FILE)",
        crate::escape::shown(.shown)
    )]
    NoPolicyFile { shown: String },
    /// A committed policy file that is not text.
    #[error("{}: not UTF-8 text", crate::escape::shown(.shown))]
    NotUtf8 { shown: String },
    /// `policy pin` cannot edit the policy file.
    #[error("{}: {source}", shown(.path))]
    Edit {
        path: String,
        #[source]
        source: toml_edit::TomlError,
    },
    #[error("{}: `rules` must be an array of tables", shown(.path))]
    RulesNotTables { path: String },
    /// `policy pin` without paths, and no path pinned yet.
    #[error("{} pins no path yet: name the model files to pin", crate::escape::shown(.shown))]
    NothingPinned { shown: String },
    #[error("no GGUF, safetensors or PyTorch file to pin")]
    NoModelToPin,
    /// One file cannot be judged (or pinned); the path is shown escaped.
    #[error("{}: {reason}", shown(.path))]
    File { path: String, reason: FileReason },
    #[error("{}: not inside a git repository", shown_path(.dir))]
    NoRepository { dir: PathBuf },
    /// A command-line path outside the directory the policy's globs are relative to.
    #[error(
        "{}: outside the repository ({})",
        shown_path(.path),
        shown_path(.root)
    )]
    OutsideRoot { path: PathBuf, root: PathBuf },
    #[error("{}: path is not valid UTF-8", shown_path(.0))]
    NotUtf8Path(PathBuf),
    /// `check --staged PATH` for a path the index does not have.
    #[error("{}: not staged (no such file in the index)", shown_path(.0))]
    NotStaged(PathBuf),
    /// `hook install --chain` when a chained hook is there already.
    #[error(
        "{}: cannot chain the existing pre-commit hook, {} already exists",
        shown_path(.hook),
        shown_path(.chained)
    )]
    ChainedHookExists { hook: PathBuf, chained: PathBuf },
    /// `hook install` over a hook that is not ours, without `--chain` or `--force`.
    #[error(
        "{}: a pre-commit hook that is not weight-inspect's already exists; rerun with --chain \
         to keep it (it will run first) or --force to replace it",
        shown_path(.0)
    )]
    ForeignHook(PathBuf),
    /// `hook uninstall` of a hook that is not ours.
    #[error(
        "{}: this pre-commit hook is not weight-inspect's; left in place",
        shown_path(.0)
    )]
    ForeignHookKept(PathBuf),
    /// The key, certificates or trusted root a `signature` rule names cannot be read.
    #[error("{}, rule {rule}: `signature`: {message}", shown(.policy))]
    SignatureTrust {
        policy: String,
        rule: usize,
        message: String,
    },
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
}

/// Why one file cannot be judged; [`PolicyError::File`] puts its path before it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileReason {
    /// `policy pin` of a file that is not a model.
    #[error("not a readable GGUF, safetensors or PyTorch file: {found}")]
    NotAModel { found: String },
    /// `require_lfs` on a work-tree file outside a repository.
    #[error("cannot evaluate require_lfs outside a git repository")]
    LfsOutsideRepository,
    /// The structure is needed, and the LFS object is not in the local store.
    #[error(
        "the LFS object sha256:{oid} ({size} bytes) is not in the local LFS store; run \
         `git lfs fetch` (or check out with LFS) so its structure can be checked"
    )]
    LfsObjectAbsent { oid: String, size: u64 },
    /// The LFS object is not in the local store and its header could not be read from the
    /// LFS server either.
    #[error(
        "the LFS object sha256:{oid} ({size} bytes) is not in the local LFS store, and its \
         header could not be read from the LFS server: {why}"
    )]
    LfsObjectUnreadable { oid: String, size: u64, why: String },
    /// A symbolic link whose target lies outside the repository: not followed.
    #[error(
        "a symbolic link to {}, which leads out of the repository; links are followed only \
         to files inside it",
        shown(.target)
    )]
    LinkLeavesRepository { target: String },
    /// A symbolic link that leads to no regular file inside the repository: not followed.
    #[error(
        "a symbolic link to {}, which leads to {found}, not a regular file",
        shown(.target)
    )]
    LinkToNonFile { target: String, found: String },
    /// A named or listed path that is not a regular file (a FIFO, a device, a socket): not
    /// read, since reading it could block or never end.
    #[error("{found}, not a regular file; not read")]
    NotRegularFile { found: &'static str },
    /// `require_lfs` in a rule for a model directory: how git stores a file is a property of
    /// each file.
    #[error(
        "require_lfs applies to files, not to a model directory; set it in a rule for the \
         directory's files (DIR/**)"
    )]
    LfsOfModelDirectory,
    /// A multi-file model whose files could not be read as one model.
    #[error("{why}")]
    Unassembled { why: String },
    /// The weights a `max_rel_l2` check compares could not be read.
    #[error("its weights could not be read: {why}")]
    WeightsUnreadable { why: String },
}

impl PolicyError {
    pub(crate) fn file(path: &str, reason: FileReason) -> Self {
        PolicyError::File {
            path: path.to_owned(),
            reason,
        }
    }
}
