//! PyTorch checkpoints (`torch.save`: `.bin`, `.pt`, `.pth`, `.ckpt`), read without running
//! them. Loading a pickle with Python calls whatever callables it names — `os.system` included —
//! which is why safetensors exists; here a restricted pickle machine ([`machine`]) builds only
//! what a state dict is made of and refuses every other global by name and offset.
//!
//! Two layouts:
//! - zip (torch ≥ 1.6): `FOLDER/data.pkl` (the object), `FOLDER/data/KEY` (one member per
//!   storage, stored uncompressed), `FOLDER/byteorder`, `FOLDER/version` ([`zip`]);
//! - legacy: five pickles back to back (magic number, protocol version, system info, the
//!   object, the storage keys), then each storage as an 8-byte element count and its bytes.
//!
//! Tensors are views of storages: a storage, an offset, a size and a stride ([`torch`]). The
//! artifact names each tensor by its key path (`state_dict.layer.weight`), gives its dtype, its
//! shape and the bytes of the tensor (not of its storage), and records strided views in the
//! layout so value diffs read the right elements. Plain values beside the tensors (numbers,
//! strings, booleans, lists of one kind of them) are the metadata (docs/SPEC.md §5b).
//!
//! [`sniff`] lists what any pickle imports, for the policy's view of pickle files; it describes
//! what the reader refuses too.

mod allowlist;
pub(crate) mod budget;
mod error;
mod groups;
mod machine;
mod numpy;
mod object;
mod opcodes;
mod rebuild;
mod scan;
mod torch;
mod walk;
mod zip;

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

pub(crate) use allowlist::{is_expected_import, tier};
pub(crate) use error::PytorchError;
use machine::Storages;
use object::{Finding, Object};
pub(crate) use scan::PickleReport;
pub use scan::sniff;
pub(crate) use scan::{dangerous_imports, scan_any};
use torch::{Built, Storage, Tensor};
pub(crate) use zip::{DirectoryCheck, ZipError};

/// Entry points for the fuzz targets (`fuzz/`), not part of the interface.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::zip::assert_directory_agrees_with_local_headers;

    /// Judges prefixes of `bytes` (a quarter, a half) by their tail as the header readers do,
    /// following each request to read from earlier: never a panic, and every such request is
    /// for bytes before the tail given (so the readers' loops end).
    pub fn judge_prefixes_by_tail(bytes: &[u8]) {
        let len = bytes.len() as u64;
        for cut in [bytes.len() / 4, bytes.len() / 2] {
            let prefix = &bytes[..cut];
            let Some(mut start) = super::zip_tail_start(prefix, len) else {
                continue;
            };
            loop {
                let tail = &bytes[start as usize..];
                match super::check_zip_tail(prefix, tail, start, len) {
                    Ok(super::DirectoryCheck::ReadFrom(earlier)) => {
                        assert!(
                            earlier < start,
                            "asked to read from {earlier}, not before {start}"
                        );
                        start = earlier;
                    }
                    Ok(super::DirectoryCheck::Agrees) | Err(_) => break,
                }
            }
        }
    }

    /// Runs the pickle machine (and the walk, when it stops) on `bytes` with a budget of
    /// [`super::budget::BYTES_PER_PICKLE_BYTE`] per byte and `base` bytes: what was charged,
    /// the budget, and whether the pickle was accepted.
    pub fn run_pickle(bytes: &[u8], base: u64) -> (u64, u64, bool) {
        let mut budget = super::budget::Budget::with_base(bytes.len(), base);
        let mut none = super::NoStorages;
        let accepted = super::machine::run(bytes, 0, "data.pkl", &mut none, &mut budget)
            .and_then(|(root, _)| super::walk::walk(&root, 1 << 16, &mut budget))
            .is_ok();
        (budget.spent(), budget.limit(), accepted)
    }
}

use crate::artifact::{Artifact, Format, Layout, StridedView, TensorInfo, TensorName, Tensors};
use crate::escape::quoted;

/// What the machine may build: this many objects for each byte of pickle, over every path to
/// them (a pickle that refers to one list from many places is walked once per place).
const ENTRIES_PER_PICKLE_BYTE: usize = 4;

/// Whether `bytes` (the first bytes of a file) are a pickle checkpoint: a zip archive holding a
/// `data.pkl`, or a pickle stream whose first opcodes read.
pub(crate) fn detect(bytes: &[u8]) -> bool {
    sniff(bytes).is_some()
}

/// Parses a checkpoint from `bytes`, the first bytes of a `file_len`-byte file (all of it, or a
/// prefix holding the pickle: storages beyond it are reported as missing data, and the identity
/// is the same as the whole file's).
pub fn parse_prefix(bytes: &[u8], file_len: u64) -> Result<Artifact, PytorchError> {
    if bytes.starts_with(b"PK") {
        parse_zip(bytes, file_len)
    } else {
        parse_legacy(bytes, file_len)
    }
}

/// Where the last bytes of the file to read start, when a header parsed from `prefix`, the
/// first bytes of a `file_len`-byte zip checkpoint, was read by local headers (the prefix does
/// not reach the central directory): those bytes hold the directory torch reads, and
/// [`check_zip_tail`] judges the prefix by it. None when no such check is needed.
pub(crate) fn zip_tail_start(prefix: &[u8], file_len: u64) -> Option<u64> {
    if !prefix.starts_with(b"PK") || prefix.len() as u64 >= file_len {
        return None;
    }
    match zip::members(prefix) {
        Ok(Some(archive)) if !archive.complete => {
            Some(file_len.saturating_sub(zip::END_RECORD_SEARCH))
        }
        _ => None,
    }
}

/// Judges the members read from `prefix` by the central directory in `tail` (the file's bytes
/// from `tail_start` to its end): [`DirectoryCheck::Agrees`], or where to read from for the
/// whole directory (within the header cap), or the error that refuses the file.
pub(crate) fn check_zip_tail(
    prefix: &[u8],
    tail: &[u8],
    tail_start: u64,
    file_len: u64,
) -> Result<DirectoryCheck, PytorchError> {
    let check = zip::check_prefix_against_tail(prefix, tail, tail_start, file_len)?;
    if let DirectoryCheck::ReadFrom(start) = check {
        let limit = super::limits::max_header_bytes();
        let size = file_len - start;
        if size > limit || start >= tail_start {
            return Err(ZipError::DirectoryTooLarge {
                offset: start,
                size,
                limit,
                raise: super::limits::how_to_raise(),
            }
            .into());
        }
    }
    Ok(check)
}

/// A checkpoint in full.
pub fn parse(bytes: &[u8]) -> Result<Artifact, PytorchError> {
    parse_prefix(bytes, bytes.len() as u64)
}

fn parse_zip(bytes: &[u8], file_len: u64) -> Result<Artifact, PytorchError> {
    parse_zip_charged(bytes, file_len, &mut None)
}

/// [`parse_zip`]; `spent` receives what the pickle was charged (for tests).
fn parse_zip_charged(
    bytes: &[u8],
    file_len: u64,
    spent: &mut Option<(usize, u64)>,
) -> Result<Artifact, PytorchError> {
    let archive = zip::members(bytes)?.ok_or(PytorchError::NoDataPkl)?;
    // All of the file is here and it has no zip directory: torch refuses it (a file cut
    // short, or local entries meant for other readers), so it is never read as complete.
    let no_directory = !archive.complete && bytes.len() as u64 >= file_len;
    let members = archive.members;
    zip::check_overlaps(&members, bytes)?;
    if let Some(directory) = archive.directory {
        zip::check_tiled(&members, bytes, directory)?;
    }
    let data_pkl = zip::torch_data_pkl(&members).ok_or_else(|| outside_folder(&members))?;
    let folder = data_pkl
        .name
        .strip_suffix("data.pkl")
        .unwrap_or_default()
        .to_owned();
    let pickle = data_pkl.stored_data(bytes)?;
    let limit = super::limits::max_header_bytes();
    if pickle.len() as u64 > limit {
        return Err(PytorchError::PickleTooLarge {
            bytes: pickle.len() as u64,
            limit,
            raise: super::limits::how_to_raise(),
        });
    }
    let big_endian = match members
        .iter()
        .find(|m| m.name == format!("{folder}byteorder"))
    {
        Some(m) => match m.stored_data(bytes) {
            Ok(b"little") => false,
            Ok(b"big") => true,
            Ok(other) => {
                return Err(PytorchError::ByteOrder {
                    found: String::from_utf8_lossy(other).into_owned(),
                });
            }
            // A prefix that does not reach it: storages are not read from a prefix anyway.
            Err(_) => false,
        },
        None => false,
    };
    let mut storages = ZipStorages {
        bytes,
        folder: &folder,
        complete: archive.complete,
        members: members
            .iter()
            .map(|m| (m.name.as_str(), m))
            .collect::<HashMap<_, _>>(),
        loaded: HashMap::new(),
    };
    let mut budget = budget::Budget::for_pickle(pickle.len());
    let (root, _) = machine::run(pickle, 0, "data.pkl", &mut storages, &mut budget)?;
    let header_size = pickle.len() as u64;
    let artifact = artifact(
        &root,
        &root.findings,
        // Where data.pkl lies in the file: numpy arrays' bytes are read in place.
        {
            let start = (pickle.as_ptr() as usize - bytes.as_ptr() as usize) as u64;
            start..start + pickle.len() as u64
        },
        file_len,
        header_size,
        big_endian,
        &mut budget,
    );
    *spent = Some((pickle.len(), budget.spent()));
    if no_directory {
        return without_directory(artifact?, file_len);
    }
    artifact
}

/// A whole file whose zip has no directory: torch finds its members through the directory
/// alone, so none of its tensor data is present as torch reads it. It reads as a file cut
/// short (same identity, incomplete); with no tensor data to miss, it is refused.
fn without_directory(mut artifact: Artifact, file_len: u64) -> Result<Artifact, PytorchError> {
    if artifact.layout.data_expected == 0 {
        return Err(ZipError::NoEndRecord {
            searched: zip::END_RECORD_SEARCH.min(file_len),
            file_len,
        }
        .into());
    }
    artifact.layout.data_present = 0;
    Ok(artifact)
}

/// Why an archive has no data.pkl where torch looks for it (the first entry's folder).
fn outside_folder(members: &[zip::Member]) -> PytorchError {
    let Some(elsewhere) = members.iter().find(|m| zip::is_data_pkl(&m.name)) else {
        return PytorchError::NoDataPkl;
    };
    let first = members.first().map_or("", |m| m.name.as_str());
    PytorchError::DataPklOutsideFolder {
        folder: first.split_once('/').map_or(first, |(f, _)| f).to_owned(),
        elsewhere: elsewhere.name.clone(),
    }
}

/// The storages of a zip archive: `FOLDER/data/KEY` members.
struct ZipStorages<'a> {
    bytes: &'a [u8],
    folder: &'a str,
    /// Whether every member is known (else later ones are beyond the prefix read).
    complete: bool,
    members: HashMap<&'a str, &'a zip::Member>,
    /// One storage object per key: tied weights share it.
    loaded: HashMap<String, Object>,
}

impl Storages for ZipStorages<'_> {
    fn load(&mut self, pid: &Object, offset: usize) -> Result<Object, PytorchError> {
        let (dtype, key, numel) = storage_pid(pid, offset, 5)?;
        if let Some(storage) = self.loaded.get(&key) {
            return Ok(storage.clone());
        }
        let bytes = declared_bytes(dtype, numel, &key)?;
        let member_name = format!("{}data/{key}", self.folder);
        let data = match self.members.get(member_name.as_str()) {
            Some(member) => {
                let range = member.data_range(self.bytes)?;
                let found = range.end - range.start;
                if found != bytes {
                    return Err(PytorchError::StorageSize {
                        key,
                        declared: bytes,
                        found,
                    });
                }
                Some(range.start)
            }
            // Walking the local headers of a prefix, later members are not known.
            None if !self.complete => None,
            None => {
                return Err(PytorchError::MissingStorage {
                    key,
                    member: member_name,
                });
            }
        };
        let storage = Object::Built(Rc::new(Built::Storage(Rc::new(Storage {
            dtype,
            bytes,
            data: std::cell::Cell::new(data),
        }))));
        self.loaded.insert(key, storage.clone());
        Ok(storage)
    }
}

/// `('storage', StorageClass, key, location, numel[, view])`: the storage's dtype (None:
/// untyped bytes), key and element count.
fn storage_pid(
    pid: &Object,
    offset: usize,
    min_len: usize,
) -> Result<(Option<&'static crate::dtype::Dtype>, String, u64), PytorchError> {
    let problem = |p: &str| PytorchError::PersistentId {
        offset,
        problem: p.to_owned(),
    };
    let Object::Tuple(items) = pid else {
        return Err(problem("not a tuple"));
    };
    if items.len() < min_len {
        return Err(problem("too short for a storage"));
    }
    match &items[0] {
        Object::Str(s) if &**s == "storage" => {}
        _ => return Err(problem("not a storage")),
    }
    let dtype = match &items[1] {
        Object::Global(torch::Global::Storage(dtype)) => *dtype,
        _ => return Err(problem("its type is not a storage class")),
    };
    let key = match &items[2] {
        Object::Str(s) => s.to_string(),
        Object::Int(i) => i.to_string(),
        _ => return Err(problem("its key is not a string")),
    };
    let numel = match items.get(4) {
        Some(Object::Int(n)) => u64::try_from(*n).map_err(|_| problem("a negative size"))?,
        _ => return Err(problem("its size is not an integer")),
    };
    Ok((dtype, key, numel))
}

fn declared_bytes(
    dtype: Option<&'static crate::dtype::Dtype>,
    numel: u64,
    key: &str,
) -> Result<u64, PytorchError> {
    let elem = dtype.map_or(1, |d| d.block_bits / 8);
    numel
        .checked_mul(elem)
        .ok_or_else(|| PytorchError::StorageOverflow {
            key: key.to_owned(),
            elements: numel,
            element_bytes: elem,
        })
}

/// The legacy layout's magic number, 0x1950a86a20f9469cfc6c, as the LONG1 bytes pickle writes.
const LEGACY_MAGIC: &[u8] = b"\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";
const LEGACY_PROTOCOL: i64 = 1001;

fn parse_legacy(bytes: &[u8], file_len: u64) -> Result<Artifact, PytorchError> {
    let legacy = |problem: &str| PytorchError::Legacy {
        problem: problem.to_owned(),
    };
    // The legacy layout's pickles share one budget, sized by the bytes they lie in.
    let mut budget = budget::Budget::for_pickle(bytes.len());
    // The first pickle: the magic number. A pickle that is not one is a plain pickle
    // (`pickle.dump` of a dict): read as one, its findings listed like a checkpoint's.
    let Some(magic_end) = legacy_magic(bytes) else {
        return parse_plain(bytes, file_len, &mut budget);
    };
    let mut none = NoStorages;
    let (protocol, after_protocol) = machine::run(
        bytes,
        magic_end,
        "the protocol pickle",
        &mut none,
        &mut budget,
    )?;
    if !matches!(*protocol, Object::Int(LEGACY_PROTOCOL)) {
        return Err(legacy("the protocol version is not 1001"));
    }
    let (sys_info, after_info) = machine::run(
        bytes,
        after_protocol,
        "the system-info pickle",
        &mut none,
        &mut budget,
    )?;
    let big_endian = match &*sys_info {
        Object::Dict(d) => d.borrow().items.iter().any(|(k, v)| {
            matches!(k, Object::Str(s) if &**s == "little_endian")
                && matches!(v, Object::Bool(false))
        }),
        _ => return Err(legacy("the system info is not a dict")),
    };
    let mut storages = LegacyStorages {
        loaded: HashMap::new(),
    };
    let (root, after_object) = machine::run(
        bytes,
        after_info,
        "the object pickle",
        &mut storages,
        &mut budget,
    )?;
    let (keys_graph, data_start) = machine::run(
        bytes,
        after_object,
        "the storage-keys pickle",
        &mut none,
        &mut budget,
    )?;
    let keys: Vec<String> = match &*keys_graph {
        Object::List(list) => list
            .borrow()
            .iter()
            .map(|k| match k {
                Object::Str(s) => Ok(s.to_string()),
                _ => Err(legacy("a storage key that is not a string")),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(legacy("the storage keys are not a list")),
    };
    // Each storage: its element count (8 bytes, little-endian) and its bytes, in key order.
    let mut at = data_start as u64;
    for key in &keys {
        let Some(Object::Built(built)) = storages.loaded.get(key) else {
            return Err(legacy(&format!(
                "storage key {} names no storage of the object",
                quoted(key)
            )));
        };
        let Built::Storage(storage) = &**built else {
            return Err(legacy("a storage key names a tensor"));
        };
        let count_end = at
            .checked_add(8)
            .ok_or_else(|| legacy("offsets overflow"))?;
        if let Some(count) = bytes.get(at as usize..count_end as usize) {
            let elem = storage.dtype.map_or(1, |d| d.block_bits / 8);
            let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
            if count.checked_mul(elem) != Some(storage.bytes) {
                return Err(PytorchError::StorageSize {
                    key: key.clone(),
                    declared: storage.bytes,
                    found: count.saturating_mul(elem),
                });
            }
            storage.data.set(Some(count_end));
        }
        at = count_end
            .checked_add(storage.bytes)
            .ok_or_else(|| legacy("offsets overflow"))?;
    }
    if let Some(key) = storages.loaded.keys().find(|k| !keys.contains(k)) {
        return Err(legacy(&format!(
            "storage {} is not in the storage keys",
            quoted(key)
        )));
    }
    let findings: Vec<Finding> = [&protocol, &sys_info, &root, &keys_graph]
        .iter()
        .flat_map(|graph| graph.findings.iter().cloned())
        .collect();
    artifact(
        &root,
        &findings,
        0..bytes.len() as u64,
        file_len,
        data_start as u64,
        big_endian,
        &mut budget,
    )
}

/// At most this many pickle streams back to back are read from a plain pickle file.
const MAX_PLAIN_STREAMS: usize = 64;

/// A plain pickle, no torch framing: its first stream is the object (numpy arrays in it are
/// its tensors, its plain values metadata); every stream after it (`pickle.load` reads them
/// one after another) is read too, for its findings. Bytes after the last stream that do not
/// start one are not read by pickle either.
fn parse_plain(
    bytes: &[u8],
    file_len: u64,
    budget: &mut budget::Budget,
) -> Result<Artifact, PytorchError> {
    let mut none = NoStorages;
    let (root, mut end) = machine::run(bytes, 0, "the pickle", &mut none, budget)?;
    let mut findings: Vec<Finding> = root.findings.clone();
    let mut streams = 1;
    while end < bytes.len() && starts_a_stream(&bytes[end..]) {
        if streams == MAX_PLAIN_STREAMS {
            return Err(PytorchError::Legacy {
                problem: format!(
                    "more than {MAX_PLAIN_STREAMS} pickle streams back to back (the next at \
                     offset {end})"
                ),
            });
        }
        let (next, after) = machine::run(bytes, end, "a later pickle", &mut none, budget)?;
        findings.extend(next.findings.iter().cloned());
        streams += 1;
        end = after;
    }
    artifact(
        &root,
        &findings,
        0..bytes.len() as u64,
        file_len,
        end as u64,
        false,
        budget,
    )
}

/// Whether `rest` starts as a pickle stream does: PROTO 2..5, or an opcode protocol 0 and 1
/// pickles start with.
fn starts_a_stream(rest: &[u8]) -> bool {
    matches!(
        rest,
        [0x80, 2..=5, ..]
            | [
                b'(' | b'c' | b'}' | b']' | b')' | b'i' | b'N' | b'I' | b'S' | b'V',
                ..
            ]
    )
}

/// The end of the legacy layout's first pickle (PROTO, the magic number, STOP), if it is one.
fn legacy_magic(bytes: &[u8]) -> Option<usize> {
    let mut lexer = opcodes::Lexer::new(bytes, 0);
    match lexer.next_op()?.ok()? {
        (_, opcodes::Op::Proto(_)) => {}
        _ => return None,
    }
    match lexer.next_op()?.ok()? {
        (_, opcodes::Op::Long(opcodes::Long::Binary(b))) if b == LEGACY_MAGIC => {}
        _ => return None,
    }
    match lexer.next_op()?.ok()? {
        (_, opcodes::Op::Stop) => Some(lexer.position()),
        _ => None,
    }
}

/// The pickles around the object name no storage.
struct NoStorages;

impl Storages for NoStorages {
    fn load(&mut self, _: &Object, offset: usize) -> Result<Object, PytorchError> {
        Err(PytorchError::PersistentId {
            offset,
            problem: "a persistent id outside the object pickle".to_owned(),
        })
    }
}

/// The legacy object pickle's storages; their offsets are known once the keys pickle is read.
struct LegacyStorages {
    loaded: HashMap<String, Object>,
}

impl Storages for LegacyStorages {
    fn load(&mut self, pid: &Object, offset: usize) -> Result<Object, PytorchError> {
        let (dtype, key, numel) = storage_pid(pid, offset, 6)?;
        if let Object::Tuple(items) = pid
            && !matches!(items[5], Object::None)
        {
            return Err(PytorchError::PersistentId {
                offset,
                problem: "a view of a storage (torch < 1.0), which is not read".to_owned(),
            });
        }
        if let Some(storage) = self.loaded.get(&key) {
            return Ok(storage.clone());
        }
        let bytes = declared_bytes(dtype, numel, &key)?;
        let storage = Object::Built(Rc::new(Built::Storage(Rc::new(Storage {
            dtype,
            bytes,
            data: std::cell::Cell::new(None),
        }))));
        self.loaded.insert(key, storage.clone());
        Ok(storage)
    }
}

/// The artifact of an unpickled checkpoint: its named tensors and metadata, with their views
/// checked against their storages.
fn artifact(
    root: &Object,
    findings: &[Finding],
    pickle: std::ops::Range<u64>,
    file_len: u64,
    header_size: u64,
    big_endian: bool,
    budget: &mut budget::Budget,
) -> Result<Artifact, PytorchError> {
    let pickle_offset = pickle.start;
    let pickle_len = usize::try_from(pickle.end - pickle.start).unwrap_or(usize::MAX);
    let limit = pickle_len
        .saturating_mul(ENTRIES_PER_PICKLE_BYTE)
        .max(1 << 16);
    let walked = walk::walk(root, limit, budget)?;
    let mut entries: Vec<(TensorName, TensorInfo)> = Vec::with_capacity(walked.tensors.len());
    let mut views: Vec<(String, StridedView)> = Vec::new();
    let mut storages: BTreeMap<*const Storage, (u64, bool)> = BTreeMap::new();
    for (name, tensor) in &walked.tensors {
        check_view(name, tensor)?;
        let elem = tensor.elem_bytes();
        let numel = tensor.numel().expect("checked by check_view");
        let byte_length = numel
            .checked_mul(elem)
            .ok_or_else(|| PytorchError::SizeOverflow {
                name: name.clone(),
                size: tensor.size.to_vec(),
            })?;
        let storage = &tensor.storage;
        let data = storage.data.get();
        let file_offset = data.map_or(0, |d| d.saturating_add(tensor.offset.saturating_mul(elem)));
        let present = data.is_some_and(|d| d.saturating_add(storage.bytes) <= file_len);
        storages.insert(Rc::as_ptr(storage), (storage.bytes, present));
        if !tensor.is_contiguous() {
            views.push((
                name.clone(),
                StridedView {
                    stride: tensor.stride.clone(),
                    storage_start: data.unwrap_or(0),
                    storage_bytes: storage.bytes,
                },
            ));
        }
        entries.push((
            TensorName::from(name.as_str()),
            TensorInfo {
                dtype: tensor.dtype,
                shape: tensor.size.clone(),
                byte_length,
                file_offset,
            },
        ));
    }
    // numpy arrays: bytes in the pickle are read in place; text (protocol 2's latin-1) is not
    // at an offset of the file, so its bytes are decoded (charged to the budget); the values
    // of a Fortran order are not read, and value diffs leave them out.
    let mut values_in_pickle: Vec<String> = Vec::with_capacity(walked.arrays.len());
    let mut decoded: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, array) in &walked.arrays {
        let byte_length = array
            .byte_length()
            .ok_or_else(|| PytorchError::SizeOverflow {
                name: name.clone(),
                size: array.shape.to_vec(),
            })?;
        entries.push((
            TensorName::from(name.as_str()),
            TensorInfo {
                dtype: array.dtype,
                shape: array.shape.clone(),
                byte_length,
                file_offset: match array.data {
                    Some((offset, len)) if len == byte_length && !big_endian => {
                        pickle_offset.saturating_add(offset)
                    }
                    _ => {
                        values_in_pickle.push(name.clone());
                        0
                    }
                },
            },
        ));
        if let Some(text) = array.text.as_ref().filter(|_| !big_endian)
            && let Some(bytes) = numpy::latin1(text, byte_length)
        {
            budget.charge(byte_length)?;
            decoded.push((name.clone(), bytes));
        }
    }
    values_in_pickle.sort_unstable();
    decoded.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let data_expected = storages.values().map(|(b, _)| b).sum();
    let data_present = storages
        .values()
        .filter(|(_, present)| *present)
        .map(|(b, _)| b)
        .sum();
    let tensors: Tensors = entries.into_iter().collect();
    let views = if views.is_empty() {
        None
    } else {
        let mut table = vec![None; tensors.len()];
        for (name, view) in views {
            if let Some(position) = tensors.position(&name) {
                table[position] = Some(Box::new(view));
            }
        }
        Some(table)
    };
    let groups = groups::of(&walked.root_keys).map(|rule| {
        let mut table = vec!["other"; tensors.len()];
        let names = walked.tensors.iter().map(|(name, _)| name);
        for name in names.chain(walked.arrays.iter().map(|(name, _)| name)) {
            if let Some(position) = tensors.position(name) {
                table[position] = rule.group(name);
            }
        }
        table
    });
    Ok(Artifact {
        format: Format::Pytorch,
        gguf_version: None,
        metadata: walked.metadata,
        tensors,
        layout: Layout {
            file_size: file_len,
            header_size,
            data_expected,
            data_present,
            alignment: None,
            big_endian,
            files: None,
            views,
            findings: reported(findings),
            groups,
            pickle: {
                let training = groups::training(&walked.root_keys);
                (training.is_some() || !values_in_pickle.is_empty()).then(|| {
                    Box::new(crate::artifact::PickleParts {
                        training,
                        values_in_pickle,
                        decoded,
                    })
                })
            },
        },
    })
}

/// The findings with their tiers, most dangerous first (then in the order the pickle names
/// them); a global named by two pickles of the legacy layout once.
fn reported(findings: &[Finding]) -> Vec<crate::artifact::Finding> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<crate::artifact::Finding> = findings
        .iter()
        .filter(|f| seen.insert(f.global.as_str()))
        .map(|f| crate::artifact::Finding {
            global: f.global.clone(),
            tier: allowlist::tier(&f.global).name(),
            offset: f.offset as u64,
            actions: f.actions.clone(),
        })
        .collect();
    out.sort_by_key(|f| allowlist::tier(&f.global));
    out
}

/// A view may only read elements of its storage.
fn check_view(name: &str, tensor: &Tensor) -> Result<(), PytorchError> {
    let overflow = || PytorchError::SizeOverflow {
        name: name.to_owned(),
        size: tensor.size.to_vec(),
    };
    tensor.numel().ok_or_else(overflow)?;
    let needs = tensor.extent().ok_or_else(overflow)?;
    let elem = tensor.elem_bytes().max(1);
    let elements = tensor.storage.bytes / elem;
    if needs > elements {
        return Err(PytorchError::ViewOutsideStorage {
            name: name.to_owned(),
            offset: tensor.offset,
            size: tensor.size.to_vec(),
            stride: tensor.stride.to_vec(),
            needs,
            elements,
        });
    }
    Ok(())
}
