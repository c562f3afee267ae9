//! Parallel map with in-order consumption: items are computed on a rayon pool, and handed to
//! the consumer strictly in index order, so the output is the same bytes for any thread count.
//! Item `i` is spawned only once item `i - window` has been consumed, which bounds the results
//! held in memory to `window` items. [`RunOptions`] say how many threads run and
//! whether a progress bar is drawn.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use crate::progress::{Progress, Unit};

/// How to run: threads (0 = one per core), whether to draw a progress bar, and whether to hash
/// the base even when its hash is remembered ([`super::base_hash`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Worker threads; 0 is one per core.
    pub threads: usize,
    /// Draw a progress bar.
    pub progress: bool,
    /// Hash the base even when its hash is remembered.
    pub verify_base: bool,
}

impl RunOptions {
    /// The worker threads to use: as given, or one per core.
    pub fn threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        }
    }

    /// A bar of bytes for `what`, drawn when progress is asked for (see [`crate::progress`]:
    /// on a terminal, after a second).
    pub(crate) fn bar(&self, len: u64, what: &str) -> Progress {
        Progress::when(self.progress, len, Unit::Bytes, what)
    }
}

/// Runs `compute(i)` for `i in 0..n` on a rayon pool of `threads` threads and `consume(i, result)`
/// on the calling thread in order of `i`. Stops at the first error (of either side) and returns
/// it; items not yet started then are skipped.
pub(crate) fn ordered_parallel<R: Send, E: Send>(
    n: usize,
    threads: usize,
    compute: impl Fn(usize) -> Result<R, E> + Sync,
    consume: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let window = 2 * threads.max(1);
    let window = Window {
        items: window,
        weight: window as u64,
    };
    ordered_parallel_weighted(n, threads, window, |_| 1, compute, consume)
}

/// How far the items started may run ahead of the consumer: at most `items` of them, weighing
/// at most `weight` together (the first one not consumed is always started, whatever it
/// weighs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) items: usize,
    pub(crate) weight: u64,
}

impl Window {
    /// A window of `threads + 1` items of `item_bytes` (a full chunk), in bytes: smaller items
    /// fill it with more of them, up to `16 × threads`, so that a thread is not left without
    /// work behind one large item. (Twice the threads in bytes held more fresh buffers: 60 %
    /// more page faults on the f32 pair, for no more use of the cores.)
    pub(crate) fn of_bytes(threads: usize, item_bytes: u64) -> Window {
        let threads = threads.max(1);
        Window {
            items: 16 * threads,
            weight: (threads as u64 + 1) * item_bytes,
        }
    }
}

/// [`ordered_parallel`] with a window of items weighed by `weight_of` (bytes, say): items of
/// very different sizes keep every thread busy, where a window of a few items would leave a
/// thread idle behind one large item while the small ones after it are done.
pub(crate) fn ordered_parallel_weighted<R: Send, E: Send>(
    n: usize,
    threads: usize,
    window: Window,
    weight_of: impl Fn(usize) -> u64,
    compute: impl Fn(usize) -> Result<R, E> + Sync,
    consume: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let threads = threads.max(1);
    // Set at the first error: items spawned but not started then are skipped.
    let failed = AtomicBool::new(false);
    // A pool of its own: `--threads` sets its size, and the calling thread, which waits for
    // results in order, is never one of the threads that compute them.
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads.min(n.max(1)))
        .build()
    {
        Ok(pool) => pool.in_place_scope(|scope| {
            in_order(scope, n, window, &weight_of, &compute, &failed, consume)
        }),
        // No threads to be had: the global pool computes.
        Err(_) => rayon::in_place_scope(|scope| {
            in_order(scope, n, window, &weight_of, &compute, &failed, consume)
        }),
    }
}

/// Spawns items on `scope` while the window holds them (computed or computing but not yet
/// consumed), and consumes their results in order as they arrive.
fn in_order<'scope, R: Send + 'scope, E: Send + 'scope>(
    scope: &rayon::Scope<'scope>,
    n: usize,
    window: Window,
    weight_of: &impl Fn(usize) -> u64,
    compute: &'scope (impl Fn(usize) -> Result<R, E> + Sync),
    failed: &'scope AtomicBool,
    mut consume: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let (tx, rx) = mpsc::channel::<(usize, std::thread::Result<Result<R, E>>)>();
    let stop = |e: E| {
        failed.store(true, Ordering::Relaxed);
        Err(e)
    };
    let mut pending = BTreeMap::new();
    let (mut spawned, mut consumed) = (0usize, 0usize);
    // The weight of the items spawned and not yet consumed.
    let mut held = 0u64;
    while consumed < n {
        while spawned < n
            && (spawned == consumed
                || (spawned < consumed + window.items
                    && held + weight_of(spawned) <= window.weight))
        {
            let (tx, i) = (tx.clone(), spawned);
            held += weight_of(i);
            scope.spawn(move |_| {
                if !failed.load(Ordering::Relaxed) {
                    // A panic is carried to the calling thread, which would otherwise wait for
                    // this item forever.
                    let result = std::panic::catch_unwind(AssertUnwindSafe(|| compute(i)));
                    // The receiver is gone only after an error; the result is not wanted then.
                    let _ = tx.send((i, result));
                }
            });
            spawned += 1;
        }
        let (i, result) = rx.recv().expect("a spawned item sends its result");
        match result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)) {
            Ok(v) => {
                pending.insert(i, v);
            }
            Err(e) => return stop(e),
        }
        while let Some(v) = pending.remove(&consumed) {
            if let Err(e) = consume(consumed, v) {
                return stop(e);
            }
            held -= weight_of(consumed);
            consumed += 1;
        }
    }
    Ok(())
}

/// `buf` made `len` bytes long (its contents left over, for the caller to overwrite); memory
/// it must grow into is fresh, in 2 MiB pages: one fault each instead of 512.
pub(crate) fn sized(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.capacity() < len {
        // Made as large as a whole chunk at once (address space: pages never touched are
        // never mapped), so that chunks growing from one tensor to the next do not each take
        // fresh memory, which the kernel zeroes.
        *buf = crate::hugepages::zeroed_bytes(len.max(GROW_TO));
    }
    buf.resize(len, 0);
    buf
}

/// The smallest buffer [`sized`] grows to: the lossless strategy's chunk.
const GROW_TO: usize = 4 << 20;

/// What `slot` holds, made by `make` the first time (a worker's codec, kept between items).
pub(crate) fn kept<T>(
    slot: &mut Option<T>,
    make: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<&mut T> {
    match slot {
        Some(t) => Ok(t),
        None => Ok(slot.insert(make()?)),
    }
}

/// Items under this many bytes (a model's biases and norms) take buffers of their own from the
/// allocator: had they taken pooled ones, the many of them a window holds would leave the
/// large items to fault in fresh buffers.
const SMALL: usize = 64 << 10;

/// Byte buffers that go from the workers of [`ordered_parallel`] to its consumer and back, so
/// that a run allocates (and the kernel faults in) a window's worth of buffers once rather than
/// fresh ones for every item: a fresh 4 MiB buffer is a thousand page faults.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl BufferPool {
    /// A buffer of `len` bytes whose contents are left over from its last use (the caller
    /// overwrites them).
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        if len < SMALL {
            return vec![0; len];
        }
        // Not cleared first: `sized` zeroes only what the buffer grows by, not a whole chunk
        // the caller is about to overwrite.
        let mut b = self.pop();
        sized(&mut b, len);
        b
    }

    /// An empty buffer for about `len` bytes, with the capacity of its last use.
    pub(crate) fn take_empty(&self, len: usize) -> Vec<u8> {
        if len < SMALL {
            return Vec::new();
        }
        let mut b = self.pop();
        b.clear();
        b
    }

    fn pop(&self) -> Vec<u8> {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop()
            .unwrap_or_default()
    }

    /// Gives a buffer back for a later [`BufferPool::take`] (a small one is let go).
    pub(crate) fn give(&self, b: Vec<u8>) {
        if b.capacity() < SMALL {
            return;
        }
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumes_in_order_for_any_thread_count() {
        for threads in 1..5 {
            let mut seen = Vec::new();
            ordered_parallel(
                50,
                threads,
                |i| {
                    std::thread::sleep(std::time::Duration::from_micros(((i * 37) % 11) as u64));
                    Ok::<_, String>(i * 2)
                },
                |i, v| {
                    assert_eq!(v, i * 2);
                    seen.push(i);
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(seen, (0..50).collect::<Vec<_>>());
        }
    }

    #[test]
    fn holds_at_most_a_window_of_results() {
        use std::sync::atomic::AtomicUsize;
        let threads = 3;
        let started = AtomicUsize::new(0);
        let consumed = AtomicUsize::new(0);
        let most_ahead = AtomicUsize::new(0);
        ordered_parallel(
            200,
            threads,
            |i| {
                let ahead =
                    started.fetch_add(1, Ordering::SeqCst) + 1 - consumed.load(Ordering::SeqCst);
                most_ahead.fetch_max(ahead, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(((i * 37) % 11) as u64));
                Ok::<_, ()>(i)
            },
            |_, _| {
                consumed.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
        .unwrap();
        let most = most_ahead.load(Ordering::SeqCst);
        assert!(most <= 2 * threads, "{most} items ahead of the consumer");
    }

    #[test]
    fn a_weighted_window_holds_its_weight_and_lets_small_items_through() {
        use std::sync::atomic::{AtomicU64, AtomicUsize};
        // One large item in every ten; the others weigh 1.
        let weight = |i: usize| if i.is_multiple_of(10) { 100 } else { 1 };
        let window = Window {
            items: 12,
            weight: 150,
        };
        let (held, most_held, started, most_ahead) = (
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let consumed = AtomicUsize::new(0);
        let mut seen = Vec::new();
        ordered_parallel_weighted(
            100,
            2,
            window,
            weight,
            |i| {
                let now = held.fetch_add(weight(i), Ordering::SeqCst) + weight(i);
                most_held.fetch_max(now, Ordering::SeqCst);
                let ahead =
                    started.fetch_add(1, Ordering::SeqCst) + 1 - consumed.load(Ordering::SeqCst);
                most_ahead.fetch_max(ahead, Ordering::SeqCst);
                Ok::<_, ()>(i)
            },
            |i, v| {
                assert_eq!(i, v);
                held.fetch_sub(weight(i), Ordering::SeqCst);
                consumed.fetch_add(1, Ordering::SeqCst);
                seen.push(i);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert!(most_held.load(Ordering::SeqCst) <= 150);
        assert!(most_ahead.load(Ordering::SeqCst) <= 12);
        // An item heavier than the whole window still runs, alone.
        let mut n = 0;
        ordered_parallel_weighted(
            3,
            2,
            window,
            |_| 1000,
            Ok::<_, ()>,
            |_, _| {
                n += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    #[should_panic(expected = "item 5")]
    fn a_panic_reaches_the_caller() {
        let _ = ordered_parallel(
            20,
            2,
            |i| {
                assert!(i != 5, "item 5");
                Ok::<_, ()>(i)
            },
            |_, _| Ok(()),
        );
    }

    #[test]
    fn the_pool_hands_back_what_it_was_given() {
        let pool = BufferPool::default();
        let mut b = pool.take(SMALL + 1000);
        assert_eq!(b.len(), SMALL + 1000);
        b[0] = 7;
        let at = b.as_ptr();
        pool.give(b);
        let again = pool.take(SMALL);
        assert_eq!(
            (again.len(), again.as_ptr()),
            (SMALL, at),
            "the same allocation, resized"
        );
        pool.give(again);
        let small = pool.take(10);
        assert_eq!(small.len(), 10);
        assert_ne!(
            small.as_ptr(),
            at,
            "a small item does not take a pooled buffer"
        );
        pool.give(small);
        let taken = pool.take_empty(SMALL);
        assert_eq!(taken.as_ptr(), at, "a small one is let go");
        pool.give(pool.take(SMALL));
        assert!(
            pool.take(5 << 20).len() == 5 << 20,
            "a larger one when it is too small"
        );
        assert!(pool.take_empty(SMALL).is_empty());
    }

    #[test]
    fn stops_on_errors() {
        let r = ordered_parallel(
            100,
            3,
            |i| {
                if i == 7 { Err("seven") } else { Ok(i) }
            },
            |_, _| Ok(()),
        );
        assert!(r.is_err());
        let r = ordered_parallel(100, 3, Ok, |i, _| if i == 9 { Err("nine") } else { Ok(()) });
        assert!(r.is_err());
        ordered_parallel(0, 2, Ok::<_, ()>, |_, _: usize| Ok(())).unwrap();
    }
}
