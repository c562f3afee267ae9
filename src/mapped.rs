//! Read-only memory maps of model files that a truncation cannot turn into a crash.
//!
//! A page of a mapping whose file was truncated underneath it no longer exists: touching it
//! raises SIGBUS, which kills the process by default. Every map this crate makes is registered
//! here while it lives, and a SIGBUS handler turns a fault inside a registered map into the
//! error any other unreadable input gets — one line naming the file and the bytes that went
//! missing, exit status 2 — instead of a signal. A fault anywhere else keeps the default
//! action.
//!
//! The handler only reads atomics, formats into a stack buffer and calls `stat`, `write` and
//! `_exit`: all async-signal-safe.

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

/// A read-only map of a whole file, guarded as the module says.
pub(crate) struct GuardedMap {
    map: memmap2::Mmap,
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
            slot,
            _path: c_path,
            _shown: shown,
        })
    }

    /// Advises the kernel how the map will be read.
    pub(crate) fn advise(&self, advice: memmap2::Advice) {
        let _ = self.map.advise(advice);
    }

    /// Drops this process's view of `len` bytes at `offset` (page-aligned): the page cache
    /// keeps them, the next access reads them again.
    pub(crate) fn release(&self, offset: usize, len: usize) {
        // SAFETY: DontNeed on a read-only file mapping only drops this process's pages.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
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
}
