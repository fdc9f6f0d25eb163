//! `fanout worker`: matrix mode's per-job step. Runs exactly one worker of a plan in
//! this checkout, with the same supervision and harvest as local mode, and writes
//! `fanout-result-<id>/` (result.json, the branch as a git bundle, the agent's log)
//! for `actions/upload-artifact`. The job needs no write token: nothing is pushed here.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context};
use crate::ops::go::{Job, Request, go};
use crate::ops::matrix::WorkerJob;
use crate::report::progress::Style;
use crate::secret::Secrets;
use crate::util::out::outln;

/// `--help`'s examples.
const EXAMPLES: &str = "\
Examples:
  # One matrix job: run worker 2 of the plan, results under results/
  fanout worker --plan plan.json --id 2 --out results
  # A worker whose task depends on others: start from their branches
  fanout worker --plan plan.json --id 5 --out results --deps-from artifacts";

/// `fanout worker`.
#[derive(Debug, Args, Clone)]
#[command(after_help = EXAMPLES)]
pub struct WorkerArgs {
    /// The plan file written by `fanout plan --plan-file`.
    #[arg(long, value_name = "PATH")]
    pub plan: PathBuf,
    /// The plan file's SHA-256 as the plan job printed it (`plan-sha256`): a plan file
    /// with any other digest is refused (exit 2).
    #[arg(long, value_name = "HEX")]
    pub plan_sha256: Option<String>,
    /// The worker to run.
    #[arg(long, value_name = "N")]
    pub id: u32,
    /// Directory for `fanout-result-<id>/`.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No live progress bars.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Where the `fanout-result-*` artifacts of earlier waves are (needed by a worker
    /// with task dependencies: it starts from their branches).
    #[arg(long, value_name = "DIR")]
    pub deps_from: Option<PathBuf>,
    /// Confine the agent, setup commands and checks: auto, required, off (default:
    /// the plan's).
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<crate::sandbox::Mode>,
}

/// Entry point of `fanout worker`.
pub fn worker(ctx: &Context, args: &WorkerArgs, secrets: Secrets) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, _) = ctx.load_config(&repo)?;
    let mut plan = ctx.plan_file_checked(&args.plan, args.plan_sha256.as_deref())?;
    if let Some(mode) = args.sandbox {
        plan.sandbox = mode;
    }
    let job = WorkerJob {
        id: args.id,
        out: ctx.path(&args.out),
        deps_from: args.deps_from.as_deref().map(|d| ctx.path(d)),
        style: Style::detect(args.quiet),
        agent_tokens: Vec::new(),
    };
    let outcome = go(Request {
        repo: &repo,
        file: &file,
        job: Job::Worker { plan, job },
        publish: None,
        integrate: false,
        style: Style::detect(args.quiet),
        secrets,
    })?;
    outln!("{}", outcome.dir.display());
    Ok(outcome.code)
}
