//! `fanout status`: runs, their workers, worktree paths, git status and disk use.
//!
//! A run is `running` (its fanout is alive), `finished`, `interrupted` (a signal
//! stopped it; `results.json` was written) or `crashed` (its fanout died without
//! writing the report); the last two can be finished with `fanout resume`.

use serde::Serialize;

use clap::Args;

use super::common::{CliError, Context, list_runs};
use crate::model::WorkerResult;
use crate::run::journal::Journal;
use crate::run::results::RunReport;
use crate::run::worktree::disk_usage;
use crate::util::human_bytes;

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

#[derive(Debug, Serialize)]
struct RunStatus {
    run_id: String,
    created_at: String,
    state: &'static str,
    /// Workers `fanout resume` would run again.
    unfinished: usize,
    workers: Vec<WorkerStatus>,
    disk_bytes: u64,
}

#[derive(Debug, Serialize)]
struct WorkerStatus {
    worker_id: u32,
    branch: String,
    branch_exists: bool,
    status: Option<String>,
    worktree_path: String,
    worktree_exists: bool,
    /// Uncommitted changes in the worktree (`None` when there is none).
    uncommitted: Option<usize>,
    disk_bytes: u64,
}

/// Entry point of `fanout status`.
pub fn status(ctx: &Context, args: &StatusArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let runs_dir = repo.runs_dir();
    let mut ids = list_runs(&runs_dir);
    if let Some(only) = &args.run {
        if !ids.contains(only) {
            return Err(CliError::Usage(format!("--run {only}: no such run")));
        }
        ids = vec![only.clone()];
    }
    let git = repo
        .open()
        .map_err(|e| CliError::Fatal(format!("git: {}", e.message())))?;
    let mut runs = Vec::new();
    for id in ids {
        let dir = runs_dir.join(&id);
        let Ok(journal) = Journal::load(&dir) else {
            continue;
        };
        let report: Option<RunReport> = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        // fanout removes its pid file when it is done: one left behind by a dead
        // process means it died mid-run (whatever an earlier attempt reported).
        let state = if super::cleanup::live_pid(&dir).is_some() {
            "running"
        } else if dir.join(super::run::PID_FILE).exists() {
            "crashed"
        } else {
            match &report {
                Some(r) if r.interrupted => "interrupted",
                Some(_) => "finished",
                None => "crashed",
            }
        };
        let plan: Option<crate::plan::Plan> = std::fs::read(dir.join("plan.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let finished = plan
            .as_ref()
            .map(|p| crate::run::resume::load_finished(&dir, p))
            .unwrap_or_default();
        let unfinished = plan
            .as_ref()
            .map_or(0, |p| p.workers.len() - finished.len());
        let workers: Vec<WorkerStatus> = journal
            .entries
            .iter()
            .map(|e| {
                let exists = e.worktree_path.is_dir();
                let uncommitted = exists
                    .then(|| git2::Repository::open(&e.worktree_path).ok())
                    .flatten()
                    .and_then(|r| {
                        let mut o = git2::StatusOptions::new();
                        o.include_untracked(true);
                        r.statuses(Some(&mut o)).ok().map(|s| s.len())
                    });
                WorkerStatus {
                    worker_id: e.worker_id,
                    branch: e.branch.clone(),
                    branch_exists: git.find_branch(&e.branch, git2::BranchType::Local).is_ok(),
                    // A worker's own record is the latest word on it; else the report's.
                    status: std::fs::read(crate::run::resume::record_path(&dir, e.worker_id))
                        .ok()
                        .and_then(|b| serde_json::from_slice::<WorkerResult>(&b).ok())
                        .or_else(|| {
                            report
                                .as_ref()?
                                .results
                                .iter()
                                .find(|x| x.worker_id == e.worker_id)
                                .cloned()
                        })
                        .map(|x| x.status.to_string()),
                    worktree_path: e.worktree_path.display().to_string(),
                    worktree_exists: exists,
                    uncommitted,
                    disk_bytes: if exists {
                        disk_usage(&e.worktree_path)
                    } else {
                        0
                    },
                }
            })
            .collect();
        runs.push(RunStatus {
            run_id: id,
            created_at: journal.created_at.clone(),
            state,
            unfinished: if state == "running" { 0 } else { unfinished },
            disk_bytes: workers.iter().map(|w| w.disk_bytes).sum(),
            workers,
        });
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&runs).expect("serializes")
        );
        return Ok(0);
    }
    if runs.is_empty() {
        println!("no fanout runs in {}", repo.workdir.display());
        return Ok(0);
    }
    for r in &runs {
        let resumable = if r.unfinished > 0 {
            format!(
                "  ({} unfinished: fanout resume {})",
                r.unfinished, r.run_id
            )
        } else {
            String::new()
        };
        println!(
            "run {}  {}  {}  {} workers  {}{resumable}",
            r.run_id,
            r.created_at,
            r.state,
            r.workers.len(),
            human_bytes(r.disk_bytes)
        );
        for w in &r.workers {
            let git_state = match (w.worktree_exists, w.uncommitted) {
                (false, _) => "no worktree".to_owned(),
                (true, Some(0)) => "clean".to_owned(),
                (true, Some(n)) => format!("{n} uncommitted"),
                (true, None) => "unreadable".to_owned(),
            };
            println!(
                "  #{:<3} {:<8} {:<12} {:>10}  {}{}\n        {}",
                w.worker_id,
                w.status.as_deref().unwrap_or("-"),
                git_state,
                human_bytes(w.disk_bytes),
                w.branch,
                if w.branch_exists { "" } else { " (deleted)" },
                w.worktree_path
            );
        }
    }
    Ok(0)
}
