//! Filled in by the following commits.
