//! `REV:path` as git spells it, resolved to a blob: `REV:path` reads a commit or tree,
//! `:path` the index, `:N:path` one stage of a conflict. Paths are relative to the repository
//! root unless they start with `./` or `../` (relative to the current directory, as in git).

use std::path::Path;

use gix::ObjectId;

use super::error::{GitError, NotAFile};
use super::objects::{self, Entry};
use crate::escape::shown;

/// A parsed `REV:path`. `rev` is empty for the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RevPath {
    /// The argument as given, for messages.
    pub spec: String,
    pub rev: String,
    pub stage: gix::index::entry::Stage,
    pub path: String,
}

impl RevPath {
    /// The last component of the path (`model.safetensors` of `HEAD:models/model.safetensors`).
    pub(crate) fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Splits `spec` at its first `:`; None when it has none.
    pub(crate) fn parse(spec: &str) -> Option<RevPath> {
        use gix::index::entry::Stage;
        let (rev, path) = spec.split_once(':')?;
        // `:N:path` names an index stage (git's syntax for the sides of a conflict).
        let (stage, path) = match (rev, path.split_once(':')) {
            ("", Some(("1", rest))) => (Stage::Base, rest),
            ("", Some(("2", rest))) => (Stage::Ours, rest),
            ("", Some(("3", rest))) => (Stage::Theirs, rest),
            ("", Some(("0", rest))) => (Stage::Unconflicted, rest),
            _ => (Stage::Unconflicted, path),
        };
        Some(RevPath {
            spec: spec.to_owned(),
            rev: rev.to_owned(),
            stage,
            path: path.to_owned(),
        })
    }

    /// Whether it reads the index rather than a revision.
    pub(crate) fn is_index(&self) -> bool {
        self.rev.is_empty()
    }

    /// The path relative to the repository root, `/`-separated.
    pub(crate) fn repo_path(&self, repo: &gix::Repository, cwd: &Path) -> String {
        if self.path.starts_with("./") || self.path.starts_with("../") {
            pathspecs_from_cwd(repo, cwd, std::slice::from_ref(&self.path)).remove(0)
        } else {
            self.path.trim_start_matches('/').to_owned()
        }
    }

    /// The blob of the file it names, or an error saying what the revision (or index) has
    /// there instead: nothing, a symbolic link (which is not followed: its target may lie
    /// anywhere), a directory or a submodule.
    pub(crate) fn blob(&self, repo: &gix::Repository, cwd: &Path) -> Result<ObjectId, GitError> {
        let path = self.repo_path(repo, cwd);
        let entry = if self.is_index() {
            objects::index_entry(repo, &path, self.stage)?
        } else {
            objects::tree_entry(repo, &self.rev, &path)?
        };
        let place = if self.is_index() {
            "the index"
        } else {
            &self.rev
        };
        // The argument, the path and the revision as typed: NotAFile shows them escaped (its
        // message never starts a line with them); the link's target as every name from the
        // repository is shown.
        match entry {
            Some(Entry::File(id)) => Ok(id),
            None => Err(GitError::NotAFile(Box::new(NotAFile {
                spec: self.spec.clone(),
                path: path.clone(),
                found: "does not exist".to_owned(),
                place: place.to_string(),
                detail: String::new(),
            }))),
            Some(Entry::Link(id)) => {
                let target = objects::link_target(repo, id)?;
                Err(GitError::NotAFile(Box::new(NotAFile {
                    spec: self.spec.clone(),
                    path: path.clone(),
                    found: "is a symbolic link".to_owned(),
                    place: place.to_string(),
                    detail: format!(" (to {}), not a file", shown(&target)),
                })))
            }
            Some(other) => Err(GitError::NotAFile(Box::new(NotAFile {
                spec: self.spec.clone(),
                path: path.clone(),
                found: format!("is {}", other.describe()),
                place: place.to_string(),
                detail: ", not a file".to_owned(),
            }))),
        }
    }
}

/// git's pathspecs are relative to the current directory; ours to the work-tree root.
pub(super) fn pathspecs_from_cwd(
    repo: &gix::Repository,
    cwd: &Path,
    specs: &[String],
) -> Vec<String> {
    let prefix = repo
        .workdir()
        .and_then(|root| {
            let root = root.canonicalize().ok()?;
            let cwd = cwd.canonicalize().ok()?;
            cwd.strip_prefix(&root).ok().map(Path::to_owned)
        })
        .unwrap_or_default();
    specs
        .iter()
        .map(|spec| {
            let mut parts: Vec<String> = prefix
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            for part in spec.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        parts.pop();
                    }
                    other => parts.push(other.to_owned()),
                }
            }
            parts.join("/")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::index::entry::Stage;

    #[test]
    fn parses_revisions_index_and_stages() {
        let r = RevPath::parse("HEAD~1:models/a.gguf").unwrap();
        assert_eq!(
            (r.rev.as_str(), r.path.as_str()),
            ("HEAD~1", "models/a.gguf")
        );
        let r = RevPath::parse(":a.gguf").unwrap();
        assert!(r.is_index());
        assert_eq!(r.stage, Stage::Unconflicted);
        let r = RevPath::parse(":3:a.gguf").unwrap();
        assert_eq!((r.stage, r.path.as_str()), (Stage::Theirs, "a.gguf"));
        assert!(RevPath::parse("plain.gguf").is_none());
    }
}
