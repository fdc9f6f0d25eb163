//! `fanout status`'s view of the runs in a repository: each run's state, its workers
//! (status, branch, worktree, uncommitted changes) and disk use.
//!
//! A run is `running` (its fanout is alive), `finished`, `interrupted` (a signal
//! stopped it; `results.json` was written) or `crashed` (its fanout died without
//! writing the report); the last two can be finished with `fanout resume`.

use std::path::Path;

use serde::Serialize;

use super::runs::{live_pid, read_plan};
use crate::run::attempt::PID_FILE;
use crate::run::journal::{Journal, JournalEntry};
use crate::run::results::RunReport;
use crate::run::results::read_report;
use crate::run::worktree::disk_usage;

/// One run.
#[derive(Debug, Serialize)]
pub struct RunStatus {
    /// The run id.
    pub run_id: String,
    /// When it started.
    pub created_at: String,
    /// `running`, `finished`, `interrupted` or `crashed`.
    pub state: &'static str,
    /// Workers `fanout resume` would run again.
    pub unfinished: usize,
    /// Its workers.
    pub workers: Vec<WorkerStatus>,
    /// Disk used by its worktrees.
    pub disk_bytes: u64,
}

/// One worker of a run.
#[derive(Debug, Serialize)]
pub struct WorkerStatus {
    /// The worker id.
    pub worker_id: u32,
    /// Its branch.
    pub branch: String,
    /// Whether the branch exists.
    pub branch_exists: bool,
    /// Its status, when it has one; during a run `queued` (not started yet),
    /// `checkout` (its worktree is being made) or `running` until it has one.
    pub status: Option<String>,
    /// Its worktree.
    pub worktree_path: String,
    /// Whether the worktree exists.
    pub worktree_exists: bool,
    /// Uncommitted changes in the worktree (`None` when there is none).
    pub uncommitted: Option<usize>,
    /// Disk used by the worktree.
    pub disk_bytes: u64,
}

/// The status of each run in `ids` (those without a readable journal are left out).
pub fn runs(git: &git2::Repository, runs_dir: &Path, ids: Vec<String>) -> Vec<RunStatus> {
    let mut out = Vec::new();
    for id in ids {
        let dir = runs_dir.join(&id);
        let Ok(journal) = Journal::load(&dir) else {
            continue;
        };
        let report = read_report(&dir);
        let state = state(&dir, report.as_ref());
        let unfinished = read_plan(&dir).map_or(0, |p| {
            p.workers.len() - crate::run::resume::load_finished(&dir, &p).len()
        });
        let workers: Vec<WorkerStatus> = journal
            .entries
            .iter()
            .map(|e| worker(git, (&id, &dir), e, report.as_ref(), state))
            .map(|w| live(w, &journal, state))
            .collect();
        out.push(RunStatus {
            run_id: id,
            created_at: journal.created_at.clone(),
            state,
            unfinished: if state == "running" { 0 } else { unfinished },
            disk_bytes: workers.iter().map(|w| w.disk_bytes).sum(),
            workers,
        });
    }
    out
}

/// Whether worker `e`'s worktree is tied to the repository as fanout made it, so that
/// it may be opened ([`crate::run::links`]): put back first when the run is over (and said
/// on stderr); while it runs, only compared, silently (a worktree may be being made;
/// harvest puts them back and says so).
fn linked(git: &git2::Repository, id: &str, e: &JournalEntry, state: &str) -> bool {
    let over = state != "running";
    let links = crate::run::links::secure(git.commondir(), id, e, over);
    if let Some(note) = crate::run::links::said(id, e, &links).filter(|_| over) {
        crate::util::out::errln!("fanout: note: {note}");
    }
    match links {
        crate::run::links::Links::Intact => true,
        crate::run::links::Links::Changed(_) => state != "running",
        crate::run::links::Links::Unchecked(_)
        | crate::run::links::Links::Incomplete
        | crate::run::links::Links::Orphaned => false,
    }
}

/// During a run, a worker without a result yet is `queued` (nothing made for it
/// yet), `checkout` (its worktree is being made) or `running`.
fn live(mut w: WorkerStatus, journal: &Journal, state: &str) -> WorkerStatus {
    if state == "running" && w.status.is_none() {
        let entry = journal.entries.iter().find(|e| e.worker_id == w.worker_id);
        let now = match entry {
            Some(e) if e.worktree_incomplete => "checkout",
            Some(e) if e.worktree_created || e.branch_created => "running",
            _ => "queued",
        };
        w.status = Some(now.to_owned());
    }
    w
}

/// fanout removes its pid file when it is done: one left behind by a dead process
/// means it died mid-run (whatever an earlier attempt reported).
fn state(dir: &Path, report: Option<&RunReport>) -> &'static str {
    if live_pid(dir).is_some() {
        "running"
    } else if dir.join(PID_FILE).exists() {
        "crashed"
    } else {
        match report {
            Some(r) if r.interrupted => crate::model::Cause::Interrupted.words(),
            Some(_) => "finished",
            None => "crashed",
        }
    }
}

/// One worker's status: its own record is the latest word on it; else the report's.
fn worker(
    git: &git2::Repository,
    (id, dir): (&str, &Path),
    e: &JournalEntry,
    report: Option<&RunReport>,
    state: &str,
) -> WorkerStatus {
    let exists = e.worktree_path.is_dir();
    let uncommitted = (exists && linked(git, id, e, state))
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
        status: crate::run::resume::read_record(dir, e.worker_id)
            .or_else(|| report?.result(e.worker_id).cloned())
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
}
