//! `completions SHELL` and the hidden `completions --man DIR`: shell completion scripts and man pages,
//! generated from the command-line definition itself so they never drift from it.

use std::path::PathBuf;

use crate::output::{Exit, write_stdout};

use super::error::Result;

/// Print a shell completion script (bash, zsh, fish, powershell, elvish).
#[derive(Debug, clap::Args)]
#[command(after_help = "Install, for example:\n  \
    weight-inspect completions bash > ~/.local/share/bash-completion/completions/weight-inspect\n  \
    weight-inspect completions zsh > \"${fpath[1]}/_weight-inspect\"\n  \
    weight-inspect completions fish > ~/.config/fish/completions/weight-inspect.fish")]
pub(crate) struct CompletionsArgs {
    #[arg(value_enum, required_unless_present = "man")]
    pub shell: Option<clap_complete::Shell>,
    /// Write the man pages (weight-inspect.1 and one per subcommand) into DIR instead, for
    /// packaging. Hidden from the help (clap_complete still offers it after `completions` in
    /// some shells: it completes hidden arguments too).
    #[arg(long, value_name = "DIR", hide = true, conflicts_with = "shell")]
    pub man: Option<PathBuf>,
}

/// `command` is the whole command line's definition (the parser's own, from `cli/mod.rs`).
pub(super) fn completions(args: CompletionsArgs, mut command: clap::Command) -> Result<Exit> {
    let Some(shell) = args.shell else {
        let dir = args.man.expect("clap requires a shell or --man");
        return manpages(&dir, command);
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "weight-inspect", &mut out);
    if shell == clap_complete::Shell::Bash {
        out = fix_bash_states(&out).into_bytes();
    }
    write_stdout(&out)?;
    Ok(Exit::Clean)
}

/// clap_complete's bash script spells the state of a subcommand of a hyphenated program two
/// ways (`weight__inspect__subcmd__check` in the loop that computes it, and
/// `weight__subcmd__inspect__subcmd__check` in the arms that use it), so nothing after a
/// subcommand completes (clap-rs/clap#6421). The arms are respelled as the loop spells them;
/// once clap_complete agrees with itself this changes nothing.
fn fix_bash_states(script: &[u8]) -> String {
    String::from_utf8_lossy(script).replace("weight__subcmd__inspect", "weight__inspect")
}

/// Writes the man pages into `dir` (created if missing) and lists them.
fn manpages(dir: &std::path::Path, mut command: clap::Command) -> Result<Exit> {
    std::fs::create_dir_all(dir).map_err(|e| crate::error::Error::io(dir, e))?;
    command.build();
    let mut written = Vec::new();
    write_pages(&command, dir, &mut written)?;
    let mut out = String::new();
    for path in written {
        out.push_str(&format!("wrote {}\n", crate::escape::shown_path(&path)));
    }
    write_stdout(out.as_bytes())?;
    Ok(Exit::Clean)
}

/// The page of `command` (named as clap displays a built subcommand, e.g.
/// `weight-inspect-git-diff`) and of every visible subcommand below it.
fn write_pages(
    command: &clap::Command,
    dir: &std::path::Path,
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let mut roff = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut roff)
        .map_err(|e| crate::error::Error::io(dir, e))?;
    let path = dir.join(format!("{name}.1"));
    crate::fsutil::write_bytes_atomically(&path, &roff)?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
