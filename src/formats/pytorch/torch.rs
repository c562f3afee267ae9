//! What `torch.save` pickles for dense tensors, and nothing else: the globals a state dict
//! names (recognized by name, never called), the storages its persistent ids stand for and
//! the tensors its rebuild functions describe.

use std::cell::Cell;
use std::rc::Rc;

use super::error::PytorchError;
use crate::artifact::Shape;
use crate::dtype::Dtype;

/// The globals a checkpoint of dense tensors names. Any other becomes an inert stand-in.
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

/// torch's rebuild functions for tensors that are not plain dense storage views: legitimate,
/// but their values are not a storage's bytes, so they are named as such rather than refused
/// as foreign code.
const UNREAD_TENSORS: &[(&str, &str)] = &[
    ("_rebuild_qtensor", "a quantized tensor"),
    ("_rebuild_sparse_tensor", "a sparse tensor"),
    ("_rebuild_nested_tensor", "a nested tensor"),
    ("_rebuild_meta_tensor_no_storage", "a meta tensor (no data)"),
    (
        "_rebuild_wrapper_subclass",
        "a tensor subclass without storage",
    ),
    (
        "_rebuild_device_tensor_from_numpy",
        "a tensor pickled through numpy",
    ),
    ("_rebuild_xla_tensor", "an XLA tensor"),
    ("_rebuild_mtia_tensor", "an MTIA tensor"),
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
    /// The global `module.name` names, if it is one of the globals of dense tensors; None for
    /// any other (the machine makes it an inert stand-in); an error for torch's tensors that
    /// are not dense, naming the offset of the opcode that names them.
    pub(super) fn recognize(
        module: &str,
        name: &str,
        offset: usize,
    ) -> Result<Option<Global>, PytorchError> {
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
            ("torch" | "torch.storage", "UntypedStorage") => Some(Global::Storage(None)),
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
        if let Some((_, kind)) = UNREAD_TENSORS
            .iter()
            .find(|(rebuild, _)| module == "torch._utils" && *rebuild == name)
        {
            return Err(PytorchError::UnreadTensor {
                global: format!("{module}.{name}"),
                kind,
                offset,
            });
        }
        Ok(found)
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
