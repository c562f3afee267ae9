//! Progress on stderr for work that can take long (hashing history, reconstructing a model,
//! fetching, value diffs): drawn only when stderr is a terminal, and only once the work has run
//! for a second, so quick runs and everything piped or captured (machine output, CI logs, git
//! drivers) never see a bar. Cleared when done or dropped.
//!
//! ```text
//! use crate::progress::{Progress, Unit};
//! let total = 10_u64 << 30;
//! let progress = Progress::new(total, Unit::Bytes, "hashing");
//! for _chunk in 0..10 {
//!     progress.inc(1 << 30);
//! }
//! ```

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before its bar appears.
pub(crate) const DELAY: Duration = Duration::from_secs(1);

/// [`DELAY`], unless `WEIGHT_INSPECT_PROGRESS_DELAY_MS` says otherwise (the tests of the bar
/// itself, on a pseudo-terminal, set it to 0).
fn delay() -> Duration {
    std::env::var("WEIGHT_INSPECT_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(DELAY, Duration::from_millis)
}

/// What the bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Bytes,
    /// Files, commits, tensors: shown as `N/M`.
    Items,
}

/// A progress bar that shows itself after [`DELAY`] on a terminal. Cheap to clone (clones
/// share the bar) and safe to advance from several threads.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    bar: ProgressBar,
    enabled: bool,
    started: Instant,
    delay: Duration,
    shown: std::sync::Arc<AtomicBool>,
}

impl Progress {
    /// A bar for `len` units of `what`, drawn if stderr is a terminal.
    pub(crate) fn new(len: u64, unit: Unit, what: &str) -> Progress {
        Progress::when(std::io::stderr().is_terminal(), len, unit, what)
    }

    /// A bar drawn only if `enabled` (a caller that knows better, e.g. `--quiet`), and then
    /// only on a terminal after [`DELAY`].
    pub(crate) fn when(enabled: bool, len: u64, unit: Unit, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = match unit {
            Unit::Bytes => {
                "{msg:>12} [{bar:40}] {binary_bytes}/{binary_total_bytes} {elapsed}<{eta}"
            }
            Unit::Items => "{msg:>12} [{bar:40}] {pos}/{len} {elapsed}<{eta}",
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_owned());
        Progress {
            bar,
            enabled: enabled && std::io::stderr().is_terminal(),
            started: Instant::now(),
            delay: delay(),
            shown: Default::default(),
        }
    }

    /// Whether the bar is drawn by now.
    pub(crate) fn is_shown(&self) -> bool {
        self.shown.load(Ordering::Relaxed)
    }

    pub(crate) fn inc(&self, n: u64) {
        self.reveal();
        self.bar.inc(n);
    }

    /// Removes the bar from the terminal.
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn reveal(&self) {
        if self.enabled && !self.is_shown() && self.started.elapsed() >= self.delay {
            self.shown.store(true, Ordering::Relaxed);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.tick();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // The last clone clears the bar (an error path included).
        if std::sync::Arc::strong_count(&self.shown) == 1 {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_that_is_not_enabled_never_shows() {
        let p = Progress::when(false, 10, Unit::Items, "x");
        std::thread::sleep(DELAY + Duration::from_millis(10));
        p.inc(1);
        assert!(!p.is_shown());
    }

    #[test]
    fn off_a_terminal_an_enabled_bar_stays_hidden_and_clones_share_it() {
        // The test harness captures stderr: not a terminal (tests/progress.rs runs the
        // binary on a pseudo-terminal).
        let p = Progress::when(true, 10, Unit::Bytes, "x");
        std::thread::sleep(DELAY + Duration::from_millis(10));
        p.inc(1);
        assert!(!p.is_shown());
        let clone = p.clone();
        clone.inc(4);
        drop(clone);
        assert_eq!(p.bar.position(), 5);
    }
}
