//! The whole run's scheduling: [`Executor::run`] starts workers in plan order, at most
//! `concurrency` at once (a slot each), stops handing out slots once a stop is asked
//! or the run's `budget_total` is reached, lets a dependent wait for its dependencies
//! without holding a slot, and keeps the results of earlier attempts (`fanout
//! resume`). Each final result is posted, once, to the workers that depend on it and
//! reported as a [`Event::WorkerFinished`]; every planned worker gets a result, in id
//! order, even when its task panicked.

use std::collections::BTreeMap;
use std::sync::Arc;

use git2::Oid;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use super::spend::{Spend, spent_by};
use super::verdict::quote_log;
use super::{Executor, slot};
use crate::model::{Reason, Status, WorkerResult};
use crate::plan::PlannedWorker;
use crate::run::event::{Event, StopLevel};
use crate::run::inputs::Given;

/// Workers' final results, by id, for the workers that depend on them.
type Done = BTreeMap<u32, watch::Sender<Option<WorkerResult>>>;

/// A channel for each worker of `workers` that another one depends on, and none for
/// the others: a result is kept there until the run ends, so a run of independent
/// workers keeps none of them twice.
fn done_channels(workers: &[PlannedWorker]) -> Done {
    let awaited: std::collections::BTreeSet<u32> = workers
        .iter()
        .flat_map(|w| w.depends_on.iter().copied())
        .collect();
    workers
        .iter()
        .filter(|w| awaited.contains(&w.id))
        .map(|w| (w.id, watch::channel(None).0))
        .collect()
}

/// Make `r` final for the workers waiting on it.
fn post(done: &Done, r: &WorkerResult) {
    if let Some(tx) = done.get(&r.worker_id) {
        tx.send_replace(Some(r.clone()));
    }
}

/// Move the results of the worker tasks that have ended out of `set`: a task that
/// ended keeps its memory (sized for its whole future) until it is joined, so joining
/// as the run goes keeps what the run holds to its running workers, not all of them.
fn reap(set: &mut JoinSet<(u32, WorkerResult)>, results: &mut Vec<WorkerResult>) {
    while let Some(joined) = set.try_join_next() {
        if let Ok((_, r)) = joined {
            results.push(r);
        }
    }
}

/// What every worker task of a run shares.
#[derive(Clone)]
struct Shared {
    events: mpsc::UnboundedSender<Event>,
    stop: watch::Receiver<StopLevel>,
    spend: Arc<Spend>,
    permits: Arc<Semaphore>,
    done: Arc<Done>,
}

impl Shared {
    /// Receivers of the results of `w`'s dependencies.
    fn subscribe(&self, w: &PlannedWorker) -> Vec<watch::Receiver<Option<WorkerResult>>> {
        w.depends_on
            .iter()
            .filter_map(|d| self.done.get(d).map(watch::Sender::subscribe))
            .collect()
    }

    /// `result` is final: post it for dependents and report it.
    fn finished(&self, id: u32, mut result: WorkerResult) -> (u32, WorkerResult) {
        quote_log(&mut result);
        // What its checkout used goes back to the kernel.
        crate::util::runtime::release_memory();
        post(&self.done, &result);
        let _ = self
            .events
            .send(Event::WorkerFinished(Box::new(result.clone())));
        (id, result)
    }
}

impl Executor {
    /// Run every worker; returns one result per planned worker, in id order.
    pub async fn run(
        self: Arc<Self>,
        events: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
    ) -> Vec<WorkerResult> {
        self.make_dirs();
        // Workers start in plan order: the dispatcher hands out slots one by one and
        // stops handing them out once a stop is requested.
        let shared = Shared {
            events,
            stop: stop.clone(),
            spend: Arc::new(Spend::new(self.plan.limits.budget_total)),
            permits: Arc::new(Semaphore::new(self.plan.concurrency.max(1) as usize)),
            // Each worker's result, as soon as it is final, for the workers that
            // depend on it.
            done: Arc::new(done_channels(&self.plan.workers)),
        };
        for r in self.kept.values() {
            shared.spend.finish(r.worker_id, spent_by(r));
            post(&shared.done, r);
        }
        let mut set = JoinSet::new();
        let mut results = Vec::with_capacity(self.plan.workers.len());
        let mut not_started = Vec::new();
        let mut over_budget = Vec::new();
        let mut dispatch_stop = stop;
        for w in self.plan.workers.iter().cloned() {
            reap(&mut set, &mut results);
            if let Some(r) = self.kept.get(&w.id).cloned() {
                set.spawn(async move { (w.id, r) });
                continue;
            }
            if !w.depends_on.is_empty() {
                let deps = shared.subscribe(&w);
                set.spawn(Arc::clone(&self).dependent(w, deps, shared.clone()));
                continue;
            }
            let Some(permit) = slot(&shared.permits, &mut dispatch_stop).await else {
                not_started.push(w);
                continue;
            };
            if let Some(total) = self.plan.limits.budget_total {
                // Both measures count what the kept workers of earlier attempts spent:
                // the gateway's is theirs plus what it has seen in this attempt.
                let spent = shared.spend.total().max(self.gateway.run_cost());
                if spent >= total {
                    over_budget.push((w, spent, total));
                    continue;
                }
            }
            set.spawn(Arc::clone(&self).started(w, permit, shared.clone()));
        }
        self.never_started(&mut set, &shared, over_budget, not_started);
        self.collect(set, results, &shared.events).await
    }

    /// The run's folders for logs and agent results; and `<git dir>/worktrees`, which
    /// libgit2 makes on first use and fails to when two workers race to make it.
    fn make_dirs(&self) {
        for dir in ["logs", "harvest"] {
            let _ = std::fs::create_dir_all(self.run_dir.join(dir));
        }
        let _ = std::fs::create_dir_all(self.common_dir.join("worktrees"));
    }

    /// A worker that got a slot: run it.
    async fn started(
        self: Arc<Self>,
        w: PlannedWorker,
        permit: tokio::sync::OwnedSemaphorePermit,
        sh: Shared,
    ) -> (u32, WorkerResult) {
        let id = w.id;
        let result = self.run_in_slot(w, permit, &sh, None).await;
        sh.finished(id, result)
    }

    /// Run `w` in the slot `permit` holds (from the plan's base, or `from` a
    /// dependent's merged dependencies), watched by the tamper guard, its spend counted
    /// for the run; the slot is freed once it is done.
    async fn run_in_slot(
        &self,
        w: PlannedWorker,
        permit: tokio::sync::OwnedSemaphorePermit,
        sh: &Shared,
        from: Option<(Oid, Given)>,
    ) -> WorkerResult {
        let id = w.id;
        self.tamper_started(id);
        let mut result = self
            .run_one_from(
                w,
                sh.events.clone(),
                sh.stop.clone(),
                Arc::clone(&sh.spend),
                from,
            )
            .await;
        self.tamper_finished(id, &mut result);
        sh.spend.finish(id, spent_by(&result));
        drop(permit);
        result
    }

    /// A dependent waits for its dependencies without holding a slot, then queues for
    /// one like everyone else (or is skipped when a dependency did not succeed).
    async fn dependent(
        self: Arc<Self>,
        w: PlannedWorker,
        deps: Vec<watch::Receiver<Option<WorkerResult>>>,
        sh: Shared,
    ) -> (u32, WorkerResult) {
        let id = w.id;
        let mut finished = Vec::new();
        for mut rx in deps {
            if let Ok(v) = rx.wait_for(Option::is_some).await {
                finished.extend(v.clone());
            }
        }
        let based = match self.snapshot_failed() {
            Some(why) => Err((Status::Failed, why)),
            None => self.dependency_base(&w, &finished),
        };
        let result = match based {
            Err((status, reason)) => self.skeleton(&w, status, reason),
            Ok(from) => match slot(&sh.permits, &mut sh.stop.clone()).await {
                None => self.skeleton(&w, Status::Failed, Reason::interrupted()),
                Some(permit) => self.run_in_slot(w, permit, &sh, Some(from)).await,
            },
        };
        sh.finished(id, result)
    }

    /// Results for the workers the run's budget kept from starting, and for those a
    /// stop request did.
    fn never_started(
        &self,
        set: &mut JoinSet<(u32, WorkerResult)>,
        sh: &Shared,
        over_budget: Vec<(PlannedWorker, f64, f64)>,
        not_started: Vec<PlannedWorker>,
    ) {
        for (w, spent, total) in over_budget {
            let r = self.skeleton(&w, Status::Failed, Reason::budget_spent(total, spent));
            set.spawn(std::future::ready(sh.finished(w.id, r)));
        }
        for w in not_started {
            let r = self.skeleton(&w, Status::Failed, Reason::interrupted());
            set.spawn(std::future::ready(sh.finished(w.id, r)));
        }
    }

    /// Every worker's result (`results`: those already reaped), in id order; a worker
    /// task that panicked still gets a row.
    async fn collect(
        &self,
        mut set: JoinSet<(u32, WorkerResult)>,
        mut results: Vec<WorkerResult>,
        events: &mpsc::UnboundedSender<Event>,
    ) -> Vec<WorkerResult> {
        while let Some(joined) = set.join_next().await {
            if let Ok((_, r)) = joined {
                results.push(r);
            }
        }
        for w in &self.plan.workers {
            if !results.iter().any(|r| r.worker_id == w.id) {
                let reason = Reason::internal_error("worker task panicked");
                let r = self.skeleton(&w.clone(), Status::Failed, reason);
                let _ = events.send(Event::WorkerFinished(Box::new(r.clone())));
                results.push(r);
            }
        }
        results.sort_by_key(|r| r.worker_id);
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: u32, depends_on: &[u32]) -> PlannedWorker {
        PlannedWorker {
            id,
            task: crate::plan::Task::default(),
            model: None,
            agent: "a".into(),
            branch: format!("b{id}"),
            depends_on: depends_on.to_vec(),
            wave: u32::from(!depends_on.is_empty()),
        }
    }

    #[test]
    fn results_are_kept_only_for_workers_others_wait_for() {
        let independent = [worker(1, &[]), worker(2, &[]), worker(3, &[])];
        assert!(done_channels(&independent).is_empty());
        // 4 waits for 1 and 2, 5 for 4; 3 and 5 have no dependent; 9 is no worker.
        let chain = [
            worker(1, &[]),
            worker(2, &[]),
            worker(3, &[]),
            worker(4, &[1, 2]),
            worker(5, &[4, 9]),
        ];
        let done = done_channels(&chain);
        assert_eq!(done.keys().copied().collect::<Vec<_>>(), vec![1, 2, 4]);
        let shared_deps: Vec<u32> = chain[4]
            .depends_on
            .iter()
            .filter(|d| done.contains_key(d))
            .copied()
            .collect();
        assert_eq!(shared_deps, vec![4]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reaping_takes_ended_tasks_and_leaves_running_ones() {
        let mut set = JoinSet::new();
        let mut results = Vec::new();
        let skeleton =
            |id: u32| WorkerResult::new(id, &format!("b{id}"), "t", "a", Status::Success);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let ended = skeleton(1);
        set.spawn(async move { (1, ended) });
        let waiting = skeleton(2);
        set.spawn(async move {
            let _ = rx.await;
            (2, waiting)
        });
        // Let the first task run to its end.
        while set.len() == 2 && results.is_empty() {
            tokio::task::yield_now().await;
            reap(&mut set, &mut results);
        }
        assert_eq!(results.iter().map(|r| r.worker_id).collect::<Vec<_>>(), [1]);
        assert_eq!(set.len(), 1);
        tx.send(()).unwrap();
        while let Some(Ok((_, r))) = set.join_next().await {
            results.push(r);
        }
        assert_eq!(results.len(), 2);
    }
}
