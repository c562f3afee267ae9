//! What a signature over a model directory needs from git: every entry of a directory in a
//! commit's tree (for `verify --rev`), and which work-tree files are LFS files git itself
//! would call unchanged since they were added, by the index's stat data (for `sign`, so a
//! smudged model is not read to learn what its pointers already say).

use std::collections::HashMap;
use std::path::Path;

use gix::ObjectId;

use super::error::GitError;
use super::lfs::{MAX_POINTER_SIZE, Pointer};
use super::objects::{Entry, blob_bytes, object_error, open_index, resolve_tree};

type Result<T, E = GitError> = std::result::Result<T, E>;

/// One entry under a directory of a tree: its path below that directory (`/`-separated) and
/// what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeFile {
    pub path: String,
    pub entry: Entry,
}

/// Every file, link and submodule under `dir` (relative to the repository root, "" for the
/// root) in `rev`, depth first; None when `rev` has no directory there. Names that are not
/// UTF-8 are an error (a signature names files as text).
pub(crate) fn tree_files(
    repo: &gix::Repository,
    rev: &str,
    dir: &str,
) -> Result<Option<Vec<TreeFile>>> {
    let root = resolve_tree(repo, rev)?;
    let start = if dir.is_empty() {
        root
    } else {
        let tree = repo
            .find_tree(root)
            .map_err(|e| object_error(format!("{rev}^{{tree}}"), e))?;
        match tree
            .lookup_entry_by_path(Path::new(dir))
            .map_err(|e| object_error(format!("{rev}:{dir}"), e))?
        {
            Some(e) if e.mode().is_tree() => e.object_id(),
            _ => return Ok(None),
        }
    };
    let mut out = Vec::new();
    let mut pending: Vec<(String, ObjectId)> = vec![(String::new(), start)];
    while let Some((prefix, id)) = pending.pop() {
        let tree = repo
            .find_tree(id)
            .map_err(|e| object_error(format!("{rev}:{dir}/{prefix}"), e))?;
        for entry in tree.iter() {
            let entry = entry.map_err(|e| object_error(format!("{rev}:{dir}/{prefix}"), e))?;
            let name = std::str::from_utf8(entry.filename()).map_err(|_| {
                object_error(
                    format!("{rev}:{dir}/{prefix}"),
                    "a file name that is not UTF-8",
                )
            })?;
            let path = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            let mode = entry.mode();
            let id = entry.object_id();
            if mode.is_tree() {
                pending.push((path, id));
                continue;
            }
            let entry = if mode.is_link() {
                Entry::Link(id)
            } else if mode.is_commit() {
                Entry::Submodule
            } else {
                Entry::File(id)
            };
            out.push(TreeFile { path, entry });
        }
    }
    Ok(Some(out))
}

/// The LFS pointer a blob holds, if it is one (small blobs only; a larger one is read no
/// further than its header).
pub(crate) fn blob_pointer(repo: &gix::Repository, id: ObjectId) -> Result<Option<Pointer>> {
    let header = repo.find_header(id).map_err(|e| object_error(id, e))?;
    if header.size() >= MAX_POINTER_SIZE as u64 {
        return Ok(None);
    }
    Ok(Pointer::parse(&blob_bytes(repo, id)?))
}

/// The work-tree files under `dir` (relative to the repository root) that git would call
/// unchanged since they were added and whose blob in the index is an LFS pointer, keyed by
/// their path below `dir`: the file's stat data (mtime, ctime, size, inode, device, owner, as
/// `core.trustctime`, `core.checkStat` set it) equals the index's, the entry is not racy (it
/// was modified before the index was written), and the file's length is the pointer's size.
/// This is the check `git status` relies on; a file that fails it is read and hashed.
pub(crate) fn unchanged_lfs_files(
    repo: &gix::Repository,
    dir: &str,
) -> Result<HashMap<String, Pointer>> {
    let Some(workdir) = repo.workdir() else {
        return Ok(HashMap::new());
    };
    let index = open_index(repo)?;
    let options = repo.stat_options().unwrap_or_default();
    let timestamp = index.timestamp();
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut out = HashMap::new();
    for entry in index.entries() {
        let path = entry.path(&index);
        let Ok(path) = std::str::from_utf8(path) else {
            continue;
        };
        let Some(below) = path.strip_prefix(prefix.as_str()) else {
            continue;
        };
        if !super::objects::is_file_mode(entry.mode)
            || entry.stage_raw() != 0
            || entry.stat.is_racy(timestamp, options)
        {
            continue;
        }
        let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&workdir.join(path)) else {
            continue;
        };
        let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) else {
            continue;
        };
        if !stat.matches(&entry.stat, options) {
            continue;
        }
        if let Some(pointer) = blob_pointer(repo, entry.id)?
            && meta.len() == pointer.size
        {
            out.insert(below.to_owned(), pointer);
        }
    }
    Ok(out)
}
