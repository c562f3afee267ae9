//! Rendering of artifacts and diffs: human text ([`text`]) and schema-1 JSON ([`json`]);
//! descriptions of `.wdelta` files ([`wdelta`]); weight-value diffs ([`values`]); self-contained
//! HTML reports of value diffs and conversions ([`html`]).

pub(crate) mod conversion;
pub(crate) mod enums;
pub(crate) mod github;
pub(crate) mod html;
pub(crate) mod json;
pub(crate) mod order;
pub(crate) mod text;
pub(crate) mod values;
pub(crate) mod wdelta;

pub use json::inspect as inspect_json;
pub use text::inspect as inspect_text;
pub use wdelta::{describe as describe_wdelta, describe_json as describe_wdelta_json};

use owo_colors::OwoColorize;

/// Colors for text output; a disabled palette returns text unchanged.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    enabled: bool,
}

impl Palette {
    pub fn new(enabled: bool) -> Self {
        Palette { enabled }
    }

    pub fn plain() -> Self {
        Palette { enabled: false }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn added(&self, s: &str) -> String {
        self.paint(s, |s| s.green().to_string())
    }

    pub fn removed(&self, s: &str) -> String {
        self.paint(s, |s| s.red().to_string())
    }

    pub fn changed(&self, s: &str) -> String {
        self.paint(s, |s| s.yellow().to_string())
    }

    pub fn heading(&self, s: &str) -> String {
        self.paint(s, |s| s.bold().to_string())
    }

    pub fn dim(&self, s: &str) -> String {
        self.paint(s, |s| s.dimmed().to_string())
    }

    fn paint(&self, s: &str, f: impl Fn(&str) -> String) -> String {
        if self.enabled { f(s) } else { s.to_owned() }
    }
}
