//! Colors for text output.

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
