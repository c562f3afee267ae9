//! The lineage's errors: those of the value diff and the conversion it reads.

#[derive(Debug, thiserror::Error)]
pub(crate) enum LineageError {
    #[error(transparent)]
    Values(#[from] crate::values::ValuesError),
    #[error(transparent)]
    Conversion(#[from] crate::conversion::ConversionError),
    #[error(transparent)]
    Map(#[from] crate::conversion::MapError),
    /// `relate` was given no candidate parent.
    #[error("no candidate parent to relate the model to")]
    NoCandidate,
}
