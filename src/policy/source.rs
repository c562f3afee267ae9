//! Reading the policy, the one way every command does it: the file of a workspace (`check`,
//! `policy validate`, `policy pin`), a file named on the command line, or a blob of a commit
//! (`ci`). Errors name the policy as it is shown to the user.

use std::path::Path;

use super::config::Policy;
use super::error::PolicyError;
use super::workspace::Workspace;

/// What to do when the policy file does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// An error: "no policy file" for the default file, the read error for a file named with
    /// `--policy`.
    Refuse,
    /// Start from empty text (`policy pin` creates the file).
    Empty,
}

/// The text of a policy and the name it is shown by.
#[derive(Debug, Clone)]
pub(crate) struct PolicySource {
    /// The name in messages and reports.
    pub shown: String,
    pub text: String,
}

impl PolicySource {
    /// The policy named by `--policy` (relative to the current directory) or the default one
    /// at the root, shown relative to the current directory.
    pub(crate) fn in_workspace(
        ws: &Workspace,
        arg: Option<&Path>,
        missing: Missing,
    ) -> Result<PolicySource, PolicyError> {
        let path = ws.policy_path(arg);
        let shown = ws.display(&path);
        if missing == Missing::Refuse && arg.is_none() && !path.exists() {
            return Err(PolicyError::NoPolicyFile { shown });
        }
        let text = match crate::fsutil::read_regular_text(&path, super::config::MAX_POLICY_BYTES) {
            Ok(text) => text,
            Err(e) if missing == Missing::Empty && e.kind() == std::io::ErrorKind::NotFound => {
                String::new()
            }
            Err(source) => {
                return Err(PolicyError::Read {
                    path: shown,
                    source,
                });
            }
        };
        Ok(PolicySource { shown, text })
    }

    /// A policy file named on the command line, shown as given (`path` is where it is).
    pub(crate) fn file(path: &Path, shown: String) -> Result<PolicySource, PolicyError> {
        match crate::fsutil::read_regular_text(path, super::config::MAX_POLICY_BYTES) {
            Ok(text) => Ok(PolicySource { shown, text }),
            Err(source) => Err(PolicyError::Read {
                path: shown,
                source,
            }),
        }
    }

    /// A committed policy: the bytes of the blob `blob` (`REV:path`, named if they are not
    /// text), shown as `shown`.
    pub(crate) fn blob(
        bytes: Vec<u8>,
        blob: &str,
        shown: String,
    ) -> Result<PolicySource, PolicyError> {
        let text = String::from_utf8(bytes).map_err(|_| PolicyError::NotUtf8 {
            shown: blob.to_owned(),
        })?;
        Ok(PolicySource { shown, text })
    }

    /// The policy, validated; errors are located in the file as it is shown.
    pub(crate) fn parse(&self) -> Result<Policy, PolicyError> {
        Policy::parse(Path::new(&self.shown), &self.text)
    }
}
