//! The one input seam: what a user names on the command line — a file, `REV:path`, a
//! work-tree LFS pointer, or an http(s) URL — opened as the model (or `.wdelta`) it stands for. Every command that
//! takes a model argument opens it here; new kinds of input plug in here and nowhere else.
//!
//! The core only reads bytes; git provides the resolver for revisions and LFS pointers
//! ([`crate::git::resolve`], [`crate::git::side`]; objects that are not present locally are
//! read from the LFS server, [`crate::git::remote`]), and [`crate::remote`] reads URLs.

use std::path::{Path, PathBuf};

use crate::artifact::Artifact;
use crate::formats::wdelta::{AnyWdelta, DeltaSummary};
use crate::git::read_pointer_file;
use crate::git::{GitError, ModelSide, RemoteOptions, SideReader};
use crate::read::Content;

/// What an argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A file on disk (a model, an LFS pointer file, or a `.wdelta`).
    File(PathBuf),
    /// A blob of the repository around the current directory.
    Revision(crate::git::RevPath),
    /// An http(s) URL of a model file: only its header is downloaded.
    Url(String),
}

impl Input {
    /// An existing file wins over the `REV:path` reading of the same text (a file name may
    /// contain a colon).
    pub(crate) fn parse(spec: &str) -> Input {
        let path = Path::new(spec);
        if crate::remote::is_url(spec) && !path.exists() {
            return Input::Url(spec.to_owned());
        }
        if !path.exists()
            && let Some(rev_path) = crate::git::RevPath::parse(spec)
        {
            return Input::Revision(rev_path);
        }
        Input::File(path.to_owned())
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error(transparent)]
    Core(#[from] crate::error::Error),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// The input was found but holds no readable model (an absent LFS object, a file of
    /// another kind); the message says which and what to do.
    #[error("{}: {message}", crate::escape::shown(.name))]
    NoModel { name: String, message: String },
    #[error(transparent)]
    Values(#[from] crate::values::ValuesError),
    #[error(transparent)]
    Conversion(#[from] crate::conversion::ConversionError),
    #[error(transparent)]
    Map(#[from] crate::conversion::MapError),
}

/// How inputs are opened for one command: the headers to send to a URL's server (`--header`)
/// and whether absent LFS objects may be read from the LFS server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opener<'a> {
    pub headers: &'a [(String, String)],
    pub remote: &'a RemoteOptions,
}

impl Opener<'_> {
    /// Opens what `spec` names as a model (a `.wdelta` is not one), with a note when the
    /// model's header was read from a server (an LFS server or a URL), not a local file.
    pub(crate) fn model(&self, spec: &str) -> Result<(Artifact, Option<String>), InputError> {
        match Input::parse(spec) {
            Input::File(path) => self.file(&path),
            Input::Revision(rev_path) => self.revision(&rev_path),
            Input::Url(url) => open_url(&url, self.headers),
        }
    }

    /// A model file, or a work-tree LFS pointer (a checkout with `GIT_LFS_SKIP_SMUDGE=1`) read
    /// as the model it points to, from the local LFS store or else the LFS server.
    fn file(&self, path: &Path) -> Result<(Artifact, Option<String>), InputError> {
        if read_pointer_file(path).is_some() {
            let side = SideReader::around(path.parent(), self.remote).file(path);
            return model_of(side, path.display().to_string());
        }
        if let Some(side) = self.worktree_model(path)? {
            return model_of(side, path.display().to_string());
        }
        Ok((crate::read::open_model_path(path)?, None))
    }
}

impl Opener<'_> {
    /// A multi-file model (a directory, an index, a split-GGUF part) in the work tree of a
    /// checkout without LFS content: its parts are pointer texts, so it is read as git sees it,
    /// each part from the local LFS store or the LFS server. None when `path` names no such
    /// model.
    fn worktree_model(&self, path: &Path) -> Result<Option<ModelSide>, InputError> {
        let dir = if path.is_dir() {
            path
        } else {
            crate::fsutil::dir_of(path)
        };
        let multi = path.is_dir()
            || path.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
                crate::sharded::index::is_index_name(f)
                    || crate::sharded::SplitName::parse(f).is_some()
            });
        let has_pointers = || {
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .any(|entry| {
                    crate::read::is_read_path(&entry.file_name().to_string_lossy())
                        && read_pointer_file(&entry.path()).is_some()
                })
        };
        if !multi || !has_pointers() {
            return Ok(None);
        }
        let Ok(repo) = crate::git::open_repo(dir) else {
            return Ok(None);
        };
        let (Some(root), Ok(full)) = (repo.workdir(), std::fs::canonicalize(path)) else {
            return Ok(None);
        };
        let Ok(root) = std::fs::canonicalize(root) else {
            return Ok(None);
        };
        let Ok(relative) = full.strip_prefix(&root) else {
            return Ok(None);
        };
        let relative: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Ok(crate::git::open_in(
            &SideReader::new(&repo, self.remote),
            crate::git::Snapshot::WorkTree,
            &relative.join("/"),
        )?)
    }

    /// `REV:path` through the repository around the current directory; LFS pointers are
    /// followed to the local object store (else the LFS server) and only the model's header is
    /// read.
    fn revision(
        &self,
        rev_path: &crate::git::RevPath,
    ) -> Result<(Artifact, Option<String>), InputError> {
        model_of(self.revision_side(rev_path)?, rev_path.spec.clone())
    }

    /// What `REV:path` names, as a side of a comparison: a multi-file model at that path, else
    /// its blob (an LFS pointer followed to its object).
    fn revision_side(&self, rev_path: &crate::git::RevPath) -> Result<ModelSide, InputError> {
        let cwd = std::env::current_dir().map_err(|e| crate::error::Error::io(".", e))?;
        let repo = crate::git::open_repo(&cwd)?;
        let reader = SideReader::new(&repo, self.remote);
        if !rev_path.is_index() {
            let path = rev_path.repo_path(&repo, &cwd);
            if let Some(side) = crate::git::open_at(&reader, &rev_path.rev, &path)? {
                return Ok(side);
            }
        }
        let id = rev_path.blob(&repo, &cwd)?;
        Ok(reader.blob(id, &rev_path.spec)?)
    }
}

/// What an argument of `inspect` or `id` names: a model, or a `.wdelta`, which has no
/// structural identity and is described instead.
pub(crate) enum Opened {
    Model(Box<Artifact>, Option<String>),
    Delta(Box<OpenedDelta>),
}

/// A `.wdelta` an argument names.
pub(crate) struct OpenedDelta {
    /// What its header says: the line every reader shows.
    pub summary: DeltaSummary,
    /// The whole file parsed and its checksum verified, when its bytes are on this machine.
    pub full: Option<AnyWdelta>,
    /// Where the header was read from, when not from this machine.
    pub note: Option<String>,
}

impl OpenedDelta {
    fn whole(delta: AnyWdelta) -> OpenedDelta {
        OpenedDelta {
            summary: delta.summary(),
            full: Some(delta),
            note: None,
        }
    }
}

impl Opener<'_> {
    /// Opens what `spec` names as a model or a `.wdelta`, reading it once: a file, `REV:path`
    /// (a blob, or an LFS object from the local store, else its header from the LFS server),
    /// a work-tree LFS pointer, or a URL.
    pub(crate) fn model_or_delta(&self, spec: &str) -> Result<Opened, InputError> {
        let model = |(artifact, note): (Artifact, Option<String>)| {
            Ok(Opened::Model(Box::new(artifact), note))
        };
        match Input::parse(spec) {
            Input::File(path) if path.is_dir() => model(self.file(&path)?),
            Input::File(path) => {
                if read_pointer_file(&path).is_some() {
                    let side = SideReader::around(path.parent(), self.remote).file(&path);
                    return self.side_opened(side, spec);
                }
                match crate::read::read_wdelta(&path)? {
                    Some(delta) => Ok(Opened::Delta(Box::new(OpenedDelta::whole(delta)))),
                    None => model(self.file(&path)?),
                }
            }
            Input::Revision(rev_path) => {
                let side = self.revision_side(&rev_path)?;
                self.side_opened(side, spec)
            }
            Input::Url(url) => open_url_any(&url, self.headers),
        }
    }

    /// A side read from git, as a model or a `.wdelta`; a delta whose bytes are on this machine
    /// is parsed whole (its checksum verified), and its errors name `spec`, never the object's
    /// path inside `.git`.
    fn side_opened(&self, side: ModelSide, spec: &str) -> Result<Opened, InputError> {
        let note = side.origin_note();
        match side {
            ModelSide::Read {
                content: Content::Delta(summary),
                from_server,
                ..
            } => {
                let full = if from_server {
                    None
                } else {
                    Some(self.whole_delta(spec)?)
                };
                Ok(Opened::Delta(Box::new(OpenedDelta {
                    summary: *summary,
                    full,
                    note,
                })))
            }
            ModelSide::Read {
                content: Content::BadDelta { error },
                ..
            } => Err(InputError::Core(named_as(*error, spec))),
            side => {
                let (artifact, note) = model_of(side, spec.to_owned())?;
                Ok(Opened::Model(Box::new(artifact), note))
            }
        }
    }

    /// The whole `.wdelta` `spec` names, from this machine, parsed and verified.
    fn whole_delta(&self, spec: &str) -> Result<AnyWdelta, InputError> {
        let parsed = match self.whole(spec)? {
            Whole::File(path) => {
                let map = crate::values::ModelBytes::map(&path)?;
                AnyWdelta::parse(map.bytes())
            }
            Whole::Blob { bytes, .. } => AnyWdelta::parse(&bytes),
        };
        parsed.map_err(|source| {
            InputError::Core(crate::error::Error::Wdelta {
                path: PathBuf::from(spec),
                source: Box::new(source),
            })
        })
    }
}

/// A core error about a `.wdelta` read from git, naming the argument rather than the object.
fn named_as(error: crate::error::Error, spec: &str) -> crate::error::Error {
    match error {
        crate::error::Error::Wdelta { source, .. } => crate::error::Error::Wdelta {
            path: PathBuf::from(spec),
            source,
        },
        other => other,
    }
}

/// A URL's model or `.wdelta`: only its header is downloaded (a lossless delta's, at the end
/// of the file, with a range of its own).
fn open_url_any(url: &str, headers: &[(String, String)]) -> Result<Opened, InputError> {
    let header = crate::remote::read_url_header(url, headers)?;
    let shown = crate::remote::shown_url(url);
    let note = format!(
        "header of {} read from the server ({} of {} bytes)",
        crate::escape::shown(&shown),
        header.prefix.len() + header.tail.len(),
        header.file_size
    );
    if header.parsed.is_err() {
        match header.content(Path::new(&shown)) {
            Content::Delta(summary) => {
                return Ok(Opened::Delta(Box::new(OpenedDelta {
                    summary: *summary,
                    full: None,
                    note: Some(note),
                })));
            }
            Content::BadDelta { error } => return Err(InputError::Core(*error)),
            _ => {}
        }
    }
    match header.parsed {
        Ok(artifact) => Ok(Opened::Model(Box::new(artifact), Some(note))),
        Err(e) => Err(InputError::Core(e)),
    }
}

/// A model file at an http(s) URL: only its header is downloaded.
fn open_url(
    url: &str,
    headers: &[(String, String)],
) -> Result<(Artifact, Option<String>), InputError> {
    let header = crate::remote::read_url_header(url, headers)?;
    let note = format!(
        "header of {} read from the server ({} of {} bytes)",
        crate::escape::shown(&crate::remote::shown_url(url)),
        header.prefix.len(),
        header.file_size
    );
    match header.parsed {
        Ok(artifact) => Ok((artifact, Some(note))),
        Err(e) => Err(InputError::Core(e)),
    }
}

fn model_of(side: ModelSide, name: String) -> Result<(Artifact, Option<String>), InputError> {
    let note = side.origin_note();
    match side {
        ModelSide::Read {
            content: Content::Model(artifact),
            ..
        } => Ok((*artifact, note)),
        ModelSide::Read {
            content: Content::Invalid { error, .. },
            ..
        }
        | ModelSide::Unreadable { error } => Err(InputError::Core(*error)),
        ModelSide::Unassembled { error } => Err(InputError::Core((*error).into())),
        ModelSide::Read {
            content: Content::BadDelta { error },
            ..
        } => Err(InputError::Core(named_as(*error, &name))),
        side @ ModelSide::Read {
            content: Content::Delta(_),
            ..
        } => Err(InputError::NoModel {
            name,
            message: format!(
                "a weight delta, not a model: {}; `weight-inspect inspect` describes it, and \
                 `delta apply` (or `delta restore`) rebuilds the model it stands for",
                side.note().unwrap_or_default()
            ),
        }),
        other => Err(InputError::NoModel {
            name,
            message: other.note().unwrap_or_default(),
        }),
    }
}

impl Opener<'_> {
    /// A `.wdelta` file named by `spec` (described rather than identified by `inspect` and
    /// `id`), or None when `spec` names anything else.
    pub(crate) fn wdelta(&self, spec: &str) -> Result<Option<AnyWdelta>, InputError> {
        match Input::parse(spec) {
            Input::File(path) if !path.is_dir() => Ok(crate::read::read_wdelta(&path)?),
            _ => Ok(None),
        }
    }

    /// What `spec` names as a model together with the bytes of its files, for comparing weight
    /// values: a multi-file model (a directory, an index, a split-GGUF part: each of its files
    /// memory-mapped), or one file with all its bytes (see [`Opener::whole`]).
    pub(crate) fn model_with_bytes(
        &self,
        spec: &str,
    ) -> Result<(Artifact, Vec<crate::values::ModelBytes>), InputError> {
        if let Input::File(path) = Input::parse(spec)
            && read_pointer_file(&path).is_none()
        {
            let artifact = crate::read::open_model_path(&path)?;
            if let Some(files) = &artifact.layout.files {
                let dir = if path.is_dir() {
                    path.as_path()
                } else {
                    path.parent().unwrap_or(Path::new("."))
                };
                let bytes = files
                    .parts
                    .iter()
                    .map(|part| crate::values::ModelBytes::map(&dir.join(&part.file)))
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok((artifact, bytes));
            }
            if path.is_dir() {
                // A directory of one model file: that file's bytes.
                let dir = crate::read::FsDirectory::new(&path);
                let names = crate::sharded::Directory::file_names(&dir)
                    .map_err(crate::error::Error::from)?;
                if let [crate::sharded::Candidate::Single(file)] =
                    crate::sharded::candidates(&names).as_slice()
                {
                    let file = path.join(file);
                    let bytes = crate::values::ModelBytes::map(&file)?;
                    let artifact = crate::read::read_bytes(&file, bytes.bytes())?;
                    return Ok((artifact, vec![bytes]));
                }
            }
        }
        let (artifact, bytes) = match self.whole(spec)? {
            Whole::File(path) => {
                // Mapped once: the header is parsed from the bytes the values are read from.
                let bytes = crate::values::ModelBytes::map(&path)?;
                let artifact = crate::read::read_bytes(&path, bytes.bytes())?;
                (artifact, bytes)
            }
            Whole::Blob { name, bytes } => {
                let artifact = crate::read::read_bytes(Path::new(&name), &bytes)?;
                (artifact, crate::values::ModelBytes::owned(&name, bytes))
            }
        };
        Ok((artifact, vec![bytes]))
    }

    /// A file on this machine holding every byte of what `spec` names, for the commands that
    /// read all the weights (the delta commands): a file or directory, a work-tree LFS
    /// pointer's object in the local store, or `REV:path` (its LFS object in the local store,
    /// or the blob copied to a temporary file that lives as long as the value).
    pub(crate) fn local_file(&self, spec: &str) -> Result<LocalFile, InputError> {
        match self.whole(spec)? {
            Whole::File(path) => Ok(LocalFile { path, _temp: None }),
            Whole::Blob { name, bytes } => {
                let suffix = Path::new(&name)
                    .extension()
                    .map(|e| format!(".{}", e.to_string_lossy()))
                    .unwrap_or_default();
                let temp = crate::fsutil::TempCopy::of(&bytes, &suffix)?;
                Ok(LocalFile {
                    path: temp.path().to_owned(),
                    _temp: Some(temp),
                })
            }
        }
    }

    /// Where all the bytes of what `spec` names are: a file (a work-tree LFS pointer leads to
    /// its object in the local store), or `REV:path`'s LFS object in the local store or its
    /// blob. Never downloads anything: an LFS object that is not present locally is an error
    /// saying so, and so is a URL.
    fn whole(&self, spec: &str) -> Result<Whole, InputError> {
        let absent = |pointer: &crate::git::Pointer| InputError::NoModel {
            name: spec.to_owned(),
            message: format!(
                "LFS object {} is not in the local store; weight values are only read from \
                 local objects (fetch it with `git lfs fetch`)",
                pointer.oid
            ),
        };
        match Input::parse(spec) {
            Input::File(path) => match read_pointer_file(&path) {
                Some(pointer) => {
                    let dir = match path.parent() {
                        Some(dir) if !dir.as_os_str().is_empty() => dir,
                        _ => Path::new("."),
                    };
                    crate::git::open_repo(dir)
                        .ok()
                        .and_then(|repo| crate::git::present_object(&repo, &pointer))
                        .map(Whole::File)
                        .ok_or_else(|| absent(&pointer))
                }
                None => Ok(Whole::File(path)),
            },
            Input::Revision(rev_path) => {
                let cwd = std::env::current_dir().map_err(|e| crate::error::Error::io(".", e))?;
                let repo = crate::git::open_repo(&cwd)?;
                let id = rev_path.blob(&repo, &cwd)?;
                let bytes = crate::git::blob_bytes(&repo, id)?;
                if let Some(pointer) = crate::git::Pointer::parse(&bytes) {
                    return crate::git::present_object(&repo, &pointer)
                        .map(Whole::File)
                        .ok_or_else(|| absent(&pointer));
                }
                Ok(Whole::Blob {
                    name: rev_path.spec.clone(),
                    bytes,
                })
            }
            Input::Url(url) => Err(InputError::NoModel {
                name: crate::remote::shown_url(&url).clone(),
                message: "weight values are only read from local files; a URL's model is not \
                          downloaded (download it, then compare the file)"
                    .to_owned(),
            }),
        }
    }
}

/// Where all the bytes of an input are.
enum Whole {
    File(PathBuf),
    /// A blob that is not an LFS pointer: `name` is its `REV:path`.
    Blob {
        name: String,
        bytes: Vec<u8>,
    },
}

/// A file holding all the bytes of an input (see [`Opener::local_file`]).
#[derive(Debug)]
pub(crate) struct LocalFile {
    pub path: PathBuf,
    _temp: Option<crate::fsutil::TempCopy>,
}

impl Opener<'_> {
    /// The files of the model `spec` names (`artifact`, as opened), each with its size and
    /// SHA-256: a Git LFS pointer's oid where the file (or blob) is a pointer, so that no
    /// object is read or downloaded; else the SHA-256 of its bytes. A URL's file is not
    /// hashed (nothing but its header is downloaded).
    pub(crate) fn model_files(
        &self,
        spec: &str,
        artifact: Option<&Artifact>,
    ) -> Result<Vec<crate::bom::ModelFile>, InputError> {
        let names = artifact.map(part_names).unwrap_or_default();
        match Input::parse(spec) {
            Input::File(path) => {
                let (dir, shown_dir) = if path.is_dir() {
                    (path.clone(), spec.trim_end_matches('/').to_owned())
                } else if names.is_empty() {
                    return Ok(vec![local_file_digest(&path, spec.to_owned())?]);
                } else {
                    let dir = crate::fsutil::dir_of(&path).to_path_buf();
                    let shown = match spec.rsplit_once('/') {
                        Some((d, _)) => d.to_owned(),
                        None => String::new(),
                    };
                    (dir, shown)
                };
                if names.is_empty() {
                    // A directory of one model file.
                    let listing = crate::read::FsDirectory::new(&dir);
                    let files = crate::sharded::Directory::file_names(&listing)
                        .map_err(crate::error::Error::from)?;
                    if let [crate::sharded::Candidate::Single(file)] =
                        crate::sharded::candidates(&files).as_slice()
                    {
                        return Ok(vec![local_file_digest(
                            &dir.join(file),
                            joined(&shown_dir, file),
                        )?]);
                    }
                }
                names
                    .iter()
                    .map(|name| local_file_digest(&dir.join(name), joined(&shown_dir, name)))
                    .collect()
            }
            Input::Revision(rev_path) => {
                let cwd = std::env::current_dir().map_err(|e| crate::error::Error::io(".", e))?;
                let repo = crate::git::open_repo(&cwd)?;
                let path = rev_path.repo_path(&repo, &cwd);
                let tree = !rev_path.is_index()
                    && matches!(
                        crate::git::tree_entry(&repo, &rev_path.rev, &path)?,
                        Some(crate::git::Entry::Dir)
                    );
                if names.is_empty() && !tree {
                    let id = rev_path.blob(&repo, &cwd)?;
                    return Ok(vec![blob_digest(&repo, id, rev_path.spec.clone())?]);
                }
                let dir = if tree {
                    path.trim_end_matches('/').to_owned()
                } else {
                    path.rsplit_once('/')
                        .map_or(String::new(), |(d, _)| d.to_owned())
                };
                let shown_dir = format!("{}:{dir}", rev_path.rev);
                let mut out = Vec::new();
                for name in &names {
                    let part = RevPath::parse(&format!("{}:{}", rev_path.rev, joined(&dir, name)))
                        .expect("has a colon");
                    let id = part.blob(&repo, &cwd)?;
                    let shown = if dir.is_empty() {
                        format!("{}:{name}", rev_path.rev)
                    } else {
                        joined(&shown_dir, name)
                    };
                    out.push(blob_digest(&repo, id, shown)?);
                }
                Ok(out)
            }
            Input::Url(url) => Ok(vec![crate::bom::ModelFile {
                path: crate::remote::shown_url(&url).clone(),
                size: artifact.map_or(0, |a| a.layout.file_size),
                sha256: None,
                from_lfs_pointer: false,
            }]),
        }
    }

    /// A small file (at most 1 MiB) named `name` beside the model `spec` names — config.json,
    /// README.md — in the work tree or in the revision; None when there is none.
    pub(crate) fn beside(&self, spec: &str, name: &str) -> Option<Vec<u8>> {
        const MAX: u64 = 1 << 20;
        match Input::parse(spec) {
            Input::File(path) => {
                let dir = if path.is_dir() {
                    path.as_path()
                } else {
                    crate::fsutil::dir_of(&path)
                };
                let file = dir.join(name);
                let meta = std::fs::metadata(&file).ok()?;
                (meta.is_file() && meta.len() <= MAX)
                    .then(|| std::fs::read(&file).ok())
                    .flatten()
                    .filter(|bytes| crate::git::Pointer::parse(bytes).is_none())
            }
            Input::Revision(rev_path) if !rev_path.is_index() => {
                let cwd = std::env::current_dir().ok()?;
                let repo = crate::git::open_repo(&cwd).ok()?;
                let path = rev_path.repo_path(&repo, &cwd);
                let dir = match crate::git::tree_entry(&repo, &rev_path.rev, &path).ok()? {
                    Some(crate::git::Entry::Dir) => path.trim_end_matches('/').to_owned(),
                    _ => path
                        .rsplit_once('/')
                        .map_or(String::new(), |(d, _)| d.to_owned()),
                };
                let entry = crate::git::tree_entry(&repo, &rev_path.rev, &joined(&dir, name));
                let id = entry.ok()??.file()?;
                let bytes = crate::git::blob_bytes(&repo, id).ok()?;
                (bytes.len() as u64 <= MAX && crate::git::Pointer::parse(&bytes).is_none())
                    .then_some(bytes)
            }
            _ => None,
        }
    }
}

use crate::git::RevPath;

/// The files of a multi-file model: the index (if any), then the parts; empty for one file.
fn part_names(artifact: &Artifact) -> Vec<String> {
    let Some(files) = &artifact.layout.files else {
        return Vec::new();
    };
    files
        .index
        .iter()
        .cloned()
        .chain(files.parts.iter().map(|p| p.file.clone()))
        .collect()
}

fn joined(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// A local file's digest: its LFS pointer's oid, or the SHA-256 of its bytes.
fn local_file_digest(path: &Path, shown: String) -> Result<crate::bom::ModelFile, InputError> {
    if let Some(pointer) = read_pointer_file(path) {
        return Ok(crate::bom::ModelFile {
            path: shown,
            size: pointer.size,
            sha256: Some(pointer.oid),
            from_lfs_pointer: true,
        });
    }
    let size = std::fs::metadata(path)
        .map_err(|e| crate::error::Error::io(path, e))?
        .len();
    let sha256 = crate::digest::sha256_file(path).map_err(|e| crate::error::Error::io(path, e))?;
    Ok(crate::bom::ModelFile {
        path: shown,
        size,
        sha256: Some(sha256),
        from_lfs_pointer: false,
    })
}

/// A blob's digest: its LFS pointer's oid, or the SHA-256 of its bytes.
fn blob_digest(
    repo: &gix::Repository,
    id: gix::ObjectId,
    shown: String,
) -> Result<crate::bom::ModelFile, InputError> {
    // A pointer is a small blob: its size is read from the object's header first, so a
    // large blob is read only to be hashed.
    let small = repo
        .find_header(id)
        .is_ok_and(|h| h.size() <= crate::git::MAX_POINTER_SIZE as u64);
    let bytes = crate::git::blob_bytes(repo, id)?;
    if small && let Some(pointer) = crate::git::Pointer::parse(&bytes) {
        return Ok(crate::bom::ModelFile {
            path: shown,
            size: pointer.size,
            sha256: Some(pointer.oid),
            from_lfs_pointer: true,
        });
    }
    Ok(crate::bom::ModelFile {
        path: shown,
        size: bytes.len() as u64,
        sha256: Some(crate::digest::sha256_hex(&bytes)),
        from_lfs_pointer: false,
    })
}

impl Opener<'_> {
    /// Where the bytes of each file of the model `spec` names are (`artifact`, as opened), for
    /// comparing them as cmp(1) does; nothing is read here. An LFS pointer leads to its object
    /// in the local store, else stands as its oid; a URL's bytes are not here.
    pub(crate) fn byte_parts(
        &self,
        spec: &str,
        artifact: &Artifact,
    ) -> Result<Vec<crate::cmp::Part>, InputError> {
        use crate::cmp::{Part, Source};
        match Input::parse(spec) {
            Input::File(path) => file_parts(&path, artifact),
            Input::Revision(rev_path) => {
                if artifact.layout.files.is_some() {
                    return Ok(vec![Part::single(Source::Elsewhere {
                        size: None,
                        why: "a multi-file model in a revision; compare checkouts, or use \
                              `weight-inspect git diff`"
                            .to_owned(),
                    })]);
                }
                let cwd = std::env::current_dir().map_err(|e| crate::error::Error::io(".", e))?;
                let repo = crate::git::open_repo(&cwd)?;
                let bytes = crate::git::blob_bytes(&repo, rev_path.blob(&repo, &cwd)?)?;
                let source = match crate::git::Pointer::parse(&bytes) {
                    Some(pointer) => pointer_source(Some(&repo), &pointer),
                    None => Source::Bytes(bytes),
                };
                Ok(vec![Part::single(source)])
            }
            Input::Url(_) => Ok(vec![Part::single(Source::Elsewhere {
                size: None,
                why: "only the header of a URL's model is downloaded".to_owned(),
            })]),
        }
    }
}

/// The files of a model on disk: each part of a multi-file model, or its one file.
fn file_parts(path: &Path, artifact: &Artifact) -> Result<Vec<crate::cmp::Part>, InputError> {
    use crate::cmp::Part;
    let dir = if path.is_dir() {
        path
    } else {
        crate::fsutil::dir_of(path)
    };
    if let Some(files) = &artifact.layout.files {
        return Ok(files
            .parts
            .iter()
            .map(|part| Part {
                name: Some(part.file.clone()),
                source: local_source(&dir.join(&part.file)),
            })
            .collect());
    }
    if path.is_dir() {
        // A directory of one model file: that file.
        let listing = crate::read::FsDirectory::new(path);
        let names =
            crate::sharded::Directory::file_names(&listing).map_err(crate::error::Error::from)?;
        if let [crate::sharded::Candidate::Single(file)] =
            crate::sharded::candidates(&names).as_slice()
        {
            return Ok(vec![Part::single(local_source(&path.join(file)))]);
        }
    }
    Ok(vec![Part::single(local_source(path))])
}

/// A file's bytes: the file, or for a work-tree LFS pointer its object (or oid).
fn local_source(path: &Path) -> crate::cmp::Source {
    match read_pointer_file(path) {
        Some(pointer) => {
            let repo = crate::git::open_repo(crate::fsutil::dir_of(path)).ok();
            pointer_source(repo.as_ref(), &pointer)
        }
        None => crate::cmp::Source::File(path.to_owned()),
    }
}

/// An LFS object in the local store, else its oid and size.
fn pointer_source(
    repo: Option<&gix::Repository>,
    pointer: &crate::git::Pointer,
) -> crate::cmp::Source {
    match repo.and_then(|repo| crate::git::present_object(repo, pointer)) {
        Some(path) => crate::cmp::Source::File(path),
        None => crate::cmp::Source::Digest {
            sha256: pointer.oid.clone(),
            size: pointer.size,
        },
    }
}
