//! A dependent worker's start: the first success of each task it depends on (a task
//! with none skips it, saying why), their branches merged into its base (the one that
//! contains the other, else a merge commit; a conflict fails it, naming the paths),
//! and what they give it ([`Given`]: their findings).

use git2::Oid;

use super::Executor;
use super::verdict::LOG_QUOTE;
use crate::model::{Cause, Reason, Status, WorkerResult};
use crate::plan::PlannedWorker;
use crate::run::inputs::Given;

impl Executor {
    /// Where a dependent worker starts: its dependencies' branches (the first
    /// success of each task it depends on), merged when there are several; and what
    /// they give it ([`Given`]: their findings). An error is the status and reason the
    /// worker ends with instead of running.
    pub(super) fn dependency_base(
        &self,
        w: &PlannedWorker,
        finished: &[WorkerResult],
    ) -> Result<(Oid, Given), (Status, Reason)> {
        let interrupted = |r: &WorkerResult| r.reason.as_ref().map(Reason::cause);
        if finished
            .iter()
            .any(|r| interrupted(r) == Some(Cause::Interrupted))
        {
            return Err((Status::Failed, Reason::interrupted()));
        }
        let picked = successful_dependencies(w, finished)?;
        let commits: Vec<Oid> = picked
            .iter()
            .filter_map(|r| r.commit.as_deref()?.parse().ok())
            .collect();
        let (first, rest) = commits
            .split_first()
            .ok_or((Status::Failed, "dependencies left no commit".into()))?;
        let repo = git2::Repository::open(&self.repo_dir)
            .map_err(|e| (Status::Failed, format!("git: {}", e.message()).into()))?;
        let mut acc = *first;
        for (k, next) in rest.iter().enumerate() {
            acc = self
                .merge_dependency(&repo, w, acc, *next, (&picked, k + 1))
                .map_err(|(status, why)| (status, why.into()))?;
        }
        Ok((acc, Given::from_dependencies(&self.plan, w, &picked)))
    }

    /// `acc` (the dependencies merged so far) merged with `next` (the commit of
    /// `picked.0[picked.1]`): the one that contains the other, or a merge commit.
    fn merge_dependency(
        &self,
        repo: &git2::Repository,
        w: &PlannedWorker,
        acc: Oid,
        next: Oid,
        (picked, k): (&[&WorkerResult], usize),
    ) -> Result<Oid, (Status, String)> {
        let git = |e: git2::Error| {
            (
                Status::Failed,
                format!("merging dependencies: {}", e.message()),
            )
        };
        if repo.graph_descendant_of(acc, next).map_err(git)? || acc == next {
            return Ok(acc);
        }
        if repo.graph_descendant_of(next, acc).map_err(git)? {
            return Ok(next);
        }
        let ours = repo.find_commit(acc).map_err(git)?;
        let theirs = repo.find_commit(next).map_err(git)?;
        let mut index = repo.merge_commits(&ours, &theirs, None).map_err(git)?;
        if index.has_conflicts() {
            let paths: Vec<String> = index
                .conflicts()
                .map_err(git)?
                .flatten()
                .filter_map(|c| c.our.or(c.their))
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .collect();
            return Err((
                Status::Failed,
                format!(
                    "dependencies #{} and #{} conflict in {}",
                    picked[0].worker_id,
                    picked[k].worker_id,
                    paths.join(", ")
                ),
            ));
        }
        let tree = repo
            .find_tree(index.write_tree_to(repo).map_err(git)?)
            .map_err(git)?;
        let sig = git2::Signature::now(&self.identity.0, &self.identity.1).map_err(git)?;
        repo.commit(
            None,
            &sig,
            &sig,
            &format!("fanout: merge the dependencies of worker {}", w.id),
            &tree,
            &[&ours, &theirs],
        )
        .map_err(git)
    }
}

/// The first success of each task `w` depends on, among the `finished` results; a
/// task with none skips `w`, saying why.
fn successful_dependencies<'a>(
    w: &PlannedWorker,
    finished: &'a [WorkerResult],
) -> Result<Vec<&'a WorkerResult>, (Status, Reason)> {
    let mut picked: Vec<&WorkerResult> = Vec::new();
    for task in &w.task.depends_on {
        let mut of_task: Vec<&WorkerResult> = finished
            .iter()
            .filter(|r| r.task_id.as_deref() == Some(task.as_str()))
            .collect();
        of_task.sort_by_key(|r| r.worker_id);
        // A success first; else a worker that found nothing to change.
        let done = of_task
            .iter()
            .find(|r| r.status == Status::Success)
            .or_else(|| of_task.iter().find(|r| r.status == Status::Unchanged));
        match done {
            Some(r) => picked.push(r),
            None => {
                let why = of_task
                    .first()
                    .map(|r| {
                        format!(
                            " (#{}: {}{})",
                            r.worker_id,
                            r.status,
                            // its reason, without the log lines quoted after it
                            r.reason
                                .as_deref()
                                .map(|x| format!(": {}", x.split(LOG_QUOTE).next().unwrap_or(x)))
                                .unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                return Err((
                    Status::Skipped,
                    format!("dependency {task} did not succeed{why}").into(),
                ));
            }
        }
    }
    Ok(picked)
}
