//! `weight-inspect git-diff-driver`: git's external diff protocol (`diff.<driver>.command`),
//! and the per-file rendering shared with `weight-inspect git diff`.
//!
//! git calls the driver with
//! `path old-file old-hex old-mode new-file new-hex new-mode` (7 arguments), two more
//! (`new-path`, the rename/similarity message) for a rename, or just `path` for an unmerged
//! path. Added and deleted sides are `/dev/null`. git aborts the whole diff when the driver
//! exits with anything but 0, so every problem becomes a note in the output.

use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::bytes::{At, Located};
use super::reader::{RemoteOptions, SideReader};
use super::side::ModelSide;
use crate::diff::StructuralDiff;
use crate::escape::{shown, shown_message};
use crate::render::Palette;
use crate::render::text::TensorView;

/// The arguments of one external diff call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Invocation {
    Unmerged {
        path: String,
    },
    Pair {
        path: String,
        old_file: PathBuf,
        old_hex: String,
        /// git's octal mode of the old side (`100644`, `120000` for a symbolic link, ...).
        old_mode: String,
        new_file: PathBuf,
        new_hex: String,
        new_mode: String,
        /// The new path of a rename (9-argument form).
        new_path: Option<String>,
    },
}

impl Invocation {
    /// Interprets git's arguments; None when they follow none of git's forms.
    pub(super) fn parse(args: &[OsString]) -> Option<Invocation> {
        let text = |i: usize| args[i].to_string_lossy().into_owned();
        match args.len() {
            1 => Some(Invocation::Unmerged { path: text(0) }),
            7 | 9 => Some(Invocation::Pair {
                path: text(0),
                old_file: PathBuf::from(&args[1]),
                old_hex: text(2),
                old_mode: text(3),
                new_file: PathBuf::from(&args[4]),
                new_hex: text(5),
                new_mode: text(6),
                new_path: (args.len() == 9).then(|| text(7)),
            }),
            _ => None,
        }
    }
}

/// Runs one external diff call and returns its output. Never fails: problems are notes.
pub(crate) fn run(args: &[OsString], color: bool, remote: &RemoteOptions) -> String {
    let outcome = std::panic::catch_unwind(|| run_inner(args, color, remote));
    outcome.unwrap_or_else(|_| {
        "weight-inspect: failed unexpectedly on this file; see `git diff --no-ext-diff`\n".into()
    })
}

fn run_inner(args: &[OsString], color: bool, remote: &RemoteOptions) -> String {
    match Invocation::parse(args) {
        None => format!(
            "weight-inspect git-diff-driver: expected git's 1, 7 or 9 arguments, got {}\n",
            args.len()
        ),
        Some(Invocation::Unmerged { path }) => format!(
            "{}\nunmerged: resolve the conflict first; compare the sides with \
             `weight-inspect diff :2:{p} :3:{p}`\n",
            header(color, Some(&path), Some(&path)),
            p = shown(&path)
        ),
        Some(Invocation::Pair {
            path,
            old_file,
            old_hex,
            old_mode,
            new_file,
            new_hex,
            new_mode,
            new_path,
        }) => {
            // The repository git runs the driver in resolves LFS pointers (GIT_LFS_SKIP_SMUDGE=1
            // hands us pointers instead of content). For a symbolic link, git hands over its
            // target.
            let reader = SideReader::around(None, remote);
            let new_path = new_path.unwrap_or_else(|| path.clone());
            let side = |file: &Path, mode: &str, name: &str| {
                (file != Path::new("/dev/null")).then(|| {
                    if mode == LINK_MODE {
                        link_side(file)
                    } else {
                        reader.file_as(file, name)
                    }
                })
            };
            let old = side(&old_file, &old_mode, &path);
            let new = side(&new_file, &new_mode, &new_path);
            // git's hex is all zeros (or dots) for a side it has not hashed (a work-tree file).
            let id = |hex: &str| {
                (!hex.chars().all(|c| c == '0' || c == '.'))
                    .then(|| gix::ObjectId::from_hex(hex.as_bytes()).ok())
                    .flatten()
            };
            let bytes = |diff: &StructuralDiff| {
                let (Some(o), Some(n)) = (&old, &new) else {
                    return None;
                };
                let old = Located {
                    side: o,
                    at: Some(At::File(&old_file)),
                    id: id(&old_hex),
                };
                let new = Located {
                    side: n,
                    at: Some(At::File(&new_file)),
                    id: id(&new_hex),
                };
                let outcome = super::bytes::compare_sides(reader.repo(), diff, old, new);
                let pointer = |l| super::bytes::pointer_of(reader.repo(), l);
                Some(super::bytes::text(
                    &outcome,
                    pointer(old).as_ref(),
                    pointer(new).as_ref(),
                ))
            };
            render_change(
                color,
                old.as_ref().map(|_| path.as_str()),
                new.as_ref().map(|_| new_path.as_str()),
                old.as_ref(),
                new.as_ref(),
                bytes,
                Some(DRIVER_HINT),
            )
        }
    }
}

/// git's mode of a symbolic link.
const LINK_MODE: &str = "120000";

/// Where a grouped diff's every change is, for a reader of git's output (git passes the
/// driver no flags of its own).
const DRIVER_HINT: &str = "`weight-inspect git diff --all` lists each";

/// A symbolic link's side: git hands over a file holding its target (read only if it is a
/// small regular file, as a link target is).
fn link_side(file: &Path) -> ModelSide {
    const MAX_TARGET: u64 = 64 * 1024;
    let target = match std::fs::metadata(file) {
        Ok(meta) if meta.is_file() && meta.len() <= MAX_TARGET => std::fs::read(file).map_or_else(
            |e| format!("(unreadable: {e})"),
            |bytes| String::from_utf8_lossy(&bytes).into_owned(),
        ),
        _ => "(unreadable)".to_owned(),
    };
    ModelSide::Link { target }
}

/// The header line naming the file: `weight-inspect a/old b/new`, with `/dev/null` for a
/// missing side; paths shown escaped.
pub(super) fn header(color: bool, old_path: Option<&str>, new_path: Option<&str>) -> String {
    let old = old_path.map_or("/dev/null".to_owned(), |p| format!("a/{}", shown(p)));
    let new = new_path.map_or("/dev/null".to_owned(), |p| format!("b/{}", shown(p)));
    let text = match (old_path, new_path) {
        (Some(o), Some(n)) if o != n => format!("weight-inspect {old} {new} (renamed)"),
        _ => format!("weight-inspect {old} {new}"),
    };
    if color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text
    }
}

/// The rendering of one changed file: header, then the structural diff of two models, a
/// summary of an added or removed model, or notes for sides that are not parsed models.
/// `bytes` renders how the files' bytes compare, given the structural diff (to say what an
/// empty structural diff hides); None: they differ, and nothing more is known.
/// Changes that repeat are grouped, with `all_hint` saying where each is listed; None lists
/// every change.
pub(super) fn render_change(
    color: bool,
    old_path: Option<&str>,
    new_path: Option<&str>,
    old: Option<&ModelSide>,
    new: Option<&ModelSide>,
    bytes: impl FnOnce(&StructuralDiff) -> Option<String>,
    all_hint: Option<&str>,
) -> String {
    let palette = &Palette::new(color);
    let mut out = header(color, old_path, new_path);
    out.push('\n');
    // git hands drivers one file at a time; say which multi-file model a shard belongs to.
    let file = new_path
        .or(old_path)
        .map(|p| p.rsplit('/').next().unwrap_or(p));
    if let Some(note) = file.and_then(crate::sharded::split::name_note) {
        let _ = writeln!(
            out,
            "{note} (`weight-inspect git diff` compares the whole model)"
        );
    }
    if let (Some(a), Some(b)) = (
        old.and_then(ModelSide::artifact),
        new.and_then(ModelSide::artifact),
    ) {
        let diff = StructuralDiff::between(a, b);
        let bytes = bytes(&diff);
        let view = match all_hint {
            Some(hint) => TensorView::Grouped { old: Some(a), hint },
            None => TensorView::All,
        };
        push_block(
            &mut out,
            &crate::render::text::diff_or_identical_in(&diff, palette, bytes.is_none(), view),
        );
        if let Some(bytes) = &bytes {
            out.push_str(bytes);
        }
    } else {
        match (old, new) {
            (None, Some(side)) => push_side(&mut out, palette, "new file", side),
            (Some(side), None) => push_side(&mut out, palette, "deleted file", side),
            (Some(o), Some(n)) => {
                push_note(&mut out, "old", o);
                push_note(&mut out, "new", n);
            }
            (None, None) => {}
        }
    }
    for (label, side) in [("old", old), ("new", new)] {
        if let Some(note) = side.and_then(ModelSide::origin_note) {
            let _ = writeln!(out, "note: {label}: {note}");
        }
    }
    out
}

fn push_side(out: &mut String, palette: &Palette, what: &str, side: &ModelSide) {
    match side.artifact() {
        Some(artifact) => {
            let _ = writeln!(out, "{what}:");
            push_block(
                out,
                &crate::render::text::inspect(artifact, palette, false, false),
            );
        }
        None => push_note(out, what, side),
    }
}

fn push_note(out: &mut String, label: &str, side: &ModelSide) {
    match (side.artifact(), side.note()) {
        (Some(artifact), _) => {
            let _ = writeln!(
                out,
                "{label}: {} model, structural hash {}",
                artifact.format.name(),
                crate::identity::structural_hash(artifact)
            );
        }
        (None, Some(note)) => {
            let _ = writeln!(out, "{label}: {}", shown_message(&note));
        }
        (None, None) => {}
    }
}

fn push_block(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn parses_gits_argument_forms() {
        assert_eq!(
            Invocation::parse(&os(&["m.gguf"])),
            Some(Invocation::Unmerged {
                path: "m.gguf".into()
            })
        );
        let seven = os(&[
            "m.gguf", "/tmp/a", "abc", "100644", "m.gguf", "def", "100644",
        ]);
        match Invocation::parse(&seven) {
            Some(Invocation::Pair {
                new_path, new_file, ..
            }) => {
                assert_eq!(new_path, None);
                assert_eq!(new_file, PathBuf::from("m.gguf"));
            }
            other => panic!("{other:?}"),
        }
        let mut nine = seven.clone();
        nine.extend(os(&["n.gguf", "similarity index 100%\n"]));
        match Invocation::parse(&nine) {
            Some(Invocation::Pair { new_path, .. }) => {
                assert_eq!(new_path.as_deref(), Some("n.gguf"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Invocation::parse(&os(&["a", "b"])), None);
    }
}
