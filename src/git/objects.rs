//! Reading the object database and the index with gix: open the repository, resolve
//! revisions, look up blobs by `REV:path` or index stage, and read blob content (whole, or a
//! bounded prefix of a large one).

use std::path::Path;

use gix::ObjectId;

use super::GitError;

type Result<T, E = GitError> = std::result::Result<T, E>;

/// Opens the repository git would use from `dir`: `GIT_DIR` (set by git for the programs it
/// runs) if present, else discovery upwards from `dir`.
pub fn open_repo(dir: &Path) -> Result<gix::Repository> {
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
pub fn resolve_tree(repo: &gix::Repository, rev: &str) -> Result<ObjectId> {
    let object = repo
        .rev_parse_single(rev)
        .map_err(|e| rev_error(rev, e))?
        .object()
        .map_err(|e| rev_error(rev, e))?;
    let tree = object.peel_to_tree().map_err(|e| rev_error(rev, e))?;
    Ok(tree.id)
}

/// The blob id and mode of `path` (relative to the repository root, `/`-separated) in `rev`,
/// or None if `rev` has no such file.
pub fn blob_id(repo: &gix::Repository, rev: &str, path: &str) -> Result<Option<ObjectId>> {
    let tree_id = resolve_tree(repo, rev)?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(|e| object_error(format!("{rev}^{{tree}}"), e))?;
    let entry = tree
        .lookup_entry_by_path(Path::new(path))
        .map_err(|e| object_error(format!("{rev}:{path}"), e))?;
    Ok(entry.filter(|e| e.mode().is_blob()).map(|e| e.object_id()))
}

/// The content of the blob `id`.
pub fn blob_bytes(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>> {
    let mut blob = repo.find_blob(id).map_err(|e| object_error(id, e))?;
    Ok(blob.take_data())
}

/// The content of `path` in `rev` (git's blob: an LFS pointer for LFS-tracked files), or None
/// if `rev` has no such file.
pub fn read_blob(repo: &gix::Repository, rev: &str, path: &str) -> Result<Option<Vec<u8>>> {
    match blob_id(repo, rev, path)? {
        Some(id) => blob_bytes(repo, id).map(Some),
        None => Ok(None),
    }
}

/// The index's stage-0 entry of `path`: its blob id.
pub fn staged_id(repo: &gix::Repository, path: &str) -> Result<Option<ObjectId>> {
    staged_id_at(repo, path, gix::index::entry::Stage::Unconflicted)
}

/// The blob id of `path` at `stage` of the index (1 base, 2 ours, 3 theirs during a merge).
pub fn staged_id_at(
    repo: &gix::Repository,
    path: &str,
    stage: gix::index::entry::Stage,
) -> Result<Option<ObjectId>> {
    let index = open_index(repo)?;
    Ok(index
        .entry_by_path_and_stage(path.into(), stage)
        .filter(|e| is_file_mode(e.mode))
        .map(|e| e.id))
}

/// The content of `path` as staged in the index (stage 0), or None if it is not staged.
pub fn staged_blob(repo: &gix::Repository, path: &str) -> Result<Option<Vec<u8>>> {
    match staged_id(repo, path)? {
        Some(id) => blob_bytes(repo, id).map(Some),
        None => Ok(None),
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
