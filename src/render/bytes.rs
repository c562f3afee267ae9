//! How two models' bytes compare ([`crate::cmp`]), as one line of text and as a JSON object:
//! the same words in `diff`, `git diff`, git's external driver and `ci`.

use crate::cmp::{BytesOutcome, Difference, How, Place};
use crate::escape::shown;

/// Where the line is shown, for its hint at what reads further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hint {
    /// `weight-inspect diff`: `--values`.
    Diff,
    /// The git integrations and `ci`: `git diff --values` and `--tensor-hashes`.
    Git,
}

impl Hint {
    fn text(self) -> &'static str {
        match self {
            Hint::Diff => "`--values` compares the values",
            Hint::Git => {
                "`weight-inspect git diff --values` compares the values; `weight-inspect git \
                 install --tensor-hashes` names the changed tensors in `git log -p`"
            }
        }
    }
}

/// The bytes line(s), each ending in a newline; empty when the structure differs (the
/// structural diff says how) or when the bytes are identical and `identical_too` is false.
pub(crate) fn text(outcome: &BytesOutcome, hint: Hint, identical_too: bool) -> String {
    match outcome {
        BytesOutcome::StructureDiffers => String::new(),
        BytesOutcome::Identical { size } if identical_too => {
            format!("bytes: identical ({size} bytes)\n")
        }
        BytesOutcome::Identical { .. } => String::new(),
        BytesOutcome::NotCompared { why } => {
            format!(
                "bytes: not compared ({})\n",
                crate::escape::terminal_safe(why)
            )
        }
        BytesOutcome::Differ(difference) => differ_text(difference, hint),
    }
}

/// Offsets count from 0, as every error of the project does (cmp(1) counts bytes from 1).
fn differ_text(difference: &Difference, hint: Hint) -> String {
    let of_part = difference
        .part
        .as_deref()
        .map_or_else(String::new, |p| format!(" of {}", shown(p)));
    let hint = hint.text();
    match &difference.how {
        How::At {
            offset,
            place: Place::Tensor(name),
        } => format!(
            "tensor data differs: first in {} (offset {offset}{of_part}); {hint}\n",
            shown(name)
        ),
        How::At {
            offset,
            place: Place::Header,
        } => format!(
            "bytes differ in the header (offset {offset}{of_part}), in what the structural \
             identity leaves out (key order, spacing, padding)\n"
        ),
        How::At {
            offset,
            place: Place::OutsideTensors,
        } => format!("bytes differ at offset {offset}{of_part}, outside any tensor's data\n"),
        How::Sizes { old, new } => {
            format!("bytes differ: {old} -> {new} bytes{of_part}\n")
        }
        How::Digests {
            old,
            old_size,
            new,
            new_size,
        } => format!(
            "tensor data differs (the LFS objects are not here to name the first tensor that \
             differs); {hint}\n{}",
            digests_line((old, *old_size), (new, *new_size))
        ),
        How::Files => "bytes differ: the model is held by other files\n".to_owned(),
    }
}

/// `bytes: sha256:OLD, N bytes -> sha256:NEW, M bytes`: textconv's `bytes:` line of each side
/// (an LFS pointer's oid and size), for a weight-only change whose digests are known unread.
pub(crate) fn digests_line(old: (&str, u64), new: (&str, u64)) -> String {
    format!(
        "bytes: sha256:{}, {} bytes -> sha256:{}, {} bytes\n",
        old.0, old.1, new.0, new.1
    )
}

/// A few words for a table cell or a log line when the structure is equal and the bytes are
/// not ("tensor data differs", "bytes differ"); None otherwise.
pub(crate) fn short(outcome: &BytesOutcome) -> Option<&'static str> {
    match outcome {
        BytesOutcome::Differ(Difference {
            how:
                How::Digests { .. }
                | How::At {
                    place: Place::Tensor(_),
                    ..
                },
            ..
        }) => Some("tensor data differs"),
        BytesOutcome::Differ(_) => Some("bytes differ"),
        _ => None,
    }
}

/// The JSON object of the outcome: `{"compared": bool, "identical": bool|null, ...}`, keys
/// only added over time.
pub(crate) fn json(outcome: &BytesOutcome) -> serde_json::Value {
    use serde_json::json;
    match outcome {
        BytesOutcome::Identical { size } => {
            json!({ "compared": true, "identical": true, "size": size })
        }
        BytesOutcome::StructureDiffers => {
            json!({ "compared": false, "identical": false, "reason": "the structure differs" })
        }
        BytesOutcome::NotCompared { why } => {
            json!({ "compared": false, "identical": null, "reason": why })
        }
        BytesOutcome::Differ(d) => {
            let mut value = match &d.how {
                How::At { offset, place } => {
                    let (place, tensor) = match place {
                        Place::Header => ("header", None),
                        Place::Tensor(name) => ("tensor", Some(name.as_str())),
                        Place::OutsideTensors => ("outside-tensors", None),
                    };
                    json!({ "first_difference": offset, "in": place, "tensor": tensor })
                }
                How::Sizes { old, new } => json!({ "old_size": old, "new_size": new }),
                How::Digests {
                    old,
                    old_size,
                    new,
                    new_size,
                } => json!({
                    "old_sha256": old, "old_size": old_size,
                    "new_sha256": new, "new_size": new_size,
                }),
                How::Files => json!({ "files_differ": true }),
            };
            value["compared"] = json!(true);
            value["identical"] = json!(false);
            if let Some(part) = &d.part {
                value["part"] = json!(part);
            }
            value
        }
    }
}

/// A pretty-printed JSON object (a report ending in `}`) with `"bytes"` added as its last key,
/// so that `"schema": 1` stays first and existing keys keep their places.
pub(crate) fn with_bytes_key(document: &str, outcome: &BytesOutcome) -> String {
    let body = document.trim_end();
    let Some(open) = body.strip_suffix('}') else {
        return document.to_owned();
    };
    let value =
        serde_json::to_string_pretty(&json(outcome)).expect("JSON of plain data cannot fail");
    let indented = value.replace('\n', "\n  ");
    let open = open.trim_end();
    let comma = if open.ends_with('{') { "" } else { "," };
    format!("{open}{comma}\n  \"bytes\": {indented}\n}}\n")
}
