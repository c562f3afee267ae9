//! `hook install` / `hook uninstall`: the native git pre-commit hook.
//!
//! The hook is the script shipped as `hooks/pre-commit`, embedded at build time so that both
//! are always the same. A hook that is not ours is never overwritten silently: `--chain` moves
//! it to `pre-commit.chained`, which our script runs first; `--force` replaces it (keeping a
//! copy as `pre-commit.backup`).

use std::path::{Path, PathBuf};

use super::error::PolicyError;
use crate::error::Error;
use crate::escape::shown_path;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// The hook script (identical to `hooks/pre-commit` in the repository).
pub(super) const HOOK_SCRIPT: &str = include_str!("../../hooks/pre-commit");

/// The line that identifies our hook.
const MARKER: &str = "# weight-inspect pre-commit hook";

const CHAINED: &str = "pre-commit.chained";
const BACKUP: &str = "pre-commit.backup";

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Installed {
    /// No hook was there.
    New,
    /// Our hook was there; it now has the current script.
    Updated,
    /// A foreign hook was moved to `pre-commit.chained` and runs first.
    Chained(PathBuf),
    /// A foreign hook was replaced; its copy is at this path.
    Replaced(PathBuf),
}

fn is_ours(path: &Path) -> Result<bool> {
    let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .take(5)
        .any(|l| l.trim_end() == MARKER))
}

fn write_hook(path: &Path) -> Result<()> {
    crate::fsutil::write_bytes_atomically(path, HOOK_SCRIPT.as_bytes())?;
    make_executable(path)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(path, e))?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
}

/// Installs the hook into `hooks`. A foreign hook is an error unless `chain` or `force`.
pub(crate) fn install(hooks: &Path, chain: bool, force: bool) -> Result<Installed> {
    std::fs::create_dir_all(hooks).map_err(|e| Error::io(hooks, e))?;
    let hook = hooks.join("pre-commit");
    let existing = std::fs::symlink_metadata(&hook).is_ok();
    if !existing {
        write_hook(&hook)?;
        return Ok(Installed::New);
    }
    if is_ours(&hook)? {
        write_hook(&hook)?;
        return Ok(Installed::Updated);
    }
    if chain {
        let chained = hooks.join(CHAINED);
        if std::fs::symlink_metadata(&chained).is_ok() {
            return Err(PolicyError::ChainedHookExists { hook, chained });
        }
        std::fs::rename(&hook, &chained).map_err(|e| Error::io(&hook, e))?;
        write_hook(&hook)?;
        return Ok(Installed::Chained(chained));
    }
    if force {
        let backup = hooks.join(BACKUP);
        std::fs::rename(&hook, &backup).map_err(|e| Error::io(&hook, e))?;
        write_hook(&hook)?;
        return Ok(Installed::Replaced(backup));
    }
    Err(PolicyError::ForeignHook(hook))
}

/// Removes our hook, restoring a chained one. A foreign hook is left alone (error).
pub(crate) fn uninstall(hooks: &Path) -> Result<String> {
    let hook = hooks.join("pre-commit");
    if std::fs::symlink_metadata(&hook).is_err() {
        return Ok(format!("no pre-commit hook at {}", shown_path(&hook)));
    }
    if !is_ours(&hook)? {
        return Err(PolicyError::ForeignHookKept(hook));
    }
    std::fs::remove_file(&hook).map_err(|e| Error::io(&hook, e))?;
    let chained = hooks.join(CHAINED);
    if std::fs::symlink_metadata(&chained).is_ok() {
        std::fs::rename(&chained, &hook).map_err(|e| Error::io(&chained, e))?;
        return Ok(format!(
            "removed the weight-inspect hook; restored the previous hook at {}",
            shown_path(&hook)
        ));
    }
    Ok(format!("removed {}", shown_path(&hook)))
}

/// What `check --allow-missing-policy` (the hooks' check) says when the repository has no
/// policy file, once per run: nothing was checked, and how to add a policy. `shown`: the
/// policy file as messages name it.
pub(crate) fn missing_policy_note(shown: &str) -> String {
    format!(
        "weight-inspect: no policy file ({}), so nothing was checked and the commit may go on; \
         to add a policy, `weight-inspect policy pin MODEL...` pins the current structures, or \
         write rules as docs/policy.md shows",
        crate::escape::shown(shown)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_chain_force_uninstall() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path();
        assert_eq!(install(hooks, false, false).unwrap(), Installed::New);
        assert_eq!(
            std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
            HOOK_SCRIPT
        );
        assert_eq!(install(hooks, false, false).unwrap(), Installed::Updated);
        uninstall(hooks).unwrap();
        assert!(!hooks.join("pre-commit").exists());

        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\necho mine\n").unwrap();
        let err = install(hooks, false, false).unwrap_err().to_string();
        assert!(err.contains("--chain"), "{err}");
        assert!(matches!(
            install(hooks, true, false).unwrap(),
            Installed::Chained(_)
        ));
        assert_eq!(
            std::fs::read_to_string(hooks.join(CHAINED)).unwrap(),
            "#!/bin/sh\necho mine\n"
        );
        uninstall(hooks).unwrap();
        assert_eq!(
            std::fs::read_to_string(hooks.join("pre-commit")).unwrap(),
            "#!/bin/sh\necho mine\n"
        );
        assert!(matches!(
            install(hooks, false, true).unwrap(),
            Installed::Replaced(_)
        ));
        assert!(hooks.join(BACKUP).exists());
        assert!(uninstall(hooks).is_ok());
    }
}
