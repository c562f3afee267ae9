//! Rendering of artifacts and diffs: human text ([`text`]) and schema-1 JSON ([`json`]);
//! descriptions of `.wdelta` files ([`wdelta`]); weight-value diffs ([`values`]); self-contained
//! HTML reports of value diffs and conversions ([`html`]); the reports a command prints, in
//! either form ([`report`]).

pub mod conversion;
pub mod enums;
pub mod github;
pub mod html;
pub mod json;
pub mod order;
mod palette;
pub mod report;
pub mod text;
pub mod values;
pub mod wdelta;

pub use json::inspect as inspect_json;
pub use palette::Palette;
pub use text::inspect as inspect_text;
pub use wdelta::{describe as describe_wdelta, describe_json as describe_wdelta_json};
