//! `fanout status`: runs, their workers, worktree paths, git status and disk use.

use serde::Serialize;

use crate::cli::StatusArgs;
use crate::journal::Journal;
use crate::result::RunReport;
use crate::worktree::disk_usage;

use super::{CliError, Context, human_bytes, list_runs};

#[derive(Debug, Serialize)]
struct RunStatus {
    run_id: String,
    created_at: String,
    state: &'static str,
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
        let state = if super::cleanup::live_pid(&dir).is_some() {
            "running"
        } else if let Some(r) = &report {
            if r.interrupted {
                "interrupted"
            } else {
                "finished"
            }
        } else {
            "incomplete"
        };
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
                    status: report.as_ref().and_then(|r| {
                        r.results
                            .iter()
                            .find(|x| x.worker_id == e.worker_id)
                            .map(|x| x.status.to_string())
                    }),
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
        println!(
            "run {}  {}  {}  {} workers  {}",
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
