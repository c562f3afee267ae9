//! Rendering of artifacts and diffs: human text ([`text`]) and schema-1 JSON ([`json`]);
//! descriptions of `.wdelta` files ([`wdelta`]); weight-value diffs ([`values`]); self-contained
//! HTML reports of value diffs and conversions ([`html`]); the reports a command prints, in
//! either form ([`report`]).

pub(crate) mod bytes;
pub(crate) mod conversion;
pub(crate) mod delta;
pub(crate) mod enums;
pub(crate) mod github;
mod grouped;
pub(crate) mod html;
pub(crate) mod json;
pub(crate) mod lineage;
pub(crate) mod order;
mod palette;
pub(crate) mod report;
pub(crate) mod stat;
pub(crate) mod text;
pub(crate) mod values;
pub(crate) mod wdelta;

pub use json::inspect as inspect_json;
pub use palette::Palette;
pub use text::inspect as inspect_text;
pub use wdelta::{describe as describe_wdelta, describe_json as describe_wdelta_json};
