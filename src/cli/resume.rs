//! `fanout resume [RUN]`: finish a run that a crash (fanout killed: no `results.json`,
//! only the journal) or a signal (`results.json` with interrupted workers) cut short.
//!
//! The workers that finished are kept as they are; each one that did not (see
//! [`crate::run::resume`]) has what its earlier attempt left removed — its worktree and
//! branch, only where the journal says fanout made them — and runs again from the same
//! plan: same run id, branch names and base commit. The report (`results.json`,
//! `summary.md`, GitHub outputs) then holds every worker once, in id order; a worker
//! run again carries `attempt` > 1.
//!
//! A SIGKILLed fanout cannot stop its agents. `resume` refuses while a process group of
//! the earlier attempt is still alive (naming it), unless `--stop-survivors` is given:
//! then it stops those groups first (SIGTERM, `kill_grace`, SIGKILL).

use std::path::Path;

use clap::Args;

use super::common::{CliError, Context, PublishArgs};
use crate::ops::go::{Job, Request, go};
use crate::report::progress::Style;
use crate::report::table::{pr_table, table};
use crate::run::results::RunReport;
use crate::secret::Secrets;
use crate::store::resumable::{Found, Stop, prepare};
use crate::util::out::{errln, out, outln};

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # Finish the newest run that was cut short
  fanout resume
  # A given run, stopping agents a crashed fanout left behind
  fanout resume 20260101-120000-3fa2c1 --stop-survivors";

/// `fanout resume`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct ResumeArgs {
    /// The run (default: the most recent run with workers that did not finish).
    #[arg(value_name = "RUN")]
    pub run: Option<String>,

    /// Stop processes of the earlier attempt that are still running (a killed fanout
    /// cannot stop its agents) instead of refusing to resume.
    #[arg(long)]
    pub stop_survivors: bool,

    /// With --stop-survivors: also stop the earlier attempt's processes fanout cannot
    /// prove it started (without it they are listed and nothing is stopped, unless you
    /// agree at a terminal).
    #[arg(long, requires = "stop_survivors")]
    pub yes: bool,

    /// No live progress bars: plain log lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Afterwards, push successful branches and open or update their pull requests.
    #[arg(long)]
    pub publish: bool,

    /// Also build the integration branch (as `fanout run --integrate`).
    #[arg(long)]
    pub integrate: bool,

    /// Publishing flags (with --publish).
    #[command(flatten, next_help_heading = "Publishing (with --publish)")]
    pub publish_args: PublishArgs,
}

/// Entry point of `fanout resume`.
pub fn resume(ctx: &Context, args: &ResumeArgs, secrets: Secrets) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let say = |msg: &str| {
        if args.json {
            errln!("{msg}");
        } else {
            outln!("{msg}");
        }
    };
    let stop = match (args.stop_survivors, args.yes) {
        (false, _) => Stop::No,
        (true, false) => Stop::Proven,
        (true, true) => Stop::All,
    };
    let ready = match prepare(&repo, args.run.as_deref(), stop)? {
        Found::Nothing { running } if running.is_empty() => {
            say("nothing to resume: no run in this repository was cut short");
            return Ok(crate::exit::SUCCESS);
        }
        Found::Nothing { running } => {
            say(&format!(
                "nothing to resume: no run in this repository was cut short (still running: {})",
                running.join(", ")
            ));
            return Ok(crate::exit::SUCCESS);
        }
        Found::Finished {
            id,
            run_dir,
            report,
        } => {
            say(&format!(
                "run {id}: nothing to resume; every worker finished"
            ));
            print_report(args.json, &report, &run_dir, false);
            return Ok(crate::exit::SUCCESS);
        }
        Found::Ready(ready) => ready,
    };
    super::common::dry_run_needs_publish(&args.publish_args, args.publish)?;
    let (file, _) = ctx.load_config(&repo)?;
    let outcome = go(Request {
        repo: &repo,
        file: &file,
        job: Job::Resume(ready),
        publish: args.publish.then(|| args.publish_args.flags(&secrets)),
        integrate: args.integrate,
        style: Style::detect(args.quiet),
        secrets,
    })?;
    if let Some(report) = &outcome.report {
        let prs = args.publish && !args.publish_args.dry_run;
        print_report(args.json, report, &outcome.dir, prs);
    }
    Ok(outcome.code)
}

fn print_report(json: bool, report: &RunReport, run_dir: &Path, prs: bool) {
    if json {
        crate::util::out::stdout_json(report);
        return;
    }
    out!("\n{}", table(&report.results));
    outln!("\nresults: {}", run_dir.join("results.json").display());
    if prs {
        out!("\n{}", pr_table(report));
    }
}
