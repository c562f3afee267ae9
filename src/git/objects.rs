//! Reading the object database and the index with gix: open the repository, resolve
//! revisions, look up what a path is in a tree or the index ([`Entry`]: a file's blob, a
//! symbolic link, a directory) by `REV:path` or index stage, and read blob content (whole, or
//! a bounded prefix of a large one).

use std::path::Path;

use gix::ObjectId;

use super::error::GitError;

type Result<T, E = GitError> = std::result::Result<T, E>;

/// Opens the repository git would use from `dir`: `GIT_DIR` (set by git for the programs it
/// runs) if present, else discovery upwards from `dir`.
pub(crate) fn open_repo(dir: &Path) -> Result<gix::Repository> {
    gix::discover_with_environment_overrides(dir).map_err(|e| GitError::Open {
        dir: dir.to_owned(),
        message: e.to_string(),
    })
}

pub(crate) fn rev_error(rev: &str, e: impl ToString) -> GitError {
    GitError::Revision {
        rev: rev.to_owned(),
        message: e.to_string(),
    }
}

pub(crate) fn object_error(what: impl ToString, e: impl ToString) -> GitError {
    GitError::Object {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// The tree of `rev` (a commit, tag or tree).
pub(super) fn resolve_tree(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    let object = repo
        .rev_parse_single(rev)
        .map_err(|e| rev_error(rev, e))?
        .object()
        .map_err(|e| rev_error(rev, e))?;
    let tree = object.peel_to_tree().map_err(|e| rev_error(rev, e))?;
    Ok(tree.id)
}

/// What a path names in a tree or in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A regular (or executable) file: its blob.
    File(ObjectId),
    /// A symbolic link: the blob holding its target (see [`link_target`]).
    Link(ObjectId),
    /// A directory.
    Dir,
    /// A submodule (a commit of another repository).
    Submodule,
}

impl Entry {
    /// The file's blob; None for anything but a regular file.
    pub(crate) fn file(self) -> Option<ObjectId> {
        match self {
            Entry::File(id) => Some(id),
            _ => None,
        }
    }

    /// What it is, for messages: "a symbolic link", "a directory", ...
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Entry::File(_) => "a file",
            Entry::Link(_) => "a symbolic link",
            Entry::Dir => "a directory",
            Entry::Submodule => "a submodule",
        }
    }
}

/// What `path` (relative to the repository root, `/`-separated) is in `rev`, or None if `rev`
/// has nothing there.
pub(crate) fn tree_entry(repo: &gix::Repository, rev: &str, path: &str) -> Result<Option<Entry>> {
    let tree_id = resolve_tree(repo, rev)?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(|e| object_error(format!("{rev}^{{tree}}"), e))?;
    let entry = tree
        .lookup_entry_by_path(Path::new(path))
        .map_err(|e| object_error(format!("{rev}:{path}"), e))?;
    Ok(entry.map(|e| {
        let mode = e.mode();
        if mode.is_link() {
            Entry::Link(e.object_id())
        } else if mode.is_tree() {
            Entry::Dir
        } else if mode.is_commit() {
            Entry::Submodule
        } else {
            Entry::File(e.object_id())
        }
    }))
}

/// The entries directly inside the directory `dir` (relative to the repository root,
/// `/`-separated, "" for the root) in `rev`, by name; None if `rev` has no directory there.
pub(super) fn dir_entries(
    repo: &gix::Repository,
    rev: &str,
    dir: &str,
) -> Result<Option<Vec<(String, Entry)>>> {
    let root = resolve_tree(repo, rev)?;
    let tree_id = if dir.is_empty() {
        root
    } else {
        match tree_entry(repo, rev, dir)? {
            Some(Entry::Dir) => {
                let tree = repo
                    .find_tree(root)
                    .map_err(|e| object_error(format!("{rev}^{{tree}}"), e))?;
                let entry = tree
                    .lookup_entry_by_path(Path::new(dir))
                    .map_err(|e| object_error(format!("{rev}:{dir}"), e))?
                    .expect("tree_entry found it");
                entry.object_id()
            }
            _ => return Ok(None),
        }
    };
    let tree = repo
        .find_tree(tree_id)
        .map_err(|e| object_error(format!("{rev}:{dir}"), e))?;
    let mut out = Vec::new();
    for entry in tree.iter() {
        let entry = entry.map_err(|e| object_error(format!("{rev}:{dir}"), e))?;
        let Ok(name) = std::str::from_utf8(entry.filename()) else {
            continue;
        };
        let mode = entry.mode();
        let id = entry.object_id();
        let kind = if mode.is_link() {
            Entry::Link(id)
        } else if mode.is_tree() {
            Entry::Dir
        } else if mode.is_commit() {
            Entry::Submodule
        } else {
            Entry::File(id)
        };
        out.push((name.to_owned(), kind));
    }
    Ok(Some(out))
}

/// The target of the symbolic link whose blob is `id` (git stores a link as a blob holding its
/// target path), as text.
pub(crate) fn link_target(repo: &gix::Repository, id: ObjectId) -> Result<String> {
    Ok(String::from_utf8_lossy(&blob_bytes(repo, id)?).into_owned())
}

/// The content of the blob `id`.
pub(crate) fn blob_bytes(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    let mut blob = repo.find_blob(id).map_err(|e| object_error(id, e))?;
    Ok(blob.take_data())
}

/// What `path` is at `stage` of the index, or None if the index has nothing there.
pub(crate) fn index_entry(
    repo: &gix::Repository,
    path: &str,
    stage: gix::index::entry::Stage,
) -> Result<Option<Entry>> {
    let index = open_index(repo)?;
    Ok(index
        .entry_by_path_and_stage(path.into(), stage)
        .map(|e| index_mode_entry(e.mode, e.id)))
}

/// An index entry's mode and id as an [`Entry`].
pub(crate) fn index_mode_entry(mode: gix::index::entry::Mode, id: ObjectId) -> Entry {
    use gix::index::entry::Mode;
    if is_file_mode(mode) {
        Entry::File(id)
    } else if mode == Mode::SYMLINK {
        Entry::Link(id)
    } else if mode == Mode::COMMIT {
        Entry::Submodule
    } else {
        Entry::Dir
    }
}

pub(crate) fn open_index(repo: &gix::Repository) -> Result<gix::worktree::Index> {
    repo.index_or_empty().map_err(|e| GitError::Index {
        path: repo.index_path(),
        message: e.to_string(),
    })
}

pub(crate) fn is_file_mode(mode: gix::index::entry::Mode) -> bool {
    mode == gix::index::entry::Mode::FILE || mode == gix::index::entry::Mode::FILE_EXECUTABLE
}
