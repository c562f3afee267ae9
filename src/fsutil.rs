//! File helpers shared by every command that writes: outputs are written to a temporary file in
//! the destination directory and renamed into place, so an interrupted run never leaves a
//! half-written file. Temporary files are registered while they exist: SIGINT, SIGTERM or
//! SIGHUP removes them before the process exits (128 + the signal), so a stopped run leaves no
//! hidden `.weight-inspect-*.tmp` beside its output for `git add -A` to pick up.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use crate::error::{Error, Result};

/// Temporary files to remove if the process is stopped by a signal.
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static SIGNALS: Once = Once::new();

/// While it lives, `path` is removed if SIGINT, SIGTERM or SIGHUP stops the process, or a
/// fault in a memory map of a truncated input ([`crate::mapped`]).
#[derive(Debug)]
pub(crate) struct RemoveOnSignal {
    path: PathBuf,
    _on_fault: crate::mapped::RemoveOnFault,
}

impl RemoveOnSignal {
    fn new(path: &Path) -> RemoveOnSignal {
        RemoveOnSignal {
            path: path.to_path_buf(),
            _on_fault: crate::mapped::RemoveOnFault::new(path),
        }
    }
}

impl Drop for RemoveOnSignal {
    fn drop(&mut self) {
        let mut temps = lock_temps();
        if let Some(i) = temps.iter().rposition(|p| *p == self.path) {
            temps.swap_remove(i);
        }
    }
}

fn lock_temps() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A thread waits for SIGINT, SIGTERM and SIGHUP (signal-hook's handler only writes to a pipe,
/// which is async-signal-safe); on the first, it removes the registered temporary files, says
/// so on one line and exits with 128 + the signal, as a shell reports a process it stopped.
/// The registry stays locked until the exit, so no temporary file is renamed into place or
/// registered after it was looked at; an output renamed before stays whole, as does the file
/// a temporary file would have replaced.
fn install_signal_thread() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let temps = lock_temps();
                let removed = temps
                    .iter()
                    .filter(|p| std::fs::remove_file(p).is_ok())
                    .count();
                let name = signal_hook::low_level::signal_name(signal).unwrap_or("a signal");
                let what = match removed {
                    0 => String::new(),
                    1 => "; removed 1 temporary file".to_string(),
                    n => format!("; removed {n} temporary files"),
                };
                eprintln!("\nweight-inspect: stopped by {name}{what}");
                signal_hook::low_level::exit(128 + signal);
            }
        });
    drop(spawned);
}

/// The directory `path`'s file is in: its parent, or `.` for a bare file name.
pub(crate) fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `path` atomically: `fill` writes the content into a temporary file beside it (by
/// offsets, from several threads if it likes), which gets the permissions of the file it
/// replaces (0644 for a new file), is flushed to disk when `sync` is set, and is renamed over
/// `path` only when `fill` succeeds. Skipping `sync` suits outputs that can be made again,
/// where waiting for gigabytes to reach the disk would dominate the run.
pub(crate) fn write_atomically_with<E>(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&File) -> std::result::Result<(), E>,
) -> std::result::Result<(), E>
where
    E: From<Error>,
{
    let dir = dir_of(path);
    // The registry is locked while the temporary file is created and registered, so a signal
    // in between waits for the registration and removes the file.
    SIGNALS.call_once(install_signal_thread);
    let mut temps = lock_temps();
    let tmp = tempfile::Builder::new()
        .prefix(".weight-inspect-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    temps.push(tmp.path().to_path_buf());
    drop(temps);
    // Dropped in this order: the temporary file (removed unless persisted), then its
    // registration, so there is no moment when it exists unregistered.
    let guarded = Guarded {
        _registration: RemoveOnSignal::new(tmp.path()),
        tmp: Some(tmp),
    };
    let tmp = guarded.tmp.as_ref().expect("set above");
    crate::mapped::pause_point("output-temp-created", path);
    fill(tmp.as_file())?;
    // Temporary files are created private (0600); the result gets the permissions of the file
    // it replaces, or those of an ordinary new file.
    let permissions = match std::fs::metadata(path) {
        Ok(existing) => existing.permissions(),
        Err(_) => default_permissions(tmp.as_file()).map_err(|e| Error::io(path, e))?,
    };
    tmp.as_file()
        .set_permissions(permissions)
        .map_err(|e| Error::io(path, e))?;
    if sync {
        tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    }
    let mut guarded = guarded;
    let tmp = guarded.tmp.take().expect("set above");
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// A temporary file and its registration for removal on a signal.
#[derive(Debug)]
struct Guarded {
    tmp: Option<tempfile::NamedTempFile>,
    _registration: RemoveOnSignal,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // Remove the file before the registration ends (fields drop after this).
        drop(self.tmp.take());
    }
}

/// A temporary copy of some bytes (a git blob handed to a command that reads files), in the
/// system's temporary directory; removed when dropped, or when a signal stops the process.
#[derive(Debug)]
pub(crate) struct TempCopy {
    guarded: Guarded,
}

impl TempCopy {
    /// Writes `bytes` to a new temporary file named with `suffix` (e.g. `.safetensors`).
    pub(crate) fn of(bytes: &[u8], suffix: &str) -> Result<TempCopy> {
        SIGNALS.call_once(install_signal_thread);
        let mut temps = lock_temps();
        let dir = std::env::temp_dir();
        let mut tmp = tempfile::Builder::new()
            .prefix(".weight-inspect-blob-")
            .suffix(suffix)
            .tempfile_in(&dir)
            .map_err(|e| Error::io(&dir, e))?;
        temps.push(tmp.path().to_path_buf());
        drop(temps);
        let registration = RemoveOnSignal::new(tmp.path());
        let written = tmp.write_all(bytes).and_then(|()| tmp.flush());
        let copy = TempCopy {
            guarded: Guarded {
                tmp: Some(tmp),
                _registration: registration,
            },
        };
        written.map_err(|e| Error::io(copy.path(), e))?;
        crate::mapped::pause_point("blob-copied", copy.path());
        Ok(copy)
    }

    pub(crate) fn path(&self) -> &Path {
        self.guarded
            .tmp
            .as_ref()
            .expect("held until dropped")
            .path()
    }
}

/// Writes `path` atomically and durably: `fill` writes the content through a buffer into a
/// temporary file beside it, which is synced and renamed over `path` only when `fill` succeeds.
pub(crate) fn write_atomically<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>,
{
    write_atomically_with(path, true, |file| {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        fill(&mut out).map_err(|e| Error::io(path, e))?;
        out.flush().map_err(|e| Error::io(path, e))
    })
}

/// Reserves the first `len` bytes of `file` on disk before they are written: the writes then
/// fill space already allocated (no block allocation under the file's lock as each arrives),
/// and a full disk shows at once. A filesystem that cannot reserve is left to allocate as it
/// writes; a full disk is an error naming `path`.
pub(crate) fn reserve(file: &File, path: &Path, len: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(len) = libc::off_t::try_from(len) else {
        return Ok(());
    };
    // SAFETY: fallocate on an open descriptor; mode 0 allocates (and extends) the range.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return Err(Error::io(path, e));
        }
    }
    Ok(())
}

/// Starts writing bytes `from..to` of `file` (`to` None: to its end) back to the disk without
/// waiting, so that an `fsync` at the end waits for the last pages only. A hint: its failure is
/// left to that `fsync` to report.
pub(crate) fn start_writeback(file: &File, from: u64, to: Option<u64>) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // A length of 0 asks for everything from `from` on.
        let len = to.map_or(Some(0), |to| to.checked_sub(from));
        let (Ok(from), Some(Ok(len))) = (
            libc::off64_t::try_from(from),
            len.map(libc::off64_t::try_from),
        ) else {
            return;
        };
        // SAFETY: a plain syscall on an open descriptor; SYNC_FILE_RANGE_WRITE only queues the
        // range's dirty pages for writing.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, to);
}

/// Writes `bytes` to `path` atomically.
pub(crate) fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |out| out.write_all(bytes))
}

/// Appends `text` to `path`, creating it if need be (GitHub's step summary and outputs files:
/// appending is their protocol, so what other steps wrote is kept).
pub(crate) fn append(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| Error::io(path, e))
}

/// `path` with `.` and `..` resolved by its text (the file may not exist, e.g. deleted but
/// staged, and a symbolic link is not followed).
pub(crate) fn normalize(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(unix)]
fn default_permissions(file: &File) -> std::io::Result<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = file.metadata()?.permissions();
    permissions.set_mode(0o644);
    Ok(permissions)
}

#[cfg(not(unix))]
fn default_permissions(file: &File) -> std::io::Result<std::fs::Permissions> {
    Ok(file.metadata()?.permissions())
}

/// Opens `path` for reading only if it is a regular file (a symlink is followed to one): a
/// FIFO is opened without blocking (`O_NONBLOCK`; an open for reading would wait for a writer),
/// then refused with a device or a socket, so nothing named like an input is read forever.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    open_checked(path, false)
}

/// A directory held open, so the files below it are opened by a short walk from it
/// (`openat`) instead of a walk of their whole path from the root each time.
pub(crate) struct OpenDir {
    path: std::path::PathBuf,
    #[cfg(target_os = "linux")]
    dir: Option<File>,
}

impl OpenDir {
    /// `path` held open if it is a directory; otherwise files below it are opened by path.
    pub(crate) fn new(path: std::path::PathBuf) -> Self {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let dir = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY)
                .open(&path)
                .ok();
            OpenDir { path, dir }
        }
        #[cfg(not(target_os = "linux"))]
        OpenDir { path }
    }

    /// [`open_regular`] of `relative`, below this directory; also gives its full path.
    pub(crate) fn open_regular(
        &self,
        relative: &Path,
    ) -> std::io::Result<(std::path::PathBuf, File, std::fs::Metadata)> {
        let path = self.path.join(relative);
        #[cfg(target_os = "linux")]
        if let Some(dir) = &self.dir {
            let (file, meta) = open_regular_at(dir, relative)?;
            return Ok((path, file, meta));
        }
        let (file, meta) = open_regular(&path)?;
        Ok((path, file, meta))
    }
}

/// [`open_regular`] of `relative` below the open directory `dir`.
#[cfg(target_os = "linux")]
fn open_regular_at(dir: &File, relative: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::{AsRawFd, FromRawFd};
    let name = std::ffi::CString::new(relative.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a NUL byte in a path"))?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: openat on a directory descriptor `dir` holds open, with a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    let meta = file.metadata()?;
    regular_only(&meta)?;
    Ok((file, meta))
}

fn regular_only(meta: &std::fs::Metadata) -> std::io::Result<()> {
    if meta.is_dir() {
        return Err(std::io::Error::other("is a directory, expected a file"));
    }
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "is not a regular file (a device, FIFO or socket), expected a file",
        ));
    }
    Ok(())
}

fn open_checked(path: &Path, nofollow: bool) -> std::io::Result<(File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut flags = libc::O_NONBLOCK;
        if nofollow {
            flags |= libc::O_NOFOLLOW;
        }
        options.custom_flags(flags);
    }
    #[cfg(not(unix))]
    let _ = nofollow;
    let file = options.open(path)?;
    let meta = file.metadata()?;
    regular_only(&meta)?;
    // Linux ignores O_NONBLOCK on regular files, so the flag costs nothing there; elsewhere it is
    // cleared (two more system calls per file, which git diff of many files would feel).
    #[cfg(all(unix, not(target_os = "linux")))]
    clear_nonblocking(&file)?;
    Ok((file, meta))
}

/// Reads of a regular file never block anyway; the flag is cleared so the handle behaves as
/// any other wherever it is passed.
#[cfg(all(unix, not(target_os = "linux")))]
fn clear_nonblocking(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a file descriptor this process owns (held open by `file`).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The whole of a regular file of at most `limit` bytes ([`open_regular`]; with `nofollow` a
/// symbolic link is refused rather than followed (`O_NOFOLLOW`), for the entries of a cache,
/// which are only ever written as files). A larger file is an error naming the limit, found before any
/// byte is read, and the read stops at the limit should the file grow meanwhile.
pub(crate) fn read_regular(path: &Path, limit: u64, nofollow: bool) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, meta) = open_checked(path, nofollow)?;
    let too_large = || {
        std::io::Error::other(format!(
            "is larger than the {limit} bytes such a file may have"
        ))
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub(crate) fn read_regular_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_regular(path, limit, false)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// Files below a held directory open as by their path: a regular file with its full path,
    /// a FIFO refused without waiting for a writer, a directory refused, a missing one an error;
    /// a directory that is not there leaves every open to its path, which fails the same way.
    #[test]
    fn files_below_a_held_directory_open_as_by_their_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ab/cd")).unwrap();
        std::fs::write(dir.path().join("ab/cd/object"), b"bytes").unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("ab/fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let held = OpenDir::new(dir.path().to_owned());
        let (path, file, meta) = held.open_regular(Path::new("ab/cd/object")).unwrap();
        assert_eq!(path, dir.path().join("ab/cd/object"));
        assert_eq!(meta.len(), 5);
        assert_eq!(std::io::read_to_string(file).unwrap(), "bytes");
        let fifo = held.open_regular(Path::new("ab/fifo")).unwrap_err();
        assert!(fifo.to_string().contains("not a regular file"), "{fifo}");
        let directory = held.open_regular(Path::new("ab/cd")).unwrap_err();
        assert!(
            directory.to_string().contains("is a directory"),
            "{directory}"
        );
        let missing = held.open_regular(Path::new("ab/none")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        let absent = OpenDir::new(dir.path().join("not-there"));
        let missing = absent.open_regular(Path::new("ab/cd/object")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn new_files_are_readable_and_replaced_files_keep_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_bytes_atomically(&path, b"one").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_bytes_atomically(&path, b"two").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn writes_at_offsets_and_leaves_nothing_when_the_fill_fails() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomically_with::<Error>(&path, false, |file| {
            file.write_all_at(b"world", 5)
                .map_err(|e| Error::io("x", e))?;
            file.write_all_at(b"hello", 0)
                .map_err(|e| Error::io("x", e))
        })
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"helloworld");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let failed = write_atomically_with::<Error>(&path, true, |file| {
            file.write_all_at(b"partial", 0)
                .map_err(|e| Error::io("x", e))?;
            Err(Error::io("x", std::io::Error::other("stop")))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"helloworld");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
    }
}
