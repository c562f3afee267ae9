//! Git integration: textconv, external diff driver, installer, and the gix fast path.
//!
//! git hands textconv and external diff drivers the *smudged* content of a side, so for an LFS
//! file it first writes the whole model to a temporary file. The fast path ([`repo`]) avoids
//! that: it reads each side's blob with gix ([`objects`]), lists what changed with one walk
//! ([`changes`]), follows LFS pointers ([`lfs`]) to the local object store and parses only the
//! header bytes ([`side`]). [`resolve`] reads `REV:path` arguments for the input seam.
//! Every git process this tool runs is started from this module ([`process`]).

mod changes;
mod compared;
mod config;
mod driver;
mod install;
mod lfs;
mod lfs_server;
mod models;
mod objects;
mod process;
mod reader;
mod report;
mod resolve;
mod side;
mod textconv;
mod values;

// The face of the git adapter: what the other adapters and the command line use.
#[cfg(test)]
pub(crate) use changes::FileChange;
pub(crate) use changes::{
    HistoryFile, PathFilter, Status, changed_files, changed_model_files, files_in_history,
    head_entries,
};
pub(crate) use compared::{ComparedFile, Counts, FileJson, compare, counts_text, short_hash};
pub(crate) use driver::run as run_diff_driver;
pub(crate) use install::{Mode, Scope, install as install_drivers, uninstall as uninstall_drivers};
pub use lfs::Pointer;
pub(crate) use lfs::{MAX_POINTER_SIZE, present_object};
pub(crate) use models::{Snapshot, open_at, open_directory, open_in};
pub(crate) use objects::{
    Entry, blob_bytes, index_entry, index_mode_entry, link_target, object_error, open_repo,
    tree_entry,
};
pub(crate) use process::{blob_prefix, hooks_dir, lfs_by_attributes, output as git_output};
pub(crate) use reader::{RemoteOptions, SideReader, read_pointer_file};
pub(crate) use report::{GitDiffOptions, git_diff};
pub(crate) use resolve::RevPath;
pub(crate) use side::ModelSide;
pub(crate) use textconv::render_file as render_textconv;

use std::path::PathBuf;

use crate::escape::{escape_name, quoted, shown_path, terminal_safe};

/// `REV:path` names something that is not a file (`found`: "does not exist", "is a
/// directory", ...). `spec`, `path` and `place` are raw (shown escaped here); `detail` is
/// composed with its names shown escaped.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: {} {found} in {}{detail}",
    escape_name(.spec),
    escape_name(.path),
    escape_name(.place)
)]
pub struct NotAFile {
    pub spec: String,
    pub path: String,
    pub found: String,
    pub place: String,
    pub detail: String,
}

/// Errors of the git adapter, phrased for the user.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error(
        "{}: not inside a git repository ({})",
        shown_path(.dir),
        escape_name(.message)
    )]
    Open { dir: PathBuf, message: String },
    #[error(
        "{}: cannot resolve revision ({})",
        escape_name(.rev),
        escape_name(.message)
    )]
    Revision { rev: String, message: String },
    #[error(
        "{}: cannot read git object ({})",
        escape_name(.what),
        escape_name(.message)
    )]
    Object { what: String, message: String },
    #[error(
        "{}: cannot read the git index ({})",
        shown_path(.path),
        escape_name(.message)
    )]
    Index { path: PathBuf, message: String },
    #[error("{}: the repository has no work tree", shown_path(.0))]
    Bare(PathBuf),
    #[error("{}: {source}", shown_path(.path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {}` failed: {}", escape_name(.args), terminal_safe(.message))]
    Command { args: String, message: String },
    #[error("git diff takes at most two revisions")]
    TooManyRevisions,
    #[error("pathspec {}: {source}", quoted(.spec))]
    Pathspec {
        spec: String,
        #[source]
        source: globset::Error,
    },
    #[error(transparent)]
    NotAFile(Box<NotAFile>),
    #[error("neither HOME nor XDG_CONFIG_HOME is set: cannot locate the global attributes file")]
    NoHome,
    #[error("there is no remote `{}`", escape_name(.name))]
    NoRemote { name: String },
    #[error("cannot read the URL of remote `{}`", escape_name(.name))]
    RemoteUrl { name: String },
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// Reading a model (or a file) the repository led to.
    #[error(transparent)]
    Core(#[from] crate::error::Error),
}
