//! Which tensors of a converted model come from which tensors of its source, and how: the
//! plan the value comparison follows. Mirrors what llama.cpp's `convert_hf_to_gguf.py` does
//! (name table, Q/K permutation, fused QKV, stacked and fused experts, cut position rows);
//! rename rules from `--map` come first.

use std::collections::BTreeMap;

use super::error::{MAX_BLOCKS, PairingError};
use super::layout::{Part, RowMap, permutable};
use super::map_file::MapFile;
use super::names::NameMap;
use super::transforms::{self, ArchTransforms, Split};
use crate::artifact::{Artifact, Format, TensorInfo, Value};

/// What the comparison undoes for a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transform {
    /// The tensor as is (its dtype, and for GGUF the order of its dimensions, may change).
    Identity,
    /// The converter's Q/K head permutation.
    PermuteQk,
    /// Q, K and V concatenated by rows (`--fuse-qkv`), Q and K permuted first or not.
    FuseQkv { permuted: bool },
    /// Per-expert tensors stacked into one [experts, rows, cols] tensor.
    StackExperts,
    /// Per-expert gate and up tensors stacked and concatenated into one gate_up tensor.
    FuseGateUpExperts,
    /// The converter cut the first rows (RoBERTa's position embeddings start after padding).
    DropRows(u64),
    /// A `--map` rule's transpose.
    Transpose,
    /// A Conv1D weight ([in, out]) the converter transposes (GPT-2).
    TransposeConv1d,
    /// One slice of every group (head or expert) of one source tensor the converter cut into
    /// several (DeepSeek's kv_b_proj into k_b and v_b, GraniteMoE's input_linear into gate and
    /// up experts), transposed within each group or not.
    Split { transposed: bool },
    /// The converter added 1 (Gemma's norm weights: the model computes `x * (1 + w)`).
    PlusOne,
    /// A fused QKV whose per-head (or per-group) q, k, v rows the converter regrouped into all
    /// q, then all k, then all v (Bloom, GPT-NeoX, Falcon).
    RegroupQkv,
}

impl Transform {
    pub(crate) fn name(&self) -> String {
        match self {
            Transform::Identity => "identity".into(),
            Transform::PermuteQk => "permute_qk".into(),
            Transform::FuseQkv { permuted: false } => "fuse_qkv".into(),
            Transform::FuseQkv { permuted: true } => "fuse_qkv+permute_qk".into(),
            Transform::StackExperts => "stack_experts".into(),
            Transform::FuseGateUpExperts => "stack_experts+fuse_gate_up".into(),
            Transform::DropRows(n) => format!("drop_rows:{n}"),
            Transform::Transpose => "transpose".into(),
            Transform::TransposeConv1d => "transpose_conv1d".into(),
            Transform::Split { transposed: false } => "split".into(),
            Transform::Split { transposed: true } => "split+transpose".into(),
            Transform::PlusOne => "plus_one".into(),
            Transform::RegroupQkv => "regroup_qkv".into(),
        }
    }
}

/// A pair to compare: one tensor of the converted model and the source tensors it holds.
#[derive(Debug, Clone)]
pub(super) struct PlannedPair {
    pub target: String,
    pub sources: Vec<String>,
    pub transform: Transform,
    pub rows: RowMap,
    /// The GGUF head counts a Q or K tensor would be permuted with: the comparison tries the
    /// other layout when the values do not match, to name a wrong permutation.
    pub heads: Option<u64>,
    /// Added to every source value (rounded to the source's dtype) before comparing: the
    /// converter's +1 on norm weights.
    pub plus: f64,
}

/// A source tensor with no counterpart in the converted model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub source: String,
    pub why: String,
}

/// Tensors paired but not compared, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotCompared {
    pub target: Option<String>,
    pub sources: Vec<String>,
    pub why: String,
}

/// How the two models were paired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PairedBy {
    /// gguf-py's name table for this architecture and block count.
    Table { architecture: String, blocks: u64 },
    /// Equal names (both models use the same convention).
    Names,
}

#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub paired_by: PairedBy,
    /// The `--map` file, when one was given.
    pub map: Option<std::path::PathBuf>,
    pub pairs: Vec<PlannedPair>,
    pub dropped: Vec<Dropped>,
    /// Target tensors no source tensor maps to.
    pub added: Vec<String>,
    pub not_compared: Vec<NotCompared>,
    /// The GGUF's Q and KV head counts.
    pub head_counts: Option<(u64, u64)>,
    /// The converter function the architecture's transforms mirror (none: renames only).
    pub cite: Option<&'static str>,
}

/// The logical shape of a tensor, outermost dimension first (GGUF stores ne[0] first).
pub(super) fn logical_shape(artifact: &Artifact, info: &TensorInfo) -> Vec<u64> {
    let mut shape: Vec<u64> = info.shape.to_vec();
    if artifact.format == Format::Gguf {
        shape.reverse();
    }
    shape
}

/// A GGUF integer metadata value.
pub(super) fn metadata_u64(artifact: &Artifact, key: &str) -> Option<u64> {
    match artifact.metadata.get(key)? {
        Value::U8(v) => Some(u64::from(*v)),
        Value::U16(v) => Some(u64::from(*v)),
        Value::U32(v) => Some(u64::from(*v)),
        Value::U64(v) => Some(*v),
        Value::I8(v) => u64::try_from(*v).ok(),
        Value::I16(v) => u64::try_from(*v).ok(),
        Value::I32(v) => u64::try_from(*v).ok(),
        Value::I64(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

fn describe(value: Option<&Value>) -> String {
    match value {
        None => "missing".into(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(v) => format!("a {}", v.type_name()),
    }
}

/// Plans the comparison of `source` (a Hugging Face or PyTorch model) with `target` (what was
/// made of it). With a GGUF target the converter's name table pairs the tensors, else equal
/// names do; `map` rules come before either.
pub(super) fn plan(
    source: &Artifact,
    target: &Artifact,
    target_file: &str,
    map: Option<&MapFile>,
) -> Result<Plan, PairingError> {
    let table = name_table(source, target, target_file)?;
    let mut planner = Planner::new(source, target, map, table.as_ref());
    let names = table.as_ref().map(|t| &t.names);
    for name in source.tensors.keys() {
        planner.route(name, map, names);
    }
    if names.is_some() {
        planner.split_pairs();
        planner.fuse_qkv();
        planner.stack_experts();
    }
    planner.single_pairs();
    Ok(planner.finish())
}

/// The converter's name table of a GGUF target made from another format.
struct NameTable {
    architecture: String,
    blocks: u64,
    names: NameMap,
}

/// The name table of `target`'s architecture and block count, when the target is a GGUF made
/// from another format (None otherwise, or for an architecture the table does not have).
fn name_table(
    source: &Artifact,
    target: &Artifact,
    target_file: &str,
) -> Result<Option<NameTable>, PairingError> {
    if target.format != Format::Gguf || source.format == Format::Gguf {
        return Ok(None);
    }
    let architecture = match target.metadata.get("general.architecture") {
        Some(Value::String(s)) => s.clone(),
        other => {
            return Err(PairingError::NoArchitecture {
                file: target_file.to_owned(),
                found: describe(other),
            });
        }
    };
    let key = format!("{architecture}.block_count");
    let blocks = match metadata_u64(target, &key) {
        Some(n) if (1..=MAX_BLOCKS).contains(&n) => n,
        _ => {
            return Err(PairingError::BlockCount {
                file: target_file.to_owned(),
                found: describe(target.metadata.get(&key)),
                key,
            });
        }
    };
    Ok(NameMap::new(&architecture, blocks).map(|names| NameTable {
        architecture,
        blocks,
        names,
    }))
}

impl<'a> Planner<'a> {
    /// An empty plan; with a name table, the architecture's transforms and head counts.
    fn new(
        source: &'a Artifact,
        target: &'a Artifact,
        map: Option<&MapFile>,
        table: Option<&NameTable>,
    ) -> Self {
        let mut planner = Planner {
            source,
            target,
            groups: BTreeMap::new(),
            experts: BTreeMap::new(),
            splits: Vec::new(),
            plan: Plan {
                paired_by: match table {
                    Some(t) => PairedBy::Table {
                        architecture: t.architecture.clone(),
                        blocks: t.blocks,
                    },
                    None => PairedBy::Names,
                },
                map: map.map(|m| m.path.clone()),
                pairs: Vec::new(),
                dropped: Vec::new(),
                added: Vec::new(),
                not_compared: Vec::new(),
                head_counts: None,
                cite: None,
            },
            heads: None,
            head_counts: None,
            arch: transforms::of(""),
        };
        if let Some(t) = table {
            let arch = &t.architecture;
            let q = metadata_u64(target, &format!("{arch}.attention.head_count"));
            let kv = metadata_u64(target, &format!("{arch}.attention.head_count_kv")).or(q);
            planner.arch = transforms::of(arch);
            planner.head_counts = q.zip(kv);
            if planner.arch.permute_qk {
                planner.heads = planner.head_counts;
            }
            planner.plan.head_counts = planner.head_counts;
            planner.plan.cite = Some(planner.arch.cite).filter(|c| !c.is_empty());
        }
        planner
    }

    /// Sends source tensor `name` where it goes: a `--map` rule's target, the same name (no
    /// table), an expert stack, the table's name, or the dropped list.
    fn route(&mut self, name: &str, map: Option<&MapFile>, names: Option<&NameMap>) {
        if let Some(map) = map
            && let Some(renamed) = map.rename(name)
        {
            let rule = Rule {
                transpose: renamed.rule.transpose,
                heads: renamed.rule.permute_heads,
            };
            self.add(renamed.target, None, name, Some(rule));
            return;
        }
        let Some(names) = names else {
            self.add(name.to_owned(), None, name, None);
            return;
        };
        if let Some(split) = self.arch.splits.iter().find(|s| name.ends_with(s.suffix))
            && let Some(bid) = block_of(name)
        {
            self.splits.push((name.to_owned(), *split, bid));
            return;
        }
        if let Some((stacked, expert)) = expert_of(name)
            && let Some(mapped) = names.get(&stacked)
        {
            self.experts
                .entry(mapped.gguf)
                .or_default()
                .push((expert, name.to_owned()));
            return;
        }
        let mapped = names.get(name).or_else(|| {
            let stripped = self
                .arch
                .dropped_prefixes
                .iter()
                .find_map(|p| name.strip_prefix(p))?;
            names.get(stripped)
        });
        match mapped {
            Some(mapped) => self.add(mapped.gguf, Some(mapped.kind), name, None),
            None => self.plan.dropped.push(Dropped {
                source: name.to_owned(),
                why: transforms::dropped_on_purpose(name)
                    .unwrap_or("no GGUF name in the converter's table")
                    .into(),
            }),
        }
    }

    /// The plan, with the target tensors nothing was paired with, each list sorted.
    fn finish(self) -> Plan {
        let used: std::collections::HashSet<&str> = self
            .plan
            .pairs
            .iter()
            .map(|p| p.target.as_str())
            .chain(
                self.plan
                    .not_compared
                    .iter()
                    .filter_map(|n| n.target.as_deref()),
            )
            .collect();
        let added: Vec<String> = self
            .target
            .tensors
            .keys()
            .filter(|t| !used.contains(t))
            .map(str::to_owned)
            .collect();
        let mut plan = self.plan;
        plan.added = added;
        plan.pairs.sort_by(|a, b| a.target.cmp(&b.target));
        plan.dropped.sort_by(|a, b| a.source.cmp(&b.source));
        plan.added.sort();
        plan
    }
}

/// A `--map` rule's layout change.
#[derive(Debug, Clone, Copy)]
struct Rule {
    transpose: bool,
    heads: Option<u64>,
}

/// A source name mapped to a target name.
struct Member {
    source: String,
    kind: Option<&'static str>,
    rule: Option<Rule>,
}

struct Planner<'a> {
    source: &'a Artifact,
    target: &'a Artifact,
    /// Target name → the source tensors mapped to it.
    groups: BTreeMap<String, Vec<Member>>,
    /// Stacked target name → (expert, source name).
    experts: BTreeMap<String, Vec<(u64, String)>>,
    /// Source tensors the converter splits: (source name, how, block).
    splits: Vec<(String, Split, u64)>,
    plan: Plan,
    /// Q and KV head counts when the architecture's Q/K rows are permuted.
    heads: Option<(u64, u64)>,
    /// Q and KV head counts from the GGUF, whatever the architecture.
    head_counts: Option<(u64, u64)>,
    /// The architecture's deliberate transforms.
    arch: ArchTransforms,
}

impl Planner<'_> {
    fn add(
        &mut self,
        target: String,
        kind: Option<&'static str>,
        source: &str,
        rule: Option<Rule>,
    ) {
        self.groups.entry(target).or_default().push(Member {
            source: source.to_owned(),
            kind,
            rule,
        });
    }

    fn source_shape(&self, name: &str) -> Vec<u64> {
        let info = self.source.tensors.get(name).expect("a source tensor");
        logical_shape(self.source, info)
    }

    fn target_shape(&self, name: &str) -> Option<Vec<u64>> {
        let info = self.target.tensors.get(name)?;
        Some(logical_shape(self.target, info))
    }

    fn not_compared(&mut self, target: Option<&str>, sources: Vec<String>, why: String) {
        self.plan.not_compared.push(NotCompared {
            target: target.map(str::to_owned),
            sources,
            why,
        });
    }

    /// `--fuse-qkv`: a block's Q, K and V map to GGUF names absent from the file, and the
    /// block's attn_qkv is there.
    fn fuse_qkv(&mut self) {
        let fused = self.take_qkv_members();
        for (qkv, [q, k, v]) in fused {
            let (Some(q), Some(k), Some(v)) = (q.clone(), k.clone(), v.clone()) else {
                let sources = [q, k, v].into_iter().flatten().collect();
                self.not_compared(
                    Some(&qkv),
                    sources,
                    "fused Q/K/V, but the source lacks one of q, k and v".into(),
                );
                continue;
            };
            let sources = vec![q, k, v];
            let shapes: Vec<Vec<u64>> = sources.iter().map(|s| self.source_shape(s)).collect();
            let target_shape = self.target_shape(&qkv).expect("checked above");
            let cols = row_length(&shapes[0], true);
            let rows: Vec<u64> = shapes.iter().map(|s| first_dim(s, true)).collect();
            let heads = self.heads.map(|(q, kv)| [Some(q), Some(kv), None]);
            let fits = shapes.iter().all(|s| row_length(s, true) == cols)
                && rows.iter().sum::<u64>() * cols == elements(&target_shape)
                && (target_shape.len() == 1 || target_shape.last() == Some(&cols));
            if !fits {
                let why = format!(
                    "fused Q/K/V: source shapes {} do not add up to {}",
                    shapes
                        .iter()
                        .map(|s| show(s))
                        .collect::<Vec<_>>()
                        .join(", "),
                    show(&target_shape)
                );
                self.not_compared(Some(&qkv), sources, why);
                continue;
            }
            if let Some(h) = heads
                && !rows[..2]
                    .iter()
                    .zip(&h[..2])
                    .all(|(&r, &n)| permutable(r, n.unwrap_or(0)))
            {
                let why = format!(
                    "fused Q/K/V: Q/K rows {} and {} cannot be permuted with {} / {} heads",
                    rows[0],
                    rows[1],
                    h[0].unwrap_or(0),
                    h[1].unwrap_or(0)
                );
                self.not_compared(Some(&qkv), sources, why);
                continue;
            }
            let parts = (0..3)
                .map(|i| Part {
                    source: i,
                    rows: rows[i],
                    heads: heads.and_then(|h| h[i]),
                    skip_rows: 0,
                })
                .collect();
            self.push_joined(
                qkv,
                sources,
                Transform::FuseQkv {
                    permuted: heads.is_some(),
                },
                cols,
                parts,
            );
        }
    }

    /// The Q, K and V tensors whose own names the target lacks but whose block has a fused
    /// QKV tensor: taken out of the single pairs, by fused name, in the order q, k, v.
    fn take_qkv_members(&mut self) -> BTreeMap<String, [Option<String>; 3]> {
        let mut fused: BTreeMap<String, [Option<String>; 3]> = BTreeMap::new();
        let candidates: Vec<String> = self
            .groups
            .iter()
            .filter(|(target, members)| {
                !self.target.tensors.contains_key(target.as_str())
                    && members.len() == 1
                    && matches!(members[0].kind, Some("ATTN_Q" | "ATTN_K" | "ATTN_V"))
            })
            .map(|(target, _)| target.clone())
            .collect();
        for target in candidates {
            let Some(bid) = block_of(&target) else {
                continue;
            };
            let suffix = if target.ends_with(".bias") {
                ".bias"
            } else {
                ".weight"
            };
            let Some(qkv) = NameMap::gguf_name("ATTN_QKV", Some(bid)) else {
                continue;
            };
            let qkv = format!("{qkv}{suffix}");
            if !self.target.tensors.contains_key(qkv.as_str()) {
                continue;
            }
            let member = self.groups.remove(&target).expect("a candidate").remove(0);
            let slot = match member.kind {
                Some("ATTN_Q") => 0,
                Some("ATTN_K") => 1,
                _ => 2,
            };
            fused.entry(qkv).or_default()[slot] = Some(member.source);
        }
        fused
    }

    /// Per-expert tensors stacked into one tensor, or (`--fuse-gate-up-exps`) gate and up
    /// stacked and concatenated into the block's gate_up tensor.
    fn stack_experts(&mut self) {
        let experts = std::mem::take(&mut self.experts);
        let mut gate_up: BTreeMap<String, [Option<Vec<String>>; 2]> = BTreeMap::new();
        for (stacked, mut members) in experts {
            members.sort();
            let expected: Vec<u64> = (0..members.len() as u64).collect();
            let order: Vec<u64> = members.iter().map(|(e, _)| *e).collect();
            let sources: Vec<String> = members.into_iter().map(|(_, s)| s).collect();
            if order != expected {
                self.not_compared(
                    Some(&stacked),
                    sources,
                    format!("experts {order:?} are not numbered 0..n"),
                );
                continue;
            }
            if !self.target.tensors.contains_key(stacked.as_str()) {
                match self.gate_up_slot(&stacked) {
                    Some((fused, slot)) => gate_up.entry(fused).or_default()[slot] = Some(sources),
                    None => self
                        .plan
                        .dropped
                        .extend(sources.into_iter().map(|source| Dropped {
                            source,
                            why: format!(
                                "stacked as {stacked}, which is not in the converted model"
                            ),
                        })),
                }
                continue;
            }
            let shape = self.source_shape(&sources[0]);
            let target_shape = self.target_shape(&stacked).expect("checked above");
            let same = sources.iter().all(|s| self.source_shape(s) == shape);
            let mut want = vec![sources.len() as u64];
            want.extend(&shape);
            if !same || target_shape != want {
                let why = format!(
                    "{} experts of shape {} do not stack into {}",
                    sources.len(),
                    show(&shape),
                    show(&target_shape)
                );
                self.not_compared(Some(&stacked), sources, why);
                continue;
            }
            let parts = (0..sources.len())
                .map(|i| Part {
                    source: i,
                    rows: first_dim(&shape, false),
                    heads: None,
                    skip_rows: 0,
                })
                .collect();
            let cols = row_length(&shape, false);
            self.push_joined(stacked, sources, Transform::StackExperts, cols, parts);
        }
        self.fuse_gate_up(gate_up);
    }

    /// When the target has no tensor `stacked` (a gate or up experts' stack) but has its
    /// block's fused gate_up tensor: that name, and 0 for gate or 1 for up.
    fn gate_up_slot(&self, stacked: &str) -> Option<(String, usize)> {
        let bid = block_of(stacked)?;
        let gate = NameMap::gguf_name("FFN_GATE_EXP", Some(bid))?;
        let up = NameMap::gguf_name("FFN_UP_EXP", Some(bid))?;
        let fused = NameMap::gguf_name("FFN_GATE_UP_EXP", Some(bid))?;
        let slot = if stacked.starts_with(&format!("{gate}.")) {
            0
        } else if stacked.starts_with(&format!("{up}.")) {
            1
        } else {
            return None;
        };
        let suffix = &stacked[stacked.rfind('.')?..];
        let fused = format!("{fused}{suffix}");
        self.target
            .tensors
            .contains_key(fused.as_str())
            .then_some((fused, slot))
    }

    /// Each block's gate and up expert stacks, interleaved expert by expert, against its fused
    /// gate_up tensor.
    fn fuse_gate_up(&mut self, gate_up: BTreeMap<String, [Option<Vec<String>>; 2]>) {
        for (fused, [gate, up]) in gate_up {
            let (Some(gate), Some(up)) = (gate.clone(), up.clone()) else {
                let sources = gate.into_iter().chain(up).flatten().collect();
                self.not_compared(
                    Some(&fused),
                    sources,
                    "fused gate/up experts, but the source lacks gate or up".into(),
                );
                continue;
            };
            let shape = self.source_shape(&gate[0]);
            let target_shape = self.target_shape(&fused).expect("checked above");
            let all_same = gate
                .iter()
                .chain(&up)
                .all(|s| self.source_shape(s) == shape);
            let fits = all_same
                && gate.len() == up.len()
                && shape.len() == 2
                && target_shape == [gate.len() as u64, 2 * shape[0], shape[1]];
            let mut sources = Vec::with_capacity(2 * gate.len());
            let mut parts = Vec::with_capacity(2 * gate.len());
            for (g, u) in gate.into_iter().zip(up) {
                for s in [g, u] {
                    parts.push(Part {
                        source: sources.len(),
                        rows: first_dim(&shape, false),
                        heads: None,
                        skip_rows: 0,
                    });
                    sources.push(s);
                }
            }
            if !fits {
                let why = format!(
                    "gate and up experts of shape {} do not fuse into {}",
                    show(&shape),
                    show(&target_shape)
                );
                self.not_compared(Some(&fused), sources, why);
                continue;
            }
            let cols = row_length(&shape, false);
            self.push_joined(fused, sources, Transform::FuseGateUpExperts, cols, parts);
        }
    }

    /// Each split source tensor paired with every part the converter cut from it.
    fn split_pairs(&mut self) {
        for (source, split, bid) in std::mem::take(&mut self.splits) {
            let mut targets = Vec::with_capacity(split.into.len());
            for (kind, transposed) in split.into {
                let Some(name) = NameMap::gguf_name(kind, Some(bid)) else {
                    continue;
                };
                let name = format!("{name}.weight");
                match self.target_shape(&name) {
                    Some(shape) => targets.push((name, shape, *transposed)),
                    None => self.plan.dropped.push(Dropped {
                        source: source.clone(),
                        why: format!(
                            "the converter splits it into {}; {name} is not in the converted model",
                            split
                                .into
                                .iter()
                                .map(|k| k.0)
                                .collect::<Vec<_>>()
                                .join(" + ")
                        ),
                    }),
                }
            }
            if targets.len() != split.into.len() {
                continue;
            }
            let shape = self.source_shape(&source);
            match split_maps(&shape, &targets) {
                Ok(maps) => {
                    for ((target, _, transposed), rows) in targets.into_iter().zip(maps) {
                        self.plan.pairs.push(PlannedPair {
                            target,
                            sources: vec![source.clone()],
                            transform: Transform::Split { transposed },
                            rows,
                            heads: None,
                            plus: 0.0,
                        });
                    }
                }
                Err(why) => {
                    for (target, _, _) in targets {
                        self.not_compared(Some(&target), vec![source.clone()], why.clone());
                    }
                }
            }
        }
    }

    /// One source tensor per target tensor.
    fn single_pairs(&mut self) {
        let groups = std::mem::take(&mut self.groups);
        for (target, members) in groups {
            if members.len() > 1 {
                let sources: Vec<String> = members.into_iter().map(|m| m.source).collect();
                let why = format!("{} source tensors map to it", sources.len());
                self.not_compared(Some(&target), sources, why);
                continue;
            }
            let member = members.into_iter().next().expect("one member");
            let Some(target_shape) = self.target_shape(&target) else {
                self.plan.dropped.push(Dropped {
                    source: member.source,
                    why: format!("mapped to {target}, which is not in the converted model"),
                });
                continue;
            };
            let shape = self.source_shape(&member.source);
            let qk_heads = match (member.kind, self.heads) {
                (Some("ATTN_Q"), Some((q, _))) => Some(q),
                (Some("ATTN_K"), Some((_, kv))) => Some(kv),
                _ => None,
            };
            let heads = member.rule.and_then(|r| r.heads).or(qk_heads);
            let conv1d = member.rule.is_none()
                && self
                    .arch
                    .transposed_suffixes
                    .iter()
                    .any(|s| member.source.ends_with(s));
            let transpose = member.rule.is_some_and(|r| r.transpose) || conv1d;
            let pos_embd = member.kind == Some("POS_EMBD");
            let plus_one = member.rule.is_none()
                && self
                    .arch
                    .plus_one_suffix
                    .is_some_and(|s| member.source.ends_with(s));
            if member.rule.is_none()
                && let Some((suffixes, regroup)) = self.arch.qkv_regroup
                && let Some(stem) = member
                    .source
                    .strip_suffix(".weight")
                    .or_else(|| member.source.strip_suffix(".bias"))
                && suffixes.iter().any(|s| stem.ends_with(s))
            {
                match self.regrouped(&shape, &target_shape, regroup) {
                    Ok(rows) => self.plan.pairs.push(PlannedPair {
                        target,
                        sources: vec![member.source],
                        transform: Transform::RegroupQkv,
                        rows,
                        heads: None,
                        plus: 0.0,
                    }),
                    Err(why) => {
                        self.not_compared(Some(&target), vec![member.source], why.to_string());
                    }
                }
                continue;
            }
            match single_map(&shape, &target_shape, heads, transpose, pos_embd) {
                Ok((rows, transform)) => {
                    let transform = match transform {
                        Transform::Transpose if conv1d => Transform::TransposeConv1d,
                        Transform::Identity if plus_one => Transform::PlusOne,
                        other => other,
                    };
                    let plus = if transform == Transform::PlusOne {
                        1.0
                    } else {
                        0.0
                    };
                    self.plan.pairs.push(PlannedPair {
                        target,
                        sources: vec![member.source],
                        transform,
                        rows,
                        heads: qk_heads,
                        plus,
                    });
                }
                Err(why) => self.not_compared(Some(&target), vec![member.source], why.to_string()),
            }
        }
    }
}

impl Planner<'_> {
    /// Pairs `target` with several sources whose rows are joined in order (`parts`), each row
    /// `cols` long.
    fn push_joined(
        &mut self,
        target: String,
        sources: Vec<String>,
        transform: Transform,
        cols: u64,
        parts: Vec<Part>,
    ) {
        self.plan.pairs.push(PlannedPair {
            target,
            sources,
            transform,
            rows: RowMap {
                cols,
                parts,
                transposed: false,
            },
            heads: None,
            plus: 0.0,
        });
    }

    /// The row map of a fused QKV the converter regrouped (q, k, v of each head or kv group
    /// → all q, all k, all v), or why it does not fit.
    fn regrouped(
        &self,
        source: &[u64],
        target: &[u64],
        regroup: transforms::QkvRegroup,
    ) -> Result<RowMap, RegroupMismatch> {
        if squeezed(source) != squeezed(target) {
            return Err(RegroupMismatch::Shape {
                from: source.to_vec(),
                target: target.to_vec(),
            });
        }
        let rows = first_dim(source, true);
        let (heads, kv) = self.head_counts.ok_or(RegroupMismatch::NoHeadCounts)?;
        let runs = transforms::qkv_runs(regroup, rows, heads, kv)
            .ok_or(RegroupMismatch::Indivisible { rows, heads, kv })?;
        Ok(RowMap {
            cols: row_length(source, true),
            parts: runs
                .into_iter()
                .map(|(skip_rows, rows)| Part {
                    source: 0,
                    rows,
                    heads: None,
                    skip_rows,
                })
                .collect(),
            transposed: false,
        })
    }
}

/// Why a fused QKV the converter regrouped does not fit its target (the report's `why`).
#[derive(Debug, thiserror::Error)]
enum RegroupMismatch {
    #[error(
        "fused QKV regrouped by the converter: shape {} → {} differs",
        show(.from),
        show(.target)
    )]
    Shape { from: Vec<u64>, target: Vec<u64> },
    #[error("fused QKV regrouped by the converter: the GGUF has no head counts")]
    NoHeadCounts,
    #[error(
        "fused QKV regrouped by the converter: {rows} rows do not split into {heads} q heads \
         and {kv} k and v heads"
    )]
    Indivisible { rows: u64, heads: u64, kv: u64 },
}

/// Why a single source tensor's shape does not fit its target's (the report's `why`).
#[derive(Debug, thiserror::Error)]
enum ShapeMismatch {
    #[error(
        "a --map rule transposes it, but {} is not {} transposed",
        show(.target),
        show(.from)
    )]
    NotTransposed { from: Vec<u64>, target: Vec<u64> },
    #[error(
        "shape {} → {}: the Q/K permutation keeps the shape",
        show(.from),
        show(.target)
    )]
    PermutationReshapes { from: Vec<u64>, target: Vec<u64> },
    #[error(
        "{rows} rows cannot be permuted with {heads} heads (a multiple of twice the head count is \
         needed)"
    )]
    NotPermutable { rows: u64, heads: u64 },
    #[error(
        "shape {} → {}: no transform this pairing knows explains it (a --map rule can transpose \
         or permute)",
        show(.from),
        show(.target)
    )]
    Unexplained { from: Vec<u64>, target: Vec<u64> },
}

/// The row map of a single source tensor, or why its shape does not fit.
fn single_map(
    source: &[u64],
    target: &[u64],
    heads: Option<u64>,
    transpose: bool,
    may_drop_rows: bool,
) -> Result<(RowMap, Transform), ShapeMismatch> {
    let one = |rows: u64, cols: u64, heads: Option<u64>, skip_rows: u64| RowMap {
        cols,
        parts: vec![Part {
            source: 0,
            rows,
            heads,
            skip_rows,
        }],
        transposed: false,
    };
    if transpose {
        if source.len() == 2 && target == [source[1], source[0]] {
            let mut map = one(source[1], source[0], None, 0);
            map.transposed = true;
            return Ok((map, Transform::Transpose));
        }
        return Err(ShapeMismatch::NotTransposed {
            from: source.to_vec(),
            target: target.to_vec(),
        });
    }
    let same = squeezed(source) == squeezed(target);
    if let Some(heads) = heads {
        let rows = first_dim(source, true);
        if !same {
            return Err(ShapeMismatch::PermutationReshapes {
                from: source.to_vec(),
                target: target.to_vec(),
            });
        }
        if !permutable(rows, heads) {
            return Err(ShapeMismatch::NotPermutable { rows, heads });
        }
        return Ok((
            one(rows, row_length(source, true), Some(heads), 0),
            Transform::PermuteQk,
        ));
    }
    if same {
        return Ok((one(1, elements(source), None, 0), Transform::Identity));
    }
    if may_drop_rows
        && source.len() == 2
        && target.len() == 2
        && source[1] == target[1]
        && source[0] > target[0]
    {
        let cut = source[0] - target[0];
        return Ok((
            one(target[0], target[1], None, cut),
            Transform::DropRows(cut),
        ));
    }
    Err(ShapeMismatch::Unexplained {
        from: source.to_vec(),
        target: target.to_vec(),
    })
}

/// Rows are everything after the first dimension; a vector with a permutation is a column of
/// rows of one element (the permutation moves its elements).
/// Groups a split may have (heads, experts): more is not a model's tensor.
const MAX_SPLIT_GROUPS: u64 = 1 << 16;

/// The row maps of a split's parts: `targets` (name, shape, transposed within each group) cut
/// from a source of `shape`, all with the same group count (their first dimension when 3-D,
/// else 1).
fn split_maps(shape: &[u64], targets: &[(String, Vec<u64>, bool)]) -> Result<Vec<RowMap>, String> {
    let cols = shape.last().copied().unwrap_or(0);
    let mut groups = None;
    let mut slices = Vec::with_capacity(targets.len());
    for (name, t, transposed) in targets {
        let (g, rows, inner) = match t[..] {
            [g, a, b] => (g, a, b),
            [a, b] => (1, a, b),
            _ => return Err(format!("{name} {} is neither 2-D nor 3-D", show(t))),
        };
        // A part transposed within groups is [groups, cols, slice], else [groups, slice, cols].
        let (slice, part_cols) = if *transposed {
            (inner, rows)
        } else {
            (rows, inner)
        };
        if part_cols != cols || *groups.get_or_insert(g) != g || g == 0 || g > MAX_SPLIT_GROUPS {
            return Err(format!(
                "{name} {} is not a slice of {} in groups of rows {} long",
                show(t),
                show(shape),
                cols
            ));
        }
        slices.push(slice);
    }
    let groups = groups.unwrap_or(1);
    let stride: u64 = slices.iter().sum();
    if groups.checked_mul(stride).and_then(|r| r.checked_mul(cols)) != Some(elements(shape)) {
        return Err(format!(
            "its parts ({}) do not add up to {}",
            targets
                .iter()
                .map(|t| show(&t.1))
                .collect::<Vec<_>>()
                .join(" + "),
            show(shape)
        ));
    }
    let mut offset = 0;
    let mut maps = Vec::with_capacity(targets.len());
    for ((_, _, transposed), slice) in targets.iter().zip(&slices) {
        let parts = (0..groups)
            .map(|g| Part {
                source: 0,
                // transposed: each group's part is `cols` target rows of `slice` elements
                rows: if *transposed { cols } else { *slice },
                heads: None,
                skip_rows: g * stride + offset,
            })
            .collect();
        maps.push(RowMap {
            cols: if *transposed { *slice } else { cols },
            parts,
            transposed: *transposed,
        });
        offset += slice;
    }
    Ok(maps)
}

fn first_dim(shape: &[u64], vector_as_column: bool) -> u64 {
    match shape {
        [] => 1,
        [_] if !vector_as_column => 1,
        [n, ..] => *n,
    }
}

fn row_length(shape: &[u64], vector_as_column: bool) -> u64 {
    match shape {
        [] => 1,
        [n] if !vector_as_column => *n,
        [_, rest @ ..] => rest.iter().product(),
    }
}

fn elements(shape: &[u64]) -> u64 {
    shape.iter().product()
}

fn squeezed(shape: &[u64]) -> Vec<u64> {
    shape.iter().copied().filter(|&d| d != 1).collect()
}

pub(super) fn show(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The block number in a GGUF name ("blk.3.attn_q.weight" → 3).
fn block_of(name: &str) -> Option<u64> {
    name.split('.')
        .find(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// A per-expert name "….experts.E.NAME.weight": the stacked name "….experts.NAME.weight" and E.
fn expert_of(name: &str) -> Option<(String, u64)> {
    let stem = name.strip_suffix(".weight")?;
    let (head, leaf) = stem.rsplit_once('.')?;
    let (pre, expert) = head.rsplit_once('.')?;
    if !pre.ends_with(".experts") && pre != "experts" {
        return None;
    }
    if expert.is_empty() || !expert.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((format!("{pre}.{leaf}.weight"), expert.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expert_names_give_their_stacked_name() {
        assert_eq!(
            expert_of("model.layers.0.block_sparse_moe.experts.3.w1.weight"),
            Some((
                "model.layers.0.block_sparse_moe.experts.w1.weight".into(),
                3
            ))
        );
        assert_eq!(expert_of("model.layers.0.mlp.gate_proj.weight"), None);
    }

    /// numpy, DeepSeek: kv_b.view(heads, nope + v, rank); k_b = [:, :nope].transpose(1, 2),
    /// v_b = [:, nope:].
    #[test]
    fn a_split_takes_each_groups_slice() {
        let (heads, nope, v, rank) = (2, 3, 2, 4);
        let targets = [
            ("k_b".to_owned(), vec![heads, rank, nope], true),
            ("v_b".to_owned(), vec![heads, v, rank], false),
        ];
        let maps = split_maps(&[heads * (nope + v), rank], &targets).unwrap();
        let k_b: Vec<u64> = (0..heads * rank * nope)
            .map(|i| maps[0].transposed_element(i).1)
            .collect();
        let mut expected = Vec::new();
        for h in 0..heads {
            for r in 0..rank {
                for n in 0..nope {
                    expected.push((h * (nope + v) + n) * rank + r);
                }
            }
        }
        assert_eq!(k_b, expected);
        let v_b: Vec<u64> = (0..heads * v).map(|r| maps[1].source_row(r).1).collect();
        assert_eq!(v_b, [3, 4, 8, 9]);
        let short = [("v_b".to_owned(), vec![heads, v, rank], false)];
        let err = split_maps(&[heads * (nope + v), rank], &short).unwrap_err();
        assert_eq!(err, "its parts ([2, 2, 4]) do not add up to [10, 4]");
        let wide = [("v_b".to_owned(), vec![heads, v, rank + 1], false)];
        assert!(split_maps(&[10, 4], &wide).is_err());
    }

    #[test]
    fn shapes_pick_the_transform() {
        let (map, t) = single_map(&[64, 96], &[64, 96], None, false, false).unwrap();
        assert_eq!((t, map.target_elements()), (Transform::Identity, 64 * 96));
        let (_, t) = single_map(&[64, 96], &[64, 96], Some(4), false, false).unwrap();
        assert_eq!(t, Transform::PermuteQk);
        let (map, t) = single_map(&[514, 8], &[512, 8], None, false, true).unwrap();
        assert_eq!((t, map.parts[0].skip_rows), (Transform::DropRows(2), 2));
        assert!(single_map(&[514, 8], &[512, 8], None, false, false).is_err());
        let (map, t) = single_map(&[3, 5], &[5, 3], None, true, false).unwrap();
        assert_eq!(
            (t, map.cols, map.transposed),
            (Transform::Transpose, 3, true)
        );
        let err = single_map(&[4, 6], &[6, 4], None, false, false).unwrap_err();
        assert!(err.to_string().contains("no transform"), "{err}");
    }

    #[test]
    fn shape_mismatches_say_why() {
        let why = |source: &[u64], target: &[u64], heads, transpose| {
            single_map(source, target, heads, transpose, false)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            why(&[3, 5], &[3, 5], None, true),
            "a --map rule transposes it, but [3, 5] is not [3, 5] transposed"
        );
        assert_eq!(
            why(&[64, 96], &[96, 64], Some(4), false),
            "shape [64, 96] → [96, 64]: the Q/K permutation keeps the shape"
        );
        assert_eq!(
            why(&[6, 4], &[6, 4], Some(4), false),
            "6 rows cannot be permuted with 4 heads (a multiple of twice the head count is needed)"
        );
        assert_eq!(
            why(&[4, 6], &[6, 4], None, false),
            "shape [4, 6] → [6, 4]: no transform this pairing knows explains it (a --map rule \
             can transpose or permute)"
        );
    }
}
