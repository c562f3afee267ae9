//! Machine-learning bills of materials: a CycloneDX 1.6 ML-BOM of models, from their headers
//! and their files' SHA-256 (the LFS oids of pointer files: nothing is downloaded), with the
//! models each was made from (`pedigree.ancestors`) and how (`relate`'s verdict).
//!
//! The document is deterministic: components and properties in a fixed order, no timestamp
//! unless one is given, and a serial number derived from the content.

mod card;
mod cyclonedx;
mod types;

pub(crate) use cyclonedx::document as cyclonedx;
pub(crate) use types::{Ancestor, Derivation, Described, ModelFile, Options};
