//! What every command shares about its output: the form of its report (chosen once where the
//! arguments are parsed), when to color, writing to stdout, and the exit statuses. Adapters
//! and the CLI import this module; it imports none of them.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use crate::error::{Error, Result};
use crate::render::Palette;
use crate::render::report::Report;

/// The form of a command's report on stdout, chosen once from its arguments: text, one JSON
/// document of schema 1 (`--json`), and for `check --format` also GitHub workflow commands or
/// a SARIF log. (HTML pages, `ci`'s Markdown and its JSON and SARIF files are written to the
/// files their options name, beside this report.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
    Github,
    /// SARIF 2.1.0, for GitHub code scanning and other security dashboards.
    Sarif,
}

impl Format {
    /// The form a `--json` flag chooses.
    pub(crate) fn json_if(json: bool) -> Format {
        if json { Format::Json } else { Format::Text }
    }
}

/// Where a command's report goes and in which form: made once from the arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub format: Format,
    pub color: ColorChoice,
}

impl Output {
    pub(crate) fn new(format: Format, color: ColorChoice) -> Output {
        Output { format, color }
    }

    /// `report` in the chosen form (text colored for stdout).
    pub(crate) fn render(&self, report: &dyn Report) -> String {
        match self.format {
            Format::Text => report.text(&self.color.palette()),
            Format::Json => report.json(),
            // Only `check` offers these; a report without them would be written as text.
            Format::Github => report
                .github()
                .unwrap_or_else(|| report.text(&self.color.palette())),
            Format::Sarif => report.sarif().unwrap_or_else(|| report.json()),
        }
    }

    /// Writes `report` to stdout in the chosen form.
    pub(crate) fn print(&self, report: &dyn Report) -> Result<()> {
        write_stdout(self.render(report).as_bytes())
    }
}

/// When to color output: `auto` colors a terminal (or git's pager) unless NO_COLOR is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// The palette for stdout.
    pub(crate) fn palette(self) -> Palette {
        Palette::new(self.enabled(std::io::stdout().is_terminal()))
    }

    /// Whether to color given whether the output is a terminal (or a pager git runs for us).
    pub(crate) fn enabled(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color(),
        }
    }

    /// Whether stdout is a terminal or git's pager (git sets GIT_PAGER_IN_USE for the programs
    /// it runs when their output goes to its pager).
    pub(crate) fn enabled_for_git(self) -> bool {
        let pager = std::env::var_os("GIT_PAGER_IN_USE").is_some_and(|v| {
            let v = v.to_string_lossy().to_ascii_lowercase();
            !v.is_empty() && v != "0" && v != "false"
        });
        self.enabled(std::io::stdout().is_terminal() || pager)
    }
}

/// NO_COLOR set to a non-empty value turns color off (no-color.org).
pub(crate) fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// The exit statuses of every command, as diff(1) and `git diff --exit-code` use them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Identical, clean, passed.
    Clean,
    /// Differences found, policy violations, or a CI run that fails by its `--fail-on`.
    Found,
    /// An error: bad input, a file that cannot be read or judged.
    Error,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Clean => 0,
            Exit::Found => 1,
            Exit::Error => 2,
        }
    }

    /// `Found` when `found`, else `Clean`.
    pub fn found_if(found: bool) -> Exit {
        if found { Exit::Found } else { Exit::Clean }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth reporting.
pub(crate) fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<stdout>", e)),
    }
}

/// Writes `text` to stdout and returns the clean exit.
pub(crate) fn print(text: &str) -> Result<Exit> {
    write_stdout(text.as_bytes())?;
    Ok(Exit::Clean)
}
