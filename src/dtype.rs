//! Every dtype weight-inspect knows, in one table: the name the structural identity uses
//! (schema 1, docs/SPEC.md §4 and §5), the id a GGUF file stores, the name a safetensors header
//! writes, numpy's name, and the size of its blocks. The format readers look their dtypes up
//! here, and so do value diffs and deltas for sizes and names.

/// One dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dtype {
    /// The name in the identity: lowercase (`"f32"`, `"q4_k"`, `"f8_e4m3"`).
    pub name: &'static str,
    /// The ggml type id a GGUF file stores, for the types GGUF has.
    pub ggml: Option<u32>,
    /// The name in a safetensors header (`"BF16"`), for the types safetensors has.
    pub safetensors: Option<&'static str>,
    /// numpy's name (`"float32"`), for the types numpy has.
    pub numpy: Option<&'static str>,
    /// torch's name (`"float32"`, `"float8_e4m3fn"`), for the types PyTorch checkpoints hold.
    pub torch: Option<&'static str>,
    /// Elements per block: 1 for plain numbers, 32 or 256 for ggml's quantized blocks.
    pub block_size: u64,
    /// Bits per block (bits per element for plain numbers: 4 for `f4`, 6 for `f6_*`).
    pub block_bits: u64,
}

impl Dtype {
    /// The dtype the identity names `name` (`"q4_k"`).
    pub fn by_name(name: &str) -> Option<&'static Dtype> {
        by_name(name)
    }

    /// Bytes per block, for the types whose blocks are whole bytes (all but `f4` and `f6_*`).
    pub fn block_bytes(&self) -> Option<u64> {
        if self.block_bits.is_multiple_of(8) {
            Some(self.block_bits / 8)
        } else {
            None
        }
    }
}

/// Dtypes order by name, the order the identity lists them in.
impl Ord for Dtype {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(other.name)
    }
}

impl PartialOrd for Dtype {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

const fn plain(
    name: &'static str,
    ggml: Option<u32>,
    safetensors: Option<&'static str>,
    numpy: Option<&'static str>,
    bits: u64,
) -> Dtype {
    Dtype {
        name,
        ggml,
        safetensors,
        numpy,
        torch: None,
        block_size: 1,
        block_bits: bits,
    }
}

impl Dtype {
    /// The same dtype, with torch's name for it.
    const fn torch(mut self, name: &'static str) -> Dtype {
        self.torch = Some(name);
        self
    }
}

/// A ggml block type: id, name, elements per block, bytes per block.
const fn ggml(id: u32, name: &'static str, block_size: u64, block_bytes: u64) -> Dtype {
    Dtype {
        name,
        ggml: Some(id),
        safetensors: None,
        numpy: None,
        torch: None,
        block_size,
        block_bits: block_bytes * 8,
    }
}

/// The table. ggml ids 4, 5, 31–33 and 36–38 were removed from ggml and are not here.
pub(crate) const DTYPES: &[Dtype] = &[
    plain("f32", Some(0), Some("F32"), Some("float32"), 32).torch("float32"),
    plain("f16", Some(1), Some("F16"), Some("float16"), 16).torch("float16"),
    ggml(2, "q4_0", 32, 18),
    ggml(3, "q4_1", 32, 20),
    ggml(6, "q5_0", 32, 22),
    ggml(7, "q5_1", 32, 24),
    ggml(8, "q8_0", 32, 34),
    // gguf-py 0.19 says 40 bytes, an older layout; ggml's block_q8_1 is 36.
    ggml(9, "q8_1", 32, 36),
    ggml(10, "q2_k", 256, 84),
    ggml(11, "q3_k", 256, 110),
    ggml(12, "q4_k", 256, 144),
    ggml(13, "q5_k", 256, 176),
    ggml(14, "q6_k", 256, 210),
    ggml(15, "q8_k", 256, 292),
    ggml(16, "iq2_xxs", 256, 66),
    ggml(17, "iq2_xs", 256, 74),
    ggml(18, "iq3_xxs", 256, 98),
    ggml(19, "iq1_s", 256, 50),
    ggml(20, "iq4_nl", 32, 18),
    ggml(21, "iq3_s", 256, 110),
    ggml(22, "iq2_s", 256, 82),
    ggml(23, "iq4_xs", 256, 136),
    plain("i8", Some(24), Some("I8"), Some("int8"), 8).torch("int8"),
    plain("i16", Some(25), Some("I16"), Some("int16"), 16).torch("int16"),
    plain("i32", Some(26), Some("I32"), Some("int32"), 32).torch("int32"),
    plain("i64", Some(27), Some("I64"), Some("int64"), 64).torch("int64"),
    plain("f64", Some(28), Some("F64"), Some("float64"), 64).torch("float64"),
    ggml(29, "iq1_m", 256, 56),
    plain("bf16", Some(30), Some("BF16"), Some("bfloat16"), 16).torch("bfloat16"),
    ggml(34, "tq1_0", 256, 54),
    ggml(35, "tq2_0", 256, 66),
    ggml(39, "mxfp4", 32, 17),
    ggml(40, "nvfp4", 64, 36),
    ggml(41, "q1_0", 128, 18),
    ggml(42, "q2_0", 64, 18),
    plain("bool", None, Some("BOOL"), Some("bool"), 8).torch("bool"),
    plain("u8", None, Some("U8"), Some("uint8"), 8).torch("uint8"),
    plain("u16", None, Some("U16"), Some("uint16"), 16).torch("uint16"),
    plain("u32", None, Some("U32"), Some("uint32"), 32).torch("uint32"),
    plain("u64", None, Some("U64"), Some("uint64"), 64).torch("uint64"),
    plain("c64", None, Some("C64"), Some("complex64"), 64).torch("complex64"),
    plain("f4", None, Some("F4"), None, 4),
    plain("f6_e2m3", None, Some("F6_E2M3"), None, 6),
    plain("f6_e3m2", None, Some("F6_E3M2"), None, 6),
    plain("f8_e5m2", None, Some("F8_E5M2"), None, 8).torch("float8_e5m2"),
    plain("f8_e4m3", None, Some("F8_E4M3"), None, 8).torch("float8_e4m3fn"),
    plain("f8_e8m0", None, Some("F8_E8M0"), None, 8).torch("float8_e8m0fnu"),
    plain("f8_e4m3fnuz", None, Some("F8_E4M3FNUZ"), None, 8).torch("float8_e4m3fnuz"),
    plain("f8_e5m2fnuz", None, Some("F8_E5M2FNUZ"), None, 8).torch("float8_e5m2fnuz"),
    // Only PyTorch has these.
    plain("c128", None, None, Some("complex128"), 128).torch("complex128"),
    plain("c32", None, None, None, 32).torch("complex32"),
    // Two 4-bit floats packed in each byte: an element is the byte.
    plain("f4_e2m1_x2", None, None, None, 8).torch("float4_e2m1fn_x2"),
    plain("bits8", None, None, None, 8).torch("bits8"),
    plain("bits16", None, None, None, 16).torch("bits16"),
    plain("bits1x8", None, None, None, 8).torch("bits1x8"),
    plain("bits2x4", None, None, None, 8).torch("bits2x4"),
    plain("bits4x2", None, None, None, 8).torch("bits4x2"),
];

/// The dtype the identity names `name`.
pub(crate) fn by_name(name: &str) -> Option<&'static Dtype> {
    DTYPES.iter().find(|d| d.name == name)
}

/// The dtype named `name`, at compile time: the block decoders size their blocks by it, so
/// a name the table lacks fails the build.
pub(crate) const fn named(name: &str) -> &'static Dtype {
    let mut i = 0;
    while i < DTYPES.len() {
        if same_str(DTYPES[i].name, name) {
            return &DTYPES[i];
        }
        i += 1;
    }
    panic!("no dtype of that name in the table")
}

const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// For each ggml id, the position of its type in [`DTYPES`] (`u8::MAX`: none); a GGUF header
/// looks its tensors' types up by id.
const GGML_INDEX: [u8; 64] = {
    let mut index = [u8::MAX; 64];
    let mut i = 0;
    while i < DTYPES.len() {
        if let Some(id) = DTYPES[i].ggml {
            index[id as usize] = i as u8;
        }
        i += 1;
    }
    index
};

/// The GGUF type with id `id`.
pub(crate) fn by_ggml_id(id: u32) -> Option<&'static Dtype> {
    let position = *GGML_INDEX.get(id as usize)?;
    DTYPES.get(position as usize)
}

/// The largest ggml id plus one: ids below it that have no type were removed from ggml.
pub(crate) const GGML_ID_END: u32 = 43;

/// The safetensors dtype a header writes as `name` (`"BF16"`).
pub(crate) fn by_safetensors_name(name: &str) -> Option<&'static Dtype> {
    DTYPES.iter().find(|d| d.safetensors == Some(name))
}

/// The dtype torch names `name` (`"float8_e4m3fn"`).
pub(crate) fn by_torch_name(name: &str) -> Option<&'static Dtype> {
    DTYPES.iter().find(|d| d.torch == Some(name))
}

/// The dtype numpy names `name` (`"float32"`).
pub(crate) fn by_numpy_name(name: &str) -> Option<&'static Dtype> {
    DTYPES.iter().find(|d| d.numpy == Some(name))
}

/// The GGUF types, by id.
pub(crate) fn ggml_types() -> impl Iterator<Item = &'static Dtype> {
    let mut types: Vec<&'static Dtype> = DTYPES.iter().filter(|d| d.ggml.is_some()).collect();
    types.sort_by_key(|d| d.ggml);
    types.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_are_unique() {
        for (i, a) in DTYPES.iter().enumerate() {
            for b in &DTYPES[i + 1..] {
                assert_ne!(a.name, b.name);
                assert!(a.ggml.is_none() || a.ggml != b.ggml, "{}", a.name);
                assert!(a.safetensors.is_none() || a.safetensors != b.safetensors);
                assert!(a.numpy.is_none() || a.numpy != b.numpy);
                assert!(a.torch.is_none() || a.torch != b.torch);
            }
        }
    }

    #[test]
    fn names_are_the_lowercased_safetensors_names() {
        for d in DTYPES.iter().filter(|d| d.safetensors.is_some()) {
            assert_eq!(d.safetensors.unwrap().to_ascii_lowercase(), d.name);
        }
    }

    #[test]
    fn the_gguf_table_of_the_spec() {
        let ids: Vec<u32> = ggml_types().map(|d| d.ggml.unwrap()).collect();
        let removed = [4, 5, 31, 32, 33, 36, 37, 38];
        let expected: Vec<u32> = (0..43).filter(|i| !removed.contains(i)).collect();
        assert_eq!(ids, expected);
        let q4_k = by_ggml_id(12).unwrap();
        assert_eq!(
            (q4_k.name, q4_k.block_size, q4_k.block_bits / 8),
            ("q4_k", 256, 144)
        );
        assert_eq!(by_safetensors_name("F6_E3M2").unwrap().block_bits, 6);
    }

    #[test]
    fn the_compile_time_lookup_finds_what_the_runtime_one_does() {
        for d in DTYPES {
            assert!(std::ptr::eq(named(d.name), by_name(d.name).unwrap()));
        }
    }
}
