//! Recognizes PyTorch pickle checkpoints by their bytes and lists the globals they import.
//!
//! Nothing is ever unpickled: loading a pickle runs whatever callables it names (`os.system`
//! included), which is why policies forbid them. The scanner walks the opcode stream, skipping
//! every argument by its declared length, and records the `module.name` pairs that GLOBAL, INST
//! and STACK_GLOBAL would import. Two containers are recognized:
//! - a zip archive holding `data.pkl` (PyTorch ≥ 1.6 `torch.save`; entries are stored
//!   uncompressed, so the pickle is read in place), found through the central directory;
//! - a raw pickle of protocol 2 or later (legacy `torch.save`, which writes several pickles
//!   back to back followed by raw storage bytes).
//!
//! Work is linear in the bytes scanned, the number of imports kept is capped, and nothing is
//! allocated by a count read from the file.

use std::collections::HashMap;

/// Imports beyond this many distinct names are counted but not listed.
const MAX_IMPORTS: usize = 256;
/// Memoized strings kept to resolve STACK_GLOBAL arguments fetched back from the memo.
const MAX_MEMO_STRINGS: usize = 4096;
/// Strings longer than this are not module or attribute names; they are not kept.
const MAX_NAME_LEN: usize = 512;
/// Raw pickles following one another (legacy torch.save writes five).
const MAX_STREAMS: usize = 16;

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
    /// Distinct `module.name` imports in order of first appearance (at most [`MAX_IMPORTS`]).
    pub imports: Vec<String>,
    /// Distinct imports not listed because of the cap.
    pub imports_omitted: usize,
    /// Why the scan stopped early, if it did (a compressed member, a malformed stream...).
    /// The imports before that point are still reported.
    pub incomplete: Option<String>,
}

impl PickleReport {
    /// Imports that a plain PyTorch/NumPy state dict does not need: the ones a reviewer should
    /// look at (`os.system`, `builtins.eval`, `subprocess.Popen`...).
    pub fn unexpected_imports(&self) -> Vec<&str> {
        self.imports
            .iter()
            .map(String::as_str)
            .filter(|name| !is_expected_import(name))
            .collect()
    }

    /// One line for reports: container, then imports with the unexpected ones called out.
    pub fn describe(&self) -> String {
        let mut out = match &self.container {
            Container::Zip { entry } => format!("pickle (zip archive, {entry})"),
            Container::Raw { protocol } => format!("pickle (raw, protocol {protocol})"),
        };
        if self.imports.is_empty() {
            out.push_str(" importing nothing");
        } else {
            out.push_str(" importing ");
            out.push_str(&self.imports.join(", "));
            if self.imports_omitted > 0 {
                out.push_str(&format!(" and {} more", self.imports_omitted));
            }
            let unexpected: Vec<String> = self
                .unexpected_imports()
                .into_iter()
                .map(with_os_alias)
                .collect();
            if !unexpected.is_empty() {
                out.push_str(&format!(
                    "; suspicious (not needed by a tensor state dict): {}",
                    unexpected.join(", ")
                ));
            }
        }
        if let Some(why) = &self.incomplete {
            out.push_str(&format!(" (scan incomplete: {why})"));
        }
        out
    }
}

/// CPython pickles `os.system` as `posix.system` (or `nt.system`): say which it is.
fn with_os_alias(name: &str) -> String {
    match name.split_once('.') {
        Some(("posix" | "nt", attr)) => format!("{name} (os.{attr})"),
        _ => name.to_string(),
    }
}

/// Globals a torch/numpy tensor checkpoint legitimately imports.
fn is_expected_import(name: &str) -> bool {
    let (module, attr) = name.rsplit_once('.').unwrap_or(("", name));
    matches!(
        name,
        "collections.OrderedDict" | "_codecs.encode" | "builtins.set" | "builtins.frozenset"
    ) || ((module == "torch" || module.starts_with("torch."))
        && !attr.is_empty()
        && module != "torch.hub"
        && module != "torch.jit"
        && module != "torch.package")
        || module == "numpy"
        || module.starts_with("numpy.")
}

/// Recognizes a pickle checkpoint and scans it; None when `bytes` is not one.
pub fn sniff(bytes: &[u8]) -> Option<PickleReport> {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return sniff_zip(bytes);
    }
    sniff_raw(bytes)
}

fn sniff_raw(bytes: &[u8]) -> Option<PickleReport> {
    let protocol = match bytes {
        [0x80, p @ 2..=5, ..] => *p,
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
                    incomplete = Some(err);
                }
                break;
            }
        }
    }
    Some(scan.finish(Container::Raw { protocol }, incomplete))
}

fn sniff_zip(bytes: &[u8]) -> Option<PickleReport> {
    let entries = zip_entries(bytes)?;
    let data_pkl = entries
        .iter()
        .find(|e| e.name == "data.pkl" || e.name.ends_with("/data.pkl"))?;
    let mut scan = Scanner::default();
    let mut incomplete = None;
    // Scan data.pkl first, then any other pickle members (TorchScript's constants.pkl...).
    let mut order: Vec<&ZipEntry> = vec![data_pkl];
    order.extend(
        entries
            .iter()
            .filter(|e| e.name.ends_with(".pkl") && e.name != data_pkl.name),
    );
    for entry in order {
        let result = entry
            .stored_data(bytes)
            .and_then(|data| scan.run(data, 0).map(|_| ()));
        if let Err(err) = result {
            incomplete.get_or_insert(format!("{}: {err}", entry.name));
        }
    }
    Some(scan.finish(
        Container::Zip {
            entry: data_pkl.name.clone(),
        },
        incomplete,
    ))
}

/// One member of a zip archive as the central directory (or a local header) describes it.
#[derive(Debug)]
struct ZipEntry {
    name: String,
    method: u16,
    compressed_size: u64,
    local_header: u64,
}

impl ZipEntry {
    /// The member's bytes, when stored uncompressed and present in full.
    fn stored_data<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8], String> {
        if self.method != 0 {
            return Err(format!(
                "compressed with zip method {} (PyTorch stores members uncompressed), not scanned",
                self.method
            ));
        }
        let at = usize::try_from(self.local_header).map_err(|_| "offset too large".to_string())?;
        let header = bytes
            .get(at..at.saturating_add(30))
            .filter(|h| h.starts_with(b"PK\x03\x04"))
            .ok_or_else(|| format!("no local file header at offset {at}"))?;
        let name_len = usize::from(u16le(header, 26));
        let extra_len = usize::from(u16le(header, 28));
        let start = at + 30 + name_len + extra_len;
        let len =
            usize::try_from(self.compressed_size).map_err(|_| "size too large".to_string())?;
        bytes
            .get(start..start.saturating_add(len))
            .ok_or_else(|| format!("member data at offset {start} runs past the end of the file"))
    }
}

fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The members of a zip archive: from the central directory when the end record is present,
/// else by walking local headers from the start (a truncated file).
fn zip_entries(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    match central_directory(bytes) {
        Some(entries) => Some(entries),
        None => local_headers(bytes),
    }
}

fn central_directory(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    // The end record is 22 bytes plus a comment of up to 65535 bytes.
    let tail_start = bytes.len().saturating_sub(22 + 65535);
    let eocd = (tail_start..=bytes.len().checked_sub(22)?)
        .rev()
        .find(|&i| bytes[i..].starts_with(b"PK\x05\x06"))?;
    let mut cd_size = u64::from(u32le(bytes, eocd + 12));
    let mut cd_offset = u64::from(u32le(bytes, eocd + 16));
    if cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
        // zip64: the locator sits just before the end record and points at the zip64 end record.
        let loc = eocd.checked_sub(20)?;
        if !bytes[loc..].starts_with(b"PK\x06\x07") {
            return None;
        }
        let rec = usize::try_from(u64le(bytes, loc + 8)).ok()?;
        let rec_bytes = bytes.get(rec..rec.checked_add(56)?)?;
        if !rec_bytes.starts_with(b"PK\x06\x06") {
            return None;
        }
        cd_size = u64le(rec_bytes, 40);
        cd_offset = u64le(rec_bytes, 48);
    }
    let start = usize::try_from(cd_offset).ok()?;
    let end = start.checked_add(usize::try_from(cd_size).ok()?)?;
    let cd = bytes.get(start..end)?;
    let mut entries = Vec::new();
    let mut pos = 0usize;
    while cd.len() >= pos + 46 && cd[pos..].starts_with(b"PK\x01\x02") {
        let h = &cd[pos..];
        let method = u16le(h, 10);
        let mut compressed_size = u64::from(u32le(h, 20));
        let uncompressed_size = u64::from(u32le(h, 24));
        let name_len = usize::from(u16le(h, 28));
        let extra_len = usize::from(u16le(h, 30));
        let comment_len = usize::from(u16le(h, 32));
        let mut local_header = u64::from(u32le(h, 42));
        let name = h.get(46..46 + name_len)?;
        let extra = h.get(46 + name_len..46 + name_len + extra_len)?;
        // zip64 extended information: present fields appear in a fixed order, each only when
        // its 32-bit counterpart is saturated.
        if let Some(z64) = zip64_extra(extra) {
            let mut fields = z64.chunks_exact(8).map(|c| u64le(c, 0));
            if uncompressed_size == 0xFFFF_FFFF {
                fields.next();
            }
            if compressed_size == 0xFFFF_FFFF {
                compressed_size = fields.next()?;
            }
            if local_header == 0xFFFF_FFFF {
                local_header = fields.next()?;
            }
        }
        entries.push(ZipEntry {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed_size,
            local_header,
        });
        pos += 46 + name_len + extra_len + comment_len;
    }
    if entries.is_empty() {
        None
    } else {
        Some(entries)
    }
}

fn zip64_extra(mut extra: &[u8]) -> Option<&[u8]> {
    while extra.len() >= 4 {
        let id = u16le(extra, 0);
        let len = usize::from(u16le(extra, 2));
        let body = extra.get(4..4 + len)?;
        if id == 0x0001 {
            return Some(body);
        }
        extra = &extra[4 + len..];
    }
    None
}

fn local_headers(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    let mut entries = Vec::new();
    let mut pos = 0usize;
    while let Some(h) = bytes
        .get(pos..pos + 30)
        .filter(|h| h.starts_with(b"PK\x03\x04"))
    {
        let flags = u16le(h, 6);
        let method = u16le(h, 8);
        let compressed_size = u64::from(u32le(h, 18));
        let name_len = usize::from(u16le(h, 26));
        let extra_len = usize::from(u16le(h, 28));
        let name = bytes.get(pos + 30..pos + 30 + name_len)?;
        entries.push(ZipEntry {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed_size,
            local_header: pos as u64,
        });
        // A data descriptor (sizes after the data) or a zip64 size cannot be walked past.
        if flags & 0x08 != 0 || compressed_size == 0xFFFF_FFFF {
            break;
        }
        let next = usize::try_from(compressed_size)
            .ok()
            .and_then(|len| (pos + 30 + name_len + extra_len).checked_add(len));
        match next {
            Some(next) => pos = next,
            None => break,
        }
    }
    if entries.is_empty() {
        None
    } else {
        Some(entries)
    }
}

/// The opcode walker. Tracks just enough of the stack (the last two pushed strings, and
/// strings stored in the memo) to name what STACK_GLOBAL imports.
#[derive(Default)]
struct Scanner {
    imports: Vec<String>,
    seen: std::collections::HashSet<String>,
    omitted: usize,
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

    fn memo_get(&mut self, index: u64) {
        let value = self.memo.get(&index).cloned();
        self.push(value);
    }

    /// Scans one pickle stream starting at `start`; returns the offset just past its STOP.
    fn run(&mut self, bytes: &[u8], start: usize) -> Result<usize, String> {
        self.recent = [None, None];
        self.memo.clear();
        self.memo_len = 0;
        let mut r = Reader { bytes, pos: start };
        loop {
            let at = r.pos;
            let op = r
                .u8()
                .ok_or_else(|| format!("no STOP opcode before the end (offset {at})"))?;
            self.opcodes += 1;
            let truncated = || format!("opcode 0x{op:02x} at offset {at} runs past the end");
            match op {
                // STOP
                b'.' => return Ok(r.pos),
                // Opcodes without arguments that push something that is not a string.
                b'(' | b'N' | b')' | b']' | b'}' | 0x88 | 0x89 | 0x8f => self.push(None),
                // Opcodes without arguments that pop or combine; the result is not a string.
                b'0' | b'1' | b'Q' | b'R' | b'a' | b'b' | b'd' | b'e' | b'l' | b'o' | b's'
                | b't' | b'u' | 0x81 | 0x85 | 0x86 | 0x87 | 0x90 | 0x91 | 0x92 | 0x97 | 0x98 => {
                    self.push(None)
                }
                // DUP pushes a copy of the top.
                b'2' => {
                    let top = self.recent[1].clone();
                    self.push(top);
                }
                // PROTO n
                0x80 => {
                    r.take(1).ok_or_else(truncated)?;
                }
                // FRAME n: only a hint for buffering; the opcodes continue inline.
                0x95 => {
                    r.take(8).ok_or_else(truncated)?;
                }
                // MEMOIZE
                0x94 => {
                    let index = self.memo_len;
                    self.memo_put(index);
                }
                // BINPUT, LONG_BINPUT, PUT
                b'q' => {
                    let n = r.u8().ok_or_else(truncated)?;
                    self.memo_put(u64::from(n));
                }
                b'r' => {
                    let n = r.u32().ok_or_else(truncated)?;
                    self.memo_put(u64::from(n));
                }
                b'p' => {
                    let line = r.line().ok_or_else(truncated)?;
                    let n = parse_decimal(line)
                        .ok_or_else(|| format!("bad PUT index at offset {at}"))?;
                    self.memo_put(n);
                }
                // BINGET, LONG_BINGET, GET
                b'h' => {
                    let n = r.u8().ok_or_else(truncated)?;
                    self.memo_get(u64::from(n));
                }
                b'j' => {
                    let n = r.u32().ok_or_else(truncated)?;
                    self.memo_get(u64::from(n));
                }
                b'g' => {
                    let line = r.line().ok_or_else(truncated)?;
                    let n = parse_decimal(line)
                        .ok_or_else(|| format!("bad GET index at offset {at}"))?;
                    self.memo_get(n);
                }
                // Fixed-size numbers.
                b'K' => {
                    r.take(1).ok_or_else(truncated)?;
                    self.push(None);
                }
                b'M' => {
                    r.take(2).ok_or_else(truncated)?;
                    self.push(None);
                }
                b'J' => {
                    r.take(4).ok_or_else(truncated)?;
                    self.push(None);
                }
                b'G' => {
                    r.take(8).ok_or_else(truncated)?;
                    self.push(None);
                }
                // EXT1/2/4: a global from the copyreg extension registry, named only by code.
                0x82..=0x84 => {
                    let width = match op {
                        0x82 => 1,
                        0x83 => 2,
                        _ => 4,
                    };
                    let code = r.take(width).ok_or_else(truncated)?;
                    let mut n = [0u8; 4];
                    n[..width].copy_from_slice(code);
                    self.import(
                        "",
                        &format!("<copyreg extension {}>", u32::from_le_bytes(n)),
                    );
                    self.push(None);
                }
                // Newline-terminated numbers: INT, LONG, FLOAT.
                b'I' | b'L' | b'F' => {
                    r.line().ok_or_else(truncated)?;
                    self.push(None);
                }
                // LONG1, LONG4
                0x8a => {
                    let n = r.u8().ok_or_else(truncated)?;
                    r.take(usize::from(n)).ok_or_else(truncated)?;
                    self.push(None);
                }
                0x8b => {
                    let n = r.i32_len().ok_or_else(truncated)?;
                    r.take(n).ok_or_else(truncated)?;
                    self.push(None);
                }
                // Strings: STRING (quoted line), UNICODE (raw-unicode-escape line).
                b'S' => {
                    let line = r.line().ok_or_else(truncated)?;
                    let unquoted = line
                        .strip_prefix(b"'")
                        .and_then(|l| l.strip_suffix(b"'"))
                        .or_else(|| line.strip_prefix(b"\"").and_then(|l| l.strip_suffix(b"\"")))
                        .unwrap_or(line);
                    self.push_str(unquoted);
                }
                b'V' => {
                    let line = r.line().ok_or_else(truncated)?;
                    self.push_str(line);
                }
                // Length-prefixed strings.
                b'U' | 0x8c => {
                    let n = r.u8().ok_or_else(truncated)?;
                    let s = r.take(usize::from(n)).ok_or_else(truncated)?;
                    self.push_str(s);
                }
                b'T' | b'X' => {
                    let n = r.u32().ok_or_else(truncated)?;
                    let n = usize::try_from(n).map_err(|_| truncated())?;
                    let s = r.take(n).ok_or_else(truncated)?;
                    self.push_str(s);
                }
                0x8d => {
                    let n = r.u64_len().ok_or_else(truncated)?;
                    let s = r.take(n).ok_or_else(truncated)?;
                    self.push_str(s);
                }
                // Bytes: SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8.
                b'C' => {
                    let n = r.u8().ok_or_else(truncated)?;
                    r.take(usize::from(n)).ok_or_else(truncated)?;
                    self.push(None);
                }
                b'B' => {
                    let n = r.u32().ok_or_else(truncated)?;
                    let n = usize::try_from(n).map_err(|_| truncated())?;
                    r.take(n).ok_or_else(truncated)?;
                    self.push(None);
                }
                0x8e | 0x96 => {
                    let n = r.u64_len().ok_or_else(truncated)?;
                    r.take(n).ok_or_else(truncated)?;
                    self.push(None);
                }
                // PERSID: a persistent id line (torch storages use BINPERSID instead).
                b'P' => {
                    r.line().ok_or_else(truncated)?;
                    self.push(None);
                }
                // GLOBAL and INST: "module\nname\n" inline.
                b'c' | b'i' => {
                    let module = r.line().ok_or_else(truncated)?;
                    let name = r.line().ok_or_else(truncated)?;
                    let module = String::from_utf8_lossy(module).into_owned();
                    let name = String::from_utf8_lossy(name).into_owned();
                    self.import(&module, &name);
                    self.push(None);
                }
                // STACK_GLOBAL: module and name are the two strings on top of the stack.
                0x93 => {
                    match (self.recent[0].take(), self.recent[1].take()) {
                        (Some(module), Some(name)) => self.import(&module, &name),
                        _ => self.import("", &format!("<unresolved STACK_GLOBAL at offset {at}>")),
                    }
                    self.push(None);
                }
                other => {
                    return Err(format!("unknown opcode 0x{other:02x} at offset {at}"));
                }
            }
        }
    }
}

fn parse_decimal(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32le(b, 0))
    }

    /// A signed 4-byte length (LONG4); negative lengths are malformed.
    fn i32_len(&mut self) -> Option<usize> {
        let n = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
        usize::try_from(n).ok()
    }

    fn u64_len(&mut self) -> Option<usize> {
        usize::try_from(u64le(self.take(8)?, 0)).ok()
    }

    /// Bytes up to the next newline (consumed, not returned).
    fn line(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.pos..)?;
        let n = rest.iter().position(|&b| b == b'\n')?;
        self.pos += n + 1;
        Some(&rest[..n])
    }
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

    #[test]
    fn hostile_lengths_do_not_panic() {
        for op in [0x8d_u8, 0x8e, 0x96, b'B', b'T', b'X', 0x8b] {
            let mut b = vec![0x80, 4, b'N', b'N', b'N', op];
            b.extend_from_slice(&[0xff; 8]);
            let _ = sniff(&b);
        }
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
            let _ = sniff(&bytes);
            // A real archive with a garbage data.pkl, cut anywhere.
            let zip = stored_zip(&[("archive/data.pkl", &body)]);
            for cut in [zip.len(), zip.len() / 2, 31] {
                let _ = sniff(&zip[..cut.min(zip.len())]);
            }
        }
    }
}
