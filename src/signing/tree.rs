//! Which files a signature covers, as model_signing decides: every regular file under the
//! model directory (or the one file that is the model, named `.`), dot files included, minus
//! the ignored paths (each ignores itself and everything below it); a symbolic link is refused
//! unless allowed, and then stands for the file it points to (a link to a directory is not
//! followed). Inside a git repository an LFS pointer stands for its object. The files are
//! listed from the work tree, or from a commit's tree (`--rev`) through the git adapter.

use std::path::{Path, PathBuf};

use super::error::{Result, SigningError, io};
use crate::git::{Entry, Pointer, blob_pointer, present_object, tree_entry, tree_files};

/// The default ignored paths, relative to the model (model_signing's `ignore_git_paths`).
pub(crate) const GIT_PATHS: [&str; 4] = [".git", ".gitattributes", ".github", ".gitignore"];

/// Where a file's bytes are.
#[derive(Debug, Clone)]
pub(crate) enum Bytes {
    /// A file on disk (a work-tree file, a link's target, or a local LFS object).
    File { path: PathBuf, len: u64 },
    /// A blob of the commit.
    Blob { id: gix::ObjectId, len: u64 },
    /// Not here: only an LFS pointer is.
    Absent,
}

/// A file of the model: its name in the manifest, its bytes, and the LFS pointer that stands
/// for them when there is one.
#[derive(Debug, Clone)]
pub(crate) struct ModelFile {
    pub name: String,
    pub bytes: Bytes,
    pub pointer: Option<Pointer>,
}

impl ModelFile {
    /// The file's length, from its bytes or its pointer.
    pub(crate) fn len(&self) -> u64 {
        match (&self.bytes, &self.pointer) {
            (Bytes::File { len, .. } | Bytes::Blob { len, .. }, _) => *len,
            (Bytes::Absent, Some(p)) => p.size,
            (Bytes::Absent, None) => 0,
        }
    }
}

/// A path the listing would not take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub name: String,
    pub reason: &'static str,
}

/// The model's files, and what was refused.
#[derive(Debug, Clone, Default)]
pub(crate) struct Listing {
    pub files: Vec<ModelFile>,
    pub refused: Vec<Refused>,
}

/// The ignore rules: paths relative to the model, normalized.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    pub ignore: Vec<String>,
    pub allow_symlinks: bool,
}

impl Rules {
    pub(crate) fn ignored(&self, rel: &str) -> bool {
        self.ignore.iter().any(|p| {
            rel == p || (rel.starts_with(p.as_str()) && rel.as_bytes().get(p.len()) == Some(&b'/'))
        })
    }

    /// Adds `path` (relative to the model; one that leaves it is dropped, as model_signing
    /// drops it).
    pub(crate) fn add(&mut self, path: &str) {
        if let Ok(p) = crate::formats::oms::normalized_path(path)
            && p != "."
            && !self.ignore.contains(&p)
        {
            self.ignore.push(p);
        }
    }
}

/// `path` (as typed, relative to the current directory) relative to the model `root`, if it
/// lies inside it: how `--ignore-paths` and the signature file become ignored paths.
pub(crate) fn relative_to_model(root: &Path, path: &Path) -> Option<String> {
    let absolute = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_owned()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        std::fs::canonicalize(&p).unwrap_or_else(|_| crate::fsutil::normalize(&p))
    };
    let root = absolute(root);
    let path = absolute(path);
    let rel = path.strip_prefix(&root).ok()?;
    let text = rel.to_str()?.replace(std::path::MAIN_SEPARATOR, "/");
    (!text.is_empty()).then_some(text)
}

/// The files of the model at `root` in the work tree; `repo` when it lies in a git repository
/// (then a small file that is an LFS pointer stands for its object).
pub(crate) fn list_dir(
    root: &Path,
    rules: &Rules,
    repo: Option<&gix::Repository>,
) -> Result<Listing> {
    let meta = std::fs::symlink_metadata(root).map_err(io(root))?;
    let mut listing = Listing::default();
    if !meta.is_dir() {
        let target = std::fs::metadata(root).map_err(io(root))?;
        if meta.file_type().is_symlink() && !rules.allow_symlinks {
            listing.refused.push(Refused {
                name: ".".to_owned(),
                reason: "a symbolic link (refused without --allow-symlinks)",
            });
        } else if target.is_file() {
            listing
                .files
                .push(disk_file(".".to_owned(), root, target.len(), repo)?);
        } else {
            return Err(SigningError::Model {
                path: root.to_owned(),
                message: "neither a regular file nor a directory".to_owned(),
            });
        }
        return Ok(listing);
    }
    let mut pending = vec![(root.to_owned(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                listing.refused.push(Refused {
                    name: format!("{prefix}{}", entry.file_name().to_string_lossy()),
                    reason: "a name that is not UTF-8 (a manifest names files as text)",
                });
                continue;
            };
            let rel = format!("{prefix}{name}");
            if rules.ignored(&rel) {
                continue;
            }
            let kind = entry.file_type().map_err(io(&path))?;
            if kind.is_symlink() {
                if !rules.allow_symlinks {
                    listing.refused.push(Refused {
                        name: rel,
                        reason: "a symbolic link (refused without --allow-symlinks)",
                    });
                    continue;
                }
                match std::fs::metadata(&path) {
                    Ok(m) if m.is_file() => {
                        listing.files.push(disk_file(rel, &path, m.len(), repo)?);
                    }
                    // pathlib's `**` does not descend through a link to a directory.
                    Ok(m) if m.is_dir() => {}
                    _ => listing.refused.push(Refused {
                        name: rel,
                        reason: "a broken symbolic link or one to a special file",
                    }),
                }
            } else if kind.is_dir() {
                pending.push((path, format!("{rel}/")));
            } else if kind.is_file() {
                let len = entry.metadata().map_err(io(&path))?.len();
                listing.files.push(disk_file(rel, &path, len, repo)?);
            } else {
                listing.refused.push(Refused {
                    name: rel,
                    reason: "not a regular file or directory (a FIFO, socket or device)",
                });
            }
        }
    }
    Ok(listing)
}

fn disk_file(
    name: String,
    path: &Path,
    len: u64,
    repo: Option<&gix::Repository>,
) -> Result<ModelFile> {
    let bytes = Bytes::File {
        path: path.to_owned(),
        len,
    };
    let pointer = match repo {
        Some(_) if len < crate::git::MAX_POINTER_SIZE as u64 => {
            let content =
                crate::fsutil::read_regular(path, crate::git::MAX_POINTER_SIZE as u64, false)
                    .map_err(io(path))?;
            Pointer::parse(&content)
        }
        _ => None,
    };
    Ok(match (pointer, repo) {
        (Some(pointer), Some(repo)) => ModelFile {
            name,
            bytes: object_bytes(repo, &pointer),
            pointer: Some(pointer),
        },
        _ => ModelFile {
            name,
            bytes,
            pointer: None,
        },
    })
}

fn object_bytes(repo: &gix::Repository, pointer: &Pointer) -> Bytes {
    match present_object(repo, pointer) {
        Some(path) => Bytes::File {
            path,
            len: pointer.size,
        },
        None => Bytes::Absent,
    }
}

/// The files of the model at `dir` (relative to the repository root) in `rev`, read through
/// the git adapter: blobs, and LFS pointers standing for their objects.
pub(crate) fn list_rev(
    repo: &gix::Repository,
    rev: &str,
    dir: &str,
    rules: &Rules,
) -> Result<Listing> {
    let mut listing = Listing::default();
    let entries = match tree_files(repo, rev, dir)? {
        Some(entries) => entries,
        None => match tree_entry(repo, rev, dir)? {
            Some(entry @ (Entry::File(_) | Entry::Link(_))) => vec![crate::git::TreeFile {
                path: ".".to_owned(),
                entry,
            }],
            _ => {
                return Err(SigningError::Model {
                    path: PathBuf::from(format!("{rev}:{dir}")),
                    message: "no such file or directory in that revision".to_owned(),
                });
            }
        },
    };
    for file in entries {
        if file.path != "." && rules.ignored(&file.path) {
            continue;
        }
        match file.entry {
            Entry::File(id) => {
                let pointer = blob_pointer(repo, id)?;
                let bytes = match &pointer {
                    Some(p) => object_bytes(repo, p),
                    None => Bytes::Blob {
                        id,
                        len: repo
                            .find_header(id)
                            .map_err(|e| crate::git::object_error(id, e))?
                            .size(),
                    },
                };
                listing.files.push(ModelFile {
                    name: file.path,
                    bytes,
                    pointer,
                });
            }
            Entry::Link(_) => listing.refused.push(Refused {
                name: file.path,
                reason: if rules.allow_symlinks {
                    "a symbolic link in the commit (not followed from a tree; verify the work tree)"
                } else {
                    "a symbolic link (refused without --allow-symlinks)"
                },
            }),
            Entry::Submodule | Entry::Dir => {}
        }
    }
    Ok(listing)
}

/// `path` (as typed) relative to the repository's work tree, `/`-separated ("" for its root);
/// the path need not exist (a model deleted from the work tree is still in its commits).
pub(crate) fn repo_path(repo: &gix::Repository, path: &Path) -> Result<String> {
    let workdir = repo.workdir().ok_or_else(|| SigningError::Model {
        path: path.to_owned(),
        message: "the repository has no work tree".to_owned(),
    })?;
    let workdir = std::fs::canonicalize(workdir).map_err(io(workdir))?;
    let cwd = std::env::current_dir().map_err(io("."))?;
    let absolute = crate::fsutil::normalize(&cwd.join(path));
    // Canonicalize the longest part that exists, so a symlinked temporary directory matches.
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            break c;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break absolute.clone(),
        }
    };
    let full = rest.iter().rev().fold(base, |p, n| p.join(n));
    let rel = full
        .strip_prefix(&workdir)
        .map_err(|_| SigningError::Model {
            path: path.to_owned(),
            message: format!(
                "outside the repository at {}",
                crate::escape::shown_path(&workdir)
            ),
        })?;
    rel.to_str()
        .map(|s| s.replace(std::path::MAIN_SEPARATOR, "/"))
        .ok_or_else(|| SigningError::Model {
            path: path.to_owned(),
            message: "a path that is not UTF-8".to_owned(),
        })
}
