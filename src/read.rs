//! Opening model files: detect the format from the bytes, hand them to that format's parser.

use std::path::{Path, PathBuf};

use crate::artifact::{Artifact, Format};
use crate::error::{Error, Result};
use crate::formats;
use crate::formats::wdelta::{AnyWdelta, DeltaSummary};
use crate::sharded::{self, ShardError};

/// Opens `path` for reading a model: regular files only (a symlink is followed to one), so a
/// device or a FIFO named like a model is refused rather than read forever.
/// A FIFO is refused without blocking in `open` ([`crate::fsutil::open_regular`]).
fn open_regular(path: &Path) -> Result<(std::fs::File, u64)> {
    let (file, meta) = crate::fsutil::open_regular(path).map_err(|e| {
        let message = e
            .to_string()
            .replace("expected a file", "expected a model file");
        Error::io(path, std::io::Error::new(e.kind(), message))
    })?;
    Ok((file, meta.len()))
}

/// Reads a model file. The file is memory-mapped, so only the pages of the header are read
/// even for a multi-gigabyte model. For files that may change while they are read (the ones
/// git hands its drivers), [`read_file_buffered`] cannot fault.
pub fn read_file(path: &Path) -> Result<Artifact> {
    let (file, len) = open_regular(path)?;
    if len == 0 {
        return read_bytes(path, &[]);
    }
    let map = crate::mapped::GuardedMap::map(&file, path).map_err(|e| Error::io(path, e))?;
    crate::mapped::pause_point("header-mapped", path);
    // A zip checkpoint's header is scattered: the pickle, the directory at the end and one
    // local header before each storage. Read-around on each of those faults would pull in
    // megabytes of weights per member (8 MB on a disk with that read-ahead), so only the
    // pages touched are read.
    if map.starts_with(b"PK\x03\x04") {
        map.advise(memmap2::Advice::Random);
    }
    read_bytes(path, &map)
}

/// First read of a header: enough for most safetensors headers and GGUF files without a large
/// vocabulary; a larger header is read on in steps that at least double.
const FIRST_WINDOW: u64 = 1 << 20;

/// What a reader of a header, given a prefix (the first bytes of a file), must do next.
#[derive(Debug)]
pub(crate) enum HeaderStep {
    /// The header is complete in the prefix (or the prefix is all there is): the parse.
    Parsed(Result<crate::artifact::Artifact>),
    /// Read on until the prefix holds `end` bytes. `exact`: the format declared its header
    /// length (safetensors), so `end` is where the header ends; otherwise (GGUF) `end` is only
    /// what the next item needs and a reader should read further ahead.
    Need { end: u64, exact: bool },
}

/// A model format as the readers see it: how its files are named, how its first bytes look,
/// and how its header is read from a prefix of a file. Adding a format is a parser in
/// `formats/`, its variant of [`Format`], and one entry in [`READERS`].
struct Reader {
    format: Format,
    /// File name extensions (any case), for tree walks that must not read every blob.
    extensions: &'static [&'static str],
    /// Whether a file's first bytes are this format's.
    detect: fn(&[u8]) -> bool,
    /// One step of reading the header from `prefix`, the first bytes of a `file_len`-byte
    /// file named `path` in errors.
    step: fn(&Path, &[u8], u64) -> HeaderStep,
}

/// The model formats, in the order their magic bytes are tried.
const READERS: &[Reader] = &[
    Reader {
        format: Format::Gguf,
        extensions: &["gguf"],
        detect: formats::gguf::detect,
        step: |path, prefix, file_len| match formats::gguf::parse_prefix(prefix, file_len) {
            Ok(artifact) => HeaderStep::Parsed(Ok(artifact)),
            Err(e) => match e
                .needs_more(file_len)
                .filter(|&end| end > prefix.len() as u64)
            {
                // A GGUF header does not declare its length: the next item's end.
                Some(end) => HeaderStep::Need { end, exact: false },
                None => HeaderStep::Parsed(Err(Error::Gguf {
                    path: path.to_owned(),
                    source: e,
                })),
            },
        },
    },
    Reader {
        format: Format::Safetensors,
        extensions: &["safetensors"],
        detect: formats::safetensors::detect,
        step: |path, prefix, file_len| {
            let have = prefix.len() as u64;
            match formats::safetensors::header_bytes_needed(prefix)
                .filter(|&n| n > have && n <= file_len)
            {
                Some(end) => HeaderStep::Need { end, exact: true },
                None => HeaderStep::Parsed(
                    formats::safetensors::parse_prefix(prefix, file_len).map_err(|source| {
                        Error::Safetensors {
                            path: path.to_owned(),
                            source,
                        }
                    }),
                ),
            }
        },
    },
    Reader {
        format: Format::Pytorch,
        extensions: &["bin", "pt", "pth", "ckpt"],
        detect: formats::pytorch::detect,
        step: |path, prefix, file_len| {
            let have = prefix.len() as u64;
            match formats::pytorch::parse_prefix(prefix, file_len) {
                Ok(artifact) => HeaderStep::Parsed(Ok(artifact)),
                // The pickle (or the zip directory naming it) lies beyond the prefix: read on,
                // up to the header cap. A checkpoint does not declare where its pickle ends.
                Err(source) if have < file_len && have >= formats::limits::max_header_bytes() => {
                    HeaderStep::Parsed(Err(Error::Pytorch {
                        path: path.to_owned(),
                        source: Box::new(formats::pytorch::PytorchError::PickleNotInPrefix {
                            read: have,
                            raise: formats::limits::how_to_raise(),
                            last: Box::new(source),
                        }),
                    }))
                }
                Err(_) if have < file_len => HeaderStep::Need {
                    end: have
                        .saturating_mul(2)
                        .min(file_len)
                        .min(formats::limits::max_header_bytes().max(have + 1)),
                    exact: false,
                },
                Err(source) => HeaderStep::Parsed(Err(Error::Pytorch {
                    path: path.to_owned(),
                    source: Box::new(source),
                })),
            }
        },
    },
];

fn reader(format: Format) -> &'static Reader {
    READERS
        .iter()
        .find(|r| r.format == format)
        .expect("every format has a reader")
}

/// Detects the format from the first bytes; never from the file name.
pub(crate) fn detect(bytes: &[u8]) -> Option<Format> {
    READERS.iter().find(|r| (r.detect)(bytes)).map(|r| r.format)
}

/// The growing-window step shared by every reader of headers (local files, HTTP ranges):
/// parses `prefix`, the first bytes of a `file_len`-byte file, or says how far to read.
pub(crate) fn header_step(path: &Path, prefix: &[u8], file_len: u64) -> HeaderStep {
    let step = match detect(prefix) {
        Some(format) => (reader(format).step)(path, prefix, file_len),
        None => HeaderStep::Parsed(Err(Error::UnknownFormat {
            path: path.to_owned(),
            first_bytes: describe_start(prefix),
        })),
    };
    match step {
        HeaderStep::Parsed(Err(error)) => {
            HeaderStep::Parsed(Err(dangerous_or(path, prefix, error)))
        }
        step => step,
    }
}

/// `error`, or, when the bytes that could not be read hold a pickle stream naming a dangerous
/// global, the error that says so (a scan of opcodes; nothing is unpickled).
fn dangerous_or(path: &Path, bytes: &[u8], error: Error) -> Error {
    if !matches!(error, Error::UnknownFormat { .. } | Error::Pytorch { .. }) {
        return error;
    }
    let Some(report) = crate::formats::pytorch::scan_any(bytes) else {
        return error;
    };
    let dangerous = crate::formats::pytorch::dangerous_imports(&report);
    if dangerous.is_empty() {
        return error;
    }
    Error::UnreadableDangerous {
        path: path.to_owned(),
        globals: dangerous.join(", "),
        escaping: report
            .escaping_note()
            .map(|note| format!("; {note}"))
            .unwrap_or_default(),
        source: Box::new(error),
    }
}

impl Format {
    /// The format `path` names by its extension (any case), or None: walking a tree must not
    /// read every blob (the readers still detect the actual format by its magic bytes).
    pub fn from_path(path: &str) -> Option<Format> {
        let (_, ext) = file_name(path).rsplit_once('.')?;
        READERS
            .iter()
            .find(|r| r.extensions.iter().any(|e| ext.eq_ignore_ascii_case(e)))
            .map(|r| r.format)
    }
}

/// Whether `path` names a file this tool reads: a model by its format's extension, or a
/// `.wdelta`.
pub(crate) fn is_read_path(path: &str) -> bool {
    Format::from_path(path).is_some() || formats::wdelta::is_wdelta_path(path)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Reads a model file's header with ordinary reads into a buffer, never a memory map: a file
/// truncated or rewritten while it is read gives a parse error or a truncation note, never a
/// SIGBUS. Only the header is read (in growing steps), whatever the size of the file.
#[cfg(test)]
pub(crate) fn read_file_buffered(path: &Path) -> Result<Artifact> {
    let (file, len) = open_regular(path)?;
    read_opened(path, &file, len)
}

/// [`read_file_buffered`] of `file`, already opened from `path` and `len` bytes long.
fn read_opened(path: &Path, file: &std::fs::File, len: u64) -> Result<Artifact> {
    let mut prefix = Vec::new();
    let mut want = len.min(FIRST_WINDOW);
    loop {
        read_up_to(file, &mut prefix, want).map_err(|e| Error::io(path, e))?;
        // A file that shrank while it was read is parsed as what was there.
        let file_len = if (prefix.len() as u64) < want {
            prefix.len() as u64
        } else {
            len
        };
        match header_step(path, &prefix, file_len) {
            HeaderStep::Parsed(Ok(artifact)) => {
                return judge_zip_directory(path, file, &prefix, file_len).map(|()| artifact);
            }
            HeaderStep::Parsed(result) => return result,
            HeaderStep::Need { end, exact: true } => want = end,
            HeaderStep::Need { end, exact: false } => {
                want = end.max(prefix.len() as u64 * 2).min(file_len);
            }
        }
    }
}

/// A zip checkpoint's header read from its first bytes is judged by the central directory torch
/// reads, at the end of the file (read too, within the header cap): a local entry it does not
/// list must not stand for what torch loads.
fn judge_zip_directory(path: &Path, file: &std::fs::File, prefix: &[u8], len: u64) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    judge_zip_tail(path, prefix, len, |start| {
        let mut tail = Vec::new();
        let mut reader = file;
        reader
            .seek(SeekFrom::Start(start))
            .and_then(|_| reader.take(len - start).read_to_end(&mut tail))
            .map(|_| tail)
    })
}

/// Judges a model parsed from `prefix`, the first bytes of a `len`-byte file, by the zip
/// directory at the file's end when it is a zip checkpoint the prefix does not hold whole:
/// `read_from(start)` gives the file's bytes from `start` to its end (asked again from an
/// earlier offset when the directory starts before them).
pub(crate) fn judge_zip_tail(
    path: &Path,
    prefix: &[u8],
    len: u64,
    mut read_from: impl FnMut(u64) -> std::io::Result<Vec<u8>>,
) -> Result<()> {
    use formats::pytorch::{self, DirectoryCheck};
    let Some(mut start) = pytorch::zip_tail_start(prefix, len) else {
        return Ok(());
    };
    loop {
        let tail = read_from(start).map_err(|e| Error::io(path, e))?;
        let check = pytorch::check_zip_tail(prefix, &tail, start, len).map_err(|source| {
            Error::Pytorch {
                path: path.to_owned(),
                source: Box::new(source),
            }
        })?;
        match check {
            DirectoryCheck::Agrees => return Ok(()),
            DirectoryCheck::ReadFrom(earlier) => start = earlier,
        }
    }
}

/// Appends to `buf` until it holds `want` bytes of `file` or the file ends.
fn read_up_to(file: &std::fs::File, buf: &mut Vec<u8>, want: u64) -> std::io::Result<()> {
    use std::io::Read;
    let missing = want.saturating_sub(buf.len() as u64);
    // Room first (up to the first window: a larger `want` may come from a declared length), so
    // a small header is one read rather than a run of reads growing from 32 bytes.
    buf.reserve(usize::try_from(missing.min(FIRST_WINDOW)).unwrap_or(0));
    let reader = file;
    reader.take(missing).read_to_end(buf)?;
    Ok(())
}

/// Parses a model file given as bytes: the whole file, or a prefix holding its header (missing
/// tensor data is reported as truncated). `path` only names the file in errors.
pub fn read_bytes(path: &Path, bytes: &[u8]) -> Result<Artifact> {
    match header_step(path, bytes, bytes.len() as u64) {
        HeaderStep::Parsed(result) => result,
        // A step asks for no more than the file holds, and these bytes are all of it.
        HeaderStep::Need { end, .. } => Err(Error::io(
            path,
            std::io::Error::other(format!(
                "the header needs {end} bytes, the file has {}",
                bytes.len()
            )),
        )),
    }
}

/// What a file's bytes turned out to be: the one classification every reader of files uses
/// (the commands, git's sides of a comparison, the policy).
#[derive(Debug)]
pub(crate) enum Content {
    Model(Box<Artifact>),
    /// The magic bytes of a model format, but the header does not parse.
    Invalid {
        format: Format,
        error: Box<Error>,
    },
    /// None of the formats this tool reads; `first_bytes` as [`describe_start`] shows them.
    Other {
        first_bytes: String,
    },
    /// A `.wdelta` (recognized by its magic): what its header says.
    Delta(Box<DeltaSummary>),
    /// The `.wdelta` magic, but the header does not read.
    BadDelta {
        error: Box<Error>,
    },
}

impl Content {
    pub(crate) fn artifact(&self) -> Option<&Artifact> {
        match self {
            Content::Model(artifact) => Some(artifact),
            _ => None,
        }
    }
}

/// Detects the format of `bytes` and parses them when they are a model (`path` only names the
/// file in errors).
pub(crate) fn classify_bytes(path: &Path, bytes: &[u8]) -> Content {
    if formats::wdelta::is_wdelta(bytes) {
        return delta_content(path, DeltaSummary::read_bytes(bytes, bytes.len() as u64));
    }
    let Some(format) = detect(bytes) else {
        return other_content(path, bytes);
    };
    match read_bytes(path, bytes) {
        Ok(artifact) => Content::Model(Box::new(artifact)),
        Err(error) => Content::Invalid {
            format,
            error: Box::new(error),
        },
    }
}

/// [`classify_bytes`] for the first bytes of a `file_len`-byte file: the tensor data the
/// prefix leaves out is not counted missing (a model judged from a prefix of its blob is as
/// complete as the blob). A prefix too short for the header is `Invalid`, saying so.
pub(crate) fn classify_prefix(path: &Path, prefix: &[u8], file_len: u64) -> Content {
    if formats::wdelta::is_wdelta(prefix) {
        return delta_content(path, DeltaSummary::read_bytes(prefix, file_len));
    }
    let Some(format) = detect(prefix) else {
        return other_content(path, prefix);
    };
    let error = match header_step(path, prefix, file_len) {
        HeaderStep::Parsed(Ok(artifact)) => return Content::Model(Box::new(artifact)),
        HeaderStep::Parsed(Err(error)) => error,
        HeaderStep::Need { end, .. } => Error::io(
            path,
            std::io::Error::other(format!(
                "the header needs {end} bytes, {} were read",
                prefix.len()
            )),
        ),
    };
    Content::Invalid {
        format,
        error: Box::new(error),
    }
}

/// Bytes of none of the formats: `Other`, unless they hold a pickle stream naming a dangerous
/// global, which is an unreadable PyTorch file that says so (never "not a model file").
fn other_content(path: &Path, bytes: &[u8]) -> Content {
    let unknown = Error::UnknownFormat {
        path: path.to_owned(),
        first_bytes: describe_start(bytes),
    };
    match dangerous_or(path, bytes, unknown) {
        Error::UnknownFormat { first_bytes, .. } => Content::Other { first_bytes },
        dangerous => Content::Invalid {
            format: Format::Pytorch,
            error: Box::new(dangerous),
        },
    }
}

/// [`classify_prefix`] with the file's last `tail.len()` bytes too, for a reader of ranges (a
/// lossless `.wdelta` keeps its header at the end). `Err((start, end))`: a `.wdelta` whose
/// header needs the bytes `start..end`, which neither end holds.
pub(crate) fn classify_ends(
    path: &Path,
    prefix: &[u8],
    tail: &[u8],
    file_len: u64,
) -> std::result::Result<Content, (u64, u64)> {
    if !formats::wdelta::is_wdelta(prefix) {
        return Ok(classify_prefix(path, prefix, file_len));
    }
    let tail_start = file_len.saturating_sub(tail.len() as u64);
    let mut missing: Option<(u64, u64)> = None;
    let summary = DeltaSummary::read(file_len, |at, buf| {
        let end = at.saturating_add(buf.len() as u64);
        if end <= prefix.len() as u64 {
            buf.copy_from_slice(&prefix[at as usize..end as usize]);
            return Ok(());
        }
        if at >= tail_start && end <= file_len {
            let from = (at - tail_start) as usize;
            buf.copy_from_slice(&tail[from..from + buf.len()]);
            return Ok(());
        }
        missing = Some(missing.map_or((at, end), |(a, e)| (a.min(at), e.max(end))));
        Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("bytes {at}..{end} were not read"),
        ))
    });
    match missing {
        Some(range) if summary.is_err() => Err(range),
        _ => Ok(delta_content(path, summary)),
    }
}

/// [`classify_bytes`] for a file on disk, of which only the header is read.
/// Reads with [`read_file_buffered`]: this serves the files git hands its drivers.
pub(crate) fn classify_file(path: &Path) -> Content {
    match open_regular(path) {
        Ok((file, len)) => classify_opened(path, &file, len),
        Err(error) => classify_read(Err(error)),
    }
}

/// [`classify_file`] of `file`, already opened from `path` and `len` bytes long (and not read
/// from yet).
pub(crate) fn classify_opened(path: &Path, file: &std::fs::File, len: u64) -> Content {
    let mut magic = [0u8; formats::wdelta::MAGIC.len()];
    if read_exact_at(file, 0, &mut magic).is_ok() && formats::wdelta::is_wdelta(&magic) {
        return delta_content(
            path,
            DeltaSummary::read(len, |at, buf| read_exact_at(file, at, buf)),
        );
    }
    if let Err(e) = rewind(file) {
        return classify_read(Err(Error::io(path, e)));
    }
    classify_read(read_opened(path, file, len))
}

/// Fills `buf` from `file` at offset `at` (it moves the file's position).
fn read_exact_at(file: &std::fs::File, at: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut reader = file;
    reader.seek(SeekFrom::Start(at))?;
    reader.read_exact(buf)
}

fn rewind(file: &std::fs::File) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut reader = file;
    reader.seek(SeekFrom::Start(0)).map(|_| ())
}

/// The content of a file that starts with the `.wdelta` magic.
fn delta_content(
    path: &Path,
    summary: std::result::Result<DeltaSummary, formats::wdelta::WdeltaError>,
) -> Content {
    match summary {
        Ok(summary) => Content::Delta(Box::new(summary)),
        Err(source) => Content::BadDelta {
            error: Box::new(Error::Wdelta {
                path: path.to_owned(),
                source: Box::new(source),
            }),
        },
    }
}

fn classify_read(read: Result<Artifact>) -> Content {
    match read {
        Ok(artifact) => Content::Model(Box::new(artifact)),
        Err(Error::UnknownFormat { first_bytes, .. }) => Content::Other { first_bytes },
        Err(error) => {
            let format = match &error {
                Error::Safetensors { .. } => Format::Safetensors,
                Error::Pytorch { .. } | Error::UnreadableDangerous { .. } => Format::Pytorch,
                _ => Format::Gguf,
            };
            Content::Invalid {
                format,
                error: Box::new(error),
            }
        }
    }
}

/// The first 8 bytes in hex, as errors name content of an unknown format.
pub(crate) fn describe_start(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "none: the file is empty".into();
    }
    let head = &bytes[..bytes.len().min(8)];
    head.iter()
        .map(|b| crate::digest::hex(&[*b]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `.wdelta` file (recognized by its magic), parsed and validated: `inspect`, `id` and
/// `textconv` describe deltas rather than parse them as models. None for anything else.
pub(crate) fn read_wdelta(path: &Path) -> Result<Option<AnyWdelta>> {
    use std::io::Read;
    // Not a regular file: not a delta (read_file then says what it is), and never a blocking
    // open of a FIFO.
    let Ok((mut file, _)) = crate::fsutil::open_regular(path) else {
        return Ok(None);
    };
    let mut magic = [0u8; 8];
    let n = file.read(&mut magic).map_err(|e| Error::io(path, e))?;
    if !formats::wdelta::is_wdelta(&magic[..n]) {
        return Ok(None);
    }
    let map = crate::mapped::GuardedMap::map(&file, path).map_err(|e| Error::io(path, e))?;
    AnyWdelta::parse(&map)
        .map(Some)
        .map_err(|source| Error::Wdelta {
            path: path.to_owned(),
            source: Box::new(source),
        })
}

/// Opens what a path names as one model: a model file; a directory holding one model; a
/// `*.safetensors.index.json` with its shards; or any part of a split GGUF with all its parts.
pub(crate) fn open_model_path(path: &Path) -> Result<Artifact> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        let dir = FsDirectory::new(path);
        return Ok(sharded::open_directory(&dir, &path.display().to_string())?);
    }
    let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
        return read_file(path);
    };
    let parent = crate::fsutil::dir_of(path);
    if sharded::index::is_index_name(file) {
        let dir = FsDirectory::new(parent);
        let names = sharded::Directory::file_names(&dir)?;
        return Ok(sharded::open_index(&dir, file, &names)?);
    }
    let artifact = read_file(path)?;
    if let Some(name) = sharded::SplitName::parse(file)
        && artifact.format == Format::Gguf
        && sharded::split::is_part(&artifact)
    {
        let dir = FsDirectory::new(parent);
        let names = sharded::Directory::file_names(&dir)?;
        let number = name.number;
        return Ok(sharded::open_split(
            &dir,
            &name,
            &names,
            Some((number, artifact)),
        )?);
    }
    Ok(artifact)
}

/// A directory of the file system, as the multi-file reader sees it.
pub(crate) struct FsDirectory {
    dir: PathBuf,
}

impl FsDirectory {
    pub(crate) fn new(dir: &Path) -> FsDirectory {
        FsDirectory {
            dir: dir.to_owned(),
        }
    }

    /// The path of `file`, refusing a symbolic link that leads out of the directory.
    fn inside(&self, file: &str) -> std::result::Result<PathBuf, ShardError> {
        let path = self.dir.join(file);
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            let unreadable = |e: std::io::Error| ShardError::Unreadable {
                file: path.display().to_string(),
                message: e.to_string(),
            };
            let target = std::fs::canonicalize(&path).map_err(unreadable)?;
            let dir = std::fs::canonicalize(&self.dir).map_err(unreadable)?;
            if target.parent() != Some(dir.as_path()) {
                return Err(ShardError::LinkOutside {
                    file: path.display().to_string(),
                    target: target.display().to_string(),
                });
            }
        }
        Ok(path)
    }
}

impl sharded::Directory for FsDirectory {
    fn label(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    fn file_names(&self) -> std::result::Result<Vec<String>, ShardError> {
        let unreadable = |e: std::io::Error| ShardError::Unreadable {
            file: self.dir.display().to_string(),
            message: e.to_string(),
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(unreadable)? {
            let entry = entry.map_err(unreadable)?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    fn read_small(&self, file: &str, limit: u64) -> std::result::Result<Vec<u8>, ShardError> {
        use std::io::Read;
        let path = self.inside(file)?;
        let (handle, len) = open_regular(&path).map_err(Box::new)?;
        if len > limit {
            return Err(ShardError::Unreadable {
                file: path.display().to_string(),
                message: format!("{len} bytes, more than the {limit} an index may have"),
            });
        }
        let mut bytes = Vec::new();
        handle
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| Box::new(Error::io(&path, e)))?;
        Ok(bytes)
    }

    fn read_model(&self, file: &str) -> std::result::Result<Artifact, ShardError> {
        let path = self.inside(file)?;
        Ok(read_file(&path).map_err(Box::new)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats_by_extension() {
        assert_eq!(Format::from_path("models/a.gguf"), Some(Format::Gguf));
        assert_eq!(
            Format::from_path("A.SafeTensors"),
            Some(Format::Safetensors)
        );
        assert!(is_read_path("x.wdelta"));
        assert_eq!(Format::from_path("x.wdelta"), None);
        assert_eq!(Format::from_path("gguf"), None);
        assert_eq!(Format::from_path("dir.gguf/readme.md"), None);
        assert_eq!(Format::from_path("model.gguf.txt"), None);
        assert!(!is_read_path("model.gguf.txt"));
    }

    /// A GGUF v3 file with one string-array metadata key of `n` strings and no tensors.
    fn gguf_with_vocab(n: usize) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes()); // tensors
        b.extend_from_slice(&1u64.to_le_bytes()); // metadata keys
        let key = b"tokenizer.ggml.tokens";
        b.extend_from_slice(&(key.len() as u64).to_le_bytes());
        b.extend_from_slice(key);
        b.extend_from_slice(&9u32.to_le_bytes()); // array
        b.extend_from_slice(&8u32.to_le_bytes()); // of strings
        b.extend_from_slice(&(n as u64).to_le_bytes());
        for i in 0..n {
            let s = format!("token{i:07}");
            b.extend_from_slice(&(s.len() as u64).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        }
        b
    }

    #[test]
    fn buffered_reads_grow_past_the_first_window_and_agree_with_the_map() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.gguf");
        let bytes = gguf_with_vocab(200_000);
        assert!(bytes.len() as u64 > 3 * FIRST_WINDOW);
        std::fs::write(&path, &bytes).unwrap();
        let mapped = read_file(&path).unwrap();
        let buffered = read_file_buffered(&path).unwrap();
        assert_eq!(mapped, buffered);
    }

    #[test]
    fn buffered_reads_of_a_truncated_header_fail_as_the_map_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.gguf");
        let bytes = gguf_with_vocab(200_000);
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        let mapped = read_file(&path).unwrap_err().to_string();
        let buffered = read_file_buffered(&path).unwrap_err().to_string();
        assert_eq!(mapped, buffered);
        assert!(buffered.contains("at offset 4000049"), "{buffered}");
    }

    #[test]
    fn buffered_reads_of_safetensors_read_the_declared_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0u8; 8]);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            read_file(&path).unwrap(),
            read_file_buffered(&path).unwrap()
        );
    }

    #[test]
    fn a_prefix_is_judged_complete_by_the_length_of_its_file() {
        let header = br#"{"w":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        let whole = bytes.len() as u64 + 4096;
        bytes.extend_from_slice(&[0u8; 100]);
        let path = Path::new("m.safetensors");
        let model = |content: Content| match content {
            Content::Model(artifact) => artifact,
            other => panic!("{other:?}"),
        };
        assert!(
            model(classify_prefix(path, &bytes, whole))
                .layout
                .incomplete()
                .is_none()
        );
        let cut = model(classify_prefix(path, &bytes, whole - 1))
            .layout
            .incomplete();
        assert_eq!(cut.map(|c| c.data_present), Some(4095));
        // Read as the whole file, the same bytes are cut short.
        assert!(model(classify_bytes(path, &bytes)).layout.is_truncated());
        assert!(matches!(
            classify_prefix(path, &bytes[..20], whole),
            Content::Invalid { .. }
        ));
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_refused_not_read() {
        for read in [read_file, read_file_buffered] {
            let err = read(Path::new("/dev/zero")).unwrap_err().to_string();
            assert!(err.contains("not a regular file"), "{err}");
        }
    }
}
