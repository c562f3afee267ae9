//! Schema-1 JSON: every document starts with `"schema": 1`, then the spec's field names.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::artifact::{Array, Artifact, TensorInfo, Value};
use crate::diff::{Change, DiffCounts, StructuralDiff};
use crate::identity::SCHEMA_VERSION;
use crate::identity::{structural_hash, value_digest};
use crate::render::enums::enum_name;
use crate::render::order::{self, TensorOrder};

/// Arrays up to this length are included in full; longer ones as length, head and digest.
const FULL_ARRAY_ITEMS: usize = 16;
const ARRAY_HEAD_ITEMS: usize = 8;

#[derive(Serialize)]
struct IdDoc {
    schema: u32,
    #[serde(flatten)]
    model: Side,
    /// A training checkpoint: what its model identity holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    training_checkpoint: Option<TrainingJson>,
}

#[derive(Serialize)]
struct TrainingJson {
    model_keys: Vec<String>,
    groups: Vec<&'static str>,
}

fn id_doc(artifact: &Artifact) -> IdDoc {
    IdDoc {
        schema: SCHEMA_VERSION,
        model: Side {
            format: artifact.format.name(),
            gguf_version: artifact.gguf_version,
            structural_hash: structural_hash(artifact),
            model_identity: crate::identity::model_identity(artifact),
            tensor_count: artifact.tensors.len(),
            metadata_count: artifact.metadata.len(),
            complete: true,
            incomplete: None,
        }
        .with_completeness(artifact.layout.incomplete().as_ref()),
        training_checkpoint: artifact.layout.training().map(|t| TrainingJson {
            model_keys: t.model_keys.clone(),
            groups: t.groups.clone(),
        }),
    }
}

pub(crate) fn id(artifact: &Artifact) -> String {
    to_string(&id_doc(artifact))
}

#[derive(Serialize)]
struct InspectDoc<'a> {
    /// `id`'s fields first.
    #[serde(flatten)]
    id: IdDoc,
    file_size: u64,
    header_size: u64,
    truncated: bool,
    data_bytes_present: u64,
    data_bytes_expected: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    big_endian: Option<bool>,
    /// The files of a multi-file model.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<FilesJson<'a>>,
    /// A pickle's globals beyond those of tensors, most dangerous first.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    findings: Vec<FindingJson<'a>>,
    /// A training checkpoint's groups (`parameters` counts the model group only).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    groups: Vec<GroupJson>,
    parameters: Parameters,
    metadata: MetadataJson<'a>,
    /// "file" (as the data lies in the file) or "name": the order of `tensors`.
    tensor_order: &'static str,
    tensors: Vec<TensorJson<'a>>,
}

#[derive(Serialize)]
struct GroupJson {
    name: &'static str,
    tensor_count: usize,
    elements: u64,
}

#[derive(Serialize)]
struct FindingJson<'a> {
    global: &'a str,
    tier: &'static str,
    offset: u64,
    actions: &'a [&'static str],
}

#[derive(Serialize)]
struct FilesJson<'a> {
    scheme: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<&'a str>,
    parts: Vec<PartJson<'a>>,
}

#[derive(Serialize)]
struct PartJson<'a> {
    file: &'a str,
    tensor_count: usize,
    file_size: u64,
    header_size: u64,
    structural_hash: &'a str,
}

#[derive(Serialize)]
struct Parameters {
    total: u64,
    by_dtype: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct TensorJson<'a> {
    name: &'a str,
    dtype: &'static str,
    shape: &'a [u64],
    byte_length: u64,
    /// From the start of the file (of its part, for a multi-file model).
    offset: u64,
    /// From the start of the data section, as the header records it (GGUF, safetensors).
    #[serde(skip_serializing_if = "Option::is_none")]
    data_offset: Option<u64>,
    /// The part file that holds the tensor (multi-file models only); `offset` is in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    /// A numpy array inside a PyTorch checkpoint: its values are in the pickle, and `offset`
    /// (0) points at none of them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    values_in_pickle: bool,
}

/// `inspect --json` with tensors in file order.
pub fn inspect(artifact: &Artifact, full_arrays: bool) -> String {
    inspect_in(artifact, full_arrays, TensorOrder::File)
}

/// [`inspect`] with tensors listed in `order`.
pub(crate) fn inspect_in(artifact: &Artifact, full_arrays: bool, order: TensorOrder) -> String {
    let (total, by_dtype) = artifact.parameter_counts();
    let layout = &artifact.layout;
    let doc = InspectDoc {
        id: id_doc(artifact),
        file_size: layout.file_size,
        header_size: layout.header_size,
        truncated: layout.is_truncated(),
        data_bytes_present: layout.data_present,
        data_bytes_expected: layout.data_expected,
        alignment: layout.alignment,
        big_endian: artifact.gguf_version.map(|_| layout.big_endian),
        files: layout.files.as_deref().map(|files| FilesJson {
            scheme: files.scheme.name(),
            index: files.index.as_deref(),
            parts: files
                .parts
                .iter()
                .map(|p| PartJson {
                    file: &p.file,
                    tensor_count: p.tensors,
                    file_size: p.file_size,
                    header_size: p.header_size,
                    structural_hash: &p.structural_hash,
                })
                .collect(),
        }),
        findings: layout
            .findings
            .iter()
            .map(|f| FindingJson {
                global: &f.global,
                tier: f.tier,
                offset: f.offset,
                actions: &f.actions,
            })
            .collect(),
        groups: artifact
            .groups()
            .into_iter()
            .map(|(name, tensor_count, elements)| GroupJson {
                name,
                tensor_count,
                elements,
            })
            .collect(),
        parameters: Parameters { total, by_dtype },
        metadata: MetadataJson {
            entries: artifact.metadata.iter().collect(),
            full_arrays,
        },
        tensor_order: match order {
            TensorOrder::File => "file",
            TensorOrder::Name => "name",
        },
        tensors: order::positions(artifact, order)
            .into_iter()
            .filter_map(|position| Some((position, artifact.tensors.get_index(position)?)))
            .map(|(position, (name, t))| TensorJson {
                name,
                dtype: t.dtype.name,
                shape: &t.shape,
                byte_length: t.byte_length,
                offset: t.file_offset,
                data_offset: order::data_offset(artifact, position),
                file: layout
                    .files
                    .as_ref()
                    .and_then(|f| f.part_at(position))
                    .map(|p| p.file.as_str()),
                values_in_pickle: artifact.values_in_pickle(name),
            })
            .collect(),
    };
    to_string(&doc)
}

struct MetadataJson<'a> {
    entries: Vec<(&'a String, &'a Value)>,
    full_arrays: bool,
}

impl Serialize for MetadataJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (key, value) in &self.entries {
            let name = enum_name(key, value);
            map.serialize_entry(key, &TypedValue(value, self.full_arrays, name))?;
        }
        map.end()
    }
}

/// `{"type": "u32", "value": 7}` (and `"name"` for a named member of an enumerated key, such
/// as `general.file_type`); arrays `{"type":"array","element_type","length","values"}`, or
/// with `head` and `digest` instead of `values` when long and not requested in full.
struct TypedValue<'a>(&'a Value, bool, Option<&'static str>);

impl Serialize for TypedValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (value, full) = (self.0, self.1);
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", value.type_name())?;
        match value {
            Value::Array(array) => {
                map.serialize_entry("element_type", array.element_type_name())?;
                map.serialize_entry("length", &array.len())?;
                if full || array.len() <= FULL_ARRAY_ITEMS {
                    map.serialize_entry("values", &PlainArray(array, None))?;
                } else {
                    map.serialize_entry("head", &PlainArray(array, Some(ARRAY_HEAD_ITEMS)))?;
                    map.serialize_entry("digest", &value_digest(value))?;
                }
            }
            scalar => map.serialize_entry("value", &PlainValue(scalar))?,
        }
        if let Some(name) = self.2 {
            map.serialize_entry("name", name)?;
        }
        map.end()
    }
}

/// A value as natural JSON (floats as numbers; NaN and infinities as strings).
struct PlainValue<'a>(&'a Value);

impl Serialize for PlainValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::U8(v) => s.serialize_u8(*v),
            Value::I8(v) => s.serialize_i8(*v),
            Value::U16(v) => s.serialize_u16(*v),
            Value::I16(v) => s.serialize_i16(*v),
            Value::U32(v) => s.serialize_u32(*v),
            Value::I32(v) => s.serialize_i32(*v),
            Value::U64(v) => s.serialize_u64(*v),
            Value::I64(v) => s.serialize_i64(*v),
            Value::F32(v) => float(s, f64::from(v.value()), Some(v.value())),
            Value::F64(v) => float(s, v.value(), None),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::String(v) => s.serialize_str(v),
            Value::Array(a) => PlainArray(a, None).serialize(s),
        }
    }
}

fn float<S: Serializer>(s: S, value: f64, as_f32: Option<f32>) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        match as_f32 {
            // Shortest text that round-trips the f32 ("0.1", not "0.10000000149011612").
            Some(v) => s.serialize_f32(v),
            None => s.serialize_f64(value),
        }
    } else if value.is_nan() {
        s.serialize_str("nan")
    } else if value > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

struct PlainArray<'a>(&'a Array, Option<usize>);

impl Serialize for PlainArray<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.1.map_or(self.0.len(), |limit| limit.min(self.0.len()));
        s.collect_seq((0..n).filter_map(|i| self.0.get(i)).map(OwnedPlain))
    }
}

struct OwnedPlain(Value);

impl Serialize for OwnedPlain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PlainValue(&self.0).serialize(s)
    }
}

#[derive(Serialize)]
struct Side {
    format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    gguf_version: Option<u32>,
    structural_hash: String,
    /// A training checkpoint's second, stated identity: its model weights and groups
    /// (docs/SPEC.md §5d); absent for every other file.
    #[serde(skip_serializing_if = "Option::is_none")]
    model_identity: Option<String>,
    tensor_count: usize,
    metadata_count: usize,
    /// False when the file ends before the tensor data its header declares.
    complete: bool,
    /// What is missing, when not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    incomplete: Option<String>,
}

impl Side {
    fn with_completeness(mut self, incomplete: Option<&crate::artifact::Incomplete>) -> Side {
        self.complete = incomplete.is_none();
        self.incomplete = incomplete.map(ToString::to_string);
        self
    }
}

#[derive(Serialize)]
pub(super) struct DiffDoc<'a> {
    schema: u32,
    identical: bool,
    /// A side is a training checkpoint: whether both are, with equal model identities (§5d).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_identity_equal: Option<bool>,
    format_equal: bool,
    old: Side,
    new: Side,
    counts: DiffCounts,
    metadata: Sections<'a, Value>,
    tensors: Sections<'a, TensorInfo>,
    /// A grouped checkpoint's changes by group (`model`, `optimizer`, `scheduler`, `rng`,
    /// `other`): the same entries as `metadata` and `tensors`, told apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<BTreeMap<&'static str, GroupChanges<'a>>>,
    /// Present when the files holding the model changed (multi-file models).
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<LayoutJson<'a>>,
}

#[derive(Serialize)]
struct LayoutJson<'a> {
    old: &'a crate::diff::FilesView,
    new: &'a crate::diff::FilesView,
    tensors_moved: usize,
}

struct Sections<'a, T> {
    added: Vec<(&'a str, &'a T)>,
    removed: Vec<(&'a str, &'a T)>,
    changed: Vec<(&'a str, &'a T, &'a T)>,
}

#[derive(Serialize)]
struct GroupChanges<'a> {
    /// A side is a training checkpoint: whether the group is in its model identity (the model
    /// weights are; every group is in the structural identity).
    #[serde(skip_serializing_if = "Option::is_none")]
    in_model_identity: Option<bool>,
    metadata: Sections<'a, Value>,
    tensors: Sections<'a, TensorInfo>,
}

impl<'a, T> Sections<'a, T> {
    fn collect(items: impl Iterator<Item = (&'a str, &'a Change<T>)>) -> Self {
        let mut s = Sections {
            added: vec![],
            removed: vec![],
            changed: vec![],
        };
        for (name, change) in items {
            match change {
                Change::Added(v) => s.added.push((name, v)),
                Change::Removed(v) => s.removed.push((name, v)),
                Change::Changed(a, b) => s.changed.push((name, a, b)),
            }
        }
        s
    }
}

/// How a diff item renders in JSON: through a serializable view of it.
trait DiffItemJson {
    type View<'a>: Serialize
    where
        Self: 'a;
    fn view<'a>(&'a self, key: &str) -> Self::View<'a>;
    /// Where a changed item first differs, when it has parts (arrays).
    fn first_difference(_old: &Self, _new: &Self) -> Option<FirstDifference> {
        None
    }
}

impl DiffItemJson for Value {
    type View<'a> = TypedValue<'a>;
    fn view<'a>(&'a self, key: &str) -> TypedValue<'a> {
        TypedValue(self, false, enum_name(key, self))
    }
    fn first_difference(old: &Value, new: &Value) -> Option<FirstDifference> {
        let (Value::Array(a), Value::Array(b)) = (old, new) else {
            return None;
        };
        let d = crate::diff::ArrayDifference::between(a, b)?;
        Some(FirstDifference {
            index: d.index,
            old: d.old,
            new: d.new,
        })
    }
}

impl DiffItemJson for TensorInfo {
    type View<'a> = TensorShape<'a>;
    fn view<'a>(&'a self, _key: &str) -> TensorShape<'a> {
        TensorShape(self)
    }
}

#[derive(Serialize)]
struct OldNew<T> {
    old: T,
    new: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_difference: Option<FirstDifference>,
}

/// A changed array's first differing index and both elements (null past an array's end).
struct FirstDifference {
    index: usize,
    old: Option<Value>,
    new: Option<Value>,
}

impl Serialize for FirstDifference {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("index", &self.index)?;
        map.serialize_entry("old", &self.old.as_ref().map(PlainValue))?;
        map.serialize_entry("new", &self.new.as_ref().map(PlainValue))?;
        map.end()
    }
}

struct TensorShape<'a>(&'a TensorInfo);

impl Serialize for TensorShape<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("dtype", self.0.dtype.name)?;
        map.serialize_entry("shape", self.0.shape.as_slice())?;
        map.serialize_entry("byte_length", &self.0.byte_length)?;
        map.end()
    }
}

impl<T: DiffItemJson> Serialize for Sections<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Group<'b, T>(&'b [(&'b str, &'b T)]);
        impl<T: DiffItemJson> Serialize for Group<'_, T> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (name, item) in self.0 {
                    map.serialize_entry(name, &item.view(name))?;
                }
                map.end()
            }
        }
        struct Pairs<'b, T>(&'b [(&'b str, &'b T, &'b T)]);
        impl<T: DiffItemJson> Serialize for Pairs<'_, T> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (name, old, new) in self.0 {
                    let pair = OldNew {
                        old: old.view(name),
                        new: new.view(name),
                        first_difference: T::first_difference(old, new),
                    };
                    map.serialize_entry(name, &pair)?;
                }
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("added", &Group(&self.added))?;
        map.serialize_entry("removed", &Group(&self.removed))?;
        map.serialize_entry("changed", &Pairs(&self.changed))?;
        map.end()
    }
}

pub(crate) fn diff(diff: &StructuralDiff) -> String {
    to_string(&diff_doc(diff))
}

/// The structural diff as a JSON value, to embed in the reports of `git diff --json` and `ci`.
pub(crate) fn diff_value(diff: &StructuralDiff) -> serde_json::Value {
    serde_json::to_value(diff_doc(diff)).expect("JSON of plain data cannot fail")
}

pub(super) fn diff_doc(diff: &StructuralDiff) -> DiffDoc<'_> {
    let side = |format: crate::artifact::Format,
                v: Option<u32>,
                hash: &str,
                model: &Option<String>,
                t: usize,
                m: usize| Side {
        format: format.name(),
        gguf_version: v,
        structural_hash: hash.to_owned(),
        model_identity: model.clone(),
        tensor_count: t,
        metadata_count: m,
        complete: true,
        incomplete: None,
    };
    DiffDoc {
        schema: SCHEMA_VERSION,
        identical: diff.is_identical(),
        model_identity_equal: diff.training.then(|| diff.same_model_identity()),
        format_equal: !diff.format_changed(),
        old: side(
            diff.old_format,
            diff.old_gguf_version,
            &diff.old_hash,
            &diff.old_model_identity,
            diff.old_tensor_count,
            diff.old_metadata_count,
        )
        .with_completeness(diff.old_incomplete.as_ref()),
        new: side(
            diff.new_format,
            diff.new_gguf_version,
            &diff.new_hash,
            &diff.new_model_identity,
            diff.new_tensor_count,
            diff.new_metadata_count,
        )
        .with_completeness(diff.new_incomplete.as_ref()),
        counts: diff.counts(),
        metadata: Sections::collect(diff.metadata.iter().map(|m| (m.key.as_str(), &m.change))),
        tensors: Sections::collect(diff.tensors.iter().map(|t| (t.name.as_str(), &t.change))),
        groups: diff.is_grouped().then(|| {
            crate::diff::GROUP_ORDER
                .iter()
                .filter_map(|&group| {
                    let metadata = diff.metadata.iter().filter(|m| m.group == Some(group));
                    let tensors = diff.tensors.iter().filter(|t| t.group == Some(group));
                    if metadata.clone().next().is_none() && tensors.clone().next().is_none() {
                        return None;
                    }
                    Some((
                        group,
                        GroupChanges {
                            in_model_identity: diff.training.then_some(group == "model"),
                            metadata: Sections::collect(
                                metadata.map(|m| (m.key.as_str(), &m.change)),
                            ),
                            tensors: Sections::collect(
                                tensors.map(|t| (t.name.as_str(), &t.change)),
                            ),
                        },
                    ))
                })
                .collect()
        }),
        layout: diff.layout.as_ref().map(|l| LayoutJson {
            old: &l.old,
            new: &l.new,
            tensors_moved: l.tensors_moved,
        }),
    }
}

pub(super) fn to_string<T: Serialize>(doc: &T) -> String {
    let mut s = serde_json::to_string_pretty(doc).expect("JSON of plain data cannot fail");
    s.push('\n');
    s
}
