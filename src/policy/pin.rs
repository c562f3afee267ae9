//! `policy pin`: records structural hashes as `expected_hash` entries, editing the policy file
//! with toml_edit so that comments, order and formatting survive.
//!
//! A path is pinned in the last rule whose `paths` is exactly that one path, unless a later
//! rule matching the path sets its own `expected_hash` (which would win the merge); otherwise
//! a new `[[rules]]` entry for the path is appended, which wins by coming last.

use std::path::Path;

use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::config::{Policy, escape_glob};
use super::error::PolicyError;

type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// What happened to one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PinChange {
    Added,
    Updated { old: String },
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pinned {
    pub path: String,
    pub hash: String,
    /// 1-based number of the rule that holds the pin.
    pub rule: usize,
    pub change: PinChange,
}

/// Paths pinned by literal single-path rules, for `policy pin` without arguments.
pub(super) fn pinned_paths(policy: &Policy) -> Vec<String> {
    let mut out: Vec<String> = policy
        .rules
        .iter()
        .filter(|r| r.settings.expected_hash.is_some() && r.paths.len() == 1)
        .filter_map(|r| unescape_literal(&r.paths[0]))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The path a glob matches when it matches exactly one path (no metacharacters other than
/// the `[x]` escapes [`escape_glob`] writes).
fn unescape_literal(glob: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                let inner = chars.next()?;
                if chars.next()? != ']' {
                    return None;
                }
                out.push(inner);
            }
            '*' | '?' | '{' | '}' | ']' | '\\' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// Applies `pins` (root-relative path, structural hash) to the policy text. Returns the new
/// text and what changed; the text is validated by parsing it again.
pub(super) fn apply(
    policy_path: &Path,
    text: &str,
    pins: &[(String, String)],
) -> Result<(String, Vec<Pinned>)> {
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|source: toml_edit::TomlError| PolicyError::Edit {
                path: policy_path.display().to_string(),
                source,
            })?;
    let mut results = Vec::new();
    for (path, hash) in pins {
        // Re-parse after each edit so rule numbers and merges reflect earlier pins.
        let current = Policy::parse(policy_path, &doc.to_string())?;
        let literal = escape_glob(path);
        let own = current
            .rules
            .iter()
            .rposition(|r| r.paths.len() == 1 && (r.paths[0] == literal || r.paths[0] == *path));
        let overridden = |i: usize| {
            current.rules[i + 1..]
                .iter()
                .any(|r| r.matches(path) && r.settings.expected_hash.is_some())
        };
        let rules = rules_mut(&mut doc, policy_path)?;
        match own.filter(|&i| !overridden(i)) {
            Some(i) => {
                let old = current.rules[i].settings.expected_hash.clone();
                let change = match old {
                    Some(old) if old == *hash => PinChange::Unchanged,
                    Some(old) => PinChange::Updated { old },
                    None => PinChange::Added,
                };
                if change != PinChange::Unchanged {
                    rules.set_hash(i, hash);
                }
                results.push(Pinned {
                    path: path.clone(),
                    hash: hash.clone(),
                    rule: i + 1,
                    change,
                });
            }
            None => {
                rules.push(&literal, hash);
                results.push(Pinned {
                    path: path.clone(),
                    hash: hash.clone(),
                    rule: current.rules.len() + 1,
                    change: PinChange::Added,
                });
            }
        }
    }
    let out = doc.to_string();
    Policy::parse(policy_path, &out)?;
    Ok((out, results))
}

/// `rules` as written: an array of tables (`[[rules]]`) or an inline array of tables.
enum Rules<'a> {
    Tables(&'a mut ArrayOfTables),
    Inline(&'a mut toml_edit::Array),
}

fn rules_mut<'a>(doc: &'a mut DocumentMut, policy_path: &Path) -> Result<Rules<'a>> {
    if !doc.contains_key("rules") {
        doc.insert("rules", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    match doc.get_mut("rules").expect("inserted above") {
        Item::ArrayOfTables(a) => Ok(Rules::Tables(a)),
        Item::Value(Value::Array(a)) => Ok(Rules::Inline(a)),
        _ => Err(PolicyError::RulesNotTables {
            path: policy_path.display().to_string(),
        }),
    }
}

fn hash_value(hash: &str, old: Option<&Value>) -> Value {
    let mut value = Value::from(hash);
    if let Some(old) = old {
        *value.decor_mut() = old.decor().clone();
    }
    value
}

impl Rules<'_> {
    fn set_hash(self, index: usize, hash: &str) {
        match self {
            Rules::Tables(a) => {
                let table = a.get_mut(index).expect("rule index from the parsed policy");
                let old = table.get("expected_hash").and_then(Item::as_value).cloned();
                table.insert("expected_hash", Item::Value(hash_value(hash, old.as_ref())));
            }
            Rules::Inline(a) => {
                if let Some(Value::InlineTable(t)) = a.get_mut(index) {
                    let old = t.get("expected_hash").cloned();
                    t.insert("expected_hash", hash_value(hash, old.as_ref()));
                }
            }
        }
    }

    fn push(self, literal: &str, hash: &str) {
        let mut paths = toml_edit::Array::new();
        paths.push(literal);
        match self {
            Rules::Tables(a) => {
                let mut table = Table::new();
                table
                    .decor_mut()
                    .set_prefix("\n# Pinned with `weight-inspect policy pin`.\n");
                table.insert("paths", Item::Value(Value::Array(paths)));
                table.insert("expected_hash", Item::Value(Value::from(hash)));
                a.push(table);
            }
            Rules::Inline(a) => {
                let mut table = InlineTable::new();
                table.insert("paths", Value::Array(paths));
                table.insert("expected_hash", Value::from(hash));
                a.push(table);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
    const H2: &str = "2222222222222222222222222222222222222222222222222222222222222222";

    fn pin(text: &str, pins: &[(&str, &str)]) -> (String, Vec<Pinned>) {
        let pins: Vec<_> = pins
            .iter()
            .map(|(p, h)| (p.to_string(), h.to_string()))
            .collect();
        apply(Path::new("p.toml"), text, &pins).unwrap()
    }

    #[test]
    fn appends_and_preserves_the_rest() {
        let text = "# team policy\n[[rules]]\npaths = [\"models/**/*.gguf\"] # all of them\nallowed_dtypes = [\"f16\"]\n";
        let (out, r) = pin(text, &[("models/base.gguf", H1)]);
        assert!(out.starts_with(text), "{out}");
        assert!(
            out.contains(&format!(
                "paths = [\"models/base.gguf\"]\nexpected_hash = \"{H1}\""
            )),
            "{out}"
        );
        assert_eq!(r[0].rule, 2);
        assert_eq!(r[0].change, PinChange::Added);
        let p = Policy::parse(Path::new("p"), &out).unwrap();
        assert_eq!(pinned_paths(&p), ["models/base.gguf"]);
    }

    #[test]
    fn updates_in_place_keeping_comments() {
        let text = format!(
            "[[rules]]\npaths = [\"m/a.gguf\"]\nexpected_hash = \"{H1}\" # release 1\nrequire_lfs = true\n"
        );
        let (out, r) = pin(&text, &[("m/a.gguf", H2)]);
        assert_eq!(out, text.replace(H1, H2));
        assert_eq!(r[0].change, PinChange::Updated { old: H1.into() });
        let (again, r) = pin(&out, &[("m/a.gguf", H2)]);
        assert_eq!(again, out);
        assert_eq!(r[0].change, PinChange::Unchanged);
    }

    #[test]
    fn a_later_override_forces_a_new_rule() {
        let text = format!(
            "[[rules]]\npaths = [\"m/a.gguf\"]\nexpected_hash = \"{H1}\"\n[[rules]]\npaths = [\"m/*\"]\nexpected_hash = \"{H1}\"\n"
        );
        let (out, r) = pin(&text, &[("m/a.gguf", H2)]);
        assert_eq!(r[0].rule, 3);
        let p = Policy::parse(Path::new("p"), &out).unwrap();
        assert_eq!(
            p.effective("m/a.gguf")
                .unwrap()
                .expected_hash
                .unwrap()
                .value,
            H2
        );
        assert_eq!(
            p.effective("m/b.gguf")
                .unwrap()
                .expected_hash
                .unwrap()
                .value,
            H1
        );
    }

    #[test]
    fn inline_rules_and_empty_files() {
        let (out, _) = pin("rules = [{ paths = [\"x\"] }]\n", &[("a.gguf", H1)]);
        let p = Policy::parse(Path::new("p"), &out).unwrap();
        assert_eq!(p.rules.len(), 2);
        let (out, _) = pin("", &[("a [1].gguf", H1)]);
        let p = Policy::parse(Path::new("p"), &out).unwrap();
        assert!(p.covers("a [1].gguf"));
        assert!(!p.covers("a 1.gguf"));
        assert_eq!(pinned_paths(&p), ["a [1].gguf"]);
    }
}
