//! `weight-inspect git install|uninstall`: the `diff.weight-inspect.*` config and the
//! attributes that route model files (`*.gguf`, `*.safetensors`, PyTorch checkpoints) and
//! `.wdelta` files to it.
//!
//! Config is written with the real `git config` (it knows every config file's quirks).
//! Attributes coexist with Git LFS: `*.gguf filter=lfs diff=lfs merge=lfs -text` stays, and our
//! `*.gguf diff=weight-inspect` goes after it, because for each attribute the last matching line
//! wins. The changes are idempotent, and uninstall removes exactly the lines and keys added.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::error::GitError;
use crate::escape::shown_path;
type Result<T, E = GitError> = std::result::Result<T, E>;

/// The diff driver's name: `diff.weight-inspect.*`, `diff=weight-inspect`.
pub(super) const DRIVER: &str = "weight-inspect";

const COMMENT: &str =
    "# weight-inspect: structural diffs of model files (keep below any filter=lfs lines)";
/// PyTorch's `.bin` only as Hugging Face names it: other `*.bin` files are rarely checkpoints.
/// `model.sig` is an OpenSSF model signature's name (model_signing's default): its textconv
/// is the signed manifest, and a file of that name that is no such bundle is shown as it is.
const RULES: [&str; 8] = [
    "*.gguf diff=weight-inspect",
    "*.safetensors diff=weight-inspect",
    "*.pt diff=weight-inspect",
    "*.pth diff=weight-inspect",
    "*.ckpt diff=weight-inspect",
    "*.wdelta diff=weight-inspect",
    "pytorch_model*.bin diff=weight-inspect",
    "model.sig diff=weight-inspect",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// This repository's config and its top-level `.gitattributes`.
    Repository,
    /// `~/.gitconfig` and the global attributes file (`core.attributesFile`, else
    /// `$XDG_CONFIG_HOME/git/attributes`).
    Global,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Textconv,
    External,
    Both,
}

impl Mode {
    fn textconv(self) -> bool {
        matches!(self, Mode::Textconv | Mode::Both)
    }
    fn external(self) -> bool {
        matches!(self, Mode::External | Mode::Both)
    }
}

/// Where the changes go.
struct Target {
    scope: Scope,
    /// Directory to run `git config` in.
    dir: PathBuf,
    attributes: PathBuf,
}

impl Target {
    fn resolve(cwd: &Path, scope: Scope) -> Result<Target> {
        match scope {
            Scope::Repository => {
                let repo = super::objects::open_repo(cwd)?;
                let root = repo
                    .workdir()
                    .ok_or_else(|| GitError::Bare(repo.git_dir().to_owned()))?
                    .to_owned();
                Ok(Target {
                    scope,
                    attributes: root.join(".gitattributes"),
                    dir: root,
                })
            }
            Scope::Global => Ok(Target {
                scope,
                attributes: global_attributes_file(cwd)?,
                dir: cwd.to_owned(),
            }),
        }
    }

    fn scope_flag(&self) -> &'static str {
        match self.scope {
            Scope::Repository => "--local",
            Scope::Global => "--global",
        }
    }

    fn git(&self, args: &[&str]) -> Result<std::process::Output> {
        let mut all = vec!["config", self.scope_flag()];
        all.extend_from_slice(args);
        super::process::output(&self.dir, &all)
    }

    fn get(&self, key: &str) -> Result<Option<String>> {
        let out = self.git(&["--get", key])?;
        match out.status.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&out.stdout)
                    .trim_end_matches('\n')
                    .to_owned(),
            )),
            Some(1) => Ok(None),
            _ => Err(super::process::failed(&["config", "--get", key], &out)),
        }
    }

    fn set(&self, key: &str, value: &str) -> Result<()> {
        let out = self.git(&[key, value])?;
        if out.status.success() {
            Ok(())
        } else {
            Err(super::process::failed(&["config", key, value], &out))
        }
    }

    fn unset(&self, key: &str) -> Result<()> {
        let out = self.git(&["--unset-all", key])?;
        // 5: the key was not set, which is what we want.
        if out.status.success() || out.status.code() == Some(5) {
            Ok(())
        } else {
            Err(super::process::failed(
                &["config", "--unset-all", key],
                &out,
            ))
        }
    }

    /// `git config --unset` leaves an empty `[diff "weight-inspect"]` header behind.
    fn remove_section_if_empty(&self) -> Result<()> {
        let pattern = format!("^diff\\.{}\\.", DRIVER.replace('-', "\\-"));
        let out = self.git(&["--get-regexp", &pattern])?;
        if out.status.code() == Some(1) {
            // Fails harmlessly when there is no header left.
            let _ = self.git(&["--remove-section", &format!("diff.{DRIVER}")])?;
        }
        Ok(())
    }

    fn config_name(&self) -> &'static str {
        match self.scope {
            Scope::Repository => "repository config",
            Scope::Global => "global config",
        }
    }
}

/// The global attributes file git reads: `core.attributesFile`, else
/// `$XDG_CONFIG_HOME/git/attributes`, else `~/.config/git/attributes`.
fn global_attributes_file(cwd: &Path) -> Result<PathBuf> {
    let out = super::process::output(cwd, &["config", "--global", "--get", "core.attributesFile"])?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if out.status.success() {
        let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !value.is_empty() {
            return Ok(match (value.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => PathBuf::from(value),
            });
        }
    }
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("git/attributes"));
    }
    match home {
        Some(home) => Ok(home.join(".config/git/attributes")),
        None => Err(GitError::NoHome),
    }
}

/// How we invoke ourselves from git: `weight-inspect` when that is this program on PATH,
/// else the absolute path of this executable, quoted for the shell git runs commands with.
fn program() -> String {
    let exe = std::env::current_exe().ok();
    let exe_canonical = exe.as_ref().and_then(|e| e.canonicalize().ok());
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("weight-inspect"))
            .find(|candidate| candidate.is_file())
    });
    if let (Some(found), Some(exe)) = (on_path, &exe_canonical)
        && found.canonicalize().ok().as_ref() == Some(exe)
    {
        return "weight-inspect".into();
    }
    match exe_canonical.or(exe) {
        Some(path) => shell_quote(&path.to_string_lossy()),
        None => "weight-inspect".into(),
    }
}

fn shell_quote(text: &str) -> String {
    let plain = text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Set (in the scope's config) when install wrote the attribute lines, so that uninstall
/// removes only lines this install wrote, never ones it found in place (a clone of a
/// repository that commits them).
const WROTE_ATTRIBUTES: &str = "weight-inspect.wroteattributes";
const RECORD_SECTION: &str = "weight-inspect";

/// The config keys of a mode and their values.
fn wanted_config(mode: Mode, program: &str, tensor_hashes: bool) -> Vec<(String, String, bool)> {
    let textconv_flags = if tensor_hashes {
        " --tensor-hashes"
    } else {
        ""
    };
    vec![
        (
            format!("diff.{DRIVER}.textconv"),
            format!("{program} textconv{textconv_flags}"),
            mode.textconv(),
        ),
        (
            format!("diff.{DRIVER}.cachetextconv"),
            "true".to_owned(),
            mode.textconv(),
        ),
        (
            format!("diff.{DRIVER}.command"),
            format!("{program} git-diff-driver"),
            mode.external(),
        ),
    ]
}

/// Installs the driver; returns a report of what changed (or that nothing did).
/// `tensor_hashes`: the textconv command renders each tensor's data digest.
pub(crate) fn install(cwd: &Path, scope: Scope, mode: Mode, tensor_hashes: bool) -> Result<String> {
    let target = Target::resolve(cwd, scope)?;
    let program = program();
    let mut report = String::new();
    for (key, value, wanted) in wanted_config(mode, &program, tensor_hashes) {
        let current = target.get(&key)?;
        if wanted {
            if current.as_deref() != Some(value.as_str()) {
                target.set(&key, &value)?;
                let _ = writeln!(report, "set {key} = {value} ({})", target.config_name());
            }
        } else if current.as_deref() == Some(value.as_str()) {
            // Switching modes: drop the other mode's key we installed earlier.
            target.unset(&key)?;
            let _ = writeln!(report, "unset {key} ({})", target.config_name());
        }
    }
    target.remove_section_if_empty()?;
    let attributes = read_attributes(&target.attributes)?;
    let (updated, change) = add_rules(&attributes.text);
    if let Some(change) = change {
        write_attributes(&target.attributes, &updated)?;
        // What uninstall may take back: only lines this install wrote.
        target.set(WROTE_ATTRIBUTES, "true")?;
        for rule in RULES {
            let _ = writeln!(
                report,
                "{change} `{rule}` in {}",
                shown_path(&target.attributes)
            );
        }
    }
    if report.is_empty() {
        let _ = writeln!(
            report,
            "weight-inspect is already installed as git's diff driver; nothing changed"
        );
    } else if scope == Scope::Repository && change.is_some() {
        let _ = writeln!(
            report,
            "commit .gitattributes to share the attributes (each clone still needs \
             `weight-inspect git install` or `--global` for the config)"
        );
    }
    if scope == Scope::Global {
        warn_if_shadowed(cwd, &mut report);
    }
    if mode.textconv() && !has_committer_identity(&target.dir) {
        let _ = writeln!(
            report,
            "warning: git has no committer identity here; it needs one to store cached textconv              output (refs/notes/textconv/{DRIVER}), and `git diff`/`git log -p` fail without it.              Set user.name and user.email, or run              `git config diff.{DRIVER}.cachetextconv false`"
        );
    }
    Ok(report)
}

/// Whether git can name a committer (the textconv cache is a notes commit).
fn has_committer_identity(dir: &Path) -> bool {
    super::process::output(dir, &["var", "GIT_COMMITTER_IDENT"]).is_ok_and(|o| o.status.success())
}

/// Removes what [`install`] wrote: our config keys (and the then-empty section) and the
/// attribute lines it added. Lines it found in place, and lines committed or staged in the
/// repository's `.gitattributes`, are left, and the report says which and why.
pub(crate) fn uninstall(cwd: &Path, scope: Scope) -> Result<String> {
    let target = Target::resolve(cwd, scope)?;
    let mut report = String::new();
    for (key, _, _) in wanted_config(Mode::Both, "", false) {
        if target.get(&key)?.is_some() {
            target.unset(&key)?;
            let _ = writeln!(report, "unset {key} ({})", target.config_name());
        }
    }
    target.remove_section_if_empty()?;
    let wrote = target.get(WROTE_ATTRIBUTES)?.is_some();
    let attributes = read_attributes(&target.attributes)?;
    if attributes.exists {
        let committed = match scope {
            Scope::Repository => committed_attributes(cwd)?,
            Scope::Global => Committed::default(),
        };
        let removable = |line: &str| wrote && !committed.lines.contains(line.trim());
        let (updated, removed, left) = remove_rules(&attributes.text, &removable);
        let file = shown_path(&target.attributes);
        if removed > 0 {
            if updated.trim().is_empty() && !committed.tracked {
                std::fs::remove_file(&target.attributes).map_err(|e| GitError::Io {
                    path: target.attributes.clone(),
                    source: e,
                })?;
                let _ = writeln!(
                    report,
                    "removed {file} (it held only the lines weight-inspect wrote)"
                );
            } else {
                write_attributes(&target.attributes, &updated)?;
                let _ = writeln!(
                    report,
                    "removed {removed} weight-inspect line{} from {file}",
                    if removed == 1 { "" } else { "s" },
                );
            }
        }
        if !left.is_empty() {
            let why = if !wrote {
                "`weight-inspect git install` has no record of writing them (it found them in \
                 place, or an older weight-inspect wrote them); remove them by hand if they \
                 should go"
            } else {
                "they are committed (or staged) in the repository; remove them with a commit \
                 if it should stop using the driver"
            };
            let _ = writeln!(
                report,
                "left {} weight-inspect line{} in {file}: {why}:",
                left.len(),
                if left.len() == 1 { "" } else { "s" },
            );
            for line in &left {
                let _ = writeln!(report, "  {}", crate::escape::shown(line));
            }
        }
    }
    if wrote {
        // Fails harmlessly when git has already dropped the section.
        let _ = target.git(&["--remove-section", RECORD_SECTION])?;
    }
    if report.is_empty() {
        let _ = writeln!(report, "weight-inspect is not installed; nothing changed");
    }
    Ok(report)
}

/// The lines of the repository's `.gitattributes` as committed in HEAD and as staged, and
/// whether git tracks the file at all.
#[derive(Default)]
struct Committed {
    lines: std::collections::BTreeSet<String>,
    tracked: bool,
}

fn committed_attributes(cwd: &Path) -> Result<Committed> {
    let repo = super::objects::open_repo(cwd)?;
    let mut out = Committed::default();
    // Before the first commit there is no HEAD to read.
    let head = super::objects::tree_entry(&repo, "HEAD", ".gitattributes").unwrap_or_default();
    let staged = super::objects::index_entry(
        &repo,
        ".gitattributes",
        gix::index::entry::Stage::Unconflicted,
    )?;
    for entry in [head, staged].into_iter().flatten() {
        let Some(id) = entry.file() else { continue };
        out.tracked = true;
        let bytes = super::objects::blob_bytes(&repo, id)?;
        out.lines.extend(
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(|l| l.trim().to_owned()),
        );
    }
    Ok(out)
}

/// Repository attributes take precedence over the global file, so a repository whose
/// `.gitattributes` sets `diff=lfs` for model files hides a global install.
fn warn_if_shadowed(cwd: &Path, report: &mut String) {
    let Ok(repo) = super::objects::open_repo(cwd) else {
        return;
    };
    let Some(root) = repo.workdir() else { return };
    let Ok(text) = std::fs::read_to_string(root.join(".gitattributes")) else {
        return;
    };
    let (_, change) = add_rules(&text);
    let shadowed = change.is_some()
        && text
            .lines()
            .any(|l| sets_diff_for_models(l) && !is_our_line(l));
    if shadowed {
        let _ = writeln!(
            report,
            "warning: {} sets the diff attribute of model files and takes precedence over \
             global attributes; run `weight-inspect git install` in this repository",
            shown_path(&root.join(".gitattributes"))
        );
    }
}

struct Attributes {
    text: String,
    exists: bool,
}

fn read_attributes(path: &Path) -> Result<Attributes> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Attributes {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            exists: true,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Attributes {
            text: String::new(),
            exists: false,
        }),
        Err(e) => Err(GitError::Io {
            path: path.to_owned(),
            source: e,
        }),
    }
}

fn write_attributes(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|e| GitError::Io {
            path: dir.to_owned(),
            source: e,
        })?;
    }
    Ok(crate::fsutil::write_bytes_atomically(
        path,
        text.as_bytes(),
    )?)
}

fn is_our_line(line: &str) -> bool {
    let line = line.trim();
    line == COMMENT || RULES.contains(&line)
}

/// Whether an attributes line sets `diff` (directly or through the `binary` macro) for a
/// pattern that can match a model file.
fn sets_diff_for_models(line: &str) -> bool {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with("[attr]") {
        return false;
    }
    let mut tokens = line.split_whitespace();
    let Some(pattern) = tokens.next() else {
        return false;
    };
    let sets_diff = tokens
        .any(|t| matches!(t, "diff" | "-diff" | "!diff" | "binary") || t.starts_with("diff="));
    sets_diff && pattern_may_match_models(pattern)
}

fn pattern_may_match_models(pattern: &str) -> bool {
    let pattern = pattern.trim_matches('"');
    let name = pattern.rsplit('/').next().unwrap_or(pattern);
    if name.is_empty() {
        return false;
    }
    let samples = ["model.gguf", "model.safetensors"];
    if name.contains(['*', '?', '[']) {
        return globset::Glob::new(name).map_or(true, |g| {
            let m = g.compile_matcher();
            samples.iter().any(|s| m.is_match(s))
        });
    }
    crate::artifact::Format::from_path(name).is_some()
}

/// Adds our block at the end unless it is already there and no later line overrides `diff`
/// for model files. Returns the new text and what happened ("added"/"moved"), or None when
/// nothing changed.
fn add_rules(text: &str) -> (String, Option<&'static str>) {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let lines: Vec<&str> = text.lines().collect();
    let first_rule = lines.iter().position(|l| RULES.contains(&l.trim()));
    let all_present = RULES.iter().all(|r| lines.iter().any(|l| l.trim() == *r));
    if let Some(first) = first_rule
        && all_present
    {
        let overridden = lines[first..]
            .iter()
            .any(|l| !is_our_line(l) && sets_diff_for_models(l));
        if !overridden {
            return (text.to_owned(), None);
        }
    }
    let existed = first_rule.is_some();
    let mut out = if existed {
        // Take our old lines out; the others keep their order.
        let mut kept = String::with_capacity(text.len() + 128);
        for line in lines.iter().filter(|l| !is_our_line(l)) {
            kept.push_str(line);
            kept.push_str(eol);
        }
        kept
    } else {
        // Leave the user's bytes alone, only completing a missing final newline.
        let mut kept = text.to_owned();
        if !kept.is_empty() && !kept.ends_with('\n') {
            kept.push_str(eol);
        }
        kept
    };
    out.push_str(COMMENT);
    out.push_str(eol);
    for rule in RULES {
        out.push_str(rule);
        out.push_str(eol);
    }
    (
        out,
        Some(if existed { "moved to the end" } else { "added" }),
    )
}

/// Removes our lines that `removable` accepts; returns the new text, how many lines were
/// removed, and our lines that were left.
fn remove_rules(text: &str, removable: &dyn Fn(&str) -> bool) -> (String, usize, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    let mut left = Vec::new();
    for line in text.split_inclusive('\n') {
        if is_our_line(line) && removable(line) {
            removed += 1;
        } else {
            if is_our_line(line) {
                left.push(line.trim().to_owned());
            }
            out.push_str(line);
        }
    }
    (out, removed, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LFS: &str = "*.gguf filter=lfs diff=lfs merge=lfs -text\n";

    #[test]
    fn adds_after_lfs_lines_and_is_idempotent() {
        let (once, change) = add_rules(LFS);
        assert_eq!(change, Some("added"));
        assert!(once.starts_with(LFS));
        assert!(
            once.ends_with(
                "pytorch_model*.bin diff=weight-inspect\nmodel.sig diff=weight-inspect\n"
            )
        );
        let (twice, change) = add_rules(&once);
        assert_eq!(change, None);
        assert_eq!(twice, once);
        let (removed, n, left) = remove_rules(&once, &|_| true);
        assert_eq!(n, 1 + RULES.len());
        assert_eq!(removed, LFS);
        assert!(left.is_empty());
        let (kept, n, left) = remove_rules(&once, &|_| false);
        assert_eq!(
            (kept.as_str(), n, left.len()),
            (once.as_str(), 0, 1 + RULES.len())
        );
    }

    #[test]
    fn moves_the_block_below_a_later_lfs_line() {
        let (installed, _) = add_rules("");
        let later = format!("{installed}{LFS}");
        let (moved, change) = add_rules(&later);
        assert_eq!(change, Some("moved to the end"));
        assert!(moved.starts_with(LFS));
        assert_eq!(add_rules(&moved).1, None);
        // Unrelated later lines do not trigger a move.
        let unrelated = format!("{installed}*.png binary\n*.txt text\n");
        assert_eq!(add_rules(&unrelated).1, None);
    }

    #[test]
    fn keeps_crlf_and_a_missing_final_newline() {
        let (out, _) = add_rules("*.bin -text\r\n*.x binary");
        assert!(out.starts_with("*.bin -text\r\n*.x binary\r\n# weight-inspect"));
        assert!(out.ends_with("diff=weight-inspect\r\n"));
    }

    #[test]
    fn recognizes_patterns_that_match_models() {
        assert!(sets_diff_for_models("*.gguf filter=lfs diff=lfs"));
        assert!(sets_diff_for_models("models/** -diff"));
        assert!(sets_diff_for_models("big.safetensors binary"));
        assert!(!sets_diff_for_models("*.png binary"));
        assert!(!sets_diff_for_models("*.gguf filter=lfs"));
        assert!(!sets_diff_for_models("# *.gguf diff=lfs"));
    }

    #[test]
    fn quotes_paths_for_the_shell() {
        assert_eq!(
            shell_quote("/usr/bin/weight-inspect"),
            "/usr/bin/weight-inspect"
        );
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }
}
