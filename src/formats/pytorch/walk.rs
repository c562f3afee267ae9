//! The walk from a checkpoint's root object to named tensors and plain metadata.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use super::budget::Budget;
use super::error::PytorchError;
use super::numpy::{self, NumpyArray};
use super::object::{Dict, Object, StandIn};
use super::torch::{Built, Tensor};
use crate::artifact::{Array, F64Bits, StringArray, Value};

/// How deep containers may nest; torch state dicts are a few levels deep.
pub(super) const MAX_DEPTH: usize = 256;

/// What a part shared by several paths may weigh ([`weight`]) and still be walked at each of
/// them, as `torch.load` gives it: the `betas` tuple every param group of an optimizer shares,
/// a short string the pickler memoized once. A heavier shared part is walked once, at its first
/// path; each later path is the metadata entry `PATH.__alias__`, the first path's name.
pub(super) const SHARED_COPY_BYTES: u64 = 4096;

/// The suffix of an alias entry's name.
pub(super) const ALIAS_SUFFIX: &str = "__alias__";

/// The named tensors and the metadata of a checkpoint, walked from its root object.
pub(super) struct Walked {
    pub(super) tensors: Vec<(String, Rc<Tensor>)>,
    pub(super) metadata: BTreeMap<String, Value>,
    /// The keys of the root dict (empty when the root is something else).
    pub(super) root_keys: Vec<String>,
    /// numpy arrays, by name: tensors whose values lie in the pickle.
    pub(super) arrays: Vec<(String, NumpyArray)>,
}

/// Walks the root object: dicts and lists by key (names joined by `.`), tensors by their
/// names, plain scalars and strings (and lists of one kind of them) as metadata under their
/// names. `limit` bounds the entries visited. A shared part is walked at each path while it
/// weighs at most [`SHARED_COPY_BYTES`], else once (later paths are aliases), so what the walk
/// makes is linear in the pickle whatever it repeats. Every name and value it makes is charged
/// to `budget`, a light shared part once per path (each is a copy in the artifact).
pub(super) fn walk(
    root: &Object,
    limit: usize,
    budget: &mut Budget,
) -> Result<Walked, PytorchError> {
    let root_keys = match root {
        Object::Dict(dict) => keyed(&dict.borrow()).into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    };
    let mut out = Walked {
        tensors: Vec::new(),
        metadata: BTreeMap::new(),
        root_keys,
        arrays: Vec::new(),
    };
    let mut names: HashSet<String> = HashSet::new();
    let mut weights = Weights::default();
    // The first path of each heavy part walked.
    let mut first_paths: HashMap<usize, String> = HashMap::new();
    let mut visited = 0usize;
    // (object, its name, depth, the containers on its path, whether plain values count)
    let mut stack: Vec<(Object, String, usize, Rc<PathSet>, bool)> = vec![(
        root.clone(),
        String::new(),
        0,
        Rc::new(PathSet::default()),
        true,
    )];
    while let Some((object, name, depth, path, values)) = stack.pop() {
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
        // The entry itself and its name, in the walk's stack and in the names claimed.
        budget.charge(2 * name.len() as u64 + 128)?;
        let id = container_id(&object);
        let shared = shared_id(&object);
        if shared != 0 && weights.of(&object, budget)? > SHARED_COPY_BYTES {
            if let Some(first) = first_paths.get(&shared) {
                budget.charge(2 * first.len() as u64 + 64)?;
                let alias = if name.is_empty() {
                    ALIAS_SUFFIX.to_owned()
                } else {
                    format!("{name}.{ALIAS_SUFFIX}")
                };
                add_metadata(&mut out, &mut names, alias, Value::String(first.clone()))?;
                continue;
            }
            budget.charge(name.len() as u64 + 64)?;
            first_paths.insert(shared, name.clone());
        }
        // A part that holds itself weighs more than any copy, so a way back to it (an
        // omegaconf node's `_parent`, through pickle's memo) is the alias above: a cycle is
        // data, walked once. Anything else on its own path is refused, never walked forever.
        if path.contains(id) {
            return Err(PytorchError::Cycle { name });
        }
        if !values
            && matches!(
                object,
                Object::Int(_) | Object::Float(_) | Object::Bool(_) | Object::Str(_)
            )
        {
            continue;
        }
        // (key, child, whether plain values under it count)
        let children: Vec<(String, Object, bool)> = match &object {
            Object::Dict(dict) => with_values(keyed(&dict.borrow()), values),
            Object::StandIn(stand_in) => {
                if let Some(array) = numpy::array(stand_in) {
                    claim(&mut names, &name)?;
                    out.arrays.push((name, array));
                    continue;
                }
                stand_in_children(stand_in, values)
            }
            Object::List(list) => {
                let list = list.borrow();
                if values && let Some(array) = scalar_array(&list, budget)? {
                    add_metadata(&mut out, &mut names, name, Value::Array(array))?;
                    continue;
                }
                with_values(indexed(&list), values)
            }
            Object::Tuple(items) => {
                if values && let Some(array) = scalar_array(items, budget)? {
                    add_metadata(&mut out, &mut names, name, Value::Array(array))?;
                    continue;
                }
                with_values(indexed(items), values)
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
                budget.charge(s.len() as u64)?;
                add_metadata(&mut out, &mut names, name, Value::String(s.to_string()))?;
                continue;
            }
            // None, bytes, sets, big integers, classes and dtypes: neither tensors nor plain
            // values.
            _ => continue,
        };
        let path = Rc::new(PathSet {
            id,
            parent: Some(path),
        });
        // Pushed in reverse, so entries are visited in their order.
        for (key, child, values) in children.into_iter().rev() {
            let child_name = if name.is_empty() {
                key
            } else if key.is_empty() {
                name.clone()
            } else {
                format!("{name}.{key}")
            };
            stack.push((child, child_name, depth + 1, path.clone(), values));
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
        Object::Dict(d) => Rc::as_ptr(d).cast::<u8>() as usize,
        Object::List(l) => Rc::as_ptr(l).cast::<u8>() as usize,
        Object::Tuple(t) => Rc::as_ptr(t).cast::<u8>() as usize,
        Object::StandIn(s) => Rc::as_ptr(s).cast::<u8>() as usize,
        _ => 0,
    }
}

/// A part that may be shared, by address: containers and strings (0 for the rest).
fn shared_id(object: &Object) -> usize {
    match object {
        Object::Str(s) => Rc::as_ptr(s).cast::<u8>() as usize,
        other => container_id(other),
    }
}

/// What walking a part at one path makes, roughly in bytes: 64 per entry, the bytes of its
/// strings. Computed once per part (memoized by address), so linear in the graph; a part that
/// holds itself weighs `u64::MAX`.
#[derive(Default)]
struct Weights {
    known: HashMap<usize, u64>,
}

impl Weights {
    fn of(&mut self, object: &Object, budget: &mut Budget) -> Result<u64, PytorchError> {
        if let Some(&w) = self.known.get(&shared_id(object)) {
            return Ok(w);
        }
        // Post-order without recursion: (part, whether its children are weighed).
        let mut stack = vec![(object.clone(), false)];
        while let Some((part, children_done)) = stack.pop() {
            let id = shared_id(&part);
            if id == 0 {
                continue;
            }
            if children_done {
                let total = children(&part)
                    .iter()
                    .fold(own_weight(&part), |sum, child| {
                        let w = match shared_id(child) {
                            0 => own_weight(child),
                            child_id => self.known.get(&child_id).copied().unwrap_or(u64::MAX),
                        };
                        sum.saturating_add(w)
                    });
                self.known.insert(id, total);
                continue;
            }
            if self.known.contains_key(&id) {
                continue;
            }
            // Its entry here; in progress (a cycle back to it weighs u64::MAX) until done.
            budget.charge(48)?;
            self.known.insert(id, u64::MAX);
            let parts = children(&part);
            stack.push((part, true));
            for child in parts {
                if shared_id(&child) != 0 && !self.known.contains_key(&shared_id(&child)) {
                    stack.push((child, false));
                }
            }
        }
        Ok(self
            .known
            .get(&shared_id(object))
            .copied()
            .unwrap_or(u64::MAX))
    }
}

fn own_weight(object: &Object) -> u64 {
    match object {
        Object::Str(s) => 64 + s.len() as u64,
        _ => 64,
    }
}

/// Everything a part holds (keys included), for its weight.
fn children(object: &Object) -> Vec<Object> {
    match object {
        Object::Dict(dict) => pairs(&dict.borrow()),
        Object::List(items) | Object::Set(items) => items.borrow().clone(),
        Object::Tuple(items) => items.to_vec(),
        Object::StandIn(stand_in) => {
            let mut all = pairs(&stand_in.entries.borrow());
            all.extend(stand_in.items.borrow().iter().cloned());
            all.extend(stand_in.state.borrow().iter().cloned());
            all.extend(stand_in.args.iter().cloned());
            all
        }
        _ => Vec::new(),
    }
}

fn pairs(dict: &Dict) -> Vec<Object> {
    dict.items
        .iter()
        .flat_map(|(k, v)| [k.clone(), v.clone()])
        .collect()
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

fn with_values(children: Vec<(String, Object)>, values: bool) -> Vec<(String, Object, bool)> {
    children
        .into_iter()
        .map(|(key, child)| (key, child, values))
        .collect()
}

/// The parts of a stand-in, by name: the entries SETITEM gave it and the attributes of its
/// BUILD state under their keys (a module's `_parameters`, `_buffers` and `_modules` in its own
/// name, its other attributes left out), the items APPEND gave it by index; tensors in its
/// call's arguments (`NAME.__args__.0`) and in a state that is not a dict
/// (`NAME.__state__`) are named too, but plain values there are not metadata: what they mean
/// is up to code that never runs.
fn stand_in_children(stand_in: &StandIn, values: bool) -> Vec<(String, Object, bool)> {
    let mut children = with_values(keyed(&stand_in.entries.borrow()), values);
    children.extend(with_values(indexed(&stand_in.items.borrow()), values));
    match &*stand_in.state.borrow() {
        Some(Object::Dict(state)) => children.extend(attributes(&state.borrow(), values)),
        // (`__dict__`, slots) of a class with `__slots__`.
        Some(Object::Tuple(pair)) if pair.len() == 2 => {
            for (i, part) in pair.iter().enumerate() {
                match part {
                    Object::Dict(state) => children.extend(attributes(&state.borrow(), values)),
                    Object::None => {}
                    other => children.push((format!("__state__.{i}"), other.clone(), false)),
                }
            }
        }
        Some(Object::None) | None => {}
        Some(other) => children.push(("__state__".to_owned(), other.clone(), false)),
    }
    if let Some(args) = &stand_in.args {
        children.push(("__args__".to_owned(), args.clone(), false));
    }
    children
}

/// The attributes in a stand-in's `__dict__`. A torch module (one with `_parameters`) is its
/// parameters, buffers and submodules, each under its own name, as in its `state_dict()`.
fn attributes(state: &Dict, values: bool) -> Vec<(String, Object, bool)> {
    let entries = keyed(state);
    if !entries.iter().any(|(key, _)| key == "_parameters") {
        return with_values(entries, values);
    }
    entries
        .into_iter()
        .filter(|(key, _)| matches!(key.as_str(), "_parameters" | "_buffers" | "_modules"))
        .map(|(_, part)| (String::new(), part, false))
        .collect()
}

fn indexed(items: &[Object]) -> Vec<(String, Object)> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| (i.to_string(), v.clone()))
        .collect()
}

/// A non-empty list of one kind of plain value as a metadata array, charged to `budget`.
fn scalar_array(items: &[Object], budget: &mut Budget) -> Result<Option<Array>, PytorchError> {
    let bytes: u64 = match items.first() {
        Some(Object::Str(_)) => items
            .iter()
            .map(|o| match o {
                Object::Str(s) => s.len() as u64 + 24,
                _ => 0,
            })
            .sum(),
        Some(Object::Int(_) | Object::Float(_) | Object::Bool(_)) => 8 * items.len() as u64,
        _ => return Ok(None),
    };
    // Charged before the copy is made.
    budget.charge(bytes)?;
    Ok(plain_array(items))
}

fn plain_array(items: &[Object]) -> Option<Array> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pytorch::machine;

    use crate::formats::pytorch::NoStorages;

    /// `{"k0": L, "k1": L, …}` for `keys` keys and one list L of `items` integers, as
    /// protocol 2 writes it (L memoized once, then BINGET).
    fn shared_list_pickle(keys: usize, items: usize) -> Vec<u8> {
        let mut p = b"\x80\x02}(".to_vec();
        for k in 0..keys {
            let key = format!("k{k}");
            p.push(b'X');
            p.extend((key.len() as u32).to_le_bytes());
            p.extend(key.as_bytes());
            if k == 0 {
                p.extend(b"]q\x01(");
                for i in 0..items as i32 {
                    p.push(b'J');
                    p.extend(i.to_le_bytes());
                }
                p.push(b'e');
            } else {
                p.extend(b"h\x01");
            }
        }
        p.extend(b"u.");
        p
    }

    /// What the machine and the walk charge for a pickle, and what the walk made of it.
    fn charged(pickle: &[u8]) -> (u64, Walked) {
        let mut budget = Budget::for_pickle(pickle.len());
        let (graph, _) = machine::run(pickle, 0, "test", &mut NoStorages, &mut budget).unwrap();
        let walked = walk(&graph, 1 << 20, &mut budget).unwrap();
        (budget.spent(), walked)
    }

    /// A heavy shared list is walked once: the other keys are aliases of the first, and what
    /// is charged grows with the pickle, not with keys × items.
    #[test]
    fn a_heavy_shared_list_is_walked_once_and_charged_once() {
        let small = shared_list_pickle(1_000, 20_000);
        let large = shared_list_pickle(8_000, 20_000);
        let (spent_small, walked) = charged(&small);
        let (spent_large, _) = charged(&large);
        assert_eq!(walked.metadata.len(), 1_000);
        let Some(Value::Array(Array::I64(items))) = walked.metadata.get("k0") else {
            panic!("k0: {:?}", walked.metadata.get("k0"))
        };
        assert_eq!(items.len(), 20_000);
        assert_eq!(
            walked.metadata.get("k999.__alias__"),
            Some(&Value::String("k0".to_owned()))
        );
        // Copied per path, 8 000 keys would charge 8 times 1 000 keys' copies (8 × 160 MB).
        let pickle_ratio = large.len() as f64 / small.len() as f64;
        let charge_ratio = spent_large as f64 / spent_small as f64;
        assert!(
            charge_ratio < 2.0 * pickle_ratio && spent_large < 32 * large.len() as u64,
            "{spent_small} then {spent_large} bytes charged for pickles of {} and {} bytes",
            small.len(),
            large.len()
        );
    }

    /// A light shared part is walked at each path, as torch.load gives it (an optimizer's
    /// param groups share one `betas` tuple).
    #[test]
    fn a_light_shared_list_is_walked_at_each_path() {
        let (_, walked) = charged(&shared_list_pickle(3, 2));
        let expected = Value::Array(Array::I64(vec![0, 1]));
        for key in ["k0", "k1", "k2"] {
            assert_eq!(walked.metadata.get(key), Some(&expected), "{key}");
        }
        assert_eq!(walked.metadata.len(), 3);
    }
}
