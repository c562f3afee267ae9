//! The errors of reading a PyTorch checkpoint.

use super::zip::{MemberError, ZipError};
use crate::escape::{quoted, shown, shown_message};

/// One named error per rule a checkpoint must follow. Offsets are within the pickle named
/// (`data.pkl`), or within the file for the legacy layout.
#[derive(Debug, thiserror::Error)]
pub enum PytorchError {
    #[error(transparent)]
    Zip(#[from] ZipError),
    #[error(transparent)]
    Member(#[from] MemberError),
    #[error("a zip archive without data.pkl: not a torch.save checkpoint")]
    NoDataPkl,
    #[error(
        "the archive's first entry is in {}, the folder torch reads, which holds no data.pkl; \
         {} lies in another folder, which torch does not load",
        quoted(&format!("{folder}/")),
        quoted(.elsewhere)
    )]
    DataPklOutsideFolder { folder: String, elsewhere: String },
    #[error("data.pkl is {bytes} bytes, more than the {limit} a header may have ({raise})")]
    PickleTooLarge {
        bytes: u64,
        limit: u64,
        raise: String,
    },
    #[error(
        "the checkpoint's pickle is not complete within its first {read} bytes, the most a \
         header may take ({raise}); last problem: {last}"
    )]
    PickleNotInPrefix {
        read: u64,
        raise: String,
        last: Box<PytorchError>,
    },
    #[error("{}: at offset {offset}: {}", shown(.stream), shown_message(.problem))]
    Pickle {
        stream: String,
        offset: usize,
        problem: String,
    },
    #[error(
        "refused global {} at offset {offset}: a checkpoint of tensors never needs it, and \
         unpickling would call it (it was not imported or called)",
        shown(.global)
    )]
    RefusedGlobal { global: String, offset: usize },
    #[error(
        "{kind} ({}) at offset {offset}: only dense tensors are read; convert it to a \
         dense one (for example with `.dequantize()` or `.to_dense()`) before saving",
        shown(.global)
    )]
    UnreadTensor {
        global: String,
        kind: &'static str,
        offset: usize,
    },
    #[error("persistent id at offset {offset}: {}", shown_message(.problem))]
    PersistentId { offset: usize, problem: String },
    #[error("storage {} declares {declared} bytes, but its member holds {found}", quoted(.key))]
    StorageSize {
        key: String,
        declared: u64,
        found: u64,
    },
    #[error(
        "storage {} declares {elements} elements of {element_bytes} bytes: more bytes than \
         a file can hold",
        quoted(.key)
    )]
    StorageOverflow {
        key: String,
        elements: u64,
        element_bytes: u64,
    },
    #[error("storage {} has no member {} in the archive", quoted(.key), quoted(.member))]
    MissingStorage { key: String, member: String },
    #[error(
        "tensor {}: its view (offset {offset}, size {size:?}, stride {stride:?}) reaches \
         element {needs} of a storage of {elements} elements",
        quoted(.name)
    )]
    ViewOutsideStorage {
        name: String,
        offset: u64,
        size: Vec<u64>,
        stride: Vec<u64>,
        needs: u64,
        elements: u64,
    },
    #[error("tensor {}: its size {size:?} overflows", quoted(.name))]
    SizeOverflow { name: String, size: Vec<u64> },
    #[error("{}: two entries of the checkpoint have this name", quoted(.name))]
    DuplicateName { name: String },
    #[error("{}: containers nest deeper than {limit} levels", quoted(.name))]
    TooDeep { name: String, limit: usize },
    #[error("{}: a container that contains itself", quoted(.name))]
    Cycle { name: String },
    #[error("the checkpoint's object graph expands to more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error(
        "the objects the pickle builds and the entries they expand to take more than {limit} \
         bytes, the budget of a pickle its size ({per_byte} bytes per byte of pickle + \
         {base_mib} MiB, at most {cap} bytes; set {env} to a larger number of bytes to raise it)"
    )]
    OverBudget {
        limit: u64,
        per_byte: u64,
        base_mib: u64,
        cap: u64,
        env: &'static str,
    },
    #[error("legacy layout: {}", shown_message(.problem))]
    Legacy { problem: String },
    #[error("byteorder member says {}, expected \"little\" or \"big\"", quoted(.found))]
    ByteOrder { found: String },
}
