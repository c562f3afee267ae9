//! The pickle machine's memory budget: on arbitrary bytes, the heap the machine and the walk
//! hold at their peak (counted by this target's allocator) stays within a small multiple of the
//! budget the pickle is given (32 bytes per byte + a base of 4 KiB here, so that short inputs
//! reach it). An opcode whose objects are charged less than they take is a finding.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use libfuzzer_sys::fuzz_target;
use weight_inspect::readers::pytorch;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let live = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(live, Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            // Counted as both blocks alive for a moment, as a copying realloc has them.
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fuzz_target!(|data: &[u8]| {
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let (_spent, limit, _accepted) = pytorch::fuzzing::run_pickle(data, 4096);
    let peak = PEAK.load(Relaxed).saturating_sub(before) as u64;
    assert!(
        peak <= 4 * limit + (256 << 10),
        "peak heap {peak} bytes for a budget of {limit} ({} bytes of pickle)",
        data.len()
    );
});
