//! A model taking part in `relate`.

use std::path::Path;

use crate::artifact::Artifact;
use crate::values::{ModelBytes, Side};

/// A model taking part: the model asked about, or a candidate parent.
#[derive(Clone, Copy)]
pub(crate) struct Candidate<'a> {
    /// Its name as given (shown in the report).
    pub name: &'a str,
    pub artifact: &'a Artifact,
    /// The bytes of its files, when they are on this machine (values need them).
    pub files: Option<&'a [ModelBytes]>,
    /// The folder it was read from on this machine, for adapter_config.json beside it.
    pub dir: Option<&'a Path>,
}

impl<'a> Candidate<'a> {
    pub(super) fn side(&self) -> Option<Side<'a>> {
        Some(Side {
            artifact: self.artifact,
            files: self.files?,
        })
    }
}
