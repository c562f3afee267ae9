//! Where a command runs: the repository (if any), the root that policy globs are relative to,
//! the policy file, and the files to judge (index entries or work-tree files). Symbolic links
//! among them are followed to the regular files they lead to inside the repository, or
//! become [`Target::Refused`] (see [`super::subject`]).

use std::path::{Component, Path, PathBuf};

use gix::ObjectId;

use super::config::POLICY_FILE;
use super::error::{FileReason, PolicyError};
use super::subject::{Origin, Subject, follow_committed_link, worktree_file};
use crate::error::Error;
use crate::git::Entry;
use crate::git::RemoteOptions;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// The repository and directories a command works in.
pub(crate) struct Workspace {
    pub repo: Option<gix::Repository>,
    /// Whether absent LFS objects' headers may be read from the LFS server.
    pub remote: RemoteOptions,
    /// Policy globs are relative to this: the work tree's top directory, or outside a
    /// repository the directory of the policy file (the current directory by default).
    pub root: PathBuf,
    cwd: PathBuf,
}

/// A file to judge, before it is bound to the repository as a [`Subject`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A stage-0 index entry.
    Staged { path: String, id: ObjectId },
    /// A file in the work tree, with its stage-0 index entry if it has one.
    Worktree {
        path: String,
        file: PathBuf,
        index_id: Option<ObjectId>,
    },
    /// A path that is not read (a symbolic link that is not followed, a FIFO, ...), and why.
    Refused { path: String, reason: FileReason },
}

impl Target {
    pub(crate) fn path(&self) -> &str {
        match self {
            Target::Staged { path, .. }
            | Target::Worktree { path, .. }
            | Target::Refused { path, .. } => path,
        }
    }

    /// The target bound to the workspace's repository.
    pub(crate) fn subject<'w>(&self, ws: &'w Workspace) -> Subject<'w> {
        let repo = ws.repo.as_ref();
        let remote = &ws.remote;
        match self {
            Target::Staged { path, id } => Subject {
                path: path.clone(),
                origin: Origin::Blob {
                    repo: repo.expect("staged targets come from a repository"),
                    id: *id,
                    tree: None,
                },
                remote,
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
                remote,
            },
            Target::Refused { path, reason } => Subject {
                path: path.clone(),
                origin: Origin::Refused(reason.clone()),
                remote,
            },
        }
    }
}

impl Workspace {
    /// Opens the repository around the current directory, if there is one.
    pub(crate) fn discover(policy: Option<&Path>, remote: &RemoteOptions) -> Result<Workspace> {
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        let cwd = cwd.canonicalize().unwrap_or(cwd);
        let repo = crate::git::open_repo(&cwd).ok();
        let root = match repo.as_ref().and_then(|r| r.workdir()) {
            Some(dir) => dir.canonicalize().map_err(|e| Error::io(dir, e))?,
            None => match policy {
                Some(p) => {
                    let abs = crate::fsutil::normalize(&cwd.join(p));
                    abs.parent().map_or_else(|| cwd.clone(), Path::to_path_buf)
                }
                None => cwd.clone(),
            },
        };
        Ok(Workspace {
            repo,
            remote: remote.clone(),
            root,
            cwd,
        })
    }

    pub(crate) fn repo(&self) -> Result<&gix::Repository> {
        self.repo.as_ref().ok_or_else(|| PolicyError::NoRepository {
            dir: self.cwd.clone(),
        })
    }

    /// The policy file: `--policy FILE` (relative to the current directory) or
    /// `.weight-inspect.toml` at the root.
    pub(crate) fn policy_path(&self, arg: Option<&Path>) -> PathBuf {
        match arg {
            Some(p) => self.cwd.join(p),
            None => self.root.join(POLICY_FILE),
        }
    }

    /// How to name a file in messages: relative to the current directory when that is
    /// within the root (`../.weight-inspect.toml` from a subdirectory), else absolute.
    pub(crate) fn display(&self, path: &Path) -> String {
        let abs = crate::fsutil::normalize(&self.cwd.join(path));
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
    pub(crate) fn relative(&self, arg: &Path) -> Result<String> {
        let abs = crate::fsutil::normalize(&self.cwd.join(arg));
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
    pub(crate) fn targets(&self, staged: bool, paths: &[PathBuf]) -> Result<Vec<Target>> {
        let mut out = Vec::new();
        if staged {
            let entries = self.index_entries()?;
            if paths.is_empty() {
                for (path, entry) in &entries {
                    out.push(self.staged_target(path, *entry)?);
                }
            } else {
                for arg in paths {
                    let rel = self.relative(arg)?;
                    let before = out.len();
                    for (path, entry) in entries.iter().filter(|(p, _)| under(p, &rel)) {
                        out.push(self.staged_target(path, *entry)?);
                    }
                    if out.len() == before {
                        return Err(PolicyError::NotStaged(arg.to_owned()));
                    }
                }
            }
        } else if paths.is_empty() {
            for (path, entry) in self.index_entries()? {
                let file = self.root.join(&path);
                // Deleted in the work tree (or a sparse entry): nothing to judge there.
                let present = std::fs::symlink_metadata(&file)
                    .is_ok_and(|m| m.is_file() || m.file_type().is_symlink());
                if present {
                    out.push(self.worktree_target(path, file, entry.file()));
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
                    .and_then(|i| entries[i].1.file())
            };
            for arg in paths {
                let file = self.cwd.join(arg);
                // A named link is judged as a link (followed only to a file inside the
                // repository), not walked into.
                let meta = std::fs::symlink_metadata(&file).map_err(|e| Error::io(arg, e))?;
                if meta.is_dir() {
                    let mut files = Vec::new();
                    walk(&file, &mut files)?;
                    for f in files {
                        let rel = self.relative(&f)?;
                        let id = index_id(&rel);
                        out.push(self.worktree_target(rel, f, id));
                    }
                } else {
                    let rel = self.relative(arg)?;
                    let id = index_id(&rel);
                    out.push(self.worktree_target(rel, file, id));
                }
            }
        }
        // Stable: of two targets of one path (named twice), the first is kept.
        out.sort_by(|a, b| a.path().cmp(b.path()));
        out.dedup_by(|a, b| a.path() == b.path());
        Ok(out)
    }

    /// What a commit brings: the staged files that differ from HEAD (added, modified, renamed
    /// to, or changed in type; every staged file before the first commit), and with them every
    /// file of a multi-file model one of whose files is among them, so that the model is judged
    /// whole. A removed file brings the signature files (of `signature_files`' names) in its
    /// folder and above, which may still list it; nothing else of it is judged.
    pub(crate) fn staged_change_targets(
        &self,
        signature_files: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<Target>> {
        let repo = self.repo()?;
        let entries = self.index_entries()?;
        let head = crate::git::head_entries(repo)?;
        let changed = |path: &str, entry: &Entry| head.get(path) != Some(entry);
        let multi_file_dirs: std::collections::BTreeSet<&str> = entries
            .iter()
            .filter(|(p, _)| names_a_multi_file_model(file_name(p)))
            .map(|(p, _)| parent(p))
            .collect();
        let model_dirs: std::collections::BTreeSet<&str> = entries
            .iter()
            .filter(|(p, e)| changed(p, e))
            .map(|(p, _)| parent(p))
            .filter(|dir| !dir.is_empty() && multi_file_dirs.contains(dir))
            .collect();
        let mut out = Vec::new();
        for (path, entry) in &entries {
            let whole_model =
                model_dirs.contains(parent(path)) && is_model_file_name(file_name(path));
            if changed(path, entry) || whole_model {
                out.push(self.staged_target(path, *entry)?);
            }
        }
        let staged = |p: &str| {
            entries
                .binary_search_by(|(e, _)| e.as_str().cmp(p))
                .ok()
                .map(|i| &entries[i])
        };
        let mut signatures = std::collections::BTreeSet::new();
        for removed in head.keys().filter(|p| staged(p).is_none()) {
            signatures.extend(super::signature::signature_paths_above(
                removed,
                signature_files,
            ));
        }
        for path in signatures {
            if let Some((path, entry)) = staged(&path)
                && !changed(path, entry)
            {
                out.push(self.staged_target(path, *entry)?);
            }
        }
        out.sort_by(|a, b| a.path().cmp(b.path()));
        Ok(out)
    }

    /// Those of `dirs` (root-relative) that hold the index or the parts of a multi-file model:
    /// in the index (`staged`, read once) or in the work tree.
    pub(crate) fn multi_file_model_dirs(
        &self,
        staged: bool,
        dirs: &std::collections::BTreeSet<&str>,
    ) -> Result<Vec<String>> {
        let dirs = dirs.iter().filter(|d| !d.is_empty());
        if staged {
            let entries = self.index_entries()?;
            let holding: std::collections::BTreeSet<&str> = entries
                .iter()
                .filter(|(p, _)| names_a_multi_file_model(file_name(p)))
                .map(|(p, _)| parent(p))
                .collect();
            return Ok(dirs
                .filter(|d| holding.contains(**d))
                .map(|d| (*d).to_owned())
                .collect());
        }
        Ok(dirs
            .filter(|d| {
                std::fs::read_dir(self.root.join(d)).is_ok_and(|listing| {
                    listing
                        .flatten()
                        .any(|e| e.file_name().to_str().is_some_and(names_a_multi_file_model))
                })
            })
            .map(|d| (*d).to_owned())
            .collect())
    }

    /// A work-tree file as a target: the file, the file a symbolic link leads to inside the
    /// root (its index entry, the link's, does not say how the file is stored), or refused.
    fn worktree_target(&self, path: String, file: PathBuf, index_id: Option<ObjectId>) -> Target {
        match worktree_file(&self.root, &file) {
            Ok(real) if real == file => Target::Worktree {
                path,
                file,
                index_id,
            },
            Ok(real) => Target::Worktree {
                path,
                file: real,
                index_id: None,
            },
            Err(reason) => Target::Refused { path, reason },
        }
    }

    /// An index entry as a target: a file's blob, or for a symbolic link the blob of the file
    /// it leads to in the index (or refused).
    fn staged_target(&self, path: &str, entry: Entry) -> Result<Target> {
        let repo = self.repo()?;
        let id = match entry {
            Entry::Link(link) => {
                let lookup = |p: &str| {
                    crate::git::index_entry(repo, p, gix::index::entry::Stage::Unconflicted)
                };
                match follow_committed_link(repo, path, link, "the index", None, &lookup)? {
                    Origin::Blob { id, .. } => id,
                    Origin::Refused(reason) => {
                        return Ok(Target::Refused {
                            path: path.to_owned(),
                            reason,
                        });
                    }
                    _ => unreachable!("a committed link leads to a blob or is refused"),
                }
            }
            other => other.file().expect("index_entries lists files and links"),
        };
        Ok(Target::Staged {
            path: path.to_owned(),
            id,
        })
    }

    /// Stage-0 regular-file and symbolic-link entries of the index (GIT_INDEX_FILE honored, as
    /// in hooks run by `git commit -a`), sorted by path. Conflicted paths cannot be committed
    /// and are left out, as are intent-to-add entries (`git add -N`), which have no content
    /// yet.
    fn index_entries(&self) -> Result<Vec<(String, Entry)>> {
        let repo = self.repo()?;
        let index = repo
            .index_or_empty()
            .map_err(|e| crate::git::GitError::Index {
                path: repo.index_path(),
                message: e.to_string(),
            })?;
        let mut out = Vec::new();
        for entry in index.entries() {
            use gix::index::entry::{Flags, Stage};
            if entry.stage() != Stage::Unconflicted || entry.flags.contains(Flags::INTENT_TO_ADD) {
                continue;
            }
            let kind = crate::git::index_mode_entry(entry.mode, entry.id);
            if matches!(kind, Entry::File(_) | Entry::Link(_)) {
                out.push((entry.path(&index).to_string(), kind));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The directory of a root-relative path ("" for the root).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, file)| file)
}

/// An index of sharded files or a part of a split GGUF: a name that makes its directory a
/// multi-file model.
pub(super) fn names_a_multi_file_model(file: &str) -> bool {
    crate::sharded::index::is_index_name(file) || crate::sharded::SplitName::parse(file).is_some()
}

/// A file that can be part of a multi-file model: its index, or a model file.
fn is_model_file_name(file: &str) -> bool {
    names_a_multi_file_model(file) || crate::artifact::Format::from_path(file).is_some()
}

/// Whether `path` is `dir` or inside it ("" is the root, containing everything).
fn under(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// Everything below `dir` that is not a directory (regular files, and symbolic links and
/// other files, which are judged as such: see [`Workspace::worktree_target`]), not following
/// symbolic links, skipping `.git`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                walk(&entry.path(), out)?;
            }
        } else {
            out.push(entry.path());
        }
    }
    Ok(())
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
        assert_eq!(
            crate::fsutil::normalize(Path::new("/a/./b/../c")),
            PathBuf::from("/a/c")
        );
    }
}
