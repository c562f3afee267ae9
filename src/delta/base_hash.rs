//! The parent hash of a base model, remembered between runs. Hashing a base is about half of
//! `apply` (SHA-256 of every weight byte), and a base is applied to again and again, so its
//! hash is kept in a small file keyed by what the kernel says of each of its files: device,
//! inode, size, modification time and change time, to the nanosecond — the fields git's index
//! trusts to call a file unchanged. docs/wdelta.md states what this trusts; `--verify-base`
//! (and `delta verify`) hashes anyway and renews the entry.
//!
//! A hash is recorded only when every file's stamp is the same before and after hashing and
//! both of its times are more than [`SETTLED`] older than the start of the hashing: a write
//! during or after the hashing then always moves the change time, which no program can set
//! back. The cache lives in `$WEIGHT_INSPECT_CACHE_DIR`, else `$XDG_CACHE_HOME/weight-inspect`,
//! else `~/.cache/weight-inspect`; it is best-effort: an entry that cannot be read or written
//! is a miss, never an error.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::error::DeltaError;
use super::model::Model;
use super::pipeline::RunOptions;

/// How long a file must have been left alone before the hashing began for its hash to be kept.
const SETTLED: Duration = Duration::from_secs(1);

/// First line of an entry: the layout of what follows.
const ENTRY_VERSION: &str = "weight-inspect base hash 1";

/// What the kernel says of each file of a model, as a line per file: a write changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamps {
    lines: String,
    /// The latest modification or change time among the files.
    newest: (i64, i64),
}

impl Stamps {
    /// The stamps of `model`'s files, through the handles it reads from (so a file renamed
    /// over one of its paths meanwhile does not count).
    pub(crate) fn of(model: &Model) -> Option<Stamps> {
        Stamps::of_files(model.file_metadata())
    }

    /// The stamps of the files whose metadata `metas` are (None if one is unreadable).
    pub(crate) fn of_files(
        metas: impl Iterator<Item = std::io::Result<std::fs::Metadata>>,
    ) -> Option<Stamps> {
        let mut lines = String::new();
        let mut newest = (i64::MIN, 0);
        for meta in metas {
            let m = meta.ok()?;
            lines.push_str(&format!(
                "{} {} {} {}.{:09} {}.{:09}\n",
                m.dev(),
                m.ino(),
                m.size(),
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec()
            ));
            newest = newest
                .max((m.mtime(), m.mtime_nsec()))
                .max((m.ctime(), m.ctime_nsec()));
        }
        Some(Stamps { lines, newest })
    }

    /// Whether every file was last touched more than [`SETTLED`] before `started`.
    fn settled_before(&self, started: SystemTime) -> bool {
        let Ok(since_epoch) = started.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let Some(limit) = since_epoch.checked_sub(SETTLED) else {
            return false;
        };
        let limit = (limit.as_secs() as i64, i64::from(limit.subsec_nanos()));
        self.newest < limit
    }
}

/// The cache directory, if the environment names one.
fn cache_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = from("WEIGHT_INSPECT_CACHE_DIR")
        .or_else(|| from("XDG_CACHE_HOME").map(|d| d.join("weight-inspect")))
        .or_else(|| from("HOME").map(|d| d.join(".cache").join("weight-inspect")))?;
    Some(dir.join("base-hashes"))
}

fn entry_path(dir: &std::path::Path, stamps: &Stamps) -> PathBuf {
    let key = crate::digest::hex(&Sha256::digest(stamps.lines.as_bytes()));
    dir.join(&key[..2]).join(&key[2..])
}

/// The hash recorded for files with exactly these stamps.
fn lookup(stamps: &Stamps) -> Option<String> {
    // An entry is a small regular file: a symbolic link, a FIFO or anything larger than an
    // entry of these stamps is not one, and is not read.
    let limit = (ENTRY_VERSION.len() + stamps.lines.len() + 66) as u64;
    let bytes =
        crate::fsutil::read_regular(&entry_path(&cache_dir()?, stamps), limit, true).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let rest = text.strip_prefix(ENTRY_VERSION)?.strip_prefix('\n')?;
    let hash = rest
        .strip_prefix(stamps.lines.as_str())?
        .strip_suffix('\n')?;
    let is_hash = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    is_hash.then(|| hash.to_string())
}

fn record(stamps: &Stamps, hash: &str) {
    let Some(dir) = cache_dir() else { return };
    let path = entry_path(&dir, stamps);
    let Some(parent) = path.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let text = format!("{ENTRY_VERSION}\n{}{hash}\n", stamps.lines);
    // Not flushed to disk: after a crash an entry may be lost or empty, which reads as a miss
    // (the lookup checks the whole layout), and waiting for the disk cost every hashing run.
    let _ = crate::fsutil::write_atomically_with::<crate::error::Error>(&path, false, |file| {
        use std::io::Write;
        let mut file = file;
        file.write_all(text.as_bytes())
            .map_err(|e| crate::error::Error::io(&path, e))
    });
}

/// The hash recorded for `model`'s files as they are now, unless `run` asks to verify.
pub(crate) fn remembered(model: &Model, run: &RunOptions) -> Option<String> {
    if run.verify_base {
        return None;
    }
    lookup(&Stamps::of(model)?)
}

/// After `apply` has read a base whose hash it took from the cache: Err when the files no
/// longer have the stamps the hash was remembered for (a write during the run), so the output
/// is not kept. A write that leaves every stamp alone (a store through a shared mapping into
/// an already-dirty page) is not seen; docs/wdelta.md says so.
pub(crate) fn recheck_remembered(model: &Model, hash: &str) -> Result<(), DeltaError> {
    let still = Stamps::of(model).and_then(|stamps| lookup(&stamps));
    if still.as_deref() == Some(hash) {
        return Ok(());
    }
    Err(DeltaError::from(crate::error::Error::io(
        &model.path,
        std::io::Error::other(
            "changed while it was read (its stamps are no longer those its remembered hash \
             was recorded for); nothing was written, run again",
        ),
    )))
}

/// The parent hash of `model`: remembered, or computed (`tick` is called as bytes are hashed)
/// and remembered.
pub(crate) fn parent_hash(
    model: &Model,
    run: &RunOptions,
    mut tick: impl FnMut(u64),
) -> Result<String, DeltaError> {
    if let Some(hash) = remembered(model, run) {
        return Ok(hash);
    }
    let hash = hash_and_remember(model, |n| {
        tick(n);
        true
    })?;
    Ok(hash.expect("never stopped"))
}

/// How much later than the clock a test build takes the hashing to begin, so that a test
/// needs no sleep for a file it just wrote to be settled (a change time cannot be set back):
/// `WEIGHT_INSPECT_CLOCK_AHEAD_MS` in debug builds, a thread's own setting in unit tests.
/// Always zero in release builds.
fn clock_ahead() -> Duration {
    #[cfg(test)]
    if let Some(ahead) = tests::CLOCK_AHEAD.with(std::cell::Cell::get) {
        return ahead;
    }
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("WEIGHT_INSPECT_CLOCK_AHEAD_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
    {
        return Duration::from_millis(ms);
    }
    Duration::ZERO
}

/// Hashes `model` (stopping with `None` when `go_on` says false, as
/// [`Model::parent_hash_while`]) and records the hash when the files held still while they were
/// read (see the module).
pub(crate) fn hash_and_remember(
    model: &Model,
    go_on: impl FnMut(u64) -> bool,
) -> Result<Option<String>, DeltaError> {
    let before = Stamps::of(model);
    let started = SystemTime::now() + clock_ahead();
    let hash = model.parent_hash_while(go_on)?;
    if let (Some(hash), Some(before)) = (&hash, before)
        && before.settled_before(started)
        && Stamps::of(model).as_ref() == Some(&before)
    {
        record(&before, hash);
    }
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// This test thread's [`clock_ahead`], when set.
        pub(super) static CLOCK_AHEAD: std::cell::Cell<Option<Duration>> =
            const { std::cell::Cell::new(None) };
    }

    /// A hash taken from the cache holds only while the files keep their stamps: a write to
    /// the base after the lookup (during an `apply`) makes the re-check fail. Uses the cache
    /// directory the test command names (WEIGHT_INSPECT_CACHE_DIR).
    #[test]
    fn a_write_after_the_lookup_fails_the_recheck() {
        if cache_dir().is_none() {
            panic!("no cache directory: set WEIGHT_INSPECT_CACHE_DIR as the test command does");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.safetensors");
        let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        // A value of its own, so that no other test shares the entry.
        let unique = std::process::id() as f32 + 0.5;
        bytes.extend_from_slice(&unique.to_le_bytes());
        bytes.extend_from_slice(&2f32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        // Settled: last touched more than a second before the hashing begins (this thread's
        // clock set two seconds ahead instead of sleeping).
        CLOCK_AHEAD.with(|ahead| ahead.set(Some(Duration::from_secs(2))));
        let model = Model::open(&path).unwrap();
        let hash = hash_and_remember(&model, |_| true).unwrap().unwrap();
        assert_eq!(lookup(&Stamps::of(&model).unwrap()), Some(hash.clone()));
        recheck_remembered(&model, &hash).unwrap();

        // Same size, same bytes even: the write moves the change time.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(
            &file,
            &2f32.to_le_bytes(),
            bytes.len() as u64 - 4,
        )
        .unwrap();
        drop(file);
        let err = recheck_remembered(&model, &hash).unwrap_err().to_string();
        assert!(err.contains("changed while it was read"), "{err}");
    }
}
