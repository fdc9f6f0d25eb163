//! `fanout demo`: make a throwaway repository, run three workers of the bundled fake
//! agent in it, and show the result. Everything it makes stays under one directory:
//! a temporary one removed at the end, or `--dir`, kept to look at.

use std::path::PathBuf;

use clap::Args;

use super::common::CliError;
use crate::ops::demo::make_repo;
use crate::report::next::{Hints, next_steps, program};
use crate::report::progress::Style;
use crate::util::out::{out, outln};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Three fake workers in a throwaway repository
  fanout demo
  # Keep the repository, to look at its branches and results afterwards
  fanout demo --dir fanout-demo";

/// `fanout demo`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct DemoArgs {
    /// Make the demo repository in DIR and keep it, to look at its branches, results
    /// and summary afterwards (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// No live progress bars.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Entry point of `fanout demo`.
pub fn demo(args: &DemoArgs) -> Result<i32, CliError> {
    // Without --dir, everything is made in a temporary directory that goes when the
    // demo ends (its guard's drop), failed or not: the demo leaves nothing behind.
    let (root, temp) = match &args.dir {
        Some(d) => (d.clone(), None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("fanout-demo-")
                .tempdir()
                .map_err(|e| CliError::Fatal(format!("a temporary directory for the demo: {e}")))?;
            (t.path().to_owned(), Some(t))
        }
    };
    let repo_dir = root.join("repo");
    if repo_dir.exists() {
        return Err(CliError::Usage(format!(
            "--dir {}: already holds a demo (remove it or pick another directory)",
            root.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Fatal(format!("cannot find the fanout executable: {e}")))?;
    make_repo(&repo_dir, &exe)
        .map_err(|e| CliError::Fatal(format!("making the demo repository: {e}")))?;
    outln!("fanout demo: repository {}", repo_dir.display());

    let (repo, report) = crate::ops::demo::run(&repo_dir, Style::detect(args.quiet))?;
    out!("\n{}", crate::report::table::table(&report.results));
    if temp.is_some() {
        outln!(
            "\nThe demo's repository is removed now; to keep one and look at its branches, results and summary:\n  {} demo --dir fanout-demo",
            program()
        );
        return Ok(report.exit_code);
    }
    let hints = Hints {
        dir: Some(&repo_dir),
        publish: false,
    };
    let run_dir = repo.run_dir(&report.run_id);
    out!("\n{}", next_steps(&report, &run_dir, hints));
    Ok(report.exit_code)
}
