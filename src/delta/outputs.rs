//! An output must not be one of the inputs: `delta create --base A B -o A` would replace the
//! base with a delta that needs that base. Every writing command (create, apply, store,
//! restore) checks its output against every file it reads before anything is written.

use std::path::{Path, PathBuf};

use super::error::DeltaError;
use super::model::Model;

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Refuses `out` when it is the same file as one of the inputs (the same device and inode when
/// it exists, through symlinks and hard links; else the same path once resolved), or a file
/// inside a directory given as a sharded model.
pub(crate) fn refuse_output_among_inputs<'a>(
    out: &Path,
    base: &Model,
    deltas: impl IntoIterator<Item = &'a Path>,
    finetuned: Option<&Model>,
) -> Result<()> {
    check_model(out, base, "base model")?;
    if let Some(ft) = finetuned {
        check_model(out, ft, "fine-tuned model")?;
    }
    for d in deltas {
        check_file(out, d, "delta")?;
    }
    Ok(())
}

fn check_model(out: &Path, model: &Model, role: &'static str) -> Result<()> {
    if model.path.is_dir() && (same_file(out, &model.path) || inside(out, &model.path)) {
        return Err(DeltaError::OutputInInputDir {
            output: out.to_path_buf(),
            dir: model.path.clone(),
            role,
        });
    }
    for file in model.files() {
        check_file(out, file, role)?;
    }
    Ok(())
}

fn check_file(out: &Path, input: &Path, role: &'static str) -> Result<()> {
    if same_file(out, input) {
        return Err(DeltaError::OutputIsInput {
            output: out.to_path_buf(),
            input: input.to_path_buf(),
            role,
        });
    }
    Ok(())
}

/// The same file: the same device and inode, or the same path once resolved.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b))
            && x.dev() == y.dev()
            && x.ino() == y.ino()
        {
            return true;
        }
    }
    matches!((resolve(a), resolve(b)), (Some(x), Some(y)) if x == y)
}

/// Whether `path` (resolved) lies in the directory `dir` (resolved), at any depth.
fn inside(path: &Path, dir: &Path) -> bool {
    match (resolve(path), std::fs::canonicalize(dir)) {
        (Some(p), Ok(d)) => p.starts_with(&d) && p != d,
        _ => false,
    }
}

/// `path` with its symlinks resolved; for a file that does not exist yet, its resolved parent
/// joined with its name.
fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    let parent = crate::fsutil::dir_of(path);
    std::fs::canonicalize(parent).ok().map(|p| p.join(name))
}
