//! The constants and types of the container: its framing, the strategies and their parameters,
//! the parsed header and the index of the array records.

use smallvec::SmallVec;

use crate::artifact::Shape;

pub(crate) const MAGIC: &[u8; 7] = b"wdelta\0";
/// Bytes before the JSON header: magic, version, header length.
pub(crate) const PREAMBLE_LEN: usize = 7 + 4 + 4;
pub(crate) const CHECKSUM_LEN: usize = 32;
/// Versions this implementation reads and writes.
pub(crate) const SUPPORTED_VERSIONS: [u32; 2] = [1, 2];

/// Compression strategy of one tensor (and the default of a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Strategy {
    /// The changes of largest magnitude, each with its index (`sparse`).
    Sparse,
    /// The sign of every change and one scale per row, BitDelta-style (`quantized`).
    Quantized,
    /// Every change in 4 bits, with the largest kept as float16 outliers (`int4`).
    Int4,
}

impl Strategy {
    /// The name the header and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Sparse => "sparse",
            Strategy::Quantized => "quantized",
            Strategy::Int4 => "int4",
        }
    }

    /// The strategy of that name.
    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "sparse" => Some(Strategy::Sparse),
            "quantized" => Some(Strategy::Quantized),
            "int4" => Some(Strategy::Int4),
            _ => None,
        }
    }

    /// The position of `field` among the strategy's fields.
    pub fn field_slot(self, field: &str) -> Option<usize> {
        self.fields().iter().position(|f| *f == field)
    }

    /// The array fields of the strategy, in the order the reference writes them.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Strategy::Sparse => &["indices", "values"],
            Strategy::Quantized => &["scales", "packed_signs"],
            Strategy::Int4 => &[
                "outlier_idx",
                "outlier_vals",
                "scale",
                "zero_point",
                "packed",
            ],
        }
    }
}

/// Element type of an array record, named as numpy names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayDtype {
    Int64,
    Int32,
    Float32,
    Float16,
    Uint8,
}

impl ArrayDtype {
    pub fn name(self) -> &'static str {
        match self {
            ArrayDtype::Int64 => "int64",
            ArrayDtype::Int32 => "int32",
            ArrayDtype::Float32 => "float32",
            ArrayDtype::Float16 => "float16",
            ArrayDtype::Uint8 => "uint8",
        }
    }

    pub fn parse(s: &str) -> Option<ArrayDtype> {
        match s {
            "int64" => Some(ArrayDtype::Int64),
            "int32" => Some(ArrayDtype::Int32),
            "float32" => Some(ArrayDtype::Float32),
            "float16" => Some(ArrayDtype::Float16),
            "uint8" => Some(ArrayDtype::Uint8),
            _ => None,
        }
    }

    pub fn size(self) -> u64 {
        match self {
            ArrayDtype::Int64 => 8,
            ArrayDtype::Int32 | ArrayDtype::Float32 => 4,
            ArrayDtype::Float16 => 2,
            ArrayDtype::Uint8 => 1,
        }
    }
}

/// Strategy-specific scalars of a tensor entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Params {
    Sparse {
        sparsity: f64,
    },
    Quantized {
        n_elements: u64,
        n_cols: u64,
    },
    Int4 {
        outlier_fraction: f64,
        n_elements: u64,
        n_outliers: u64,
        /// 1: `packed` holds the non-outliers only; 2: all elements.
        layout: u32,
    },
}

impl Params {
    pub fn strategy(&self) -> Strategy {
        match self {
            Params::Sparse { .. } => Strategy::Sparse,
            Params::Quantized { .. } => Strategy::Quantized,
            Params::Int4 { .. } => Strategy::Int4,
        }
    }
}

/// One entry of the header's `tensors` map. Its shape is packed inline (up to four dimensions
/// below 2^28) and its dtype names inline (every name numpy gives is short), so an entry owns
/// no heap memory in the usual case.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    pub shape: PackedShape,
    /// dtype of the delta as the reference records it (always "float32" when written here;
    /// kept as the file spells it, since it is echoed).
    pub dtype: DtypeName,
    /// Version 2: dtype of the base tensor ("float32", "bfloat16", "float16", "float64", or an
    /// integer or bool dtype), as the file spells it.
    pub base_dtype: Option<DtypeName>,
    pub params: Params,
}

/// A dtype name as a file spells it: stored inline up to 24 bytes.
pub(crate) type DtypeName = compact_str::CompactString;

/// The dimensions of a tensor entry as LEB128 varints (seven bits a byte): inline up to 16
/// bytes, and never more bytes than the dimensions take as JSON text (a dimension "0," is two
/// bytes of JSON, one here; eight as a u64).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct PackedShape {
    bytes: SmallVec<[u8; 16]>,
}

impl PackedShape {
    pub fn new() -> PackedShape {
        PackedShape::default()
    }

    pub fn from_slice(dims: &[u64]) -> PackedShape {
        dims.iter().copied().collect()
    }

    pub fn push(&mut self, mut dim: u64) {
        loop {
            let low = (dim & 0x7f) as u8;
            dim >>= 7;
            if dim == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }

    /// The dimensions, first to last.
    pub fn iter(&self) -> PackedShapeIter<'_> {
        PackedShapeIter { bytes: &self.bytes }
    }

    /// Number of dimensions.
    pub fn len(&self) -> usize {
        self.bytes.iter().filter(|b| *b & 0x80 == 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn to_vec(&self) -> Vec<u64> {
        self.iter().collect()
    }

    /// The dimensions unpacked (inline up to four).
    pub fn unpack(&self) -> Shape {
        self.iter().collect()
    }
}

impl FromIterator<u64> for PackedShape {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> PackedShape {
        let mut shape = PackedShape::new();
        for d in iter {
            shape.push(d);
        }
        shape
    }
}

/// Shown as the list of dimensions, as a `Vec<u64>` is.
impl std::fmt::Debug for PackedShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Serialized as the list of dimensions, as a `&[u64]` is.
impl serde::Serialize for PackedShape {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'a> IntoIterator for &'a PackedShape {
    type Item = u64;
    type IntoIter = PackedShapeIter<'a>;
    fn into_iter(self) -> PackedShapeIter<'a> {
        self.iter()
    }
}

/// The dimensions of a [`PackedShape`].
#[derive(Debug, Clone)]
pub struct PackedShapeIter<'a> {
    bytes: &'a [u8],
}

impl Iterator for PackedShapeIter<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        let mut dim = 0u64;
        let mut shift = 0;
        while let Some((&b, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            dim |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Some(dim);
            }
            shift += 7;
        }
        None
    }
}

impl TensorEntry {
    pub fn strategy(&self) -> Strategy {
        self.params.strategy()
    }

    /// Number of elements of the shape (1 for a scalar); None on overflow.
    pub fn n_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, u64::checked_mul)
    }
}

/// The parsed JSON header.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The structural hash of the base the delta applies to.
    pub parent_hash: String,
    /// How the changes are stored.
    pub strategy: Strategy,
    /// The fine-tuned model's safetensors `__metadata__`, written when it differs from the
    /// base's, so `apply` rebuilds it (readers that do not know the key skip it).
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
    /// What a lossy delta loses against the fine-tune it was made from, measured by `create`
    /// (readers that do not know the key skip it).
    pub loss: Option<LossFigures>,
    /// Sorted by name.
    pub tensors: Tensors,
}

/// Header key `loss`: rel_l2 = ‖rebuilt − ft‖ / ‖ft‖ and the fraction of the update lost =
/// ‖rebuilt − ft‖ / ‖ft − base‖, over the model and for the tensor that lost the most. A
/// figure is null when infinite (a zero update that does not come back exactly).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossFigures {
    /// ‖rebuilt − ft‖ / ‖ft‖ over the whole model.
    pub rel_l2: Option<f64>,
    /// ‖rebuilt − ft‖ / ‖ft − base‖ over the whole model: the share of the update lost.
    pub update_lost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The tensor that lost the largest share of its update.
    pub worst_tensor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// That tensor's rel_l2.
    pub worst_rel_l2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// That tensor's share of its update lost.
    pub worst_update_lost: Option<f64>,
    /// The tensor farthest from the fine-tune (the largest rel_l2), which may not be the one
    /// that lost the largest share of its update: a tensor with a small update can lose all
    /// of it and still be close. Absent in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_rel_l2_tensor: Option<String>,
    /// That tensor's rel_l2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_rel_l2: Option<f64>,
    /// That tensor's share of its update lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_rel_l2_update_lost: Option<f64>,
}

/// The tensors of a `.wdelta` header by name ([`crate::table::NameTable`]); a tensor's position
/// in name order also indexes its records ([`RecordIndex`]), so each name is held once.
pub(crate) type Tensors = crate::table::NameTable<TensorEntry>;

/// Dimensions of an array record: inline up to two (the arrays of every strategy are 1-D).
pub(crate) type RecordShape = SmallVec<[u64; 2]>;

/// Where one array record lies and what it declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub dtype: ArrayDtype,
    pub shape: RecordShape,
    /// Offset of the raw bytes in the file.
    pub data_offset: usize,
    pub data_len: usize,
    /// Offset of the record (its tensor-name length) in the file.
    pub record_offset: usize,
    /// Bytes of the whole record, framing included.
    pub record_len: usize,
}

impl Record {
    pub fn len(&self) -> usize {
        self.data_len / self.dtype.size() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.data_len == 0
    }
}

/// The records of a file, by tensor position (in [`Tensors`]) and field. A tensor has a slot
/// per field of its strategy only, and its name is not held again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordIndex {
    /// The slots of tensor i are `slots[start[i]..start[i + 1]]`, in the order of its
    /// strategy's fields.
    start: Vec<u32>,
    slots: Vec<Option<Record>>,
    len: usize,
}

impl RecordIndex {
    /// Empty slots for the fields of every tensor of `tensors`.
    pub fn for_tensors(tensors: &Tensors) -> RecordIndex {
        let mut start = Vec::with_capacity(tensors.len() + 1);
        let mut total = 0u32;
        start.push(0);
        for e in tensors.values() {
            total += e.strategy().fields().len() as u32;
            start.push(total);
        }
        let mut slots = Vec::new();
        slots.resize(total as usize, None);
        RecordIndex {
            start,
            slots,
            len: 0,
        }
    }

    /// The slots of the tensor at `position`, in the order of its strategy's fields.
    pub fn of_tensor(&self, position: usize) -> &[Option<Record>] {
        match (self.start.get(position), self.start.get(position + 1)) {
            (Some(&lo), Some(&hi)) => &self.slots[lo as usize..hi as usize],
            _ => &[],
        }
    }

    /// The record of field number `slot` (in its strategy's order) of the tensor at `position`.
    pub fn get(&self, position: usize, slot: usize) -> Option<&Record> {
        self.of_tensor(position).get(slot)?.as_ref()
    }

    pub fn contains(&self, position: usize, slot: usize) -> bool {
        self.get(position, slot).is_some()
    }

    /// Adds a record; false (and nothing changed) when there is no such slot or it is taken.
    pub fn insert(&mut self, position: usize, slot: usize, record: Record) -> bool {
        let (Some(&lo), Some(&hi)) = (self.start.get(position), self.start.get(position + 1))
        else {
            return false;
        };
        let at = lo as usize + slot;
        if at >= hi as usize || self.slots[at].is_some() {
            return false;
        }
        self.slots[at] = Some(record);
        self.len += 1;
        true
    }

    /// Every record, by tensor position and then field order.
    pub fn values(&self) -> impl Iterator<Item = &Record> {
        self.slots.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Rows of the quantized strategy: shape[0] for 2-D and up, else 1.
pub(crate) fn quantized_rows(shape: &[u64]) -> u64 {
    if shape.len() > 1 { shape[0] } else { 1 }
}

/// Columns of the quantized strategy: the product of shape[1:], or n for 0-D and 1-D.
pub(crate) fn quantized_cols(shape: &[u64]) -> u64 {
    if shape.len() > 1 {
        shape[1..].iter().fold(1u64, |a, &d| a.saturating_mul(d))
    } else {
        shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }
}

/// Borrowed raw bytes of one array.
#[derive(Debug, Clone, Copy)]
pub struct ArrayRef<'a> {
    pub dtype: ArrayDtype,
    pub data: &'a [u8],
}

/// The arrays of one tensor in the order of [`Strategy::fields`].
#[derive(Debug, Clone)]
pub struct TensorArrays<'a> {
    pub fields: Vec<ArrayRef<'a>>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::artifact::TensorName;

    fn entry(n: u64) -> TensorEntry {
        TensorEntry {
            shape: PackedShape::from_slice(&[n]),
            dtype: "float32".into(),
            base_dtype: None,
            params: Params::Sparse { sparsity: 0.5 },
        }
    }

    #[test]
    fn tensors_are_sorted_and_a_repeated_name_keeps_its_last_entry_as_a_map_does() {
        // A scrambled order with repeats, against the map it stands for.
        let names: Vec<String> = (0..500u64)
            .map(|i| format!("t{:03}", (i * 7919) % 211))
            .collect();
        let mut map = BTreeMap::new();
        let mut items = Vec::new();
        for (i, name) in names.iter().enumerate() {
            map.insert(name.clone(), entry(i as u64));
            items.push((TensorName::from(name.as_str()), entry(i as u64)));
        }
        let tensors = Tensors::from_unsorted(items);
        assert_eq!(tensors.len(), map.len());
        let ours: Vec<(&str, &TensorEntry)> = tensors.iter().collect();
        let theirs: Vec<(&str, &TensorEntry)> = map.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert_eq!(ours, theirs);
        for (i, (name, e)) in map.iter().enumerate() {
            assert_eq!(tensors.position(name), Some(i));
            assert_eq!(tensors.get(name), Some(e));
            assert_eq!(&tensors[name.as_str()], e);
        }
        assert!(!tensors.contains_key("t999"));
        assert_eq!(Tensors::from(map), tensors);
    }

    #[test]
    fn insert_keeps_the_order() {
        let mut tensors = Tensors::new();
        assert_eq!(tensors.insert("b", entry(1)), None);
        assert_eq!(tensors.insert("a", entry(2)), None);
        assert_eq!(tensors.insert("b", entry(3)), Some(entry(1)));
        let names: Vec<&str> = tensors.keys().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(tensors["b"], entry(3));
    }

    #[test]
    fn records_have_a_slot_per_field_of_their_tensors_strategy() {
        let mut tensors = Tensors::new();
        tensors.insert("s", entry(1));
        let mut int4 = entry(1);
        int4.params = Params::Int4 {
            outlier_fraction: 0.0,
            n_elements: 1,
            n_outliers: 0,
            layout: 2,
        };
        tensors.insert("i", int4);
        let mut index = RecordIndex::for_tensors(&tensors);
        let record = |at: usize| Record {
            dtype: ArrayDtype::Uint8,
            shape: RecordShape::from_slice(&[1]),
            data_offset: at,
            data_len: 1,
            record_offset: at,
            record_len: 1,
        };
        // "i" (position 0) has five slots, "s" (position 1) two.
        assert_eq!(index.of_tensor(0).len(), 5);
        assert_eq!(index.of_tensor(1).len(), 2);
        assert!(index.of_tensor(2).is_empty());
        assert!(index.insert(0, 4, record(1)));
        assert!(!index.insert(0, 4, record(2)), "a taken slot");
        assert!(!index.insert(1, 2, record(3)), "no such slot");
        assert!(!index.insert(2, 0, record(4)), "no such tensor");
        assert!(index.insert(1, 1, record(5)));
        assert_eq!(index.len(), 2);
        assert_eq!(index.get(0, 4), Some(&record(1)));
        assert_eq!(index.get(1, 0), None);
        let offsets: Vec<usize> = index.values().map(|r| r.record_offset).collect();
        assert_eq!(offsets, [1, 5]);
    }

    #[test]
    fn packed_shapes_round_trip_and_read_as_lists() {
        let cases: [&[u64]; 5] = [
            &[],
            &[0],
            &[127, 128, 16383, 16384],
            &[u64::MAX, 0, 1 << 63, (1 << 56) - 1],
            &[3; 64],
        ];
        for dims in cases {
            let packed = PackedShape::from_slice(dims);
            assert_eq!(packed.to_vec(), dims);
            assert_eq!(packed.len(), dims.len());
            assert_eq!(packed.is_empty(), dims.is_empty());
            assert_eq!(packed.unpack().as_slice(), dims);
            assert_eq!(format!("{packed:?}"), format!("{:?}", dims.to_vec()));
            assert_eq!(
                serde_json::to_string(&packed).unwrap(),
                serde_json::to_string(dims).unwrap()
            );
        }
        // Never more bytes than the JSON text of the dimensions.
        assert!(PackedShape::from_slice(&[0; 16]).bytes.len() <= 16);
        assert!(!PackedShape::from_slice(&[0; 16]).bytes.spilled());
        assert!(PackedShape::from_slice(&[u64::MAX]).bytes.len() <= 20);
    }

    #[test]
    fn the_parsed_structures_stay_small() {
        // What a tensor costs besides its name beyond 24 bytes: an entry with its inline name,
        // and a record per field.
        assert!(std::mem::size_of::<(TensorName, TensorEntry)>() <= 128);
        assert!(std::mem::size_of::<Option<Record>>() <= 64);
    }
}
