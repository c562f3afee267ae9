//! The test build's pause points (docs/TESTING.md): a command started with
//! `WEIGHT_INSPECT_PAUSE_AT=STEP[:FILE NAME]` stops at that step and waits for its standard
//! input to end, so a test truncates a file it reads, or signals it while it writes, exactly
//! there rather than at a moment picked by the clock.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};

/// A command stopped at its pause point.
pub struct Paused {
    pub child: Child,
    stderr: BufReader<ChildStderr>,
    /// What it wrote to stderr up to and including the pause line.
    before: String,
}

/// Starts `cmd` with its pause point at `at` (`STEP` or `STEP:FILE NAME`) and returns once it
/// stopped there. Fails the test, with what the command printed, if it ended without reaching
/// the step.
// The child is waited for by `Paused::resume` or `Paused::signal` (or by the caller through
// `Paused::child`).
#[allow(clippy::zombie_processes)]
pub fn start_paused(mut cmd: Command, at: &str) -> Paused {
    let mut child = cmd
        .env("WEIGHT_INSPECT_PAUSE_AT", at)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weight-inspect starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped"));
    let step = at.split(':').next().unwrap_or(at);
    let mut before = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).expect("stderr is read") == 0 {
            let status = child.wait().expect("waits");
            panic!("never paused at {at} ({status}); it printed:\n{before}");
        }
        before.push_str(&line);
        if line.starts_with(&format!("weight-inspect: paused at {step} (")) {
            return Paused {
                child,
                stderr,
                before,
            };
        }
    }
}

impl Paused {
    /// Lets the command go on from its pause point and waits for it: its status and what it
    /// wrote to stderr after the pause line.
    pub fn resume(mut self) -> (ExitStatus, String) {
        let mut stdin = self.child.stdin.take().expect("piped");
        let _ = stdin.flush();
        drop(stdin);
        let mut after = String::new();
        self.stderr
            .read_to_string(&mut after)
            .expect("stderr is read");
        let status = self.child.wait().expect("waits");
        (status, after)
    }

    /// Sends `signal` to the paused command and waits for it: its status and what it wrote to
    /// stderr after the pause line.
    #[cfg(unix)]
    pub fn signal(mut self, signal: i32) -> (ExitStatus, String) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on the pid of our own child, which has not been waited for.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill {signal}");
        let mut after = String::new();
        self.stderr
            .read_to_string(&mut after)
            .expect("stderr is read");
        let status = self.child.wait().expect("waits");
        (status, after)
    }

    /// What the command wrote to stderr up to and including its pause line.
    pub fn before(&self) -> &str {
        &self.before
    }
}
