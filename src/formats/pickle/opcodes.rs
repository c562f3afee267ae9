//! The pickle opcode walker: every opcode's argument skipped by its declared length, the
//! globals that GLOBAL, INST and STACK_GLOBAL would import recorded, nothing executed.

use std::collections::HashMap;

use super::{Container, MAX_IMPORTS, PickleReport};

/// Memoized strings kept to resolve STACK_GLOBAL arguments fetched back from the memo.
const MAX_MEMO_STRINGS: usize = 4096;
/// Strings longer than this are not module or attribute names; they are not kept.
const MAX_NAME_LEN: usize = 512;

/// The opcode walker. Tracks just enough of the stack (the last two pushed strings, and
/// strings stored in the memo) to name what STACK_GLOBAL imports.
#[derive(Default)]
pub(super) struct Scanner {
    imports: Vec<String>,
    seen: std::collections::HashSet<String>,
    omitted: usize,
    /// Opcodes read so far, over every stream.
    pub(super) opcodes: u64,
    /// The two most recent stack pushes, when they were strings (None: something else).
    recent: [Option<String>; 2],
    memo: HashMap<u64, String>,
    /// Number of memo slots assigned so far (MEMOIZE uses it as the next index).
    memo_len: u64,
}

impl Scanner {
    pub(super) fn finish(self, container: Container, incomplete: Option<String>) -> PickleReport {
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
    pub(super) fn run(&mut self, bytes: &[u8], start: usize) -> Result<usize, String> {
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
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A signed 4-byte length (LONG4); negative lengths are malformed.
    fn i32_len(&mut self) -> Option<usize> {
        let n = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
        usize::try_from(n).ok()
    }

    fn u64_len(&mut self) -> Option<usize> {
        let b: [u8; 8] = self.take(8)?.try_into().ok()?;
        usize::try_from(u64::from_le_bytes(b)).ok()
    }

    /// Bytes up to the next newline (consumed, not returned).
    fn line(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.pos..)?;
        let n = rest.iter().position(|&b| b == b'\n')?;
        self.pos += n + 1;
        Some(&rest[..n])
    }
}
