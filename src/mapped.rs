//! Read-only memory maps of model files that a truncation cannot turn into a crash.
//!
//! A page of a mapping whose file was truncated underneath it no longer exists: touching it
//! raises SIGBUS, which kills the process by default. Every map this crate makes is registered
//! here while it lives, and a SIGBUS handler turns a fault inside a registered map into the
//! error any other unreadable input gets — one line naming the file and the bytes that went
//! missing, exit status 2 — instead of a signal. A fault anywhere else keeps the default
//! action.
//!
//! Before it exits, the handler removes the temporary files registered here
//! ([`RemoveOnFault`]: every output being written, see [`crate::fsutil`]), so a file truncated
//! under a map leaves no half-written output behind either.
//!
//! The handler only reads atomics, formats into a stack buffer and calls `stat`, `unlink`,
//! `write` and `_exit`: all async-signal-safe.

use std::ffi::CString;
use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Maps registered at once at the most; a map beyond them is refused with an error (a value
/// diff of two 500-shard models holds 1000).
const SLOTS: usize = 2048;
/// A slot being filled or emptied: the handler passes it by.
const BUSY: usize = usize::MAX;

struct Slot {
    /// 0: free; BUSY; else the map's length.
    len: AtomicUsize,
    base: AtomicUsize,
    /// The file's path, NUL-terminated (owned by the [`GuardedMap`]).
    path: AtomicPtr<u8>,
    /// The path as printed, escaped (owned by the [`GuardedMap`]).
    shown: AtomicPtr<u8>,
    shown_len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)] // the initializer of each slot
const FREE: Slot = Slot {
    len: AtomicUsize::new(0),
    base: AtomicUsize::new(0),
    path: AtomicPtr::new(std::ptr::null_mut()),
    shown: AtomicPtr::new(std::ptr::null_mut()),
    shown_len: AtomicUsize::new(0),
};
static MAPS: [Slot; SLOTS] = [FREE; SLOTS];
static HANDLER: Once = Once::new();

/// Temporary files registered at once at the most (outputs being written); one beyond them
/// is still removed on an ordinary error or signal, only not on a fault in a map.
const TEMP_SLOTS: usize = 64;
#[allow(clippy::declare_interior_mutable_const)] // the initializer of each slot
const NO_TEMP: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
/// NUL-terminated paths of temporary files, owned by their [`RemoveOnFault`].
static TEMPS: [AtomicPtr<u8>; TEMP_SLOTS] = [NO_TEMP; TEMP_SLOTS];

/// While it lives, the temporary file at its path is removed if a fault in a map ends the
/// process.
pub(crate) struct RemoveOnFault {
    slot: Option<usize>,
    path: CString,
}

impl RemoveOnFault {
    pub(crate) fn new(path: &Path) -> RemoveOnFault {
        use std::os::unix::ffi::OsStrExt;
        let path = CString::new(path.as_os_str().as_bytes()).unwrap_or_default();
        let ptr = path.as_ptr() as *mut u8;
        let slot = (0..TEMP_SLOTS).find(|&i| {
            TEMPS[i]
                .compare_exchange(
                    std::ptr::null_mut(),
                    ptr,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        });
        RemoveOnFault { slot, path }
    }
}

impl Drop for RemoveOnFault {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            // The path's bytes are freed after this, once the slot no longer points at them.
            TEMPS[i].store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

impl std::fmt::Debug for RemoveOnFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoveOnFault")
            .field("slot", &self.slot)
            .field("path", &self.path)
            .finish()
    }
}

/// Removes the registered temporary files (from the SIGBUS handler: `unlink` only).
fn remove_temps() {
    for t in &TEMPS {
        let path = t.load(Ordering::Acquire);
        if !path.is_null() {
            // SAFETY: a NUL-terminated path owned by a live RemoveOnFault; unlink is
            // async-signal-safe, and a file already renamed into place is not found.
            unsafe { libc::unlink(path as *const libc::c_char) };
        }
    }
}

/// The variable naming the step a test build stops at (docs/TESTING.md, "Pause points").
#[cfg(debug_assertions)]
const PAUSE_AT: &str = "WEIGHT_INSPECT_PAUSE_AT";

/// A named step where a test stops the process, to truncate a file it reads or signal it while
/// it writes exactly there instead of racing it by the clock. In debug builds (the ones
/// `cargo test` runs), when `WEIGHT_INSPECT_PAUSE_AT` is `STEP` or `STEP:FILE NAME` of this
/// step and `path`, the first such call writes `weight-inspect: paused at STEP (PATH)` to
/// stderr and waits until its standard input ends; release builds compile it to nothing.
#[cfg(debug_assertions)]
pub(crate) fn pause_point(step: &str, path: &Path) {
    static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(wanted) = std::env::var_os(PAUSE_AT) else {
        return;
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let here = wanted == step || wanted.to_string_lossy() == format!("{step}:{name}");
    if !here || PAUSED.swap(true, Ordering::AcqRel) {
        return;
    }
    eprintln!("weight-inspect: paused at {step} ({})", path.display());
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
}

/// Release builds have no pause points.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub(crate) fn pause_point(_step: &str, _path: &Path) {}

/// A read-only map of a whole file, guarded as the module says.
pub(crate) struct GuardedMap {
    map: memmap2::Mmap,
    path: std::path::PathBuf,
    slot: usize,
    _path: CString,
    _shown: Box<[u8]>,
}

impl GuardedMap {
    /// Maps `file`, opened from `path`; `file` must not be empty (a map of no bytes does not
    /// exist).
    pub(crate) fn map(file: &std::fs::File, path: &Path) -> std::io::Result<GuardedMap> {
        HANDLER.call_once(install_handler);
        // SAFETY: a read-only map; the one hazard, the file shrinking underneath it, is what
        // this module turns into an error.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        use std::os::unix::ffi::OsStrExt;
        let c_path = CString::new(path.as_os_str().as_bytes())
            .unwrap_or_else(|_| CString::from(c"(a path holding NUL)"));
        let shown: Box<[u8]> = crate::escape::shown(&path.display().to_string())
            .into_owned()
            .into_bytes()
            .into();
        let slot = (0..SLOTS)
            .find(|&i| {
                MAPS[i]
                    .len
                    .compare_exchange(0, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or_else(|| {
                std::io::Error::other(format!("more than {SLOTS} files are mapped at once"))
            })?;
        let s = &MAPS[slot];
        s.base.store(map.as_ptr() as usize, Ordering::Relaxed);
        s.path.store(c_path.as_ptr() as *mut u8, Ordering::Relaxed);
        s.shown.store(shown.as_ptr().cast_mut(), Ordering::Relaxed);
        s.shown_len.store(shown.len(), Ordering::Relaxed);
        s.len.store(map.len(), Ordering::Release);
        Ok(GuardedMap {
            map,
            path: path.to_path_buf(),
            slot,
            _path: c_path,
            _shown: shown,
        })
    }

    /// The path the file was opened from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Advises the kernel how the map will be read.
    pub(crate) fn advise(&self, advice: memmap2::Advice) {
        let _ = self.map.advise(advice);
    }

    /// Drops this process's view of the pages wholly inside the `len` bytes at `offset`: they
    /// leave its resident set, the page cache keeps them, the next access reads them again.
    pub(crate) fn release(&self, offset: usize, len: usize) {
        const PAGE: usize = 4096;
        let (start, end) = (offset.div_ceil(PAGE) * PAGE, (offset + len) / PAGE * PAGE);
        if end <= start {
            return;
        }
        // SAFETY: DontNeed on a read-only file mapping only drops this process's pages.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl std::ops::Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        let s = &MAPS[self.slot];
        s.len.store(BUSY, Ordering::Release);
        s.base.store(0, Ordering::Relaxed);
        s.path.store(std::ptr::null_mut(), Ordering::Relaxed);
        s.shown.store(std::ptr::null_mut(), Ordering::Relaxed);
        s.len.store(0, Ordering::Release);
    }
}

fn install_handler() {
    // SAFETY: the action is async-signal-safe (see the module's comment).
    let _ = unsafe { signal_hook_registry::register_sigaction(libc::SIGBUS, on_bus_error) };
}

fn on_bus_error(info: &libc::siginfo_t) {
    // SAFETY: SIGBUS sets si_addr to the faulting address.
    let addr = unsafe { info.si_addr() } as usize;
    for s in &MAPS {
        let len = s.len.load(Ordering::Acquire);
        if len == 0 || len == BUSY {
            continue;
        }
        let base = s.base.load(Ordering::Relaxed);
        if addr >= base && addr - base < len {
            report(s, addr - base, len);
        }
    }
    // Not a fault in a model file: what SIGBUS does by default, once the access is retried.
    // SAFETY: resetting a disposition is async-signal-safe.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

/// Prints the error for a fault at `offset` of a `len`-byte map and exits with status 2.
fn report(s: &Slot, offset: usize, len: usize) -> ! {
    let mut line = Line::default();
    line.push(b"weight-inspect: ");
    let shown = s.shown.load(Ordering::Relaxed);
    if !shown.is_null() {
        // SAFETY: the GuardedMap owning these bytes lives while the slot is registered, and
        // the fault happened inside its map.
        line.push(unsafe {
            std::slice::from_raw_parts(shown, s.shown_len.load(Ordering::Relaxed))
        });
    }
    line.push(b": the file changed while it was read (truncated by another process): ");
    let path = s.path.load(Ordering::Relaxed);
    let mut now = None;
    if !path.is_null() {
        // SAFETY: a NUL-terminated path owned as above; stat is async-signal-safe.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::stat(path as *const libc::c_char, &raw mut st) } == 0 {
            now = Some(st.st_size.max(0) as u64);
        }
    }
    line.push(b"bytes ");
    line.number(now.map_or(offset as u64, |n| n.min(offset as u64)));
    line.push(b"..");
    line.number(len as u64);
    line.push(b" it had when opened are gone (byte ");
    line.number(offset as u64);
    line.push(b" was being read");
    if let Some(now) = now {
        line.push(b"; it now has ");
        line.number(now);
        line.push(b" bytes");
    }
    line.push(b")\n");
    remove_temps();
    // SAFETY: write and _exit are async-signal-safe.
    unsafe {
        libc::write(2, line.buf.as_ptr().cast(), line.len);
        libc::_exit(2)
    }
}

/// A line built without allocating; what does not fit is cut.
struct Line {
    buf: [u8; 2048],
    len: usize,
}

impl Default for Line {
    fn default() -> Line {
        Line {
            buf: [0; 2048],
            len: 0,
        }
    }
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_cuts_without_allocating() {
        let mut line = Line::default();
        line.push(b"at ");
        line.number(0);
        line.push(b" ");
        line.number(u64::MAX);
        assert_eq!(&line.buf[..line.len], b"at 0 18446744073709551615");
        line.push(&[b'x'; 4096]);
        assert_eq!(line.len, 2048);
    }

    #[test]
    fn a_map_is_registered_while_it_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.bin");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let map = GuardedMap::map(&file, &path).unwrap();
        assert_eq!(&map[..], b"0123456789");
        let slot = &MAPS[map.slot];
        assert_eq!(slot.len.load(Ordering::Acquire), 10);
        assert_eq!(slot.base.load(Ordering::Relaxed), map.as_ptr() as usize);
        let index = map.slot;
        drop(map);
        assert_eq!(MAPS[index].len.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_temporary_file_is_registered_while_its_registration_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".out.tmp");
        std::fs::write(&path, b"half").unwrap();
        let registered = RemoveOnFault::new(&path);
        let slot = registered.slot.expect("a free slot");
        assert_eq!(
            TEMPS[slot].load(Ordering::Acquire).cast_const(),
            registered.path.as_ptr().cast::<u8>()
        );
        remove_temps();
        assert!(!path.exists(), "removed as the fault handler removes it");
        drop(registered);
        assert!(TEMPS[slot].load(Ordering::Acquire).is_null());
    }
}
