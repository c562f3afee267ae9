//! Properties of the structural hash on random GGUF files written by a small test-only writer:
//! the order of metadata and tensors in the file does not matter, any single change of a value,
//! key, dtype, shape or tensor name does; and on random files our canonical JSON equals the
//! independent Python reference's (scripts/reference_identity.py, built on gguf-py).

mod common;

use std::path::Path;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRng, TestRunner};

use weight_inspect::read_bytes;
use weight_inspect::{canonical_json, structural_hash};

// ---------------------------------------------------------------------------------------------
// A GGUF v3 little-endian writer (test-only).

#[derive(Debug, Clone, PartialEq)]
enum V {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    /// Bit pattern.
    F32(u32),
    Bool(bool),
    Str(String),
    /// Element type id and items (all of that type; arrays of arrays use type 9).
    Arr(u32, Vec<V>),
    U64(u64),
    I64(i64),
    /// Bit pattern.
    F64(u64),
}

impl V {
    fn type_id(&self) -> u32 {
        match self {
            V::U8(_) => 0,
            V::I8(_) => 1,
            V::U16(_) => 2,
            V::I16(_) => 3,
            V::U32(_) => 4,
            V::I32(_) => 5,
            V::F32(_) => 6,
            V::Bool(_) => 7,
            V::Str(_) => 8,
            V::Arr(..) => 9,
            V::U64(_) => 10,
            V::I64(_) => 11,
            V::F64(_) => 12,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            V::U8(v) => out.push(*v),
            V::I8(v) => out.extend(v.to_le_bytes()),
            V::U16(v) => out.extend(v.to_le_bytes()),
            V::I16(v) => out.extend(v.to_le_bytes()),
            V::U32(v) | V::F32(v) => out.extend(v.to_le_bytes()),
            V::I32(v) => out.extend(v.to_le_bytes()),
            V::Bool(v) => out.push(u8::from(*v)),
            V::Str(s) => write_str(out, s),
            V::Arr(t, items) => {
                out.extend(t.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    item.write(out);
                }
            }
            V::U64(v) | V::F64(v) => out.extend(v.to_le_bytes()),
            V::I64(v) => out.extend(v.to_le_bytes()),
        }
    }

    /// A different value of the same type whose canonical form differs too.
    fn changed(&self) -> V {
        match self {
            V::U8(v) => V::U8(v.wrapping_add(1)),
            V::I8(v) => V::I8(v.wrapping_add(1)),
            V::U16(v) => V::U16(v.wrapping_add(1)),
            V::I16(v) => V::I16(v.wrapping_add(1)),
            V::U32(v) => V::U32(v.wrapping_add(1)),
            V::I32(v) => V::I32(v.wrapping_add(1)),
            V::F32(v) => V::F32(v ^ 1),
            V::Bool(v) => V::Bool(!v),
            V::Str(s) => V::Str(format!("{s}x")),
            V::Arr(t, items) if items.is_empty() => V::Arr(*t, vec![default_of(*t)]),
            V::Arr(t, items) => {
                let mut items = items.clone();
                items[0] = items[0].changed();
                V::Arr(*t, items)
            }
            V::U64(v) => V::U64(v.wrapping_add(1)),
            V::I64(v) => V::I64(v.wrapping_add(1)),
            V::F64(v) => V::F64(v ^ 1),
        }
    }
}

fn default_of(type_id: u32) -> V {
    match type_id {
        0 => V::U8(0),
        1 => V::I8(0),
        2 => V::U16(0),
        3 => V::I16(0),
        4 => V::U32(0),
        5 => V::I32(0),
        6 => V::F32(0),
        7 => V::Bool(false),
        8 => V::Str(String::new()),
        9 => V::Arr(4, vec![]),
        10 => V::U64(0),
        11 => V::I64(0),
        _ => V::F64(0),
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// (ggml type id, block size, bytes per block) of the types the generator uses.
const TYPES: &[(u32, u64, u64)] = &[
    (0, 1, 4),      // f32
    (1, 1, 2),      // f16
    (30, 1, 2),     // bf16
    (2, 32, 18),    // q4_0
    (8, 32, 34),    // q8_0
    (12, 256, 144), // q4_k
    (14, 256, 210), // q6_k
    (16, 256, 66),  // iq2_xxs
];

#[derive(Debug, Clone, PartialEq)]
struct Tensor {
    name: String,
    /// Index into TYPES.
    ty: usize,
    /// ne[0] is in blocks of the type, the rest in elements.
    blocks0: u64,
    dims_rest: Vec<u64>,
}

impl Tensor {
    fn dims(&self) -> Vec<u64> {
        let mut dims = vec![self.blocks0 * TYPES[self.ty].1];
        dims.extend(&self.dims_rest);
        dims
    }

    fn byte_len(&self) -> u64 {
        let (_, _, size) = TYPES[self.ty];
        self.blocks0 * size * self.dims_rest.iter().product::<u64>()
    }
}

fn gguf(kvs: &[(String, V)], tensors: &[Tensor]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kvs.len() as u64).to_le_bytes());
    for (key, value) in kvs {
        write_str(&mut out, key);
        out.extend(value.type_id().to_le_bytes());
        value.write(&mut out);
    }
    let mut offset = 0u64;
    for t in tensors {
        write_str(&mut out, &t.name);
        let dims = t.dims();
        out.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(TYPES[t.ty].0.to_le_bytes());
        out.extend(offset.to_le_bytes());
        offset += t.byte_len().div_ceil(32) * 32;
    }
    out.resize(out.len().div_ceil(32) * 32, 0);
    for t in tensors {
        let start = out.len();
        out.extend((0..t.byte_len()).map(|i| (i % 251) as u8));
        out.resize(start + (t.byte_len().div_ceil(32) * 32) as usize, 0);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Strategies.

fn scalar() -> impl Strategy<Value = V> {
    prop_oneof![
        any::<u8>().prop_map(V::U8),
        any::<i8>().prop_map(V::I8),
        any::<u16>().prop_map(V::U16),
        any::<i16>().prop_map(V::I16),
        any::<u32>().prop_map(V::U32),
        any::<i32>().prop_map(V::I32),
        any::<u32>().prop_map(V::F32),
        any::<bool>().prop_map(V::Bool),
        any::<u64>().prop_map(V::U64),
        any::<i64>().prop_map(V::I64),
        any::<u64>().prop_map(V::F64),
        text().prop_map(V::Str),
    ]
}

/// Strings with ASCII, controls, quotes, backslashes and multi-byte characters.
fn text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9 \"\\\\/\u{0}-\u{1f}\u{7f}é日🦙\u{2028}]{0,12}").unwrap()
}

fn key() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9._é🦙\"\\\\\t]{1,16}")
        .unwrap()
        .prop_filter("general.alignment changes the layout", |k| {
            k != "general.alignment"
        })
}

/// An array whose items all have the type of its first generated item.
fn array_of_scalars() -> impl Strategy<Value = V> {
    (scalar(), 0usize..5).prop_flat_map(|(seed, n)| {
        let t = seed.type_id();
        vec(
            scalar().prop_filter("same type", move |v| v.type_id() == t),
            n,
        )
        .prop_map(move |items| V::Arr(t, items))
    })
}

fn value() -> impl Strategy<Value = V> {
    let arrays = array_of_scalars().prop_recursive(3, 16, 3, |inner| {
        vec(inner, 0..3).prop_map(|items| V::Arr(9, items))
    });
    prop_oneof![3 => scalar(), 1 => arrays]
}

fn tensor_parts() -> impl Strategy<Value = (usize, u64, Vec<u64>)> {
    (0..TYPES.len(), 1u64..3, vec(1u64..4, 0..3))
}

fn artifact_parts() -> impl Strategy<Value = (Vec<(String, V)>, Vec<Tensor>)> {
    let kvs = btree_map(key(), value(), 0..8).prop_map(|m| m.into_iter().collect::<Vec<_>>());
    let tensors = btree_map(
        proptest::string::string_regex("[a-z0-9._ü]{1,12}").unwrap(),
        tensor_parts(),
        0..6,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(name, (ty, blocks0, dims_rest))| Tensor {
                name,
                ty,
                blocks0,
                dims_rest,
            })
            .collect::<Vec<_>>()
    });
    (kvs, tensors)
}

fn hash_of(bytes: &[u8]) -> String {
    let artifact =
        read_bytes(Path::new("generated.gguf"), bytes).expect("generated GGUF must parse");
    assert!(
        !artifact.layout.is_truncated(),
        "generated GGUF reported truncated"
    );
    structural_hash(&artifact)
}

#[derive(Debug, Clone)]
enum Mutation {
    Value(usize),
    Key(usize),
    Dtype(usize),
    Shape(usize),
    Name(usize),
    AddKey,
    RemoveKey(usize),
    RemoveTensor(usize),
}

fn apply(kvs: &mut Vec<(String, V)>, tensors: &mut Vec<Tensor>, m: &Mutation) -> bool {
    let nk = kvs.len();
    let nt = tensors.len();
    match *m {
        Mutation::Value(i) if nk > 0 => kvs[i % nk].1 = kvs[i % nk].1.changed(),
        Mutation::Key(i) if nk > 0 => {
            let new = format!("{}~", kvs[i % nk].0);
            if kvs.iter().any(|(k, _)| *k == new) {
                return false;
            }
            kvs[i % nk].0 = new;
        }
        Mutation::Dtype(i) if nt > 0 => {
            let t = &mut tensors[i % nt];
            // Same element count and ne[0] block multiple: only the dtype changes (byte_length
            // may change with it).
            let old = TYPES[t.ty];
            let elems0 = t.blocks0 * old.1;
            let candidates: Vec<usize> = (0..TYPES.len())
                .filter(|&j| j != t.ty && elems0.is_multiple_of(TYPES[j].1))
                .collect();
            if candidates.is_empty() {
                return false;
            }
            let j = candidates[i % candidates.len()];
            t.blocks0 = elems0 / TYPES[j].1;
            t.ty = j;
        }
        Mutation::Shape(i) if nt > 0 => {
            let t = &mut tensors[i % nt];
            if t.dims_rest.is_empty() {
                t.dims_rest.push(2);
            } else {
                t.dims_rest[0] += 1;
            }
        }
        Mutation::Name(i) if nt > 0 => {
            let new = format!("{}~", tensors[i % nt].name);
            if tensors.iter().any(|t| t.name == new) {
                return false;
            }
            tensors[i % nt].name = new;
        }
        Mutation::AddKey => {
            if kvs.iter().any(|(k, _)| k == "added.key") {
                return false;
            }
            kvs.push(("added.key".into(), V::Bool(true)));
        }
        Mutation::RemoveKey(i) if nk > 0 => {
            kvs.remove(i % nk);
        }
        Mutation::RemoveTensor(i) if nt > 0 => {
            tensors.remove(i % nt);
        }
        _ => return false,
    }
    true
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Value),
        any::<usize>().prop_map(Mutation::Key),
        any::<usize>().prop_map(Mutation::Dtype),
        any::<usize>().prop_map(Mutation::Shape),
        any::<usize>().prop_map(Mutation::Name),
        Just(Mutation::AddKey),
        any::<usize>().prop_map(Mutation::RemoveKey),
        any::<usize>().prop_map(Mutation::RemoveTensor),
    ]
}

proptest! {
    #![proptest_config(Config { cases: 64, ..Config::default() })]

    #[test]
    fn order_of_metadata_and_tensors_does_not_matter(
        (kvs, tensors, kv_perm, tensor_perm) in artifact_parts().prop_flat_map(|(kvs, tensors)| {
            let kv_perm = Just((0..kvs.len()).collect::<Vec<_>>()).prop_shuffle();
            let tensor_perm = Just((0..tensors.len()).collect::<Vec<_>>()).prop_shuffle();
            (Just(kvs), Just(tensors), kv_perm, tensor_perm)
        })
    ) {
        let shuffled_kvs: Vec<_> = kv_perm.iter().map(|&i| kvs[i].clone()).collect();
        let shuffled_tensors: Vec<_> = tensor_perm.iter().map(|&i| tensors[i].clone()).collect();
        let a = gguf(&kvs, &tensors);
        let b = gguf(&shuffled_kvs, &shuffled_tensors);
        prop_assert_eq!(hash_of(&a), hash_of(&b));
    }

    #[test]
    fn any_single_change_changes_the_hash(
        (kvs, tensors) in artifact_parts(),
        m in mutation(),
    ) {
        let (mut kvs2, mut tensors2) = (kvs.clone(), tensors.clone());
        prop_assume!(apply(&mut kvs2, &mut tensors2, &m));
        let a = gguf(&kvs, &tensors);
        let b = gguf(&kvs2, &tensors2);
        prop_assert_ne!(hash_of(&a), hash_of(&b), "mutation {:?} kept the hash", m);
    }
}

/// 64 random files, deterministic seed: our canonical JSON equals the Python reference's.
#[test]
fn random_files_match_the_python_reference() {
    let dir = tempfile::tempdir().unwrap();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(Config::default().rng_algorithm),
    );
    let strategy = artifact_parts();
    let mut paths = Vec::new();
    let mut ours = Vec::new();
    for i in 0..64 {
        let (kvs, tensors) = strategy.new_tree(&mut runner).unwrap().current();
        let bytes = gguf(&kvs, &tensors);
        let path = dir.path().join(format!("random{i}.gguf"));
        std::fs::write(&path, &bytes).unwrap();
        let artifact = read_bytes(&path, &bytes).unwrap();
        ours.push((
            String::from_utf8(canonical_json(&artifact)).unwrap(),
            structural_hash(&artifact),
        ));
        paths.push(path.to_str().unwrap().to_owned());
    }
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let out = common::run_python("reference_identity.py", &args);
    let lines: Vec<serde_json::Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), ours.len());
    for ((path, (canonical, hash)), reference) in paths.iter().zip(&ours).zip(&lines) {
        assert_eq!(
            canonical,
            reference["canonical"].as_str().unwrap(),
            "canonical JSON of {path}"
        );
        assert_eq!(
            hash,
            reference["structural_hash"].as_str().unwrap(),
            "structural hash of {path}"
        );
    }
}
