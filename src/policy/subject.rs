//! What a judged file is and where its bytes come from: a [`Subject`] (a path and its
//! [`Origin`]: a blob, blob bytes, a work-tree file), how git stores it ([`Storage`]), and its
//! content classified by the core ([`crate::read::classify_bytes`]) or recognized as a pickle.
//!
//! Reading is lazy and bounded: the LFS check looks at the stored blob's header, the size
//! check at a pointer or file length, and the model bytes are read only when a rule needs the
//! structure or the format; model files are mmapped and only their header pages touched.
//!
//! Only regular files are read. A symbolic link is followed to the regular file it leads to
//! inside the repository ([`worktree_file`] in the work tree, [`follow_committed_link`] in a
//! commit or the index); one leading out of the repository, or to anything but a regular
//! file, is not followed but refused ([`Origin::Refused`]), and so is a FIFO, device or
//! socket, which could block a read or never end it.

use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::error::{FileReason, PolicyError};
use crate::artifact::Artifact;
use crate::artifact::Format;
use crate::escape::shown;
use crate::formats::pytorch::{self, PickleReport};
use crate::git::Pointer;
use crate::git::{Entry, link_target};
use crate::git::{GitError, RemoteOptions, SideReader};
use crate::read::Content;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// Blobs larger than this (model bytes committed without LFS) are not inflated whole: a
/// prefix is streamed from `git cat-file`, growing through [`BLOB_PREFIXES`] until the model
/// header parses.
const MAX_BLOB_IN_MEMORY: u64 = 16 << 20;
const BLOB_PREFIXES: [u64; 3] = [4 << 20, 64 << 20, 256 << 20];

/// A file to judge: its repository-relative path and where its bytes come from.
#[derive(Debug, Clone)]
pub(crate) struct Subject<'r> {
    pub path: String,
    pub origin: Origin<'r>,
    /// Whether an absent LFS object's header may be read from the LFS server.
    pub remote: &'r RemoteOptions,
}

/// Where a subject's bytes come from.
#[derive(Debug, Clone)]
pub(crate) enum Origin<'r> {
    /// A blob in the object database (an index entry, or a file of a commit).
    Blob {
        repo: &'r gix::Repository,
        id: ObjectId,
        /// The revision whose tree holds it; None for the index. Where a conversion's
        /// reference beside it is looked up.
        tree: Option<String>,
    },
    /// A file in the work tree. `repo` and `index_id` (its stage-0 index entry) decide how
    /// git stores it, for `require_lfs`.
    Worktree {
        repo: Option<&'r gix::Repository>,
        file: PathBuf,
        index_id: Option<ObjectId>,
    },
    /// A path that is not read, and why: a symbolic link that is not followed, or something
    /// that is not a regular file. Judging it is an error that says so.
    Refused(FileReason),
    /// A multi-file model (a directory of shards or split parts), already read as one model.
    Model(Box<Artifact>),
}

/// How git stores (or will store, once added) a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Storage {
    /// An LFS pointer.
    Lfs(Pointer),
    /// Not yet in the index, but `.gitattributes` routes it through the LFS filter.
    LfsByAttributes,
    /// The bytes themselves, in git's object database; `why` says how we know.
    Git { why: String },
}

/// What a judged file is: the core's classification of its content and, for a pickle (a
/// PyTorch checkpoint, or one the reader refuses), what it imports.
pub(crate) struct Judged {
    pub(crate) content: Content,
    pub(crate) pickle: Option<PickleReport>,
}

impl Judged {
    fn new(content: Content, bytes: &[u8]) -> Judged {
        // Bytes that are no model may still hold a pickle stream (one that breaks off after a
        // dangerous GLOBAL): scanned too, so its globals are judged.
        let is_pickle = match &content {
            Content::Model(a) => a.format == Format::Pytorch,
            Content::Invalid { format, .. } => *format == Format::Pytorch,
            Content::Other { .. } => true,
            Content::Delta(_) | Content::BadDelta { .. } => false,
        };
        let pickle = is_pickle.then(|| pytorch::scan_any(bytes)).flatten();
        Judged { content, pickle }
    }

    pub(crate) fn artifact(&self) -> Option<&Artifact> {
        self.content.artifact()
    }

    /// What the content is, for a violation's `found`.
    pub(crate) fn describe(&self) -> String {
        match (&self.content, &self.pickle) {
            // A scan of the first bytes alone does not say why the whole file was refused
            // (the zip directory at its end lists another data.pkl): say it too.
            (Content::Invalid { error, .. }, Some(report)) if report.incomplete.is_some() => {
                format!("{}; unreadable: {error}", report.describe())
            }
            (Content::Model(_) | Content::Invalid { .. }, Some(report)) => report.describe(),
            (Content::Model(a), None) => a.format.name().to_string(),
            (Content::Invalid { format, error }, None) => {
                format!("an unreadable {} file ({error})", format.name())
            }
            (Content::Delta(summary), _) => crate::render::wdelta::summary_line(summary),
            (Content::BadDelta { error }, _) => format!("an unreadable .wdelta ({error})"),
            (Content::Other { first_bytes }, _) => {
                format!("none of GGUF, safetensors or PyTorch (first bytes {first_bytes})")
            }
        }
    }
}

/// The model bytes of a subject.
enum Body {
    Map(crate::mapped::GuardedMap),
    Bytes(Vec<u8>),
    Empty,
}

impl Body {
    fn bytes(&self) -> &[u8] {
        match self {
            Body::Map(m) => m,
            Body::Bytes(b) => b,
            Body::Empty => &[],
        }
    }
}

/// The subject's blob as git stores it, read just enough to tell a pointer from content.
struct Stored {
    pointer: Option<Pointer>,
    size: u64,
    /// The whole blob, when it was small enough to read.
    bytes: Option<Vec<u8>>,
}

fn stored_blob(repo: &gix::Repository, id: ObjectId) -> Result<Stored> {
    let size = repo
        .find_header(id)
        .map_err(|e| crate::git::object_error(format!("blob {id}"), e))?
        .size();
    if size >= crate::git::MAX_POINTER_SIZE as u64 {
        return Ok(Stored {
            pointer: None,
            size,
            bytes: None,
        });
    }
    let bytes = crate::git::blob_bytes(repo, id)?;
    Ok(Stored {
        pointer: Pointer::parse(&bytes),
        size,
        bytes: Some(bytes),
    })
}

/// Reads one subject, each part at most once: how git stores it, its size, its content.
pub(crate) struct SubjectReader<'s, 'r> {
    subject: &'s Subject<'r>,
    stored: Option<Stored>,
    /// A large blob's prefix is classified while deciding how much of it to read; kept for
    /// [`SubjectReader::content`].
    classified: Option<Content>,
}

impl<'s, 'r> SubjectReader<'s, 'r> {
    pub(crate) fn new(subject: &'s Subject<'r>) -> Self {
        SubjectReader {
            subject,
            stored: None,
            classified: None,
        }
    }

    pub(crate) fn subject(&self) -> &'s Subject<'r> {
        self.subject
    }

    pub(crate) fn path(&self) -> &'s str {
        &self.subject.path
    }

    pub(crate) fn origin(&self) -> &'s Origin<'r> {
        &self.subject.origin
    }

    /// The stored blob for blob origins (cached).
    fn stored(&mut self) -> Result<Option<&Stored>> {
        if self.stored.is_none() {
            let stored = match &self.subject.origin {
                Origin::Blob { repo, id, .. } => Some(stored_blob(repo, *id)?),
                Origin::Worktree { .. } | Origin::Refused(_) | Origin::Model(_) => None,
            };
            self.stored = stored;
        }
        Ok(self.stored.as_ref())
    }

    /// The error of a refused subject.
    fn refused(&self) -> Result<()> {
        match &self.subject.origin {
            Origin::Refused(reason) => Err(PolicyError::file(self.path(), reason.clone())),
            _ => Ok(()),
        }
    }

    /// How git stores the subject (or will, once it is added).
    pub(crate) fn storage(&mut self) -> Result<Storage> {
        self.refused()?;
        if let Some(stored) = self.stored()? {
            return Ok(match &stored.pointer {
                Some(p) => Storage::Lfs(p.clone()),
                None => Storage::Git {
                    why: format!("the blob holds the file's {} bytes", stored.size),
                },
            });
        }
        let (repo, file, index_id) = match &self.subject.origin {
            Origin::Worktree {
                repo,
                file,
                index_id,
            } => (repo, file, index_id),
            Origin::Model(_) => {
                return Err(PolicyError::file(
                    self.path(),
                    FileReason::LfsOfModelDirectory,
                ));
            }
            _ => unreachable!("blob origins have a stored blob"),
        };
        // A pointer text in the work tree is committed as is.
        if let Some(p) = worktree_pointer(file)? {
            return Ok(Storage::Lfs(p));
        }
        let Some(repo) = repo else {
            return Err(PolicyError::file(
                self.path(),
                FileReason::LfsOutsideRepository,
            ));
        };
        if let Some(id) = index_id {
            let stored = stored_blob(repo, *id)?;
            return Ok(match stored.pointer {
                Some(p) => Storage::Lfs(p),
                None => Storage::Git {
                    why: format!("the index holds the file's {} bytes", stored.size),
                },
            });
        }
        if crate::git::lfs_by_attributes(repo, self.path())? {
            Ok(Storage::LfsByAttributes)
        } else {
            Ok(Storage::Git {
                why: "not staged, and .gitattributes does not route it through the LFS filter"
                    .into(),
            })
        }
    }

    /// The size of the file itself (an LFS pointer's promise for pointers).
    pub(crate) fn file_size(&mut self) -> Result<u64> {
        self.refused()?;
        if let Some(stored) = self.stored()? {
            return Ok(stored.pointer.as_ref().map_or(stored.size, |p| p.size));
        }
        let file = match &self.subject.origin {
            Origin::Worktree { file, .. } => file,
            // A model of several files is as large as its files together.
            Origin::Model(artifact) => return Ok(artifact.layout.file_size),
            _ => unreachable!("blob origins have a stored blob"),
        };
        if let Some(p) = worktree_pointer(file)? {
            return Ok(p.size);
        }
        Ok(std::fs::metadata(file)
            .map_err(|e| crate::error::Error::io(file, e))?
            .len())
    }

    /// What the model bytes are: a model, an unreadable model, a pickle, something else.
    pub(crate) fn content(&mut self) -> Result<Judged> {
        if let Origin::Model(artifact) = &self.subject.origin {
            return Ok(Judged {
                content: Content::Model(artifact.clone()),
                pickle: None,
            });
        }
        let body = self.body()?;
        let classified = match self.classified.take() {
            Some(classified) => classified,
            None => crate::read::classify_bytes(Path::new(self.path()), body.bytes()),
        };
        Ok(Judged::new(classified, body.bytes()))
    }

    /// The subject as a `.wdelta` file: None when it is neither named `.wdelta` nor starts
    /// with the magic (the delta keys do not judge it); otherwise the parsed file, or why it
    /// does not parse (the checksum is verified).
    pub(crate) fn wdelta(
        &mut self,
    ) -> Result<
        Option<
            std::result::Result<
                crate::formats::wdelta::AnyWdelta,
                crate::formats::wdelta::WdeltaError,
            >,
        >,
    > {
        use crate::formats::wdelta::{AnyWdelta, is_wdelta, is_wdelta_path};
        if matches!(self.subject.origin, Origin::Model(_)) {
            return Ok(None);
        }
        let named = is_wdelta_path(self.path());
        let body = match self.body() {
            Ok(body) => body,
            // A file named otherwise whose bytes are not at hand is no delta of ours to judge.
            Err(_) if !named => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = body.bytes();
        if !named && !is_wdelta(bytes) {
            return Ok(None);
        }
        Ok(Some(AnyWdelta::parse(bytes)))
    }

    /// The LFS object of `pointer`: the local object, else its header from the LFS server
    /// (a prefix of the object, already parsed).
    fn lfs_body(
        &mut self,
        repo: Option<&gix::Repository>,
        path: &str,
        pointer: &Pointer,
    ) -> Result<Body> {
        let Some(repo) = repo else {
            return Err(absent(path, pointer));
        };
        if let Some(object) = crate::git::present_object(repo, pointer) {
            return map_file(&object);
        }
        let reader = SideReader::new(repo, self.subject.remote);
        match reader.header_prefix(path, pointer) {
            Some(Ok((prefix, artifact))) => {
                self.classified = Some(Content::Model(Box::new(artifact)));
                Ok(Body::Bytes(prefix))
            }
            Some(Err(why)) => Err(PolicyError::file(
                path,
                FileReason::LfsObjectUnreadable {
                    oid: pointer.oid.clone(),
                    size: pointer.size,
                    why: why.to_string(),
                },
            )),
            None => Err(absent(path, pointer)),
        }
    }

    /// The model bytes: the file, the LFS object a pointer names, or the blob.
    fn body(&mut self) -> Result<Body> {
        self.refused()?;
        let path = self.path();
        let stored_pointer = self.stored()?.and_then(|s| s.pointer.clone());
        let subject: &'s Subject<'r> = self.subject;
        match &subject.origin {
            Origin::Blob { repo, id, .. } => match stored_pointer {
                Some(p) => self.lfs_body(Some(repo), path, &p),
                None => {
                    let stored = self.stored.as_mut().expect("stored above");
                    if let Some(bytes) = stored.bytes.take() {
                        return Ok(Body::Bytes(bytes));
                    }
                    let (body, classified) = blob_body(repo, *id, stored.size, Path::new(path))?;
                    self.classified = classified;
                    Ok(body)
                }
            },
            Origin::Worktree { repo, file, .. } => match worktree_pointer(file)? {
                Some(p) => self.lfs_body(*repo, path, &p),
                None => map_file(file),
            },
            Origin::Refused(reason) => Err(PolicyError::file(path, reason.clone())),
            Origin::Model(_) => unreachable!("a model's content is its artifact"),
        }
    }
}

/// The parsed model behind a subject (following an LFS pointer): for `policy pin`.
pub(crate) fn read_artifact(subject: &Subject<'_>) -> Result<Artifact> {
    let judged = SubjectReader::new(subject).content()?;
    match judged.content {
        Content::Model(a) => Ok(*a),
        _ => Err(PolicyError::file(
            &subject.path,
            FileReason::NotAModel {
                found: crate::escape::shown(&judged.describe()).into_owned(),
            },
        )),
    }
}

/// Whether a subject is a model file (GGUF, safetensors, PyTorch) by its first bytes (an LFS pointer counts
/// by its object, when present). A refused subject is none.
pub(crate) fn is_model(subject: &Subject<'_>) -> Result<bool> {
    match subject.origin {
        Origin::Refused(_) => return Ok(false),
        Origin::Model(_) => return Ok(true),
        _ => {}
    }
    let body = SubjectReader::new(subject).body()?;
    Ok(crate::read::detect(body.bytes()).is_some())
}

/// The pointer a work-tree file holds, if it is a pointer text (smudging skipped). Only a
/// regular file is read.
fn worktree_pointer(file: &Path) -> Result<Option<Pointer>> {
    let meta = regular_file(file)?;
    if meta.len() >= crate::git::MAX_POINTER_SIZE as u64 {
        return Ok(None);
    }
    let bytes = std::fs::read(file).map_err(|e| crate::error::Error::io(file, e))?;
    Ok(Pointer::parse(&bytes))
}

fn absent(path: &str, pointer: &Pointer) -> PolicyError {
    PolicyError::file(
        path,
        FileReason::LfsObjectAbsent {
            oid: pointer.oid.clone(),
            size: pointer.size,
        },
    )
}

/// The metadata of `file`, an error unless it is a regular file (opening a FIFO blocks, and
/// reading a device may never end).
fn regular_file(file: &Path) -> Result<std::fs::Metadata> {
    let meta = std::fs::metadata(file).map_err(|e| crate::error::Error::io(file, e))?;
    if meta.is_file() {
        return Ok(meta);
    }
    Err(PolicyError::file(
        &file.display().to_string(),
        FileReason::NotRegularFile {
            found: non_file_kind(&meta),
        },
    ))
}

/// What a path that is not a regular file is, for messages.
fn non_file_kind(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        "a directory"
    } else {
        "a device, FIFO or socket"
    }
}

/// What a work-tree file is judged as: itself when it is a regular file; when it is a symbolic
/// link, the regular file inside `root` (canonical) it leads to; else why it is not read.
/// A path that cannot be examined is passed on as is, for the read to report.
pub(crate) fn worktree_file(root: &Path, file: &Path) -> std::result::Result<PathBuf, FileReason> {
    let Ok(meta) = std::fs::symlink_metadata(file) else {
        return Ok(file.to_owned());
    };
    if meta.is_file() {
        return Ok(file.to_owned());
    }
    if !meta.file_type().is_symlink() {
        return Err(FileReason::NotRegularFile {
            found: non_file_kind(&meta),
        });
    }
    let target = std::fs::read_link(file)
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nothing = || FileReason::LinkToNonFile {
        target: target.clone(),
        found: "nothing it can reach (a dangling link, or a loop)".into(),
    };
    let Ok(real) = file.canonicalize() else {
        // Dangling: say whether it would lead out of the repository, by its text.
        let named = crate::fsutil::normalize(&file.parent().unwrap_or(root).join(&target));
        if !named.starts_with(root) {
            return Err(FileReason::LinkLeavesRepository { target });
        }
        return Err(nothing());
    };
    if !real.starts_with(root) {
        return Err(FileReason::LinkLeavesRepository { target });
    }
    match std::fs::metadata(&real) {
        Ok(meta) if meta.is_file() => Ok(real),
        Ok(meta) => Err(FileReason::LinkToNonFile {
            target,
            found: non_file_kind(&meta).into(),
        }),
        Err(_) => Err(nothing()),
    }
}

/// Links followed in a row before a committed link is given up on (as a system gives up on a
/// loop).
const MAX_LINKS: usize = 8;

/// Where the committed symbolic link `path` (whose blob is `link`) leads inside its tree, a
/// commit's or the index (`place`, for messages), whose entries `lookup` tells: the blob of the
/// regular file it names, through at most [`MAX_LINKS`] links, or why it is not followed.
pub(crate) fn follow_committed_link<'r>(
    repo: &'r gix::Repository,
    path: &str,
    link: ObjectId,
    place: &str,
    tree: Option<&str>,
    lookup: &dyn Fn(&str) -> std::result::Result<Option<Entry>, GitError>,
) -> Result<Origin<'r>> {
    let first = link_target(repo, link)?;
    let mut at = path.to_owned();
    let mut target = first.clone();
    for _ in 0..MAX_LINKS {
        let Some(next) = join_link(&at, &target) else {
            return Ok(Origin::Refused(FileReason::LinkLeavesRepository {
                target: first,
            }));
        };
        if next.is_empty() {
            return Ok(Origin::Refused(FileReason::LinkToNonFile {
                target: first,
                found: "the top directory of the repository".into(),
            }));
        }
        let found = match lookup(&next)? {
            Some(Entry::File(id)) => {
                return Ok(Origin::Blob {
                    repo,
                    id,
                    tree: tree.map(str::to_owned),
                });
            }
            Some(Entry::Link(id)) => {
                target = link_target(repo, id)?;
                at = next;
                continue;
            }
            Some(other) => format!("{} ({} in {place})", other.describe(), shown(&next)),
            None => format!("nothing ({} is not in {place})", shown(&next)),
        };
        return Ok(Origin::Refused(FileReason::LinkToNonFile {
            target: first,
            found,
        }));
    }
    Ok(Origin::Refused(FileReason::LinkToNonFile {
        target: first,
        found: format!("more than {MAX_LINKS} links in a row"),
    }))
}

/// The repository path that a link at `link_path` to `target` names, or None when the target
/// leaves the repository (an absolute path, or `..` above the top directory).
fn join_link(link_path: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = link_path.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

fn map_file(file: &Path) -> Result<Body> {
    regular_file(file)?;
    let f = std::fs::File::open(file).map_err(|e| crate::error::Error::io(file, e))?;
    let len = f
        .metadata()
        .map_err(|e| crate::error::Error::io(file, e))?
        .len();
    if len == 0 {
        return Ok(Body::Empty);
    }
    let map =
        crate::mapped::GuardedMap::map(&f, file).map_err(|e| crate::error::Error::io(file, e))?;
    Ok(Body::Map(map))
}

/// A blob's content: whole when it fits [`MAX_BLOB_IN_MEMORY`], else a prefix long enough
/// for the model header (gix would inflate the whole object into memory), with the
/// classification that decided its length.
fn blob_body(
    repo: &gix::Repository,
    id: ObjectId,
    size: u64,
    path: &Path,
) -> Result<(Body, Option<Content>)> {
    if size <= MAX_BLOB_IN_MEMORY {
        return Ok((Body::Bytes(crate::git::blob_bytes(repo, id)?), None));
    }
    let mut prefix = Vec::new();
    let mut classified = None;
    for limit in BLOB_PREFIXES {
        prefix = crate::git::blob_prefix(repo, id, limit)?;
        let content = crate::read::classify_prefix(path, &prefix, size);
        let header_complete = !matches!(content, Content::Invalid { .. });
        classified = Some(content);
        if header_complete || prefix.len() as u64 >= size {
            break;
        }
    }
    let classified =
        classified.map(|content| judged_by_zip_directory(repo, id, path, &prefix, size, content));
    Ok((Body::Bytes(prefix), classified))
}

/// A model read from a blob's prefix, judged by the zip directory at the blob's end when it is
/// a zip checkpoint (the tail streamed from `git cat-file`, within the header cap): a local
/// entry the directory does not list must not stand for what torch loads, so a prefix is never
/// judged clean on its own.
fn judged_by_zip_directory(
    repo: &gix::Repository,
    id: ObjectId,
    path: &Path,
    prefix: &[u8],
    size: u64,
    content: Content,
) -> Content {
    let Content::Model(artifact) = content else {
        return content;
    };
    let limit = crate::formats::limits::max_header_bytes();
    let judged = crate::read::judge_zip_tail(path, prefix, size, |start| {
        crate::git::blob_tail(repo, id, start, limit)
    });
    match judged {
        Ok(()) => Content::Model(artifact),
        Err(error) => Content::Invalid {
            format: artifact.format,
            error: Box::new(error),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A work-tree file holding `bytes`, outside any repository.
    fn file_subject(dir: &tempfile::TempDir, bytes: &[u8]) -> Subject<'static> {
        let file = dir.path().join("x.bin");
        std::fs::write(&file, bytes).unwrap();
        Subject {
            path: "m/x.bin".into(),
            origin: Origin::Worktree {
                repo: None,
                file,
                index_id: None,
            },
            remote: &RemoteOptions::ONLINE,
        }
    }

    #[test]
    fn content_is_classified_by_the_core_then_sniffed() {
        let dir = tempfile::tempdir().unwrap();
        let describe = |bytes: &[u8]| {
            let subject = file_subject(&dir, bytes);
            SubjectReader::new(&subject).content().unwrap().describe()
        };
        assert_eq!(
            describe(b""),
            "none of GGUF, safetensors or PyTorch (first bytes none: the file is empty)"
        );
        assert_eq!(
            describe(b"0123456789"),
            "none of GGUF, safetensors or PyTorch (first bytes 30 31 32 33 34 35 36 37)"
        );
        assert_eq!(
            describe(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01s."),
            "pickle (raw, protocol 2) importing nothing"
        );
        let invalid = describe(b"GGUF\x03\x00\x00\x00");
        assert!(
            invalid.starts_with("an unreadable gguf file (m/x.bin: "),
            "{invalid}"
        );
    }

    #[test]
    fn an_absent_lfs_object_names_the_file() {
        let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:\
                       4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
        let dir = tempfile::tempdir().unwrap();
        let subject = file_subject(&dir, pointer.as_bytes());
        let err = SubjectReader::new(&subject).content().err().unwrap();
        assert!(matches!(
            &err,
            PolicyError::File {
                reason: FileReason::LfsObjectAbsent { size: 12345, .. },
                ..
            }
        ));
        assert!(
            err.to_string()
                .starts_with("m/x.bin: the LFS object sha256:4d7a2146"),
            "{err}"
        );
    }
}
