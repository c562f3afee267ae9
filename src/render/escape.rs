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

use std::borrow::Cow;
use std::fmt::Write;

/// `name` with every control character, bidirectional formatting character and backslash
/// escaped; borrowed unchanged when it has none (the common case).
pub fn escape_name(name: &str) -> Cow<'_, str> {
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

/// Whether [`escape_name`] escapes `c`.
pub fn needs_escape(c: char) -> bool {
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
        fn arbitrary_strings_hold_no_control_or_bidi_character_once_escaped(name in proptest::arbitrary::any::<String>()) {
            let shown = escape_name(&name);
            proptest::prop_assert!(!shown.chars().any(|c| c.is_control() || is_bidi_control(c)));
        }
    }
}
