//! `fanout run`: plan → worktrees → supervised agents → harvest → report.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use clap::Args;

use super::common::{CliError, Context, PlanArgs, PublishArgs};
use crate::model::{Totals, WorkerResult};
use crate::plan::Plan;
use crate::plan::settings::Settings;
use crate::repo::UserRepo;
use crate::report::progress::{Style, reporter};
use crate::report::summary::render_summary;
use crate::report::table::table;
use crate::run::event::Event;
use crate::run::executor::Executor;
use crate::run::journal::{JOURNAL_SCHEMA_VERSION, Journal, JournalEntry, JournalHandle};
use crate::run::results::{REPORT_SCHEMA_VERSION, RunReport};
use crate::run::signals::Dispatcher;
use crate::run::worktree;
use crate::util::{rfc3339, write_atomic};
use crate::{exit, report};

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
    pub publish_args: PublishArgs,
}

/// Marker file holding the pid of the fanout process running a run.
pub const PID_FILE: &str = "fanout.pid";

/// Entry point of `fanout run`.
pub fn run(ctx: &Context, args: &RunArgs) -> Result<i32, CliError> {
    let (repo, settings) = ctx.settings(&args.plan)?;
    let run_id = super::common::run_id(args.plan.run_id.as_deref())?;
    let base = repo.resolve_base(&settings.base)?;
    let plan = crate::plan::assign::build(&settings, base, &run_id);
    let style = Style::detect(args.quiet);
    let opts = ExecOptions::from_settings(&settings);
    let mut report = execute_plan(&repo, &opts, plan, style)?;
    let run_dir = repo.run_dir(&report.run_id);
    if args.integrate && !report.interrupted {
        integrate(&repo, &mut report, &settings.commit_identity)?;
    }
    let mut code = report.exit_code;
    if args.publish && !report.interrupted {
        let (file, _) = ctx.load_config(&repo)?;
        let path = run_dir.join("results.json");
        let published =
            super::publish::publish_report(&repo, &file, &args.publish_args, &mut report, &path)?;
        if published != crate::exit::SUCCESS && code == crate::exit::SUCCESS {
            code = crate::exit::SOME_FAILED;
        }
    }
    if args.plan.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print!("\n{}", table(&report.results));
        println!("\nresults: {}", run_dir.join("results.json").display());
        if args.publish {
            print!("\n{}", super::publish::pr_table(&report));
        }
    }
    Ok(code)
}

/// Build the integration branch into `report` and rewrite its results.json and
/// summary.md. Used by `run --integrate` and `aggregate --integrate`.
pub fn integrate(
    repo: &UserRepo,
    report: &mut RunReport,
    identity: &(String, String),
) -> Result<(), CliError> {
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    match crate::fanin::conflicts::integrate_report(&git, report, (&identity.0, &identity.1)) {
        Ok(()) => {}
        Err(crate::fanin::conflicts::IntegrateError::Empty) => {
            eprintln!("fanout: --integrate: no successful worker to integrate");
            return Ok(());
        }
        Err(e) => return Err(CliError::Fatal(format!("--integrate: {e}"))),
    }
    if let Some(it) = &report.integration {
        let mut journal = Journal::load(&repo.run_dir(&report.run_id))
            .map_err(|e| CliError::Fatal(format!("journal: {e}")))?;
        if !journal.extra_branches.contains(&it.branch) {
            journal.extra_branches.push(it.branch.clone());
            journal
                .save(&repo.run_dir(&report.run_id))
                .map_err(|e| CliError::Fatal(format!("journal: {e}")))?;
        }
        eprintln!(
            "fanout: integration branch {} merges {} worker(s); {} left out",
            it.branch,
            it.included.len(),
            it.left_out.len()
        );
    }
    let run_dir = repo.run_dir(&report.run_id);
    let mut json = serde_json::to_vec_pretty(&*report).expect("serializes");
    json.push(b'\n');
    write_atomic(&run_dir.join("results.json"), &json)
        .map_err(|e| CliError::Fatal(format!("results.json: {e}")))?;
    let md = render_summary(report, None);
    write_atomic(&run_dir.join("summary.md"), md.as_bytes())
        .map_err(|e| CliError::Fatal(format!("summary.md: {e}")))?;
    Ok(())
}

/// What running a plan needs besides the plan.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Worktree root override.
    pub worktree_dir: Option<std::path::PathBuf>,
    /// Commit identity.
    pub identity: (String, String),
    /// Name of the run directory (default: the run id).
    pub run_dir_name: Option<String>,
}

impl ExecOptions {
    /// From validated settings.
    pub fn from_settings(s: &Settings) -> ExecOptions {
        ExecOptions {
            worktree_dir: s.worktree_dir.clone(),
            identity: s.commit_identity.clone(),
            run_dir_name: None,
        }
    }
}

/// Start a new run of `plan` in `repo` (run directory, journal, plan.json), run it
/// and write its report. Used by `run`, `worker` and `demo`.
pub fn execute_plan(
    repo: &UserRepo,
    opts: &ExecOptions,
    plan: Plan,
    style: Style,
) -> Result<RunReport, CliError> {
    execute_plan_keeping(repo, opts, plan, style, BTreeMap::new())
}

/// [`execute_plan`], with results of some of the plan's workers already known (not
/// run; they count for the workers that depend on them). Used by `fanout worker` for a
/// worker whose dependencies ran in earlier matrix jobs.
pub fn execute_plan_keeping(
    repo: &UserRepo,
    opts: &ExecOptions,
    plan: Plan,
    style: Style,
    kept: BTreeMap<u32, WorkerResult>,
) -> Result<RunReport, CliError> {
    let started_at = SystemTime::now();
    let run_dir = repo.run_dir(opts.run_dir_name.as_deref().unwrap_or(&plan.run_id));
    if run_dir.exists() {
        return Err(CliError::Usage(format!(
            "run {} already exists in {}",
            plan.run_id,
            run_dir.display()
        )));
    }
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", run_dir.display())))?;
    let fatal = |what: &str, e: std::io::Error| CliError::Fatal(format!("{what}: {e}"));

    match repo.uncommitted_changes() {
        Ok(0) => {}
        Ok(n) => eprintln!(
            "fanout: warning: {} has {n} uncommitted change{}; they are not included (workers start from {})",
            repo.workdir.display(),
            if n == 1 { "" } else { "s" },
            crate::util::short(&plan.base.commit)
        ),
        Err(e) => eprintln!("fanout: warning: could not read the checkout's status: {e}"),
    }

    let worktree_root = repo.worktree_root(opts.worktree_dir.as_deref());
    if worktree_root.starts_with(&repo.workdir) {
        eprintln!(
            "fanout: warning: worktrees go inside the checkout ({}); they may show up as untracked files",
            worktree_root.display()
        );
    }
    let journal = Journal {
        schema_version: JOURNAL_SCHEMA_VERSION,
        extra_branches: Vec::new(),
        run_id: plan.run_id.clone(),
        created_at: rfc3339(started_at),
        repo_workdir: repo.workdir.clone(),
        worktree_root: worktree_root.clone(),
        entries: plan
            .workers
            .iter()
            .map(|w| JournalEntry {
                worker_id: w.id,
                branch: w.branch.clone(),
                base_commit: plan.base.commit.clone(),
                worktree_name: worktree::worktree_name(&plan.run_id, w.id),
                worktree_path: worktree::worktree_path(&worktree_root, &plan.run_id, w.id),
                branch_created: false,
                worktree_created: false,
            })
            .collect(),
    };
    let journal = JournalHandle::create(&run_dir, journal).map_err(|e| fatal("journal", e))?;
    let mut plan_json = serde_json::to_vec_pretty(&plan).expect("plan serializes");
    plan_json.push(b'\n');
    write_atomic(&run_dir.join("plan.json"), &plan_json).map_err(|e| fatal("plan.json", e))?;
    run_attempt(
        repo,
        &opts.identity,
        plan,
        style,
        Attempt {
            run_dir,
            worktree_root,
            journal,
            number: 1,
            kept,
        },
    )
}

/// One attempt at a plan: a fresh run (attempt 1), or `fanout resume` of a run that
/// did not finish, keeping the workers that did.
#[derive(Debug)]
pub struct Attempt {
    /// The run directory (it holds the journal and plan.json already).
    pub run_dir: PathBuf,
    /// Where the run's worktrees go.
    pub worktree_root: PathBuf,
    /// The run's journal.
    pub journal: JournalHandle,
    /// 1 for `fanout run`, one more per resume.
    pub number: u32,
    /// Results of workers that finished in an earlier attempt: not run again.
    pub kept: BTreeMap<u32, WorkerResult>,
}

/// Run every worker of `plan` not in `attempt.kept`, recording each result as soon as
/// it is final (`results/w<N>.json`, for `fanout resume`), and write the report of
/// all of them, kept ones included, in id order.
pub fn run_attempt(
    repo: &UserRepo,
    identity: &(String, String),
    plan: Plan,
    style: Style,
    attempt: Attempt,
) -> Result<RunReport, CliError> {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let Attempt {
        run_dir,
        worktree_root,
        journal,
        number,
        kept,
    } = attempt;
    let fatal = |what: &str, e: std::io::Error| CliError::Fatal(format!("{what}: {e}"));
    let pid_file = run_dir.join(PID_FILE);
    let _ = std::fs::write(&pid_file, std::process::id().to_string());

    let plan = Arc::new(plan);
    let executor = Arc::new(Executor {
        plan: Arc::clone(&plan),
        repo_dir: repo.workdir.clone(),
        run_dir: run_dir.clone(),
        worktree_root,
        journal: Arc::new(journal),
        identity: identity.clone(),
        base_env: std::env::vars_os().collect(),
        kept: kept.clone(),
        attempt: number,
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| fatal("tokio runtime", e))?;
    let (results, interrupted) = runtime
        .block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
            let dispatcher = Dispatcher::install(tx.clone())?;
            let mut rep = reporter(style, &plan);
            for r in kept.values() {
                let _ = tx.send(Event::WorkerFinished(Box::new(r.clone())));
            }
            let records = run_dir.clone();
            let shown = tokio::spawn(async move {
                while let Some(ev) = rx.recv().await {
                    if let Event::WorkerFinished(r) = &ev
                        && r.attempt == number
                    {
                        let _ = crate::run::resume::record(&records, r);
                    }
                    rep.event(&ev);
                }
                rep.finish();
            });
            let results = executor.run(tx, dispatcher.subscribe()).await;
            let interrupted = dispatcher.stopped();
            drop(dispatcher);
            let _ = shown.await;
            Ok::<_, std::io::Error>((results, interrupted))
        })
        .map_err(|e| fatal("signal handlers", e))?;

    let mut results = results;
    let conflicts = crate::fanin::select::fan_in(&plan, &mut results, &repo.workdir);
    let totals = Totals::of(&results);
    let exit_code = exit::for_run(&totals, interrupted);
    let report = RunReport {
        schema_version: REPORT_SCHEMA_VERSION,
        run_id: plan.run_id.clone(),
        started_at: rfc3339(started_at),
        finished_at: rfc3339(SystemTime::now()),
        duration: clock.elapsed().as_secs_f64(),
        interrupted,
        plan: (*plan).clone(),
        results,
        totals,
        exit_code,
        conflicts,
        integration: None,
    };
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from);
    let paths = report::summary::write(&report, &run_dir, step_summary.as_deref())
        .map_err(|e| fatal("writing the report", e))?;
    if let Some(out) = crate::actions::output_file() {
        crate::actions::write_run_outputs(&out, &report, &paths)
            .map_err(|e| fatal("$GITHUB_OUTPUT", e))?;
    }
    let _ = std::fs::remove_file(&pid_file);
    Ok(report)
}
