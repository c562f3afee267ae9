//! `--map FILE`: rename rules for layouts the converter's table does not know (original vs
//! diffusers names, a custom exporter), read from TOML.
//!
//! ```toml
//! [[rule]]
//! from = '^double_blocks\.(\d+)\.img_attn\.qkv\.weight$'   # a source name, matched whole
//! to = 'transformer_blocks.$1.attn.to_qkv.weight'          # its name in the other model
//! transpose = false                                        # optional
//! permute_heads = 32                                       # optional
//! ```

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

use super::error::{MAX_MAP_FILE_BYTES, MAX_MAP_RULES, MAX_TO_BYTES, MAX_TO_REFERENCES, MapError};

/// Compiled size of one rule's pattern (the regex crate's own limit is 10 MiB).
const MAX_PATTERN_BYTES: usize = 256 << 10;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    from: String,
    to: String,
    #[serde(default)]
    transpose: bool,
    permute_heads: Option<u64>,
}

/// One rename rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    from: Regex,
    to: String,
    pub transpose: bool,
    pub permute_heads: Option<u64>,
}

/// The rules of a map file, tried in order.
#[derive(Debug, Clone)]
pub(crate) struct MapFile {
    pub path: PathBuf,
    rules: Vec<Rule>,
}

/// A source name renamed by a rule.
pub(crate) struct Renamed<'a> {
    pub target: String,
    pub rule: &'a Rule,
}

impl MapFile {
    pub(crate) fn read(path: &Path) -> Result<MapFile, MapError> {
        let text =
            crate::fsutil::read_regular_text(path, MAX_MAP_FILE_BYTES).map_err(|source| {
                MapError::Read {
                    path: path.to_owned(),
                    source,
                }
            })?;
        MapFile::parse(path, &text)
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<MapFile, MapError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| MapError::Toml {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if raw.rule.len() > MAX_MAP_RULES {
            return Err(MapError::TooManyRules {
                path: path.to_owned(),
                count: raw.rule.len(),
            });
        }
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, r) in raw.rule.into_iter().enumerate() {
            let references = r.to.matches('$').count();
            if r.to.len() > MAX_TO_BYTES || references > MAX_TO_REFERENCES {
                return Err(MapError::ReplacementTooLarge {
                    path: path.to_owned(),
                    rule: i + 1,
                    bytes: r.to.len(),
                    references,
                });
            }
            // Matched whole: a rule for "blk.1.x" must not rename "blk.11.x".
            let from = regex::RegexBuilder::new(&format!("^(?:{})$", r.from))
                .size_limit(MAX_PATTERN_BYTES)
                .build()
                .map_err(|e| MapError::Regex {
                    path: path.to_owned(),
                    rule: i + 1,
                    message: e.to_string(),
                })?;
            if r.permute_heads == Some(0) {
                return Err(MapError::Heads {
                    path: path.to_owned(),
                    rule: i + 1,
                });
            }
            rules.push(Rule {
                from,
                to: r.to,
                transpose: r.transpose,
                permute_heads: r.permute_heads,
            });
        }
        Ok(MapFile {
            path: path.to_owned(),
            rules,
        })
    }

    /// The first rule matching `source`, and the name it gives.
    pub(crate) fn rename(&self, source: &str) -> Option<Renamed<'_>> {
        self.rules.iter().find_map(|rule| {
            let caps = rule.from.captures(source)?;
            let mut target = String::new();
            caps.expand(&rule.to, &mut target);
            Some(Renamed { target, rule })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_rename_whole_names_with_their_groups() {
        let map = MapFile::parse(
            Path::new("m.toml"),
            "[[rule]]\nfrom = 'a\\.(\\d+)\\.w'\nto = 'b.$1.weight'\ntranspose = true\n",
        )
        .unwrap();
        let r = map.rename("a.12.w").unwrap();
        assert_eq!(r.target, "b.12.weight");
        assert!(r.rule.transpose);
        assert!(map.rename("x.a.12.w").is_none());
        assert!(map.rename("a.12.w.bias").is_none());
    }

    #[test]
    fn a_bad_rule_is_named() {
        let err = MapFile::parse(Path::new("m.toml"), "[[rule]]\nfrom = '('\nto = 'x'\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("m.toml: rule 1: `from` is not a regular expression"),
            "{err}"
        );
        let err = MapFile::parse(
            Path::new("m.toml"),
            "[[rule]]\nfrom = 'a'\nto = 'x'\nheads = 2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field"), "{err}");
    }

    #[test]
    fn rules_and_replacements_are_capped() {
        let repeated = format!(
            "[[rule]]\nfrom = '(a)'\nto = '{}'\n",
            "${1}".repeat(MAX_TO_REFERENCES + 1)
        );
        let err = MapFile::parse(Path::new("m.toml"), &repeated)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rule 1: `to` is") && err.contains("17 group references"),
            "{err}"
        );
        let at_cap = format!("[[rule]]\nfrom = '(a)'\nto = '{}'\n", "${1}".repeat(16));
        assert_eq!(
            MapFile::parse(Path::new("m.toml"), &at_cap)
                .unwrap()
                .rename("a")
                .unwrap()
                .target,
            "a".repeat(16)
        );
        let many = "[[rule]]\nfrom = 'a'\nto = 'b'\n".repeat(MAX_MAP_RULES + 1);
        let err = MapFile::parse(Path::new("m.toml"), &many)
            .unwrap_err()
            .to_string();
        assert!(err.contains("1025 rules, more than the 1024"), "{err}");
    }
}
