//! The pickle opcodes of protocols 0–5, read one at a time with their arguments. Both the
//! import scanner and the restricted machine read a pickle through this lexer; nothing here
//! interprets what an opcode means beyond its argument's length.

/// One opcode and its argument (borrowed from the pickle's bytes).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Op<'a> {
    Proto(u8),
    /// FRAME: a buffering hint; the opcodes continue inline.
    Frame,
    Stop,
    Mark,
    Pop,
    PopMark,
    Dup,
    None,
    Bool(bool),
    Int(i64),
    /// LONG1, LONG4 (little-endian two's complement) and the text LONG (decimal).
    Long(Long<'a>),
    Float(f64),
    /// A text string (already a `str` in Python 3).
    Str(&'a [u8]),
    /// BINSTRING/SHORT_BINSTRING/STRING: Python 2 byte strings, read as text.
    Bytes8(&'a [u8]),
    /// BINBYTES and friends, BYTEARRAY8.
    Bytes(&'a [u8]),
    EmptyTuple,
    Tuple,
    Tuple1,
    Tuple2,
    Tuple3,
    EmptyList,
    List,
    Append,
    Appends,
    EmptyDict,
    Dict,
    SetItem,
    SetItems,
    EmptySet,
    AddItems,
    FrozenSet,
    /// GLOBAL `module\nname\n`.
    Global {
        module: &'a [u8],
        name: &'a [u8],
    },
    StackGlobal,
    /// INST `module\nname\n`: pops the arguments after a MARK and calls the class.
    Inst {
        module: &'a [u8],
        name: &'a [u8],
    },
    Obj,
    NewObj,
    NewObjEx,
    Reduce,
    Build,
    Put(u64),
    Get(u64),
    Memoize,
    /// PERSID: a persistent id as a text line.
    PersId(&'a [u8]),
    BinPersId,
    /// EXT1/2/4: a global from copyreg's extension registry.
    Ext(u32),
    NextBuffer,
    ReadonlyBuffer,
}

/// A LONG argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Long<'a> {
    /// Little-endian two's complement bytes (LONG1, LONG4).
    Binary(&'a [u8]),
    /// Decimal text with an optional trailing `L` (LONG).
    Text(&'a [u8]),
}

impl Long<'_> {
    /// The value when it fits an i64.
    pub(super) fn to_i64(self) -> Option<i64> {
        match self {
            Long::Binary(bytes) => {
                if bytes.is_empty() {
                    return Some(0);
                }
                if bytes.len() > 8 {
                    // Longer encodings may still hold a small value in sign-extended form.
                    let fill = if bytes[bytes.len() - 1] & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    };
                    if bytes[8..].iter().any(|&b| b != fill)
                        || (bytes[7] & 0x80 != 0) != (fill == 0xff)
                    {
                        return None;
                    }
                    return Long::Binary(&bytes[..8]).to_i64();
                }
                let fill = if bytes[bytes.len() - 1] & 0x80 != 0 {
                    0xff
                } else {
                    0
                };
                let mut b = [fill; 8];
                b[..bytes.len()].copy_from_slice(bytes);
                Some(i64::from_le_bytes(b))
            }
            Long::Text(text) => {
                let text = std::str::from_utf8(text).ok()?;
                text.trim().trim_end_matches('L').parse().ok()
            }
        }
    }
}

/// Why the opcodes could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LexError {
    /// The pickle ends before an opcode's argument (or before STOP).
    Truncated { opcode: u8, offset: usize },
    /// A byte that is no opcode of protocols 0–5.
    UnknownOpcode { opcode: u8, offset: usize },
    /// An argument that does not parse (a decimal number, a float).
    BadArgument { opcode: u8, offset: usize },
}

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LexError::Truncated { opcode, offset } => {
                write!(
                    f,
                    "opcode 0x{opcode:02x} at offset {offset} runs past the end"
                )
            }
            LexError::UnknownOpcode { opcode, offset } => {
                write!(f, "unknown opcode 0x{opcode:02x} at offset {offset}")
            }
            LexError::BadArgument { opcode, offset } => {
                write!(
                    f,
                    "opcode 0x{opcode:02x} at offset {offset} has a malformed argument"
                )
            }
        }
    }
}

/// Reads opcodes from `bytes`, starting at a position.
pub(super) struct Lexer<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(bytes: &'a [u8], start: usize) -> Lexer<'a> {
        Lexer { bytes, pos: start }
    }

    /// Where the next opcode starts.
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    /// The next opcode and the offset it starts at; None at the end of the bytes.
    pub(super) fn next_op(&mut self) -> Option<Result<(usize, Op<'a>), LexError>> {
        let at = self.pos;
        let &opcode = self.bytes.get(at)?;
        self.pos += 1;
        Some(self.op(opcode, at).map(|op| (at, op)))
    }

    fn op(&mut self, opcode: u8, at: usize) -> Result<Op<'a>, LexError> {
        let truncated = LexError::Truncated { opcode, offset: at };
        let bad = LexError::BadArgument { opcode, offset: at };
        Ok(match opcode {
            0x80 => Op::Proto(self.u8().ok_or(truncated)?),
            0x95 => {
                self.take(8).ok_or(truncated)?;
                Op::Frame
            }
            b'.' => Op::Stop,
            b'(' => Op::Mark,
            b'0' => Op::Pop,
            b'1' => Op::PopMark,
            b'2' => Op::Dup,
            b'N' => Op::None,
            0x88 => Op::Bool(true),
            0x89 => Op::Bool(false),
            b'J' => Op::Int(i64::from(i32::from_le_bytes(
                self.array().ok_or(truncated)?,
            ))),
            b'K' => Op::Int(i64::from(self.u8().ok_or(truncated)?)),
            b'M' => Op::Int(i64::from(u16::from_le_bytes(
                self.array().ok_or(truncated)?,
            ))),
            b'I' => {
                let line = self.line().ok_or(truncated)?;
                match line {
                    b"00" => Op::Bool(false),
                    b"01" => Op::Bool(true),
                    _ => Op::Int(decimal(line).ok_or(bad)?),
                }
            }
            b'L' => Op::Long(Long::Text(self.line().ok_or(truncated)?)),
            0x8a => {
                let n = self.u8().ok_or(truncated)?;
                Op::Long(Long::Binary(self.take(usize::from(n)).ok_or(truncated)?))
            }
            0x8b => {
                let n = i32::from_le_bytes(self.array().ok_or(truncated)?);
                let n = usize::try_from(n).map_err(|_| bad)?;
                Op::Long(Long::Binary(self.take(n).ok_or(truncated)?))
            }
            b'G' => Op::Float(f64::from_be_bytes(self.array().ok_or(truncated)?)),
            b'F' => {
                let line = self.line().ok_or(truncated)?;
                let text = std::str::from_utf8(line).map_err(|_| bad)?;
                Op::Float(text.trim().parse().map_err(|_| bad)?)
            }
            b'V' => Op::Str(self.line().ok_or(truncated)?),
            0x8c => {
                let n = self.u8().ok_or(truncated)?;
                Op::Str(self.take(usize::from(n)).ok_or(truncated)?)
            }
            b'X' => {
                let n = u32::from_le_bytes(self.array().ok_or(truncated)?);
                Op::Str(self.take_u64(u64::from(n)).ok_or(truncated)?)
            }
            0x8d => {
                let n = u64::from_le_bytes(self.array().ok_or(truncated)?);
                Op::Str(self.take_u64(n).ok_or(truncated)?)
            }
            b'S' => {
                let line = self.line().ok_or(truncated)?;
                let unquoted = line
                    .strip_prefix(b"'")
                    .and_then(|l| l.strip_suffix(b"'"))
                    .or_else(|| line.strip_prefix(b"\"").and_then(|l| l.strip_suffix(b"\"")))
                    .ok_or(bad)?;
                Op::Bytes8(unquoted)
            }
            b'U' => {
                let n = self.u8().ok_or(truncated)?;
                Op::Bytes8(self.take(usize::from(n)).ok_or(truncated)?)
            }
            b'T' => {
                let n = i32::from_le_bytes(self.array().ok_or(truncated)?);
                let n = usize::try_from(n).map_err(|_| bad)?;
                Op::Bytes8(self.take(n).ok_or(truncated)?)
            }
            b'C' => {
                let n = self.u8().ok_or(truncated)?;
                Op::Bytes(self.take(usize::from(n)).ok_or(truncated)?)
            }
            b'B' => {
                let n = u32::from_le_bytes(self.array().ok_or(truncated)?);
                Op::Bytes(self.take_u64(u64::from(n)).ok_or(truncated)?)
            }
            0x8e | 0x96 => {
                let n = u64::from_le_bytes(self.array().ok_or(truncated)?);
                Op::Bytes(self.take_u64(n).ok_or(truncated)?)
            }
            b')' => Op::EmptyTuple,
            b't' => Op::Tuple,
            0x85 => Op::Tuple1,
            0x86 => Op::Tuple2,
            0x87 => Op::Tuple3,
            b']' => Op::EmptyList,
            b'l' => Op::List,
            b'a' => Op::Append,
            b'e' => Op::Appends,
            b'}' => Op::EmptyDict,
            b'd' => Op::Dict,
            b's' => Op::SetItem,
            b'u' => Op::SetItems,
            0x8f => Op::EmptySet,
            0x90 => Op::AddItems,
            0x91 => Op::FrozenSet,
            b'c' => {
                let module = self.line().ok_or(truncated)?;
                let name = self.line().ok_or(truncated)?;
                Op::Global { module, name }
            }
            0x93 => Op::StackGlobal,
            b'i' => {
                let module = self.line().ok_or(truncated)?;
                let name = self.line().ok_or(truncated)?;
                Op::Inst { module, name }
            }
            b'o' => Op::Obj,
            0x81 => Op::NewObj,
            0x92 => Op::NewObjEx,
            b'R' => Op::Reduce,
            b'b' => Op::Build,
            b'p' => Op::Put(unsigned_decimal(self.line().ok_or(truncated)?).ok_or(bad)?),
            b'q' => Op::Put(u64::from(self.u8().ok_or(truncated)?)),
            b'r' => Op::Put(u64::from(u32::from_le_bytes(
                self.array().ok_or(truncated)?,
            ))),
            b'g' => Op::Get(unsigned_decimal(self.line().ok_or(truncated)?).ok_or(bad)?),
            b'h' => Op::Get(u64::from(self.u8().ok_or(truncated)?)),
            b'j' => Op::Get(u64::from(u32::from_le_bytes(
                self.array().ok_or(truncated)?,
            ))),
            0x94 => Op::Memoize,
            b'P' => Op::PersId(self.line().ok_or(truncated)?),
            b'Q' => Op::BinPersId,
            0x82 => Op::Ext(u32::from(self.u8().ok_or(truncated)?)),
            0x83 => Op::Ext(u32::from(u16::from_le_bytes(
                self.array().ok_or(truncated)?,
            ))),
            0x84 => Op::Ext(u32::from_le_bytes(self.array().ok_or(truncated)?)),
            0x97 => Op::NextBuffer,
            0x98 => Op::ReadonlyBuffer,
            other => {
                return Err(LexError::UnknownOpcode {
                    opcode: other,
                    offset: at,
                });
            }
        })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// A length from the pickle: checked against what is left before anything is sliced.
    fn take_u64(&mut self, n: u64) -> Option<&'a [u8]> {
        self.take(usize::try_from(n).ok()?)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// Bytes up to the next newline (consumed, not returned).
    fn line(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.pos..)?;
        let n = rest.iter().position(|&b| b == b'\n')?;
        self.pos += n + 1;
        Some(&rest[..n])
    }
}

fn decimal(line: &[u8]) -> Option<i64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

fn unsigned_decimal(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(bytes: &[u8]) -> Vec<Op<'_>> {
        let mut lexer = Lexer::new(bytes, 0);
        let mut out = Vec::new();
        while let Some(op) = lexer.next_op() {
            out.push(op.unwrap().1);
        }
        out
    }

    #[test]
    fn protocol_2_dict() {
        // pickle.dumps({"a": 1}, protocol=2)
        assert_eq!(
            ops(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01s."),
            vec![
                Op::Proto(2),
                Op::EmptyDict,
                Op::Put(0),
                Op::Str(b"a"),
                Op::Put(1),
                Op::Int(1),
                Op::SetItem,
                Op::Stop
            ]
        );
    }

    #[test]
    fn longs_decode_as_python_does() {
        let long = |b: &[u8]| Long::Binary(b).to_i64();
        assert_eq!(long(b""), Some(0));
        assert_eq!(long(b"\xff"), Some(-1));
        assert_eq!(long(b"\x00\x01"), Some(256));
        assert_eq!(long(b"\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"), None);
        assert_eq!(long(&[0xff; 12]), Some(-1));
        assert_eq!(Long::Text(b"123L").to_i64(), Some(123));
    }

    #[test]
    fn hostile_lengths_are_truncations_not_panics() {
        for op in [0x8d_u8, 0x8e, 0x96, b'B', b'T', b'X', 0x8b] {
            let mut b = vec![op];
            b.extend_from_slice(&[0xff; 8]);
            let err = Lexer::new(&b, 0).next_op().unwrap().unwrap_err();
            assert!(
                matches!(
                    err,
                    LexError::Truncated { .. } | LexError::BadArgument { .. }
                ),
                "{err:?}"
            );
        }
    }
}
