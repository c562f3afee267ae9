//! GitHub Actions workflow commands: annotations (`::error file=…,title=…::message`) and the
//! escaping of their parts, as the Actions toolkit does it. `check --format github` and
//! `ci --annotations` both print through here.
//!
//! A file or title is kept exact (GitHub finds the file by it) unless it holds a control or
//! bidirectional formatting character: then it is shown escaped, as every name is
//! ([`shown`]), so no such character reaches the log. A message is the caller's text,
//! whose names the caller shows escaped (its own line breaks are kept, escaped as `%0A`).

use std::borrow::Cow;

use crate::escape::{needs_escape, shown};

/// The level of an annotation: the workflow command that shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Error,
    Warning,
}

impl Level {
    /// The workflow command's name.
    pub(crate) fn command(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
        }
    }
}

/// One annotation: a message shown on a file (or on the run) under a title. `file` and `title`
/// are as found; `message` holds names already shown escaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Annotation {
    pub level: Level,
    pub file: Option<String>,
    pub title: String,
    pub message: String,
}

impl Annotation {
    /// The workflow command, one line: `::error file=F,title=T::message\n`, every part escaped.
    pub(crate) fn command(&self) -> String {
        let mut props = Vec::new();
        if let Some(file) = &self.file {
            props.push(format!("file={}", escape_property(&property_text(file))));
        }
        props.push(format!(
            "title={}",
            escape_property(&property_text(&self.title))
        ));
        format!(
            "::{} {}::{}\n",
            self.level.command(),
            props.join(","),
            escape_data(&self.message)
        )
    }
}

/// A property's value: itself, or shown escaped when it holds a control or bidirectional
/// formatting character (a backslash alone keeps a path exact).
fn property_text(value: &str) -> Cow<'_, str> {
    if value.chars().any(|c| c != '\\' && needs_escape(c)) {
        shown(value)
    } else {
        Cow::Borrowed(value)
    }
}

/// Escapes a workflow command's message (the part after `::`), as the Actions toolkit's
/// `escapeData` does: `%`, CR and LF.
pub(crate) fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command property value (`file=`, `title=`), as the toolkit's
/// `escapeProperty` does: [`escape_data`] plus `:` and `,`.
pub(crate) fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_actions_toolkit() {
        assert_eq!(escape_data("a%b\r\nc:d,e"), "a%25b%0D%0Ac:d,e");
        assert_eq!(escape_property("a%b\r\nc:d,e"), "a%25b%0D%0Ac%3Ad%2Ce");
        // `%` first, so escapes are not escaped twice.
        assert_eq!(escape_data("%0A"), "%250A");
    }

    #[test]
    fn commands_escape_properties_and_data() {
        let a = Annotation {
            level: Level::Warning,
            file: Some("a,b:c%.gguf".into()),
            title: "t: x".into(),
            message: "50% done\r\nnext: a,b".into(),
        };
        assert_eq!(
            a.command(),
            "::warning file=a%2Cb%3Ac%25.gguf,title=t%3A x::50%25 done%0D%0Anext: a,b\n"
        );
        let run = Annotation {
            file: None,
            level: Level::Error,
            ..a
        };
        assert_eq!(
            run.command(),
            "::error title=t%3A x::50%25 done%0D%0Anext: a,b\n"
        );
    }

    #[test]
    fn files_stay_exact_unless_they_hold_control_characters() {
        let on = |file: &str| Annotation {
            level: Level::Error,
            file: Some(file.into()),
            title: "t".into(),
            message: "m".into(),
        };
        // GitHub unescapes `%3A` and finds the file.
        assert_eq!(
            on("::error ::x\\y.gguf").command(),
            "::error file=%3A%3Aerror %3A%3Ax\\y.gguf,title=t::m\n"
        );
        assert_eq!(
            on("a\n::stop-commands::x\x1b[2J\u{202e}.gguf").command(),
            "::error file=a\\n%3A%3Astop-commands%3A%3Ax\\x1b[2J\\u{202e}.gguf,title=t::m\n"
        );
    }
}
