//! The walk from a checkpoint's root object to named tensors and plain metadata.

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use super::budget::Budget;
use super::error::PytorchError;
use super::object::{Dict, Object, StandIn};
use super::torch::{Built, Tensor};
use crate::artifact::{Array, F64Bits, StringArray, Value};

/// How deep containers may nest; torch state dicts are a few levels deep.
pub(super) const MAX_DEPTH: usize = 256;

/// The named tensors and the metadata of a checkpoint, walked from its root object.
pub(super) struct Walked {
    pub(super) tensors: Vec<(String, Rc<Tensor>)>,
    pub(super) metadata: BTreeMap<String, Value>,
    /// The keys of the root dict (empty when the root is something else).
    pub(super) root_keys: Vec<String>,
}

/// Walks the root object: dicts and lists by key (names joined by `.`), tensors by their
/// names, plain scalars and strings (and lists of one kind of them) as metadata under their
/// names. `limit` bounds the entries visited (shared parts are visited once per path).
/// Every name and value it makes is charged to `budget`: a part shared by many paths is a copy
/// per path in the artifact, and is charged as such.
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
    };
    let mut names: HashSet<String> = HashSet::new();
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
            Object::StandIn(stand_in) => stand_in_children(stand_in, values),
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
        let id = container_id(&object);
        if path.contains(id) {
            return Err(PytorchError::Cycle { name });
        }
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
