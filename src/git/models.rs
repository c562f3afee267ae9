//! Multi-file models in a repository: the changed shards of one model (the files an index
//! names, or the parts of one split GGUF) become one entry whose sides are the whole model as
//! each revision holds it, read by the core's multi-file reader from git's trees (or the work
//! tree) with LFS pointers followed like single files.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use gix::ObjectId;
use rayon::prelude::*;

use super::changes::{FileChange, Status};
use super::error::GitError;
use super::lfs::Pointer;
use super::objects::{Entry, blob_bytes, dir_entries};
use super::reader::{SideReader, WINDOW_HEADER_BYTES, read_pointer_file};
use super::side::ModelSide;
use crate::artifact::Artifact;
use crate::error::ShardError;
use crate::sharded::{self, Directory, SplitName};

/// The files of a multi-file model that changed.
#[derive(Debug, Clone)]
pub(crate) struct ModelGroup {
    /// The changed files' paths, sorted.
    pub files: Vec<String>,
    /// A file of the model that exists on the newest side (its index or first part, else a
    /// changed file): where an annotation about the model can point.
    pub anchor: String,
    /// Where the bytes of each part of the old and new model are (in the order of the model's
    /// `ModelFiles::parts`; empty when that side is not a model): for value diffs.
    pub old_parts: Vec<PartSource>,
    pub new_parts: Vec<PartSource>,
}

/// Where the bytes of one part of a model are.
#[derive(Debug, Clone)]
pub(crate) enum PartSource {
    /// A blob (the part's bytes, or an LFS pointer to them).
    Blob(ObjectId),
    /// A file of the work tree (the part, or an LFS pointer text).
    File(PathBuf),
}

/// Where one side of a comparison is read from.
#[derive(Clone, Copy)]
pub(crate) enum Snapshot<'a> {
    /// A commit's tree: the revision (as resolved by gix) and its name in messages.
    Tree { rev: &'a str, label: &'a str },
    /// The work tree.
    WorkTree,
    /// The index: what `git commit` would record.
    Index,
}

/// A changed file (or multi-file model) with its two sides and, for a model, its files.
pub(super) type Sides = (
    FileChange,
    Option<ModelSide>,
    Option<ModelSide>,
    Option<ModelGroup>,
);

/// Single files read, made into entries and handed on at once (a window's sides are dropped
/// before the next window is read, so a report streamed from here holds a bounded number).
pub(super) const WINDOW: usize = 256;

/// Reads the sides of `changes`, grouping the shards of each multi-file model into one entry,
/// and hands `sink` what `into` makes of them a window at a time, in path order: single files are read
/// up to [`WINDOW`] files and [`WINDOW_HEADER_BYTES`] of headers at a time (absent LFS headers
/// in one batch per window, headers parsed and entries made on all cores), multi-file models
/// where their path falls.
pub(super) fn each_window<T: Send>(
    reader: &SideReader<'_>,
    old: Snapshot<'_>,
    new: Snapshot<'_>,
    changes: Vec<FileChange>,
    into: impl Fn(Sides) -> T + Sync + Send,
    mut sink: impl FnMut(Vec<T>) -> Result<(), GitError>,
) -> Result<(), GitError> {
    let repo = reader.repo().expect("changes are read from a repository");
    let mut listings = Listings::default();
    let Grouped {
        groups,
        mut singles,
    } = group(repo, &mut listings, [old, new], changes)?;
    let label = |s: Snapshot<'_>| match s {
        Snapshot::Tree { label, .. } => label.to_owned(),
        Snapshot::WorkTree => "worktree".to_owned(),
        Snapshot::Index => "index".to_owned(),
    };
    let (old_label, new_label) = (label(old), label(new));
    let mut models: Vec<Sides> = Vec::with_capacity(groups.len());
    prefetch_absent(reader, &mut listings, [old, new], groups.keys())?;
    for (key, files) in groups {
        let old_model = open_model(reader, &mut listings, old, &key)?;
        let new_model = open_model(reader, &mut listings, new, &key)?;
        let old_parts = part_sources(repo, &mut listings, old, &key.dir, &old_model)?;
        let new_parts = part_sources(repo, &mut listings, new, &key.dir, &new_model)?;
        let status = match (&old_model, &new_model) {
            (None, Some(_)) => Status::Added,
            (Some(_), None) => Status::Removed,
            _ => Status::Modified,
        };
        let anchor = [&new_model, &old_model]
            .into_iter()
            .flatten()
            .map(|(name, _)| anchor_file(&key, name))
            .next();
        let mut paths: Vec<String> = files
            .iter()
            .flat_map(|c| [c.old_path.clone(), c.new_path.clone()])
            .flatten()
            .collect();
        paths.sort();
        paths.dedup();
        models.push((
            FileChange {
                status,
                old_path: old_model.as_ref().map(|(name, _)| name.clone()),
                new_path: new_model.as_ref().map(|(name, _)| name.clone()),
                old_id: None,
                new_id: None,
                new_worktree: None,
                old_link: false,
                new_link: false,
            },
            old_model.map(|(_, side)| side),
            new_model.map(|(_, side)| side),
            Some(ModelGroup {
                anchor: anchor.unwrap_or_else(|| paths[0].clone()),
                files: paths,
                old_parts,
                new_parts,
            }),
        ));
    }
    models.sort_by(|a, b| a.0.path().cmp(b.0.path()));
    singles.sort_by(|a, b| a.path().cmp(b.path()));
    let mut models = models.into_iter().peekable();
    let mut singles = singles.into_iter().peekable();
    // Changes read past a window's byte budget, read again at the start of the next.
    let mut carried: Vec<FileChange> = Vec::new();
    while !carried.is_empty() || singles.peek().is_some() {
        let mut chunk = std::mem::take(&mut carried);
        let room = WINDOW - chunk.len();
        chunk.extend(singles.by_ref().take(room));
        let sides =
            reader.change_sides_within(&chunk, &old_label, &new_label, WINDOW_HEADER_BYTES)?;
        carried = chunk.split_off(sides.len());
        let mut window: Vec<Sides> = chunk
            .into_iter()
            .zip(sides)
            .map(|(change, (old, new))| (change, old, new, None))
            .collect();
        let next = carried.first().or_else(|| singles.peek());
        // The models that sort before the next window's first file belong in this one.
        while let Some(model) = models.next_if(|m| next.is_none_or(|next| m.0.path() < next.path()))
        {
            window.push(model);
        }
        window.sort_by(|a, b| a.0.path().cmp(b.0.path()));
        // Structural diffs (and whatever else `into` computes) on all cores, in order.
        sink(window.into_par_iter().map(&into).collect())?;
    }
    let rest: Vec<Sides> = models.collect();
    if !rest.is_empty() {
        sink(rest.into_par_iter().map(&into).collect())?;
    }
    Ok(())
}

/// Changes sorted into the multi-file models they belong to and single files.
struct Grouped {
    groups: BTreeMap<ModelKey, Vec<FileChange>>,
    singles: Vec<FileChange>,
}

/// Sorts `changes` by the model they belong to, each in one step: a path's directory is
/// listed once per snapshot (and its index files found then), so the work is linear in the
/// number of changes and in the size of their directories.
fn group(
    repo: &gix::Repository,
    listings: &mut Listings,
    snapshots: [Snapshot<'_>; 2],
    changes: Vec<FileChange>,
) -> Result<Grouped, GitError> {
    let mut groups: BTreeMap<ModelKey, Vec<FileChange>> = BTreeMap::new();
    let mut singles = Vec::new();
    for change in changes {
        let key = [&change.new_path, &change.old_path]
            .into_iter()
            .flatten()
            .find_map(|path| model_key(repo, listings, snapshots, path).transpose())
            .transpose()?;
        match key {
            Some(key) => groups.entry(key).or_default().push(change),
            None => singles.push(change),
        }
    }
    Ok(Grouped { groups, singles })
}

/// Which multi-file model a path belongs to: its directory and the index, or the base name of
/// a split GGUF.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ModelKey {
    dir: String,
    kind: KeyKind,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum KeyKind {
    Index(String),
    Split(String),
}

/// The parts of the models `keys` whose LFS objects are not here: their headers are read from
/// the LFS server in one batch (and cached), so that assembling each model part by part then
/// finds them in the cache instead of asking the server once per part. Each directory's
/// listing is walked once, however many models it holds.
fn prefetch_absent<'k>(
    reader: &SideReader<'_>,
    listings: &mut Listings,
    snapshots: [Snapshot<'_>; 2],
    keys: impl Iterator<Item = &'k ModelKey>,
) -> Result<(), GitError> {
    let repo = reader.repo().expect("models are read from a repository");
    // Per directory: the index files and split bases of its models.
    let mut by_dir: BTreeMap<&str, (Vec<&str>, HashSet<&str>)> = BTreeMap::new();
    for key in keys {
        let (indexes, bases) = by_dir.entry(&key.dir).or_default();
        match &key.kind {
            KeyKind::Index(index) => indexes.push(index),
            KeyKind::Split(base) => {
                bases.insert(base);
            }
        }
    }
    let mut pointers: Vec<(String, Pointer)> = Vec::new();
    for (dir, (indexes, bases)) in by_dir {
        let belongs = |name: &str| {
            SplitName::parse(name).is_some_and(|n| bases.contains(n.base.as_str()))
                || indexes
                    .iter()
                    .any(|index| sharded::shard_of_index_name(name, index))
        };
        for snapshot in snapshots {
            let listing = listings.get(repo, snapshot, dir)?;
            for (name, listed) in &listing.entries {
                if !belongs(name) {
                    continue;
                }
                let pointer = match listed {
                    Listed::Blob(id) => small_blob(repo, *id).and_then(|b| Pointer::parse(&b)),
                    Listed::File(path) => read_pointer_file(path),
                    Listed::Link => None,
                };
                let Some(pointer) = pointer else { continue };
                pointers.push((in_dir(dir, name), pointer));
            }
        }
    }
    reader.prefetch(pointers);
    Ok(())
}

/// `dir/file`, or `file` in the root.
fn in_dir(dir: &str, file: &str) -> String {
    if dir.is_empty() {
        file.to_owned()
    } else {
        format!("{dir}/{file}")
    }
}

/// A blob small enough to be an LFS pointer, or None (a large blob is not read).
fn small_blob(repo: &gix::Repository, id: ObjectId) -> Option<Vec<u8>> {
    let size = repo.find_header(id).ok()?.size();
    if size >= super::lfs::MAX_POINTER_SIZE as u64 {
        return None;
    }
    blob_bytes(repo, id).ok()
}

/// Where each part of an opened model is, from the directory's listing.
fn part_sources(
    repo: &gix::Repository,
    listings: &mut Listings,
    snapshot: Snapshot<'_>,
    dir: &str,
    model: &Option<(String, ModelSide)>,
) -> Result<Vec<PartSource>, GitError> {
    let Some(files) = model
        .as_ref()
        .and_then(|(_, side)| side.artifact())
        .and_then(|a| a.layout.files.as_ref())
    else {
        return Ok(Vec::new());
    };
    let listing = listings.get(repo, snapshot, dir)?;
    Ok(files
        .parts
        .iter()
        .filter_map(|part| match listing.get(&part.file)? {
            Listed::Blob(id) => Some(PartSource::Blob(*id)),
            Listed::File(path) => Some(PartSource::File(path.clone())),
            Listed::Link => None,
        })
        .collect())
}

/// A real file for a model named `name`: the index itself, or part 1 of a split GGUF.
fn anchor_file(key: &ModelKey, name: &str) -> String {
    let (dir, file) = split_path(name);
    match SplitName::parse(&file.replace('*', "00001")) {
        Some(split) if matches!(key.kind, KeyKind::Split(_)) => {
            let first = split.sibling(1);
            if dir.is_empty() {
                first
            } else {
                format!("{dir}/{first}")
            }
        }
        _ => name.to_owned(),
    }
}

fn split_path(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, file)) => (dir, file),
        None => ("", path),
    }
}

fn model_key(
    repo: &gix::Repository,
    listings: &mut Listings,
    snapshots: [Snapshot<'_>; 2],
    path: &str,
) -> Result<Option<ModelKey>, GitError> {
    let (dir, file) = split_path(path);
    let key = |kind| {
        Ok(Some(ModelKey {
            dir: dir.to_owned(),
            kind,
        }))
    };
    if sharded::index::is_index_name(file) {
        return key(KeyKind::Index(file.to_owned()));
    }
    if let Some(name) = SplitName::parse(file) {
        return key(KeyKind::Split(name.base));
    }
    let lower = file.to_ascii_lowercase();
    if !lower.ends_with(".safetensors") && !lower.ends_with(".bin") {
        return Ok(None);
    }
    for snapshot in snapshots {
        let listing = listings.get(repo, snapshot, dir)?;
        if let Some(index) = listing
            .indexes
            .iter()
            .find(|index| sharded::shard_of_index_name(file, index))
        {
            return key(KeyKind::Index(index.clone()));
        }
    }
    Ok(None)
}

/// The model `key` names in `snapshot`: its name and side, or None when no file of it is there.
fn open_model(
    reader: &SideReader<'_>,
    listings: &mut Listings,
    snapshot: Snapshot<'_>,
    key: &ModelKey,
) -> Result<Option<(String, ModelSide)>, GitError> {
    let repo = reader.repo().expect("models are read from a repository");
    let listing = listings.get(repo, snapshot, &key.dir)?;
    let names = &listing.names;
    let in_dir = |file: &str| in_dir(&key.dir, file);
    let dir = SnapshotDir {
        reader,
        snapshot,
        dir: &key.dir,
        listing: &listing,
        from_server: Default::default(),
    };
    let result = match &key.kind {
        KeyKind::Index(index) => {
            if !names.contains(index) {
                let shards = names.iter().any(|n| sharded::shard_of_index_name(n, index));
                if !shards {
                    return Ok(None);
                }
                let missing = ShardError::MissingPart {
                    file: dir.label(index),
                    expected_by: "the shards named like it".to_owned(),
                };
                return Ok(Some((in_dir(index), unassembled(missing))));
            }
            (in_dir(index), sharded::open_index(&dir, index, names))
        }
        KeyKind::Split(base) => {
            let Some(name) = names
                .iter()
                .filter_map(|n| SplitName::parse(n))
                .find(|n| &n.base == base)
            else {
                return Ok(None);
            };
            (
                in_dir(&name.model_name()),
                sharded::open_split(&dir, &name, names, None),
            )
        }
    };
    let (name, opened) = result;
    Ok(Some((name, dir.side_of(opened))))
}

fn unassembled(error: ShardError) -> ModelSide {
    ModelSide::Unassembled {
        error: Box::new(error),
    }
}

/// Directory listings read so far, per snapshot and directory: each is read once.
#[derive(Default)]
struct Listings {
    cache: HashMap<(ListingOf, String), Rc<Listing>>,
    /// How many listings were read (for the test that keeps this linear).
    reads: usize,
}

/// Which snapshot a listing is of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ListingOf {
    Tree(String),
    WorkTree,
    Index,
}

/// The files of one directory of one snapshot, sorted by name.
struct Listing {
    entries: Vec<(String, Listed)>,
    /// The same names, for the core's multi-file reader.
    names: Vec<String>,
    /// The index files among them (`*.safetensors.index.json`, ...).
    indexes: Vec<String>,
}

impl Listing {
    fn new(mut entries: Vec<(String, Listed)>) -> Listing {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<String> = entries.iter().map(|(name, _)| name.clone()).collect();
        let indexes = names
            .iter()
            .filter(|n| sharded::index::is_index_name(n))
            .cloned()
            .collect();
        Listing {
            entries,
            names,
            indexes,
        }
    }

    /// The file `name`, found by binary search.
    fn get(&self, name: &str) -> Option<&Listed> {
        let i = self
            .entries
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()?;
        Some(&self.entries[i].1)
    }
}

/// A file of a listed directory.
#[derive(Debug, Clone)]
enum Listed {
    Blob(ObjectId),
    Link,
    File(PathBuf),
}

impl Listings {
    fn get(
        &mut self,
        repo: &gix::Repository,
        snapshot: Snapshot<'_>,
        dir: &str,
    ) -> Result<Rc<Listing>, GitError> {
        let of = match snapshot {
            Snapshot::Tree { rev, .. } => ListingOf::Tree(rev.to_owned()),
            Snapshot::WorkTree => ListingOf::WorkTree,
            Snapshot::Index => ListingOf::Index,
        };
        let key = (of, dir.to_owned());
        if let Some(listing) = self.cache.get(&key) {
            return Ok(listing.clone());
        }
        let listing = Rc::new(Listing::new(list(repo, snapshot, dir)?));
        self.reads += 1;
        self.cache.insert(key, listing.clone());
        Ok(listing)
    }
}

fn list(
    repo: &gix::Repository,
    snapshot: Snapshot<'_>,
    dir: &str,
) -> Result<Vec<(String, Listed)>, GitError> {
    match snapshot {
        Snapshot::Tree { rev, .. } => Ok(dir_entries(repo, rev, dir)?
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, entry)| match entry {
                Entry::File(id) => Some((name, Listed::Blob(id))),
                Entry::Link(_) => Some((name, Listed::Link)),
                Entry::Dir | Entry::Submodule => None,
            })
            .collect()),
        Snapshot::Index => {
            let index = repo.index_or_empty().map_err(|e| GitError::Index {
                path: repo.index_path(),
                message: e.to_string(),
            })?;
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let mut out = Vec::new();
            // The index is sorted by path: the directory's entries are found by binary search,
            // not by a walk of the whole index for each directory.
            let entries = if prefix.is_empty() {
                index.entries()
            } else {
                index
                    .prefixed_entries(prefix.as_str().into())
                    .unwrap_or_default()
            };
            for entry in entries {
                use gix::index::entry::{Flags, Stage};
                if entry.stage() != Stage::Unconflicted
                    || entry.flags.contains(Flags::INTENT_TO_ADD)
                {
                    continue;
                }
                let path = entry.path(&index).to_string();
                let Some(name) = path.strip_prefix(&prefix).filter(|n| !n.contains('/')) else {
                    continue;
                };
                match super::objects::index_mode_entry(entry.mode, entry.id) {
                    Entry::File(id) => out.push((name.to_owned(), Listed::Blob(id))),
                    Entry::Link(_) => out.push((name.to_owned(), Listed::Link)),
                    Entry::Dir | Entry::Submodule => {}
                }
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        }
        Snapshot::WorkTree => {
            let root = repo
                .workdir()
                .ok_or_else(|| GitError::Bare(repo.git_dir().to_owned()))?;
            let path = root.join(dir);
            let Ok(read) = std::fs::read_dir(&path) else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for entry in read.flatten() {
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                match entry.file_type() {
                    Ok(t) if t.is_symlink() => out.push((name, Listed::Link)),
                    Ok(t) if t.is_file() => out.push((name, Listed::File(entry.path()))),
                    _ => {}
                }
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        }
    }
}

/// A directory of a snapshot, as the core's multi-file reader sees it.
struct SnapshotDir<'a> {
    reader: &'a SideReader<'a>,
    snapshot: Snapshot<'a>,
    dir: &'a str,
    listing: &'a Listing,
    /// Set once a part's header came from the LFS server (not verified against its oid).
    from_server: std::cell::Cell<bool>,
}

impl SnapshotDir<'_> {
    fn repo(&self) -> &gix::Repository {
        self.reader
            .repo()
            .expect("models are read from a repository")
    }

    /// The side of a model opened from this directory: the model (marked when a part's
    /// header came from the LFS server), or why its files do not read as one.
    fn side_of(&self, opened: Result<Artifact, ShardError>) -> ModelSide {
        match opened {
            Ok(artifact) => {
                let mut side = ModelSide::model(artifact, None);
                if let ModelSide::Read { from_server, .. } = &mut side {
                    *from_server = self.from_server.get();
                }
                side
            }
            Err(e) => unassembled(e),
        }
    }

    fn path(&self, file: &str) -> String {
        in_dir(self.dir, file)
    }

    fn find(&self, file: &str) -> Result<&Listed, ShardError> {
        self.listing
            .get(file)
            .ok_or_else(|| ShardError::Unreadable {
                file: self.label(file),
                message: "no such file".to_owned(),
            })
    }

    fn unreadable(&self, file: &str, message: impl Into<String>) -> ShardError {
        ShardError::Unreadable {
            file: self.label(file),
            message: message.into(),
        }
    }
}

impl Directory for SnapshotDir<'_> {
    fn label(&self, file: &str) -> String {
        match self.snapshot {
            Snapshot::Tree { label, .. } => format!("{label}:{}", self.path(file)),
            Snapshot::Index => format!(":{}", self.path(file)),
            Snapshot::WorkTree => self.path(file),
        }
    }

    fn file_names(&self) -> Result<Vec<String>, ShardError> {
        Ok(self.listing.names.clone())
    }

    fn read_small(&self, file: &str, limit: u64) -> Result<Vec<u8>, ShardError> {
        match self.find(file)? {
            Listed::Blob(id) => {
                let size = self
                    .repo()
                    .find_header(*id)
                    .map_err(|e| self.unreadable(file, e.to_string()))?
                    .size();
                if size > limit {
                    return Err(self.unreadable(
                        file,
                        format!("{size} bytes, more than the {limit} an index may have"),
                    ));
                }
                blob_bytes(self.repo(), *id).map_err(|e| self.unreadable(file, e.to_string()))
            }
            Listed::File(path) => {
                let dir = crate::read::FsDirectory::new(path.parent().unwrap_or(Path::new(".")));
                dir.read_small(file, limit)
            }
            Listed::Link => {
                Err(self.unreadable(file, "a symbolic link, not a file (links are not followed)"))
            }
        }
    }

    fn read_model(&self, file: &str) -> Result<Artifact, ShardError> {
        // A part whose LFS object is not here: its header from the LFS server, like a file's.
        let side = match self.find(file)? {
            Listed::Blob(id) => {
                let bytes = blob_bytes(self.repo(), *id)
                    .map_err(|e| self.unreadable(file, e.to_string()))?;
                self.reader.blob_bytes(&bytes, &self.label(file))
            }
            Listed::File(path) => self.reader.file(path),
            Listed::Link => {
                return Err(
                    self.unreadable(file, "a symbolic link, not a file (links are not followed)")
                );
            }
        };
        if side.header_from_server() {
            self.from_server.set(true);
        }
        let note = side.note();
        side.into_artifact()
            .map(|artifact| *artifact)
            .ok_or_else(|| self.unreadable(file, note.unwrap_or_default()))
    }
}

/// What `path` names in `rev` when that is a multi-file model: a directory holding one model,
/// an index file, or a part of a split GGUF. None for anything else (a single file is read as
/// such by the caller).
pub(crate) fn open_at(
    reader: &SideReader<'_>,
    rev: &str,
    path: &str,
) -> Result<Option<ModelSide>, GitError> {
    open_in(reader, Snapshot::Tree { rev, label: rev }, path)
}

/// [`open_at`] in any snapshot: a commit's tree, or the work tree (where the parts may be LFS
/// pointer texts of a checkout without LFS content). `path` is relative to the work-tree root.
pub(crate) fn open_in(
    reader: &SideReader<'_>,
    snapshot: Snapshot<'_>,
    path: &str,
) -> Result<Option<ModelSide>, GitError> {
    let repo = reader.repo().expect("models are read from a repository");
    let mut listings = Listings::default();
    let path = path.trim_end_matches('/');
    let is_dir = match snapshot {
        Snapshot::Tree { rev, .. } => matches!(
            super::objects::tree_entry(repo, rev, path)?,
            Some(Entry::Dir)
        ),
        Snapshot::WorkTree => repo.workdir().is_some_and(|root| root.join(path).is_dir()),
        Snapshot::Index => false,
    };
    let (dir_path, file) = if is_dir { (path, "") } else { split_path(path) };
    let listing = listings.get(repo, snapshot, dir_path)?;
    let names = &listing.names;
    let dir = SnapshotDir {
        reader,
        snapshot,
        dir: dir_path,
        listing: &listing,
        from_server: Default::default(),
    };
    let opened = if is_dir {
        sharded::open_directory(&dir, dir.label("").trim_end_matches('/'))
    } else if sharded::index::is_index_name(file) {
        sharded::open_index(&dir, file, names)
    } else if let Some(name) = SplitName::parse(file) {
        let Ok(part) = dir.read_model(file) else {
            return Ok(None);
        };
        if !sharded::split::is_part(&part) {
            return Ok(None);
        }
        let number = name.number;
        sharded::open_split(&dir, &name, names, Some((number, part)))
    } else {
        return Ok(None);
    };
    Ok(Some(dir.side_of(opened)))
}

/// The multi-file model the directory `dir` holds in `snapshot` (its one index or split GGUF),
/// read as one model; None when it holds none. A directory with several is unassembled.
pub(crate) fn open_directory(
    reader: &SideReader<'_>,
    snapshot: Snapshot<'_>,
    dir: &str,
) -> Result<Option<ModelSide>, GitError> {
    let repo = reader.repo().expect("models are read from a repository");
    let mut listings = Listings::default();
    let listing = listings.get(repo, snapshot, dir)?;
    let names = &listing.names;
    let multi: Vec<sharded::Candidate> = sharded::candidates(names)
        .into_iter()
        .filter(|c| !matches!(c, sharded::Candidate::Single(_)))
        .collect();
    let source = SnapshotDir {
        reader,
        snapshot,
        dir,
        listing: &listing,
        from_server: Default::default(),
    };
    let opened = match multi.as_slice() {
        [] => return Ok(None),
        [one] => sharded::open_candidate(&source, one, names),
        several => Err(ShardError::Ambiguous {
            dir: source.label(""),
            candidates: several.iter().map(sharded::Candidate::name).collect(),
        }),
    };
    Ok(Some(source.side_of(opened)))
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::path::Path;
    use std::process::Command;

    use super::*;
    use crate::git::changes::{PathFilter, changed_model_files};

    /// Counts the allocations of the thread that makes them: the grouping runs on the test's
    /// thread, so other tests running meanwhile do not disturb its count.
    struct Counting;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    fn count() {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }

    // SAFETY: every call is passed on to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// Two commits that change every file of `small/` (`SMALL` files) and `large/` (`LARGE`
    /// files); each directory also holds a two-shard model with its index.
    const SMALL: usize = 200;
    const LARGE: usize = 800;

    fn write_version(root: &Path, version: u32) {
        for (dir, n) in [("small", SMALL), ("large", LARGE)] {
            let dir = root.join(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..n {
                let text = format!("file {i} version {version}\n");
                std::fs::write(dir.join(format!("f-{i:05}.safetensors")), text).unwrap();
            }
            for shard in 1..=2 {
                let name = format!("model-{shard:05}-of-00002.safetensors");
                std::fs::write(dir.join(name), format!("{shard} {version}")).unwrap();
            }
            let index = r#"{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#;
            std::fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
        }
    }

    /// Groups the changes under `dir/`: the allocations it made, the listings it read, and the
    /// groups and single files it found.
    fn group_counted(repo: &gix::Repository, dir: &str) -> (u64, usize, usize, usize) {
        let filter = PathFilter::new(&[dir.to_owned()]).unwrap();
        let changes = changed_model_files(repo, "HEAD~1", Some("HEAD"), &filter).unwrap();
        let snapshots = [
            Snapshot::Tree {
                rev: "HEAD~1",
                label: "HEAD~1",
            },
            Snapshot::Tree {
                rev: "HEAD",
                label: "HEAD",
            },
        ];
        let mut listings = Listings::default();
        let before = ALLOCATIONS.with(Cell::get);
        let grouped = group(repo, &mut listings, snapshots, changes).unwrap();
        let allocations = ALLOCATIONS.with(Cell::get) - before;
        (
            allocations,
            listings.reads,
            grouped.groups.len(),
            grouped.singles.len(),
        )
    }

    #[test]
    fn grouping_is_linear_in_changes_and_directory_size() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q", "-b", "main"]);
        write_version(root, 1);
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "v1"]);
        write_version(root, 2);
        git(root, &["add", "-A"]);
        git(root, &["commit", "-qm", "v2"]);
        let repo = crate::git::open_repo(root).unwrap();

        let (small, small_reads, groups, singles) = group_counted(&repo, "small");
        // One listing of the directory per snapshot, however many files changed in it.
        assert_eq!(small_reads, 2);
        assert_eq!((groups, singles), (1, SMALL));
        let (large, large_reads, groups, singles) = group_counted(&repo, "large");
        assert_eq!(large_reads, 2);
        assert_eq!((groups, singles), (1, LARGE));

        // Four times the changes in a four times larger directory: about four times the
        // allocations when the work per change is constant, sixteen when each change walks
        // (or copies) its directory's listing.
        let per_change = |allocations: u64, n: usize| allocations as f64 / n as f64;
        let (small, large) = (per_change(small, SMALL), per_change(large, LARGE));
        assert!(
            large <= 1.5 * small,
            "allocations per change grew from {small:.1} ({SMALL} files) to {large:.1} \
             ({LARGE} files): the grouping is not linear"
        );
    }
}
