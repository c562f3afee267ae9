//! What `torch.save` pickles for dense tensors, and nothing else: the globals a state dict
//! names (recognized by name, never called), the storages its persistent ids stand for, the
//! tensors its rebuild functions describe, and the walk from the root object to named tensors
//! and plain metadata.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use super::PytorchError;
use super::machine::{Dict, Object};
use crate::artifact::{Array, F64Bits, Shape, StringArray, Value};
use crate::dtype::Dtype;

/// The globals a checkpoint of dense tensors names. Anything else is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Global {
    OrderedDict,
    RebuildTensor,
    RebuildTensorV2,
    RebuildTensorV3,
    RebuildParameter,
    RebuildParameterWithState,
    /// `torch._tensor._rebuild_from_type_v2`: a tensor subclass rebuilt from a plain tensor.
    RebuildFromTypeV2,
    /// `torch.Tensor` and `torch.nn.parameter.Parameter`, as the classes the above names.
    TensorClass,
    /// A storage class: typed (`torch.FloatStorage`, with its dtype) or untyped.
    Storage(Option<&'static Dtype>),
    /// A dtype (`torch.float8_e4m3fn`), as `_rebuild_tensor_v3` takes it.
    Dtype(&'static Dtype),
}

/// Typed storage classes and the dtype of their elements.
const STORAGES: &[(&str, &str)] = &[
    ("FloatStorage", "float32"),
    ("DoubleStorage", "float64"),
    ("HalfStorage", "float16"),
    ("BFloat16Storage", "bfloat16"),
    ("LongStorage", "int64"),
    ("IntStorage", "int32"),
    ("ShortStorage", "int16"),
    ("CharStorage", "int8"),
    ("ByteStorage", "uint8"),
    ("BoolStorage", "bool"),
    ("ComplexFloatStorage", "complex64"),
    ("ComplexDoubleStorage", "complex128"),
];

/// torch's other names for some dtypes (`torch.float` is `torch.float32`).
const DTYPE_ALIASES: &[(&str, &str)] = &[
    ("float", "float32"),
    ("double", "float64"),
    ("half", "float16"),
    ("long", "int64"),
    ("int", "int32"),
    ("short", "int16"),
    ("cfloat", "complex64"),
    ("cdouble", "complex128"),
    ("chalf", "complex32"),
];

impl Global {
    /// The global `module.name` names, if a checkpoint of dense tensors may name it; else the
    /// error that refuses it, with the offset of the opcode that names it.
    pub(super) fn recognize(
        module: &str,
        name: &str,
        offset: usize,
    ) -> Result<Global, PytorchError> {
        let found = match (module, name) {
            ("collections", "OrderedDict") => Some(Global::OrderedDict),
            ("torch._utils", "_rebuild_tensor") => Some(Global::RebuildTensor),
            ("torch._utils", "_rebuild_tensor_v2") => Some(Global::RebuildTensorV2),
            ("torch._utils", "_rebuild_tensor_v3") => Some(Global::RebuildTensorV3),
            ("torch._utils", "_rebuild_parameter") => Some(Global::RebuildParameter),
            ("torch._utils", "_rebuild_parameter_with_state") => {
                Some(Global::RebuildParameterWithState)
            }
            ("torch._tensor", "_rebuild_from_type_v2") => Some(Global::RebuildFromTypeV2),
            ("torch", "Tensor") | ("torch.nn.parameter", "Parameter") => Some(Global::TensorClass),
            ("torch", "UntypedStorage") | ("torch.storage", "UntypedStorage") => {
                Some(Global::Storage(None))
            }
            ("torch", class) if class.ends_with("Storage") => STORAGES
                .iter()
                .find(|(c, _)| *c == class)
                .and_then(|(_, dtype)| crate::dtype::by_torch_name(dtype))
                .map(|d| Global::Storage(Some(d))),
            ("torch", dtype) => {
                let dtype = DTYPE_ALIASES
                    .iter()
                    .find(|(alias, _)| *alias == dtype)
                    .map_or(dtype, |(_, name)| name);
                crate::dtype::by_torch_name(dtype).map(Global::Dtype)
            }
            _ => None,
        };
        found.ok_or_else(|| PytorchError::RefusedGlobal {
            global: with_os_alias(&format!("{module}.{name}")),
            offset,
        })
    }
}

/// CPython pickles `os.system` as `posix.system` (or `nt.system`): say which it is.
fn with_os_alias(name: &str) -> String {
    match name.split_once('.') {
        Some(("posix" | "nt", attr)) => format!("{name} (os.{attr})"),
        _ => name.to_string(),
    }
}

/// What a recognized global built.
#[derive(Debug)]
pub(super) enum Built {
    Storage(Rc<Storage>),
    Tensor(Rc<Tensor>),
}

/// A storage a persistent id stands for.
#[derive(Debug)]
pub(super) struct Storage {
    /// The dtype of a typed storage; None for `UntypedStorage` (bytes).
    pub(super) dtype: Option<&'static Dtype>,
    /// Its size in bytes, as declared.
    pub(super) bytes: u64,
    /// The file offset of its first byte, once known; None when its bytes are not in the
    /// file read (a prefix).
    pub(super) data: Cell<Option<u64>>,
}

/// A tensor: a view of a storage.
#[derive(Debug)]
pub(super) struct Tensor {
    pub(super) storage: Rc<Storage>,
    pub(super) dtype: &'static Dtype,
    /// In elements of `dtype`.
    pub(super) offset: u64,
    pub(super) size: Shape,
    /// In elements of `dtype`.
    pub(super) stride: Shape,
}

impl Tensor {
    pub(super) fn elem_bytes(&self) -> u64 {
        self.dtype.block_bits / 8
    }

    /// The number of elements, or None when the product overflows.
    pub(super) fn numel(&self) -> Option<u64> {
        self.size
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Whether the view reads its elements in order, one after the other (dimensions of size
    /// 1 do not matter).
    pub(super) fn is_contiguous(&self) -> bool {
        let mut expected = 1u64;
        for (&size, &stride) in self.size.iter().zip(&self.stride).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(size);
        }
        true
    }

    /// The storage elements the view reaches: one past the last (0 when it has no elements).
    pub(super) fn extent(&self) -> Option<u64> {
        if self.size.contains(&0) {
            return Some(0);
        }
        let mut last = self.offset;
        for (&size, &stride) in self.size.iter().zip(&self.stride) {
            last = last.checked_add((size - 1).checked_mul(stride)?)?;
        }
        last.checked_add(1)
    }
}

/// Calls a recognized global with `args`, by what it means to torch.
pub(super) fn call(global: Global, args: &Object, offset: usize) -> Result<Object, PytorchError> {
    let args = match args {
        Object::Tuple(items) => items.clone(),
        _ => return Err(bad(offset, "a call whose arguments are not a tuple")),
    };
    match global {
        Global::OrderedDict => {
            let mut dict = Dict::default();
            if let Some(Object::List(pairs)) = args.first() {
                for pair in pairs.borrow().iter() {
                    match pair {
                        Object::Tuple(kv) if kv.len() == 2 => {
                            dict.set(kv[0].clone(), kv[1].clone());
                        }
                        _ => return Err(bad(offset, "OrderedDict of something that is not pairs")),
                    }
                }
            }
            Ok(Object::Dict(Rc::new(std::cell::RefCell::new(dict))))
        }
        Global::RebuildTensor | Global::RebuildTensorV2 => {
            let min = if global == Global::RebuildTensor {
                4
            } else {
                6
            };
            if args.len() < min {
                return Err(bad(offset, "a tensor rebuilt from too few arguments"));
            }
            tensor(&args, None, offset)
        }
        Global::RebuildTensorV3 => {
            let dtype = match args.get(6) {
                Some(Object::Global(Global::Dtype(d))) => *d,
                _ => return Err(bad(offset, "_rebuild_tensor_v3 without a dtype")),
            };
            tensor(&args, Some(dtype), offset)
        }
        Global::RebuildParameter | Global::RebuildParameterWithState => match args.first() {
            Some(t @ Object::Built(b)) if matches!(**b, Built::Tensor(_)) => Ok(t.clone()),
            _ => Err(bad(offset, "a parameter whose data is not a tensor")),
        },
        Global::RebuildFromTypeV2 => {
            // (func, new_type, args, state): the plain tensor func makes of args; the type and
            // the state (Python attributes) do not change its values.
            match (args.first(), args.get(1), args.get(2)) {
                (
                    Some(Object::Global(func)),
                    Some(Object::Global(Global::TensorClass)),
                    Some(inner @ Object::Tuple(_)),
                ) => call(*func, inner, offset),
                _ => Err(bad(
                    offset,
                    "_rebuild_from_type_v2 of something that is not a tensor",
                )),
            }
        }
        Global::TensorClass | Global::Storage(_) | Global::Dtype(_) => Err(bad(
            offset,
            "calls a class or dtype, which torch.save never does",
        )),
    }
}

fn bad(offset: usize, problem: &str) -> PytorchError {
    PytorchError::Pickle {
        stream: "data.pkl".to_owned(),
        offset,
        problem: problem.to_owned(),
    }
}

/// `(storage, storage_offset, size, stride, ...)` to a tensor; `dtype` overrides the
/// storage's (`_rebuild_tensor_v3` over an untyped storage).
fn tensor(
    args: &[Object],
    dtype: Option<&'static Dtype>,
    offset: usize,
) -> Result<Object, PytorchError> {
    let storage = match &args[0] {
        Object::Built(b) => match &**b {
            Built::Storage(s) => s.clone(),
            Built::Tensor(_) => return Err(bad(offset, "a tensor rebuilt from a tensor")),
        },
        _ => {
            return Err(bad(
                offset,
                "a tensor rebuilt from something that is not a storage",
            ));
        }
    };
    let dtype = dtype
        .or(storage.dtype)
        .ok_or_else(|| bad(offset, "a tensor of an untyped storage without a dtype"))?;
    let storage_offset = match &args[1] {
        Object::Int(i) => {
            u64::try_from(*i).map_err(|_| bad(offset, "a negative storage offset"))?
        }
        _ => return Err(bad(offset, "a storage offset that is not an integer")),
    };
    let size = dims(&args[2], offset, "size")?;
    let stride = dims(&args[3], offset, "stride")?;
    if size.len() != stride.len() {
        return Err(bad(offset, "a size and a stride of different lengths"));
    }
    Ok(Object::Built(Rc::new(Built::Tensor(Rc::new(Tensor {
        storage,
        dtype,
        offset: storage_offset,
        size,
        stride,
    })))))
}

fn dims(value: &Object, offset: usize, what: &str) -> Result<Shape, PytorchError> {
    let Object::Tuple(items) = value else {
        return Err(bad(offset, &format!("a {what} that is not a tuple")));
    };
    items
        .iter()
        .map(|d| match d {
            Object::Int(i) => {
                u64::try_from(*i).map_err(|_| bad(offset, &format!("a negative {what}")))
            }
            _ => Err(bad(offset, &format!("a {what} that is not integers"))),
        })
        .collect()
}

/// How deep containers may nest; torch state dicts are a few levels deep.
pub(super) const MAX_DEPTH: usize = 256;

/// The named tensors and the metadata of a checkpoint, walked from its root object.
pub(super) struct Walked {
    pub(super) tensors: Vec<(String, Rc<Tensor>)>,
    pub(super) metadata: BTreeMap<String, Value>,
}

/// Walks the root object: dicts and lists by key (names joined by `.`), tensors by their
/// names, plain scalars and strings (and lists of one kind of them) as metadata under their
/// names. `limit` bounds the entries visited (shared parts are visited once per path).
pub(super) fn walk(root: &Object, limit: usize) -> Result<Walked, PytorchError> {
    let mut out = Walked {
        tensors: Vec::new(),
        metadata: BTreeMap::new(),
    };
    let mut names: HashSet<String> = HashSet::new();
    let mut visited = 0usize;
    // (object, its name, depth, the containers on its path)
    let mut stack: Vec<(Object, String, usize, Rc<PathSet>)> =
        vec![(root.clone(), String::new(), 0, Rc::new(PathSet::default()))];
    while let Some((object, name, depth, path)) = stack.pop() {
        visited += 1;
        if visited > limit {
            return Err(PytorchError::TooManyEntries { limit });
        }
        if depth > MAX_DEPTH {
            return Err(PytorchError::TooDeep {
                name,
                limit: MAX_DEPTH,
            });
        }
        let children: Vec<(String, Object)> = match &object {
            Object::Dict(dict) => keyed(&dict.borrow()),
            Object::List(list) => {
                let list = list.borrow();
                if let Some(array) = scalar_array(&list) {
                    add_metadata(&mut out, &mut names, name, Value::Array(array))?;
                    continue;
                }
                indexed(&list)
            }
            Object::Tuple(items) => {
                if let Some(array) = scalar_array(items) {
                    add_metadata(&mut out, &mut names, name, Value::Array(array))?;
                    continue;
                }
                indexed(items)
            }
            Object::Built(built) => {
                if let Built::Tensor(t) = &**built {
                    claim(&mut names, &name)?;
                    out.tensors.push((name, t.clone()));
                }
                continue;
            }
            Object::Int(i) => {
                add_metadata(&mut out, &mut names, name, Value::I64(*i))?;
                continue;
            }
            Object::Float(f) => {
                add_metadata(&mut out, &mut names, name, Value::F64(F64Bits(f.to_bits())))?;
                continue;
            }
            Object::Bool(b) => {
                add_metadata(&mut out, &mut names, name, Value::Bool(*b))?;
                continue;
            }
            Object::Str(s) => {
                add_metadata(&mut out, &mut names, name, Value::String(s.to_string()))?;
                continue;
            }
            // None, bytes, sets, big integers, classes and dtypes: neither tensors nor plain
            // values.
            _ => continue,
        };
        let id = container_id(&object);
        if path.contains(id) {
            return Err(PytorchError::Cycle { name });
        }
        let path = Rc::new(PathSet {
            id,
            parent: Some(path),
        });
        // Pushed in reverse, so entries are visited in their order.
        for (key, child) in children.into_iter().rev() {
            let child_name = if name.is_empty() {
                key
            } else {
                format!("{name}.{key}")
            };
            stack.push((child, child_name, depth + 1, path.clone()));
        }
    }
    Ok(out)
}

/// The containers on the path to an entry, to tell a cycle from shared parts.
#[derive(Default)]
struct PathSet {
    id: usize,
    parent: Option<Rc<PathSet>>,
}

impl PathSet {
    fn contains(&self, id: usize) -> bool {
        let mut at = Some(self);
        while let Some(p) = at {
            if p.id == id && id != 0 {
                return true;
            }
            at = p.parent.as_deref();
        }
        false
    }
}

fn container_id(object: &Object) -> usize {
    match object {
        Object::Dict(d) => Rc::as_ptr(d) as *const u8 as usize,
        Object::List(l) => Rc::as_ptr(l) as *const u8 as usize,
        Object::Tuple(t) => Rc::as_ptr(t) as *const u8 as usize,
        _ => 0,
    }
}

fn claim(names: &mut HashSet<String>, name: &str) -> Result<(), PytorchError> {
    if !names.insert(name.to_owned()) {
        return Err(PytorchError::DuplicateName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

fn add_metadata(
    out: &mut Walked,
    names: &mut HashSet<String>,
    name: String,
    value: Value,
) -> Result<(), PytorchError> {
    claim(names, &name)?;
    out.metadata.insert(name, value);
    Ok(())
}

/// A dict's entries by their keys as names: strings as they are, integers in decimal, and
/// True, False and None by name; entries with other keys (tuples, floats) are left out.
fn keyed(dict: &Dict) -> Vec<(String, Object)> {
    dict.items
        .iter()
        .filter_map(|(k, v)| {
            let key = match k {
                Object::Str(s) => s.to_string(),
                Object::Int(i) => i.to_string(),
                Object::Bool(true) => "True".to_owned(),
                Object::Bool(false) => "False".to_owned(),
                Object::None => "None".to_owned(),
                _ => return None,
            };
            Some((key, v.clone()))
        })
        .collect()
}

fn indexed(items: &[Object]) -> Vec<(String, Object)> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

/// A non-empty list of one kind of plain value as a metadata array.
fn scalar_array(items: &[Object]) -> Option<Array> {
    match items.first()? {
        Object::Int(_) => items
            .iter()
            .map(|o| match o {
                Object::Int(i) => Some(*i),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Array::I64),
        Object::Float(_) => items
            .iter()
            .map(|o| match o {
                Object::Float(f) => Some(F64Bits(f.to_bits())),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Array::F64),
        Object::Bool(_) => items
            .iter()
            .map(|o| match o {
                Object::Bool(b) => Some(*b),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Array::Bool),
        Object::Str(_) => items
            .iter()
            .map(|o| match o {
                Object::Str(s) => Some(s.as_ref()),
                _ => None,
            })
            .collect::<Option<StringArray>>()
            .map(Array::String),
        _ => None,
    }
}
