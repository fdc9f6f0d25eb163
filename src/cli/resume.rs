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

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::common::{CliError, Context, PublishArgs, list_runs};
use super::run::{Attempt, run_attempt};
use crate::plan::Plan;
use crate::repo::UserRepo;
use crate::report::progress::Style;
use crate::run::journal::{Journal, JournalHandle};
use crate::run::results::RunReport;
use crate::run::{resume, worktree};

/// `fanout resume`.
#[derive(Debug, Args, Clone)]
pub struct ResumeArgs {
    /// The run (default: the most recent run with workers that did not finish).
    #[arg(value_name = "RUN")]
    pub run: Option<String>,

    /// Stop processes of the earlier attempt that are still running (a killed fanout
    /// cannot stop its agents) instead of refusing to resume.
    #[arg(long)]
    pub stop_survivors: bool,

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
pub fn resume(ctx: &Context, args: &ResumeArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let Some((id, run_dir)) = pick(&repo, args.run.as_deref())? else {
        let running: Vec<String> = list_runs(&repo.runs_dir())
            .into_iter()
            .filter(|id| super::cleanup::live_pid(&repo.run_dir(id)).is_some())
            .collect();
        let msg = if running.is_empty() {
            "nothing to resume: no run in this repository was cut short".to_owned()
        } else {
            format!(
                "nothing to resume: no run in this repository was cut short (still running: {})",
                running.join(", ")
            )
        };
        if args.json {
            eprintln!("{msg}");
        } else {
            println!("{msg}");
        }
        return Ok(crate::exit::SUCCESS);
    };
    if let Some(pid) = super::cleanup::live_pid(&run_dir) {
        return Err(CliError::Usage(format!(
            "run {id} is still running (pid {pid}); resume it once it has stopped"
        )));
    }
    let plan = load_plan(&id, &run_dir)?;
    let mut journal = Journal::load(&run_dir)
        .map_err(|e| CliError::Fatal(format!("run {id}: journal.json: {e}")))?;
    let kept = resume::load_finished(&run_dir, &plan);
    let todo: Vec<u32> = plan
        .workers
        .iter()
        .map(|w| w.id)
        .filter(|w| !kept.contains_key(w))
        .collect();
    if todo.is_empty()
        && let Some(report) = read_report(&run_dir).filter(|r| !r.interrupted)
    {
        let msg = format!("run {id}: nothing to resume; every worker finished");
        if args.json {
            eprintln!("{msg}");
        } else {
            println!("{msg}");
        }
        print_report(args.json, &report, &run_dir, false);
        return Ok(crate::exit::SUCCESS);
    }
    // (With every worker finished but no final report — fanout died while writing it —
    // the attempt below runs nothing and writes the report.)

    let survivors = resume::survivors(&run_dir);
    if !survivors.is_empty() {
        let named: Vec<String> = survivors
            .iter()
            .map(|s| format!("process group {} ({})", s.pgid, s.program))
            .collect();
        if !args.stop_survivors {
            return Err(CliError::Usage(format!(
                "run {id}: processes of its earlier attempt are still running: {}; stop them (kill -- -PGID) or pass --stop-survivors",
                named.join(", ")
            )));
        }
        eprintln!("fanout: stopping {}", named.join(", "));
        let grace = Duration::from_secs_f64(plan.limits.kill_grace.max(0.0));
        let left = resume::stop_survivors(&survivors, grace);
        if !left.is_empty() {
            return Err(CliError::Fatal(format!(
                "run {id}: could not stop process group(s) {}",
                left.iter()
                    .map(|s| s.pgid.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }

    // Clear what the unfinished workers' earlier attempt left, so they start afresh.
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    for entry in journal
        .entries
        .iter_mut()
        .filter(|e| todo.contains(&e.worker_id))
    {
        let removed = worktree::remove(&git, entry, false);
        if !removed.kept.is_empty() {
            return Err(CliError::Fatal(format!(
                "run {id}: could not clear worker {}'s earlier attempt: {}; fix that and resume again",
                entry.worker_id,
                removed.kept.join("; ")
            )));
        }
        entry.branch_created = false;
        entry.worktree_created = false;
    }
    let number = resume::attempt(&run_dir) + 1;
    resume::set_attempt(&run_dir, number).map_err(|e| CliError::Fatal(format!("run {id}: {e}")))?;
    let worktree_root = journal.worktree_root.clone();
    let journal = JournalHandle::create(&run_dir, journal)
        .map_err(|e| CliError::Fatal(format!("run {id}: journal.json: {e}")))?;
    let list = |ids: &mut dyn Iterator<Item = u32>| {
        ids.map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")
    };
    eprintln!(
        "fanout: resuming run {id} (attempt {number}): running {}{}",
        list(&mut todo.iter().copied()),
        if kept.is_empty() {
            String::new()
        } else {
            format!("; keeping {}", list(&mut kept.keys().copied()))
        }
    );

    let (file, _) = ctx.load_config(&repo)?;
    let identity = file
        .commit
        .as_ref()
        .map(|c| (c.name.clone(), c.email.clone()))
        .unwrap_or_else(|| ("fanout".into(), "fanout@users.noreply.github.com".into()));
    let mut report = run_attempt(
        &repo,
        &identity,
        plan,
        Style::detect(args.quiet),
        Attempt {
            run_dir: run_dir.clone(),
            worktree_root,
            journal,
            number,
            kept,
        },
    )?;
    if args.integrate && !report.interrupted {
        super::run::integrate(&repo, &mut report, &identity)?;
    }
    let mut code = report.exit_code;
    if args.publish && !report.interrupted {
        let published = super::publish::publish_report(
            &repo,
            &file,
            &args.publish_args,
            &mut report,
            &run_dir.join("results.json"),
        )?;
        if published != crate::exit::SUCCESS && code == crate::exit::SUCCESS {
            code = crate::exit::SOME_FAILED;
        }
    }
    print_report(args.json, &report, &run_dir, args.publish);
    Ok(code)
}

/// The run to resume: `given` (which must exist), else the most recent run (by start
/// time) that is not running and has a worker that did not finish.
fn pick(repo: &UserRepo, given: Option<&str>) -> Result<Option<(String, PathBuf)>, CliError> {
    let runs_dir = repo.runs_dir();
    if let Some(id) = given {
        let dir = runs_dir.join(id);
        if !crate::plan::is_valid_run_id(id) || !dir.join("plan.json").is_file() {
            return Err(CliError::Usage(format!(
                "run {id}: no such run in this repository (see `fanout status`)"
            )));
        }
        return Ok(Some((id.to_owned(), dir)));
    }
    let mut candidates: Vec<(String, String, PathBuf)> = list_runs(&runs_dir)
        .into_iter()
        .filter_map(|id| {
            let dir = runs_dir.join(&id);
            let journal = Journal::load(&dir).ok()?;
            let plan = load_plan(&id, &dir).ok()?;
            let unfinished = resume::load_finished(&dir, &plan).len() < plan.workers.len()
                || read_report(&dir).is_none_or(|r| r.interrupted);
            (unfinished && super::cleanup::live_pid(&dir).is_none()).then_some((
                journal.created_at,
                id,
                dir,
            ))
        })
        .collect();
    candidates.sort();
    Ok(candidates.pop().map(|(_, id, dir)| (id, dir)))
}

fn load_plan(id: &str, run_dir: &std::path::Path) -> Result<Plan, CliError> {
    let bytes = std::fs::read(run_dir.join("plan.json"))
        .map_err(|e| CliError::Fatal(format!("run {id}: plan.json: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| CliError::Fatal(format!("run {id}: plan.json: {e}")))
}

fn read_report(run_dir: &std::path::Path) -> Option<RunReport> {
    serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).ok()?).ok()
}

fn print_report(json: bool, report: &RunReport, run_dir: &std::path::Path, prs: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).expect("report serializes")
        );
        return;
    }
    print!("\n{}", crate::report::table::table(&report.results));
    println!("\nresults: {}", run_dir.join("results.json").display());
    if prs {
        print!("\n{}", super::publish::pr_table(report));
    }
}
