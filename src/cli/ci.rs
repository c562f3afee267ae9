//! `ci`: the pull-request report for GitHub Actions.

use std::path::{Path, PathBuf};

use crate::ci::{self, CiReport, FailOn};
use crate::output::{Exit, write_stdout};

use super::error::Result;

/// Report structural changes and policy violations between two commits (exit 0 pass,
/// 1 failed per --fail-on, 2 error).
#[derive(Debug, clap::Args)]
pub(crate) struct CiArgs {
    /// Base revision [default: origin/$GITHUB_BASE_REF when that is set, else HEAD^].
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Head revision.
    #[arg(long, value_name = "REV", default_value = "HEAD")]
    pub head: String,
    /// Policy file applied to the head side [default: .weight-inspect.toml as committed in
    /// the head revision, if it has one].
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Append the Markdown report to FILE (in Actions: $GITHUB_STEP_SUMMARY); `-` prints it.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Print GitHub workflow-command annotations (::error, ::warning) instead of plain
    /// violation lines.
    #[arg(long)]
    pub annotations: bool,
    /// What fails the run (exit 1): violations the change brings (new, or worse than at the
    /// base; those the base already had are warnings), every violation (violation-any), any
    /// changed model file, or nothing.
    #[arg(long, value_enum, default_value_t = FailOn::Violation)]
    pub fail_on: FailOn,
    /// Append step outputs to FILE (in Actions: $GITHUB_OUTPUT): changed-files, violations,
    /// new-violations, pre-existing-violations, failed, report, html.
    #[arg(long, value_name = "FILE")]
    pub outputs: Option<PathBuf>,
    /// Write the full report as JSON (schema 1) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also compare weight values (a "Weights" column and a section per file), for files whose
    /// two sides are local: blobs, and LFS objects the checkout fetched; nothing is downloaded.
    #[arg(long)]
    pub values: bool,
    /// With --values: the model the GGUF files were converted from (a safetensors or PyTorch
    /// file, relative to the repository root); each changed GGUF in its directory is compared
    /// with it as a conversion.
    #[arg(long, value_name = "PATH", requires = "values")]
    pub reference: Option<String>,
    /// Write a self-contained HTML report to FILE: the files table, then per changed model its
    /// structural diff and, with --values, a per-layer heatmap of rel_l2 and the changed
    /// tensors (or its conversion report). Upload it with actions/upload-artifact.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the policy's findings as SARIF 2.1.0 to FILE, for GitHub code scanning
    /// (github/codeql-action/upload-sarif).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Only these paths: files, directories or globs, relative to the repository root.
    #[arg(value_name = "PATHS")]
    pub paths: Vec<String>,
}

pub(super) fn run(args: CiArgs, remote: &crate::git::RemoteOptions) -> Result<Exit> {
    let cwd = super::cwd::cwd()?;
    let repo = crate::git::open_repo(&cwd)?;
    let base = match args.base {
        Some(base) => base,
        None => ci::default_base(std::env::var("GITHUB_BASE_REF").ok().as_deref()),
    };
    let policy = ci::load_policy(&repo, &cwd, args.policy.as_deref(), &args.head)?;
    let options = ci::Options {
        base: &base,
        head: &args.head,
        paths: &args.paths,
        fail_on: args.fail_on,
        values: args.values,
        reference: args.reference.as_deref(),
        remote,
        json: args.json.is_some(),
        html: args.html.is_some(),
    };
    let report = CiReport::collect(&repo, policy, &options)?;

    if let Some(path) = &args.json {
        ci::write_json(path, &report)?;
    }
    if let Some(path) = &args.sarif {
        ci::write_sarif(path, &report)?;
    }
    if let Some(path) = &args.html {
        ci::write_html(path, &report)?;
    }
    let summary_to_stdout = args.summary.as_deref() == Some(Path::new("-"));
    match &args.summary {
        Some(_) if summary_to_stdout => {
            write_stdout(ci::render_markdown(&report, ci::SUMMARY_LIMIT).as_bytes())?;
        }
        Some(path) => ci::append_summary(path, &report)?,
        None => {}
    }
    if let Some(path) = &args.outputs {
        ci::append_outputs(path, &report, args.json.as_deref(), args.html.as_deref())?;
    }
    if !summary_to_stdout {
        let mut out = report.text_lines(!args.annotations);
        if args.annotations {
            out.push_str(&ci::render_annotations(&report));
        }
        out.push_str(&format!("weight-inspect: {}\n", report.summary_line()));
        write_stdout(out.as_bytes())?;
    }
    Ok(Exit::found_if(report.failed()))
}
