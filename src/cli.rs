//! Raw command-line flags (clap). These are turned into validated
//! [`crate::settings::Settings`] by the commands; nothing here is trusted yet.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::settings::PlanFlags;

/// fanout: fan coding-agent tasks out to parallel git worktrees, fan results back in.
#[derive(Debug, Parser)]
#[command(name = "fanout", version, about, long_about = None)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Run as if started in DIR.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Config file (default: fanout.yml at the repository root, if present).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Exit codes, shown in `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    every worker succeeded
  1    some workers succeeded, some did not
  2    usage or configuration error (nothing was run)
  3    no worker succeeded
  4    fanout itself failed (git, I/O)
  130  interrupted (SIGINT/SIGTERM); results were still written";

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, run and harvest a batch of agent workers in parallel worktrees.
    Run(Box<RunArgs>),
    /// Print the plan without running anything (and, for matrix mode, write it out).
    Plan(PlanCommand),
    /// Matrix mode: run one worker of a plan in this checkout, for one Actions job.
    Worker(crate::commands::worker::WorkerArgs),
    /// Matrix mode: collect the workers' results and branches, report, publish.
    Aggregate(crate::commands::aggregate::AggregateArgs),
    /// Push successful branches and open or update one pull request each.
    Publish(crate::commands::publish::PublishCommand),
    /// Print the JSON Schema of fanout.yml.
    Schema,
    /// Write a workflow template into .github/workflows/ (or check it for drift).
    Init(crate::commands::init::InitArgs),
    /// Remove the worktrees and branches fanout created.
    Cleanup(CleanupArgs),
    /// Finish a run cut short (crash, Ctrl-C): run again only the workers that did not finish.
    Resume(crate::commands::resume::ResumeArgs),
    /// List runs, workers, worktrees, their git status and disk use.
    Status(StatusArgs),
    /// Make a throwaway repository and run 3 workers of the bundled fake agent in it.
    Demo(DemoArgs),
    /// The bundled fake agent (for the demo, tests and benchmarks).
    #[command(hide = true)]
    FakeAgent(crate::commands::fake_agent::FakeAgentArgs),
}

/// Flags that shape the plan (shared by `run` and `plan`).
#[derive(Debug, Args, Clone, Default)]
pub struct PlanArgs {
    /// The task (more with --task).
    #[arg(value_name = "TASK")]
    pub task: Option<String>,

    /// A task; repeat for more. Replaces the config file's tasks.
    #[arg(long = "task", short = 't', value_name = "TASK")]
    pub tasks: Vec<String>,

    /// Number of workers, 1–10; with more tasks than workers, the number running at once.
    #[arg(long, short = 'w', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub workers: Option<u32>,

    /// Models, comma-separated, handed to workers in order ("a,b" or "a, b").
    #[arg(long, value_name = "A,B,…")]
    pub models: Vec<String>,

    /// Agent: a name under `agents:` in the config, `architect`, or an architect agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,

    /// Most agent steps per worker.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,

    /// Most USD per worker.
    #[arg(long, value_name = "USD")]
    pub budget_per_worker: Option<f64>,

    /// Wall-clock limit per worker, in seconds.
    #[arg(long, value_name = "SECS")]
    pub timeout_per_worker: Option<f64>,

    /// Stop a worker whose agent printed nothing for this many seconds.
    #[arg(long, value_name = "SECS")]
    pub inactivity_timeout: Option<f64>,

    /// Most USD for the whole run: no new worker starts once known costs reach it.
    #[arg(long, value_name = "USD")]
    pub budget_total: Option<f64>,

    /// One winner per task among workers that share it (`select: best`).
    #[arg(long)]
    pub select_best: bool,

    /// Commit or branch the workers start from (default HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,

    /// Run every task on every model.
    #[arg(long)]
    pub cross: bool,

    /// Directory for worktrees (default: outside the checkout, per user).
    #[arg(long, value_name = "DIR")]
    pub worktree_dir: Option<PathBuf>,

    /// Prefix of the branches fanout creates (default `fanout`).
    #[arg(long, value_name = "PREFIX")]
    pub branch_prefix: Option<String>,

    /// Use this run id instead of a fresh one (letters, digits, '-', '_').
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The plan-shaping flags as library settings input.
    pub fn flags(&self) -> PlanFlags {
        PlanFlags {
            tasks: self.task.iter().chain(self.tasks.iter()).cloned().collect(),
            workers: self.workers,
            models: self.models.clone(),
            agent: self.agent.clone(),
            max_steps: self.max_steps,
            budget_per_worker: self.budget_per_worker,
            timeout_per_worker: self.timeout_per_worker,
            inactivity_timeout: self.inactivity_timeout,
            budget_total: self.budget_total,
            select_best: self.select_best,
            base: self.base.clone(),
            cross: self.cross,
            worktree_dir: self.worktree_dir.clone(),
            branch_prefix: self.branch_prefix.clone(),
            allow_empty: false,
        }
    }
}

/// `fanout plan`.
#[derive(Debug, Args, Clone)]
pub struct PlanCommand {
    /// Plan flags.
    #[command(flatten)]
    pub plan: PlanArgs,

    /// Write the plan as JSON to this file (for `fanout worker` and `fanout aggregate`).
    #[arg(long, value_name = "PATH")]
    pub plan_file: Option<PathBuf>,

    /// Write the matrix outputs (`matrix`, `count`, chunks) to `$GITHUB_OUTPUT`
    /// (default: whenever `$GITHUB_OUTPUT` is set).
    #[arg(long)]
    pub github_output: bool,

    /// No task is not an error: the plan is empty (count 0), for scheduled workflows.
    #[arg(long)]
    pub allow_empty: bool,
}

/// `fanout run`.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Plan flags.
    #[command(flatten)]
    pub plan: PlanArgs,

    /// No live progress bars: plain log lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// After the run, push successful branches and open or update their pull requests.
    #[arg(long)]
    pub publish: bool,

    /// Also build one integration branch merging every success that merges cleanly
    /// (in worker-id order), and with --publish open its pull request.
    #[arg(long)]
    pub integrate: bool,

    /// Publishing flags (with --publish).
    #[command(flatten, next_help_heading = "Publishing (with --publish)")]
    pub publish_args: crate::commands::publish::PublishArgs,
}

/// `fanout cleanup`.
#[derive(Debug, Args, Clone)]
pub struct CleanupArgs {
    /// The run to clean up (repeatable).
    #[arg(
        long = "run",
        value_name = "ID",
        required_unless_present_any = ["all", "older_than", "keep"]
    )]
    pub runs: Vec<String>,

    /// Every run fanout has made in this repository.
    #[arg(long, conflicts_with_all = ["runs", "older_than", "keep"])]
    pub all: bool,

    /// Only runs started longer ago than this (`90s`, `30m`, `6h`, `2d`).
    #[arg(long, value_name = "AGE", value_parser = parse_age, conflicts_with = "runs")]
    pub older_than: Option<std::time::Duration>,

    /// Keep the N most recent runs; sweep the older ones (with --older-than: only
    /// those also older than AGE).
    #[arg(long, value_name = "N", conflicts_with = "runs")]
    pub keep: Option<usize>,

    /// Keep the branches (and the run's records); remove only worktrees.
    #[arg(long)]
    pub keep_branches: bool,
}

/// An age like `90s`, `30m`, `6h`, `2d` (a bare number is seconds).
pub fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected an age like 90s, 30m, 6h or 2d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        "w" => n * 7.0 * 86400.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use s, m, h, d or w)"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?}: expected a positive age"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// `fanout status`.
#[derive(Debug, Args, Clone)]
pub struct StatusArgs {
    /// Only this run.
    #[arg(long = "run", value_name = "ID")]
    pub run: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fanout demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Where to make the demo repository (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// No live progress bars.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}
