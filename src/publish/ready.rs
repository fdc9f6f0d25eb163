//! Publishing workers as they become ready (`publish.when: as-ready`): while a run
//! goes on, each worker that has finished and been harvested is pushed and gets its
//! pull request at once, so reviewers can start on early ones. [`AsReady`] takes the
//! finished results from memory (never from a file an agent could have written) and
//! publishes them exactly as the end-of-run publish would ([`super::publish`]: the
//! branch and commit checked against the plan, the lease from the remote, the push URL
//! and token from the publishing target). What it published is handed to the
//! end-of-run publish ([`super::report::publish_report`]), which does not push
//! or open those again and records their outcomes as they were.
//!
//! A worker whose pull request depends on other workers waits for the end of the run:
//! one of several workers of a task under `select: best` (the winner is known only
//! then), one of several workers sharing a stable branch, and (stable branches) the
//! tasks of a stack. A worker whose early
//! publishing failed is published again at the end of the run — unless publishing
//! stopped (GitHub unreachable, the credentials rejected, the publish deadline
//! passed): then the end of the run sends nothing more ([`Early::stopped`]), so the
//! publish timeout is never spent twice, and `fanout publish` goes on later.

use std::collections::BTreeMap;

use secrecy::ExposeSecret;

use super::report::{PublishContext, PublishFlags};
use super::stable::BranchMode;
use super::{ineligible, publish};
use crate::config::{ConfigFile, SelectMode};
use crate::exit::Failure;
use crate::model::{Operation, PublishOutcome, WorkerResult};
use crate::plan::Plan;
use crate::repo::{PushRecord, UserRepo};
use crate::run::results::RunReport;
use crate::util::out::errln;

/// Publishing a run's workers as they finish.
pub struct AsReady {
    prepared: PublishContext,
    repo: UserRepo,
    plan: Plan,
    runtime: tokio::runtime::Runtime,
    /// What was published so far (successes only), by worker id.
    published: BTreeMap<u32, PublishOutcome>,
    /// Why GitHub refused the credentials or could not be reached: no more
    /// publishing in this run (the end-of-run publish does not try again, so the
    /// publish timeout is not spent twice; `fanout publish` goes on later).
    stopped: Option<String>,
}

/// What publishing as ready did, for the end-of-run publish.
#[derive(Debug, Clone, Default)]
pub struct Early {
    /// What was published, by worker id.
    pub published: BTreeMap<u32, PublishOutcome>,
    /// Why publishing stopped while the run went on (GitHub unreachable, credentials
    /// rejected, the publish deadline passed), if it did.
    pub stopped: Option<String>,
}

impl AsReady {
    /// Ready to publish the workers of `plan`: everything publishing needs resolved
    /// and checked now, before any agent runs.
    pub fn new(
        repo: &UserRepo,
        file: &ConfigFile,
        args: &PublishFlags,
        record: Option<&PushRecord>,
        plan: &Plan,
    ) -> Result<AsReady, Failure> {
        let prepared = PublishContext::new(repo, file, args, record)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Fatal(format!("tokio runtime: {e}")))?;
        Ok(AsReady {
            prepared,
            repo: repo.clone(),
            plan: plan.clone(),
            runtime,
            published: BTreeMap::new(),
            stopped: None,
        })
    }

    /// Whether `r` may be published now: eligible, and its pull request depends on no
    /// other worker of the run.
    pub fn wants(&self, r: &WorkerResult) -> bool {
        self.stopped.is_none()
            && !self.published.contains_key(&r.worker_id)
            && ineligible(r, self.prepared.opts.include_partial).is_none()
            && stands_alone(&self.plan, self.prepared.opts.branch, r.worker_id)
    }

    /// Publish `ready` (finished workers, straight from the run), unless `stop`
    /// resolves first (the run is being stopped: what was under way is left to a
    /// re-run of `fanout publish`). Each outcome is said on stderr.
    pub fn publish(&mut self, ready: Vec<WorkerResult>, stop: impl Future<Output = ()>) {
        let ready: Vec<WorkerResult> = ready.into_iter().filter(|r| self.wants(r)).collect();
        if ready.is_empty() {
            return;
        }
        let report = RunReport::new(
            self.plan.clone(),
            ready,
            None,
            std::time::SystemTime::now(),
            0.0,
            false,
        );
        let this = &*self;
        let done = this.runtime.block_on(async {
            tokio::select! {
                done = this.push_and_open(&report) => Some(done),
                () = stop => None,
            }
        });
        let Some((outcomes, stopped)) = done else {
            return;
        };
        self.keep(outcomes, stopped.is_some());
        if let Some(e) = stopped {
            errln!("fanout: publishing as ready stopped: {e}");
            self.stopped = Some(e);
        }
    }

    /// Connect and publish the workers of `report`: their outcomes, and the failure
    /// that stopped publishing, if one did (which ends early publishing).
    async fn push_and_open(
        &self,
        report: &RunReport,
    ) -> (BTreeMap<u32, PublishOutcome>, Option<String>) {
        // Workers only: no digest or findings yet, no issue written.
        let api = self.prepared.api(Default::default());
        let (gh, token) = match api.connect().await {
            Ok(c) => c,
            Err(Failure::Usage(e) | Failure::Fatal(e)) => return (BTreeMap::new(), Some(e)),
            Err(Failure::Interrupted) => return (BTreeMap::new(), Some("stopped".into())),
        };
        let p = self
            .prepared
            .inputs(report, &self.repo.workdir, Some(token.expose_secret()));
        let out = publish(p, &gh).await;
        (out, gh.stopped().map(|e| e.to_string()))
    }

    /// Say each outcome; keep the successes (a failure is tried again at the end).
    fn keep(&mut self, outcomes: BTreeMap<u32, PublishOutcome>, stopping: bool) {
        let later = if stopping {
            ""
        } else {
            "; tried again after the run"
        };
        for (id, o) in outcomes {
            let what = match (&o.number, &o.url) {
                (Some(n), Some(url)) => format!("#{n} {url}"),
                _ => String::new(),
            };
            match o.operation {
                Operation::Failed | Operation::Skipped => {
                    let why = o.reason.as_deref().unwrap_or("no reason given");
                    errln!(
                        "fanout: worker #{id} not published as ready ({}: {why}){later}",
                        o.operation.as_str()
                    );
                }
                op => {
                    errln!(
                        "fanout: worker #{id} published as ready: {} {what}",
                        op.as_str()
                    );
                    self.published.insert(id, o);
                }
            }
        }
    }

    /// What was published, and why publishing stopped if it did, for the end-of-run
    /// publish.
    pub fn finish(self) -> Early {
        Early {
            published: self.published,
            stopped: self.stopped,
        }
    }
}

/// Whether worker `id`'s pull request depends on no other worker of `plan`: it shares
/// its task with none under `select: best`, nor (stable branches) its branch, nor is
/// it part of a stack (stable branches: a task that depends on another, or that
/// another depends on).
pub fn stands_alone(plan: &Plan, mode: BranchMode, id: u32) -> bool {
    let Some(w) = plan.worker(id) else {
        return false;
    };
    let key = |t: &crate::plan::Task| t.id.clone().unwrap_or_else(|| t.prompt.clone());
    let others = || plan.workers.iter().filter(|o| o.id != id);
    if plan.select.mode == SelectMode::Best && others().any(|o| key(&o.task) == key(&w.task)) {
        return false;
    }
    if mode == BranchMode::Stable {
        // A stack's pull requests are based on, and list, each other: published together.
        let linked = !w.task.depends_on.is_empty()
            || others().any(|o| {
                w.task
                    .id
                    .as_ref()
                    .is_some_and(|id| o.task.depends_on.contains(id))
            });
        if linked {
            return false;
        }
        let Ok(branches) = super::stable::branches(plan) else {
            return false;
        };
        let mine = branches.get(&id).map(|(_, b)| b);
        return mine.is_some() && others().all(|o| branches.get(&o.id).map(|(_, b)| b) != mine);
    }
    true
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn plan(tasks: &str, workers: u32, select_best: bool) -> Plan {
        let yaml = format!("tasks: {tasks}\n");
        let cfg = crate::config::parse(&yaml, Path::new("fanout.yml")).unwrap();
        let flags = crate::plan::settings::PlanFlags {
            workers: Some(workers),
            select_best,
            ..Default::default()
        };
        let settings =
            crate::plan::settings::Settings::resolve(&cfg, Path::new("fanout.yml"), &flags)
                .unwrap();
        let base = crate::plan::Base {
            requested: "HEAD".into(),
            branch: Some("main".into()),
            commit: "0".repeat(40),
        };
        crate::plan::assign::build(&settings, base, "r")
    }

    #[test]
    fn workers_of_distinct_tasks_stand_alone() {
        let p = plan("[a, b]", 2, true);
        for id in [1, 2] {
            assert!(stands_alone(&p, BranchMode::PerRun, id));
            assert!(stands_alone(&p, BranchMode::Stable, id));
        }
        assert!(!stands_alone(&p, BranchMode::PerRun, 3), "not in the plan");
    }

    #[test]
    fn a_stack_waits_for_the_end_on_stable_branches() {
        let p = plan(
            "[{id: a, prompt: a}, {id: b, prompt: b, depends_on: [a]}, c]",
            3,
            false,
        );
        assert!(!stands_alone(&p, BranchMode::Stable, 1), "a dependency");
        assert!(!stands_alone(&p, BranchMode::Stable, 2), "a dependent");
        assert!(stands_alone(&p, BranchMode::Stable, 3));
        assert!(stands_alone(&p, BranchMode::PerRun, 2));
    }

    #[test]
    fn a_selection_or_a_shared_stable_branch_waits_for_the_end() {
        let best = plan("[t]", 2, true);
        assert!(!stands_alone(&best, BranchMode::PerRun, 1));
        let repeats = plan("[t]", 2, false);
        assert!(stands_alone(&repeats, BranchMode::PerRun, 1));
        assert!(!stands_alone(&repeats, BranchMode::Stable, 1));
    }
}
