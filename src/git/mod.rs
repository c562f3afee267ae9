//! Git integration: textconv, external diff driver, installer, and the gix fast path.
//!
//! git hands textconv and external diff drivers the *smudged* content of a side, so for an LFS
//! file it first writes the whole model to a temporary file. The fast path ([`repo`]) avoids
//! that: it reads each side's blob with gix ([`objects`]), lists what changed with one walk
//! ([`changes`]), follows LFS pointers ([`lfs`]) to the local object store and parses only the
//! header bytes ([`side`]). [`resolve`] reads `REV:path` arguments for the input seam.
//! Every git process this tool runs is started from this module ([`process`]).

mod bytes;
mod changes;
mod compared;
mod config;
mod data_hashes;
mod delta_store;
mod driver;
mod error;
mod install;
mod lfs;
mod lfs_server;
mod listing;
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
pub(crate) use changes::{
    FileChange, PathFilter, Status, changed_files, changed_model_files, head_entries,
};
pub(crate) use compared::{ComparedFile, Counts, compare_each, counts_text, short_hash};
pub(crate) use delta_store::{restore as restore_delta, store as store_delta};
pub(crate) use driver::run as run_diff_driver;
pub(crate) use error::GitError;
pub(crate) use install::{Mode, Scope, install as install_drivers, uninstall as uninstall_drivers};
pub use lfs::Pointer;
pub(crate) use lfs::{MAX_POINTER_SIZE, present_object};
pub(crate) use listing::{TreeFile, blob_pointer, tree_files, unchanged_lfs_files};
pub(crate) use models::{Snapshot, open_at, open_directory, open_in};
pub(crate) use objects::{
    Entry, blob_bytes, index_entry, index_mode_entry, link_target, object_error, open_repo,
    tree_entry,
};
pub(crate) use process::{
    blob_prefix, blob_tail, hooks_dir, lfs_by_attributes, output as git_output,
};
pub(crate) use reader::{RemoteOptions, SideReader, read_pointer_file};
pub(crate) use report::{GitDiffOptions, git_diff, indented as indented_json};
pub(crate) use resolve::RevPath;
pub(crate) use side::ModelSide;
pub(crate) use textconv::{TextconvOptions, render_file as render_textconv};
