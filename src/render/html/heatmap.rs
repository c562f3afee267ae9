//! The per-layer heatmap: one row per layer (as the per-layer text view finds them: `blk.N`,
//! `model.layers.N`, ...) and one for the tensors outside any layer, one column per kind of
//! tensor (attention Q/K/V/output, MLP gate/up/down, norms, embeddings, output, other), each
//! cell coloured by its tensor's rel_l2 on a log scale. A cell holding several tensors (two
//! norms of one layer in a naming that has one column for both, experts) shows the largest.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::entry::{Entry, State};
use crate::escape::html_text;
use crate::render::values::{SCALE_HIGH, SCALE_LOW, figure};

/// Kinds of tensors, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Embed,
    AttnNorm,
    Q,
    K,
    V,
    Qkv,
    AttnOut,
    FfnNorm,
    Gate,
    Up,
    Down,
    Output,
    Other,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Embed => "embed",
            Kind::AttnNorm => "attn norm",
            Kind::Q => "attn q",
            Kind::K => "attn k",
            Kind::V => "attn v",
            Kind::Qkv => "attn qkv",
            Kind::AttnOut => "attn out",
            Kind::FfnNorm => "mlp norm",
            Kind::Gate => "mlp gate",
            Kind::Up => "mlp up",
            Kind::Down => "mlp down",
            Kind::Output => "output",
            Kind::Other => "other",
        }
    }
}

/// The kind of a tensor by the words of its name, in the naming conventions of GGUF
/// (`attn_q`, `ffn_up`), Hugging Face (`q_proj`, `up_proj`, `input_layernorm`), GPT-2
/// (`c_attn`, `c_fc`, `ln_1`) and Meta (`wq`, `w1`).
pub(crate) fn kind_of(name: &str) -> Kind {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    let any = |ws: &[&str]| ws.iter().any(|w| has(w));
    if lower.contains("norm") || any(&["ln", "ln1", "ln2", "ln_f"]) {
        let mlp_side = lower.contains("post_attention")
            || any(&["ffn", "mlp", "ln2", "post"])
            || lower.contains("ln_2");
        let outside_layers = crate::values::layer_of(name).is_none();
        return if outside_layers {
            Kind::Other
        } else if mlp_side {
            Kind::FfnNorm
        } else {
            Kind::AttnNorm
        };
    }
    if any(&["embd", "embed", "embeddings", "wte", "wpe", "tok"]) || lower.contains("embed") {
        return Kind::Embed;
    }
    if any(&["qkv", "wqkv"]) || lower.contains("query_key_value") || lower.contains("c_attn") {
        return Kind::Qkv;
    }
    if any(&["q", "wq", "query"]) {
        return Kind::Q;
    }
    if any(&["k", "wk", "key"]) {
        return Kind::K;
    }
    if any(&["v", "wv", "value"]) {
        return Kind::V;
    }
    let attention = any(&["attn", "attention", "self"]);
    if any(&["o", "wo", "out"]) || (attention && any(&["output", "proj", "dense"])) {
        return Kind::AttnOut;
    }
    if any(&["gate", "w1"]) {
        return Kind::Gate;
    }
    if any(&["up", "w3", "fc1", "fc", "dense_h_to_4h"]) {
        return Kind::Up;
    }
    if any(&["down", "w2", "fc2", "dense_4h_to_h"]) || (any(&["mlp"]) && has("proj")) {
        return Kind::Down;
    }
    if crate::values::layer_of(name).is_none() && any(&["output", "lm_head", "head"]) {
        return Kind::Output;
    }
    Kind::Other
}

/// A row: a layer (stem and number), or the tensors outside the layers (None, shown first).
type Row = Option<(String, u64)>;

/// The log scale of the colours: rel_l2 from `lo` (palest) to `hi` (darkest).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    lo: f64,
    hi: f64,
}

impl Scale {
    /// The one fixed scale of every report (the text view's bars use it too), so that two
    /// reports compare by colour; None when no tensor has a finite, nonzero rel_l2.
    pub(crate) fn of(entries: &[Entry]) -> Option<Scale> {
        Scale::when(entries.iter().any(Scale::has_figure))
    }

    /// Whether `entry` has a figure to place on a scale (a changed rel_l2 above 0).
    pub(crate) fn has_figure(entry: &Entry) -> bool {
        match entry.state {
            State::Changed | State::Suspect => entry.rel_l2().is_some_and(|r| r > 0.0),
            _ => false,
        }
    }

    /// The scale, when some entry has a figure.
    pub(crate) fn when(has_figure: bool) -> Option<Scale> {
        has_figure.then_some(Scale {
            lo: SCALE_LOW,
            hi: SCALE_HIGH,
        })
    }

    /// Where `r` lies on the scale, 0 (lo or below) to 1 (hi).
    fn position(&self, r: f64) -> f64 {
        if r <= 0.0 {
            return 0.0;
        }
        ((r.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())).clamp(0.0, 1.0)
    }
}

/// The colour ramp, palest (smallest rel_l2) to darkest (a sequential yellow-orange-red).
const RAMP: [(u8, u8, u8); 7] = [
    (255, 245, 178),
    (254, 217, 118),
    (254, 178, 76),
    (253, 141, 60),
    (240, 59, 32),
    (189, 0, 38),
    (110, 0, 40),
];

fn colour(t: f64) -> String {
    let x = t.clamp(0.0, 1.0) * (RAMP.len() - 1) as f64;
    let i = (x.floor() as usize).min(RAMP.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// The colour of a rel_l2 on `scale`, as the heatmap paints it.
pub(crate) fn colour_of(r: f64, scale: Scale) -> String {
    colour(scale.position(r))
}

/// Text colour readable on the ramp at `t`.
fn ink(t: f64) -> &'static str {
    if t > 0.62 { "#ffffff" } else { "#1f2328" }
}

/// The heatmap of `entries` with its legend and the box that shows a clicked cell's figures;
/// `id` makes the box's id unique in the page. Empty when no entry is in a layer (a model
/// without numbered layers has no per-layer view).
pub(crate) fn render(entries: &[Entry], id: &str) -> String {
    let mut grid: BTreeMap<Row, BTreeMap<Kind, Vec<&Entry>>> = BTreeMap::new();
    for e in entries {
        let row = crate::values::layer_of(&e.key).map(|(stem, n)| (stem.to_owned(), n));
        grid.entry(row)
            .or_default()
            .entry(kind_of(&e.key))
            .or_default()
            .push(e);
    }
    if grid.keys().all(Option::is_none) {
        return String::new();
    }
    let mut kinds: Vec<Kind> = grid.values().flat_map(|row| row.keys().copied()).collect();
    kinds.sort();
    kinds.dedup();
    let scale = Scale::of(entries);

    let info = format!("{id}-info");
    let mut out = String::new();
    out.push_str("<div class=\"heatwrap\">\n");
    let _ = write!(
        out,
        "<table class=\"heat\" data-info=\"{info}\">\n<thead><tr><th></th>"
    );
    for k in &kinds {
        let _ = write!(out, "<th><span>{}</span></th>", k.label());
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (row, cells) in &grid {
        let label = match row {
            Some((stem, n)) => format!("{stem}.{n}"),
            None => "(no layer)".to_owned(),
        };
        let _ = write!(out, "<tr><th>{}</th>", crate::escape::html_name(&label));
        for k in &kinds {
            match cells.get(k) {
                None => out.push_str("<td class=\"none\"></td>"),
                Some(group) => cell(&mut out, group, scale, &label, *k),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    let _ = writeln!(
        out,
        "<div class=\"heatside\"><div class=\"legend\">{}</div>\n<p class=\"dim\">Hover a cell for its tensors' \
         figures; click to keep them here:</p>\n<div class=\"info mono\" id=\"{info}\">(no cell \
         selected)</div></div>",
        legend(scale, entries)
    );
    out.push_str("</div>\n");
    out
}

/// One cell: coloured by its worst tensor, titled with every tensor's figures.
fn cell(out: &mut String, group: &[&Entry], scale: Option<Scale>, row: &str, kind: Kind) {
    let mut title = format!("{row} · {}", kind.label());
    for e in group {
        title.push_str("\n\n");
        title.push_str(&e.figures_text());
    }
    let worst = group
        .iter()
        .max_by(|a, b| a.severity().total_cmp(&b.severity()))
        .expect("a cell holds a tensor");
    let not_compared = group
        .iter()
        .filter(|e| matches!(e.state, State::NotCompared(_)))
        .count();
    let (class, style, text) = match worst.state {
        State::NotCompared(_) => ("nc".to_owned(), String::new(), "n/c".to_owned()),
        State::Unchanged | State::BytesSame => ("same".into(), String::new(), "=".into()),
        State::BytesChanged => ("bytes".into(), String::new(), "b".into()),
        State::Changed | State::Suspect => match (worst.rel_l2(), scale) {
            (None, _) => ("inf".into(), String::new(), "∞".into()),
            (Some(r), Some(scale)) => {
                let t = scale.position(r);
                let mark = if worst.state == State::Suspect {
                    "!"
                } else {
                    ""
                };
                (
                    "fig".into(),
                    format!(" style=\"background:{};color:{}\"", colour(t), ink(t)),
                    mark.into(),
                )
            }
            (Some(_), None) => ("same".into(), String::new(), "=".into()),
        },
    };
    let class = if not_compared > 0 && not_compared < group.len() {
        format!("{class} mixed")
    } else {
        class
    };
    let _ = write!(
        out,
        "<td class=\"{class}\" data-cell=\"{}\" data-n=\"{}\" title=\"{}\"{style}>{text}</td>",
        kind.label(),
        group.len(),
        html_text(&title)
    );
}

/// Room left and right of the legend's ramp for the labels of its ends.
const LEFT: f64 = 24.0;

/// A tick's label: a power of ten below 0.001 as `1e-5`, other figures as the text shows them.
fn tick_label(r: f64) -> String {
    let p = r.log10().round();
    if r < 1e-3 && (r.log10() - p).abs() < 1e-9 {
        format!("1e{p}")
    } else {
        figure(r)
    }
}

/// `x` to two significant digits, for a label.
fn round_2(x: f64) -> f64 {
    let unit = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / unit).round() * unit
}

/// The colour ramp with its decades, and the marks of the other cells that `entries` have.
fn legend(scale: Option<Scale>, entries: &[Entry]) -> String {
    let mut out = String::new();
    if let Some(scale) = scale {
        let (w, h) = (260.0, 14.0);
        let _ = write!(
            out,
            "<div>rel_l2 ‖b − a‖ / ‖a‖ on a fixed log scale, the same in every report: \
             {} or less palest, {} or more darkest</div>\n<svg width=\"{}\" height=\"34\" \
             viewBox=\"0 0 {} 34\" role=\"img\" aria-label=\"colour scale\"><defs>\
             <linearGradient id=\"ramp\">",
            tick_label(scale.lo),
            tick_label(scale.hi),
            w + 2.0 * LEFT,
            w + 2.0 * LEFT
        );
        for (i, _) in RAMP.iter().enumerate() {
            let t = i as f64 / (RAMP.len() - 1) as f64;
            let _ = write!(
                out,
                "<stop offset=\"{:.3}\" stop-color=\"{}\"/>",
                t,
                colour(t)
            );
        }
        let _ = write!(
            out,
            "</linearGradient></defs><rect x=\"{LEFT}\" y=\"0\" width=\"{w}\" height=\"{h}\" \
             fill=\"url(#ramp)\" rx=\"2\"/>"
        );
        // A tick at each power of ten inside the scale; the ends too when there are few.
        let mut ticks = Vec::new();
        let mut p = scale.lo.log10().ceil() as i32;
        while 10f64.powi(p) <= scale.hi * (1.0 + 1e-9) {
            ticks.push(10f64.powi(p));
            p += 1;
        }
        if ticks.len() < 2 {
            for end in [scale.lo, scale.hi] {
                if ticks.iter().all(|t| (t.log10() - end.log10()).abs() > 0.4) {
                    ticks.push(round_2(end));
                }
            }
        }
        ticks.sort_by(f64::total_cmp);
        for r in ticks {
            let x = LEFT + scale.position(r) * w;
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{h}\" y2=\"19\" stroke=\"#59636e\"/>\
                 <text x=\"{x:.1}\" y=\"31\" font-size=\"10\" text-anchor=\"middle\" \
                 fill=\"#59636e\">{}</text>",
                tick_label(r)
            );
        }
        out.push_str("</svg>\n");
    } else {
        out.push_str("<div>no tensor's values changed</div>\n");
    }
    let has = |f: fn(&Entry) -> bool| entries.iter().any(f);
    let marks = [
        (
            has(|e| matches!(e.state, State::Unchanged | State::BytesSame)),
            "background:#e6f2e8",
            "= identical",
        ),
        (
            has(|e| e.changed() && e.state != State::BytesChanged && e.rel_l2().is_none()),
            "background:#3b0a45",
            "∞ changed from all zeros",
        ),
        (
            has(|e| e.state == State::BytesChanged),
            "background:#8c959f",
            "b bytes changed (not decoded: no figures)",
        ),
        (
            has(|e| matches!(e.state, State::NotCompared(_))),
            "background:repeating-linear-gradient(45deg,#d8dee4 0 3px,#fff 3px 6px)",
            "n/c not compared",
        ),
        (
            has(|e| e.state == State::Suspect),
            "background:#f03b20",
            "! suspect pair",
        ),
    ];
    out.push_str("<div>");
    for (present, style, text) in marks {
        if present {
            let _ = write!(
                out,
                "<span class=\"mark\"><span class=\"sw\" style=\"{style}\"></span>{text}</span>"
            );
        }
    }
    out.push_str("</div>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_common_namings() {
        let cases = [
            ("blk.3.attn_q.weight", Kind::Q),
            ("blk.3.attn_k.weight", Kind::K),
            ("blk.3.attn_v.weight", Kind::V),
            ("blk.3.attn_output.weight", Kind::AttnOut),
            ("blk.3.attn_qkv.weight", Kind::Qkv),
            ("blk.3.ffn_gate.weight", Kind::Gate),
            ("blk.3.ffn_up_exps.weight", Kind::Up),
            ("blk.3.ffn_down.weight", Kind::Down),
            ("blk.3.attn_norm.weight", Kind::AttnNorm),
            ("blk.3.ffn_norm.weight", Kind::FfnNorm),
            ("token_embd.weight", Kind::Embed),
            ("output.weight", Kind::Output),
            ("output_norm.weight", Kind::Other),
            ("model.layers.0.self_attn.q_proj.weight", Kind::Q),
            ("model.layers.0.self_attn.o_proj.weight", Kind::AttnOut),
            ("model.layers.0.mlp.gate_proj.weight", Kind::Gate),
            ("model.layers.0.mlp.down_proj.weight", Kind::Down),
            ("model.layers.0.input_layernorm.weight", Kind::AttnNorm),
            (
                "model.layers.0.post_attention_layernorm.weight",
                Kind::FfnNorm,
            ),
            ("model.embed_tokens.weight", Kind::Embed),
            ("lm_head.weight", Kind::Output),
            ("transformer.h.1.attn.c_attn.weight", Kind::Qkv),
            ("transformer.h.1.ln_2.weight", Kind::FfnNorm),
            ("transformer.h.1.attn.c_proj.weight", Kind::AttnOut),
            ("transformer.h.1.mlp.c_proj.weight", Kind::Down),
            ("layers.2.attention.wk.weight", Kind::K),
            ("layers.2.feed_forward.w2.weight", Kind::Down),
            ("blk.3.weight", Kind::Other),
        ];
        for (name, kind) in cases {
            assert_eq!(kind_of(name), kind, "{name}");
        }
    }

    #[test]
    fn ticks_read_as_figures() {
        assert_eq!(tick_label(1e-4), "1e-4");
        assert_eq!(tick_label(0.01), "0.01");
        assert_eq!(tick_label(3.6e-5), "3.60e-5");
        assert!((round_2(0.003557) - 0.0036).abs() < 1e-15);
    }

    #[test]
    fn the_ramp_runs_from_pale_to_dark() {
        assert_eq!(colour(0.0), "#fff5b2");
        assert_eq!(colour(1.0), "#6e0028");
        let s = Scale { lo: 1e-4, hi: 1e-1 };
        assert!((s.position(1e-2) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.position(1e-9), 0.0);
    }
}
