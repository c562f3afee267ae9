//! `weight-inspect git install|uninstall` with the real git and git-lfs: what lands in the
//! config and the attributes, coexistence with LFS, idempotency, exact removal.

mod common;

use std::process::Command;

use common::git::{MODEL_PATTERNS, Repo};
use common::{assert_contains, assert_lacks, assert_success, bin, stderr, stdout};

const BLOCK: &str =
    "# weight-inspect: structural diffs of model files (keep below any filter=lfs lines)
*.gguf diff=weight-inspect
*.safetensors diff=weight-inspect
*.pt diff=weight-inspect
*.pth diff=weight-inspect
*.ckpt diff=weight-inspect
*.wdelta diff=weight-inspect
pytorch_model*.bin diff=weight-inspect
model.sig diff=weight-inspect
";

/// weight-inspect in the repository with the PATH the tests were started with instead of the
/// harness's (which puts the test binary's directory first): `git install` then configures the
/// binary by its absolute path, which these tests expect.
fn wi_cmd(repo: &Repo) -> Command {
    let mut cmd = repo.command(bin());
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

fn wi_ok(repo: &Repo, args: &[&str]) -> String {
    let out = wi_cmd(repo).args(args).output().unwrap();
    assert_success(&format!("weight-inspect {args:?}"), &out);
    stdout(&out)
}

/// `git check-attr` for a model path: the attribute's value as git sees it.
fn attr(repo: &Repo, name: &str, path: &str) -> String {
    let out = repo.ok(&["check-attr", name, "--", path]);
    out.trim()
        .rsplit(": ")
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn local_config(repo: &Repo) -> String {
    repo.ok(&["config", "--local", "--list"])
}

fn program() -> String {
    bin().canonicalize().unwrap().display().to_string()
}

#[test]
fn fresh_repository() {
    let repo = Repo::new();
    let report = wi_ok(&repo, &["git", "install"]);
    assert_contains(
        &report,
        &[
            "set diff.weight-inspect.textconv = ",
            "set diff.weight-inspect.cachetextconv = true",
            "set diff.weight-inspect.command = ",
            "added `*.gguf diff=weight-inspect`",
            "added `*.safetensors diff=weight-inspect`",
            "added `pytorch_model*.bin diff=weight-inspect`",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(repo.path(".gitattributes")).unwrap(),
        BLOCK
    );
    let p = program();
    assert_eq!(
        repo.ok(&["config", "diff.weight-inspect.textconv"]).trim(),
        format!("{p} textconv")
    );
    assert_eq!(
        repo.ok(&["config", "diff.weight-inspect.command"]).trim(),
        format!("{p} git-diff-driver")
    );
    assert_eq!(
        repo.ok(&["config", "--bool", "diff.weight-inspect.cachetextconv"])
            .trim(),
        "true"
    );
    assert_eq!(attr(&repo, "diff", "m.gguf"), "weight-inspect");
    assert_eq!(attr(&repo, "diff", "dir/w.safetensors"), "weight-inspect");
    assert_eq!(attr(&repo, "diff", "readme.md"), "unspecified");

    // Second run: nothing changes, byte for byte.
    let config = local_config(&repo);
    let raw_config = std::fs::read(repo.path(".git/config")).unwrap();
    let again = wi_ok(&repo, &["git", "install"]);
    assert_eq!(
        again,
        "weight-inspect is already installed as git's diff driver; nothing changed\n"
    );
    assert_eq!(local_config(&repo), config);
    assert_eq!(std::fs::read(repo.path(".git/config")).unwrap(), raw_config);
    assert_eq!(
        std::fs::read_to_string(repo.path(".gitattributes")).unwrap(),
        BLOCK
    );

    // Uninstall: the attributes file we created is gone, and so is the config section.
    let before = {
        let fresh = Repo::new();
        std::fs::read_to_string(fresh.path(".git/config")).unwrap()
    };
    let report = wi_ok(&repo, &["git", "uninstall"]);
    assert_contains(
        &report,
        &[
            "unset diff.weight-inspect.textconv",
            "unset diff.weight-inspect.command",
            "removed ",
        ],
    );
    assert!(!repo.path(".gitattributes").exists());
    let config_text = std::fs::read_to_string(repo.path(".git/config")).unwrap();
    assert!(!config_text.contains("weight-inspect"), "{config_text}");
    assert_eq!(config_text, before);
    assert_eq!(
        wi_ok(&repo, &["git", "uninstall"]),
        "weight-inspect is not installed; nothing changed\n"
    );
}

#[test]
fn repository_with_lfs_attributes() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    // Something else of the user's in the file, and in the diff section's neighbourhood.
    let mut original = std::fs::read_to_string(repo.path(".gitattributes")).unwrap();
    assert!(original.contains("*.gguf filter=lfs diff=lfs merge=lfs -text"));
    original.push_str("*.txt text eol=lf\n");
    std::fs::write(repo.path(".gitattributes"), &original).unwrap();
    repo.ok(&["config", "diff.other.textconv", "cat"]);
    let lfs_filter = repo.ok(&["config", "filter.lfs.clean"]);

    wi_ok(&repo, &["git", "install"]);
    let installed = std::fs::read_to_string(repo.path(".gitattributes")).unwrap();
    assert_eq!(installed, format!("{original}{BLOCK}"));
    // Both attributes apply: LFS keeps storing the file, we diff it.
    assert_eq!(attr(&repo, "diff", "m.gguf"), "weight-inspect");
    assert_eq!(attr(&repo, "filter", "m.gguf"), "lfs");
    assert_eq!(attr(&repo, "merge", "m.gguf"), "lfs");
    assert_eq!(attr(&repo, "diff", "x.safetensors"), "weight-inspect");

    // Idempotent.
    let config = local_config(&repo);
    assert_contains(&wi_ok(&repo, &["git", "install"]), &["nothing changed"]);
    assert_eq!(local_config(&repo), config);
    assert_eq!(
        std::fs::read_to_string(repo.path(".gitattributes")).unwrap(),
        installed
    );

    // A later `git lfs track` appends a line that would win; install again moves our block.
    repo.ok(&["lfs", "track", "models/*.gguf"]);
    assert_eq!(attr(&repo, "diff", "models/m.gguf"), "lfs");
    let report = wi_ok(&repo, &["git", "install"]);
    assert_contains(&report, &["moved to the end `*.gguf diff=weight-inspect`"]);
    assert_eq!(attr(&repo, "diff", "models/m.gguf"), "weight-inspect");
    assert_eq!(attr(&repo, "filter", "models/m.gguf"), "lfs");
    let moved = std::fs::read_to_string(repo.path(".gitattributes")).unwrap();
    assert!(moved.ends_with(BLOCK), "{moved}");

    // Uninstall removes exactly our lines and keys.
    wi_ok(&repo, &["git", "uninstall"]);
    let after = std::fs::read_to_string(repo.path(".gitattributes")).unwrap();
    assert_eq!(
        after,
        format!("{original}models/*.gguf filter=lfs diff=lfs merge=lfs -text\n")
    );
    assert_eq!(attr(&repo, "diff", "m.gguf"), "lfs");
    assert_eq!(repo.ok(&["config", "diff.other.textconv"]).trim(), "cat");
    assert_eq!(repo.ok(&["config", "filter.lfs.clean"]), lfs_filter);
    assert!(
        repo.try_git(&["config", "--get-regexp", "^diff\\.weight-inspect\\."])
            .status
            .code()
            == Some(1)
    );
}

#[test]
fn modes_textconv_only_external_only_and_switching() {
    let repo = Repo::new();
    let report = wi_ok(&repo, &["git", "install", "--textconv"]);
    assert_lacks(&report, &["command"]);
    assert!(
        repo.try_git(&["config", "diff.weight-inspect.command"])
            .status
            .code()
            == Some(1)
    );
    assert_eq!(
        repo.ok(&["config", "diff.weight-inspect.cachetextconv"])
            .trim(),
        "true"
    );

    let report = wi_ok(&repo, &["git", "install", "--external"]);
    assert_contains(
        &report,
        &[
            "set diff.weight-inspect.command",
            "unset diff.weight-inspect.textconv",
            "unset diff.weight-inspect.cachetextconv",
        ],
    );
    assert!(
        repo.try_git(&["config", "diff.weight-inspect.textconv"])
            .status
            .code()
            == Some(1)
    );
    // Attributes were already in place.
    assert_lacks(&report, &["added `"]);

    let both = repo.wi(&["git", "install", "--textconv", "--external"]);
    assert!(!both.status.success(), "the two flags conflict");
}

#[test]
fn global_install_and_precedence_warning() {
    let repo = Repo::with_lfs(MODEL_PATTERNS);
    let report = wi_ok(&repo, &["git", "install", "--global"]);
    let global_attributes = repo.home.join(".config/git/attributes");
    assert_eq!(std::fs::read_to_string(&global_attributes).unwrap(), BLOCK);
    let gitconfig = std::fs::read_to_string(repo.home.join(".gitconfig")).unwrap();
    assert_contains(
        &gitconfig,
        &[
            "[diff \"weight-inspect\"]",
            "textconv = ",
            "cachetextconv = true",
        ],
    );
    // The repository's own .gitattributes (diff=lfs) wins over global attributes.
    assert_contains(
        &report,
        &["warning:", "takes precedence over global attributes"],
    );
    assert_eq!(attr(&repo, "diff", "m.gguf"), "lfs");
    // A repository without LFS attributes uses the global install.
    let plain = Repo::new();
    let mut cmd = plain.git_cmd_in(&plain.dir, &["check-attr", "diff", "--", "m.gguf"]);
    cmd.env("HOME", &repo.home)
        .env("XDG_CONFIG_HOME", repo.home.join(".config"));
    let out = cmd.output().unwrap();
    assert_contains(&stdout(&out), &["diff: weight-inspect"]);

    // core.attributesFile is honored.
    let custom = repo.home.join("my-attributes");
    std::fs::write(&custom, "*.bin binary\n").unwrap();
    repo.ok(&[
        "config",
        "--global",
        "core.attributesFile",
        custom.to_str().unwrap(),
    ]);
    wi_ok(&repo, &["git", "install", "--global"]);
    assert_eq!(
        std::fs::read_to_string(&custom).unwrap(),
        format!("*.bin binary\n{BLOCK}")
    );

    wi_ok(&repo, &["git", "uninstall", "--global"]);
    assert_eq!(std::fs::read_to_string(&custom).unwrap(), "*.bin binary\n");
    let gitconfig = std::fs::read_to_string(repo.home.join(".gitconfig")).unwrap();
    assert!(!gitconfig.contains("weight-inspect"), "{gitconfig}");
}

#[test]
fn install_outside_a_repository_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["git", "install"])
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_contains(&stderr(&out), &["not inside a git repository"]);
}

#[test]
fn warns_when_git_cannot_write_the_textconv_cache() {
    let repo = Repo::new();
    // No identity and no guessing: git cannot create the notes commit of the cache.
    repo.ok(&["config", "user.useConfigOnly", "true"]);
    let run = |args: &[&str]| {
        let mut cmd = wi_cmd(&repo);
        cmd.args(args);
        for var in [
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
            "EMAIL",
        ] {
            cmd.env_remove(var);
        }
        let out = cmd.output().unwrap();
        assert_success("weight-inspect git install", &out);
        stdout(&out)
    };
    assert_contains(
        &run(&["git", "install"]),
        &[
            "warning: git has no committer identity",
            "cachetextconv false",
        ],
    );
    // The external driver alone needs no cache.
    let repo2_report = run(&["git", "install", "--external"]);
    assert_lacks(&repo2_report, &["committer identity"]);
    // With an identity, no warning.
    repo.ok(&["config", "user.name", "t"]);
    repo.ok(&["config", "user.email", "t@t"]);
    assert_lacks(&run(&["git", "install"]), &["committer identity"]);
}

#[test]
fn uninstall_leaves_committed_attributes_it_did_not_write() {
    // A repository that commits the attributes, with LFS lines and ours.
    let origin = Repo::with_lfs(MODEL_PATTERNS);
    wi_ok(&origin, &["git", "install"]);
    origin.write("README.md", "models\n");
    origin.commit_all("attributes");
    let committed = std::fs::read_to_string(origin.path(".gitattributes")).unwrap();
    assert!(committed.ends_with(BLOCK), "{committed}");

    // A clone: install finds the lines in place and writes none of them.
    let clone_dir = origin.tmp.path().join("clone");
    origin.ok(&[
        "clone",
        "-q",
        origin.dir.to_str().unwrap(),
        clone_dir.to_str().unwrap(),
    ]);
    let clone = Repo {
        tmp: tempfile::tempdir().unwrap(),
        dir: clone_dir,
        home: origin.home.clone(),
    };
    let report = wi_ok(&clone, &["git", "install"]);
    assert_lacks(&report, &["added `", "moved to the end"]);
    assert_contains(&report, &["set diff.weight-inspect.textconv"]);

    let report = wi_ok(&clone, &["git", "uninstall"]);
    assert_contains(
        &report,
        &[
            "unset diff.weight-inspect.textconv",
            "left 9 weight-inspect lines in ",
            "has no record of writing them (it found them in place",
            "  *.gguf diff=weight-inspect",
        ],
    );
    assert_lacks(&report, &["removed"]);
    assert_eq!(
        std::fs::read_to_string(clone.path(".gitattributes")).unwrap(),
        committed
    );
    assert_eq!(clone.ok(&["status", "--porcelain"]), "");
    let config = local_config(&clone);
    assert!(!config.contains("weight-inspect"), "{config}");

    // Lines install wrote and the user then committed are left too, and said why.
    wi_ok(&origin, &["git", "uninstall"]);
    assert_eq!(
        std::fs::read_to_string(origin.path(".gitattributes")).unwrap(),
        committed
    );
    let again = wi_ok(&origin, &["git", "install"]);
    assert_lacks(&again, &["added `"]);
    let report = wi_ok(&origin, &["git", "uninstall"]);
    assert_contains(&report, &["left 9 weight-inspect lines"]);
    assert_eq!(origin.ok(&["status", "--porcelain"]), "");
}

#[test]
fn uninstall_after_the_lines_were_committed_keeps_them() {
    let repo = Repo::new();
    wi_ok(&repo, &["git", "install"]);
    repo.commit_all("attributes");
    let report = wi_ok(&repo, &["git", "uninstall"]);
    assert_contains(
        &report,
        &[
            "left 9 weight-inspect lines",
            "they are committed (or staged)",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(repo.path(".gitattributes")).unwrap(),
        BLOCK
    );
    assert_eq!(repo.ok(&["status", "--porcelain"]), "");
}
