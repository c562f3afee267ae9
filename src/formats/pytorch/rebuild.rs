//! The recognized globals, called by what they mean to torch: an OrderedDict, a tensor rebuilt
//! as a view of a storage, a parameter of a tensor.

use std::rc::Rc;

use super::error::PytorchError;
use super::object::{Dict, Object};
use super::torch::{Built, Global, Tensor};
use crate::artifact::Shape;
use crate::dtype::Dtype;

/// Calls a recognized global with `args`, by what it means to torch.
pub(super) fn call(global: Global, args: &Object, offset: usize) -> Result<Object, PytorchError> {
    let args = match args {
        Object::Tuple(items) => items.clone(),
        _ => return Err(bad(offset, "a call whose arguments are not a tuple")),
    };
    match global {
        Global::OrderedDict => {
            let mut dict = Dict::default();
            if let Some(Object::List(pairs)) = args.first() {
                for pair in pairs.borrow().iter() {
                    match pair {
                        Object::Tuple(kv) if kv.len() == 2 => {
                            dict.set(kv[0].clone(), kv[1].clone());
                        }
                        _ => return Err(bad(offset, "OrderedDict of something that is not pairs")),
                    }
                }
            }
            Ok(Object::Dict(Rc::new(std::cell::RefCell::new(dict))))
        }
        Global::RebuildTensor | Global::RebuildTensorV2 => {
            let min = if global == Global::RebuildTensor {
                4
            } else {
                6
            };
            if args.len() < min {
                return Err(bad(offset, "a tensor rebuilt from too few arguments"));
            }
            tensor(&args, None, offset)
        }
        Global::RebuildTensorV3 => {
            let dtype = match args.get(6) {
                Some(Object::Global(Global::Dtype(d))) => *d,
                _ => return Err(bad(offset, "_rebuild_tensor_v3 without a dtype")),
            };
            tensor(&args, Some(dtype), offset)
        }
        Global::RebuildParameter | Global::RebuildParameterWithState => match args.first() {
            Some(t @ Object::Built(b)) if matches!(**b, Built::Tensor(_)) => Ok(t.clone()),
            _ => Err(bad(offset, "a parameter whose data is not a tensor")),
        },
        Global::RebuildFromTypeV2 => {
            // (func, new_type, args, state): the plain tensor func makes of args; the type and
            // the state (Python attributes) do not change its values.
            match (args.first(), args.get(1), args.get(2)) {
                (
                    Some(Object::Global(func)),
                    Some(Object::Global(Global::TensorClass)),
                    Some(inner @ Object::Tuple(_)),
                ) => call(*func, inner, offset),
                _ => Err(bad(
                    offset,
                    "_rebuild_from_type_v2 of something that is not a tensor",
                )),
            }
        }
        Global::TensorClass | Global::Storage(_) | Global::Dtype(_) => Err(bad(
            offset,
            "calls a class or dtype, which torch.save never does",
        )),
    }
}

fn bad(offset: usize, problem: &str) -> PytorchError {
    PytorchError::Pickle {
        stream: "data.pkl".to_owned(),
        offset,
        problem: problem.to_owned(),
    }
}

/// `(storage, storage_offset, size, stride, ...)` to a tensor; `dtype` overrides the
/// storage's (`_rebuild_tensor_v3` over an untyped storage).
fn tensor(
    args: &[Object],
    dtype: Option<&'static Dtype>,
    offset: usize,
) -> Result<Object, PytorchError> {
    let storage = match &args[0] {
        Object::Built(b) => match &**b {
            Built::Storage(s) => s.clone(),
            Built::Tensor(_) => return Err(bad(offset, "a tensor rebuilt from a tensor")),
        },
        _ => {
            return Err(bad(
                offset,
                "a tensor rebuilt from something that is not a storage",
            ));
        }
    };
    let dtype = dtype
        .or(storage.dtype)
        .ok_or_else(|| bad(offset, "a tensor of an untyped storage without a dtype"))?;
    let storage_offset = match &args[1] {
        Object::Int(i) => {
            u64::try_from(*i).map_err(|_| bad(offset, "a negative storage offset"))?
        }
        _ => return Err(bad(offset, "a storage offset that is not an integer")),
    };
    let size = dims(&args[2], offset, "size")?;
    let stride = dims(&args[3], offset, "stride")?;
    if size.len() != stride.len() {
        return Err(bad(offset, "a size and a stride of different lengths"));
    }
    Ok(Object::Built(Rc::new(Built::Tensor(Rc::new(Tensor {
        storage,
        dtype,
        offset: storage_offset,
        size,
        stride,
    })))))
}

fn dims(value: &Object, offset: usize, what: &str) -> Result<Shape, PytorchError> {
    let Object::Tuple(items) = value else {
        return Err(bad(offset, &format!("a {what} that is not a tuple")));
    };
    items
        .iter()
        .map(|d| match d {
            Object::Int(i) => {
                u64::try_from(*i).map_err(|_| bad(offset, &format!("a negative {what}")))
            }
            _ => Err(bad(offset, &format!("a {what} that is not integers"))),
        })
        .collect()
}
