//! One escaping rule for the names we print: metadata keys, tensor names, file paths.
//!
//! Such names come from the files being judged, so they may hold characters that act on the
//! reader instead of being read: control characters (an ESC starts a terminal sequence, a CR
//! or LF forges a line of output, a NUL cuts it) and bidirectional formatting characters,
//! which reorder what is shown (a "Trojan Source" name looks like another name). These are
//! shown in a visible escaped form, as in a Rust string literal: `\n`, `\r`, `\t`, `\0`,
//! `\x1b` (other ASCII controls), `\u{85}`, `\u{202e}` (beyond ASCII). A backslash is shown
//! as `\\`, so that an escaped form cannot be confused with the same text in a name. Every
//! other character, ordinary Unicode included, is shown as itself.

//!
//! Text we print may also be read by GitHub Actions' runner (a job log), which takes a line
//! whose text, after leading white space, starts with `::` as a workflow command, and `##[`
//! anywhere in a line as one in the legacy form. [`shown`], the form every name is printed in,
//! therefore also escapes a `:` that a name starts with (after white space), as `\x3a`, and
//! the first `#` of every `##[`, as `\x23`: the same escapes, so the name still reads back.

use std::borrow::Cow;
use std::fmt::{self, Write};
use std::path::Path;

/// `name` with every control character, bidirectional formatting character and backslash
/// escaped; borrowed unchanged when it has none (the common case).
pub(crate) fn escape_name(name: &str) -> Cow<'_, str> {
    let Some(first) = name.find(needs_escape) else {
        return Cow::Borrowed(name);
    };
    let mut out = String::with_capacity(name.len() + 8);
    out.push_str(&name[..first]);
    for c in name[first..].chars() {
        push_escaped(&mut out, c);
    }
    Cow::Owned(out)
}

/// How a name taken from a file or a repository is printed in text: [`escape_name`], and the
/// openers of GitHub workflow commands escaped too (a leading `:`, and `##[`), so that a
/// name, wherever it stands in a line, neither starts a line nor is read as a command.
/// Borrowed unchanged when there is nothing to escape.
pub(crate) fn shown(name: &str) -> Cow<'_, str> {
    let lead = name.len() - name.trim_start().len();
    let starts_with_colon = name[lead..].starts_with(':');
    if !starts_with_colon && !name.contains("##[") {
        return escape_name(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    push_shown(&mut out, name, None);
    Cow::Owned(out)
}

/// A path as it is printed, wherever it came from (typed by the user, found in a directory, named
/// by a repository): [`shown`] of its text (a path that is not UTF-8 shown as
/// [`Path::to_string_lossy`] reads it). Format it with `{}` where the path goes in a message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShownPath<'a>(pub &'a Path);

impl fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&shown(&self.0.to_string_lossy()))
    }
}

/// `path` as [`ShownPath`] shows it, for format arguments: `format!("{}", shown_path(&p))`.
pub(crate) fn shown_path(path: &Path) -> ShownPath<'_> {
    ShownPath(path)
}

/// A message composed of parts already shown escaped (an error naming a path through
/// [`ShownPath`], a name through [`shown`]) put on one line of a report or a log: whatever
/// [`shown`] escapes — line breaks and other control characters, bidirectional characters, the
/// openers of workflow commands — but backslashes, which belong to the escapes already made
/// (escaping them again would show `\\x1b` for a path holding ESC).
pub(crate) fn shown_message(message: &str) -> Cow<'_, str> {
    let lead = message.len() - message.trim_start().len();
    let starts_with_colon = message[lead..].starts_with(':');
    let unsafe_char = |c: char| c != '\\' && needs_escape(c);
    if !starts_with_colon && !message.contains("##[") && !message.chars().any(unsafe_char) {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len() + 8);
    for (i, c) in message.char_indices() {
        let command_opener =
            (i == lead && c == ':') || (c == '#' && message[i..].starts_with("##["));
        if command_opener {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else if c == '\\' {
            out.push(c);
        } else {
            push_escaped(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// A string value in double quotes, as [`shown`] shows names, with `"` escaped as `\"`.
pub(crate) fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    push_shown(&mut out, value, Some('"'));
    out.push('"');
    out
}

/// Appends `text` escaped as [`shown`] escapes it; `quote` is escaped as `\"` too.
fn push_shown(out: &mut String, text: &str, quote: Option<char>) {
    let lead = text.len() - text.trim_start().len();
    for (i, c) in text.char_indices() {
        let command_opener = (i == lead && c == ':' && quote.is_none())
            || (c == '#' && text[i..].starts_with("##["));
        if command_opener {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else if Some(c) == quote {
            out.push('\\');
            out.push(c);
        } else {
            push_escaped(out, c);
        }
    }
}

/// A message for the terminal (an error line, whose paths and names its error already shows
/// escaped) with text no rule reached, such as a message from a server: every control or
/// bidirectional character but the line breaks between its lines is shown escaped as
/// [`escape_name`] shows it. Backslashes are left alone, so names already escaped read the
/// same.
pub(crate) fn terminal_safe(message: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c != '\n' && c != '\\' && needs_escape(c);
    if !message.chars().any(unsafe_char) {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len() + 16);
    for c in message.chars() {
        if unsafe_char(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text put into an HTML document, as element content or a quoted attribute value: `&`, `<`,
/// `>`, `"` and `'` as character references. For text already safe to read (our own words, or
/// names passed through [`shown`] or [`shown_message`]); a name from a file goes through
/// [`html_name`].
pub(crate) fn html_text(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>', '"', '\'']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A name from a file or a repository in an HTML document: shown as every name is
/// ([`shown`]: control and bidirectional characters as visible escapes), then [`html_text`],
/// so that no name becomes markup, whether in an element or in an attribute.
pub(crate) fn html_name(name: &str) -> String {
    html_text(&shown(name)).into_owned()
}

/// Text in a Markdown table cell: HTML and Markdown syntax escaped, line breaks as `<br>`, other
/// control and bidirectional formatting characters shown escaped (`\x1b`, `\u{202e}`).
pub(crate) fn markdown_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' => out.push_str("<br>"),
            '\r' => {}
            c if c != '\\' && needs_escape(c) => {
                // `\x1b` in Markdown: the backslash itself escaped.
                out.push('\\');
                out.push_str(&escape_name(c.encode_utf8(&mut [0; 4])));
            }
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether [`escape_name`] escapes `c`.
pub(crate) fn needs_escape(c: char) -> bool {
    c == '\\' || c.is_control() || is_bidi_control(c)
}

/// Control characters (Unicode category Cc) are C0 (U+0000–U+001F), DEL and C1
/// (U+0080–U+009F), which [`char::is_control`] tells; these are the bidirectional formatting
/// characters: embeddings and overrides (U+202A–U+202E), isolates (U+2066–U+2069), and the
/// marks LRM, RLM and ALM.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if needs_escape(c) && c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if needs_escape(c) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_escape_markup() {
        assert_eq!(
            markdown_cell("q4_k <b>|x|\nnext"),
            "q4\\_k &lt;b&gt;\\|x\\|<br>next"
        );
    }

    #[test]
    fn terminal_safe_messages_keep_lines_and_escaped_names() {
        assert_eq!(
            terminal_safe("a.gguf: no such file"),
            "a.gguf: no such file"
        );
        assert_eq!(
            terminal_safe("x\x1b]8;;e\x1b\\y\rz\u{202e}.gguf: bad\nsecond line"),
            "x\\x1b]8;;e\\x1b\\y\\rz\\u{202e}.gguf: bad\nsecond line"
        );
        assert_eq!(
            terminal_safe("already \\x1b escaped"),
            "already \\x1b escaped"
        );
    }

    #[test]
    fn html_names_hold_no_markup() {
        assert_eq!(html_text("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
        assert_eq!(
            html_name("<img src=x onerror='a(\"b\")'>&\n\u{202e}"),
            "&lt;img src=x onerror=&#39;a(&quot;b&quot;)&#39;&gt;&amp;\\n\\u{202e}"
        );
    }

    #[test]
    fn paths_are_shown_as_names() {
        let plain = Path::new("models/v2,rc:50%/é 名.gguf");
        assert_eq!(shown_path(plain).to_string(), "models/v2,rc:50%/é 名.gguf");
        let hostile = Path::new("d/x\x1b]8;;e\x1b\\y\rz\nq\u{202e}.gguf");
        assert_eq!(
            format!("{}: missing", shown_path(hostile)),
            "d/x\\x1b]8;;e\\x1b\\\\y\\rz\\nq\\u{202e}.gguf: missing"
        );
        assert_eq!(
            shown_path(hostile).to_string(),
            shown(&hostile.to_string_lossy())
        );
        // Padding applies to the shown form.
        assert_eq!(
            format!("[{:<6}]", shown_path(Path::new("a\tb"))),
            "[a\\tb  ]"
        );
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"a\xff\x1b.gguf"));
            assert_eq!(shown_path(not_utf8).to_string(), "a\u{fffd}\\x1b.gguf");
        }
    }

    #[test]
    fn messages_of_shown_parts_are_not_escaped_again() {
        let message = format!("{}: no such file", shown_path(Path::new("a\\b\x1bc")));
        assert_eq!(message, "a\\\\b\\x1bc: no such file");
        assert_eq!(shown_message(&message), message);
        assert!(matches!(shown_message(&message), Cow::Borrowed(_)));
        // What no rule escaped yet is escaped here, line breaks and command openers included.
        assert_eq!(
            shown_message("::error ::x\nline\x1b[2J ##[warning]"),
            "\\x3a:error ::x\\nline\\x1b[2J \\x23#[warning]"
        );
        assert_eq!(shown_message("  :x"), "  \\x3ax");
    }

    /// Reads an escaped name back (the escaping is unambiguous if this inverts it).
    fn unescape(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next().expect("escape after backslash") {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                '0' => out.push('\0'),
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(char::from(u8::from_str_radix(&hex, 16).unwrap()));
                }
                'u' => {
                    assert_eq!(chars.next(), Some('{'));
                    let hex: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                }
                other => panic!("unknown escape \\{other} in {s:?}"),
            }
        }
        out
    }

    #[test]
    fn ordinary_names_are_borrowed_unchanged() {
        for name in [
            "",
            "blk.0.attn_q.weight",
            "general.architecture",
            "models/v2,rc:50%.gguf",
            "dir with spaces/model [1].safetensors",
            "tokenizer.ggml.tokens ▁der",
            "général.名前.модель",
            "emoji 🦙",
            "arabic نموذج",
            "hebrew מודל",
        ] {
            assert!(
                matches!(escape_name(name), Cow::Borrowed(n) if n == name),
                "{name:?}"
            );
        }
    }

    #[test]
    fn controls_and_bidi_are_shown_escaped() {
        let cases = [
            ("a\nb", "a\\nb"),
            ("a\r\nb", "a\\r\\nb"),
            ("tab\there", "tab\\there"),
            ("nul\0end", "nul\\0end"),
            ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
            ("bell\x07", "bell\\x07"),
            ("del\x7f", "del\\x7f"),
            ("next line\u{85}", "next line\\u{85}"),
            ("csi\u{9b}", "csi\\u{9b}"),
            ("admin\u{202e}fdp.exe", "admin\\u{202e}fdp.exe"),
            (
                "\u{202a}\u{202b}\u{202c}\u{202d}",
                "\\u{202a}\\u{202b}\\u{202c}\\u{202d}",
            ),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("\u{2067}\u{2068}", "\\u{2067}\\u{2068}"),
            ("lrm\u{200e}rlm\u{200f}", "lrm\\u{200e}rlm\\u{200f}"),
            ("alm\u{61c}", "alm\\u{61c}"),
            ("back\\slash", "back\\\\slash"),
            ("é\n", "é\\n"),
        ];
        for (name, shown) in cases {
            assert_eq!(escape_name(name), shown, "{name:?}");
        }
    }

    #[test]
    fn escaped_forms_and_literal_backslashes_differ() {
        // A name holding the text `\n` is not shown like a name holding a line feed.
        assert_ne!(escape_name("a\\nb"), escape_name("a\nb"));
        assert_eq!(escape_name("a\\nb"), "a\\\\nb");
        assert_eq!(unescape(&escape_name("a\\nb")), "a\\nb");
    }

    #[test]
    fn workflow_command_openers_are_escaped_where_they_act() {
        let cases = [
            ("::error ::x", "\\x3a:error ::x"),
            ("  ::add-mask::s", "  \\x3a:add-mask::s"),
            ("\u{a0}::stop-commands::t", "\u{a0}\\x3a:stop-commands::t"),
            (":x", "\\x3ax"),
            ("a::b", "a::b"),
            ("std::vector", "std::vector"),
            ("x ##[error]y", "x \\x23#[error]y"),
            ("###[", "#\\x23#["),
            ("## [", "## ["),
            ("a\n::error ::x", "a\\n::error ::x"),
        ];
        for (name, want) in cases {
            assert_eq!(shown(name), want, "{name:?}");
            assert_eq!(unescape(&shown(name)), name);
        }
        assert!(matches!(shown("blk.0.attn_q.weight"), Cow::Borrowed(_)));
        assert_eq!(shown("a\x1b[2J"), "a\\x1b[2J");
    }

    #[test]
    fn quoted_values_escape_quotes_and_command_openers() {
        assert_eq!(quoted("llama"), "\"llama\"");
        assert_eq!(quoted("x \"y\""), "\"x \\\"y\\\"\"");
        assert_eq!(quoted("::error ::x"), "\"::error ::x\"");
        assert_eq!(quoted("a ##[warning]b"), "\"a \\x23#[warning]b\"");
        assert_eq!(
            quoted("l1\nl2\u{1b}[2J\u{202e}"),
            "\"l1\\nl2\\x1b[2J\\u{202e}\""
        );
        // Ordinary strings read as Rust's debug form reads them.
        for s in ["llama", "tab\there", "back\\slash", "é 名 🦙", ""] {
            assert_eq!(quoted(s), format!("{s:?}"));
        }
    }

    /// Characters around every class the rule tells apart.
    fn interesting() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let special = prop::sample::select(vec![
            '\0', '\t', '\n', '\r', '\x1b', '\x1f', ' ', '~', '\x7f', '\u{80}', '\u{85}', '\u{9f}',
            '\u{a0}', '\\', 'x', 'u', '{', '}', '\u{61b}', '\u{61c}', '\u{200d}', '\u{200e}',
            '\u{200f}', '\u{2029}', '\u{202a}', '\u{202e}', '\u{202f}', '\u{2065}', '\u{2066}',
            '\u{2069}', '\u{206a}', 'é', '名', '🦙',
        ]);
        prop::collection::vec(prop_oneof![special, any::<char>()], 0..40)
            .prop_map(|chars| chars.into_iter().collect())
    }

    proptest::proptest! {
        #[test]
        fn output_holds_no_control_or_bidi_character(name in interesting()) {
            let shown = escape_name(&name);
            proptest::prop_assert!(
                !shown.chars().any(|c| c.is_control() || is_bidi_control(c)),
                "{:?} -> {:?}", name, shown
            );
            // Unambiguous: the name can be read back from what is shown.
            proptest::prop_assert_eq!(unescape(&shown), name.clone());
            // Unchanged, and borrowed, exactly when nothing needs escaping.
            let plain = !name.chars().any(needs_escape);
            proptest::prop_assert_eq!(matches!(shown, Cow::Borrowed(_)), plain);
        }

        #[test]
        fn shown_names_read_back_and_open_no_command(name in interesting()) {
            let name = format!("{name}::##[");
            for candidate in [name.clone(), format!("::{name}"), format!(" :{name}")] {
                let text = shown(&candidate);
                proptest::prop_assert!(!text.chars().any(|c| c.is_control() || is_bidi_control(c)));
                proptest::prop_assert!(!text.trim_start().starts_with(':'), "{:?}", text);
                proptest::prop_assert!(!text.contains("##["), "{:?}", text);
                proptest::prop_assert_eq!(unescape(&text), candidate.clone());
                let value = quoted(&candidate);
                proptest::prop_assert!(!value.contains("##["));
                let inner = &value[1..value.len() - 1];
                proptest::prop_assert_eq!(unescape(&inner.replace("\\\"", "\"")), candidate);
            }
        }

        #[test]
        fn arbitrary_strings_hold_no_control_or_bidi_character_once_escaped(name in proptest::arbitrary::any::<String>()) {
            let shown = escape_name(&name);
            proptest::prop_assert!(!shown.chars().any(|c| c.is_control() || is_bidi_control(c)));
        }
    }
}
