//! The reports of `delta create|store|apply|restore|verify`: what was written or checked,
//! with a lossy result called approximate wherever it is printed. (`delta inspect` is
//! [`super::report::DeltaFile`].)

use std::path::Path;

use serde_json::json;

use super::palette::Palette;
use super::report::Report;
use crate::escape::{shown, shown_path};

/// A tensor's loss: (name, rel_l2, share of the update lost).
pub(crate) type TensorLoss = (String, f64, f64);

/// What a lossy delta loses against the fine-tune, over the model and per tensor.
pub(crate) struct Loss<'a> {
    pub rel_l2: f64,
    pub update_lost: f64,
    /// The tensor that lost the largest share of its update.
    pub most_lost: Option<&'a TensorLoss>,
    /// The tensor farthest from the fine-tune (the largest rel_l2).
    pub farthest: Option<&'a TensorLoss>,
    /// Every tensor, in name order.
    pub tensors: &'a [TensorLoss],
}

/// How a model rebuilt through lossy links is described where it is written: approximate, and
/// by which strategies (`approximate, int4`; a lineage `approximate, int4 then sparse`).
pub(crate) fn approximate(strategies: &[&str]) -> String {
    format!("approximate, {}", strategies.join(" then "))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn ratio(of: u64, by: u64) -> f64 {
    if by > 0 { of as f64 / by as f64 } else { 0.0 }
}

/// `create`'s and `store`'s report: the delta written.
pub(crate) struct DeltaCreated<'a> {
    pub out: &'a Path,
    pub written: Written<'a>,
}

/// A delta written, by strategy.
pub(crate) enum Written<'a> {
    Lossless {
        parent_hash: &'a str,
        files: usize,
        tensors: usize,
        unchanged: usize,
        changed: usize,
        whole: usize,
        file_bytes: u64,
        model_bytes: u64,
    },
    Lossy {
        strategy: &'a str,
        parent_hash: &'a str,
        tensors: usize,
        file_bytes: u64,
        dense_bytes: u64,
        /// Measured against plain weights (a chain's loss is not).
        loss: Option<Loss<'a>>,
        /// Written by `store`, which says what `restore` will give back.
        stored: bool,
    },
}

impl Report for DeltaCreated<'_> {
    fn text(&self, _: &Palette) -> String {
        let out = shown_path(self.out);
        match &self.written {
            Written::Lossless {
                parent_hash,
                files,
                tensors,
                unchanged,
                changed,
                whole,
                file_bytes,
                model_bytes,
            } => format!(
                "wrote {out}: {}, {tensors} tensors ({unchanged} unchanged, {changed} changed, \
                 {whole} stored whole), {file_bytes} bytes ({:.2}x smaller than the fine-tuned \
                 files)\nstrategy: lossless (rebuilds the fine-tuned files byte for byte)\n\
                 parent hash: {parent_hash}\n",
                plural(*files, "file", "files"),
                ratio(*model_bytes, *file_bytes),
            ),
            Written::Lossy {
                strategy,
                parent_hash,
                tensors,
                file_bytes,
                dense_bytes,
                loss,
                stored,
            } => {
                let mut s = format!(
                    "wrote {out}: {}, {tensors} tensors, {file_bytes} bytes ({:.2}x smaller than \
                     the fine-tuned weights)\nparent hash: {parent_hash}\n",
                    approximate(&[strategy]),
                    ratio(*dense_bytes, *file_bytes),
                );
                if let Some(loss) = loss {
                    s.push_str(&loss_text(loss));
                }
                if *stored {
                    s.push_str(&format!(
                        "strategy: {strategy} (lossy, chosen with --strategy: `delta restore` \
                         gives back an approximation of the stored model, not its bytes)\n"
                    ));
                }
                s
            }
        }
    }

    fn json(&self) -> String {
        let v = match &self.written {
            Written::Lossless {
                parent_hash,
                files,
                tensors,
                unchanged,
                changed,
                whole,
                file_bytes,
                model_bytes,
            } => json!({
                "schema": 1, "output": self.out.to_string_lossy(), "strategy": "lossless",
                "exact": true, "parent_hash": parent_hash, "files": files, "tensors": tensors,
                "unchanged": unchanged, "changed": changed, "whole": whole,
                "file_bytes": file_bytes, "model_bytes": model_bytes,
            }),
            Written::Lossy {
                strategy,
                parent_hash,
                tensors,
                file_bytes,
                dense_bytes,
                loss,
                ..
            } => json!({
                "schema": 1, "output": self.out.to_string_lossy(), "strategy": strategy,
                "exact": false, "parent_hash": parent_hash, "tensors": tensors,
                "file_bytes": file_bytes, "dense_bytes": dense_bytes,
                "loss": loss.as_ref().map(loss_json),
            }),
        };
        format!("{v}\n")
    }
}

/// What a lossy delta loses against the fine-tune, as `create`, `store` and `verify --against`
/// print it.
fn loss_text(loss: &Loss<'_>) -> String {
    let mut s = format!(
        "lossy: rebuilt vs fine-tune rel_l2 {:.6}, update lost {:.4} (‖rebuilt − ft‖ / ‖ft − base‖) \
         over the model\n",
        loss.rel_l2, loss.update_lost
    );
    // Two tensors, which may differ: a small update can be lost whole by a tensor that stays
    // close to the fine-tune, while another with a large update is far from it.
    if let Some((name, rel, lost)) = loss.most_lost {
        s.push_str(&format!(
            "most update lost: {} rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    if let Some((name, rel, lost)) = loss.farthest {
        s.push_str(&format!(
            "largest rel_l2: {} rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    s
}

fn loss_json(loss: &Loss<'_>) -> serde_json::Value {
    let finite = |v: f64| v.is_finite().then_some(v);
    json!({
        "rel_l2": finite(loss.rel_l2),
        "update_lost": finite(loss.update_lost),
        "tensors": loss.tensors.iter().map(|(name, rel, lost)| json!({
            "name": name, "rel_l2": finite(*rel), "update_lost": finite(*lost),
        })).collect::<Vec<_>>(),
    })
}

/// `verify --against`'s line per tensor; the tensors that lost nothing (rel_l2 and update
/// lost both 0) are counted in one line unless `all`.
fn tensor_losses(loss: &Loss<'_>, all: bool) -> String {
    let mut s = String::new();
    let mut exact = 0usize;
    for (name, rel, lost) in loss.tensors {
        if !all && *rel == 0.0 && *lost == 0.0 {
            exact += 1;
            continue;
        }
        s.push_str(&format!(
            "tensor {}: rel_l2 {rel:.6}, update lost {lost:.4}\n",
            shown(name)
        ));
    }
    if exact > 0 {
        s.push_str(&format!(
            "{} lost nothing (rel_l2 0, update lost 0; --all lists them)\n",
            plural(exact, "other tensor", "other tensors")
        ));
    }
    s
}

/// What `apply` (`restore`, with `lineage`) rebuilt.
pub(crate) struct DeltaApplied<'a> {
    pub out: &'a Path,
    pub files: usize,
    pub bytes: u64,
    /// Tensors written, when the last link is lossy.
    pub tensors: Option<usize>,
    /// The hash of the model the last run of lossy links applied to.
    pub base_hash: Option<&'a str>,
    /// `["lossless"]` when the last link is lossless (the result is the bytes it was made
    /// from), else the lossy strategies of the last links, which make the result approximate.
    pub strategies: &'a [&'a str],
    /// Links applied.
    pub links: usize,
    /// `restore`: the models of the lineage as found, root first.
    pub lineage: Option<&'a [String]>,
}

impl DeltaApplied<'_> {
    fn exact(&self) -> bool {
        self.strategies == ["lossless"]
    }

    fn apply_text(&self, out: &str) -> String {
        let n = self.links;
        match (self.exact(), self.tensors, self.base_hash) {
            (true, _, _) => format!(
                "wrote {out}: {}, {} bytes, identical to the fine-tuned model (lossless; {})\n",
                plural(self.files, "file", "files"),
                self.bytes,
                if n == 1 {
                    "base hash and every file's SHA-256 verified".to_string()
                } else {
                    format!("{n} deltas, every parent hash and file's SHA-256 verified")
                }
            ),
            (false, Some(tensors), Some(base_hash)) => format!(
                "wrote {out}: {}, {tensors} tensors, {} bytes (base hash {base_hash}, {} \
                 verified)\n",
                approximate(self.strategies),
                self.bytes,
                plural(n, "delta", "deltas")
            ),
            _ => format!(
                "wrote {out}: {}, {} bytes ({} verified)\n",
                approximate(self.strategies),
                self.bytes,
                plural(n, "delta", "deltas")
            ),
        }
    }

    fn restore_text(&self, out: &str, lineage: &[String]) -> String {
        let chain: Vec<_> = lineage.iter().map(|l| shown(l)).collect();
        let head = if self.exact() {
            format!(
                "wrote {out}: {} bytes, identical to the stored model (lossless)",
                self.bytes
            )
        } else {
            let tensors = self
                .tensors
                .map(|t| format!("{t} tensors, "))
                .unwrap_or_default();
            format!(
                "wrote {out}: {}, {tensors}{} bytes",
                approximate(self.strategies),
                self.bytes
            )
        };
        format!("{head}\nlineage: {}\n", chain.join(" -> "))
    }
}

impl Report for DeltaApplied<'_> {
    fn text(&self, _: &Palette) -> String {
        let out = shown_path(self.out).to_string();
        match self.lineage {
            Some(lineage) => self.restore_text(&out, lineage),
            None => self.apply_text(&out),
        }
    }

    fn json(&self) -> String {
        let v = json!({
            "schema": 1, "output": self.out.to_string_lossy(), "exact": self.exact(),
            "strategies": self.strategies, "links": self.links, "files": self.files, "bytes": self.bytes,
            "tensors": self.tensors, "base_hash": self.base_hash, "lineage": self.lineage,
        });
        format!("{v}\n")
    }
}

/// `verify`: the base's hash and every link found to apply.
pub(crate) struct DeltaVerified<'a> {
    /// The base as the user named it.
    pub base: &'a str,
    pub base_hash: &'a str,
    /// Each link and, for a lossy one, the hash it names (a lossless one's checksum verified).
    pub links: Vec<(&'a Path, Option<&'a str>)>,
    /// `--against`: what the single lossy delta loses.
    pub loss: Option<Loss<'a>>,
    /// `--all`: every tensor's loss.
    pub all: bool,
}

impl Report for DeltaVerified<'_> {
    fn text(&self, _: &Palette) -> String {
        let mut s = format!(
            "ok: base {} has hash {}\n",
            shown(self.base),
            self.base_hash
        );
        for (path, parent) in &self.links {
            match parent {
                Some(hash) => s.push_str(&format!(
                    "ok: {} applies (parent hash {hash})\n",
                    shown_path(path)
                )),
                None => s.push_str(&format!(
                    "ok: {} applies (lossless, checksum verified)\n",
                    shown_path(path)
                )),
            }
        }
        if let Some(loss) = &self.loss {
            s.push_str(&loss_text(loss));
            s.push_str(&tensor_losses(loss, self.all));
        }
        s
    }

    fn json(&self) -> String {
        let v = json!({
            "schema": 1, "ok": true, "base": self.base, "base_hash": self.base_hash,
            "links": self.links.iter().map(|(path, parent)| json!({
                "path": path.to_string_lossy(), "lossless": parent.is_none(),
                "parent_hash": parent,
            })).collect::<Vec<_>>(),
            "loss": self.loss.as_ref().map(loss_json),
        });
        format!("{v}\n")
    }
}
