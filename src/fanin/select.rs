//! Best-of-N selection (`select: best`): among the workers that share a task (one task
//! on several models, or repeats), score each and mark one winner, so that one pull
//! request is opened per task instead of one per worker.
//!
//! The score is a weighted sum of terms between 0 and 1 (weights in
//! `select_weights:`): `checks` 1 when checks are configured and all passed; `status`
//! 1 for success, 0.5 for partial; `diff` 1 − lines changed / most lines changed in the
//! group; `cost` 1 − cost / highest cost in the group (an unknown cost scores 0);
//! `duration` 1 − duration / longest in the group. Only a successful worker can win;
//! ties go to the lower worker id. Groups of one are left alone.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::SelectMode;
use crate::model::{Selection, Status, WorkerResult};
use crate::plan::Plan;

/// Lines added plus removed between `base` and `commit`, when git can tell.
fn diff_lines(repo: Option<&git2::Repository>, base: &str, commit: Option<&str>) -> Option<f64> {
    let repo = repo?;
    let a = repo.find_commit(base.parse().ok()?).ok()?.tree().ok()?;
    let b = repo.find_commit(commit?.parse().ok()?).ok()?.tree().ok()?;
    let diff = repo.diff_tree_to_tree(Some(&a), Some(&b), None).ok()?;
    let stats = diff.stats().ok()?;
    Some((stats.insertions() + stats.deletions()) as f64)
}

/// The key workers share a task by: its id, else its prompt.
pub fn task_key(r: &WorkerResult) -> String {
    r.task_id.clone().unwrap_or_else(|| r.task.clone())
}

/// The fan-in of a finished run's results, before they are reported: best-of-N
/// selection, then the conflict map of the (selected) successes. One repository open
/// serves both, made only when either has something to compare.
pub fn fan_in(
    plan: &Plan,
    results: &mut [WorkerResult],
    repo_dir: &Path,
) -> Option<crate::model::fanin::ConflictMap> {
    let compares = plan.select.mode == SelectMode::Best
        || crate::fanin::conflicts::candidates(results).len() >= 2;
    let repo = compares
        .then(|| git2::Repository::open(repo_dir).ok())
        .flatten();
    apply(plan, results, repo.as_ref());
    crate::fanin::conflicts::analyze(repo.as_ref()?, &plan.base.commit, results)
}

/// Score and rank workers sharing a task, when the plan says `select: best`.
/// `repo` is used to measure diffs (files changed count stands in without it).
pub fn apply(plan: &Plan, results: &mut [WorkerResult], repo: Option<&git2::Repository>) {
    if plan.select.mode != SelectMode::Best {
        return;
    }
    let w = plan.select.weights;
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in results.iter().enumerate() {
        groups.entry(task_key(r)).or_default().push(i);
    }
    for (key, idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        let diffs: Vec<f64> = idx
            .iter()
            .map(|&i| {
                let r = &results[i];
                diff_lines(repo, &plan.base.commit, r.commit.as_deref())
                    .unwrap_or(r.files_modified.len() as f64)
            })
            .collect();
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let max_diff = max(&diffs);
        let costs: Vec<Option<f64>> = idx.iter().map(|&i| results[i].cost).collect();
        let max_cost = max(&costs.iter().flatten().copied().collect::<Vec<_>>());
        let durations: Vec<f64> = idx.iter().map(|&i| results[i].duration).collect();
        let max_dur = max(&durations);
        let rel = |v: f64, m: f64| if m > 0.0 { 1.0 - v / m } else { 1.0 };
        let mut scored: Vec<(usize, f64, BTreeMap<String, f64>)> = Vec::new();
        for (k, &i) in idx.iter().enumerate() {
            let r = &results[i];
            let mut terms = BTreeMap::new();
            let planned = plan.checks_of_id(r.worker_id);
            let checks_ok = !planned.is_empty()
                && r.checks.len() == planned.len()
                && r.checks.iter().all(|c| c.passed);
            terms.insert(
                "checks".to_owned(),
                w.checks * f64::from(u8::from(checks_ok)),
            );
            let status = match r.status {
                Status::Success => 1.0,
                Status::Partial => 0.5,
                _ => 0.0,
            };
            terms.insert("status".to_owned(), w.status * status);
            terms.insert("diff".to_owned(), w.diff * rel(diffs[k], max_diff));
            terms.insert(
                "cost".to_owned(),
                w.cost * costs[k].map_or(0.0, |c| rel(c, max_cost)),
            );
            terms.insert(
                "duration".to_owned(),
                w.duration * rel(durations[k], max_dur),
            );
            let score = terms.values().sum::<f64>();
            scored.push((i, score, terms));
        }
        // Best first; ties by worker id.
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(results[a.0].worker_id.cmp(&results[b.0].worker_id))
        });
        let winner = scored
            .iter()
            .find(|(i, _, _)| results[*i].status == Status::Success)
            .map(|(i, _, _)| *i);
        for (rank, (i, score, terms)) in scored.into_iter().enumerate() {
            results[i].selection = Some(Selection {
                task: key.clone(),
                score: (score * 1000.0).round() / 1000.0,
                rank: rank as u32 + 1,
                winner: Some(i) == winner,
                terms: terms
                    .into_iter()
                    .map(|(k, v)| (k, (v * 1000.0).round() / 1000.0))
                    .collect(),
            });
        }
    }
}

/// Why a worker that lost the selection is not published, naming the winner.
pub fn not_selected(r: &WorkerResult, all: &[WorkerResult]) -> Option<String> {
    let sel = r.selection.as_ref()?;
    if sel.winner {
        return None;
    }
    let winner = all.iter().find(|o| {
        o.selection
            .as_ref()
            .is_some_and(|s| s.winner && s.task == sel.task)
    });
    Some(match winner {
        Some(w) => format!(
            "not selected: #{} won its task (score {} vs {})",
            w.worker_id,
            w.selection.as_ref().map_or(0.0, |s| s.score),
            sel.score
        ),
        None => "not selected: no worker of its task succeeded".to_owned(),
    })
}

/// The other workers of `r`'s task, best first, for the winner's PR body.
pub fn runners_up<'a>(r: &WorkerResult, all: &'a [WorkerResult]) -> Vec<&'a WorkerResult> {
    let Some(sel) = r.selection.as_ref() else {
        return Vec::new();
    };
    let mut v: Vec<&WorkerResult> = all
        .iter()
        .filter(|o| {
            o.worker_id != r.worker_id && o.selection.as_ref().is_some_and(|s| s.task == sel.task)
        })
        .collect();
    v.sort_by_key(|o| o.selection.as_ref().map_or(u32::MAX, |s| s.rank));
    v
}
