//! Parallel map with in-order consumption: items are computed on worker threads, and handed to
//! the consumer strictly in index order, so the output is the same bytes for any thread count.
//! A worker starts item `i` only once item `i - window` has been consumed, which bounds the
//! results held in memory to about `window` items. [`RunOptions`] say how many threads run and
//! whether a progress bar is drawn.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, mpsc};

use crate::progress::{Progress, Unit};

/// How to run: threads (0 = one per core), whether to draw a progress bar, and whether to hash
/// the base even when its hash is remembered ([`super::base_hash`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    pub threads: usize,
    pub progress: bool,
    pub verify_base: bool,
}

impl RunOptions {
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

struct Gate {
    consumed: usize,
    failed: bool,
}

/// Runs `compute(i)` for `i in 0..n` on `threads` threads and `consume(i, result)` on the
/// calling thread in order of `i`. Stops at the first error (of either side) and returns it.
pub(crate) fn ordered_parallel<R: Send, E: Send>(
    n: usize,
    threads: usize,
    compute: impl Fn(usize) -> Result<R, E> + Sync,
    mut consume: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let threads = threads.max(1);
    let window = 2 * threads;
    let next = AtomicUsize::new(0);
    let gate = Mutex::new(Gate {
        consumed: 0,
        failed: false,
    });
    let turn = Condvar::new();
    let fail = || {
        let mut g = gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.failed = true;
        turn.notify_all();
    };
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, Result<R, E>)>();
        for _ in 0..threads.min(n.max(1)) {
            let tx = tx.clone();
            let (next, gate, turn, compute) = (&next, &gate, &turn, &compute);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    {
                        let mut g = gate
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        while !g.failed && i >= g.consumed + window {
                            g = turn
                                .wait(g)
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                        }
                        if g.failed {
                            break;
                        }
                    }
                    let r = compute(i);
                    let stop = r.is_err();
                    if tx.send((i, r)).is_err() || stop {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut consumed = 0usize;
        for (i, r) in &rx {
            match r {
                Ok(v) => {
                    pending.insert(i, v);
                }
                Err(e) => {
                    fail();
                    return Err(e);
                }
            }
            while let Some(v) = pending.remove(&consumed) {
                if let Err(e) = consume(consumed, v) {
                    fail();
                    return Err(e);
                }
                consumed += 1;
                let mut g = gate
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                g.consumed = consumed;
                turn.notify_all();
            }
        }
        Ok(())
    })
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
