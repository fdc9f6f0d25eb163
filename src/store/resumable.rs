//! Getting a run that did not finish ready for `fanout resume`: which run (the one
//! named, else the most recent one cut short that is not running), what its earlier
//! attempt left ([`crate::run::resume`]: finished workers are kept), stopping what still
//! runs of it (only when asked), and clearing each unfinished worker's worktree and
//! branch — only where the journal says fanout made them — so it starts afresh. The
//! result is the next [`Attempt`] at the same plan: same run id, branch names and base
//! commit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::runs::{list_runs, live_pid, read_plan};
use crate::exit::Failure;
use crate::plan::Plan;
use crate::repo::UserRepo;
use crate::run::attempt::Attempt;
use crate::run::journal::{Journal, JournalHandle};
use crate::run::results::RunReport;
use crate::run::results::read_report;
use crate::run::{resume, worktree};
use crate::util::out::errln;

/// What `fanout resume` found.
#[derive(Debug)]
pub enum Found {
    /// No run was cut short; these runs are still running.
    Nothing {
        /// Run ids of live runs.
        running: Vec<String>,
    },
    /// Every worker of the run finished and its report was written.
    Finished {
        /// The run.
        id: String,
        /// Its directory.
        run_dir: PathBuf,
        /// Its report.
        report: Box<RunReport>,
    },
    /// The run is ready for its next attempt.
    Ready(Box<Resumable>),
}

/// A run ready for its next attempt.
#[derive(Debug)]
pub struct Resumable {
    /// The run's directory.
    pub run_dir: PathBuf,
    /// Its plan.
    pub plan: Plan,
    /// The attempt: the workers to keep, the journal, the attempt's number.
    pub attempt: Attempt,
}

/// Find the run to resume (`run`, else the most recent one cut short) and get it
/// ready; `stop_survivors` stops processes of its earlier attempt that still run
/// instead of refusing.
pub fn prepare(repo: &UserRepo, run: Option<&str>, stop_survivors: Stop) -> Result<Found, Failure> {
    let Some((id, run_dir)) = pick(repo, run)? else {
        let running = list_runs(&repo.runs_dir())
            .into_iter()
            .filter(|id| live_pid(&repo.run_dir(id)).is_some())
            .collect();
        return Ok(Found::Nothing { running });
    };
    if let Some(pid) = live_pid(&run_dir) {
        return Err(Failure::Usage(format!(
            "run {id} is still running (pid {pid}); resume it once it has stopped"
        )));
    }
    let plan = read_plan(&run_dir).map_err(|e| Failure::Fatal(format!("run {id}: {e}")))?;
    let sandbox = crate::run::attempt::sandbox_decision(plan.sandbox, &plan.network)?;
    let mut journal = Journal::load(&run_dir)
        .map_err(|e| Failure::Fatal(format!("run {id}: journal.json: {e}")))?;
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
        return Ok(Found::Finished {
            id,
            run_dir,
            report: Box::new(report),
        });
    }
    let runtime = crate::run::attempt::runtime()?;
    let config = crate::run::attempt::read_config(repo)?;
    let gateway = crate::run::attempt::gateway_config(&plan)?;
    // (With every worker finished but no final report — fanout died while writing it —
    // the attempt runs nothing and writes the report.)
    stop_earlier_attempt(&id, &run_dir, (&plan, &journal), stop_survivors)?;
    crate::run::confine::remove_leftovers(&repo.common_dir, &id);
    check_tamper(&id, &run_dir)?;
    let number = resume::attempt(&run_dir).saturating_add(1);
    clear_unfinished(repo, &id, &plan, &mut journal, &todo, number)?;
    resume::set_attempt(&run_dir, number).map_err(|e| Failure::Fatal(format!("run {id}: {e}")))?;
    let worktree_root = journal.worktree_root.clone();
    let journal = JournalHandle::create(&run_dir, journal)
        .map_err(|e| Failure::Fatal(format!("run {id}: journal.json: {e}")))?;
    let list = |ids: &mut dyn Iterator<Item = u32>| {
        ids.map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")
    };
    errln!(
        "fanout: resuming run {id} (attempt {number}): running {}{}",
        list(&mut todo.iter().copied()),
        if kept.is_empty() {
            String::new()
        } else {
            format!("; keeping {}", list(&mut kept.keys().copied()))
        }
    );
    let attempt = Attempt {
        run_dir: run_dir.clone(),
        worktree_root,
        journal,
        number,
        kept,
        agent_tokens: Vec::new(),
        sandbox,
        trusted: crate::run::attempt::trusted_filters(&config),
        // Processes of the earlier attempt may have run until just now (they were
        // stopped after the listing): each checkout lists the configuration again.
        listed: None,
        runtime,
        gateway,
    };
    Ok(Found::Ready(Box::new(Resumable {
        run_dir,
        plan,
        attempt,
    })))
}

/// What `fanout resume` may do with processes of the run's earlier attempt that still
/// run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Nothing: refuse to resume while they run.
    No,
    /// Stop those fanout can prove it started (`--stop-survivors`); refuse when any
    /// other is among them.
    Proven,
    /// Stop them all, proven or not (`--stop-survivors --yes`, or the user said yes).
    All,
}

/// Refuse while processes of the run's earlier attempt still run (a SIGKILLed fanout
/// cannot stop its agents), or stop them first (SIGTERM, `kill_grace`, SIGKILL) — the
/// recorded process groups, and every process of the run outside them
/// ([`super::strays`]: daemons its supervisors adopted) — a process fanout cannot prove
/// it started only when the user agrees.
fn stop_earlier_attempt(
    id: &str,
    run_dir: &Path,
    (plan, journal): (&Plan, &Journal),
    stop: Stop,
) -> Result<(), Failure> {
    let survivors = resume::survivors(run_dir);
    let strays = super::strays::of_run(id, journal);
    if survivors.is_empty() && strays.is_empty() {
        return Ok(());
    }
    let mut named: Vec<String> = survivors
        .iter()
        .map(|s| format!("process group {} ({})", s.pgid, s.program))
        .collect();
    named.extend((!strays.is_empty()).then(|| super::strays::named(&strays.all())));
    if stop == Stop::No {
        return Err(Failure::Usage(format!(
            "run {id}: processes of its earlier attempt are still running: {}; stop them (kill -- -PGID, kill PID) or pass --stop-survivors",
            named.join(", ")
        )));
    }
    let unproven: Vec<String> = survivors
        .iter()
        .flat_map(|s| &s.unproven)
        .map(|(pid, name)| format!("pid {pid} ({name})"))
        .chain((!strays.unproven.is_empty()).then(|| super::strays::named(&strays.unproven)))
        .collect();
    if !unproven.is_empty() && stop != Stop::All && !confirmed(id, &unproven) {
        return Err(Failure::Usage(format!(
            "run {id}: {}; nothing was stopped — check them (ps -o pid,args -p PID), stop them yourself, or pass --yes to stop them",
            unproven_said(id, &unproven)
        )));
    }
    errln!("fanout: stopping {}", named.join(", "));
    let grace = Duration::from_secs_f64(plan.limits.kill_grace.max(0.0));
    stop_all(id, &survivors, &strays.all(), grace)
}

/// Stop the groups `survivors` and the processes `strays` (SIGTERM, `grace`, SIGKILL);
/// an error names what still runs.
fn stop_all(
    id: &str,
    survivors: &[resume::Survivor],
    strays: &[super::strays::Stray],
    grace: Duration,
) -> Result<(), Failure> {
    // The strays' grace runs with the groups' (they were found before any supervisor
    // was stopped: its adopted daemons are re-parented away then).
    super::strays::signal(strays, nix::sys::signal::Signal::SIGTERM);
    let left = resume::stop_survivors(survivors, grace);
    let strays_grace = if survivors.is_empty() {
        grace
    } else {
        Duration::ZERO
    };
    let strays_left = super::strays::stop(strays, strays_grace);
    if left.is_empty() && strays_left.is_empty() {
        return Ok(());
    }
    Err(Failure::Fatal(format!(
        "run {id}: could not stop {}",
        left.iter()
            .map(|s| format!("process group {}", s.pgid))
            .chain((!strays_left.is_empty()).then(|| super::strays::named(&strays_left)))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// What fanout cannot prove of `unproven`, said.
fn unproven_said(id: &str, unproven: &[String]) -> String {
    format!(
        "processes fanout cannot prove it started still run of it (the environment they started with lacks FANOUT_RUN_ID={id} or the run's FANOUT_WORKTREE): {}",
        unproven.join(", ")
    )
}

/// Whether the user, at a terminal, agrees to stop `unproven` (never without one).
fn confirmed(id: &str, unproven: &[String]) -> bool {
    use std::io::{BufRead, IsTerminal};
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return false;
    }
    errln!("fanout: run {id}: {}", unproven_said(id, unproven));
    crate::util::out::stderr(format_args!("stop them? [y/N] "));
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes")
}

/// Compare with the run's tamper snapshot (its earlier attempt was cut short, so no
/// check ran after its last workers): say what changed; restore config, hooks and
/// `info/`, never a ref ([`crate::run::tamper::CheckAt::Resume`]); then let the attempt take
/// a snapshot of its own.
fn check_tamper(id: &str, run_dir: &Path) -> Result<(), Failure> {
    if !run_dir.join(crate::run::tamper::SNAPSHOT_FILE).exists() {
        return Ok(());
    }
    let snap = crate::run::tamper::Snapshot::load(run_dir)
        .map_err(|e| Failure::Fatal(format!("run {id}: {e}")))?;
    let changes = snap
        .check(crate::run::tamper::CheckAt::Resume)
        .map_err(|e| Failure::Fatal(format!("run {id}: tamper check: {e}")))?;
    for c in changes.iter().filter(|c| !c.benign) {
        errln!("fanout: run {id}: since its earlier attempt started, {c}");
    }
    // What is there now is this attempt's baseline: the attempt takes a snapshot of
    // its own, so the user's changes since the crash are never blamed on a worker, nor
    // undone after one.
    let path = run_dir.join(crate::run::tamper::SNAPSHOT_FILE);
    for p in [crate::util::sign::sig_path(&path), path] {
        if let Err(e) = std::fs::remove_file(&p)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(Failure::Fatal(format!("run {id}: {}: {e}", p.display())));
        }
    }
    Ok(())
}

/// Clear what the unfinished workers' earlier attempt left, so they start afresh —
/// after saving what a worktree holds that no commit has on a branch of its own
/// (`<worker's branch>-wip<attempt>`, in the run's namespace; said on stderr).
fn clear_unfinished(
    repo: &UserRepo,
    id: &str,
    plan: &Plan,
    journal: &mut Journal,
    todo: &[u32],
    number: u32,
) -> Result<(), Failure> {
    let git = repo
        .open()
        .map_err(|e| Failure::Fatal(format!("git: {}", e.message())))?;
    // Only what is this run's (the plan's branch, in its namespace; the worktree named
    // as fanout names it): a journal an unsandboxed agent re-signed may name any branch.
    for entry in journal
        .entries
        .iter()
        .filter(|e| todo.contains(&e.worker_id))
    {
        super::cleanup::owned(plan, id, entry)
            .map_err(|why| Failure::Fatal(format!("run {id}: {why}; nothing was cleared")))?;
    }
    // Every worktree's git files as fanout made them, before anything reads them.
    for entry in &journal.entries {
        let links = crate::run::links::secure(git.commondir(), id, entry, true);
        if let Some(note) = crate::run::links::said(id, entry, &links) {
            errln!("fanout: note: {note}");
        }
        if let crate::run::links::Links::Unchecked(why) = links
            && todo.contains(&entry.worker_id)
        {
            return Err(Failure::Fatal(format!(
                "run {id}: worker {}'s worktree {}: {why}; fix that and resume again",
                entry.worker_id,
                entry.worktree_path.display()
            )));
        }
    }
    for entry in journal
        .entries
        .iter_mut()
        .filter(|e| todo.contains(&e.worker_id))
    {
        save_unfinished(&git, id, plan, entry, number)?;
        let removed = worktree::remove(&git, entry, worktree::BranchFate::Delete);
        if !removed.kept.is_empty() {
            return Err(Failure::Fatal(format!(
                "run {id}: could not clear worker {}'s earlier attempt: {}; fix that and resume again",
                entry.worker_id,
                removed.kept.join("; ")
            )));
        }
        entry.branch_created = false;
        entry.worktree_created = false;
        entry.worktree_incomplete = false;
    }
    Ok(())
}

/// Commit what worker `entry`'s worktree holds that no commit has on
/// `<branch>-wip<number>` before it is cleared.
fn save_unfinished(
    git: &git2::Repository,
    id: &str,
    plan: &Plan,
    entry: &crate::run::journal::JournalEntry,
    number: u32,
) -> Result<(), Failure> {
    if !entry.worktree_created {
        return Ok(());
    }
    let fail = |e: String| {
        Failure::Fatal(format!(
            "run {id}: worker {}'s worktree {} may hold uncommitted work that could not be saved ({e}); nothing was cleared",
            entry.worker_id,
            entry.worktree_path.display()
        ))
    };
    let Some(unsaved) = super::wip::find(git.commondir(), entry, &plan.exclude).map_err(fail)?
    else {
        return Ok(());
    };
    let branch = format!("{}-wip{number}", entry.branch);
    let oid = unsaved
        .commit(
            git.commondir(),
            &format!("refs/heads/{branch}"),
            "saved by fanout resume",
        )
        .map_err(fail)?;
    errln!(
        "fanout: run {id}: worker {}'s worktree held uncommitted work ({}); saved as WIP commit {} on branch {branch} (kept; delete it when done)",
        entry.worker_id,
        unsaved.listed(),
        crate::util::short(&oid.to_string())
    );
    Ok(())
}

/// The run to resume: `given` (which must exist), else the most recent run (by start
/// time) that is not running and has a worker that did not finish.
fn pick(repo: &UserRepo, given: Option<&str>) -> Result<Option<(String, PathBuf)>, Failure> {
    let runs_dir = repo.runs_dir();
    if let Some(id) = given {
        let dir = runs_dir.join(id);
        if !crate::plan::is_valid_run_id(id) || !dir.join("plan.json").is_file() {
            return Err(Failure::Usage(format!(
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
            let plan = read_plan(&dir).ok()?;
            let unfinished = resume::load_finished(&dir, &plan).len() < plan.workers.len()
                || read_report(&dir).is_none_or(|r| r.interrupted);
            (unfinished && live_pid(&dir).is_none()).then_some((journal.created_at, id, dir))
        })
        .collect();
    candidates.sort();
    Ok(candidates.pop().map(|(_, id, dir)| (id, dir)))
}
