//! A restricted pickle machine: it interprets the opcodes of protocols 0–5 and builds only the
//! values a state dict is made of — None, booleans, numbers, strings, bytes, tuples, lists,
//! dicts, sets — plus the few globals `torch.save` names for dense tensors, which are
//! recognized by name ([`super::torch::Global`]) and never looked up or called: this is Rust,
//! there is nothing to call. Any other global becomes an inert stand-in
//! ([`super::object::StandIn`]) that records its `module.name` and what the pickle did to it,
//! and a finding ([`Finding`]) with the offset that first names it.
//!
//! Values are shared, never copied (DUP, the memo and references are reference counts), so the
//! memory a pickle can make the machine use is linear in its length, whatever it repeats.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::budget::Budget;
use super::error::PytorchError;
use super::object::{Dict, Finding, Graph, Object, Shared, StandIn, break_cycles};
use super::opcodes::{Lexer, Long, Op};
use super::rebuild;
use super::torch::Global;
/// Where the machine's storages live: the archive's members (zip layout) or the raw bytes after
/// the pickles (legacy layout). Called for every persistent id.
pub(super) trait Storages {
    fn load(&mut self, pid: &Object, offset: usize) -> Result<Object, PytorchError>;
}

/// Runs one pickle from `start` to its STOP; returns the object and the offset past STOP.
/// `stream` names the pickle in errors (`data.pkl`, "the legacy object pickle").
/// Every object it creates is charged to `budget` ([`super::budget`]).
pub(super) fn run(
    bytes: &[u8],
    start: usize,
    stream: &str,
    storages: &mut dyn Storages,
    budget: &mut Budget,
) -> Result<(Graph, usize), PytorchError> {
    let mut machine = Machine {
        stream,
        stack: Vec::new(),
        stack_high: 0,
        marks: Vec::new(),
        memo: Memo::default(),
        shared_seen: HashSet::new(),
        shared: Vec::new(),
        findings: Vec::new(),
        finding_index: HashMap::new(),
        budget,
        base: bytes.as_ptr() as usize,
    };
    let mut lexer = Lexer::new(bytes, start);
    loop {
        let offset = lexer.position();
        let (at, op) = match lexer.next_op() {
            None => {
                return Err(PytorchError::Pickle {
                    stream: stream.to_owned(),
                    offset,
                    problem: "the pickle ends before its STOP opcode".to_owned(),
                });
            }
            Some(Err(e)) => {
                return Err(PytorchError::Pickle {
                    stream: stream.to_owned(),
                    offset,
                    problem: e.to_string(),
                });
            }
            Some(Ok(op)) => op,
        };
        if let Op::Stop = op {
            let root = machine.pop(at)?;
            let shared = std::mem::take(&mut machine.shared);
            let findings = std::mem::take(&mut machine.findings);
            return Ok((
                Graph {
                    root,
                    shared,
                    findings,
                },
                lexer.position(),
            ));
        }
        machine.charge_for(&op)?;
        machine.step(at, op, storages)?;
        machine.charge_stack()?;
    }
}

struct Machine<'s, 'b> {
    stream: &'s str,
    stack: Vec<Object>,
    /// The most slots the stack has held (each charged once).
    stack_high: usize,
    marks: Vec<usize>,
    memo: Memo,
    /// The containers already in `shared` (by address): each is recorded once, however often
    /// it is memoized or duplicated.
    shared_seen: HashSet<usize>,
    /// Containers referenced twice: emptied when the machine stops on an error, else by the
    /// [`Graph`] it returns.
    shared: Vec<Shared>,
    /// The globals made stand-ins, and where each is in `findings`.
    findings: Vec<Finding>,
    finding_index: HashMap<Rc<str>, usize>,
    budget: &'b mut Budget,
    /// The address of the buffer the pickle is in: where a bytes object lies in it.
    base: usize,
}

/// A stack slot (the stack's vector may hold twice the slots in use).
const STACK_SLOT: u64 = 2 * std::mem::size_of::<Object>() as u64;
/// An item put in a list or set (its vector grows by doubling).
const APPENDED_ITEM: u64 = 2 * std::mem::size_of::<Object>() as u64;
/// An item of a tuple or of a list built at once (an exact-size allocation).
const ITEM: u64 = std::mem::size_of::<Object>() as u64;
/// A list or set: its count, its cell and its vector.
const LIST: u64 = 64;
/// A dict: its count, its cell, its vector and its index.
const DICT: u64 = 128;
/// A dict entry: the key and value (the vector grows by doubling) and the index entry.
const DICT_ENTRY: u64 = 160;
/// A memo entry (24 bytes in a vector that grows by doubling; a sparse index costs more, in a
/// map, but has a longer opcode), or a shared-container record.
const MEMO_ENTRY: u64 = 64;
const SHARED_ENTRY: u64 = 16;
/// What a recognized global builds: a storage or a tensor with its shape and strides.
const BUILT: u64 = 160;
/// A stand-in: its count, its name's handle, its arguments and its three cells.
const STAND_IN: u64 = std::mem::size_of::<StandIn>() as u64 + 32;

impl Drop for Machine<'_, '_> {
    fn drop(&mut self) {
        break_cycles(&mut self.shared);
    }
}

impl Machine<'_, '_> {
    /// Charges what `op` will create, before it is created.
    fn charge_for(&mut self, op: &Op<'_>) -> Result<(), PytorchError> {
        let since_mark = || {
            let mark = self.marks.last().copied().unwrap_or(0);
            self.stack.len().saturating_sub(mark) as u64
        };
        let cost = match op {
            Op::Str(raw) | Op::Bytes8(raw) => raw.len() as u64 + 48,
            Op::EmptyTuple => 32,
            Op::Tuple => 32 + ITEM * since_mark(),
            Op::Tuple1 | Op::Tuple2 | Op::Tuple3 => 32 + 3 * ITEM,
            Op::EmptyList | Op::EmptySet => LIST,
            Op::List | Op::FrozenSet => LIST + ITEM * since_mark(),
            Op::Append => APPENDED_ITEM,
            Op::Appends | Op::AddItems => APPENDED_ITEM * since_mark(),
            Op::EmptyDict => DICT,
            Op::Dict => DICT + DICT_ENTRY * since_mark().div_ceil(2),
            Op::SetItem => DICT_ENTRY,
            Op::SetItems => DICT_ENTRY * since_mark().div_ceil(2),
            Op::Dup => SHARED_ENTRY,
            // A sparse index lands in the map: twice the cost.
            Op::Put(index) if *index > self.memo.len() => 2 * MEMO_ENTRY + SHARED_ENTRY,
            Op::Put(_) | Op::Memoize => MEMO_ENTRY + SHARED_ENTRY,
            Op::Global { .. } | Op::StackGlobal => STAND_IN,
            Op::Reduce | Op::NewObj | Op::NewObjEx | Op::Obj | Op::Inst { .. } => BUILT + STAND_IN,
            Op::BinPersId => BUILT,
            _ => 0,
        };
        self.budget.charge(cost)
    }

    /// Charges the stack's growth past its highest point.
    fn charge_stack(&mut self) -> Result<(), PytorchError> {
        if self.stack.len() > self.stack_high {
            let grown = (self.stack.len() - self.stack_high) as u64;
            self.stack_high = self.stack.len();
            self.budget.charge(grown * STACK_SLOT)?;
        }
        Ok(())
    }

    fn error(&self, offset: usize, problem: impl Into<String>) -> PytorchError {
        PytorchError::Pickle {
            stream: self.stream.to_owned(),
            offset,
            problem: problem.into(),
        }
    }

    fn pop(&mut self, at: usize) -> Result<Object, PytorchError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(self.error(at, "pops past a MARK"));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.error(at, "pops an empty stack"))
    }

    fn top(&mut self, at: usize) -> Result<&mut Object, PytorchError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(self.error(at, "reads past a MARK"));
        }
        let stream = self.stream;
        self.stack.last_mut().ok_or_else(|| PytorchError::Pickle {
            stream: stream.to_owned(),
            offset: at,
            problem: "reads an empty stack".to_owned(),
        })
    }

    /// The items pushed since the last MARK, which is removed.
    fn pop_mark(&mut self, at: usize) -> Result<Vec<Object>, PytorchError> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| self.error(at, "expects a MARK"))?;
        Ok(self.stack.split_off(mark))
    }

    fn step(
        &mut self,
        at: usize,
        op: Op<'_>,
        storages: &mut dyn Storages,
    ) -> Result<(), PytorchError> {
        match op {
            Op::Proto(_) | Op::Frame | Op::Stop => {}
            Op::Mark => self.marks.push(self.stack.len()),
            Op::Pop => {
                if self.marks.last() == Some(&self.stack.len()) {
                    // POP right after MARK pops the mark (as CPython does).
                    self.marks.pop();
                } else {
                    self.pop(at)?;
                }
            }
            Op::PopMark => {
                self.pop_mark(at)?;
            }
            Op::Dup => {
                let top = self.top(at)?.clone();
                self.record_shared(&top);
                self.stack.push(top);
            }
            Op::None => self.stack.push(Object::None),
            Op::Bool(b) => self.stack.push(Object::Bool(b)),
            Op::Int(i) => self.stack.push(Object::Int(i)),
            Op::Long(long) => self.stack.push(long_object(long)),
            Op::Float(f) => self.stack.push(Object::Float(f)),
            Op::Str(raw) | Op::Bytes8(raw) => {
                let text = std::str::from_utf8(raw)
                    .map_err(|_| self.error(at, "a string that is not UTF-8"))?;
                self.stack.push(Object::Str(Rc::from(text)));
            }
            Op::Bytes(raw) => self.stack.push(Object::Bytes {
                offset: (raw.as_ptr() as usize - self.base) as u64,
                len: raw.len() as u64,
            }),
            Op::EmptyTuple => self.stack.push(Object::Tuple(Rc::from([]))),
            Op::Tuple => {
                let items = self.pop_mark(at)?;
                self.stack.push(Object::Tuple(Rc::from(items)));
            }
            Op::Tuple1 | Op::Tuple2 | Op::Tuple3 => {
                let n = match op {
                    Op::Tuple1 => 1,
                    Op::Tuple2 => 2,
                    _ => 3,
                };
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop(at)?);
                }
                items.reverse();
                self.stack.push(Object::Tuple(Rc::from(items)));
            }
            Op::EmptyList => self.stack.push(Object::List(Rc::default())),
            Op::List => {
                let items = self.pop_mark(at)?;
                self.stack.push(Object::List(Rc::new(RefCell::new(items))));
            }
            Op::Append => {
                let item = self.pop(at)?;
                self.append(at, vec![item])?;
            }
            Op::Appends => {
                let items = self.pop_mark(at)?;
                self.append(at, items)?;
            }
            Op::EmptyDict => self.stack.push(Object::Dict(Rc::default())),
            Op::Dict => {
                let items = self.pop_mark(at)?;
                let dict = self.pairs_into(at, Dict::default(), items)?;
                self.stack.push(Object::Dict(Rc::new(RefCell::new(dict))));
            }
            Op::SetItem => {
                let value = self.pop(at)?;
                let key = self.pop(at)?;
                self.set_items(at, vec![key, value])?;
            }
            Op::SetItems => {
                let items = self.pop_mark(at)?;
                self.set_items(at, items)?;
            }
            Op::EmptySet => self.stack.push(Object::Set(Rc::default())),
            Op::AddItems => {
                let items = self.pop_mark(at)?;
                match self.top(at)? {
                    Object::Set(set) => set.borrow_mut().extend(items),
                    _ => return Err(self.error(at, "ADDITEMS on something that is not a set")),
                }
            }
            Op::FrozenSet => {
                let items = self.pop_mark(at)?;
                self.stack.push(Object::Set(Rc::new(RefCell::new(items))));
            }
            Op::Global { module, name } | Op::Inst { module, name } => {
                let (module, name) = (
                    String::from_utf8_lossy(module).into_owned(),
                    String::from_utf8_lossy(name).into_owned(),
                );
                let global = self.global(&module, &name, at)?;
                if let Op::Inst { .. } = op {
                    let args = self.pop_mark(at)?;
                    let built = self.call(global, Object::Tuple(Rc::from(args)), "INST", at)?;
                    self.stack.push(built);
                } else {
                    self.stack.push(global);
                }
            }
            Op::StackGlobal => {
                let name = self.pop(at)?;
                let module = self.pop(at)?;
                let (Object::Str(module), Object::Str(name)) = (&module, &name) else {
                    return Err(self.error(at, "STACK_GLOBAL without two strings"));
                };
                let global = self.global(module, name, at)?;
                self.stack.push(global);
            }
            Op::Reduce => {
                let args = self.pop(at)?;
                let callable = self.pop(at)?;
                let built = self.call(callable, args, "REDUCE", at)?;
                self.stack.push(built);
            }
            Op::NewObj => {
                let args = self.pop(at)?;
                let class = self.pop(at)?;
                let built = self.call(class, args, "NEWOBJ", at)?;
                self.stack.push(built);
            }
            Op::NewObjEx => {
                let _kwargs = self.pop(at)?;
                let args = self.pop(at)?;
                let class = self.pop(at)?;
                let built = self.call(class, args, "NEWOBJ_EX", at)?;
                self.stack.push(built);
            }
            Op::Obj => {
                let mut items = self.pop_mark(at)?;
                if items.is_empty() {
                    return Err(self.error(at, "OBJ without a class"));
                }
                let class = items.remove(0);
                let built = self.call(class, Object::Tuple(Rc::from(items)), "OBJ", at)?;
                self.stack.push(built);
            }
            Op::Build => {
                // The state of an object. A stand-in keeps it (a module's `__dict__`, a
                // namespace's attributes); for what torch's globals build it is OrderedDict's
                // `_metadata` (module versions) or a parameter's Python attributes, neither part
                // of the tensors or values read.
                let state = self.pop(at)?;
                if let Object::StandIn(stand_in) = self.top(at)? {
                    let stand_in = stand_in.clone();
                    self.act(&stand_in.global, "BUILD");
                    *stand_in.state.borrow_mut() = Some(state);
                }
            }
            Op::Put(index) => {
                let top = self.top(at)?.clone();
                self.record_shared(&top);
                self.memo.insert(index, top);
            }
            Op::Memoize => {
                let top = self.top(at)?.clone();
                self.record_shared(&top);
                let index = self.memo.len();
                self.memo.insert(index, top);
            }
            Op::Get(index) => {
                let value = self
                    .memo
                    .get(index)
                    .ok_or_else(|| self.error(at, format!("memo entry {index} was never set")))?;
                self.stack.push(value);
            }
            Op::BinPersId => {
                let pid = self.pop(at)?;
                let storage = storages.load(&pid, at)?;
                self.stack.push(storage);
            }
            Op::PersId(_) => {
                return Err(self.error(
                    at,
                    "a text persistent id (PERSID), which torch never writes",
                ));
            }
            Op::Ext(code) => {
                return Err(PytorchError::RefusedGlobal {
                    global: format!("<copyreg extension {code}>"),
                    offset: at,
                });
            }
            Op::NextBuffer | Op::ReadonlyBuffer => {
                return Err(self.error(
                    at,
                    "out-of-band buffers (protocol 5), which torch never writes",
                ));
            }
        }
        Ok(())
    }

    /// Records a container referenced a second time (once per container).
    fn record_shared(&mut self, object: &Object) {
        if let Some(shared) = Shared::of(object)
            && self.shared_seen.insert(shared.address())
        {
            self.shared.push(shared);
        }
    }

    /// The global `module.name`: one of torch's, or a stand-in recorded as a finding.
    fn global(&mut self, module: &str, name: &str, at: usize) -> Result<Object, PytorchError> {
        if let Some(global) = Global::recognize(module, name, at)? {
            return Ok(Object::Global(global));
        }
        let full = format!("{module}.{name}");
        let global: Rc<str> = match self.finding_index.get_key_value(full.as_str()) {
            Some((known, _)) => known.clone(),
            None => {
                // The finding, its name and its index entry.
                self.budget.charge(2 * full.len() as u64 + 128)?;
                let global: Rc<str> = Rc::from(full);
                self.finding_index
                    .insert(global.clone(), self.findings.len());
                self.findings.push(Finding {
                    global: global.to_string(),
                    offset: at,
                    actions: Vec::new(),
                });
                global
            }
        };
        Ok(StandIn::object(global, None))
    }

    /// Records that the pickle did `action` to (what was made of) the global `global`.
    fn act(&mut self, global: &str, action: &'static str) {
        if let Some(&i) = self.finding_index.get(global) {
            let actions = &mut self.findings[i].actions;
            if !actions.contains(&action) {
                actions.push(action);
            }
        }
    }

    /// REDUCE, NEWOBJ, OBJ or INST (`how`): a torch global builds what it means to torch; a
    /// stand-in makes a stand-in of its call, calling nothing.
    fn call(
        &mut self,
        callable: Object,
        args: Object,
        how: &'static str,
        at: usize,
    ) -> Result<Object, PytorchError> {
        match &callable {
            Object::Global(global) => rebuild::call(*global, &args, at),
            Object::StandIn(stand_in) => {
                self.act(&stand_in.global, how);
                Ok(StandIn::object(stand_in.global.clone(), Some(args)))
            }
            _ => Err(self.error(at, format!("{how} calls something that is not a global"))),
        }
    }

    fn append(&mut self, at: usize, items: Vec<Object>) -> Result<(), PytorchError> {
        match self.top(at)? {
            Object::List(list) => {
                list.borrow_mut().extend(items);
                Ok(())
            }
            Object::StandIn(stand_in) => {
                let stand_in = stand_in.clone();
                stand_in.items.borrow_mut().extend(items);
                self.act(&stand_in.global, "APPEND");
                Ok(())
            }
            _ => Err(self.error(at, "APPEND to something that is not a list")),
        }
    }

    fn set_items(&mut self, at: usize, items: Vec<Object>) -> Result<(), PytorchError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.error(at, "SETITEMS with a key and no value"));
        }
        let mut items = items.into_iter();
        match self.top(at)? {
            Object::Dict(dict) => {
                let dict = dict.clone();
                while let (Some(key), Some(value)) = (items.next(), items.next()) {
                    dict.borrow_mut().set(key, value);
                }
            }
            Object::StandIn(stand_in) => {
                let stand_in = stand_in.clone();
                while let (Some(key), Some(value)) = (items.next(), items.next()) {
                    stand_in.entries.borrow_mut().set(key, value);
                }
                self.act(&stand_in.global, "SETITEM");
            }
            _ => return Err(self.error(at, "SETITEM on something that is not a dict")),
        }
        Ok(())
    }

    fn pairs_into(
        &self,
        at: usize,
        mut dict: Dict,
        items: Vec<Object>,
    ) -> Result<Dict, PytorchError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.error(at, "DICT with a key and no value"));
        }
        let mut items = items.into_iter();
        while let (Some(key), Some(value)) = (items.next(), items.next()) {
            dict.set(key, value);
        }
        Ok(dict)
    }
}

/// The memo: indices are dense as picklers write them (0, 1, 2, … by PUT, and MEMOIZE always
/// takes the next), so they index a vector (24 bytes an entry); sparse ones go to a map.
#[derive(Default)]
struct Memo {
    dense: Vec<Object>,
    sparse: HashMap<u64, Object>,
}

impl Memo {
    fn len(&self) -> u64 {
        (self.dense.len() + self.sparse.len()) as u64
    }

    fn insert(&mut self, index: u64, value: Object) {
        match usize::try_from(index) {
            Ok(i) if i < self.dense.len() => self.dense[i] = value,
            Ok(i) if i == self.dense.len() && !self.sparse.contains_key(&index) => {
                self.dense.push(value);
            }
            _ => {
                self.sparse.insert(index, value);
            }
        }
    }

    fn get(&self, index: u64) -> Option<Object> {
        match usize::try_from(index) {
            Ok(i) if i < self.dense.len() => Some(self.dense[i].clone()),
            _ => self.sparse.get(&index).cloned(),
        }
    }
}

fn long_object(long: Long<'_>) -> Object {
    match long.to_i64() {
        Some(i) => Object::Int(i),
        None => Object::BigInt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::formats::pytorch::NoStorages;

    #[test]
    fn a_dict_holding_itself_is_freed() {
        // d = {}; d["a"] = d; also a list holding itself through the memo, then an error.
        let cyclic = b"\x80\x02}q\x00X\x01\x00\x00\x00ah\x00s.";
        let mut budget = Budget::for_pickle(cyclic.len());
        let (graph, _) = run(cyclic, 0, "test", &mut NoStorages, &mut budget).unwrap();
        let Object::Dict(dict) = &*graph else {
            panic!("not a dict")
        };
        let weak = Rc::downgrade(dict);
        drop(graph);
        assert!(weak.upgrade().is_none(), "the cycle kept the dict alive");

        let unfinished = b"\x80\x02]q\x00h\x00a";
        let mut budget = Budget::for_pickle(unfinished.len());
        assert!(run(unfinished, 0, "test", &mut NoStorages, &mut budget).is_err());
    }

    /// Repeating the opcode that builds the most per byte is refused once the budget is spent,
    /// with charges that grow with what is built.
    #[test]
    fn repeated_empty_dicts_exhaust_the_budget() {
        let mut pickle = b"\x80\x02".to_vec();
        pickle.extend(std::iter::repeat_n(b'}', 2_000_000));
        pickle.push(b'.');
        let mut budget = Budget::for_pickle(pickle.len());
        let err = run(&pickle, 0, "test", &mut NoStorages, &mut budget)
            .err()
            .expect("refused");
        assert!(matches!(err, PytorchError::OverBudget { .. }), "{err}");
        assert!(
            budget.spent() > super::super::budget::BASE_BYTES,
            "{}",
            budget.spent()
        );
    }
}
