//! Large fresh buffers backed by 2 MiB pages where the kernel allows it.
//!
//! A 262,144-token vocabulary parses into several megabytes of new memory (the joined text,
//! string ends, scores, token types). Faulted in 4 KiB at a time, that was over two thousand
//! page faults, a sizeable part of `id`'s time; with transparent huge pages in `madvise` mode
//! (a common default) one fault maps 2 MiB. Only the 2 MiB-aligned part of a buffer can be a
//! huge page, so large buffers reserve 2 MiB more: address space, not memory, as untouched
//! pages are never mapped.

/// Buffers from this size are advised.
const MIN_BYTES: usize = 1 << 20;

const HUGE_PAGE: usize = 2 << 20;

/// `Vec::with_capacity(len)`, advised to use huge pages when it is large.
pub(crate) fn vec_with_capacity<T>(len: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    if len.saturating_mul(size) < MIN_BYTES {
        return Vec::with_capacity(len);
    }
    let buf = Vec::with_capacity(len.saturating_add(HUGE_PAGE / size));
    advise(&buf);
    buf
}

/// `len` zero bytes, advised as [`vec_with_capacity`]: from `calloc`, which takes a large
/// block as fresh pages from the kernel (zero already) instead of writing zeros over it, so the
/// first write to each page is its only touch.
pub(crate) fn zeroed_bytes(len: usize) -> Vec<u8> {
    if len < MIN_BYTES {
        return vec![0; len];
    }
    let mut buf = vec![0; len.saturating_add(HUGE_PAGE)];
    advise(&buf);
    buf.truncate(len);
    buf
}

#[cfg(target_os = "linux")]
fn advise<T>(buf: &Vec<T>) {
    let start = buf.as_ptr() as usize;
    let end = start + buf.capacity() * std::mem::size_of::<T>();
    let first = start.next_multiple_of(HUGE_PAGE);
    let last = end / HUGE_PAGE * HUGE_PAGE;
    if last > first {
        // SAFETY: advice on whole pages inside this Vec's own allocation; MADV_HUGEPAGE
        // changes no contents. A kernel without THP refuses it, which changes nothing either.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise<T>(_buf: &Vec<T>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_at_least_the_length_asked() {
        for len in [0, 1, 1000, MIN_BYTES / 8, MIN_BYTES, 3 << 20] {
            let small: Vec<u64> = vec_with_capacity(len);
            assert!(small.capacity() >= len && small.is_empty());
            let mut bytes: Vec<u8> = vec_with_capacity(len);
            bytes.resize(len, 7);
            assert!(bytes.iter().all(|&b| b == 7));
            let zeros = zeroed_bytes(len);
            assert!(zeros.len() == len && zeros.iter().all(|&b| b == 0));
        }
    }
}
