//! Where a command runs: the repository (if any), the root that policy globs are relative to,
//! the policy file, and the files to judge (index entries or work-tree files).

use std::path::{Component, Path, PathBuf};

use gix::ObjectId;

use super::config::POLICY_FILE;
use super::error::PolicyError;
use super::subject::{Origin, Subject};
use crate::error::Error;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// The repository and directories a command works in.
pub struct Workspace {
    pub repo: Option<gix::Repository>,
    /// Policy globs are relative to this: the work tree's top directory, or outside a
    /// repository the directory of the policy file (the current directory by default).
    pub root: PathBuf,
    cwd: PathBuf,
}

/// A file to judge, before it is bound to the repository as a [`Subject`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// A stage-0 index entry.
    Staged { path: String, id: ObjectId },
    /// A file in the work tree, with its stage-0 index entry if it has one.
    Worktree {
        path: String,
        file: PathBuf,
        index_id: Option<ObjectId>,
    },
}

impl Target {
    pub fn path(&self) -> &str {
        match self {
            Target::Staged { path, .. } | Target::Worktree { path, .. } => path,
        }
    }

    pub fn subject<'r>(&self, repo: Option<&'r gix::Repository>) -> Subject<'r> {
        match self {
            Target::Staged { path, id } => Subject {
                path: path.clone(),
                origin: Origin::Blob {
                    repo: repo.expect("staged targets come from a repository"),
                    id: *id,
                },
            },
            Target::Worktree {
                path,
                file,
                index_id,
            } => Subject {
                path: path.clone(),
                origin: Origin::Worktree {
                    repo,
                    file: file.clone(),
                    index_id: *index_id,
                },
            },
        }
    }
}

impl Workspace {
    /// Opens the repository around the current directory, if there is one.
    pub fn discover(policy: Option<&Path>) -> Result<Workspace> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let cwd = cwd.canonicalize().unwrap_or(cwd);
        let repo = crate::git::open_repo(&cwd).ok();
        let root = match repo.as_ref().and_then(|r| r.workdir()) {
            Some(dir) => dir.canonicalize().map_err(|e| Error::io(dir, e))?,
            None => match policy {
                Some(p) => {
                    let abs = normalize(&cwd.join(p));
                    abs.parent()
                        .map(Path::to_path_buf)
                        .unwrap_or_else(|| cwd.clone())
                }
                None => cwd.clone(),
            },
        };
        Ok(Workspace { repo, root, cwd })
    }

    pub fn repo(&self) -> Result<&gix::Repository> {
        self.repo.as_ref().ok_or_else(|| PolicyError::NoRepository {
            dir: self.cwd.clone(),
        })
    }

    /// The policy file: `--policy FILE` (relative to the current directory) or
    /// `.weight-inspect.toml` at the root.
    pub fn policy_path(&self, arg: Option<&Path>) -> PathBuf {
        match arg {
            Some(p) => self.cwd.join(p),
            None => self.root.join(POLICY_FILE),
        }
    }

    /// How to name a file in messages: relative to the current directory when that is
    /// within the root (`../.weight-inspect.toml` from a subdirectory), else absolute.
    pub fn display(&self, path: &Path) -> String {
        let abs = normalize(&self.cwd.join(path));
        if !abs.starts_with(&self.root) || !self.cwd.starts_with(&self.root) {
            return abs.display().to_string();
        }
        let common = abs
            .components()
            .zip(self.cwd.components())
            .take_while(|(a, b)| a == b)
            .count();
        let mut rel = PathBuf::new();
        for _ in self.cwd.components().skip(common) {
            rel.push("..");
        }
        rel.extend(abs.components().skip(common));
        if rel.as_os_str().is_empty() {
            ".".into()
        } else {
            rel.display().to_string()
        }
    }

    /// A command-line path as a root-relative, `/`-separated path ("" for the root itself).
    pub fn relative(&self, arg: &Path) -> Result<String> {
        let abs = normalize(&self.cwd.join(arg));
        let rel = abs
            .strip_prefix(&self.root)
            .map_err(|_| PolicyError::OutsideRoot {
                path: arg.to_owned(),
                root: self.root.clone(),
            })?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => parts.push(
                    s.to_str()
                        .ok_or_else(|| PolicyError::NotUtf8Path(arg.to_owned()))?,
                ),
                _ => unreachable!("normalized and relative"),
            }
        }
        Ok(parts.join("/"))
    }

    /// The files to judge. `staged`: index entries; otherwise work-tree files (tracked ones
    /// when no paths are given). `paths` are files or directories on the command line.
    pub fn targets(&self, staged: bool, paths: &[PathBuf]) -> Result<Vec<Target>> {
        let mut out = Vec::new();
        if staged {
            let entries = self.index_entries()?;
            if paths.is_empty() {
                out.extend(
                    entries
                        .into_iter()
                        .map(|(path, id)| Target::Staged { path, id }),
                );
            } else {
                for arg in paths {
                    let rel = self.relative(arg)?;
                    let before = out.len();
                    out.extend(
                        entries
                            .iter()
                            .filter(|(p, _)| under(p, &rel))
                            .map(|(path, id)| Target::Staged {
                                path: path.clone(),
                                id: *id,
                            }),
                    );
                    if out.len() == before {
                        return Err(PolicyError::NotStaged(arg.to_owned()));
                    }
                }
            }
        } else if paths.is_empty() {
            for (path, id) in self.index_entries()? {
                let file = self.root.join(&path);
                // Deleted in the work tree (or a sparse entry): nothing to judge there.
                if std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
                    out.push(Target::Worktree {
                        path,
                        file,
                        index_id: Some(id),
                    });
                }
            }
        } else {
            let entries = match &self.repo {
                Some(_) => self.index_entries()?,
                None => Vec::new(),
            };
            let index_id = |rel: &str| {
                entries
                    .binary_search_by(|(p, _)| p.as_str().cmp(rel))
                    .ok()
                    .map(|i| entries[i].1)
            };
            for arg in paths {
                let file = self.cwd.join(arg);
                let meta = std::fs::metadata(&file).map_err(|e| Error::io(arg, e))?;
                if meta.is_dir() {
                    let mut files = Vec::new();
                    walk(&file, &mut files)?;
                    for f in files {
                        let rel = self.relative(&f)?;
                        out.push(Target::Worktree {
                            index_id: index_id(&rel),
                            path: rel,
                            file: f,
                        });
                    }
                } else {
                    let rel = self.relative(arg)?;
                    out.push(Target::Worktree {
                        index_id: index_id(&rel),
                        path: rel,
                        file,
                    });
                }
            }
        }
        out.sort();
        out.dedup_by(|a, b| a.path() == b.path());
        Ok(out)
    }

    /// Stage-0 regular-file entries of the index (GIT_INDEX_FILE honored, as in hooks run by
    /// `git commit -a`), sorted by path. Conflicted paths cannot be committed and are left out,
    /// as are intent-to-add entries (`git add -N`), which have no content yet.
    fn index_entries(&self) -> Result<Vec<(String, ObjectId)>> {
        let repo = self.repo()?;
        let index = repo
            .index_or_empty()
            .map_err(|e| crate::git::GitError::Index {
                path: repo.index_path(),
                message: e.to_string(),
            })?;
        let mut out = Vec::new();
        for entry in index.entries() {
            use gix::index::entry::{Flags, Mode, Stage};
            if entry.stage() != Stage::Unconflicted
                || entry.flags.contains(Flags::INTENT_TO_ADD)
                || !(entry.mode == Mode::FILE || entry.mode == Mode::FILE_EXECUTABLE)
            {
                continue;
            }
            out.push((entry.path(&index).to_string(), entry.id));
        }
        out.sort();
        Ok(out)
    }
}

/// Whether `path` is `dir` or inside it ("" is the root, containing everything).
fn under(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// Regular files below `dir`, not following symlinks, skipping `.git`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                walk(&entry.path(), out)?;
            }
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

/// Resolves `.` and `..` lexically (the files may not exist, e.g. deleted but staged).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_dirs() {
        assert!(under("models/a.gguf", "models"));
        assert!(under("models/a.gguf", ""));
        assert!(under("models/a.gguf", "models/a.gguf"));
        assert!(!under("modelsx/a.gguf", "models"));
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
