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

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{path}: rule {rule}: `from` is not a regular expression: {message}")]
    Regex {
        path: PathBuf,
        rule: usize,
        message: String,
    },
    #[error("{path}: rule {rule}: `permute_heads` must be at least 1")]
    Heads { path: PathBuf, rule: usize },
}

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
pub struct Rule {
    from: Regex,
    to: String,
    pub transpose: bool,
    pub permute_heads: Option<u64>,
}

/// The rules of a map file, tried in order.
#[derive(Debug, Clone)]
pub struct MapFile {
    pub path: PathBuf,
    rules: Vec<Rule>,
}

/// A source name renamed by a rule.
pub struct Renamed<'a> {
    pub target: String,
    pub rule: &'a Rule,
}

impl MapFile {
    pub fn read(path: &Path) -> Result<MapFile, MapError> {
        let text = std::fs::read_to_string(path).map_err(|source| MapError::Read {
            path: path.to_owned(),
            source,
        })?;
        MapFile::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<MapFile, MapError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| MapError::Toml {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, r) in raw.rule.into_iter().enumerate() {
            // Matched whole: a rule for "blk.1.x" must not rename "blk.11.x".
            let from = Regex::new(&format!("^(?:{})$", r.from)).map_err(|e| MapError::Regex {
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
    pub fn rename(&self, source: &str) -> Option<Renamed<'_>> {
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
}
