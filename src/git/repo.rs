//! Repository access with gix: open, resolve `REV:path`, read blobs, list the model files that
//! changed between two trees or between a tree and the work tree, and turn a side into an
//! [`Artifact`] without smudging (LFS pointers lead to the local object store, of which only
//! the header pages are read).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use sha2::{Digest, Sha256};

use super::lfs::{self, Pointer};
use super::{GitError, is_model_path};
use crate::Artifact;
use crate::error::Result;

/// Opens the repository git would use from `dir`: `GIT_DIR` (set by git for the programs it
/// runs) if present, else discovery upwards from `dir`.
pub fn open_repo(dir: &Path) -> Result<gix::Repository> {
    gix::discover_with_environment_overrides(dir).map_err(|e| {
        GitError::Open {
            dir: dir.to_owned(),
            message: e.to_string(),
        }
        .into()
    })
}

fn rev_error(rev: &str, e: impl ToString) -> crate::Error {
    GitError::Revision {
        rev: rev.to_owned(),
        message: e.to_string(),
    }
    .into()
}

fn object_error(what: impl ToString, e: impl ToString) -> crate::Error {
    GitError::Object {
        what: what.to_string(),
        message: e.to_string(),
    }
    .into()
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

fn open_index(repo: &gix::Repository) -> Result<gix::worktree::Index> {
    repo.index_or_empty().map_err(|e| {
        GitError::Index {
            path: repo.index_path(),
            message: e.to_string(),
        }
        .into()
    })
}

fn is_file_mode(mode: gix::index::entry::Mode) -> bool {
    mode == gix::index::entry::Mode::FILE || mode == gix::index::entry::Mode::FILE_EXECUTABLE
}

/// How a model file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Added,
    Removed,
    Modified,
    /// An exact rename: same blob id under another path.
    Renamed,
}

impl Status {
    pub fn name(self) -> &'static str {
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
pub struct FileChange {
    pub status: Status,
    pub old_path: Option<String>,
    pub new_path: Option<String>,
    pub old_id: Option<ObjectId>,
    /// The new blob; None for a removed file or when the new side is a modified work-tree file.
    pub new_id: Option<ObjectId>,
    /// The work-tree file holding the new side (comparisons against the work tree).
    pub new_worktree: Option<PathBuf>,
}

impl FileChange {
    /// The path to show: the new path, or the old one for a removed file.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }

    /// The old side as a model, or None for an added file.
    pub fn old_side(&self, repo: &gix::Repository, old_rev: &str) -> Result<Option<ModelSide>> {
        match (&self.old_id, &self.old_path) {
            (Some(id), Some(path)) => {
                let bytes = blob_bytes(repo, *id)?;
                Ok(Some(model_artifact_from_blob(
                    repo,
                    &bytes,
                    &format!("{old_rev}:{path}"),
                )))
            }
            _ => Ok(None),
        }
    }

    /// The new side as a model, or None for a removed file.
    pub fn new_side(&self, repo: &gix::Repository, new_rev: &str) -> Result<Option<ModelSide>> {
        if let Some(file) = &self.new_worktree {
            return Ok(Some(model_side_from_file(Some(repo), file)));
        }
        match (&self.new_id, &self.new_path) {
            (Some(id), Some(path)) => {
                let bytes = blob_bytes(repo, *id)?;
                Ok(Some(model_artifact_from_blob(
                    repo,
                    &bytes,
                    &format!("{new_rev}:{path}"),
                )))
            }
            _ => Ok(None),
        }
    }
}

/// Which paths to consider: everything, or git-style pathspecs (a path, a directory prefix, or
/// a glob), relative to the repository root.
#[derive(Debug, Clone, Default)]
pub struct PathFilter {
    prefixes: Vec<String>,
    globs: Option<globset::GlobSet>,
    any: bool,
}

impl PathFilter {
    pub fn new(specs: &[String]) -> Result<Self> {
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
                    .map_err(|e| GitError::Usage(format!("pathspec {spec:?}: {e}")))?;
                globs.add(glob);
                has_globs = true;
            } else {
                filter.prefixes.push(spec.to_owned());
            }
        }
        if has_globs {
            filter.globs = Some(
                globs
                    .build()
                    .map_err(|e| GitError::Usage(format!("pathspec: {e}")))?,
            );
        }
        Ok(filter)
    }

    pub fn matches(&self, path: &str) -> bool {
        self.any
            || self.prefixes.iter().any(|p| {
                path == p || (path.starts_with(p.as_str()) && path.as_bytes()[p.len()] == b'/')
            })
            || self.globs.as_ref().is_some_and(|g| g.is_match(path))
    }
}

/// Model files (by extension) that differ between the trees of `base` and `head`, or between
/// `base` and the work tree (through the index, like `git diff base`) when `head` is None.
/// Sorted by path; removed+added pairs with the same blob id become renames.
pub fn changed_model_files(
    repo: &gix::Repository,
    base: &str,
    head: Option<&str>,
) -> Result<Vec<FileChange>> {
    changed_model_files_filtered(repo, base, head, &PathFilter::default())
}

/// [`changed_model_files`] restricted to the paths `filter` accepts.
pub fn changed_model_files_filtered(
    repo: &gix::Repository,
    base: &str,
    head: Option<&str>,
    filter: &PathFilter,
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
                filter,
                &mut raw,
            )?;
            raw
        }
        None => diff_tree_worktree(repo, base_tree, filter)?,
    };
    pair_renames(&mut changes);
    changes.sort_by(|a, b| a.path().cmp(b.path()).then(a.status.cmp(&b.status)));
    Ok(changes)
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
    filter: &PathFilter,
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
            diff_trees(repo, old_tree, new_tree, prefix, filter, out)?;
            prefix.truncate(len);
            prefix.push_str(name);
        }
        let blob = |e: Option<&(gix::objs::tree::EntryMode, ObjectId)>| {
            e.filter(|(m, _)| m.is_blob()).map(|(_, id)| *id)
        };
        let (old_blob, new_blob) = (blob(o), blob(n));
        if old_blob != new_blob && is_model_path(prefix) && filter.matches(prefix) {
            out.push(blob_change(prefix, old_blob, new_blob));
        }
        prefix.truncate(len);
    }
    Ok(())
}

fn blob_change(path: &str, old: Option<ObjectId>, new: Option<ObjectId>) -> FileChange {
    let status = match (old, new) {
        (None, _) => Status::Added,
        (_, None) => Status::Removed,
        _ => Status::Modified,
    };
    FileChange {
        status,
        old_path: old.map(|_| path.to_owned()),
        new_path: new.map(|_| path.to_owned()),
        old_id: old,
        new_id: new,
        new_worktree: None,
    }
}

/// Every model blob under `tree`, by path.
fn model_blobs(
    repo: &gix::Repository,
    tree: ObjectId,
    filter: &PathFilter,
) -> Result<BTreeMap<String, ObjectId>> {
    let mut all = Vec::new();
    let mut prefix = String::new();
    diff_trees(repo, Some(tree), None, &mut prefix, filter, &mut all)?;
    Ok(all
        .into_iter()
        .filter_map(|c| Some((c.old_path?, c.old_id?)))
        .collect())
}

/// `git diff BASE` for model files: BASE's tree against the work tree, using the index for the
/// set of tracked paths and its stat data to skip unchanged files without reading them.
fn diff_tree_worktree(
    repo: &gix::Repository,
    base_tree: ObjectId,
    filter: &PathFilter,
) -> Result<Vec<FileChange>> {
    let workdir = repo
        .workdir()
        .ok_or_else(|| GitError::Bare(repo.git_dir().to_owned()))?
        .to_owned();
    let mut base = model_blobs(repo, base_tree, filter)?;
    let index = open_index(repo)?;
    let stat_options = repo.stat_options().map_err(|e| GitError::Index {
        path: repo.index_path(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    let mut seen_conflict = std::collections::HashSet::new();
    for entry in index.entries() {
        let path = entry.path(&index).to_string();
        if !is_model_path(&path) || !filter.matches(&path) || !is_file_mode(entry.mode) {
            continue;
        }
        let conflicted = entry.stage() != gix::index::entry::Stage::Unconflicted;
        if conflicted && !seen_conflict.insert(path.clone()) {
            continue;
        }
        let old_id = base.remove(&path);
        let file = match gix::path::from_bstr(entry.path(&index)) {
            Ok(relative) => workdir.join(relative),
            Err(_) => workdir.join(&path),
        };
        let skip_worktree = entry
            .flags
            .contains(gix::index::entry::Flags::SKIP_WORKTREE);
        let meta = match std::fs::symlink_metadata(&file) {
            Ok(meta) if meta.is_file() => Some(meta),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(GitError::Io {
                    path: file,
                    source: e,
                }
                .into());
            }
        };
        let Some(meta) = meta.filter(|_| !skip_worktree) else {
            if skip_worktree && !conflicted {
                // Not checked out (sparse checkout): the index is the work tree's content.
                if old_id != Some(entry.id) {
                    out.push(blob_change(&path, old_id, Some(entry.id)));
                }
            } else if let Some(old_id) = old_id {
                out.push(blob_change(&path, Some(old_id), None));
            }
            continue;
        };
        let stat_clean = !conflicted
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
        let unchanged = match (old_id, new_id) {
            (Some(old), Some(new)) => old == new,
            (Some(old), None) => worktree_matches_blob(repo, old, &file, meta.len())?,
            (None, _) => false,
        };
        if unchanged {
            continue;
        }
        let mut change = blob_change(&path, old_id, Some(entry.id));
        change.new_id = new_id;
        change.new_worktree = Some(file);
        out.push(change);
    }
    // Paths of BASE the index no longer tracks were deleted (even if an untracked file remains).
    for (path, id) in base {
        out.push(blob_change(&path, Some(id), None));
    }
    // A moved file's stat data no longer matches (the rename changed its ctime), so its id is
    // unknown: compare it with the removed blobs to find an exact rename. Sizes are checked
    // first, so only a candidate of equal size is hashed.
    let removed: Vec<ObjectId> = out
        .iter()
        .filter(|c| c.status == Status::Removed)
        .filter_map(|c| c.old_id)
        .collect();
    if !removed.is_empty() {
        for change in out.iter_mut() {
            if change.status != Status::Added || change.new_id.is_some() {
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
            return Ok(file_len == pointer.size && sha256_file(file)? == pointer.oid);
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

/// SHA-256 of a whole file, lowercase hex.
pub fn sha256_file(file: &Path) -> Result<String> {
    let io = |e| GitError::Io {
        path: file.to_owned(),
        source: e,
    };
    let mut f = std::fs::File::open(file).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Pairs removed and added files with the same blob id into renames (exact renames only, as
/// in `git diff -M100%`), first by path order so the result is deterministic.
fn pair_renames(changes: &mut Vec<FileChange>) {
    let mut added_by_id: HashMap<ObjectId, Vec<usize>> = HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        if c.status == Status::Added
            && let Some(id) = c.new_id
        {
            added_by_id.entry(id).or_default().push(i);
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
        let Some(added) = added_by_id.get_mut(&id).and_then(|l| l.pop()) else {
            continue;
        };
        let a = changes[added].clone();
        let c = &mut changes[r];
        c.status = Status::Renamed;
        c.new_path = a.new_path;
        c.new_id = a.new_id;
        c.new_worktree = a.new_worktree;
        drop[added] = true;
    }
    let mut i = 0;
    changes.retain(|_| {
        i += 1;
        !drop[i - 1]
    });
}

/// One side of a comparison, as far as it could be read without smudging.
#[derive(Debug, Clone)]
pub enum ModelSide {
    /// A parsed model; `lfs` is the pointer it was reached through, if any.
    Model {
        artifact: Box<Artifact>,
        lfs: Option<Pointer>,
    },
    /// An LFS pointer whose object is not in the local store (not fetched, pruned, or
    /// checked out with `GIT_LFS_SKIP_SMUDGE=1`).
    Absent { pointer: Pointer },
    /// Not a GGUF or safetensors file.
    NotModel {
        size: u64,
        sha256: String,
        lfs: Option<Pointer>,
    },
    /// Looks like a model (magic bytes) but does not parse.
    Invalid {
        size: u64,
        error: String,
        lfs: Option<Pointer>,
    },
}

impl ModelSide {
    pub fn artifact(&self) -> Option<&Artifact> {
        match self {
            ModelSide::Model { artifact, .. } => Some(artifact),
            _ => None,
        }
    }

    pub fn pointer(&self) -> Option<&Pointer> {
        match self {
            ModelSide::Model { lfs, .. }
            | ModelSide::NotModel { lfs, .. }
            | ModelSide::Invalid { lfs, .. } => lfs.as_ref(),
            ModelSide::Absent { pointer } => Some(pointer),
        }
    }

    /// One line describing a side that is not a parsed model (None for a model).
    pub fn note(&self) -> Option<String> {
        match self {
            ModelSide::Model { .. } => None,
            ModelSide::Absent { pointer } => Some(format!(
                "LFS object sha256:{} ({} bytes) is not present locally; run `git lfs fetch` \
                 (or `git lfs pull`) to compare its structure",
                pointer.oid, pointer.size
            )),
            ModelSide::NotModel { size, sha256, .. } => Some(format!(
                "not a GGUF or safetensors file ({size} bytes, sha256:{sha256})"
            )),
            ModelSide::Invalid { size, error, .. } => {
                Some(format!("unreadable model file ({size} bytes): {error}"))
            }
        }
    }
}

/// Turns git's blob for `path` (`REV:path`, used in messages) into a model side: an LFS
/// pointer is resolved to the local object (mmapped, only its header read), anything else is
/// parsed from the blob bytes.
pub fn model_artifact_from_blob(repo: &gix::Repository, bytes: &[u8], path: &str) -> ModelSide {
    if let Some(pointer) = Pointer::parse(bytes) {
        return from_pointer(Some(repo), pointer);
    }
    from_bytes(Path::new(path), bytes, None)
}

/// Reads a file that may be a model, or an LFS pointer to one (a work tree checked out with
/// `GIT_LFS_SKIP_SMUDGE=1`, or the pointer git hands a textconv when smudging is skipped).
/// Without a repository, pointers cannot be resolved and are reported as absent.
pub fn model_side_from_file(repo: Option<&gix::Repository>, file: &Path) -> ModelSide {
    let meta = match std::fs::metadata(file) {
        Ok(meta) => meta,
        Err(e) => {
            return ModelSide::Invalid {
                size: 0,
                error: format!("{}: {e}", file.display()),
                lfs: None,
            };
        }
    };
    if meta.len() < lfs::MAX_POINTER_SIZE as u64
        && let Ok(bytes) = std::fs::read(file)
    {
        if let Some(pointer) = Pointer::parse(&bytes) {
            return from_pointer(repo, pointer);
        }
        return from_bytes(file, &bytes, None);
    }
    from_path(file, meta.len(), None, None)
}

/// Like [`model_side_from_file`], opening a repository only when `file` is an LFS pointer:
/// the one of the current directory (where git runs drivers), else the one holding `file`.
pub fn model_side_of_file(file: &Path) -> ModelSide {
    let Some(pointer) = read_pointer_file(file) else {
        return model_side_from_file(None, file);
    };
    let dirs = [Some(Path::new(".")), file.parent()];
    for dir in dirs.into_iter().flatten() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(repo) = open_repo(dir)
            && lfs::present_object(&repo, &pointer).is_some()
        {
            return from_pointer(Some(&repo), pointer);
        }
    }
    ModelSide::Absent { pointer }
}

/// The LFS pointer in `file`, if it holds one (only small files are read).
pub fn read_pointer_file(file: &Path) -> Option<Pointer> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() >= lfs::MAX_POINTER_SIZE as u64 {
        return None;
    }
    Pointer::parse(&std::fs::read(file).ok()?)
}

fn from_pointer(repo: Option<&gix::Repository>, pointer: Pointer) -> ModelSide {
    match repo.and_then(|r| lfs::present_object(r, &pointer)) {
        Some(object) => {
            let size = pointer.size;
            let sha = pointer.oid.clone();
            from_path(&object, size, Some(sha), Some(pointer))
        }
        None => ModelSide::Absent { pointer },
    }
}

fn from_bytes(path: &Path, bytes: &[u8], lfs: Option<Pointer>) -> ModelSide {
    if crate::formats::detect(bytes).is_none() {
        return ModelSide::NotModel {
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
            lfs,
        };
    }
    match crate::read::read_bytes(path, bytes) {
        Ok(artifact) => ModelSide::Model {
            artifact: Box::new(artifact),
            lfs,
        },
        Err(e) => ModelSide::Invalid {
            size: bytes.len() as u64,
            error: e.to_string(),
            lfs,
        },
    }
}

/// Parses a file on disk (mmapped by the core, header pages only). `sha256` is known for LFS
/// objects; otherwise it is computed only when the file turns out not to be a model.
fn from_path(path: &Path, size: u64, sha256: Option<String>, lfs: Option<Pointer>) -> ModelSide {
    let head = match read_prefix(path, 64) {
        Ok(head) => head,
        Err(e) => {
            return ModelSide::Invalid {
                size,
                error: e.to_string(),
                lfs,
            };
        }
    };
    if crate::formats::detect(&head).is_none() {
        let sha256 = match sha256 {
            Some(s) => s,
            None => sha256_file(path).unwrap_or_else(|e| format!("<{e}>")),
        };
        return ModelSide::NotModel { size, sha256, lfs };
    }
    match crate::read::read_file(path) {
        Ok(artifact) => ModelSide::Model {
            artifact: Box::new(artifact),
            lfs,
        },
        Err(e) => ModelSide::Invalid {
            size,
            error: e.to_string(),
            lfs,
        },
    }
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
