//! `fanout cleanup`'s work: choosing runs by age (`--older-than`, `--keep`), and
//! removing one run's worktrees and branches as its journal (signed, verified)
//! records them — only the plan's branches, in the run's namespace, the integration
//! branch too, and worktrees under the run's root — and nothing else. A worktree
//! holding uncommitted work is kept unless forced, and then its work is committed on
//! the worker's branch first ([`super::wip`]). What still runs of a run whose fanout
//! died is stopped first ([`super::strays`]; a process fanout cannot prove is the
//! run's only with `--yes`), and the workers' private directories a killed fanout
//! left are removed ([`crate::run::confine::remove_leftovers`]). Each worktree's git
//! files are put back as fanout made them before anything reads them
//! ([`crate::run::links`]).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::runs::{list_runs, live_pid, read_plan};
use crate::plan::Plan;
use crate::run::journal::{Journal, JournalEntry};
use crate::run::worktree;

/// How to clean: what `fanout cleanup`'s flags ask.
#[derive(Debug, Clone, Default)]
pub struct How {
    /// Keep the branches (and the run's records); remove only worktrees.
    pub keep_branches: bool,
    /// Commit a worktree's uncommitted work on its branch (kept), then remove it.
    pub force: bool,
    /// Branches holding a WIP commit fanout saved that the user asks to delete anyway.
    pub delete_kept: Vec<String>,
    /// Also stop processes of a killed run that fanout cannot prove it started
    /// ([`super::strays::Found::unproven`]).
    pub stop_unproven: bool,
}

/// What cleaning one run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleaned {
    /// Skipped: a fanout process still runs it.
    Running(i32),
    /// Skipped: its journal cannot be read.
    NoJournal(String),
    /// Cleaned.
    Done {
        /// Worktrees removed.
        trees: usize,
        /// Branches removed.
        branches: usize,
        /// What was kept, and why.
        kept: Vec<String>,
    },
}

/// Remove run `id`'s worktrees and (unless `keep_branches`) branches, as its verified
/// journal records them — only entries that are this run's own (the plan's branch
/// for the worker, a worktree under the run's worktree root) — and its records when
/// nothing was kept. A worktree holding uncommitted work is kept and listed, unless
/// `force`: then the work is first committed on the worker's branch, which is kept.
pub fn clean(git: &git2::Repository, runs_dir: &Path, id: &str, how: &How) -> Cleaned {
    let run_dir = runs_dir.join(id);
    if let Some(pid) = live_pid(&run_dir) {
        return Cleaned::Running(pid);
    }
    let journal = match Journal::load(&run_dir) {
        Ok(j) => j,
        Err(e) => return Cleaned::NoJournal(e.to_string()),
    };
    let Ok(plan) = read_plan(&run_dir) else {
        return Cleaned::NoJournal("plan.json: missing, unreadable or not signed by fanout".into());
    };
    if let Err(left) = stop_strays(id, &plan, &journal, how.stop_unproven) {
        return Cleaned::Done {
            trees: 0,
            branches: 0,
            kept: vec![left],
        };
    }
    if let Ok(snap) = crate::run::tamper::Snapshot::load(&run_dir) {
        warn_changes(id, &snap);
    }
    crate::run::confine::remove_leftovers(git.commondir(), id);
    let (mut trees, mut branches) = (0, 0);
    let mut kept = Vec::new();
    for entry in &journal.entries {
        if let Err(why) = owned(&plan, id, entry) {
            kept.push(why);
            continue;
        }
        // Its git files as fanout made them, before anything reads them.
        let links = crate::run::links::secure(git.commondir(), id, entry, true);
        if let Some(note) = crate::run::links::said(id, entry, &links) {
            crate::util::out::errln!("fanout: note: {note}");
        }
        if let crate::run::links::Links::Unchecked(why) = links {
            kept.push(format!("worktree {}: {why}", entry.worktree_path.display()));
            continue;
        }
        let Some(keep_branch) = save_or_keep(git, &plan, entry, how.force, &mut kept) else {
            continue;
        };
        let fate = if how.keep_branches || keep_branch {
            worktree::BranchFate::Keep
        } else if how.delete_kept.contains(&entry.branch) {
            worktree::BranchFate::DeleteEvenWip
        } else {
            worktree::BranchFate::Delete
        };
        let removed = worktree::remove(git, entry, fate);
        trees += usize::from(removed.worktree);
        branches += usize::from(removed.branch);
        kept.extend(removed.kept);
    }
    if !how.keep_branches {
        let ns = run_namespace(&plan, id).unwrap_or_default();
        branches += remove_extra_branches(git, &journal, &ns, &mut kept);
    }
    // The run's folder under the worktree root, if empty now.
    let _ = std::fs::remove_dir(journal.worktree_root.join(id));
    if !how.keep_branches && kept.is_empty() {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    Cleaned::Done {
        trees,
        branches,
        kept,
    }
}

/// Stop what still runs of run `id` after its fanout died ([`super::strays`]), before
/// its worktrees go; said on stderr. A process fanout cannot prove is the run's is
/// stopped only with `unproven` (else nothing is stopped). An error names what was not
/// stopped (then nothing of the run is removed).
fn stop_strays(id: &str, plan: &Plan, journal: &Journal, unproven: bool) -> Result<(), String> {
    let strays = super::strays::of_run(id, journal);
    if strays.is_empty() {
        return Ok(());
    }
    if !strays.unproven.is_empty() && !unproven {
        return Err(format!(
            "run {id}: processes fanout cannot prove it started still run of it (the environment they started with lacks FANOUT_RUN_ID={id} or the run's FANOUT_WORKTREE): {}; nothing was stopped or removed — check them (ps -o pid,args -p PID), stop them yourself, or pass --yes to stop them",
            super::strays::named(&strays.unproven)
        ));
    }
    let strays = strays.all();
    crate::util::out::errln!(
        "fanout: run {id}: stopping what still runs of it: {}",
        super::strays::named(&strays)
    );
    let grace = Duration::from_secs_f64(plan.limits.kill_grace.max(0.0));
    let left = super::strays::stop(&strays, grace);
    if left.is_empty() {
        return Ok(());
    }
    Err(format!(
        "run {id}: {} still running; nothing removed",
        super::strays::named(&left)
    ))
}

/// The namespace of run `id` (`<prefix>/<id>/`, the prefix never empty) as its plan
/// names it; `None` when the plan is not run `id`'s or names no such namespace.
///
/// Nothing in a run's records is trusted beyond this shape: records are signed, but
/// an unsandboxed agent can read the key and sign a forgery, so what cleanup removes
/// is bounded by the run it was asked to clean (`id`, the run directory's name), not
/// by what the records say.
pub fn run_namespace(plan: &Plan, id: &str) -> Option<String> {
    let ns = crate::run::tamper::namespace(plan)?;
    let prefix = ns.strip_suffix(&format!("/{id}/"))?;
    (plan.run_id == id && !prefix.is_empty()).then_some(ns)
}

/// Whether journal `entry` names what fanout made for run `id`: the plan's branch for
/// its worker, inside the run's namespace, and the worktree fanout names for that
/// worker (`fanout-<id>-w<N>`, in a folder `<id>/w<N>`; git's own record of it decides
/// where it is: [`worktree::remove`]).
pub(crate) fn owned(plan: &Plan, id: &str, entry: &JournalEntry) -> Result<(), String> {
    let ns = run_namespace(plan, id).unwrap_or_default();
    let planned = plan.worker(entry.worker_id);
    let ours = planned.is_some_and(|w| w.branch == entry.branch)
        && !ns.is_empty()
        && entry.branch.starts_with(&ns)
        && crate::run::links::shaped_as_fanouts(id, entry);
    if ours {
        Ok(())
    } else {
        Err(format!(
            "journal entry for worker {} (branch {}, worktree {}): not this run's; left alone",
            entry.worker_id,
            entry.branch,
            entry.worktree_path.display()
        ))
    }
}

/// Uncommitted work in `entry`'s worktree: without `force`, keep it all (`None`);
/// with, commit it on the worker's branch and keep the branch (`Some(true)`).
/// `Some(false)`: nothing unsaved.
fn save_or_keep(
    git: &git2::Repository,
    plan: &Plan,
    entry: &JournalEntry,
    force: bool,
    kept: &mut Vec<String>,
) -> Option<bool> {
    if !entry.worktree_created {
        return Some(false);
    }
    let common = git.commondir();
    let unsaved = match super::wip::find(common, entry, &plan.exclude) {
        Ok(None) => return Some(false),
        Ok(Some(u)) => u,
        Err(e) => {
            kept.push(format!(
                "worktree {}: could not tell whether it holds uncommitted work ({e}); kept",
                entry.worktree_path.display()
            ));
            return None;
        }
    };
    let path = entry.worktree_path.display();
    if !force {
        kept.push(format!(
            "worktree {path}: uncommitted work ({}); kept (`fanout cleanup --force` commits it on {} first)",
            unsaved.listed(),
            entry.branch
        ));
        return None;
    }
    let refname = format!("refs/heads/{}", entry.branch);
    match unsaved.commit(common, &refname, "saved by fanout cleanup --force") {
        Ok(oid) => {
            kept.push(format!(
                "branch {}: holds the uncommitted work of {path} ({}) as WIP commit {}; a later cleanup keeps it too, unless `--delete-kept {}` names it",
                entry.branch,
                unsaved.listed(),
                crate::util::short(&oid.to_string()),
                entry.branch
            ));
            Some(true)
        }
        Err(e) => {
            kept.push(format!(
                "worktree {path}: could not commit its uncommitted work ({e}); kept"
            ));
            None
        }
    }
}

/// Say what differs from the run's tamper snapshot (reported only: the user may have
/// changed things since the run).
fn warn_changes(id: &str, snap: &crate::run::tamper::Snapshot) {
    if let Ok(changes) = snap.check(crate::run::tamper::CheckAt::Report) {
        let changes: Vec<_> = changes.iter().filter(|c| !c.benign).collect();
        if !changes.is_empty() {
            crate::util::out::errln!(
                "fanout: note: run {id}: since it started, {} (left as is)",
                changes
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
}

/// The integration branch, when fanout made one (only inside the run's namespace
/// `ns`); returns how many branches were removed.
fn remove_extra_branches(
    git: &git2::Repository,
    journal: &Journal,
    ns: &str,
    kept: &mut Vec<String>,
) -> usize {
    let mut removed = 0;
    for b in &journal.extra_branches {
        if ns.is_empty() || !b.starts_with(ns) {
            kept.push(format!("branch {b}: not in this run's namespace"));
            continue;
        }
        match git.find_branch(b, git2::BranchType::Local) {
            Ok(br) if br.is_head() => kept.push(format!("branch {b}: checked out")),
            Ok(mut br) => {
                if br.delete().is_ok() {
                    removed += 1;
                } else {
                    kept.push(format!("branch {b}: could not delete"));
                }
            }
            Err(_) => {}
        }
    }
    removed
}

/// When a run started: its journal's `created_at`, else its folder's modification time.
fn started(run_dir: &Path) -> Option<SystemTime> {
    Journal::load(run_dir)
        .ok()
        .and_then(|j| {
            time::OffsetDateTime::parse(
                &j.created_at,
                &time::format_description::well_known::Rfc3339,
            )
            .ok()
        })
        .map(SystemTime::from)
        .or_else(|| std::fs::metadata(run_dir).and_then(|m| m.modified()).ok())
}

/// The runs `--older-than` / `--keep` select, oldest first: not among the `keep` most
/// recent, and started more than `older_than` before `now`.
pub fn sweep(
    runs_dir: &Path,
    older_than: Option<Duration>,
    keep: Option<usize>,
    now: SystemTime,
) -> Vec<String> {
    let mut runs: Vec<(SystemTime, String)> = list_runs(runs_dir)
        .into_iter()
        .map(|id| {
            (
                started(&runs_dir.join(&id)).unwrap_or(SystemTime::UNIX_EPOCH),
                id,
            )
        })
        .collect();
    // Newest first, ties by id, so `keep` keeps the most recent.
    runs.sort_by(|a, b| b.cmp(a));
    let mut picked: Vec<(SystemTime, String)> = runs
        .into_iter()
        .skip(keep.unwrap_or(0))
        .filter(|(t, _)| older_than.is_none_or(|age| now.duration_since(*t).is_ok_and(|d| d > age)))
        .collect();
    picked.reverse();
    picked.into_iter().map(|(_, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::journal::Journal;

    fn run(dir: &Path, id: &str, created_at: &str) {
        let j = Journal {
            schema_version: 1,
            extra_branches: Vec::new(),
            push: None,
            run_id: id.into(),
            created_at: created_at.into(),
            repo_workdir: dir.into(),
            worktree_root: dir.into(),
            entries: Vec::new(),
        };
        let d = dir.join(id);
        std::fs::create_dir_all(&d).unwrap();
        j.save(&d).unwrap();
    }

    #[test]
    fn sweep_selects_by_age_and_keeps_the_newest() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        run(d, "20261120-100000-aaaaaa", "2026-11-20T10:00:00Z");
        run(d, "20261122-100000-bbbbbb", "2026-11-22T10:00:00Z");
        run(d, "custom-id", "2026-11-23T09:00:00Z");
        run(d, "20261123-100000-cccccc", "2026-11-23T10:00:00Z");
        let now = SystemTime::from(time::macros::datetime!(2026-11-23 12:00 UTC));
        let h = |n: u64| Some(Duration::from_secs(n * 3600));
        assert_eq!(
            sweep(d, h(6), None, now),
            ["20261120-100000-aaaaaa", "20261122-100000-bbbbbb"]
        );
        // Ordered by start time, not by id: the custom id is the second newest.
        assert_eq!(
            sweep(d, None, Some(2), now),
            ["20261120-100000-aaaaaa", "20261122-100000-bbbbbb"]
        );
        assert_eq!(sweep(d, None, Some(1), now).len(), 3);
        assert_eq!(sweep(d, h(48), Some(1), now), ["20261120-100000-aaaaaa"]);
        assert!(sweep(d, h(100), None, now).is_empty());
        assert!(sweep(d, None, Some(10), now).is_empty());
    }
}
