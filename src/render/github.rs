//! GitHub Actions workflow commands: annotations (`::error file=…,title=…::message`) and the
//! escaping of their parts, as the Actions toolkit does it. `check --format github` and
//! `ci --annotations` both print through here.

/// The level of an annotation: the workflow command that shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Error,
    Warning,
}

impl Level {
    /// The workflow command's name.
    pub fn command(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
        }
    }
}

/// One annotation: a message shown on a file (or on the run) under a title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub level: Level,
    pub file: Option<String>,
    pub title: String,
    pub message: String,
}

impl Annotation {
    /// The workflow command, one line: `::error file=F,title=T::message\n`, every part escaped.
    pub fn command(&self) -> String {
        let mut props = Vec::new();
        if let Some(file) = &self.file {
            props.push(format!("file={}", escape_property(file)));
        }
        props.push(format!("title={}", escape_property(&self.title)));
        format!(
            "::{} {}::{}\n",
            self.level.command(),
            props.join(","),
            escape_data(&self.message)
        )
    }
}

/// Escapes a workflow command's message (the part after `::`), as the Actions toolkit's
/// `escapeData` does: `%`, CR and LF.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command property value (`file=`, `title=`), as the toolkit's
/// `escapeProperty` does: [`escape_data`] plus `:` and `,`.
pub fn escape_property(s: &str) -> String {
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
}
