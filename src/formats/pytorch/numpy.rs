//! numpy arrays inside a checkpoint, told from their stand-ins without running anything:
//! `numpy.core.multiarray._reconstruct(ndarray, (0,), b"b")` with the array's BUILD state
//! `(version, shape, dtype, is_fortran, raw data)`, and `numpy.core.numeric._frombuffer(buffer,
//! dtype, shape, order)` (numpy ≥ 1.24 with protocol 5). A dtype is the stand-in
//! `numpy.dtype("f4", False, True)` with BUILD state `(3, "<", …)`.
//!
//! The raw data is bytes from protocol 3 on: C-ordered, they are the array's values in place
//! in the pickle, read as a tensor's. A protocol-2 pickle (torch.save's default) holds them as
//! `_codecs.encode(text, "latin1")`, a stand-in too, never called: each character of the text
//! is one byte (U+0000..U+00FF), so the bytes are decoded here ([`latin1`]), by that rule alone,
//! into at most as many bytes as the text has. The values of a Fortran-ordered array are not
//! read; its name, dtype and shape are.

use super::object::{Object, StandIn};
use crate::artifact::Shape;
use crate::dtype::Dtype;

/// `module.name` of numpy's array rebuilders, under numpy 1 (`numpy.core`) and 2
/// (`numpy._core`).
const RECONSTRUCT: [&str; 2] = [
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
];
const FROMBUFFER: [&str; 2] = [
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
];

/// A numpy array's structure.
#[derive(Debug)]
pub(super) struct NumpyArray {
    pub(super) dtype: &'static Dtype,
    pub(super) shape: Shape,
    /// Where its values lie in the pickle's buffer, in row-major order: (offset, length);
    /// None when they are not bytes there in that order.
    pub(super) data: Option<(u64, u64)>,
    /// Protocol 2's latin-1 text of its values, in row-major order (None: not text, or not in
    /// that order).
    pub(super) text: Option<std::rc::Rc<str>>,
}

impl NumpyArray {
    /// Its size in bytes; None when it overflows.
    pub(super) fn byte_length(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(self.dtype.block_bits / 8, |acc, &d| acc.checked_mul(d))
    }
}

/// The array a stand-in is, when it is one of a dtype weight-inspect knows, with raw data (not
/// an array of Python objects, whose data is a list).
pub(super) fn array(stand_in: &StandIn) -> Option<NumpyArray> {
    let global = &*stand_in.global;
    if RECONSTRUCT.contains(&global) {
        let state = stand_in.state.borrow();
        let Some(Object::Tuple(state)) = &*state else {
            return None;
        };
        // (version, shape, dtype, is_fortran, data); version 1 and the older 4-tuple without it.
        let fields = match state.len() {
            5 => &state[1..],
            4 => &state[..],
            _ => return None,
        };
        let data = raw_data(&fields[3])?;
        let fortran = !matches!(fields[2], Object::Bool(false) | Object::Int(0));
        return Some(NumpyArray {
            dtype: dtype(&fields[1])?,
            shape: shape(&fields[0])?,
            data: data.in_place().filter(|_| !fortran),
            text: data.text().filter(|_| !fortran),
        });
    }
    if FROMBUFFER.contains(&global) {
        let Some(Object::Tuple(args)) = &stand_in.args else {
            return None;
        };
        let [buffer, dtype_object, shape_object, order] = &args[..] else {
            return None;
        };
        let data = raw_data(buffer)?;
        let c_order = matches!(order, Object::Str(o) if &**o == "C");
        return Some(NumpyArray {
            dtype: dtype(dtype_object)?,
            shape: shape(shape_object)?,
            data: data.in_place().filter(|_| c_order),
            text: data.text().filter(|_| c_order),
        });
    }
    None
}

/// An array's raw data as the pickle holds it.
enum RawData {
    /// Bytes: (offset, length) in the pickle's buffer.
    InPlace(u64, u64),
    /// What protocol 2 makes of bytes, `_codecs.encode(text, "latin1")`: the text.
    Latin1(std::rc::Rc<str>),
}

impl RawData {
    fn in_place(&self) -> Option<(u64, u64)> {
        match self {
            RawData::InPlace(offset, len) => Some((*offset, *len)),
            RawData::Latin1(_) => None,
        }
    }

    fn text(&self) -> Option<std::rc::Rc<str>> {
        match self {
            RawData::Latin1(text) => Some(text.clone()),
            RawData::InPlace(..) => None,
        }
    }
}

/// Raw data: bytes, or protocol 2's `_codecs.encode(text, "latin1")`; an array of Python
/// objects (a list) is not raw data.
fn raw_data(data: &Object) -> Option<RawData> {
    match data {
        Object::Bytes { offset, len } => Some(RawData::InPlace(*offset, *len)),
        Object::StandIn(s) if &*s.global == "_codecs.encode" => match &s.args {
            Some(Object::Tuple(args)) => match &args[..] {
                [Object::Str(text), Object::Str(codec)] if &**codec == "latin1" => {
                    Some(RawData::Latin1(text.clone()))
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// The bytes latin-1 `text` encodes, one per character, when there are exactly `length` of
/// them; None when the text is longer or shorter or holds a character beyond U+00FF (which
/// `_codecs.encode(text, "latin1")` would refuse). Never allocates more than `length` bytes,
/// and `length` is the text's size or less.
pub(super) fn latin1(text: &str, length: u64) -> Option<Vec<u8>> {
    let length = usize::try_from(length).ok().filter(|&l| l <= text.len())?;
    let mut bytes = Vec::with_capacity(length);
    for c in text.chars() {
        if bytes.len() == length {
            return None;
        }
        bytes.push(u8::try_from(u32::from(c)).ok()?);
    }
    (bytes.len() == length).then_some(bytes)
}

/// `numpy.dtype("f4", False, True)` (BUILD state `(3, "<", …)`): little-endian or byte order
/// not applicable (`|`); a big-endian or native-order (`=`, the writer's) array is not read as
/// a tensor.
fn dtype(object: &Object) -> Option<&'static Dtype> {
    let Object::StandIn(s) = object else {
        return None;
    };
    if !matches!(&*s.global, "numpy.dtype" | "numpy.core.multiarray.dtype") {
        return None;
    }
    let Some(Object::Tuple(args)) = &s.args else {
        return None;
    };
    let Some(Object::Str(code)) = args.first() else {
        return None;
    };
    if let Some(Object::Tuple(state)) = &*s.state.borrow()
        && let Some(Object::Str(order)) = state.get(1)
        && !matches!(&**order, "<" | "|")
    {
        return None;
    }
    let (kind, size) = code.split_at(1.min(code.len()));
    let bytes: u64 = size.parse().ok()?;
    let name = match kind {
        "f" => format!("float{}", bytes * 8),
        "i" => format!("int{}", bytes * 8),
        "u" => format!("uint{}", bytes * 8),
        "c" => format!("complex{}", bytes * 8),
        "b" if bytes == 1 => "bool".to_owned(),
        _ => return None,
    };
    crate::dtype::by_numpy_name(&name)
}

fn shape(object: &Object) -> Option<Shape> {
    let Object::Tuple(dims) = object else {
        return None;
    };
    dims.iter()
        .map(|d| match d {
            Object::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::latin1;

    #[test]
    fn latin1_text_is_one_byte_per_character() {
        let text: String = (0u8..=255).map(char::from).collect();
        assert_eq!(latin1(&text, 256), Some((0u8..=255).collect()));
        // Not the declared length, either way; a character latin-1 has no byte for.
        assert_eq!(latin1(&text, 255), None);
        assert_eq!(latin1(&text, 257), None);
        assert_eq!(latin1("a\u{100}", 2), None);
        // A length beyond the text's size is refused before anything is allocated.
        assert_eq!(latin1("ab", u64::MAX), None);
    }
}
