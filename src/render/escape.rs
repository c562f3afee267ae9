//! The one escaping rule for names and paths we print lives below every module that prints
//! (crate::escape), so the lowest readers can use it too; the renderers name it here.

pub use crate::escape::*;
