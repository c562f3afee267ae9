//! The import scanner behind the policy's view of pickle checkpoints: it lists the globals a
//! pickle would import (what GLOBAL, INST and STACK_GLOBAL name) without interpreting anything
//! else, so it describes every pickle — a checkpoint the reader refuses included. Two
//! containers are recognized: a zip archive holding `data.pkl` (PyTorch ≥ 1.6), and a raw
//! pickle of protocol 2 or later (legacy `torch.save` writes several back to back, followed by
//! raw storage bytes).
//!
//! Work is linear in the bytes scanned, the number of imports kept is capped, and nothing is
//! allocated by a count read from the file.

use crate::escape::{shown, shown_message};
use std::collections::{HashMap, HashSet};

use super::allowlist;
use super::opcodes::{LexError, Lexer, Op};
use super::zip::{self, Member};

/// Imports beyond this many distinct names are counted but not listed.
const MAX_IMPORTS: usize = 256;
/// Raw pickles following one another (legacy torch.save writes five).
const MAX_STREAMS: usize = 16;

/// Memoized strings kept to resolve STACK_GLOBAL arguments fetched back from the memo.
const MAX_MEMO_STRINGS: usize = 4096;
/// Strings longer than this are not module or attribute names; they are not kept.
const MAX_NAME_LEN: usize = 512;

/// Tracks just enough of the stack (the last two pushed strings, and strings stored in the
/// memo) to name what STACK_GLOBAL imports.
#[derive(Default)]
struct Scanner {
    imports: Vec<String>,
    seen: HashSet<String>,
    omitted: usize,
    /// Opcodes read so far, over every stream.
    opcodes: u64,
    /// The two most recent stack pushes, when they were strings (None: something else).
    recent: [Option<String>; 2],
    memo: HashMap<u64, String>,
    /// Number of memo slots assigned so far (MEMOIZE uses it as the next index).
    memo_len: u64,
}

impl Scanner {
    fn finish(self, container: Container, incomplete: Option<String>) -> PickleReport {
        PickleReport {
            container,
            imports: self.imports,
            imports_omitted: self.omitted,
            incomplete,
            escaping_members: Vec::new(),
        }
    }

    fn import(&mut self, module: &str, name: &str) {
        let full = if module.is_empty() {
            name.to_string()
        } else {
            format!("{module}.{name}")
        };
        if self.seen.contains(&full) {
            return;
        }
        if self.imports.len() >= MAX_IMPORTS {
            self.omitted += 1;
        } else {
            self.imports.push(full.clone());
        }
        self.seen.insert(full);
    }

    fn push(&mut self, value: Option<String>) {
        self.recent[0] = self.recent[1].take();
        self.recent[1] = value;
    }

    fn push_str(&mut self, raw: &[u8]) {
        let value = (raw.len() <= MAX_NAME_LEN)
            .then(|| std::str::from_utf8(raw).ok().map(str::to_string))
            .flatten();
        self.push(value);
    }

    fn memo_put(&mut self, index: u64) {
        self.memo_len = self.memo_len.max(index.saturating_add(1));
        match &self.recent[1] {
            Some(s) if self.memo.len() < MAX_MEMO_STRINGS || self.memo.contains_key(&index) => {
                self.memo.insert(index, s.clone());
            }
            _ => {
                self.memo.remove(&index);
            }
        }
    }

    /// Scans one pickle stream starting at `start`; returns the offset just past its STOP.
    fn run(&mut self, bytes: &[u8], start: usize) -> Result<usize, StreamError> {
        self.recent = [None, None];
        self.memo.clear();
        self.memo_len = 0;
        let mut lexer = Lexer::new(bytes, start);
        loop {
            let offset = lexer.position();
            let (at, op) = match lexer.next_op() {
                None => return Err(StreamError::NoStop { offset }),
                Some(result) => result.map_err(StreamError::Lex)?,
            };
            self.opcodes += 1;
            match op {
                Op::Stop => return Ok(lexer.position()),
                Op::Proto(_) | Op::Frame => {}
                Op::Dup => {
                    let top = self.recent[1].clone();
                    self.push(top);
                }
                Op::Memoize => {
                    let index = self.memo_len;
                    self.memo_put(index);
                }
                Op::Put(index) => self.memo_put(index),
                Op::Get(index) => {
                    let value = self.memo.get(&index).cloned();
                    self.push(value);
                }
                Op::Str(s) | Op::Bytes8(s) => self.push_str(s),
                Op::Ext(code) => {
                    self.import("", &format!("<copyreg extension {code}>"));
                    self.push(None);
                }
                Op::Global { module, name } | Op::Inst { module, name } => {
                    let module = String::from_utf8_lossy(module).into_owned();
                    let name = String::from_utf8_lossy(name).into_owned();
                    self.import(&module, &name);
                    self.push(None);
                }
                Op::StackGlobal => {
                    match (self.recent[0].take(), self.recent[1].take()) {
                        (Some(module), Some(name)) => self.import(&module, &name),
                        _ => self.import("", &format!("<unresolved STACK_GLOBAL at offset {at}>")),
                    }
                    self.push(None);
                }
                _ => self.push(None),
            }
        }
    }
}

/// Why a pickle stream could not be scanned to its STOP.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("no STOP opcode before the end (offset {offset})")]
    NoStop { offset: usize },
    #[error("{0}")]
    Lex(LexError),
}

/// How the pickle was wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// A zip archive; `entry` is the name of the `data.pkl` member.
    Zip { entry: String },
    /// A bare pickle stream starting with the PROTO opcode.
    Raw { protocol: u8 },
}

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickleReport {
    pub container: Container,
    /// Distinct `module.name` imports in order of first appearance (at most 256).
    pub imports: Vec<String>,
    /// Distinct imports not listed because of the cap.
    pub imports_omitted: usize,
    /// Why the scan stopped early, if it did (a compressed member, a malformed stream...).
    /// The imports before that point are still reported.
    pub incomplete: Option<String>,
    /// Zip members whose names climb out of the directory an archive is extracted to
    /// (`../../x`, `/etc/x`): what unzipping it would write elsewhere (at most 16 listed).
    pub escaping_members: Vec<String>,
}

impl PickleReport {
    /// Imports that a plain PyTorch/NumPy state dict does not need: the ones a reviewer should
    /// look at (`os.system`, `builtins.eval`, `subprocess.Popen`...).
    pub fn unexpected_imports(&self) -> Vec<&str> {
        self.imports
            .iter()
            .map(String::as_str)
            .filter(|name| !allowlist::is_expected_import(name))
            .collect()
    }

    /// One line for reports: container, then imports with the unexpected ones called out.
    pub fn describe(&self) -> String {
        let mut out = match &self.container {
            Container::Zip { entry } => format!("pickle (zip archive, {})", shown(entry)),
            Container::Raw { protocol: 0 } => "pickle (raw, protocol 0 or 1)".to_owned(),
            Container::Raw { protocol } => format!("pickle (raw, protocol {protocol})"),
        };
        if self.imports.is_empty() {
            out.push_str(" importing nothing");
        } else {
            out.push_str(" importing ");
            let imports: Vec<_> = self.imports.iter().map(|name| shown(name)).collect();
            out.push_str(&imports.join(", "));
            if self.imports_omitted > 0 {
                out.push_str(&format!(" and {} more", self.imports_omitted));
            }
            // The globals beyond those of tensors, by tier, most dangerous first.
            for tier in [
                allowlist::Tier::Dangerous,
                allowlist::Tier::Unknown,
                allowlist::Tier::Benign,
            ] {
                let named: Vec<String> = self
                    .unexpected_imports()
                    .into_iter()
                    .filter(|name| allowlist::tier(name) == tier)
                    .map(|name| shown(&allowlist::with_os_alias(name)).into_owned())
                    .collect();
                if !named.is_empty() {
                    out.push_str(&format!("; {}: {}", tier.name(), named.join(", ")));
                }
            }
        }
        if let Some(why) = &self.incomplete {
            out.push_str(&format!(" (scan incomplete: {})", shown_message(why)));
        }
        if let Some(note) = self.escaping_note() {
            out.push_str(&format!("; {note}"));
        }
        out
    }

    /// What names members outside the extraction directory, or None when none does.
    pub(crate) fn escaping_note(&self) -> Option<String> {
        if self.escaping_members.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .escaping_members
            .iter()
            .map(|n| crate::escape::quoted(n))
            .collect();
        Some(format!(
            "path traversal: the archive's member {} names a path outside the directory it is \
             extracted to",
            names.join(", ")
        ))
    }
}

/// Members named at most this many times in [`PickleReport::escaping_members`].
const MAX_ESCAPING: usize = 16;

/// The names of `members` that climb out of the extraction directory: a `..` component, an
/// absolute path or a drive letter (zip readers that extract by name follow them).
fn escaping(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .map(|m| m.name.as_str())
        .filter(|name| {
            name.starts_with(['/', '\\'])
                || name.as_bytes().get(1) == Some(&b':')
                || name.split(['/', '\\']).any(|part| part == "..")
        })
        .take(MAX_ESCAPING)
        .map(str::to_owned)
        .collect()
}

/// Recognizes a pickle checkpoint and scans it; None when `bytes` is not one.
pub fn sniff(bytes: &[u8]) -> Option<PickleReport> {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return sniff_zip(bytes);
    }
    sniff_raw(bytes)
}

/// [`sniff`], and for bytes it does not take for a pickle, what a stream at their start names
/// up to where it breaks off: unpickling runs a broken stream up to its error, so a dangerous
/// GLOBAL before it counts (a protocol-0 pickle that reaches `builtins.exec` and then holds
/// garbage). None when nothing there reads as opcodes naming a global.
pub(crate) fn scan_any(bytes: &[u8]) -> Option<PickleReport> {
    if let Some(report) = sniff(bytes) {
        // A member the directory names that cannot be read under that name (its local header
        // renames it): its bytes, read by a reader of local headers, are scanned too.
        let unread = matches!(report.container, Container::Zip { .. })
            && report.incomplete.is_some()
            && dangerous_imports(&report).is_empty();
        let by_content = unread.then(|| scan_zip_by_content(bytes)).flatten();
        return Some(by_content.unwrap_or(report));
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return scan_zip_by_content(bytes);
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return npy_object_pickle(bytes).and_then(scan_streams);
    }
    // A pickle of protocol 0 or 1 may start with most opcodes (`V`, `S`...), not with
    // STACK_GLOBAL, which needs two values on the stack; a stream that names no global is not
    // reported, so bytes that merely lex as opcodes name nothing.
    if bytes.first() == Some(&0x93) {
        return None;
    }
    scan_streams(bytes)
}

/// Every stream from the start of `bytes` up to where one breaks off, when some names a global.
fn scan_streams(bytes: &[u8]) -> Option<PickleReport> {
    let mut scan = Scanner::default();
    let mut pos = 0;
    let mut incomplete = None;
    for _ in 0..MAX_STREAMS {
        match scan.run(bytes, pos) {
            Ok(end) if end < bytes.len() => pos = end,
            Ok(_) => break,
            Err(err) => {
                incomplete = Some(format!("the pickle breaks off: {err}"));
                break;
            }
        }
    }
    if scan.imports.is_empty() {
        return None;
    }
    let protocol = match bytes {
        [0x80, p, ..] => *p,
        _ => 0,
    };
    Some(scan.finish(Container::Raw { protocol }, incomplete))
}

/// The dangerous globals of [`PickleReport::imports`], with `posix.system`'s os alias.
pub(crate) fn dangerous_imports(report: &PickleReport) -> Vec<String> {
    report
        .imports
        .iter()
        .filter(|g| allowlist::tier(g) == allowlist::Tier::Dangerous)
        .map(|g| allowlist::with_os_alias(g))
        .collect()
}

fn sniff_raw(bytes: &[u8]) -> Option<PickleReport> {
    let protocol = match bytes {
        [0x80, p @ 2..=5, ..] => *p,
        [b'(' | b'c' | b'}' | b']' | b')' | b'i', ..] => return sniff_text(bytes),
        _ => return None,
    };
    let mut scan = Scanner::default();
    let mut pos = 0usize;
    let mut streams = 0usize;
    let mut incomplete = None;
    // Legacy torch.save: magic, protocol, sys_info, the object, storage keys, then raw data.
    while streams < MAX_STREAMS
        && bytes.get(pos) == Some(&0x80)
        && matches!(bytes.get(pos + 1), Some(2..=5))
    {
        match scan.run(bytes, pos) {
            Ok(end) => {
                streams += 1;
                pos = end;
            }
            Err(err) => {
                // The first opcodes must parse for the bytes to count as a pickle at all.
                if streams == 0 && scan.opcodes < 3 {
                    return None;
                }
                // After a complete pickle, what follows may be raw storage bytes that merely
                // start like one; the imports seen on the way are kept either way.
                if streams == 0 {
                    incomplete = Some(err.to_string());
                }
                break;
            }
        }
    }
    Some(scan.finish(Container::Raw { protocol }, incomplete))
}

/// A pickle of protocol 0 or 1, which has no PROTO opcode to recognize it by: its first byte
/// starts one of the opcodes such pickles start with, and the whole of `bytes` is one stream
/// that reads to its STOP.
fn sniff_text(bytes: &[u8]) -> Option<PickleReport> {
    let mut scan = Scanner::default();
    match scan.run(bytes, 0) {
        Ok(end) if end == bytes.len() && scan.opcodes >= 3 => {
            Some(scan.finish(Container::Raw { protocol: 0 }, None))
        }
        _ => None,
    }
}

fn sniff_zip(bytes: &[u8]) -> Option<PickleReport> {
    let complete;
    let entries = match zip::members(bytes) {
        Ok(Some(archive))
            if !archive.complete && !archive.members.iter().any(|m| zip::is_data_pkl(&m.name)) =>
        {
            // A prefix whose data.pkl comes later: torch.save's other members say what it is.
            let first = archive
                .members
                .iter()
                .find(|m| zip::is_torch_member(&m.name))?;
            let folder = first.name.split('/').next().unwrap_or_default();
            return Some(Scanner::default().finish(
                Container::Zip {
                    entry: format!("{folder}/data.pkl"),
                },
                Some("data.pkl lies beyond the bytes read".to_owned()),
            ));
        }
        Ok(archive) => {
            let archive = archive?;
            complete = archive.complete;
            archive.members
        }
        // A broken directory behind a first member named as torch.save names it, or behind
        // pickle members, is a damaged (or hostile) checkpoint: its parse gives the error, not
        // "not a model", and the pickles its local headers hold are scanned (a reader of
        // local headers would load them).
        Err(err) => return scan_local_pickles(bytes, &err.to_string()),
    };
    // The data.pkl torch reads, else any data.pkl, else any pickle member: a zip that is not
    // a torch.save layout but holds pickles (`model/malicious.pkl`) is scanned too.
    let data_pkl = zip::torch_data_pkl(&entries)
        .or_else(|| entries.iter().find(|e| zip::is_data_pkl(&e.name)))
        .or_else(|| entries.iter().find(|e| is_pickle_member(&e.name)));
    // No pickle by the directory's names: its local headers may name one otherwise (a
    // directory that renames data.pkl), which a reader of local headers would load.
    let Some(data_pkl) = data_pkl else {
        return scan_local_pickles(
            bytes,
            "the zip directory names no pickle member; a local header does",
        );
    };
    let mut scan = Scanner::default();
    let mut incomplete = None;
    // Scan data.pkl first, then every other pickle member (TorchScript's constants.pkl,
    // another folder's data.pkl...).
    let mut order: Vec<&Member> = vec![data_pkl];
    order.extend(
        entries
            .iter()
            .filter(|e| is_pickle_member(&e.name) && e.name != data_pkl.name),
    );
    for entry in order {
        let result = entry
            .stored_data(bytes)
            .map_err(|e| e.to_string())
            .and_then(|data| scan.run(data, 0).map(|_| ()).map_err(|e| e.to_string()));
        if let Err(err) = result {
            incomplete.get_or_insert(format!("{}: {err}", entry.name));
        }
    }
    if !complete {
        // A prefix read without the zip directory: a member after the bytes read (another
        // data.pkl that torch would take) is not known, so the scan does not call it clean.
        incomplete.get_or_insert(
            "the zip directory lies beyond the bytes read, so later members are not known"
                .to_owned(),
        );
    }
    let mut report = scan.finish(
        Container::Zip {
            entry: data_pkl.name.clone(),
        },
        incomplete,
    );
    report.escaping_members = escaping(&entries);
    Some(report)
}

/// The pickle members an archive's local headers hold, scanned, when its directory is
/// refused (`why`): None unless its first member is a data.pkl or some member is a pickle.
fn scan_local_pickles(bytes: &[u8], why: &str) -> Option<PickleReport> {
    let locals = zip::local_headers(bytes)?;
    let first = locals.first()?;
    let pickles: Vec<&Member> = locals
        .iter()
        .filter(|m| is_pickle_member(&m.name))
        .collect();
    if !zip::is_data_pkl(&first.name) && pickles.is_empty() {
        return None;
    }
    let entry = pickles.first().map_or(&first.name, |m| &m.name).clone();
    let mut scan = Scanner::default();
    for member in pickles {
        if let Ok(data) = member.stored_data(bytes) {
            // What the stream names before it breaks off counts; the error is `why`'s.
            let _ = scan.run(data, 0);
        }
    }
    let mut report = scan.finish(Container::Zip { entry }, Some(why.to_owned()));
    report.escaping_members = escaping(&locals);
    Some(report)
}

/// A zip whose members are pickles by their bytes, not their names (`data.txt` holding a
/// pickle, a directory that renames its member): every stored member whose data starts with
/// PROTO is scanned, as a reader that unpickles it whatever its name would run it.
fn scan_zip_by_content(bytes: &[u8]) -> Option<PickleReport> {
    let locals = zip::local_headers(bytes)?;
    let mut scan = Scanner::default();
    let mut entry = None;
    for member in &locals {
        let Ok(data) = member.stored_data(bytes) else {
            continue;
        };
        if matches!(data, [0x80, 2..=5, ..]) {
            entry.get_or_insert_with(|| member.name.clone());
            // What the stream names before it breaks off counts.
            let _ = scan.run(data, 0);
        }
    }
    let entry = entry?;
    if scan.imports.is_empty() {
        return None;
    }
    let mut report = scan.finish(
        Container::Zip { entry },
        Some("a member holds a pickle that its name does not announce".to_owned()),
    );
    report.escaping_members = escaping(&locals);
    Some(report)
}

/// The pickle of a `.npy` array of Python objects (dtype `|O`): numpy's magic, a version, the
/// header's length and text, then the pickle `numpy.load(allow_pickle=True)` unpickles.
fn npy_object_pickle(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(b"\x93NUMPY")?;
    let (header_len, start) = match rest {
        [1, _, a, b, ..] => (usize::from(u16::from_le_bytes([*a, *b])), 10usize),
        [2 | 3, _, a, b, c, d, ..] => (
            usize::try_from(u32::from_le_bytes([*a, *b, *c, *d])).ok()?,
            12,
        ),
        _ => return None,
    };
    let header = bytes.get(start..start.checked_add(header_len)?)?;
    let object = header.windows(4).any(|w| w == b"'|O'");
    object.then(|| &bytes[start + header_len..])
}

/// Whether a zip member is named as pickles are (`.pkl`, `.pickle`).
fn is_pickle_member(name: &str) -> bool {
    name.ends_with(".pkl") || name.ends_with(".pickle")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pickle.dumps({"a": 1}, protocol=2)`
    const DICT_P2: &[u8] = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01s.";

    #[test]
    fn plain_dict_imports_nothing() {
        let r = sniff(DICT_P2).unwrap();
        assert_eq!(r.container, Container::Raw { protocol: 2 });
        assert!(r.imports.is_empty());
        assert!(r.incomplete.is_none());
    }

    #[test]
    fn global_opcode_protocol_2() {
        // pickle.dumps(os.system-reducer, protocol=2) as CPython writes it.
        let bytes = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00echoq\x01\x85q\x02Rq\x03.";
        let r = sniff(bytes).unwrap();
        assert_eq!(r.imports, vec!["posix.system"]);
        assert_eq!(r.unexpected_imports(), vec!["posix.system"]);
    }

    #[test]
    fn stack_global_with_memo() {
        // protocol 4: SHORT_BINUNICODE "os" MEMOIZE SHORT_BINUNICODE "system" MEMOIZE
        // STACK_GLOBAL MEMOIZE, then the same global again through BINGET 0 / BINGET 1.
        let mut b = vec![0x80, 4, 0x95];
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(b"\x8c\x02os\x94\x8c\x06system\x94\x93\x94");
        b.extend_from_slice(b"h\x00h\x01\x93\x94");
        b.extend_from_slice(b"\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94");
        b.extend_from_slice(b")R\x94.");
        let r = sniff(&b).unwrap();
        assert_eq!(r.imports, vec!["os.system", "collections.OrderedDict"]);
        assert_eq!(r.unexpected_imports(), vec!["os.system"]);
    }

    #[test]
    fn not_a_pickle() {
        assert!(sniff(b"GGUF\x03\x00\x00\x00").is_none());
        assert!(sniff(b"\x80\x02\xff\xff\xff").is_none());
        assert!(sniff(b"").is_none());
        assert!(sniff(b"\x80").is_none());
        assert!(sniff(b"PK\x03\x04").is_none());
    }

    #[test]
    fn truncated_stream_is_reported_not_dropped() {
        let bytes = b"\x80\x02cposix\nsystem\nq\x00X\xff\xff\x00\x00ab";
        let r = sniff(bytes).unwrap();
        assert_eq!(r.imports, vec!["posix.system"]);
        assert!(r.incomplete.as_deref().unwrap().contains("past the end"));
    }

    #[test]
    fn raw_storage_after_the_pickles_is_not_scanned_as_pickle() {
        let mut b = DICT_P2.to_vec();
        b.extend_from_slice(b"\x80\x02\xff\xff raw storage bytes");
        let r = sniff(&b).unwrap();
        assert!(r.incomplete.is_none(), "{r:?}");
        // A second stream that imports before breaking still reports its import.
        let mut b = DICT_P2.to_vec();
        b.extend_from_slice(b"\x80\x02cos\nsystem\n\xff");
        assert_eq!(sniff(&b).unwrap().imports, vec!["os.system"]);
    }

    /// A length opcode claiming 2^64 - 1 bytes is a scan stopped with its reason (nothing
    /// allocated for the claim, nothing imported), the same on a second scan.
    #[test]
    fn hostile_lengths_do_not_panic() {
        for op in [0x8d_u8, 0x8e, 0x96, b'B', b'T', b'X', 0x8b] {
            let mut b = vec![0x80, 4, b'N', b'N', b'N', op];
            b.extend_from_slice(&[0xff; 8]);
            let report = sniff(&b).unwrap_or_else(|| panic!("opcode {op:#x}: not a pickle"));
            assert_eq!(report.container, Container::Raw { protocol: 4 });
            assert!(report.imports.is_empty(), "opcode {op:#x}: {report:?}");
            let why = report
                .incomplete
                .as_deref()
                .unwrap_or_else(|| panic!("opcode {op:#x}: complete"));
            assert!(why.len() < 256, "opcode {op:#x}: {why}");
            assert_eq!(sniff(&b), Some(report));
        }
    }

    /// What any scan keeps to: at most MAX_IMPORTS distinct imports, each of bounded length, a
    /// bounded description, and the same report on a second scan.
    fn assert_scan_is_sound(bytes: &[u8]) {
        let report = sniff(bytes);
        if let Some(r) = &report {
            assert!(r.imports.len() <= MAX_IMPORTS);
            let distinct: std::collections::HashSet<&String> = r.imports.iter().collect();
            assert_eq!(distinct.len(), r.imports.len(), "{r:?}");
            // A GLOBAL's name is bytes of the input; a STACK_GLOBAL's, two memo strings of at
            // most MAX_NAME_LEN; the placeholders (`<copyreg extension N>`), a few words.
            let longest = bytes.len() + 2 * MAX_NAME_LEN + 64;
            for import in &r.imports {
                assert!(
                    import.chars().count() <= longest,
                    "{import} from {} bytes",
                    bytes.len()
                );
            }
            assert!(r.describe().len() <= 64 * bytes.len() + 1024);
        }
        assert_eq!(sniff(bytes), report);
    }

    fn stored_zip(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in members {
            let offset = out.len() as u32;
            let mut h = Vec::new();
            h.extend_from_slice(b"PK\x03\x04");
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            h.extend_from_slice(&0u32.to_le_bytes()); // crc (not checked)
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&h);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            central.extend_from_slice(b"PK\x01\x02");
            central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend_from_slice(&0u32.to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(name.len() as u16).to_le_bytes());
            central.extend_from_slice(&[0; 8]);
            central.extend_from_slice(&0u32.to_le_bytes());
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let cd_offset = out.len() as u32;
        out.extend_from_slice(&central);
        out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(central.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_offset.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    #[test]
    fn zip_with_data_pkl() {
        let zip = stored_zip(&[
            ("archive/version", b"3\n"),
            (
                "archive/data.pkl",
                b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00.",
            ),
            ("archive/data/0", &[0u8; 16]),
        ]);
        let r = sniff(&zip).unwrap();
        assert_eq!(
            r.container,
            Container::Zip {
                entry: "archive/data.pkl".into()
            }
        );
        assert_eq!(r.imports, vec!["torch._utils._rebuild_tensor_v2"]);
        assert!(r.unexpected_imports().is_empty());
        // Without the central directory, the local headers still lead to data.pkl.
        let cut = &zip[..zip.len() - 40];
        assert_eq!(sniff(cut).unwrap().imports, r.imports);
    }

    #[test]
    fn zip_without_data_pkl_is_not_a_checkpoint() {
        let zip = stored_zip(&[("readme.txt", b"hello")]);
        assert!(sniff(&zip).is_none());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..512), head in 0usize..4) {
            let prefixes: [&[u8]; 4] = [b"", b"\x80\x02", b"\x80\x04\x95", b"PK\x03\x04"];
            let mut bytes = prefixes[head].to_vec();
            bytes.extend_from_slice(&body);
            assert_scan_is_sound(&bytes);
            // A real archive with a garbage data.pkl, cut anywhere.
            let zip = stored_zip(&[("archive/data.pkl", &body)]);
            for cut in [zip.len(), zip.len() / 2, 31] {
                assert_scan_is_sound(&zip[..cut.min(zip.len())]);
            }
        }
    }
}
