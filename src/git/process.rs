//! The git processes this tool starts (everything else goes through gix): `git config` for the
//! installer and the LFS server's settings, `git credential`, `git ls-remote --get-url`,
//! `git rev-parse --git-path hooks`, `git check-attr filter`, `git cat-file` for a bounded
//! prefix of a large blob (gix would inflate the whole object into memory), and the ssh
//! command git would use, for `git-lfs-authenticate`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use gix::ObjectId;

use super::error::GitError;

/// Runs `git ARGS` in `dir` and returns its output (whatever its exit status).
pub(crate) fn output(dir: &Path, args: &[&str]) -> Result<Output, GitError> {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| GitError::Command {
            args: args.join(" "),
            message: format!("cannot run git: {e}"),
        })
}

/// Runs `git ARGS` in `dir` with `input` on its standard input and `env` added to its
/// environment; never lets it prompt on a terminal (drivers have none, and a command must not
/// hang on a question).
pub(super) fn output_with_input(
    dir: &Path,
    args: &[&str],
    input: &[u8],
    env: &[(&str, &str)],
) -> Result<Output, GitError> {
    use std::io::Write;
    let fail = |e: std::io::Error| GitError::Command {
        args: args.join(" "),
        message: format!("cannot run git: {e}"),
    };
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GCM_INTERACTIVE", "never")
        .env("GIT_ASKPASS", "")
        .env("SSH_ASKPASS", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(fail)?;
    if let Some(mut stdin) = child.stdin.take() {
        // A helper that exits without reading its input is not an error here.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().map_err(fail)
}

/// The error of a git command that exited unsuccessfully, with its stderr.
pub(super) fn failed(args: &[&str], out: &Output) -> GitError {
    GitError::Command {
        args: args.join(" "),
        message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    }
}

/// git's hooks directory for the repository around `dir` (honors `core.hooksPath` and
/// linked worktrees).
pub(crate) fn hooks_dir(dir: &Path) -> Result<PathBuf, GitError> {
    let out = output(dir, &["rev-parse", "--git-path", "hooks"])?;
    if !out.status.success() {
        return Err(GitError::Open {
            dir: dir.to_owned(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let rel = String::from_utf8_lossy(&out.stdout)
        .trim_end_matches('\n')
        .to_string();
    Ok(dir.join(rel))
}

/// Whether `.gitattributes` sends `path` through the LFS filter (for files not yet staged).
pub(crate) fn lfs_by_attributes(repo: &gix::Repository, path: &str) -> Result<bool, GitError> {
    let workdir = repo
        .workdir()
        .ok_or_else(|| GitError::Bare(repo.git_dir().to_owned()))?;
    let args = ["check-attr", "filter", "--", path];
    let out = output(workdir, &args)?;
    if !out.status.success() {
        return Err(failed(&args, &out));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .trim_end()
        .ends_with(": filter: lfs"))
}

/// The first `limit` bytes of blob `id`, streamed from `git cat-file`, which is stopped once
/// they are read instead of draining gigabytes.
pub(crate) fn blob_prefix(
    repo: &gix::Repository,
    id: ObjectId,
    limit: u64,
) -> Result<Vec<u8>, GitError> {
    let hex = id.to_string();
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(repo.git_dir())
        .args(["cat-file", "blob", &hex])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| GitError::Command {
            args: format!("cat-file blob {hex}"),
            message: format!("cannot run git: {e}"),
        })?;
    let mut prefix = Vec::new();
    let read = match child.stdout.take() {
        Some(stdout) => stdout.take(limit).read_to_end(&mut prefix),
        None => Ok(0),
    };
    let _ = child.kill();
    let _ = child.wait();
    read.map_err(|e| GitError::Object {
        what: hex,
        message: format!("reading from git cat-file: {e}"),
    })?;
    Ok(prefix)
}

/// The bytes of blob `id` from offset `start` to its end (at most `limit` of them: more is an
/// error), streamed from `git cat-file`: the bytes before `start` are read and dropped, never
/// held, so the tail of a model committed without LFS (a zip checkpoint's directory) is read
/// in bounded memory.
pub(crate) fn blob_tail(
    repo: &gix::Repository,
    id: ObjectId,
    start: u64,
    limit: u64,
) -> std::io::Result<Vec<u8>> {
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(repo.git_dir())
        .args(["cat-file", "blob", &id.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut tail = Vec::new();
    let read = match child.stdout.take() {
        Some(mut stdout) => std::io::copy(&mut (&mut stdout).take(start), &mut std::io::sink())
            .and_then(|skipped| {
                if skipped < start {
                    return Err(std::io::Error::other(format!(
                        "blob {id} ends at {skipped} bytes, before offset {start}"
                    )));
                }
                stdout.take(limit.saturating_add(1)).read_to_end(&mut tail)
            }),
        None => Ok(0),
    };
    let _ = child.kill();
    let _ = child.wait();
    read?;
    if tail.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "the end of blob {id} from offset {start} is over {limit} bytes"
        )));
    }
    Ok(tail)
}

/// How git reaches SSH remotes: `GIT_SSH_COMMAND` or `core.sshCommand` (a shell command line),
/// else `GIT_SSH` (a program), else `ssh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SshCommand {
    Shell(String),
    Program(String),
}

/// Runs the ssh command with `args` (which follow the command line, as git passes them),
/// never letting it ask a question on a terminal.
pub(super) fn ssh_output(
    dir: &Path,
    ssh: &SshCommand,
    args: &[String],
) -> Result<Output, GitError> {
    let mut command = match ssh {
        SshCommand::Shell(line) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("{line} \"$@\"")).arg(line);
            c
        }
        SshCommand::Program(program) => Command::new(program),
    };
    let plain_ssh = match ssh {
        SshCommand::Shell(line) => line.split_whitespace().next(),
        SshCommand::Program(program) => Some(program.as_str()),
    }
    .and_then(|first| Path::new(first).file_name())
    .is_some_and(|name| name == "ssh");
    if plain_ssh {
        command.args(["-o", "BatchMode=yes"]);
    }
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("SSH_ASKPASS", "")
        .output()
        .map_err(|e| GitError::Command {
            args: "ssh git-lfs-authenticate".to_owned(),
            message: format!("cannot run the ssh command: {e}"),
        })
}
