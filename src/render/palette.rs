//! Colors for text output.

use owo_colors::OwoColorize;

/// Colors for text output; a disabled palette returns text unchanged.
#[derive(Debug, Clone, Copy)]
pub struct Palette {
    enabled: bool,
}

impl Palette {
    /// Colours on when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Palette { enabled }
    }

    /// No colours.
    pub fn plain() -> Self {
        Palette { enabled: false }
    }

    /// Whether colours are on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// `s` as an addition (green).
    pub fn added(&self, s: &str) -> String {
        self.paint(s, |s| s.green().to_string())
    }

    /// `s` as a removal (red).
    pub fn removed(&self, s: &str) -> String {
        self.paint(s, |s| s.red().to_string())
    }

    /// `s` as a change (yellow).
    pub fn changed(&self, s: &str) -> String {
        self.paint(s, |s| s.yellow().to_string())
    }

    /// `s` as a heading (bold).
    pub fn heading(&self, s: &str) -> String {
        self.paint(s, |s| s.bold().to_string())
    }

    /// `s` as a side note (dim).
    pub fn dim(&self, s: &str) -> String {
        self.paint(s, |s| s.dimmed().to_string())
    }

    fn paint(&self, s: &str, f: impl Fn(&str) -> String) -> String {
        if self.enabled { f(s) } else { s.to_owned() }
    }
}
