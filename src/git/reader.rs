//! Reading what the files of a repository are, without smudging: blobs, work-tree files and the
//! files git hands its drivers become [`ModelSide`]s. LFS pointers lead to the local object
//! store (only the header pages of an object are read); an object that is not there is read
//! from the repository's LFS server — only its header, once per command for all the sides read
//! together, and kept in `<git dir>/weight-inspect/lfs-headers-v2/` so a second look needs no
//! network — unless remote reads are off (`--offline`, `git config weight-inspect.remote
//! false`).

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::changes::FileChange;
use super::config::GitConfig;
use super::error::GitError;
use super::lfs::{self, ObjectStore, Pointer};
use super::lfs_server::Server;
use super::objects::{blob_bytes, open_repo};
use super::side::{ModelSide, RemoteMiss};
use crate::digest::{sha256_file, sha256_hex};
use crate::read::{Content, HeaderStep, header_step};
use crate::remote::HeaderCache;
use crate::remote::ObjectOutcome;
use crate::remote::{LfsObject, download_actions};
use crate::remote::{RemoteHeader, read_header};

/// What the command line says about remote reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct RemoteOptions {
    /// `--offline`: never ask a server.
    pub offline: bool,
    /// `--remote NAME`: the remote whose LFS server to ask.
    pub remote: Option<String>,
}

impl RemoteOptions {
    /// Remote reads allowed, from the default remote (what git's drivers and hooks get).
    pub(crate) const ONLINE: RemoteOptions = RemoteOptions {
        offline: false,
        remote: None,
    };
}

/// Concurrent header reads of one command.
const WORKERS: usize = 4;
/// Headers read from the server and held at once before they become sides (raw prefixes of
/// up to the header cap each).
const HEADER_WINDOW: usize = 2 * WORKERS;

/// The repository a reader reads from: borrowed from the command, or opened for it.
enum RepoRef<'r> {
    Borrowed(&'r gix::Repository),
    Owned(Box<gix::Repository>),
}

/// Reads sides for one command: the repository, the remote options, and the LFS server (found
/// at the first absent object, then reused).
pub(crate) struct SideReader<'r> {
    repo: Option<RepoRef<'r>>,
    options: RemoteOptions,
    server: OnceCell<Result<Option<Server>, Arc<GitError>>>,
    /// The header bytes of the model sides read so far, to size the next batch.
    headers: HeaderSizes,
}

impl<'r> SideReader<'r> {
    pub(crate) fn new(repo: &'r gix::Repository, options: &RemoteOptions) -> SideReader<'r> {
        SideReader {
            repo: Some(RepoRef::Borrowed(repo)),
            options: options.clone(),
            server: OnceCell::new(),
            headers: HeaderSizes::default(),
        }
    }

    /// For files named on the command line and files git hands its drivers: the repository of
    /// the current directory (where git runs drivers), else the one holding `near`; without
    /// one, LFS pointers are read as absent.
    pub(crate) fn around(near: Option<&Path>, options: &RemoteOptions) -> SideReader<'static> {
        let near = near.filter(|d| !d.as_os_str().is_empty());
        let repo = open_repo(Path::new("."))
            .ok()
            .or_else(|| near.and_then(|d| open_repo(d).ok()));
        SideReader {
            repo: repo.map(|r| RepoRef::Owned(Box::new(r))),
            options: options.clone(),
            server: OnceCell::new(),
            headers: HeaderSizes::default(),
        }
    }

    /// The LFS object store of the repository, if there is one.
    fn store(&self) -> Option<ObjectStore> {
        self.repo().map(ObjectStore::new)
    }

    pub(crate) fn repo(&self) -> Option<&gix::Repository> {
        self.repo.as_ref().map(|r| match r {
            RepoRef::Borrowed(repo) => *repo,
            RepoRef::Owned(repo) => repo.as_ref(),
        })
    }

    /// The side of blob `id`, named `name` (`REV:path`) in messages.
    pub(crate) fn blob(&self, id: gix::ObjectId, name: &str) -> Result<ModelSide, GitError> {
        let repo = self.repo().expect("blobs are read from a repository");
        let bytes = blob_bytes(repo, id)?;
        Ok(self.blob_bytes(&bytes, name))
    }

    /// The side of a blob's bytes: an LFS pointer is followed, anything else parsed.
    pub(crate) fn blob_bytes(&self, bytes: &[u8], name: &str) -> ModelSide {
        let mut side = local_blob(self.store().as_ref(), bytes, name);
        self.complete(vec![(name.to_owned(), &mut side)]);
        side
    }

    /// The side of a file: a model, or an LFS pointer to one (a work tree checked out with
    /// `GIT_LFS_SKIP_SMUDGE=1`, or the pointer git hands a driver when smudging is skipped).
    pub(crate) fn file(&self, file: &Path) -> ModelSide {
        self.file_as(file, &file.display().to_string())
    }

    /// [`Self::file`] for a file that stands for `name` in messages (a driver's temporary
    /// copy of a repository path).
    pub(crate) fn file_as(&self, file: &Path, name: &str) -> ModelSide {
        let mut side = local_file(self.store().as_ref(), file);
        self.complete(vec![(name.to_owned(), &mut side)]);
        side
    }

    /// Both sides of the leading changes of `changes` whose headers fit `budget` bytes (None
    /// for an added file's old side and a removed file's new side), in order: at least the
    /// first change, whatever its size; reading stops once the headers read hold `budget`
    /// bytes, and the caller reads the rest in a later call. The old side is read at
    /// `old_rev`, the new one at `new_rev` or in the work tree. Absent LFS objects among them
    /// are asked of the server in one batch.
    #[allow(clippy::type_complexity)]
    pub(crate) fn change_sides_within(
        &self,
        changes: &[FileChange],
        old_rev: &str,
        new_rev: &str,
        budget: u64,
    ) -> Result<Vec<(Option<ModelSide>, Option<ModelSide>)>, GitError> {
        let repo = self.repo().expect("changes are read from a repository");
        let store = ObjectStore::new(repo);
        // Blobs are read here (gix's handle stays on this thread), a bounded batch at a time;
        // their headers are parsed on all cores, in order.
        let mut sides = Vec::with_capacity(changes.len().min(BATCH_SIDES));
        let mut batch: Vec<(Unparsed, Unparsed)> = Vec::new();
        let mut batch_bytes = 0;
        let mut held = 0;
        let parse = |batch: &mut Vec<(Unparsed, Unparsed)>, sides: &mut Vec<_>| {
            let before = sides.len();
            sides.par_extend(
                batch
                    .par_drain(..)
                    .map(|(old, new)| (old.parse(&store), new.parse(&store))),
            );
            sides[before..]
                .iter()
                .map(|pair| self.headers.note_pair(pair))
                .sum::<u64>()
        };
        for change in changes {
            let old = unparsed_side(repo, change, Which::Old, old_rev)?;
            let new = unparsed_side(repo, change, Which::New, new_rev)?;
            batch_bytes += old.held_bytes() + new.held_bytes();
            batch.push((old, new));
            if batch.len()
                >= self
                    .headers
                    .batch_len(BATCH_SIDES, budget.saturating_sub(held))
                || batch_bytes >= BATCH_BYTES
            {
                held += parse(&mut batch, &mut sides);
                batch_bytes = 0;
                if held >= budget {
                    break;
                }
            }
        }
        held += parse(&mut batch, &mut sides);
        // Each named side with the change it belongs to.
        let mut named = Vec::new();
        let mut change_of = Vec::new();
        for (k, (change, (old, new))) in changes.iter().zip(&mut sides).enumerate() {
            if let (Some(side), Some(path)) = (old.as_mut(), &change.old_path) {
                named.push((path.clone(), side));
                change_of.push(k);
            }
            if let (Some(side), Some(path)) = (new.as_mut(), &change.new_path) {
                named.push((path.clone(), side));
                change_of.push(k);
            }
        }
        let first_change = change_of.iter().take_while(|&&k| k == 0).count();
        let settled = self.complete_within(named, budget.saturating_sub(held), first_change);
        if let Some(&unsettled) = change_of.get(settled) {
            sides.truncate(unsettled.max(1));
        }
        Ok(sides)
    }

    /// Reads the headers of the LFS objects `pointers` (each with its name for messages) that
    /// are not in the local store into the header cache, in one batch: the multi-file reader
    /// then finds each part there instead of asking the server once per part.
    pub(crate) fn prefetch(&self, pointers: Vec<(String, Pointer)>) {
        let Some(repo) = self.repo() else { return };
        let store = lfs::storage_dir(repo);
        let mut absent: Vec<(String, ModelSide)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, pointer) in pointers {
            let here = lfs::present_in(&store, &pointer).is_some();
            if !here && seen.insert(pointer.clone()) {
                absent.push((
                    name,
                    ModelSide::Absent {
                        pointer,
                        remote: None,
                    },
                ));
            }
        }
        if absent.len() <= 1 {
            return;
        }
        // The cache is what is filled: the sides made are dropped a window of header bytes at
        // a time, not held for every part of every model.
        let mut rest = &mut absent[..];
        while !rest.is_empty() {
            let settled = self.complete_within(
                rest.iter_mut()
                    .map(|(name, side)| (name.clone(), side))
                    .collect(),
                WINDOW_HEADER_BYTES,
                1,
            );
            for (_, side) in &mut rest[..settled] {
                if let Some(pointer) = side.pointer().cloned() {
                    *side = ModelSide::Absent {
                        pointer,
                        remote: None,
                    };
                }
            }
            rest = &mut rest[settled..];
        }
    }

    /// The header of an absent LFS object as bytes (a prefix of the object) and as the model
    /// they describe, from the cache or the LFS server: for readers of bytes (the policy). None
    /// when remote reads are off or there is no server to ask; an error says why the server
    /// did not give a model's header.
    pub(crate) fn header_prefix(
        &self,
        name: &str,
        pointer: &Pointer,
    ) -> Option<Result<(Vec<u8>, crate::artifact::Artifact), HeaderMiss>> {
        let repo = self.repo()?;
        let mut side = ModelSide::Absent {
            pointer: pointer.clone(),
            remote: None,
        };
        self.complete(vec![(name.to_owned(), &mut side)]);
        match side {
            ModelSide::Absent { remote: None, .. } => None,
            ModelSide::Absent {
                remote: Some(why), ..
            } => Some(Err(HeaderMiss::Remote(why))),
            other if other.artifact().is_none() => Some(Err(HeaderMiss::NotModel(Box::new(other)))),
            other => {
                let artifact = other.into_artifact().expect("checked above");
                let prefix = header_cache(repo).get(&pointer.oid, pointer.size);
                Some(prefix.map(|p| (p, *artifact)).ok_or(HeaderMiss::Uncached))
            }
        }
    }

    /// Replaces every absent side among `sides` (each with the name messages use for it) by
    /// the model its header describes: from the header cache, else from the LFS server in one
    /// batch request. A side that cannot be read stays absent with the reason.
    fn complete(&self, sides: Vec<(String, &mut ModelSide)>) {
        self.complete_within(sides, u64::MAX, 0);
    }

    /// [`Self::complete`] until the headers read hold `budget` bytes: returns how many of
    /// `sides` (a prefix, in order) are settled; the others are left as they were, for a
    /// later call. The first `at_least` sides are always settled.
    fn complete_within(
        &self,
        sides: Vec<(String, &mut ModelSide)>,
        budget: u64,
        at_least: usize,
    ) -> usize {
        let total = sides.len();
        let mut pending: Vec<(usize, String, &mut ModelSide)> = sides
            .into_iter()
            .enumerate()
            .filter(|(_, (_, side))| matches!(side, ModelSide::Absent { remote: None, .. }))
            .map(|(i, (name, side))| (i, name, side))
            .collect();
        let Some(repo) = self.repo() else {
            return total;
        };
        if pending.is_empty() {
            return total;
        }
        let cache = header_cache(repo);
        let mut held = 0;
        let mut settled = total;
        let mut missed = Vec::with_capacity(pending.len());
        for (i, name, side) in pending.drain(..) {
            if held >= budget && i >= at_least {
                settled = i;
                break;
            }
            let pointer = side.pointer().expect("absent sides have a pointer").clone();
            match cached_side(&cache, &name, &pointer) {
                Some(model) => {
                    held += self.headers.note(header_bytes(&model));
                    *side = model;
                }
                None => missed.push((i, name, side)),
            }
        }
        let mut pending = missed;
        if pending.is_empty() || self.options.offline {
            return settled;
        }
        let server = match self.server.get_or_init(|| self.discover(repo)) {
            Ok(Some(server)) => server,
            // No LFS server is configured (no remote, or a local one): the usual hint stands.
            Ok(None) => return settled,
            Err(e) => {
                mark_all(&mut pending, &RemoteMiss::Server(e.clone()));
                return settled;
            }
        };
        // One object per oid (several sides may share one), with the sides waiting for it.
        let mut index_of: HashMap<String, usize> = HashMap::new();
        let mut objects: Vec<LfsObject> = Vec::new();
        let mut waiting: Vec<Vec<usize>> = Vec::new();
        for (k, (_, _, side)) in pending.iter().enumerate() {
            let p = side.pointer().expect("absent sides have a pointer");
            let o = *index_of.entry(p.oid.clone()).or_insert_with(|| {
                objects.push(LfsObject {
                    oid: p.oid.clone(),
                    size: p.size,
                });
                waiting.push(Vec::new());
                objects.len() - 1
            });
            waiting[o].push(k);
        }
        let outcomes = match download_actions(
            &server.client,
            &server.endpoint,
            &server.credentials,
            &objects,
        ) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                mark_all(&mut pending, &RemoteMiss::Batch(Arc::new(e)));
                return settled;
            }
        };
        let progress = crate::progress::Progress::new(
            objects.len() as u64,
            crate::progress::Unit::Items,
            "LFS headers",
        );
        // Network reads wait, they do not compute: a pool of their own, not rayon's global one.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(WORKERS.min(objects.len()).max(1))
            .build()
            .ok();
        // A window of headers at a time: each becomes its sides (a model's header is parsed and
        // cached) before the next window is read, so the raw headers held at once are bounded
        // by the window, not by the number of absent objects; reading stops once the sides
        // made hold `budget` bytes of headers.
        let mut start = 0;
        while start < objects.len() {
            let first_waiting = pending[waiting[start][0]].0;
            if held >= budget && first_waiting >= at_least {
                settled = settled.min(first_waiting);
                break;
            }
            let len = self
                .headers
                .batch_len(HEADER_WINDOW, budget.saturating_sub(held));
            let end = (start + len).min(objects.len());
            let window = (&objects[start..end], &outcomes[start..end]);
            let results = read_all(server, window, &progress, pool.as_ref());
            for (k, result) in (start..end).zip(results) {
                for &w in &waiting[k] {
                    let (_, name, side) = &mut pending[w];
                    let pointer = side.pointer().expect("absent sides have a pointer").clone();
                    **side = match &result {
                        Ok(header) => side_of_header(&cache, name, pointer, header),
                        Err(why) => ModelSide::Absent {
                            pointer,
                            remote: Some(why.clone()),
                        },
                    };
                    held += self.headers.note(header_bytes(side));
                }
            }
            start = end;
        }
        settled
    }

    /// The LFS server to ask, found once per reader: None when remote reads are turned off in
    /// git's configuration or there is no server.
    fn discover(&self, repo: &gix::Repository) -> Result<Option<Server>, Arc<GitError>> {
        // git runs in the work tree, or in the git directory of a bare repository.
        let workdir = repo.workdir().unwrap_or_else(|| repo.git_dir());
        let config = GitConfig::load(workdir)?;
        if config.bool("weight-inspect.remote") == Some(false) {
            return Ok(None);
        }
        Ok(Server::discover(
            repo,
            workdir,
            &config,
            self.options.remote.as_deref(),
        )?)
    }
}

/// Header bytes a window of `git diff` and `ci` holds at most (both sides of its files, as
/// parsed models; at least one file per window, whatever its size), and the LFS header cache
/// fill at once: 20 files with 25 MB headers are 1 GB of headers, which a window of 256 files
/// would hold at once. docs/SPEC.md §5c.
pub(crate) const WINDOW_HEADER_BYTES: u64 = 128 << 20;

/// Changes whose sides are read from git before their headers are parsed on all cores.
const BATCH_SIDES: usize = 256;
/// Blob bytes held at once for a batch (a model committed without LFS is a whole blob).
const BATCH_BYTES: usize = 64 << 20;

/// The header bytes of the model sides a reader has made: their mean sizes the next batch, so
/// that a batch of large headers stops near the budget of a window instead of far past it.
#[derive(Default)]
struct HeaderSizes {
    /// Bytes and number of model sides.
    seen: std::cell::Cell<(u64, u64)>,
}

impl HeaderSizes {
    /// Counts a side of `bytes` header bytes (0: not a model); returns `bytes`.
    fn note(&self, bytes: u64) -> u64 {
        if bytes > 0 {
            let (sum, count) = self.seen.get();
            self.seen.set((sum.saturating_add(bytes), count + 1));
        }
        bytes
    }

    /// [`Self::note`] for both sides of a change.
    fn note_pair(&self, (old, new): &(Option<ModelSide>, Option<ModelSide>)) -> u64 {
        [old, new]
            .into_iter()
            .flatten()
            .map(|side| self.note(header_bytes(side)))
            .sum()
    }

    /// How many items (of up to two sides each) to read in the next batch, at most `max`,
    /// at least one: as many as the mean header fits in `room` bytes; a few before any is
    /// known.
    fn batch_len(&self, max: usize, room: u64) -> usize {
        if room == u64::MAX {
            return max;
        }
        match self.seen.get() {
            (_, 0) => max.min(FIRST_BATCH),
            (sum, count) => {
                let per_item = (sum / count).max(1).saturating_mul(2);
                usize::try_from(room / per_item)
                    .unwrap_or(max)
                    .clamp(1, max)
            }
        }
    }
}

/// Items read in a budgeted batch before any header size is known.
const FIRST_BATCH: usize = 4;

/// The header bytes a side holds: its model's header (all parts, for a multi-file model).
fn header_bytes(side: &ModelSide) -> u64 {
    side.artifact().map_or(0, |a| a.layout.header_size.max(1))
}

/// A side as read on the command's thread, before its header is parsed.
enum Unparsed {
    Done(Option<ModelSide>),
    Blob { bytes: Vec<u8>, name: String },
    File(PathBuf),
}

impl Unparsed {
    fn held_bytes(&self) -> usize {
        match self {
            Unparsed::Blob { bytes, .. } => bytes.len(),
            _ => 0,
        }
    }

    /// The side, with LFS objects looked up in the store `store`.
    fn parse(self, store: &ObjectStore) -> Option<ModelSide> {
        match self {
            Unparsed::Done(side) => side,
            Unparsed::Blob { bytes, name } => Some(local_blob(Some(store), &bytes, &name)),
            Unparsed::File(file) => Some(local_file(Some(store), &file)),
        }
    }
}

fn unparsed_side(
    repo: &gix::Repository,
    change: &FileChange,
    which: Which,
    rev: &str,
) -> Result<Unparsed, GitError> {
    let (id, path, link) = match which {
        Which::Old => (change.old_id, change.old_path.as_deref(), change.old_link),
        Which::New => (change.new_id, change.new_path.as_deref(), change.new_link),
    };
    let worktree = match which {
        Which::Old => None,
        Which::New => change.new_worktree.as_deref(),
    };
    if link {
        if let Some(file) = worktree {
            let target = std::fs::read_link(file).map_err(|source| GitError::Io {
                path: file.to_owned(),
                source,
            })?;
            return Ok(Unparsed::Done(Some(ModelSide::Link {
                target: target.to_string_lossy().into_owned(),
            })));
        }
        let Some(id) = id else {
            return Ok(Unparsed::Done(None));
        };
        return Ok(Unparsed::Done(Some(ModelSide::Link {
            target: super::objects::link_target(repo, id)?,
        })));
    }
    if let Some(file) = worktree {
        return Ok(Unparsed::File(file.to_owned()));
    }
    let (Some(id), Some(path)) = (id, path) else {
        return Ok(Unparsed::Done(None));
    };
    Ok(Unparsed::Blob {
        bytes: blob_bytes(repo, id)?,
        name: format!("{rev}:{path}"),
    })
}

/// A blob's side from what is on this machine.
/// `store`: the repository's LFS object store, if there is a repository.
fn local_blob(store: Option<&ObjectStore>, bytes: &[u8], name: &str) -> ModelSide {
    if let Some(pointer) = Pointer::parse(bytes) {
        return local_pointer(store, pointer);
    }
    from_bytes(Path::new(name), bytes, None)
}

/// A file's side from what is on this machine.
fn local_file(store: Option<&ObjectStore>, file: &Path) -> ModelSide {
    let meta = match std::fs::metadata(file) {
        Ok(meta) => meta,
        Err(e) => {
            return ModelSide::Unreadable {
                error: Box::new(crate::error::Error::io(file, e)),
            };
        }
    };
    if !meta.is_file() {
        let not_regular = std::io::Error::other(
            "is not a regular file (a device, FIFO or socket), expected a model file",
        );
        return ModelSide::Unreadable {
            error: Box::new(crate::error::Error::io(file, not_regular)),
        };
    }
    if meta.len() < lfs::MAX_POINTER_SIZE as u64
        && let Ok(bytes) = std::fs::read(file)
    {
        if let Some(pointer) = Pointer::parse(&bytes) {
            return local_pointer_near(store, pointer, file);
        }
        return from_bytes(file, &bytes, None);
    }
    from_path(file, meta.len(), None, None)
}

fn local_pointer(store: Option<&ObjectStore>, pointer: Pointer) -> ModelSide {
    match store.and_then(|store| store.open_present(&pointer)) {
        Some((object, file)) => {
            let content = crate::read::classify_opened(&object, &file, pointer.size);
            let (size, sha) = (pointer.size, pointer.oid.clone());
            from_content(&object, content, size, Some(sha), Some(pointer))
        }
        None => ModelSide::Absent {
            pointer,
            remote: None,
        },
    }
}

/// A pointer file's object: in the reader's repository, else in the one holding the file.
fn local_pointer_near(store: Option<&ObjectStore>, pointer: Pointer, file: &Path) -> ModelSide {
    let side = local_pointer(store, pointer);
    let ModelSide::Absent { pointer, .. } = &side else {
        return side;
    };
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    match open_repo(dir)
        .ok()
        .and_then(|repo| lfs::present_object(&repo, pointer))
    {
        Some(object) => {
            let (size, sha) = (pointer.size, pointer.oid.clone());
            from_path(&object, size, Some(sha), Some(pointer.clone()))
        }
        None => side,
    }
}

#[derive(Clone, Copy)]
enum Which {
    Old,
    New,
}

/// The cache of headers read from LFS servers: in the common git directory (shared by linked
/// work trees), outside the LFS store.
pub(crate) fn header_cache(repo: &gix::Repository) -> HeaderCache {
    HeaderCache::new(cache_dir(repo))
}

pub(super) fn cache_dir(repo: &gix::Repository) -> PathBuf {
    // v2: a PyTorch zip's header is kept only after the zip directory at its end agreed with
    // it; `lfs-headers` (v1) entries were kept without that check, so they are never read.
    repo.common_dir()
        .join("weight-inspect")
        .join("lfs-headers-v2")
}

fn mark_all(pending: &mut [(usize, String, &mut ModelSide)], why: &RemoteMiss) {
    for (_, _, side) in pending.iter_mut() {
        if let ModelSide::Absent { remote, .. } = side {
            *remote = Some(why.clone());
        }
    }
}

/// Why an absent LFS object's header is not available to a reader of bytes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeaderMiss {
    #[error(transparent)]
    Remote(RemoteMiss),
    #[error("{}", .0.note().unwrap_or_default())]
    NotModel(Box<ModelSide>),
    #[error("the header read from the LFS server could not be kept in the cache")]
    Uncached,
}

/// A cached header that still parses as a model of the pointer's size.
fn cached_side(cache: &HeaderCache, name: &str, pointer: &Pointer) -> Option<ModelSide> {
    let prefix = cache.get(&pointer.oid, pointer.size)?;
    match header_step(Path::new(name), &prefix, pointer.size) {
        HeaderStep::Parsed(Ok(artifact)) => Some(ModelSide::Read {
            content: Content::Model(Box::new(artifact)),
            size: pointer.size,
            sha256: None,
            lfs: Some(pointer.clone()),
            from_server: true,
        }),
        _ => None,
    }
}

/// The side a header read from the server stands for; only a model's header is cached.
fn side_of_header(
    cache: &HeaderCache,
    name: &str,
    pointer: Pointer,
    header: &RemoteHeader,
) -> ModelSide {
    let content = match &header.parsed {
        Ok(artifact) => {
            let _ = cache.put(&pointer.oid, &header.prefix);
            Content::Model(Box::new(artifact.clone()))
        }
        // No model: a `.wdelta` (its header, where the bytes read hold it), or something else.
        Err(crate::error::Error::UnknownFormat { .. }) => header.content(Path::new(name)),
        Err(_) => {
            // The same parse again, for an error of our own (one header may serve several
            // sides).
            let object = format!("sha256:{}", pointer.oid);
            let error = match header_step(Path::new(&object), &header.prefix, pointer.size) {
                HeaderStep::Parsed(Err(e)) => e,
                // A parse of the prefix alone may pass where the whole read did not (the zip
                // directory at the end of the file refused it): its error, as text.
                _ => {
                    let why = match &header.parsed {
                        Err(crate::error::Error::Pytorch { source, .. }) => source.to_string(),
                        Err(e) => e.to_string(),
                        Ok(_) => "unreadable header".to_owned(),
                    };
                    crate::error::Error::io(&object, std::io::Error::other(why))
                }
            };
            Content::Invalid {
                format: crate::read::detect(&header.prefix)
                    .unwrap_or(crate::artifact::Format::Gguf),
                error: Box::new(crate::error::Error::ServerHeader {
                    name: name.to_owned(),
                    source: Box::new(error),
                }),
            }
        }
    };
    ModelSide::Read {
        content,
        size: pointer.size,
        sha256: Some(pointer.oid.clone()),
        from_server: true,
        lfs: Some(pointer),
    }
}

/// Reads the header of each object the server gave a download for, a few at a time.
fn read_all(
    server: &Server,
    (objects, outcomes): (&[LfsObject], &[ObjectOutcome]),
    progress: &crate::progress::Progress,
    pool: Option<&rayon::ThreadPool>,
) -> Vec<Result<RemoteHeader, RemoteMiss>> {
    let read_one = |(object, outcome): (&LfsObject, &ObjectOutcome)| {
        let result = match outcome {
            ObjectOutcome::Download(action) => read_header(
                &server.client,
                Path::new(&format!("sha256:{}", object.oid)),
                &action.href,
                &action.headers(),
                Some(object.size),
            )
            .map_err(|e| RemoteMiss::Header(Arc::new(e))),
            ObjectOutcome::Failed { code, message } => Err(RemoteMiss::Object {
                code: *code,
                message: message.clone(),
            }),
        };
        progress.inc(1);
        result
    };
    match pool {
        Some(pool) => pool.install(|| objects.par_iter().zip(outcomes).map(read_one).collect()),
        None => objects.iter().zip(outcomes).map(read_one).collect(),
    }
}

fn from_bytes(path: &Path, bytes: &[u8], lfs: Option<Pointer>) -> ModelSide {
    let content = crate::read::classify_bytes(path, bytes);
    let size = match (&content, &lfs) {
        (_, Some(pointer)) => pointer.size,
        (Content::Model(artifact), None) => artifact.layout.file_size,
        _ => bytes.len() as u64,
    };
    let sha256 = matches!(content, Content::Other { .. }).then(|| sha256_hex(bytes));
    ModelSide::local(content, size, sha256, lfs)
}

/// Parses a file on disk (header only). `sha256` is known for LFS objects; otherwise it is
/// computed only when the file turns out not to be a model.
fn from_path(path: &Path, size: u64, sha256: Option<String>, lfs: Option<Pointer>) -> ModelSide {
    from_content(path, crate::read::classify_file(path), size, sha256, lfs)
}

/// The side of the file at `path`, whose header reads as `content`.
fn from_content(
    path: &Path,
    content: Content,
    size: u64,
    sha256: Option<String>,
    lfs: Option<Pointer>,
) -> ModelSide {
    let (size, sha256) = match &content {
        Content::Model(artifact) if lfs.is_none() => (artifact.layout.file_size, None),
        Content::Model(_)
        | Content::Invalid { .. }
        | Content::Delta(_)
        | Content::BadDelta { .. } => (size, None),
        Content::Other { .. } => {
            let sha256 = match sha256 {
                Some(s) => s,
                None => sha256_file(path)
                    .unwrap_or_else(|e| format!("<{}: {e}>", crate::escape::shown_path(path))),
            };
            (size, Some(sha256))
        }
    };
    ModelSide::local(content, size, sha256, lfs)
}

/// The LFS pointer in `file`, if it holds one (only small files are read).
pub(crate) fn read_pointer_file(file: &Path) -> Option<Pointer> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() >= lfs::MAX_POINTER_SIZE as u64 {
        return None;
    }
    Pointer::parse(&std::fs::read(file).ok()?)
}

#[cfg(test)]
mod tests {
    use super::{FIRST_BATCH, HeaderSizes};

    /// Batches are sized by the mean header seen: a few before any is known, as many as fit
    /// the room once one is (two sides per item), never none and never more than asked.
    #[test]
    fn batches_fit_the_room_by_the_mean_header() {
        let sizes = HeaderSizes::default();
        assert_eq!(sizes.batch_len(256, 128 << 20), FIRST_BATCH);
        assert_eq!(sizes.batch_len(256, u64::MAX), 256, "an unbounded read");
        assert_eq!(sizes.note(0), 0, "not a model: not counted");
        sizes.note(25 << 20);
        sizes.note(25 << 20);
        assert_eq!(sizes.batch_len(256, 128 << 20), 2);
        assert_eq!(sizes.batch_len(256, 10 << 20), 1, "at least one");
        let small = HeaderSizes::default();
        small.note(300);
        assert_eq!(small.batch_len(256, 128 << 20), 256, "at most the window");
    }
}
