//! How the bytes of a changed file's two sides compare, for `weight-inspect git diff`, git's
//! external driver and `ci` ([`crate::cmp`]). Blob ids and LFS oids already tell whether the
//! bytes differ; the bytes themselves are read only when the structures are equal, to name
//! the first tensor that differs, and only where they are on this machine.

use std::path::Path;

use gix::ObjectId;

use super::lfs::{Pointer, present_object};
use super::objects::blob_bytes;
use super::side::ModelSide;
use crate::cmp::{BytesOutcome, Part, Source};
use crate::diff::StructuralDiff;

/// Where one side's bytes are, beside its parsed side.
#[derive(Debug, Clone, Copy)]
pub(super) enum At<'a> {
    /// A file on this machine (git's temporary copy, a work-tree file).
    File(&'a Path),
    /// A blob of the repository.
    Blob(ObjectId),
}

/// One side as the comparison sees it: what was read, and where its bytes are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located<'a> {
    pub side: &'a ModelSide,
    pub at: Option<At<'a>>,
    /// The blob id, when known: equal ids are equal bytes, unread.
    pub id: Option<ObjectId>,
}

/// The outcome for two sides whose structural diff is `diff`.
pub(super) fn compare_sides(
    repo: Option<&gix::Repository>,
    diff: &StructuralDiff,
    old: Located<'_>,
    new: Located<'_>,
) -> BytesOutcome {
    if diff.only_layout_changed() {
        return BytesOutcome::NotCompared {
            why: "the model is held by other files".to_owned(),
        };
    }
    if diff.differs() {
        return BytesOutcome::StructureDiffers;
    }
    if let (Some(a), Some(b)) = (old.id, new.id)
        && a == b
    {
        return BytesOutcome::Identical {
            size: new.side.size(),
        };
    }
    let Some(model) = new.side.artifact() else {
        return BytesOutcome::StructureDiffers;
    };
    let source = |s: Located<'_>| Part::single(source_of(repo, s));
    crate::cmp::outcome(false, Some((&[source(old)], &[source(new)])), model)
}

/// Where a side's bytes are: an LFS pointer's object in the local store (else its oid), the
/// file, or the blob.
fn source_of(repo: Option<&gix::Repository>, located: Located<'_>) -> Source {
    if let Some(pointer) = located.side.pointer() {
        return pointer_source(repo, pointer);
    }
    match (located.at, repo) {
        (Some(At::File(path)), _) => Source::File(path.to_owned()),
        (Some(At::Blob(id)), Some(repo)) => match blob_bytes(repo, id) {
            Ok(bytes) => Source::Bytes(bytes),
            Err(e) => Source::Elsewhere {
                size: None,
                why: format!("the blob could not be read: {e}"),
            },
        },
        _ => Source::Elsewhere {
            size: None,
            why: "the bytes of a side are not here".to_owned(),
        },
    }
}

fn pointer_source(repo: Option<&gix::Repository>, pointer: &Pointer) -> Source {
    match repo.and_then(|repo| present_object(repo, pointer)) {
        Some(path) => Source::File(path),
        None => Source::Digest {
            sha256: pointer.oid.clone(),
            size: pointer.size,
        },
    }
}

/// The bytes line(s) of a change whose structure is equal: [`crate::render::bytes::text`], and
/// when both sides are LFS pointers their oids as textconv's `bytes:` line shows them (known
/// without reading; said once when the outcome already names them).
pub(super) fn text(outcome: &BytesOutcome, old: Option<&Pointer>, new: Option<&Pointer>) -> String {
    use crate::cmp::{Difference, How};
    use crate::render::bytes::{Hint, digests_line};
    let mut out = crate::render::bytes::text(outcome, Hint::Git, false);
    let named = matches!(
        outcome,
        BytesOutcome::Differ(Difference {
            how: How::Digests { .. },
            ..
        })
    );
    if let (BytesOutcome::Differ(_), false, Some(a), Some(b)) = (outcome, named, old, new) {
        out.push_str(&digests_line((&a.oid, a.size), (&b.oid, b.size)));
    }
    out
}

/// The LFS pointer a side was reached through: the side's own, or for a file git handed over
/// smudged, the pointer its blob holds (a small blob, read only when it is one).
pub(super) fn pointer_of(repo: Option<&gix::Repository>, located: Located<'_>) -> Option<Pointer> {
    if let Some(pointer) = located.side.pointer() {
        return Some(pointer.clone());
    }
    let (repo, id) = (repo?, located.id?);
    let small = repo
        .find_header(id)
        .is_ok_and(|h| h.size() <= super::lfs::MAX_POINTER_SIZE as u64);
    if !small {
        return None;
    }
    Pointer::parse(&blob_bytes(repo, id).ok()?)
}
