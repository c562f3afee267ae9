//! `weight-inspect textconv FILE`: a stable line rendering of a model for
//! `diff.<driver>.textconv`, so that git's own line diff, colors, word-diff and pagers show
//! exactly what changed.
//!
//! Rules that keep the diff readable:
//! - one line per metadata key and one per tensor, sorted by name; nothing that shifts when
//!   something else changes (no data offsets);
//! - long arrays are one line with their length and a short content hash, so a changed
//!   vocabulary is one changed line;
//! - long strings (chat templates) span indented lines split at newlines and at stable
//!   delimiters, so their edits diff line by line, and git's default hunk header names the key;
//! - a `bytes:` line with the SHA-256 and size of the file's bytes (for an LFS pointer, its
//!   oid and size, which are the same digest of the same bytes), so a commit that changes only
//!   weights still changes the rendering, and a clone with the LFS objects renders the same line
//!   as one without;
//! - the model's completeness (`incomplete:`) beside its structural hash, never inside it.
//!
//! Textconv must never make `git diff` fail: every problem becomes a note in the output.
//!
//! Keys, tensor names, string values and the lines of long text come from the file: they are
//! shown as [`crate::escape`] shows every name, so that no line of the output holds a
//! control or bidirectional formatting character or is forged by one.

use std::fmt::Write;
use std::path::Path;

use super::error::NoTensorHashes;
use super::reader::{RemoteOptions, SideReader};
use super::side::ModelSide;
use crate::artifact::{Array, Value};
use crate::artifact::{Artifact, Format};
use crate::escape::{quoted, shown, shown_message, shown_path};
use crate::read::Content;

/// First line of every rendering; bump when the rendering changes so cached conversions
/// (`cachetextconv`) of old and new versions are told apart in a diff.
pub(super) const HEADER: &str = "weight-inspect textconv 5";

/// What a rendering holds beyond the defaults; each option is a flag of the textconv command,
/// so git's textconv cache (keyed by the command line) never mixes renderings of two settings.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TextconvOptions {
    /// The SHA-256 of each tensor's data where the model's bytes are on this machine
    /// (`--tensor-hashes`): reads the whole model.
    pub tensor_hashes: bool,
}

/// Arrays up to this many elements (and [`INLINE_WIDTH`] characters) are shown in full.
const INLINE_ELEMENTS: usize = 16;
const INLINE_WIDTH: usize = 160;
/// Strings longer than this, or with a newline, span lines.
const INLINE_STRING: usize = 120;
/// Only lines longer than this are split (most template lines stay whole)...
const SPLIT_OVER: usize = 200;
/// ...after a delimiter once a piece is this long...
const SPLIT_MIN: usize = 40;
/// ...and unconditionally at this length (counted in characters).
const SPLIT_MAX: usize = 400;

/// Renders `file` (a model, an LFS pointer to one, or anything else). Never fails.
pub(crate) fn render_file(file: &Path, remote: &RemoteOptions, options: TextconvOptions) -> String {
    let outcome = std::panic::catch_unwind(|| render_file_inner(file, remote, options));
    outcome.unwrap_or_else(|_| {
        format!("{HEADER}\nerror: weight-inspect failed unexpectedly on this file\n")
    })
}

fn render_file_inner(file: &Path, remote: &RemoteOptions, options: TextconvOptions) -> String {
    match crate::read::read_wdelta(file) {
        Ok(None) => {}
        Ok(Some(delta)) => {
            return format!(
                "{HEADER}\n{}{}",
                bytes_line(file),
                crate::render::wdelta::summary_and_description(&delta)
            );
        }
        Err(e) => {
            let len = std::fs::metadata(file).map_or(0, |m| m.len());
            let message = match &e {
                crate::error::Error::Wdelta { source, .. } => format!("invalid .wdelta: {source}"),
                other => other.to_string(),
            };
            return format!(
                "{HEADER}\n{}content: unreadable .wdelta file, {len} bytes\nerror: {}\n",
                bytes_line(file),
                stable_message(&message, file)
            );
        }
    }
    let size = std::fs::metadata(file).map(|m| m.len()).ok();
    let reader = SideReader::around(None, remote);
    let side = reader.file(file);
    if let Some(text) = local_delta_object(&side, &reader) {
        return text;
    }
    let (file_digest, hashes) = if options.tensor_hashes {
        digests(&side, &reader, file)
    } else {
        (None, None)
    };
    let mut out = render_side(&side, size, file, hashes.as_ref());
    if side.pointer().is_none() {
        // Plain bytes (a blob, or an LFS object git smudged): their digest, after the header.
        // A file that is no model was hashed already, for its `content:` line.
        let known = match &side {
            ModelSide::Read {
                content: Content::Other { .. },
                sha256,
                ..
            } => sha256.clone().filter(|s| s.len() == 64),
            _ => None,
        };
        let line = match file_digest.or(known) {
            Some(hex) => format!("bytes: sha256:{hex}, {} bytes\n", size.unwrap_or(0)),
            None => bytes_line(file),
        };
        out.insert_str(HEADER.len() + 1, &line);
    }
    out
}

/// A pointer to a `.wdelta` whose LFS object is in the local store: rendered as the object
/// itself renders (the pointer's oid is the object's digest), so a clone with the objects shows
/// the same text whether git hands over the pointer or the smudged file.
fn local_delta_object(side: &ModelSide, reader: &SideReader<'_>) -> Option<String> {
    let ModelSide::Read {
        content: Content::Delta(_),
        lfs: Some(pointer),
        from_server: false,
        ..
    } = side
    else {
        return None;
    };
    let object = reader
        .repo()
        .and_then(|repo| super::lfs::present_object(repo, pointer))?;
    let delta = crate::read::read_wdelta(&object).ok().flatten()?;
    Some(format!(
        "{HEADER}\nbytes: sha256:{}, {} bytes\n{}",
        pointer.oid,
        pointer.size,
        crate::render::wdelta::summary_and_description(&delta)
    ))
}

/// Each tensor's data digest (in the tensor table's order), or why there are none.
type TensorHashes = Result<Vec<String>, NoTensorHashes>;

/// `bytes: sha256:HEX, N bytes`: the digest and size of the file's bytes, which an LFS pointer
/// names as its oid and size (so both render the same line).
fn bytes_line(file: &Path) -> String {
    let meta = std::fs::metadata(file);
    // Only a regular file is read: a device or FIFO named on the command line never ends.
    if !meta.as_ref().is_ok_and(std::fs::Metadata::is_file) {
        return "bytes: not a regular file\n".to_owned();
    }
    let size = meta.map_or(0, |m| m.len());
    match crate::digest::sha256_file(file) {
        Ok(hex) => format!("bytes: sha256:{hex}, {size} bytes\n"),
        Err(e) => format!(
            "bytes: unreadable, {size} bytes: {}\n",
            stable_message(&e.to_string(), file)
        ),
    }
}

/// For `--tensor-hashes`: the data digest of each tensor, when the model's bytes are here (the
/// file git handed over, or the local LFS object a pointer names), and the digest of the
/// handed file when that one read gave it. A header read from the LFS server, or a model cut
/// short, has no tensor digests.
fn digests(
    side: &ModelSide,
    reader: &SideReader<'_>,
    file: &Path,
) -> (Option<String>, Option<TensorHashes>) {
    let Some(artifact) = side.artifact() else {
        return (None, None);
    };
    let data = match side.pointer() {
        None => Some(file.to_owned()),
        Some(pointer) if !side.header_from_server() => reader
            .repo()
            .and_then(|repo| super::lfs::present_object(repo, pointer)),
        Some(_) => None,
    };
    let why = match data {
        None => NoTensorHashes::NotHere,
        Some(_) if artifact.layout.is_truncated() => NoTensorHashes::Incomplete,
        Some(path) => match super::data_hashes::digests(&path, artifact) {
            Ok(found) => {
                let handed = side.pointer().is_none().then_some(found.file);
                return (handed, Some(Ok(found.tensors)));
            }
            Err(e) => NoTensorHashes::Unreadable(stable_message(&e.to_string(), file)),
        },
    };
    (None, Some(Err(why)))
}

/// Renders one side. `size` is the size of the file git handed us (for pointers, the
/// pointer's size is shown instead); `file` is only used to strip its temporary path from
/// error messages, which would otherwise differ on every run.
/// `hashes`: the tensors' data digests, when asked for.
pub(super) fn render_side(
    side: &ModelSide,
    size: Option<u64>,
    file: &Path,
    hashes: Option<&TensorHashes>,
) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push('\n');
    if let Some(pointer) = side.pointer() {
        // The oid is the SHA-256 of the object's bytes: the line the object itself renders.
        let _ = writeln!(out, "bytes: sha256:{}, {} bytes", pointer.oid, pointer.size);
    }
    if side.origin_note().is_some() {
        // Shown as a line of its own, so a diff against a verified side says which is which.
        out.push_str("header-source: LFS server (not verified against the oid)\n");
    }
    match side {
        ModelSide::Read {
            content: Content::Model(artifact),
            lfs,
            ..
        } => {
            let size = lfs.as_ref().map(|p| p.size).or(size);
            render_artifact(&mut out, artifact, size, hashes);
        }
        ModelSide::Absent {
            remote: Some(why), ..
        } => {
            let _ = writeln!(
                out,
                "content: not present locally, and the LFS server did not give its header: {}",
                shown_message(&why.to_string())
            );
        }
        ModelSide::Absent { .. } => {
            out.push_str(
                "content: not present locally (run `git lfs fetch` or `git lfs pull`; if git \
                 cached this text, clear it with `git update-ref -d \
                 refs/notes/textconv/weight-inspect`)\n",
            );
        }
        ModelSide::Read {
            content: Content::Other { .. },
            size,
            sha256,
            ..
        } => {
            let _ = writeln!(
                out,
                "content: not a GGUF, safetensors or PyTorch file, {size} bytes, sha256:{}",
                sha256.as_deref().unwrap_or_default()
            );
        }
        ModelSide::Read {
            content: Content::Delta(summary),
            ..
        } => {
            let _ = writeln!(
                out,
                "delta: {}",
                crate::render::wdelta::summary_line(summary)
            );
        }
        ModelSide::Read {
            content: Content::BadDelta { error },
            size,
            ..
        } => {
            let _ = writeln!(out, "content: unreadable .wdelta file, {size} bytes");
            let _ = writeln!(out, "error: {}", stable_message(&error.to_string(), file));
        }
        ModelSide::Read {
            content: Content::Invalid { error, .. },
            size,
            ..
        } => {
            let _ = writeln!(out, "content: unreadable model file, {size} bytes");
            let _ = writeln!(out, "error: {}", stable_message(&error.to_string(), file));
        }
        ModelSide::Unreadable { error } => {
            let _ = writeln!(out, "content: unreadable model file, 0 bytes");
            let _ = writeln!(out, "error: {}", stable_message(&error.to_string(), file));
        }
        ModelSide::Link { target } => {
            let _ = writeln!(
                out,
                "content: a symbolic link to {}, not a file",
                shown(target)
            );
        }
        ModelSide::Unassembled { error } => {
            let _ = writeln!(
                out,
                "content: a multi-file model whose files do not fit together"
            );
            let _ = writeln!(out, "error: {}", stable_message(&error.to_string(), file));
        }
    }
    out
}

/// Error messages name the file; git's temporary file names change on every run. The message
/// names the file (and a key of it) shown escaped, as every path is; the file is replaced by
/// its name, shown the same way, and the message kept to one line.
fn stable_message(message: &str, file: &Path) -> String {
    let full = shown_path(file).to_string();
    let name = file
        .file_name()
        .map(|n| shown(&n.to_string_lossy()).into_owned())
        .unwrap_or_default();
    let message = if full.is_empty() {
        message.to_owned()
    } else {
        message.replace(&full, &name)
    };
    shown_message(&message).into_owned()
}

/// The rendering of a parsed model: header lines, then metadata and tensors.
pub(super) fn render_artifact(
    out: &mut String,
    artifact: &Artifact,
    size: Option<u64>,
    hashes: Option<&TensorHashes>,
) {
    match (artifact.format, artifact.gguf_version) {
        (Format::Gguf, Some(v)) => {
            let _ = writeln!(out, "format: gguf v{v}");
        }
        (format, _) => {
            let _ = writeln!(out, "format: {}", format.name());
        }
    }
    if let Some(part) = crate::sharded::split::part_text(artifact) {
        let _ = writeln!(out, "split-part: {part}");
    }
    let _ = writeln!(
        out,
        "structural-hash: {}",
        crate::identity::structural_hash(artifact)
    );
    // A training checkpoint's second identity (SPEC §5d): equal across the steps of one run.
    if let (Some(training), Some(hash)) = (
        artifact.layout.training(),
        crate::identity::model_identity(artifact),
    ) {
        let _ = writeln!(out, "model-identity: {hash} ({})", training.describe());
    }
    // A pickle's globals beyond those of tensors, so that a diff shows a payload appear.
    for f in &artifact.layout.findings {
        let _ = writeln!(
            out,
            "finding: {} {} {}",
            f.tier,
            crate::escape::shown(&f.global),
            f.actions.join(" ")
        );
    }
    let (total, by_dtype) = artifact.parameter_counts();
    let _ = writeln!(out, "metadata-keys: {}", artifact.metadata.len());
    let _ = writeln!(out, "tensors: {}", artifact.tensors.len());
    let _ = writeln!(out, "parameters: {total}");
    for (dtype, count) in &by_dtype {
        // Parameters only: a training checkpoint's model group.
        let groups = artifact.layout.groups.as_deref();
        let tensors = artifact
            .tensors
            .values()
            .enumerate()
            .filter(|(position, t)| {
                t.dtype.name == *dtype && groups.is_none_or(|g| g.get(*position) == Some(&"model"))
            })
            .count();
        let _ = writeln!(
            out,
            "parameters-{dtype}: {count} in {tensors} tensor{}",
            plural(tensors)
        );
    }
    // A training checkpoint's groups: parameters above count the model group only.
    for (group, tensors, elements) in artifact.groups() {
        let _ = writeln!(
            out,
            "group-{group}: {tensors} tensor{}, {elements} elements",
            plural(tensors)
        );
    }
    if let Some(size) = size {
        let _ = writeln!(out, "file-size: {size} bytes");
    }
    if let Some(incomplete) = artifact.layout.incomplete() {
        let _ = writeln!(out, "incomplete: {incomplete}");
    }
    for (key, value) in &artifact.metadata {
        render_metadata(out, key, value);
    }
    if let Some(Err(why)) = hashes {
        let _ = writeln!(out, "tensor-hashes: none ({why})");
    }
    let digests = match hashes {
        Some(Ok(digests)) => digests.as_slice(),
        _ => &[],
    };
    for (position, (name, tensor)) in artifact.tensors.iter().enumerate() {
        let shape: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
        let _ = write!(
            out,
            "tensor {}: {} [{}] {} bytes",
            shown(name),
            tensor.dtype,
            shape.join(", "),
            tensor.byte_length
        );
        match digests.get(position) {
            Some(digest) => {
                let _ = writeln!(out, ", data sha256:{digest}");
            }
            None => out.push('\n'),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn render_metadata(out: &mut String, raw_key: &str, value: &Value) {
    let key = shown(raw_key);
    match value {
        Value::String(s) if s.contains('\n') || s.chars().count() > INLINE_STRING => {
            // No sizes here: this line stays unchanged when the text changes, so git's default
            // hunk header (the nearest unindented line) names the key of an edited template.
            let _ = writeln!(out, "meta {key}: string, long text:");
            for line in s.split('\n') {
                for segment in split_long_line(line) {
                    let text = shown(segment);
                    if text.is_empty() {
                        out.push_str("    |\n");
                    } else {
                        let _ = writeln!(out, "    | {text}");
                    }
                }
            }
        }
        Value::Array(array) => {
            let _ = write!(
                out,
                "meta {key}: array[{}; {}]",
                array_type(array),
                array.len()
            );
            match inline_array(array) {
                Some(text) => {
                    let _ = writeln!(out, " = {text}");
                }
                None => {
                    // The core's digest of the value's canonical JSON (16 hex digits).
                    let _ = writeln!(out, " sha256:{}", crate::identity::value_digest(value));
                }
            }
        }
        scalar => {
            // An enumerated value (general.file_type) with gguf-py's name beside the number.
            let _ = writeln!(
                out,
                "meta {key}: {} = {}{}",
                scalar.type_name(),
                scalar_text(scalar),
                crate::render::enums::enum_note(raw_key, scalar)
            );
        }
    }
}

/// `string`, `u32`, or `array` with the inner type for nested arrays.
fn array_type(array: &Array) -> String {
    match array {
        Array::Array(inner) => match inner.first() {
            Some(first)
                if inner
                    .iter()
                    .all(|a| a.element_type_name() == first.element_type_name()) =>
            {
                format!("array[{}]", first.element_type_name())
            }
            _ => "array".to_owned(),
        },
        other => other.element_type_name().to_owned(),
    }
}

fn inline_array(array: &Array) -> Option<String> {
    if array.len() > INLINE_ELEMENTS {
        return None;
    }
    let mut parts = Vec::with_capacity(array.len());
    for i in 0..array.len() {
        let element = array.get(i)?;
        let text = match &element {
            Value::Array(inner) => inline_array(inner)?,
            Value::String(s) => quoted(s),
            other => scalar_text(other),
        };
        parts.push(text);
    }
    let text = format!("[{}]", parts.join(", "));
    (text.chars().count() <= INLINE_WIDTH).then_some(text)
}

/// A scalar's value: the core's one-line form (NaNs with their bits, since payloads differ in
/// the structural hash).
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => quoted(s),
        Value::Array(a) => format!("array[{}; {}]", a.element_type_name(), a.len()),
        scalar => crate::render::text::scalar_text(scalar),
    }
}

/// Splits a line longer than [`SPLIT_OVER`] bytes after stable delimiters (template tags,
/// sentence ends), so an edit changes only the pieces around it; pieces are at least
/// [`SPLIT_MIN`] characters unless the line ends, and at most [`SPLIT_MAX`].
fn split_long_line(line: &str) -> Vec<&str> {
    const DELIMITERS: [&str; 4] = ["%}", "}}", ". ", "; "];
    if line.len() <= SPLIT_OVER {
        return vec![line];
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut chars = 0;
    let mut iter = line.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        chars += 1;
        let end = i + c.len_utf8();
        let at_delimiter =
            chars >= SPLIT_MIN && DELIMITERS.iter().any(|d| line[start..end].ends_with(d));
        if (at_delimiter || chars >= SPLIT_MAX) && iter.peek().is_some() {
            pieces.push(&line[start..end]);
            start = end;
            chars = 0;
        }
    }
    pieces.push(&line[start..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_split_at_delimiters_and_rejoin() {
        let line = "{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}".repeat(8);
        let pieces = split_long_line(&line);
        assert!(pieces.len() > 2);
        assert_eq!(pieces.concat(), line);
        assert!(pieces.iter().all(|p| p.chars().count() <= SPLIT_MAX));
        assert_eq!(
            split_long_line("{% if x %}{{ y }}{% endif %}"),
            ["{% if x %}{{ y }}{% endif %}"]
        );
        // An edit near the start leaves the later pieces as they were.
        let edited = line.replacen("m.role", "m.author", 1);
        let after = split_long_line(&edited);
        assert_eq!(pieces[pieces.len() - 3..], after[after.len() - 3..]);
    }

    #[test]
    fn hard_split_without_delimiters_respects_char_boundaries() {
        let line = "é".repeat(1000);
        let pieces = split_long_line(&line);
        assert_eq!(pieces.concat(), line);
        assert!(pieces.iter().all(|p| p.chars().count() <= SPLIT_MAX));
    }

    #[test]
    fn short_arrays_inline_long_arrays_hashed() {
        let short = Array::U32(vec![1, 2, 3]);
        assert_eq!(inline_array(&short).as_deref(), Some("[1, 2, 3]"));
        let long = Array::String((0..1000).map(|i| format!("tok{i}")).collect());
        assert_eq!(inline_array(&long), None);
        let changed = Array::String(
            (0..1000)
                .map(|i| {
                    if i == 500 {
                        "other".to_owned()
                    } else {
                        format!("tok{i}")
                    }
                })
                .collect(),
        );
        let line = |a: &Array| {
            let mut out = String::new();
            render_metadata(&mut out, "tokenizer.ggml.tokens", &Value::Array(a.clone()));
            out
        };
        assert!(line(&long).starts_with("meta tokenizer.ggml.tokens: array[string; 1000] sha256:"));
        assert_ne!(line(&long), line(&changed));
    }

    #[test]
    fn multiline_strings_span_indented_lines() {
        let mut out = String::new();
        render_metadata(
            &mut out,
            "tokenizer.chat_template",
            &Value::String("line one\n\tline two\n".into()),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "meta tokenizer.chat_template: string, long text:");
        assert_eq!(lines[1..], ["    | line one", "    | \\tline two", "    |"]);
    }

    #[test]
    fn scalars_keep_their_type() {
        let mut out = String::new();
        render_metadata(&mut out, "a", &Value::U32(7));
        render_metadata(&mut out, "b", &Value::String("x \"y\"".into()));
        render_metadata(
            &mut out,
            "c",
            &Value::F32(crate::artifact::F32Bits(0.1f32.to_bits())),
        );
        assert_eq!(
            out,
            "meta a: u32 = 7\nmeta b: string = \"x \\\"y\\\"\"\nmeta c: f32 = 0.1\n"
        );
    }
}
