//! One memory budget for a pickle: every object the machine creates (stack slots, memo
//! entries, strings, containers and the items put in them) and every entry the walk makes of
//! them (names, metadata values, tensors) is charged against it, as it is created. A shared
//! object is charged once where the machine builds it, and once more for every path the walk
//! reaches it by, since each path is a copy in the artifact. Charges are never returned: the
//! sum bounds what is ever held, so a pickle cannot amplify its own size beyond the budget,
//! whatever it repeats.

use super::error::PytorchError;

/// Bytes of budget per byte of pickle. Charges are of what the objects take in memory, and
/// `torch.save`'s pickler memoizes nearly every object it writes, so what a state dict builds
/// stays alive: about 20 bytes per pickle byte for a large state dict, up to 40 for a small
/// checkpoint of many short metadata lists (within [`BASE_BYTES`] anyway). EMPTY_DICT
/// repeated, the most a byte can build, takes about 130.
pub(crate) const BYTES_PER_PICKLE_BYTE: u64 = 32;
/// Bytes of budget every pickle has, however short.
pub(crate) const BASE_BYTES: u64 = 64 << 20;

/// The environment variable that overrides [`DEFAULT_MAX_PICKLE_MEMORY`] (a count of bytes).
pub(crate) const MAX_PICKLE_MEMORY_ENV: &str = "WEIGHT_INSPECT_MAX_PICKLE_MEMORY";

/// Whatever its size, a pickle's budget is at most this (512 MiB): a pull request's 100 MB
/// pickle must not hold gigabytes in CI, and the largest real training checkpoints' pickles
/// (a few MB, optimizer state included) are charged far less.
pub(crate) const DEFAULT_MAX_PICKLE_MEMORY: u64 = 512 << 20;

/// The cap on every pickle's budget: `WEIGHT_INSPECT_MAX_PICKLE_MEMORY` when it is a whole
/// number of bytes above 0, else [`DEFAULT_MAX_PICKLE_MEMORY`].
pub(crate) fn max_pickle_memory() -> u64 {
    std::env::var(MAX_PICKLE_MEMORY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_PICKLE_MEMORY)
}

#[derive(Debug)]
pub(super) struct Budget {
    limit: u64,
    spent: u64,
}

impl Budget {
    /// The budget of a pickle of `pickle_len` bytes.
    pub(super) fn for_pickle(pickle_len: usize) -> Budget {
        Budget::with_base(pickle_len, BASE_BYTES)
    }

    /// [`Budget::for_pickle`] with another base (the fuzz target's, to reach the limit).
    pub(super) fn with_base(pickle_len: usize, base: u64) -> Budget {
        Budget {
            limit: (pickle_len as u64)
                .saturating_mul(BYTES_PER_PICKLE_BYTE)
                .saturating_add(base)
                .min(max_pickle_memory()),
            spent: 0,
        }
    }

    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    /// Charges `bytes`; Err once the total exceeds the budget.
    pub(super) fn charge(&mut self, bytes: u64) -> Result<(), PytorchError> {
        self.spent = self.spent.saturating_add(bytes);
        if self.spent > self.limit {
            return Err(PytorchError::OverBudget {
                limit: self.limit,
                per_byte: BYTES_PER_PICKLE_BYTE,
                base_mib: BASE_BYTES >> 20,
                cap: max_pickle_memory(),
                env: MAX_PICKLE_MEMORY_ENV,
            });
        }
        Ok(())
    }

    pub(super) fn spent(&self) -> u64 {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    /// What real `torch.save` checkpoints are charged per byte of pickle: 25 to 40 for these
    /// small ones (a large state dict, about 20: tests/hostile_budgets.rs parses one of 100k
    /// tensors), far below what amplifying opcodes would take, and within the base budget.
    #[test]
    fn real_checkpoints_are_charged_far_below_the_rate() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pytorch");
        let mut rates = Vec::new();
        for name in [
            "all-dtypes.pt",
            "basic.pt",
            "lightning.ckpt",
            "state-dict-metadata.pt",
            "model-wrapped.pt",
            "tied.pt",
            "scalars.pt",
        ] {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let mut spent = None;
            super::super::parse_zip_charged(&bytes, bytes.len() as u64, &mut spent).unwrap();
            let (pickle_len, spent) = spent.unwrap();
            let rate = spent as f64 / pickle_len as f64;
            rates.push((name, spent, pickle_len, rate));
        }
        assert_eq!(rates.len(), 7);
        for (name, spent, pickle_len, rate) in rates {
            assert!(
                rate < 48.0 && spent < super::BASE_BYTES / 100,
                "{name}: {spent} bytes charged for {pickle_len} bytes of pickle ({rate:.1} per byte)"
            );
        }
    }
}
