//! Running a plan locally: one worktree per worker, agents as supervised process
//! groups, at most `concurrency` at once, every worker harvested into a
//! [`WorkerResult`] whatever happens (failure to start, timeout, interruption).
//!
//! Each worker runs in its confinement ([`super::confine`]): a private directory,
//! its git's objects in its worktree's quarantine, and, when the run is sandboxed,
//! the Landlock policy its agent, setup commands and checks run under. Its branch is
//! made by harvest ([`super::harvest`]), or at the base when it ends before its
//! agent runs.
//!
//! Nothing a worker runs — setup commands, agent, checks — starts before the run's
//! tamper snapshot is complete ([`super::tamper::guard::Guard::ready`]); its worktree
//! is made meanwhile; then its gateway door opens and its confinement is made (pinned
//! to that door). Its gateway deadline starts when its agent does. When the
//! snapshot cannot be taken, no worker starts ([`crate::model::Cause::SnapshotFailed`]).
//!
//! The executor owns no terminal output: it sends typed [`Event`]s to a reporter.
//! Stopping is driven by a [`StopLevel`] watch channel that the signal dispatcher
//! ([`super::signals`]) owns.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use git2::Oid;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use super::confine::{Confinement, Place};
use super::event::{Event, StopLevel};
use super::harvest::{CommitSpec, Harvest, WorkerTree, commit_message, harvest};
use super::inputs::Given;
use super::journal::JournalHandle;
use super::process::{Ending, ProcessSpec, Supervised, supervise};
use super::worktree;
use crate::agent::{Adapter, AgentOutcome, AgentStatus, Observed, WorkerContext, agent_env_with};
use crate::config::TaskOutput;
use crate::gateway::WorkerCredential;
use crate::git::TrustedConfig;
use crate::model::{Cause, Reason, Status, WorkerResult, timed_out_after};
use crate::plan::{Plan, PlannedWorker};

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

/// What worker `r` spent: the larger of what its agent claimed and what the gateway
/// measured (`None` when neither is known).
pub fn spent_by(r: &WorkerResult) -> Option<f64> {
    let measured = r.gateway.as_ref().map(|g| g.cost);
    match (r.cost, measured) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
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

/// A slot to run a worker in, or `None` once fanout is asked to stop.
async fn slot(
    permits: &Arc<Semaphore>,
    stop: &mut watch::Receiver<StopLevel>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if *stop.borrow() != StopLevel::Run {
        return None;
    }
    tokio::select! {
        biased;
        _ = stop.wait_for(|l| *l != StopLevel::Run) => None,
        p = Arc::clone(permits).acquire_owned() => p.ok(),
    }
}

/// What the run has spent: finished workers' known costs plus running workers' live
/// costs, for `budget_total` — which, once reached, is said on [`Spend::reached`]: the
/// running agents are stopped (each watches it) and no other starts.
#[derive(Debug, Default)]
pub struct Spend {
    finished: Mutex<f64>,
    live: Mutex<BTreeMap<u32, f64>>,
    /// `budget_total`, and whether the spend has reached it.
    cap: Option<(f64, watch::Sender<bool>)>,
}

impl Spend {
    /// A run's spend, capped at `budget_total` when there is one.
    pub fn new(budget_total: Option<f64>) -> Spend {
        Spend {
            cap: budget_total.map(|t| (t, watch::channel(false).0)),
            ..Spend::default()
        }
    }

    /// Turns true once the spend reaches `budget_total` (`None` without one).
    pub fn reached(&self) -> Option<watch::Receiver<bool>> {
        self.cap.as_ref().map(|(_, tx)| tx.subscribe())
    }

    fn check_cap(&self) {
        if let Some((total, tx)) = &self.cap
            && self.total() >= *total
        {
            tx.send_if_modified(|r| !std::mem::replace(r, true));
        }
    }

    /// USD spent so far (known costs only).
    pub fn total(&self) -> f64 {
        let done = *self.finished.lock().unwrap_or_else(|e| e.into_inner());
        let live: f64 = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum();
        done + live
    }

    fn live(&self, id: u32, cost: f64) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, cost);
        self.check_cap();
    }

    fn finish(&self, id: u32, cost: Option<f64>) {
        let live = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(c) = cost.or(live) {
            *self.finished.lock().unwrap_or_else(|e| e.into_inner()) += c;
        }
        self.check_cap();
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

/// Everything the executor needs besides the plan.
#[derive(Debug)]
pub struct Executor {
    /// The plan.
    pub plan: Arc<Plan>,
    /// The user's checkout (worktrees are added to its repository).
    pub repo_dir: PathBuf,
    /// This run's directory (logs, result files).
    pub run_dir: PathBuf,
    /// Where this run's worktrees go (`<root>/<run_id>/wN`).
    pub worktree_root: PathBuf,
    /// The journal of what was created.
    pub journal: Arc<JournalHandle>,
    /// Commit identity.
    pub identity: (String, String),
    /// fanout's environment, before scrubbing (it holds no credential: they were taken
    /// out of the process at start).
    pub base_env: Vec<(OsString, OsString)>,
    /// The GitHub token, for an agent whose definition allows it (`GITHUB_TOKEN` and
    /// `GH_TOKEN` in its environment); nothing else fanout starts gets it.
    pub agent_tokens: Vec<(String, secrecy::SecretString)>,
    /// Results of workers that finished in an earlier attempt (`fanout resume`):
    /// they are not run again, and count for dependents and the run's budget.
    pub kept: BTreeMap<u32, WorkerResult>,
    /// Which attempt at the run this is (1, then one more per resume).
    pub attempt: u32,
    /// The Landlock ABI workers are confined with; `None`: unconfined.
    pub sandbox: Option<u8>,
    /// Each worker's sandbox pins it to its gateway door and its own ports
    /// ([`crate::sandbox::Decision::network`]).
    pub pin_network: bool,
    /// The repository's common git directory (harvest opens the repository by it).
    pub common_dir: PathBuf,
    /// The tamper check after each worker (see [`super::tamper`]).
    pub tamper: Option<Arc<super::tamper::guard::Guard>>,
    /// The filter drivers worktree checkouts run (read when the run started).
    pub trusted: TrustedConfig,
    /// The repository's configuration as listed when the run started, for worktree
    /// checkouts to use instead of listing it again: dropped as soon as a worker is
    /// about to start a process of its own ([`Executor::processes_start`]).
    pub listed: std::sync::Mutex<Option<crate::git::Listed>>,
    /// Permits for worktree checkouts ([`cpu_slots`]).
    pub checkouts: Arc<Semaphore>,
    /// Permits for harvests ([`cpu_slots`]).
    pub harvests: Arc<Semaphore>,
    /// The run's gateway: each worker's one door out ([`super::gated`]).
    pub gateway: Arc<crate::gateway::Gateway>,
}

/// What a worker gets once its worktree is checked out (see [`Executor::reserve`]).
struct Reserved {
    /// Its confinement.
    confined: std::io::Result<Confinement>,
    /// Its port block, held until the worker is done.
    ports: std::io::Result<super::setup::ports::PortLease>,
}

/// At most one worktree checkout per CPU at a time, and apart from them at most one
/// harvest per CPU: more only share the CPUs (a big repository's checkouts and
/// harvests are CPU-bound) and hold more memory at once — a harvest reads the
/// worktree's whole index and trees — and every worker's agent waits for the last
/// checkout. Each worker's agent starts as soon as its own checkout is done; a
/// finished worker's harvest never waits for checkouts.
pub fn cpu_slots() -> Arc<Semaphore> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Arc::new(Semaphore::new(cpus))
}

impl Executor {
    /// `GITHUB_TOKEN` and `GH_TOKEN` for an agent allowed the token (none otherwise).
    fn agent_token_vars(&self, agent: &crate::agent::AgentSpec) -> Vec<(String, String)> {
        use secrecy::ExposeSecret;
        if !agent.allow_github_token {
            return Vec::new();
        }
        self.agent_tokens
            .iter()
            .map(|(k, v)| (k.clone(), v.expose_secret().to_owned()))
            .collect()
    }

    /// Log file of worker `id`.
    pub fn log_path(run_dir: &Path, id: u32) -> PathBuf {
        run_dir.join("logs").join(format!("w{id}.log"))
    }

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

    fn tamper_started(&self, id: u32) {
        if let Some(g) = &self.tamper {
            g.started(id);
        }
    }

    /// Why no worker may start any more: the tamper snapshot could not be taken.
    fn snapshot_failed(&self) -> Option<Reason> {
        let why = self.tamper.as_ref()?.failed()?;
        Some(Reason::snapshot_failed(&why))
    }

    /// Wait until the tamper snapshot is taken; an error is the reason of a worker
    /// that may not start.
    async fn snapshot_taken(&self) -> Result<(), Reason> {
        match &self.tamper {
            Some(g) => g.ready().await.map_err(|why| Reason::snapshot_failed(&why)),
            None => Ok(()),
        }
    }

    /// The tamper check after worker `id` (blocking file work, off the async threads).
    fn tamper_finished(&self, id: u32, result: &mut WorkerResult) {
        if let Some(g) = &self.tamper {
            tokio::task::block_in_place(|| g.finished(id, result));
        }
    }

    /// A worker that got a slot: run it.
    async fn started(
        self: Arc<Self>,
        w: PlannedWorker,
        permit: tokio::sync::OwnedSemaphorePermit,
        sh: Shared,
    ) -> (u32, WorkerResult) {
        let id = w.id;
        self.tamper_started(id);
        let mut result = self
            .run_one(w, sh.events.clone(), sh.stop.clone(), Arc::clone(&sh.spend))
            .await;
        self.tamper_finished(id, &mut result);
        sh.spend.finish(id, spent_by(&result));
        drop(permit);
        sh.finished(id, result)
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
                Some(permit) => {
                    self.tamper_started(id);
                    let mut r = self
                        .run_one_from(
                            w.clone(),
                            sh.events.clone(),
                            sh.stop.clone(),
                            Arc::clone(&sh.spend),
                            Some(from),
                        )
                        .await;
                    self.tamper_finished(id, &mut r);
                    sh.spend.finish(id, spent_by(&r));
                    drop(permit);
                    r
                }
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

    /// A result for a worker that did not get to run its agent.
    fn skeleton(&self, w: &PlannedWorker, status: Status, reason: Reason) -> WorkerResult {
        WorkerResult {
            worker_id: w.id,
            attempt: self.attempt,
            cost_source: None,
            branch: w.branch.clone(),
            model: w.model.clone(),
            status,
            steps: None,
            cost: None,
            duration: 0.0,
            files_modified: Vec::new(),
            worktree_path: None,
            task: w.task.prompt.clone(),
            task_id: w.task.id.clone(),
            agent: w.agent.clone(),
            reason: Some(reason),
            findings: None,
            commit: None,
            base_commit: None,
            committed_by_fanout: false,
            exit_code: None,
            signal: None,
            log_path: None,
            checks: Vec::new(),
            setup: None,
            selection: None,
            publish: None,
            sandboxed: false,
            sandbox_abi: None,
            gateway: None,
        }
    }

    async fn run_one(
        &self,
        w: PlannedWorker,
        events: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
        spend: Arc<Spend>,
    ) -> WorkerResult {
        self.run_one_from(w, events, stop, spend, None).await
    }

    /// Where a dependent worker starts: its dependencies' branches (the first
    /// success of each task it depends on), merged when there are several; and what
    /// they give it ([`Given`]: their findings). An error is the status and reason the
    /// worker ends with instead of running.
    fn dependency_base(
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

    /// Run `w`, from the plan's base, or (a dependent) from its dependencies' merged
    /// branches with what they give it. Its door in the run's gateway opens once its
    /// worktree is checked out (its sandbox is pinned to the door's port) and closes
    /// once it is done; what the gateway measured goes in its result when its
    /// processes started.
    async fn run_one_from(
        &self,
        w: PlannedWorker,
        events: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
        spend: Arc<Spend>,
        from: Option<(Oid, Given)>,
    ) -> WorkerResult {
        let (base_override, given) = match from {
            Some((base, given)) => (Some(base), Some(given)),
            None => (None, None),
        };
        if *stop.borrow() != StopLevel::Run {
            return self.skeleton(&w, Status::Failed, Reason::interrupted());
        }
        if let Some(why) = self.snapshot_failed() {
            return self.skeleton(&w, Status::Failed, why);
        }
        let (base, path) = match self.make_worktree(&w, base_override, &stop).await {
            Ok(made) => made,
            Err(failed) => return failed,
        };
        let mut result = self.skeleton(&w, Status::Failed, Reason::interrupted());
        result.worktree_path = Some(path);
        result.base_commit = base_override.map(|b| b.to_string());
        let door = match self.open_door(&w) {
            Ok(d) => d,
            Err(why) => {
                result.reason = Some(why.into());
                return self.at_base(&w, result, base);
            }
        };
        let live = (events, stop, spend);
        let mut result = self
            .run_through(&w, result, base, live, given.as_ref(), &door)
            .await;
        let usage = self.gateway.end_worker(door.worker).await;
        if let Some(usage) = usage.filter(|_| result.setup.is_some()) {
            result.gateway = Some(super::gated::record(&usage, result.cost));
        }
        result
    }

    /// Open `w`'s door in the run's gateway, with its budget; its deadline is set when
    /// its agent starts ([`Executor::run_agent`]). An error is why the worker cannot
    /// run.
    fn open_door(&self, w: &PlannedWorker) -> Result<WorkerCredential, String> {
        let limits = crate::gateway::WorkerLimits {
            budget: self.plan.limits_of(w).budget,
            deadline: None,
        };
        self.gateway.register_worker(w.id, limits)
    }

    /// [`Executor::run_one_from`] once `w`'s worktree is checked out (`result` says
    /// where) and its door is open: its confinement, then, once the tamper snapshot
    /// is taken, everything it runs.
    async fn run_through(
        &self,
        w: &PlannedWorker,
        mut result: WorkerResult,
        base: Oid,
        (events, stop, spend): (
            mpsc::UnboundedSender<Event>,
            watch::Receiver<StopLevel>,
            Arc<Spend>,
        ),
        given: Option<&Given>,
        door: &WorkerCredential,
    ) -> WorkerResult {
        let path = result.worktree_path.clone().expect("the worktree was made");
        // Filesystem work: off the async threads, so that a slow disk does not hold
        // up the other workers' supervision.
        let reserved = tokio::task::block_in_place(|| self.reserve(w, &path, door.addr.port()));
        let Reserved { confined, ports } = reserved;
        let mut confined = match confined {
            Ok(c) => c,
            Err(e) => {
                result.reason = Some(format!("could not prepare the worker's sandbox: {e}").into());
                return self.at_base(w, result, base);
            }
        };
        // Its worktree and confinement are made; what it runs waits for the snapshot.
        let waited = match self.snapshot_taken().await {
            Err(why) => Some(why),
            Ok(()) if *stop.borrow() != StopLevel::Run => Some(Reason::interrupted()),
            Ok(()) => None,
        };
        if let Some(why) = waited {
            tokio::task::block_in_place(|| confined.remove());
            result.reason = Some(why);
            return self.at_base(w, result, base);
        }
        confined.add_env(super::gated::proxy_vars(&door.proxy_url));
        self.processes_start();
        result.sandboxed = confined.abi().is_some();
        result.sandbox_abi = confined.abi();
        let live = Live {
            events: &events,
            stop: &stop,
            spend,
            door,
        };
        let result = self
            .run_confined(w, result, base, (&confined, ports), live, given)
            .await;
        tokio::task::block_in_place(|| confined.remove());
        result
    }

    /// A worker is about to start processes (setup, agent, checks): from now on the
    /// repository's configuration may differ from the run's start listing, and later
    /// checkouts list it again.
    fn processes_start(&self) {
        if let Ok(mut listed) = self.listed.lock() {
            listed.take();
        }
    }

    /// The result of a worker that ends before its agent ran: its branch is made at
    /// the base, like a harvest that found nothing.
    fn at_base(&self, w: &PlannedWorker, mut result: WorkerResult, base: Oid) -> WorkerResult {
        result.commit = Some(base.to_string());
        let made = git2::Repository::open(&self.common_dir).and_then(|repo| {
            repo.reference(
                &format!("refs/heads/{}", w.branch),
                base,
                true,
                "fanout: worker ended before its agent ran",
            )
            .map(drop)
        });
        if made.is_ok() {
            let _ = self.journal.update(w.id, |e| e.branch_created = true);
        }
        result
    }

    /// Claim `w`'s port block and make its confinement (its private directory, and its
    /// sandbox when the run has one: pinned, with [`Executor::pin_network`], to its
    /// gateway door at port `door` and its port block) for its worktree at `worktree`,
    /// once that is checked out. Blocking filesystem work.
    fn reserve(&self, w: &PlannedWorker, worktree: &Path, door: u16) -> Reserved {
        let name = worktree::worktree_name(&self.plan.run_id, w.id);
        let at = Place {
            run_id: &self.plan.run_id,
            worker_id: w.id,
            worktree,
            admin: &self.common_dir.join("worktrees").join(name),
            common: &self.common_dir,
        };
        let agent = self.plan.agent_of(w);
        let ports = super::setup::claim_ports(&self.plan.setup);
        let network = self
            .pin_network
            .then(|| super::confine::pinned(door, ports.as_ref().ok()));
        let limits = (agent.writable.as_slice(), self.plan.hidden.as_slice());
        Reserved {
            confined: Confinement::new(at, limits, self.sandbox, network),
            ports,
        }
    }

    /// Set up `w`'s worktree, run its agent and harvest, all in its confinement.
    async fn run_confined(
        &self,
        w: &PlannedWorker,
        mut result: WorkerResult,
        base: Oid,
        (confined, ports): (
            &Confinement,
            std::io::Result<super::setup::ports::PortLease>,
        ),
        live: Live<'_>,
        given: Option<&Given>,
    ) -> WorkerResult {
        let at = Paths {
            log: Self::log_path(&self.run_dir, w.id),
            result_file: confined.result_file.clone(),
            worktree: result.worktree_path.clone().expect("the worktree was made"),
        };
        result.log_path = Some(at.log.clone());

        // Prepare the worktree: the port block (claimed after the checkout, held until
        // this worker is done), copied files, submodules, setup commands. A failure
        // there fails the worker, and the agent never starts.
        let prepared = self
            .prepare(w, &at, (confined, ports), live.events, live.stop)
            .await;
        for message in &prepared.record.warnings {
            let _ = live.events.send(Event::Warning {
                id: w.id,
                message: message.clone(),
            });
        }
        result.setup = Some(prepared.record);
        let _ports = prepared.lease;
        if let Some(why) = prepared.failure {
            result.reason = Some(why);
            return self.at_base(w, result, base);
        }
        let asked = match Briefing::of(w, given, confined, prepared.env) {
            Ok(a) => a,
            Err(e) => {
                result.reason =
                    Some(format!("could not write the dependencies' findings: {e}").into());
                return self.at_base(w, result, base);
            }
        };

        let adapter = self.plan.agent_of(w).adapter();
        let stop = live.stop;
        let ran = self
            .run_agent(w, adapter.as_ref(), &at, confined, asked, live)
            .await;
        match ran {
            Err(why) => {
                result.reason = Some(why.into());
                self.finish_harvest(result, w, base, None, stop, confined)
                    .await
            }
            Ok(sup) => {
                let outcome = read_outcome(&mut result, adapter.as_ref(), &sup, &at, w);
                self.finish_harvest(result, w, base, Some((sup, outcome)), stop, confined)
                    .await
            }
        }
    }

    /// Make `w`'s worktree (its HEAD detached at the plan's base, or `base_override`,
    /// a dependent's merged dependencies; its branch is made at harvest), and note it
    /// in the journal; a failure is the worker's final result.
    async fn make_worktree(
        &self,
        w: &PlannedWorker,
        base_override: Option<Oid>,
        stop: &watch::Receiver<StopLevel>,
    ) -> Result<(Oid, PathBuf), WorkerResult> {
        let base: Oid = match base_override.map_or_else(|| self.plan.base.commit.parse(), Ok) {
            Ok(o) => o,
            Err(_) => {
                let why = "plan has an invalid base commit".into();
                return Err(self.skeleton(w, Status::Failed, why));
            }
        };
        let name = worktree::worktree_name(&self.plan.run_id, w.id);
        let path = worktree::worktree_path(&self.worktree_root, &self.plan.run_id, w.id);
        let Some(permit) = slot(&self.checkouts, &mut stop.clone()).await else {
            return Err(self.skeleton(w, Status::Failed, Reason::interrupted()));
        };
        let made = {
            let (repo_dir, name, path, branch) = (
                self.repo_dir.clone(),
                name.clone(),
                path.clone(),
                w.branch.clone(),
            );
            let trusted = self.trusted.clone();
            let listed = self.listed.lock().map(|l| l.clone()).unwrap_or(None);
            tokio::task::spawn_blocking(move || {
                let config = worktree::CheckoutConfig {
                    trusted: &trusted,
                    listed: listed.as_ref(),
                };
                worktree::create(&repo_dir, &name, &path, &branch, base, config)
            })
            .await
        };
        drop(permit);
        match made {
            Ok(Ok(())) => {
                let _ = self.journal.update(w.id, |e| e.worktree_created = true);
                Ok((base, path))
            }
            Ok(Err(e)) => Err(self.skeleton(
                w,
                Status::Failed,
                format!("could not create worktree: {e}").into(),
            )),
            Err(_) => {
                let why = "could not create worktree: task failed".into();
                Err(self.skeleton(w, Status::Failed, why))
            }
        }
    }

    /// Worktree setup for `w` ([`super::setup::prepare`]), its output shown live.
    async fn prepare(
        &self,
        w: &PlannedWorker,
        at: &Paths,
        (confined, ports): (
            &Confinement,
            std::io::Result<super::setup::ports::PortLease>,
        ),
        events: &mpsc::UnboundedSender<Event>,
        stop: &watch::Receiver<StopLevel>,
    ) -> super::setup::SetupOutcome {
        let setup_events = events.clone();
        let id = w.id;
        super::setup::prepare(
            &self.plan.setup,
            &super::setup::Worker {
                run_id: &self.plan.run_id,
                worker_id: w.id,
                branch: &w.branch,
                checkout: &self.repo_dir,
                worktree_root: &self.worktree_root,
                worktree: &at.worktree,
                log: &at.log,
                base_env: &self.base_env,
                grace: Duration::from_secs_f64(self.plan.limits.kill_grace),
                confine: confined.prepared.as_ref(),
                extra_env: confined.env(),
            },
            ports,
            stop.clone(),
            move |line: &str| {
                let _ = setup_events.send(Event::WorkerOutput {
                    id,
                    line: line.to_owned(),
                });
            },
        )
        .await
    }

    /// Run `w`'s agent as a supervised process group in its worktree, within the
    /// plan's limits, its output shown live and its live cost counted for the run's
    /// budget. An error is why it could not run.
    async fn run_agent(
        &self,
        w: &PlannedWorker,
        adapter: &dyn Adapter,
        at: &Paths,
        confined: &Confinement,
        asked: Briefing,
        live: Live<'_>,
    ) -> Result<Supervised, String> {
        let Live {
            events,
            stop,
            spend,
            door,
        } = live;
        let agent = self.plan.agent_of(w);
        let limits = self.plan.limits_of(w);
        let timeout = limits.timeout.map(Duration::from_secs_f64);
        let ctx = WorkerContext {
            run_id: &self.plan.run_id,
            worker_id: w.id,
            task: &asked.prompt,
            model: w.model.as_deref(),
            branch: &w.branch,
            worktree: &at.worktree,
            max_steps: limits.max_steps,
            budget: limits.budget,
            timeout,
            result_file: &at.result_file,
            private_dir: &confined.private,
            sandboxed: confined.abi().is_some(),
        };
        let cmd = agent_command(adapter, agent, &ctx, door)?;
        let _ = events.send(Event::WorkerStarted {
            id: w.id,
            worktree: at.worktree.clone(),
            log: at.log.clone(),
        });
        let env = super::setup::with_vars(
            agent_env_with(
                self.base_env.iter().cloned(),
                &[cmd.env.clone(), asked.env, self.agent_token_vars(agent)].concat(),
                agent.allow_github_token,
            ),
            confined.env(),
        );
        let (line_events, id) = (events.clone(), w.id);
        let spec = ProcessSpec {
            program: &cmd.program,
            args: &cmd.args,
            cwd: &at.worktree,
            env,
            log: &at.log,
            timeout,
            grace: Duration::from_secs_f64(self.plan.limits.kill_grace),
            inactivity: self
                .plan
                .limits
                .inactivity_timeout
                .map(Duration::from_secs_f64),
            watch: adapter.watch(w.model.as_deref()),
            budget: limits.budget,
            max_steps: Some(limits.max_steps),
            run_budget: spend.reached(),
            gateway: Some(door.stop.clone()),
            on_progress: Some(Box::new(move |p: crate::agent::Progress| {
                if let Some(c) = p.cost {
                    spend.live(id, c);
                }
            })),
            confine: confined.prepared.as_ref(),
        };
        self.start_clock(w.id, timeout);
        let sup = supervise(spec, stop.clone(), move |line| {
            let _ = line_events.send(Event::WorkerOutput {
                id,
                line: line.to_owned(),
            });
        })
        .await
        .map_err(|e| format!("could not start `{}`: {e}", cmd.program))?;
        if sup.ending == Ending::TimedOut {
            let _ = events.send(Event::WorkerTimedOut { id: w.id });
        }
        Ok(sup)
    }

    /// Worker `id`'s agent starts now: its deadline in the gateway (no rate-limit wait
    /// lasts past it) counts from now, as its `timeout` does; its checkout and setup
    /// took none of it.
    fn start_clock(&self, id: u32, timeout: Option<Duration>) {
        if let Some(t) = timeout {
            self.gateway.set_deadline(id, std::time::Instant::now() + t);
        }
    }

    /// Commit leftovers, diff, and decide the final status.
    async fn finish_harvest(
        &self,
        mut result: WorkerResult,
        w: &PlannedWorker,
        base: Oid,
        ran: Option<(Supervised, AgentOutcome)>,
        stop: &watch::Receiver<StopLevel>,
        confined: &Confinement,
    ) -> WorkerResult {
        let Some(path) = result.worktree_path.clone() else {
            return result;
        };
        let (harvested, tampered) = match self.commit(w, path, base).await {
            Ok(h) => h,
            Err(why) => {
                result.status = Status::Failed;
                result.reason = Some(why.into());
                return result;
            }
        };
        result.commit = Some(harvested.commit.to_string());
        result.committed_by_fanout = harvested.committed;
        result.files_modified = harvested.files_modified;
        if let Some(why) = tampered {
            result.status = Status::Failed;
            result.reason = Some(why.into());
            return result;
        }
        let Some((sup, outcome)) = ran else {
            // The agent never ran: the reason is already set.
            result.status = Status::Failed;
            return result;
        };
        let limits = self.plan.limits_of(w);
        let (status, reason) = decide(
            &sup,
            &outcome,
            result.files_modified.is_empty(),
            limits.budget,
            limits.timeout,
            self.plan.limits.inactivity_timeout,
        );
        result.status = status;
        let mut notes: Vec<Reason> = reason.into_iter().collect();
        if w.task.output == TaskOutput::Findings {
            findings_outcome(&mut result, &mut notes);
        }
        // Checks decide success: run them on the committed result of any worker that
        // could still count (success or partial); a failed check fails the worker.
        if !self.plan.checks_of(w).is_empty() && matches!(status, Status::Success | Status::Partial)
        {
            self.check(&mut result, w, stop, confined, &mut notes).await;
        }
        if let Some(n) = harvested.note {
            notes.push(n.into());
        }
        if sup.stragglers {
            notes.push("agent left processes running; fanout stopped them before harvest".into());
        }
        if sup.supervisor_lost {
            notes.push(
                "the agent's supervisor was killed; what the agent left outside its process \
                 group was stopped only at the end of the run"
                    .into(),
            );
        }
        if sup.pipes_leaked {
            notes.push("a process outside the agent's group kept its output open".into());
        }
        result.reason = Reason::join(notes);
        result
    }

    /// Commit what the agent left in the worktree at `path` on `w`'s branch, and what
    /// changed since `base`; an error says why harvest failed. With the harvest: why the
    /// worker fails when the agent changed the files that tie its worktree to the
    /// repository (put back before harvesting).
    async fn commit(
        &self,
        w: &PlannedWorker,
        path: PathBuf,
        base: Oid,
    ) -> Result<(Harvest, Option<String>), String> {
        let common = self.common_dir.clone();
        let name = worktree::worktree_name(&self.plan.run_id, w.id);
        let scratch = self.run_dir.join("harvest");
        let branch = w.branch.clone();
        let identity = self.identity.clone();
        let message = commit_message(
            &w.task.prompt,
            &w.agent,
            w.model.as_deref(),
            w.id,
            &self.plan.run_id,
        );
        let (exclude, filters) = (self.plan.exclude.clone(), self.trusted.clone());
        // Not given up when the run is stopped: what the agent did is still committed.
        let permit = Arc::clone(&self.harvests).acquire_owned().await;
        // Journaled first: a harvest cut short may have made the branch (cleanup
        // removes it only if it is there).
        let _ = self.journal.update(w.id, |e| e.branch_created = true);
        let harvested = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let changed = super::links::check_admin(&common, &name, &path, true)
                .map_err(|e| format!("its worktree's git files could not be restored: {e}"))?;
            let spec = CommitSpec {
                identity: (&identity.0, &identity.1),
                message,
                exclude: &exclude,
                filters: &filters,
            };
            let wt = WorkerTree {
                common: &common,
                name: &name,
                path: &path,
                scratch: &scratch,
            };
            let h = harvest(&wt, &branch, base, &spec)
                .map_err(|e| format!("harvest failed: {}", e.message()))?;
            Ok::<_, String>((changed, h))
        })
        .await;
        let (changed, h) =
            harvested.unwrap_or_else(|_| Err("harvest failed: task panicked".into()))?;
        let tampered = (!changed.is_empty()).then(|| {
            format!(
                "changed what an agent must not: {} (its work is on its branch, not published)",
                changed.join(", ")
            )
        });
        Ok((h, tampered))
    }

    /// Run the plan's checks on `w`'s committed result; a failed (or interrupted)
    /// check fails the worker, its reason first among the `notes`.
    async fn check(
        &self,
        result: &mut WorkerResult,
        w: &PlannedWorker,
        stop: &watch::Receiver<StopLevel>,
        confined: &Confinement,
        notes: &mut Vec<Reason>,
    ) {
        let Some(dir) = result.worktree_path.clone() else {
            return;
        };
        let env = agent_env_with(
            self.base_env.iter().cloned(),
            &super::setup::worker_vars(
                &self.plan.run_id,
                w.id,
                &w.branch,
                &dir,
                result.setup.as_ref().and_then(|s| s.ports),
            ),
            false,
        );
        let env = super::setup::with_vars(env, confined.env());
        let site = super::checks::CheckSite {
            dir: &dir,
            env: &env,
            log_dir: &self.run_dir.join("logs"),
            worker_id: w.id,
            grace: Duration::from_secs_f64(self.plan.limits.kill_grace),
            confine: confined.prepared.as_ref(),
        };
        let checks = self.plan.checks_of(w);
        result.checks = super::checks::run(checks, site, stop.clone()).await;
        if let Some(why) = super::checks::failure(&result.checks, checks.len()) {
            result.status = Status::Failed;
            notes.insert(0, why.into());
        } else if result.checks.len() < checks.len() {
            result.status = Status::Failed;
            notes.insert(0, Reason::interrupted_with(" during checks"));
        }
    }
}

/// The command line of `agent` (read by `adapter`) for `ctx`, pointed at its door in
/// the gateway, its configuration prepared; an error is why it cannot run.
fn agent_command(
    adapter: &dyn Adapter,
    agent: &crate::agent::AgentSpec,
    ctx: &WorkerContext<'_>,
    door: &WorkerCredential,
) -> Result<crate::agent::CommandLine, String> {
    let mut cmd = adapter
        .command(ctx)
        .map_err(|e| format!("could not build the agent's command: {e}"))?;
    let model = crate::agent::door::ModelDoor {
        base_urls: &door.base_urls,
        key: &door.placeholder_key,
    };
    crate::agent::door::route_through(agent, model, &mut cmd);
    adapter
        .prepare(ctx)
        .and_then(|()| crate::agent::door::drop_login(agent, model, ctx))
        .map_err(|e| format!("could not prepare the agent's configuration: {e}"))?;
    Ok(cmd)
}

/// How a running agent is followed: events for the reporter, the stop channel, and
/// the run's spend (its live cost counts for the run's budget).
struct Live<'a> {
    events: &'a mpsc::UnboundedSender<Event>,
    stop: &'a watch::Receiver<StopLevel>,
    spend: Arc<Spend>,
    /// Its door in the run's gateway.
    door: &'a WorkerCredential,
}

/// What a worker's agent is asked: its prompt (a dependent's with its dependencies'
/// findings put in), and the variables setup and its dependencies add.
struct Briefing {
    prompt: String,
    env: Vec<(String, String)>,
}

impl Briefing {
    /// `w`'s prompt and `setup_env`, with what its dependencies gave it (their findings
    /// written into its private directory, `$FANOUT_FINDINGS_DIR` naming them).
    fn of(
        w: &PlannedWorker,
        given: Option<&Given>,
        confined: &Confinement,
        mut env: Vec<(String, String)>,
    ) -> std::io::Result<Briefing> {
        let Some(given) = given else {
            return Ok(Briefing {
                prompt: w.task.agent_prompt(),
                env,
            });
        };
        env.extend(given.write_files(&confined.private)?);
        Ok(Briefing {
            prompt: given.prompt.clone(),
            env,
        })
    }
}

/// Where a worker's things are.
struct Paths {
    /// Its worktree.
    worktree: PathBuf,
    /// Its log.
    log: PathBuf,
    /// `$FANOUT_RESULT`.
    result_file: PathBuf,
}

/// Largest `$FANOUT_RESULT` read.
const RESULT_FILE_MAX: u64 = 16 << 20;

/// What the agent reported (its result file, else its output), into `result`: exit,
/// signal, duration, steps and cost. The final report wins; what the live output said
/// fills what it lacks (an agent stopped mid-run prints no final report).
fn read_outcome(
    result: &mut WorkerResult,
    adapter: &dyn Adapter,
    sup: &Supervised,
    at: &Paths,
    w: &PlannedWorker,
) -> AgentOutcome {
    // (the agent may have left anything there: a link, a FIFO, a huge file)
    let file = crate::util::read_regular(&at.result_file, RESULT_FILE_MAX).ok();
    let observed = Observed {
        exit_code: sup.exit_code,
        signal: sup.signal,
        stdout_tail: &sup.stdout_tail,
        result_file: file.as_deref(),
        model: w.model.as_deref(),
    };
    let outcome = adapter.outcome(&observed);
    if w.task.output == TaskOutput::Findings {
        result.findings = adapter
            .findings(&observed)
            .and_then(|t| crate::agent::findings::bounded(&t));
    }
    result.exit_code = sup.exit_code;
    result.signal = sup.signal;
    result.duration = sup.duration.as_secs_f64();
    result.steps = outcome.steps.or(sup.progress.steps);
    (result.cost, result.cost_source) = match outcome.cost {
        Some(c) => (Some(c), adapter.cost_source(&outcome, &observed)),
        None => (sup.progress.cost, sup.progress_source),
    };
    outcome
}

/// What separates a reason from the log lines quoted after it.
pub const LOG_QUOTE: &str = " — log: ";

/// The reason of a worker whose agent ran and did not succeed quotes the last
/// meaningful lines of its log ([`super::excerpt`]); not for a worker interrupted or
/// whose agent never started (setup failed: its reason quotes the setup's output; or
/// not started: fanout's own reason, which resume and dependents read).
fn quote_log(result: &mut WorkerResult) {
    let agent_ran = result.exit_code.is_some() || result.signal.is_some();
    if !agent_ran
        || result.status.is_good()
        || result.status == Status::Skipped
        || result.reason.as_ref().is_some_and(|r| !r.is_final())
    {
        return;
    }
    let reason = result.reason.as_deref().unwrap_or_default().to_owned();
    let Some(log) = &result.log_path else { return };
    let reason = match sandbox_denial(result, log) {
        Some(why) if reason.is_empty() => why,
        Some(why) => format!("{reason}; {why}"),
        None => reason,
    };
    result.reason = (!reason.is_empty()).then(|| reason.clone().into());
    if let Some(lines) = super::excerpt::log_excerpt(log, &reason) {
        result.reason = Some(if reason.is_empty() {
            format!("log: {lines}").into()
        } else {
            format!("{reason}{LOG_QUOTE}{lines}").into()
        });
    }
}

/// For a sandboxed worker whose log says "Permission denied": which path the sandbox
/// refused (when a line names one) and what allows it; for a refused connection, what
/// lets the worker reach the network.
fn sandbox_denial(result: &WorkerResult, log: &std::path::Path) -> Option<String> {
    use super::excerpt::Denial;
    if !result.sandboxed {
        return None;
    }
    let what = match super::excerpt::denied(log, result.worktree_path.as_deref())? {
        Denial::Network => return Some(super::excerpt::NETWORK_ADVICE.to_owned()),
        Denial::Write(Some(p)) => format!("the sandbox denied writing {p}"),
        Denial::Write(None) => {
            "a write was denied (\"Permission denied\"), perhaps by the sandbox".to_owned()
        }
    };
    Some(format!(
        "{what}: the agent may write only its worktree and the paths of its `writable:` list; add the directory to `writable:` under `agents: {}:` in fanout.yml, or run with `--sandbox off`",
        result.agent
    ))
}

/// A findings task: succeeding without changing a file is its normal outcome; no final
/// message is worth a note.
fn findings_outcome(result: &mut WorkerResult, notes: &mut Vec<Reason>) {
    if result.status == Status::Unchanged {
        result.status = Status::Success;
    }
    if result.status == Status::Success && result.findings.is_none() {
        notes.push("the agent gave no final message (no findings)".into());
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

/// How fanout's stop went, when it stopped the agent.
fn how_stopped(sup: &Supervised) -> &'static str {
    if sup.killed {
        "; killed after the grace period"
    } else if sup.termed {
        "; the agent honoured SIGTERM"
    } else {
        ""
    }
}

/// The final status from what was observed and what the agent reported.
pub fn decide(
    sup: &Supervised,
    outcome: &AgentOutcome,
    no_changes: bool,
    budget: Option<f64>,
    timeout: Option<f64>,
    inactivity: Option<f64>,
) -> (Status, Option<Reason>) {
    let how = how_stopped(sup);
    if let Some(why) = sup.gateway_stop {
        let why = format!("stopped: by the gateway's measure of its model calls, {why}{how}");
        return (Status::Partial, Some(why.into()));
    }
    let (status, why) = match sup.ending {
        Ending::Interrupted => return (Status::Failed, Some(Reason::interrupted_with(how))),
        Ending::Exited => {
            let (status, why) = agent_verdict(outcome, no_changes, budget);
            return (status, why.map(Reason::from));
        }
        Ending::TimedOut => (
            Status::Timeout,
            format!(
                "{}{how}",
                timed_out_after(&format!(
                    "{}s",
                    format_secs(timeout.unwrap_or(sup.duration.as_secs_f64()))
                ))
            ),
        ),
        Ending::OverBudget => {
            let spent = sup.progress.cost.or(outcome.cost).unwrap_or(0.0);
            (
                Status::Partial,
                format!(
                    "budget exceeded (${spent:.4} of ${:.4}); stopped",
                    budget.unwrap_or(0.0)
                ),
            )
        }
        Ending::RunBudget => {
            // A cost the agent never reported is unknown, never $0.
            let spent = match sup.progress.cost.or(outcome.cost) {
                Some(c) => format!("this worker had spent ${c:.4}"),
                None => "this worker's cost is unknown".to_owned(),
            };
            (
                Status::Partial,
                format!("the run's budget_total was reached; stopped ({spent})"),
            )
        }
        Ending::MaxSteps => (
            Status::Partial,
            format!(
                "max steps reached ({} steps); stopped",
                sup.progress.steps.unwrap_or(0)
            ),
        ),
        Ending::Inactive => (
            Status::Timeout,
            format!(
                "no output for {}s (inactivity timeout); stopped",
                format_secs(inactivity.unwrap_or(0.0))
            ),
        ),
    };
    (status, Some(why.into()))
}

/// The status of an agent that exited on its own, from what it reported (and its
/// cost against `budget`), with the words why.
fn agent_verdict(
    outcome: &AgentOutcome,
    no_changes: bool,
    budget: Option<f64>,
) -> (Status, Option<String>) {
    let over_budget = match (budget, outcome.cost) {
        (Some(b), Some(c)) if c > b => Some(format!("budget exceeded: ${c:.4} of ${b:.4}")),
        _ => None,
    };
    match outcome.status {
        // What the agent noted (e.g. tools it was denied) may say why.
        // A tool it was denied is why it changed nothing: that is a failure. Otherwise
        // it decided nothing needed changing.
        AgentStatus::Success if no_changes => match &outcome.reason {
            Some(r) if r.starts_with(crate::agent::PERMISSION_DENIED) => (
                Status::Failed,
                Some(format!("agent finished but changed no files; {r}")),
            ),
            r => (Status::Unchanged, r.clone()),
        },
        AgentStatus::Success => match over_budget {
            Some(r) => (Status::Partial, Some(r)),
            None => (Status::Success, outcome.reason.clone()),
        },
        AgentStatus::Partial => (Status::Partial, outcome.reason.clone().or(over_budget)),
        AgentStatus::Failed => (Status::Failed, outcome.reason.clone()),
        AgentStatus::Timeout => (Status::Timeout, outcome.reason.clone()),
    }
}

fn format_secs(s: f64) -> String {
    if (s - s.round()).abs() < 1e-9 {
        format!("{}", s.round() as u64)
    } else {
        format!("{s:.1}")
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
        let skeleton = |id: u32| -> WorkerResult {
            serde_json::from_value(serde_json::json!({
                "worker_id": id, "branch": format!("b{id}"), "model": null,
                "status": "success", "steps": null, "cost": null, "duration": 0.0,
                "files_modified": [], "worktree_path": null, "task": "t", "agent": "a",
                "reason": null, "commit": null, "exit_code": null, "log_path": null,
            }))
            .unwrap()
        };
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

    fn sup(ending: Ending) -> Supervised {
        Supervised {
            exit_code: Some(0),
            signal: None,
            ending,
            duration: Duration::from_secs(1),
            stdout_tail: vec![],
            stragglers: false,
            termed: false,
            killed: false,
            supervisor_lost: false,
            pipes_leaked: false,
            progress: crate::agent::Progress::default(),
            progress_source: None,
            gateway_stop: None,
        }
    }
    fn out(status: AgentStatus, cost: Option<f64>) -> AgentOutcome {
        AgentOutcome {
            status,
            steps: None,
            cost,
            reason: None,
        }
    }

    #[test]
    fn nothing_to_change_is_unchanged_unless_a_tool_was_denied() {
        let s = sup(Ending::Exited);
        let ok = out(AgentStatus::Success, None);
        assert_eq!(
            decide(&s, &ok, true, None, None, None),
            (Status::Unchanged, None)
        );
        let denied = AgentOutcome {
            reason: Some("permission denied: Write".into()),
            ..ok
        };
        assert_eq!(
            decide(&s, &denied, true, None, None, None).0,
            Status::Failed
        );
    }

    #[test]
    fn a_stopped_agent_s_reason_says_how_it_stopped() {
        let ok = out(AgentStatus::Success, None);
        let honoured = Supervised {
            termed: true,
            ..sup(Ending::Interrupted)
        };
        let (status, reason) = decide(&honoured, &ok, false, None, None, None);
        assert_eq!(status, Status::Failed);
        assert_eq!(
            reason.as_deref(),
            Some("interrupted; the agent honoured SIGTERM")
        );
        let killed = Supervised {
            termed: true,
            killed: true,
            ..sup(Ending::TimedOut)
        };
        let (status, reason) = decide(&killed, &ok, false, None, Some(5.0), None);
        assert_eq!(status, Status::Timeout);
        assert_eq!(
            reason.as_deref(),
            Some("timed out after 5s; killed after the grace period")
        );
    }

    #[test]
    fn status_rules() {
        let s = sup(Ending::Exited);
        let ok = out(AgentStatus::Success, None);
        assert_eq!(decide(&s, &ok, false, None, None, None).0, Status::Success);
        // Claude Code denied the write: the reason says so.
        let denied = AgentOutcome {
            reason: Some("permission denied: Write".into()),
            ..out(AgentStatus::Success, Some(0.01))
        };
        let mut over = sup(Ending::OverBudget);
        over.progress.cost = Some(1.25);
        let mut steps = sup(Ending::MaxSteps);
        steps.progress.steps = Some(4);
        let cases: [Case<'_>; 7] = [
            (
                &s,
                &denied,
                true,
                [None, None, None],
                Status::Failed,
                "agent finished but changed no files; permission denied: Write",
            ),
            (
                &s,
                &out(AgentStatus::Success, Some(2.0)),
                false,
                [Some(1.0), None, None],
                Status::Partial,
                "budget exceeded: $2.0000 of $1.0000",
            ),
            (
                &sup(Ending::TimedOut),
                &ok,
                false,
                [None, Some(5.0), None],
                Status::Timeout,
                "timed out after 5s",
            ),
            (
                &sup(Ending::Interrupted),
                &ok,
                false,
                [None, None, None],
                Status::Failed,
                "interrupted",
            ),
            (
                &over,
                &ok,
                false,
                [Some(1.0), None, None],
                Status::Partial,
                "budget exceeded ($1.2500 of $1.0000); stopped",
            ),
            (
                &steps,
                &out(AgentStatus::Failed, None),
                false,
                [None, None, None],
                Status::Partial,
                "max steps reached (4 steps); stopped",
            ),
            (
                &sup(Ending::Inactive),
                &ok,
                false,
                [None, None, Some(30.0)],
                Status::Timeout,
                "no output for 30s (inactivity timeout); stopped",
            ),
        ];
        for case in cases {
            assert_decides(case);
        }
    }

    /// What the agent was seen doing, what it said, whether it changed nothing, the
    /// limits (budget, timeout, inactivity); the status and reason expected.
    type Case<'a> = (
        &'a Supervised,
        &'a AgentOutcome,
        bool,
        [Option<f64>; 3],
        Status,
        &'a str,
    );

    fn assert_decides((seen, said, empty, [budget, timeout, idle], status, reason): Case<'_>) {
        let (got, why) = decide(seen, said, empty, budget, timeout, idle);
        assert_eq!((got, why.as_deref()), (status, Some(reason)), "{reason}");
    }
}
