//! A record's data that `create` may not hold: kept in memory up to a few MiB, beyond that in
//! an unlinked temporary file beside the output, then copied into the `.wdelta` when its turn
//! comes. The memory of `create` then does not follow a tensor's records (sparse's 12 bytes a
//! kept value at a low sparsity).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::DeltaError;
use crate::error::Error;
use crate::formats::wdelta::{ArrayDtype, OwnedArray, WdeltaWriter};

type Result<T, E = DeltaError> = std::result::Result<T, E>;

/// Bytes held in memory before the data moves to a file.
const HELD_AT_MOST: usize = 4 << 20;

/// Bytes copied per step from the file into the output.
const COPY_STEP: usize = 1 << 20;

/// Data appended in order, in memory or in a temporary file.
pub(super) struct Spool {
    dir: PathBuf,
    held: Vec<u8>,
    file: Option<File>,
    len: u64,
}

impl Spool {
    /// An empty spool whose file, if it needs one, goes in `dir`.
    pub(super) fn new(dir: &Path) -> Spool {
        Spool {
            dir: dir.to_path_buf(),
            held: Vec::new(),
            file: None,
            len: 0,
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<()> {
        if self.file.is_none() && self.held.len() + bytes.len() > HELD_AT_MOST {
            let failed = |e| Error::io(&self.dir, e);
            let mut file = tempfile::tempfile_in(&self.dir).map_err(failed)?;
            file.write_all(&self.held).map_err(failed)?;
            self.held = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write_all(bytes).map_err(|e| Error::io(&self.dir, e))?,
            None => self.held.extend_from_slice(bytes),
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Gives the data in order, a step at a time.
    fn copy_to(&self, mut put: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let Some(file) = &self.file else {
            return put(&self.held);
        };
        let mut buf = vec![0u8; COPY_STEP.min(self.len as usize)];
        let mut at = 0u64;
        while at < self.len {
            let n = buf.len().min((self.len - at) as usize);
            file.read_exact_at(&mut buf[..n], at)
                .map_err(|e| Error::io(&self.dir, e))?;
            put(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// One record of a tensor as `create` hands it to the writer.
pub(super) enum Array {
    Held(OwnedArray),
    Spooled {
        field: &'static str,
        dtype: ArrayDtype,
        shape: Vec<u64>,
        data: Spool,
    },
}

impl Array {
    /// Writes the record: the same bytes whether its data was held or spooled.
    pub(super) fn write<W: Write>(
        &self,
        writer: &mut WdeltaWriter<W>,
        tensor: &str,
        out: &Path,
    ) -> Result<()> {
        let io = |e| DeltaError::from(Error::io(out, e));
        match self {
            Array::Held(a) => writer.record(tensor, a).map_err(io),
            Array::Spooled {
                field,
                dtype,
                shape,
                data,
            } => {
                writer
                    .record_framing(tensor, field, *dtype, shape, data.len())
                    .map_err(io)?;
                data.copy_to(|b| writer.record_data(b).map_err(io))
            }
        }
    }
}

/// Held arrays as `create` hands them to the writer.
pub(super) fn held(arrays: Vec<OwnedArray>) -> Vec<Array> {
    arrays.into_iter().map(Array::Held).collect()
}
