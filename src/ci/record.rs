//! A changed model file as `ci` keeps it once compared: the figures its outputs show (the
//! files table, the log lines, the annotations), and its job-summary diff while that can still
//! fit the summary. Its JSON and HTML sections go to [`Spool`]s as the files are compared, and
//! the models themselves are dropped a window at a time, so memory does not grow with their
//! headers however many files changed.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use crate::git::{ComparedFile, Counts, FileChange, ModelSide, short_hash};

/// Summary diffs are kept until their bytes pass this: GitHub's limit for one step summary
/// (the summary's own budget, `markdown::SUMMARY_LIMIT`), which no summary exceeds.
pub(super) const DETAILS_KEPT: usize = 1024 * 1024;

/// What the outputs show of one compared file.
pub(crate) struct CiFile {
    pub change: FileChange,
    /// Where an annotation about the file points (its index or first part for a model).
    pub anchor: String,
    pub format: String,
    pub counts: Counts,
    /// "tensor data differs" (or "bytes differ") when the structure is equal and the bytes are
    /// not: a weight-only change.
    pub data: Option<&'static str>,
    /// How the two sides' bytes compare, for the files table's own column: "identical",
    /// "differ" with the structure, [`CiFile::data`]'s words for a weight-only change, "not
    /// compared", or "—" without two sides.
    pub bytes: &'static str,
    /// The "weights" cell, with values or a reference.
    pub weights: Option<String>,
    /// Whether values or a conversion were compared (the table then has a "Weights" column).
    pub compared_weights: bool,
    pub counts_as_change: bool,
    pub old: Option<SideCell>,
    pub new: Option<SideCell>,
    /// A grouped checkpoint's label: its model identity and what changed group by group
    /// (`model identity b24ba64b64f8 (unchanged); model weights changed (values 2 of 2); …`);
    /// None for other files.
    pub training: Option<String>,
    /// The plain-text diff of the job summary; None once the diffs before it already exceed
    /// what one summary can hold (the summary stops before reaching it).
    pub details: Option<String>,
    /// When `details` groups changes that repeat: every change, for the collapsed section
    /// under it.
    pub details_all: Option<String>,
}

/// What a grouped job-summary diff says of the list of every change.
const GROUPED_HINT: &str = "every change is listed below";

/// One side as the tables show it.
pub(crate) struct SideCell {
    /// The first 12 hex digits of its structural hash, or `lfs:…` / `?` (see [`short_hash`]).
    pub short_hash: String,
    pub state: SideState,
    pub size: u64,
}

/// What the hash cell says beside the hash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SideState {
    /// An LFS object not present locally.
    Absent,
    Link,
    /// Not a readable model.
    Unreadable,
    /// A model cut short.
    Truncated,
    /// A model whose header came from the LFS server.
    FromServer,
    Model,
}

impl SideCell {
    fn of(side: &ModelSide) -> SideCell {
        let state = match (side, side.artifact()) {
            (ModelSide::Absent { .. }, _) => SideState::Absent,
            (ModelSide::Link { .. }, _) => SideState::Link,
            (_, None) => SideState::Unreadable,
            (_, Some(a)) if a.layout.is_truncated() => SideState::Truncated,
            _ if side.origin_note().is_some() => SideState::FromServer,
            _ => SideState::Model,
        };
        SideCell {
            short_hash: short_hash(Some(side)),
            state,
            size: side.size(),
        }
    }
}

impl CiFile {
    /// The record of `file`; its summary diff kept when `keep_details`.
    pub(crate) fn of(file: &ComparedFile, keep_details: bool) -> CiFile {
        let (details, details_all) = if keep_details {
            let grouped = file.details(Some(GROUPED_HINT));
            let all = file.details(None);
            let all = (all != grouped).then_some(all);
            (Some(grouped), all)
        } else {
            (None, None)
        };
        CiFile {
            anchor: file.annotation_path().to_owned(),
            format: file.format(),
            counts: file.counts(),
            data: file.bytes.as_ref().and_then(crate::render::bytes::short),
            bytes: bytes_cell(file.bytes.as_ref()),
            weights: file.weights(),
            compared_weights: file.values.is_some() || file.conversion.is_some(),
            counts_as_change: file.counts_as_change(),
            old: file.old.as_ref().map(SideCell::of),
            new: file.new.as_ref().map(SideCell::of),
            training: super::training::training_label(file),
            details,
            details_all,
            change: file.change.clone(),
        }
    }

    pub(crate) fn path(&self) -> &str {
        self.change.path()
    }

    /// The counts as summaries show them, with a weight-only change said beside them.
    pub(crate) fn counts_text(&self) -> String {
        let counts = crate::git::counts_text(self.counts);
        match self.data {
            Some(data) => format!("{counts}; {data}"),
            None => counts,
        }
    }
}

/// The files table's bytes cell.
fn bytes_cell(outcome: Option<&crate::cmp::BytesOutcome>) -> &'static str {
    use crate::cmp::BytesOutcome;
    match outcome {
        None => "—",
        Some(BytesOutcome::Identical { .. }) => "identical",
        Some(BytesOutcome::StructureDiffers) => "differ",
        Some(BytesOutcome::NotCompared { .. }) => "not compared",
        Some(outcome @ BytesOutcome::Differ(_)) => {
            crate::render::bytes::short(outcome).unwrap_or("differ")
        }
    }
}

/// A side's short hash for the log (`-` for no side), marked when the model is cut short.
pub(super) fn hash_text(side: Option<&SideCell>) -> String {
    match side {
        None => "-".to_owned(),
        Some(s) if s.state == SideState::Truncated => format!("{} (incomplete)", s.short_hash),
        Some(s) => s.short_hash.clone(),
    }
}

/// Text written to an unnamed temporary file as it is made, and copied into an output at the
/// end: the JSON and HTML sections of every file, which the report would otherwise hold.
pub(super) struct Spool {
    out: BufWriter<File>,
    empty: bool,
}

impl Spool {
    pub(super) fn new() -> std::io::Result<Spool> {
        Ok(Spool {
            out: BufWriter::with_capacity(1 << 16, tempfile::tempfile()?),
            empty: true,
        })
    }

    pub(super) fn push(&mut self, text: &str) -> std::io::Result<()> {
        self.empty &= text.is_empty();
        self.out.write_all(text.as_bytes())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.empty
    }

    /// The text pushed, flushed to its file.
    pub(super) fn finish(self) -> std::io::Result<Spooled> {
        let empty = self.empty;
        let file = self
            .out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        Ok(Spooled { file, empty })
    }
}

/// A finished [`Spool`].
pub(crate) struct Spooled {
    file: File,
    empty: bool,
}

impl Spooled {
    pub(crate) fn is_empty(&self) -> bool {
        self.empty
    }

    /// Everything pushed, written to `to`.
    pub(crate) fn copy_to(&self, to: &mut dyn Write) -> std::io::Result<()> {
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0))?;
        std::io::copy(&mut file, to)?;
        Ok(())
    }
}
