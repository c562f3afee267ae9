//! The one change walk: which files differ between two trees, or between a tree and the work
//! tree (through the index, like `git diff REV`), restricted by a path predicate, with exact
//! renames paired by blob id. `git diff`, `ci` and `delta store` all list files through it.
//!
//! Symbolic links are listed as changes too (a link named `m.gguf` is reported for what it
//! is, not passed over): each side says whether it is one; their blob holds the target.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::error::GitError;
use super::lfs::{self, Pointer};
use super::objects::{blob_bytes, is_file_mode, object_error, open_index, resolve_tree};

type Result<T, E = GitError> = std::result::Result<T, E>;

/// How a model file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Status {
    Added,
    Removed,
    Modified,
    /// An exact rename: same blob id under another path.
    Renamed,
}

impl Status {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Removed => "removed",
            Status::Modified => "modified",
            Status::Renamed => "renamed",
        }
    }
}

/// One changed model file. Paths are relative to the repository root, `/`-separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileChange {
    pub status: Status,
    pub old_path: Option<String>,
    pub new_path: Option<String>,
    pub old_id: Option<ObjectId>,
    /// The new blob; None for a removed file or when the new side is a modified work-tree file.
    pub new_id: Option<ObjectId>,
    /// The work-tree file holding the new side (comparisons against the work tree).
    pub new_worktree: Option<PathBuf>,
    /// Whether the old side is a symbolic link (its blob holds the target).
    pub old_link: bool,
    /// Whether the new side is a symbolic link (its blob, or the work-tree link, holds the
    /// target).
    pub new_link: bool,
}

impl FileChange {
    /// The path to show: the new path, or the old one for a removed file.
    pub(crate) fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }
}

/// Which paths to consider: everything, or git-style pathspecs (a path, a directory prefix, or
/// a glob), relative to the repository root.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathFilter {
    prefixes: Vec<String>,
    globs: Option<globset::GlobSet>,
    any: bool,
}

impl PathFilter {
    pub(crate) fn new(specs: &[String]) -> Result<Self> {
        let mut filter = PathFilter {
            any: specs.is_empty(),
            ..Default::default()
        };
        let mut globs = globset::GlobSetBuilder::new();
        let mut has_globs = false;
        for spec in specs {
            let spec = spec.trim_end_matches('/');
            if spec.is_empty() || spec == "." {
                filter.any = true;
            } else if spec.contains(['*', '?', '[']) {
                let glob = globset::GlobBuilder::new(spec)
                    .literal_separator(false)
                    .build()
                    .map_err(|source| GitError::Pathspec {
                        spec: spec.to_owned(),
                        source,
                    })?;
                globs.add(glob);
                has_globs = true;
            } else {
                filter.prefixes.push(spec.to_owned());
            }
        }
        if has_globs {
            filter.globs = Some(globs.build().map_err(|source| GitError::Pathspec {
                spec: specs.join(" "),
                source,
            })?);
        }
        Ok(filter)
    }

    pub(crate) fn matches(&self, path: &str) -> bool {
        self.any
            || self.prefixes.iter().any(|p| {
                path == p || (path.starts_with(p.as_str()) && path.as_bytes()[p.len()] == b'/')
            })
            || self.globs.as_ref().is_some_and(|g| g.is_match(path))
    }
}

/// Model files (by extension) and indexes of sharded models that differ between the trees of
/// `base` and `head`, or between `base` and the work tree when `head` is None; see
/// [`changed_files`].
pub(crate) fn changed_model_files(
    repo: &gix::Repository,
    base: &str,
    head: Option<&str>,
    filter: &PathFilter,
) -> Result<Vec<FileChange>> {
    changed_files(repo, base, head, &|path| {
        let file = path.rsplit('/').next().unwrap_or(path);
        (crate::read::is_read_path(path) || crate::sharded::index::is_index_name(file))
            && filter.matches(path)
    })
}

/// Files whose path `select` accepts that differ between the trees of `base` and `head`, or
/// between `base` and the work tree (through the index, like `git diff base`) when `head` is
/// None. Sorted by path; removed+added pairs with the same blob id become renames.
pub(crate) fn changed_files(
    repo: &gix::Repository,
    base: &str,
    head: Option<&str>,
    select: &dyn Fn(&str) -> bool,
) -> Result<Vec<FileChange>> {
    let base_tree = match resolve_tree(repo, base) {
        Ok(tree) => tree,
        // Before the first commit, `git diff` compares the index with nothing.
        Err(_) if base == "HEAD" && head.is_none() && head_is_unborn(repo) => {
            ObjectId::empty_tree(repo.object_hash())
        }
        Err(e) => return Err(e),
    };
    let mut changes = match head {
        Some(head) => {
            let head_tree = resolve_tree(repo, head)?;
            let mut raw = Vec::new();
            let mut prefix = String::new();
            diff_trees(
                repo,
                Some(base_tree),
                Some(head_tree),
                &mut prefix,
                select,
                &mut raw,
            )?;
            raw
        }
        None => diff_tree_worktree(repo, base_tree, select)?,
    };
    pair_renames(&mut changes);
    changes.sort_by(|a, b| a.path().cmp(b.path()).then(a.status.cmp(&b.status)));
    Ok(changes)
}

/// Every file (regular or executable, not a symbolic link) under `tree` whose path `select`
/// accepts, by path.
pub(super) fn tree_files(
    repo: &gix::Repository,
    tree: ObjectId,
    select: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, ObjectId>> {
    Ok(tree_blobs(repo, tree, select)?
        .into_iter()
        .filter(|(_, side)| !side.link)
        .map(|(path, side)| (path, side.id))
        .collect())
}

/// Every file and symbolic link of HEAD's tree (nothing before the first commit), by path:
/// what a commit's staged changes are measured against.
pub(crate) fn head_entries(
    repo: &gix::Repository,
) -> Result<BTreeMap<String, super::objects::Entry>> {
    if head_is_unborn(repo) {
        return Ok(BTreeMap::new());
    }
    let tree = resolve_tree(repo, "HEAD")?;
    Ok(tree_blobs(repo, tree, &|_| true)?
        .into_iter()
        .map(|(path, side)| {
            let entry = if side.link {
                super::objects::Entry::Link(side.id)
            } else {
                super::objects::Entry::File(side.id)
            };
            (path, entry)
        })
        .collect())
}

/// A file or symbolic link of a tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlobSide {
    id: ObjectId,
    link: bool,
}

/// Every file and symbolic link under `tree` whose path `select` accepts, by path.
fn tree_blobs(
    repo: &gix::Repository,
    tree: ObjectId,
    select: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, BlobSide>> {
    let mut all = Vec::new();
    let mut prefix = String::new();
    diff_trees(repo, Some(tree), None, &mut prefix, select, &mut all)?;
    Ok(all
        .into_iter()
        .filter_map(|c| {
            Some((
                c.old_path?,
                BlobSide {
                    id: c.old_id?,
                    link: c.old_link,
                },
            ))
        })
        .collect())
}

/// A file found in history: its path, the commit it was seen in (the newest), its blob.
#[derive(Debug, Clone)]
pub(crate) struct HistoryFile {
    pub path: String,
    pub commit: ObjectId,
    pub id: ObjectId,
}

/// The files whose path `select` accepts in HEAD and every commit before it, newest first, one
/// per distinct blob. Unreadable commits or trees are passed over (a shallow clone ends early).
pub(crate) fn files_in_history(
    repo: &gix::Repository,
    select: &dyn Fn(&str) -> bool,
) -> Vec<HistoryFile> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let Ok(head) = repo.head_id() else {
        return out;
    };
    let Ok(walk) = head.ancestors().all() else {
        return out;
    };
    for info in walk.flatten() {
        let Ok(tree) = repo
            .find_commit(info.id)
            .and_then(|c| c.tree_id().map(gix::Id::detach))
        else {
            continue;
        };
        let Ok(files) = tree_files(repo, tree, select) else {
            continue;
        };
        for (path, id) in files {
            if seen.insert(id) {
                out.push(HistoryFile {
                    path,
                    commit: info.id,
                    id,
                });
            }
        }
    }
    out
}

fn head_is_unborn(repo: &gix::Repository) -> bool {
    repo.head().is_ok_and(|head| head.is_unborn())
}

type TreeEntries = BTreeMap<String, (gix::objs::tree::EntryMode, ObjectId)>;

fn tree_entries(repo: &gix::Repository, id: Option<ObjectId>) -> Result<TreeEntries> {
    let mut out = BTreeMap::new();
    let Some(id) = id.filter(|id| !id.is_empty_tree()) else {
        return Ok(out);
    };
    let tree = repo.find_tree(id).map_err(|e| object_error(id, e))?;
    let decoded = tree.decode().map_err(|e| object_error(id, e))?;
    for entry in decoded.entries {
        out.insert(
            entry.filename.to_string(),
            (entry.mode, entry.oid.to_owned()),
        );
    }
    Ok(out)
}

/// Recursive tree comparison that never descends into subtrees with equal ids.
fn diff_trees(
    repo: &gix::Repository,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    prefix: &mut String,
    select: &dyn Fn(&str) -> bool,
    out: &mut Vec<FileChange>,
) -> Result<()> {
    if old == new {
        return Ok(());
    }
    let old_entries = tree_entries(repo, old)?;
    let new_entries = tree_entries(repo, new)?;
    let mut names: Vec<&String> = old_entries.keys().chain(new_entries.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let o = old_entries.get(name);
        let n = new_entries.get(name);
        let len = prefix.len();
        prefix.push_str(name);
        let subtree = |e: Option<&(gix::objs::tree::EntryMode, ObjectId)>| {
            e.filter(|(m, _)| m.is_tree()).map(|(_, id)| *id)
        };
        let (old_tree, new_tree) = (subtree(o), subtree(n));
        if old_tree.is_some() || new_tree.is_some() {
            prefix.push('/');
            diff_trees(repo, old_tree, new_tree, prefix, select, out)?;
            prefix.truncate(len);
            prefix.push_str(name);
        }
        let blob = |e: Option<&(gix::objs::tree::EntryMode, ObjectId)>| {
            e.filter(|(m, _)| m.is_blob_or_symlink())
                .map(|(m, id)| BlobSide {
                    id: *id,
                    link: m.is_link(),
                })
        };
        let (old_blob, new_blob) = (blob(o), blob(n));
        if old_blob != new_blob && select(prefix) {
            out.push(blob_change(prefix, old_blob, new_blob));
        }
        prefix.truncate(len);
    }
    Ok(())
}

fn blob_change(path: &str, old: Option<BlobSide>, new: Option<BlobSide>) -> FileChange {
    let status = match (old, new) {
        (None, _) => Status::Added,
        (_, None) => Status::Removed,
        _ => Status::Modified,
    };
    FileChange {
        status,
        old_path: old.map(|_| path.to_owned()),
        new_path: new.map(|_| path.to_owned()),
        old_id: old.map(|s| s.id),
        new_id: new.map(|s| s.id),
        new_worktree: None,
        old_link: old.is_some_and(|s| s.link),
        new_link: new.is_some_and(|s| s.link),
    }
}

/// `git diff BASE`: BASE's tree against the work tree, using the index for the
/// set of tracked paths and its stat data to skip unchanged files without reading them.
fn diff_tree_worktree(
    repo: &gix::Repository,
    base_tree: ObjectId,
    select: &dyn Fn(&str) -> bool,
) -> Result<Vec<FileChange>> {
    let workdir = repo
        .workdir()
        .ok_or_else(|| GitError::Bare(repo.git_dir().to_owned()))?
        .to_owned();
    let mut base = tree_blobs(repo, base_tree, select)?;
    let index = open_index(repo)?;
    let stat_options = repo.stat_options().map_err(|e| GitError::Index {
        path: repo.index_path(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    let mut seen_conflict = std::collections::HashSet::new();
    for entry in index.entries() {
        let path = entry.path(&index).to_string();
        let index_link = entry.mode == gix::index::entry::Mode::SYMLINK;
        if !select(&path) || !(is_file_mode(entry.mode) || index_link) {
            continue;
        }
        let conflicted = entry.stage() != gix::index::entry::Stage::Unconflicted;
        if conflicted && !seen_conflict.insert(path.clone()) {
            continue;
        }
        let old = base.remove(&path);
        let file = match gix::path::from_bstr(entry.path(&index)) {
            Ok(relative) => workdir.join(relative),
            Err(_) => workdir.join(&path),
        };
        let skip_worktree = entry
            .flags
            .contains(gix::index::entry::Flags::SKIP_WORKTREE);
        let meta = match std::fs::symlink_metadata(&file) {
            Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => Some(meta),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(GitError::Io {
                    path: file,
                    source: e,
                });
            }
        };
        let staged = BlobSide {
            id: entry.id,
            link: index_link,
        };
        let Some(meta) = meta.filter(|_| !skip_worktree) else {
            if skip_worktree && !conflicted {
                // Not checked out (sparse checkout): the index is the work tree's content.
                if old != Some(staged) {
                    out.push(blob_change(&path, old, Some(staged)));
                }
            } else if let Some(old) = old {
                out.push(blob_change(&path, Some(old), None));
            }
            continue;
        };
        if meta.file_type().is_symlink() {
            // A link in the work tree: git stores its target as the blob.
            let new = BlobSide {
                id: worktree_link_id(repo, &file)?,
                link: true,
            };
            if old != Some(new) {
                let mut change = blob_change(&path, old, Some(new));
                change.new_worktree = Some(file);
                out.push(change);
            }
            continue;
        }
        let stat_clean = !conflicted
            && !index_link
            && !entry
                .flags
                .contains(gix::index::entry::Flags::INTENT_TO_ADD)
            && gix::index::fs::Metadata::from_path_no_follow(&file)
                .ok()
                .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok())
                .is_some_and(|stat| {
                    entry.stat.matches(&stat, stat_options)
                        && !entry.stat.is_racy(index.timestamp(), stat_options)
                });
        let new_id = stat_clean.then_some(entry.id);
        let unchanged = match (old, new_id) {
            (Some(old), _) if old.link => false,
            (Some(old), Some(new)) => old.id == new,
            (Some(old), None) => worktree_matches_blob(repo, old.id, &file, meta.len())?,
            (None, _) => false,
        };
        if unchanged {
            continue;
        }
        let mut change = blob_change(
            &path,
            old,
            Some(BlobSide {
                id: entry.id,
                link: false,
            }),
        );
        change.new_id = new_id;
        change.new_worktree = Some(file);
        out.push(change);
    }
    // Paths of BASE the index no longer tracks were deleted (even if an untracked file remains).
    for (path, old) in base {
        out.push(blob_change(&path, Some(old), None));
    }
    // A moved file's stat data no longer matches (the rename changed its ctime), so its id is
    // unknown: compare it with the removed blobs to find an exact rename. Sizes are checked
    // first, so only a candidate of equal size is hashed.
    let removed: Vec<ObjectId> = out
        .iter()
        .filter(|c| c.status == Status::Removed && !c.old_link)
        .filter_map(|c| c.old_id)
        .collect();
    if !removed.is_empty() {
        for change in &mut out {
            if change.status != Status::Added || change.new_id.is_some() || change.new_link {
                continue;
            }
            let Some(file) = change.new_worktree.clone() else {
                continue;
            };
            let Ok(len) = std::fs::metadata(&file).map(|m| m.len()) else {
                continue;
            };
            for id in &removed {
                if worktree_matches_blob(repo, *id, &file, len)? {
                    change.new_id = Some(*id);
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// The blob id git gives the work-tree symbolic link `file`: that of its target path.
fn worktree_link_id(repo: &gix::Repository, file: &Path) -> Result<ObjectId> {
    let target = std::fs::read_link(file).map_err(|e| GitError::Io {
        path: file.to_owned(),
        source: e,
    })?;
    let bytes = gix::path::into_bstr(target).map_err(|e| object_error(file.display(), e))?;
    gix::objs::compute_hash(repo.object_hash(), gix::objs::Kind::Blob, &bytes)
        .map_err(|e| object_error(file.display(), e))
}

/// Whether the work-tree `file` holds the content of `blob` (smudged or not): sizes first, and
/// a full hash only when they agree.
fn worktree_matches_blob(
    repo: &gix::Repository,
    blob: ObjectId,
    file: &Path,
    file_len: u64,
) -> Result<bool> {
    let header = repo.find_header(blob).map_err(|e| object_error(blob, e))?;
    if header.size() < lfs::MAX_POINTER_SIZE as u64 {
        let bytes = blob_bytes(repo, blob)?;
        if let Some(pointer) = Pointer::parse(&bytes) {
            if file_len == bytes.len() as u64 && read_prefix(file, bytes.len() + 1)? == bytes {
                return Ok(true);
            }
            return Ok(file_len == pointer.size
                && crate::digest::sha256_file(file).map_err(|source| GitError::Io {
                    path: file.to_owned(),
                    source,
                })? == pointer.oid);
        }
    }
    if header.size() != file_len {
        return Ok(false);
    }
    let mut f = std::fs::File::open(file).map_err(|e| GitError::Io {
        path: file.to_owned(),
        source: e,
    })?;
    let id = gix::objs::compute_stream_hash(
        repo.object_hash(),
        gix::objs::Kind::Blob,
        &mut f,
        file_len,
        &mut gix::progress::Discard,
        &std::sync::atomic::AtomicBool::new(false),
    )
    .map_err(|e| object_error(file.display(), e))?;
    Ok(id == blob)
}

fn read_prefix(file: &Path, limit: usize) -> Result<Vec<u8>> {
    let f = std::fs::File::open(file).map_err(|e| GitError::Io {
        path: file.to_owned(),
        source: e,
    })?;
    let mut buf = Vec::with_capacity(limit.min(64 * 1024));
    f.take(limit as u64)
        .read_to_end(&mut buf)
        .map_err(|e| GitError::Io {
            path: file.to_owned(),
            source: e,
        })?;
    Ok(buf)
}

/// Pairs removed and added files with the same blob id into renames (exact renames only, as
/// in `git diff -M100%`), first by path order so the result is deterministic.
fn pair_renames(changes: &mut Vec<FileChange>) {
    let mut added_by_id: HashMap<(ObjectId, bool), Vec<usize>> = HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        if c.status == Status::Added
            && let Some(id) = c.new_id
        {
            added_by_id.entry((id, c.new_link)).or_default().push(i);
        }
    }
    for list in added_by_id.values_mut() {
        list.sort_by(|a, b| changes[*b].path().cmp(changes[*a].path()));
    }
    let mut removed: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].status == Status::Removed)
        .collect();
    removed.sort_by(|a, b| changes[*a].path().cmp(changes[*b].path()));
    let mut drop = vec![false; changes.len()];
    for r in removed {
        let Some(id) = changes[r].old_id else {
            continue;
        };
        let key = (id, changes[r].old_link);
        let Some(added) = added_by_id.get_mut(&key).and_then(std::vec::Vec::pop) else {
            continue;
        };
        let a = changes[added].clone();
        let c = &mut changes[r];
        c.status = Status::Renamed;
        c.new_path = a.new_path;
        c.new_id = a.new_id;
        c.new_worktree = a.new_worktree;
        c.new_link = a.new_link;
        drop[added] = true;
    }
    let mut i = 0;
    changes.retain(|_| {
        i += 1;
        !drop[i - 1]
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(status: Status, old: Option<(&str, u8)>, new: Option<(&str, u8)>) -> FileChange {
        let id = |n: u8| ObjectId::from_bytes_or_panic(&[n; 20]);
        FileChange {
            status,
            old_path: old.map(|(p, _)| p.to_owned()),
            new_path: new.map(|(p, _)| p.to_owned()),
            old_id: old.map(|(_, n)| id(n)),
            new_id: new.map(|(_, n)| id(n)),
            new_worktree: None,
            old_link: false,
            new_link: false,
        }
    }

    #[test]
    fn exact_renames_pair_by_blob_id() {
        let mut changes = vec![
            change(Status::Removed, Some(("a.gguf", 1)), None),
            change(Status::Added, None, Some(("b.gguf", 1))),
            change(Status::Added, None, Some(("c.gguf", 2))),
            change(Status::Removed, Some(("d.gguf", 3)), None),
        ];
        pair_renames(&mut changes);
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].status, Status::Renamed);
        assert_eq!(changes[0].old_path.as_deref(), Some("a.gguf"));
        assert_eq!(changes[0].new_path.as_deref(), Some("b.gguf"));
        assert_eq!(changes[1].status, Status::Added);
        assert_eq!(changes[2].status, Status::Removed);
    }

    #[test]
    fn path_filter_prefixes_and_globs() {
        let f = PathFilter::new(&["models".into(), "*.safetensors".into()]).unwrap();
        assert!(f.matches("models/a.gguf"));
        assert!(!f.matches("modelsx/a.gguf"));
        assert!(f.matches("x/y.safetensors"));
        assert!(!f.matches("x/y.gguf"));
        assert!(PathFilter::new(&[]).unwrap().matches("anything"));
    }
}
