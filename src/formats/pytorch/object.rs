//! The values a restricted pickle machine builds: the plain ones a state dict is made of and
//! what the recognized torch globals build.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use super::torch::{Built, Global};

/// A value on the machine's stack.
#[derive(Debug, Clone)]
pub(super) enum Object {
    None,
    Bool(bool),
    Int(i64),
    /// An integer that does not fit an i64: kept only as such.
    BigInt,
    Float(f64),
    Str(Rc<str>),
    /// Bytes: never a name or a plain value; where they lie in the pickle's buffer (a numpy
    /// array's data, read in place).
    Bytes {
        offset: u64,
        len: u64,
    },
    Tuple(Rc<[Object]>),
    List(Rc<RefCell<Vec<Object>>>),
    Dict(Rc<RefCell<Dict>>),
    Set(Rc<RefCell<Vec<Object>>>),
    /// A global `torch.save` names, recognized by name.
    Global(Global),
    /// What a recognized global built: a storage, a tensor, an ignored object.
    Built(Rc<Built>),
    /// An inert stand-in for a global off the allow-list, or for what was made of one.
    StandIn(Rc<StandIn>),
}

/// A global the machine does not know (`argparse.Namespace`, `__main__.Net`, `posix.system`),
/// or what REDUCE, NEWOBJ, OBJ or INST made of one: it records its name and what the pickle did
/// to it. Nothing is imported, looked up or called; a stand-in only keeps what it was given, so
/// that tensors and plain values inside it (a module's `__dict__`, a namespace's attributes)
/// can be walked by name.
#[derive(Debug)]
pub(super) struct StandIn {
    /// `module.name` of the global.
    pub(super) global: Rc<str>,
    /// The arguments it was called with (None: the global itself, not called).
    pub(super) args: Option<Object>,
    /// BUILD's state, SETITEM(S)'s entries and APPEND(S)'s items, as given.
    pub(super) state: RefCell<Option<Object>>,
    pub(super) entries: RefCell<Dict>,
    pub(super) items: RefCell<Vec<Object>>,
}

impl StandIn {
    pub(super) fn object(global: Rc<str>, args: Option<Object>) -> Object {
        Object::StandIn(Rc::new(StandIn {
            global,
            args,
            state: RefCell::new(None),
            entries: RefCell::default(),
            items: RefCell::default(),
        }))
    }
}

/// A dict in insertion order; a key set again keeps its first position (as in Python).
#[derive(Debug, Default)]
pub(super) struct Dict {
    pub(super) items: Vec<(Object, Object)>,
    index: HashMap<Key, usize>,
}

/// The keys a dict is indexed by; other keys are kept in order without replacing each other.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Str(Rc<str>),
    Int(i64),
    Bool(bool),
    None,
}

impl Dict {
    pub(super) fn set(&mut self, key: Object, value: Object) {
        let k = match &key {
            Object::Str(s) => Some(Key::Str(s.clone())),
            Object::Int(i) => Some(Key::Int(*i)),
            Object::Bool(b) => Some(Key::Bool(*b)),
            Object::None => Some(Key::None),
            _ => None,
        };
        if let Some(&position) = k.as_ref().and_then(|k| self.index.get(k)) {
            self.items[position].1 = value;
            return;
        }
        if let Some(k) = k {
            self.index.insert(k, self.items.len());
        }
        self.items.push((key, value));
    }
}

/// Containers are taken apart one level at a time: a pickle nests lists as deep as its length
/// allows, and dropping them recursively would overflow the stack.
impl Drop for Object {
    fn drop(&mut self) {
        let mut pending = Vec::new();
        take_children(self, &mut pending);
        while let Some(mut child) = pending.pop() {
            // Emptied first, so dropping it at the end of this iteration does not recurse.
            take_children(&mut child, &mut pending);
        }
    }
}

/// Moves the children of a container nothing else shares into `into`.
fn take_children(object: &mut Object, into: &mut Vec<Object>) {
    match object {
        Object::List(items) | Object::Set(items) => {
            if let Some(items) = Rc::get_mut(items) {
                into.append(items.get_mut());
            }
        }
        Object::Dict(dict) => {
            if let Some(dict) = Rc::get_mut(dict) {
                let dict = dict.get_mut();
                dict.index.clear();
                for (key, value) in dict.items.drain(..) {
                    into.push(key);
                    into.push(value);
                }
            }
        }
        Object::StandIn(stand_in) => {
            if let Some(stand_in) = Rc::get_mut(stand_in) {
                into.extend(stand_in.args.take());
                into.extend(stand_in.state.get_mut().take());
                into.append(stand_in.items.get_mut());
                let entries = stand_in.entries.get_mut();
                entries.index.clear();
                for (key, value) in entries.items.drain(..) {
                    into.push(key);
                    into.push(value);
                }
            }
        }
        Object::Tuple(items) => {
            if let Some(items) = Rc::get_mut(items) {
                into.extend(
                    items
                        .iter_mut()
                        .map(|item| std::mem::replace(item, Object::None)),
                );
            }
        }
        _ => {}
    }
}

/// A mutable container that was referenced more than once (memoized or duplicated): the only
/// kind a reference cycle can run through, since a container can hold itself only through a
/// second reference.
pub(super) enum Shared {
    List(Weak<RefCell<Vec<Object>>>),
    Dict(Weak<RefCell<Dict>>),
    StandIn(Weak<StandIn>),
}

impl Shared {
    /// The container's address, which tells it from every other one alive.
    pub(super) fn address(&self) -> usize {
        match self {
            Shared::List(weak) => weak.as_ptr().cast::<u8>() as usize,
            Shared::Dict(weak) => weak.as_ptr().cast::<u8>() as usize,
            Shared::StandIn(weak) => weak.as_ptr().cast::<u8>() as usize,
        }
    }

    pub(super) fn of(object: &Object) -> Option<Shared> {
        match object {
            Object::List(items) | Object::Set(items) => Some(Shared::List(Rc::downgrade(items))),
            Object::Dict(dict) => Some(Shared::Dict(Rc::downgrade(dict))),
            Object::StandIn(stand_in) => Some(Shared::StandIn(Rc::downgrade(stand_in))),
            _ => None,
        }
    }
}

/// Empties the shared containers still alive: reference counts never free a container that
/// holds itself (nothing torch writes; a hostile pickle can), and emptying them breaks every
/// such cycle.
pub(super) fn break_cycles(shared: &mut Vec<Shared>) {
    for container in shared.drain(..) {
        match container {
            Shared::List(weak) => {
                if let Some(list) = weak.upgrade() {
                    let items = std::mem::take(&mut *list.borrow_mut());
                    drop(items);
                }
            }
            Shared::Dict(weak) => {
                if let Some(dict) = weak.upgrade() {
                    let dict = std::mem::take(&mut *dict.borrow_mut());
                    drop(dict);
                }
            }
            Shared::StandIn(weak) => {
                if let Some(stand_in) = weak.upgrade() {
                    let state = stand_in.state.borrow_mut().take();
                    let entries = std::mem::take(&mut *stand_in.entries.borrow_mut());
                    let items = std::mem::take(&mut *stand_in.items.borrow_mut());
                    drop((state, entries, items));
                }
            }
        }
    }
}

/// What a pickle built, with its shared containers: dropping it breaks any cycle among them.
pub(super) struct Graph {
    pub(super) root: Object,
    pub(super) shared: Vec<Shared>,
    /// The globals that became stand-ins, in order of first appearance.
    pub(super) findings: Vec<Finding>,
}

/// A global off the allow-list that a pickle names, where it first does, and what the pickle
/// did with it (each at most once, in the order first done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Finding {
    pub global: String,
    pub offset: usize,
    pub actions: Vec<&'static str>,
}

impl std::ops::Deref for Graph {
    type Target = Object;
    fn deref(&self) -> &Object {
        &self.root
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        break_cycles(&mut self.shared);
    }
}
