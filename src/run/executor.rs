//! Running a plan locally: one worktree per worker, agents as supervised process
//! groups, at most `concurrency` at once, every worker harvested into a
//! [`WorkerResult`] whatever happens (failure to start, timeout, interruption).
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

use super::event::{Event, StopLevel};
use super::harvest::{CommitSpec, commit_message, harvest};
use super::journal::JournalHandle;
use super::process::{Ending, ProcessSpec, Supervised, supervise};
use super::worktree;
use crate::agent::{AgentOutcome, AgentStatus, Observed, WorkerContext, agent_env_with};
use crate::model::{Status, WorkerResult};
use crate::plan::{Plan, PlannedWorker};

/// The reason of workers `budget_total` kept from starting (the report counts them).
pub const NOT_STARTED_BUDGET: &str = "not started: the run's budget";

/// Workers' final results, by id, for the workers that depend on them.
type Done = BTreeMap<u32, watch::Sender<Option<WorkerResult>>>;

/// Make `r` final for the workers waiting on it.
fn post(done: &Done, r: &WorkerResult) {
    if let Some(tx) = done.get(&r.worker_id) {
        tx.send_replace(Some(r.clone()));
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
/// costs, for `budget_total`.
#[derive(Debug, Default)]
pub struct Spend {
    finished: Mutex<f64>,
    live: Mutex<BTreeMap<u32, f64>>,
}

impl Spend {
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
    /// fanout's environment, before scrubbing.
    pub base_env: Vec<(OsString, OsString)>,
    /// Results of workers that finished in an earlier attempt (`fanout resume`):
    /// they are not run again, and count for dependents and the run's budget.
    pub kept: BTreeMap<u32, WorkerResult>,
    /// Which attempt at the run this is (1, then one more per resume).
    pub attempt: u32,
}

impl Executor {
    /// Log file of worker `id`.
    pub fn log_path(run_dir: &Path, id: u32) -> PathBuf {
        run_dir.join("logs").join(format!("w{id}.log"))
    }

    /// `$FANOUT_RESULT` of worker `id`.
    pub fn result_file_path(run_dir: &Path, id: u32) -> PathBuf {
        run_dir.join("agent-results").join(format!("w{id}.json"))
    }

    /// Run every worker; returns one result per planned worker, in id order.
    pub async fn run(
        self: Arc<Self>,
        events: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
    ) -> Vec<WorkerResult> {
        for dir in ["logs", "agent-results"] {
            let _ = std::fs::create_dir_all(self.run_dir.join(dir));
        }
        // libgit2 makes `<git dir>/worktrees` on first use and fails when two workers
        // race to make it: make it once, up front.
        if let Ok(repo) = git2::Repository::open(&self.repo_dir) {
            let _ = std::fs::create_dir_all(repo.commondir().join("worktrees"));
        }
        // Workers start in plan order: the dispatcher hands out slots one by one and
        // stops handing them out once a stop is requested.
        let permits = Arc::new(Semaphore::new(self.plan.concurrency.max(1) as usize));
        let spend = Arc::new(Spend::default());
        let mut set = JoinSet::new();
        let mut not_started = Vec::new();
        let mut over_budget = Vec::new();
        let mut dispatch_stop = stop.clone();
        // Each worker's result, as soon as it is final, for the workers that depend on it.
        let done: Arc<Done> = Arc::new(
            self.plan
                .workers
                .iter()
                .map(|w| (w.id, watch::channel(None).0))
                .collect(),
        );
        for r in self.kept.values() {
            spend.finish(r.worker_id, r.cost);
            post(&done, r);
        }
        for w in self.plan.workers.iter().cloned() {
            if let Some(r) = self.kept.get(&w.id).cloned() {
                set.spawn(async move { (w.id, r) });
                continue;
            }
            if !w.depends_on.is_empty() {
                // A dependent waits for its dependencies without holding a slot, then
                // queues for one like everyone else.
                let deps: Vec<watch::Receiver<Option<WorkerResult>>> = w
                    .depends_on
                    .iter()
                    .filter_map(|d| done.get(d).map(watch::Sender::subscribe))
                    .collect();
                let (ex, events, stop, spend, permits, done) = (
                    Arc::clone(&self),
                    events.clone(),
                    stop.clone(),
                    Arc::clone(&spend),
                    Arc::clone(&permits),
                    Arc::clone(&done),
                );
                set.spawn(async move {
                    let id = w.id;
                    let mut finished = Vec::new();
                    for mut rx in deps {
                        if let Ok(v) = rx.wait_for(Option::is_some).await {
                            finished.extend(v.clone());
                        }
                    }
                    let result = match ex.dependency_base(&w, &finished) {
                        Err((status, reason)) => ex.skeleton(&w, status, &reason),
                        Ok(base) => match slot(&permits, &mut stop.clone()).await {
                            None => ex.skeleton(&w, Status::Failed, "interrupted"),
                            Some(permit) => {
                                let r = ex
                                    .run_one_from(
                                        w.clone(),
                                        events.clone(),
                                        stop,
                                        Arc::clone(&spend),
                                        Some(base),
                                    )
                                    .await;
                                spend.finish(id, r.cost);
                                drop(permit);
                                r
                            }
                        },
                    };
                    post(&done, &result);
                    let _ = events.send(Event::WorkerFinished(Box::new(result.clone())));
                    (id, result)
                });
                continue;
            }
            let Some(permit) = slot(&permits, &mut dispatch_stop).await else {
                not_started.push(w);
                continue;
            };
            if let Some(total) = self.plan.limits.budget_total {
                let spent = spend.total();
                if spent >= total {
                    over_budget.push((w, spent, total));
                    continue;
                }
            }
            let ex = Arc::clone(&self);
            let events = events.clone();
            let stop = stop.clone();
            let spend = Arc::clone(&spend);
            let done = Arc::clone(&done);
            set.spawn(async move {
                let id = w.id;
                let result = ex
                    .run_one(w, events.clone(), stop, Arc::clone(&spend))
                    .await;
                spend.finish(id, result.cost);
                drop(permit);
                post(&done, &result);
                let _ = events.send(Event::WorkerFinished(Box::new(result.clone())));
                (id, result)
            });
        }
        for (w, spent, total) in over_budget {
            let r = self.skeleton(
                &w,
                Status::Failed,
                &format!(
                    "{} of ${total:.4} was spent (${spent:.4})",
                    NOT_STARTED_BUDGET
                ),
            );
            post(&done, &r);
            let _ = events.send(Event::WorkerFinished(Box::new(r.clone())));
            set.spawn(async move { (w.id, r) });
        }
        for w in not_started {
            let r = self.skeleton(&w, Status::Failed, "interrupted");
            post(&done, &r);
            let _ = events.send(Event::WorkerFinished(Box::new(r.clone())));
            set.spawn(async move { (w.id, r) });
        }
        let mut results: Vec<WorkerResult> = Vec::with_capacity(self.plan.workers.len());
        while let Some(joined) = set.join_next().await {
            if let Ok((_, r)) = joined {
                results.push(r);
            }
        }
        // A worker task that panicked still gets a row.
        for w in &self.plan.workers {
            if !results.iter().any(|r| r.worker_id == w.id) {
                let r = self.skeleton(
                    &w.clone(),
                    Status::Failed,
                    "internal error: worker task panicked",
                );
                let _ = events.send(Event::WorkerFinished(Box::new(r.clone())));
                results.push(r);
            }
        }
        results.sort_by_key(|r| r.worker_id);
        results
    }

    /// A result for a worker that did not get to run its agent.
    fn skeleton(&self, w: &PlannedWorker, status: Status, reason: &str) -> WorkerResult {
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
            reason: Some(reason.to_owned()),
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
    /// success of each task it depends on), merged when there are several. An error
    /// is the status and reason the worker ends with instead of running.
    fn dependency_base(
        &self,
        w: &PlannedWorker,
        finished: &[WorkerResult],
    ) -> Result<Oid, (Status, String)> {
        if finished
            .iter()
            .any(|r| r.reason.as_deref() == Some("interrupted"))
        {
            return Err((Status::Failed, "interrupted".into()));
        }
        let mut picked: Vec<&WorkerResult> = Vec::new();
        for task in &w.task.depends_on {
            let mut of_task: Vec<&WorkerResult> = finished
                .iter()
                .filter(|r| r.task_id.as_deref() == Some(task.as_str()))
                .collect();
            of_task.sort_by_key(|r| r.worker_id);
            match of_task.iter().find(|r| r.status == Status::Success) {
                Some(r) => picked.push(r),
                None => {
                    let why = of_task
                        .first()
                        .map(|r| {
                            format!(
                                " (#{}: {}{})",
                                r.worker_id,
                                r.status,
                                r.reason
                                    .as_deref()
                                    .map(|x| format!(": {x}"))
                                    .unwrap_or_default()
                            )
                        })
                        .unwrap_or_default();
                    return Err((
                        Status::Skipped,
                        format!("dependency {task} did not succeed{why}"),
                    ));
                }
            }
        }
        let commits: Vec<Oid> = picked
            .iter()
            .filter_map(|r| r.commit.as_deref()?.parse().ok())
            .collect();
        let (first, rest) = commits
            .split_first()
            .ok_or((Status::Failed, "dependencies left no commit".to_owned()))?;
        let repo = git2::Repository::open(&self.repo_dir)
            .map_err(|e| (Status::Failed, format!("git: {}", e.message())))?;
        let mut acc = *first;
        for (k, next) in rest.iter().enumerate() {
            let git = |e: git2::Error| {
                (
                    Status::Failed,
                    format!("merging dependencies: {}", e.message()),
                )
            };
            if repo.graph_descendant_of(acc, *next).map_err(git)? || acc == *next {
                continue;
            }
            if repo.graph_descendant_of(*next, acc).map_err(git)? {
                acc = *next;
                continue;
            }
            let ours = repo.find_commit(acc).map_err(git)?;
            let theirs = repo.find_commit(*next).map_err(git)?;
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
                        picked[k + 1].worker_id,
                        paths.join(", ")
                    ),
                ));
            }
            let tree = repo
                .find_tree(index.write_tree_to(&repo).map_err(git)?)
                .map_err(git)?;
            let sig = git2::Signature::now(&self.identity.0, &self.identity.1).map_err(git)?;
            acc = repo
                .commit(
                    None,
                    &sig,
                    &sig,
                    &format!("fanout: merge the dependencies of worker {}", w.id),
                    &tree,
                    &[&ours, &theirs],
                )
                .map_err(git)?;
        }
        Ok(acc)
    }

    async fn run_one_from(
        &self,
        w: PlannedWorker,
        events: mpsc::UnboundedSender<Event>,
        stop: watch::Receiver<StopLevel>,
        spend: Arc<Spend>,
        base_override: Option<Oid>,
    ) -> WorkerResult {
        if *stop.borrow() != StopLevel::Run {
            return self.skeleton(&w, Status::Failed, "interrupted");
        }

        // Make the worktree.
        let base: Oid = match base_override.map_or_else(|| self.plan.base.commit.parse(), Ok) {
            Ok(o) => o,
            Err(_) => return self.skeleton(&w, Status::Failed, "plan has an invalid base commit"),
        };
        let name = worktree::worktree_name(&self.plan.run_id, w.id);
        let path = worktree::worktree_path(&self.worktree_root, &self.plan.run_id, w.id);
        let made = {
            let (repo_dir, name, path, branch) = (
                self.repo_dir.clone(),
                name.clone(),
                path.clone(),
                w.branch.clone(),
            );
            tokio::task::spawn_blocking(move || {
                worktree::create(&repo_dir, &name, &path, &branch, base)
            })
            .await
        };
        match made {
            Ok(Ok(())) => {
                let _ = self.journal.update(w.id, |e| {
                    e.branch_created = true;
                    e.worktree_created = true;
                });
            }
            Ok(Err(e)) => {
                return self.skeleton(
                    &w,
                    Status::Failed,
                    &format!("could not create worktree: {e}"),
                );
            }
            Err(_) => {
                return self.skeleton(&w, Status::Failed, "could not create worktree: task failed");
            }
        }
        let mut result = self.skeleton(&w, Status::Failed, "interrupted");
        result.worktree_path = Some(path.clone());
        result.base_commit = base_override.map(|b| b.to_string());
        if *stop.borrow() != StopLevel::Run {
            result.commit = Some(base.to_string());
            return result;
        }

        // Run the agent.
        let log = Self::log_path(&self.run_dir, w.id);
        let result_file = Self::result_file_path(&self.run_dir, w.id);
        let _ = std::fs::remove_file(&result_file);
        result.log_path = Some(log.clone());

        // Prepare the worktree: a port block (held until this worker is done), copied
        // files, submodules, setup commands. A failure there fails the worker, and the
        // agent never starts.
        let setup_events = events.clone();
        let id = w.id;
        let prepared = super::setup::prepare(
            &self.plan.setup,
            &super::setup::Worker {
                run_id: &self.plan.run_id,
                worker_id: w.id,
                branch: &w.branch,
                checkout: &self.repo_dir,
                worktree_root: &self.worktree_root,
                worktree: &path,
                log: &log,
                base_env: &self.base_env,
                grace: Duration::from_secs_f64(self.plan.limits.kill_grace),
            },
            stop.clone(),
            move |line: &str| {
                let _ = setup_events.send(Event::WorkerOutput {
                    id,
                    line: line.to_owned(),
                });
            },
        )
        .await;
        result.setup = Some(prepared.record);
        let _ports = prepared.lease;
        if let Some(why) = prepared.failure {
            result.reason = Some(why);
            result.commit = Some(base.to_string());
            return result;
        }

        let limits = &self.plan.limits;
        let timeout = limits.timeout_per_worker.map(Duration::from_secs_f64);
        let ctx = WorkerContext {
            run_id: &self.plan.run_id,
            worker_id: w.id,
            task: &w.task.prompt,
            model: w.model.as_deref(),
            branch: &w.branch,
            worktree: &path,
            max_steps: limits.max_steps,
            budget: limits.budget_per_worker,
            timeout,
            result_file: &result_file,
        };
        let adapter = self.plan.agent.adapter();
        let cmd = match adapter.command(&ctx) {
            Ok(c) => c,
            Err(e) => {
                result.reason = Some(format!("could not build the agent's command: {e}"));
                return self.finish_harvest(result, &w, base, None, &stop).await;
            }
        };
        let _ = events.send(Event::WorkerStarted {
            id: w.id,
            worktree: path.clone(),
            log: log.clone(),
        });
        let env = agent_env_with(
            self.base_env.iter().cloned(),
            &[cmd.env.clone(), prepared.env].concat(),
            self.plan.agent.allow_github_token,
        );
        let line_events = events.clone();
        let id = w.id;
        let spec = ProcessSpec {
            program: &cmd.program,
            args: &cmd.args,
            cwd: &path,
            env,
            log: &log,
            timeout,
            grace: Duration::from_secs_f64(limits.kill_grace),
            inactivity: limits.inactivity_timeout.map(Duration::from_secs_f64),
            watch: adapter.watch(w.model.as_deref()),
            budget: limits.budget_per_worker,
            max_steps: Some(limits.max_steps),
            on_progress: Some(Box::new(move |p: crate::agent::Progress| {
                if let Some(c) = p.cost {
                    spend.live(id, c);
                }
            })),
        };
        let supervised = supervise(spec, stop.clone(), move |line| {
            let _ = line_events.send(Event::WorkerOutput {
                id,
                line: line.to_owned(),
            });
        })
        .await;
        let sup = match supervised {
            Ok(s) => s,
            Err(e) => {
                result.reason = Some(format!("could not start `{}`: {e}", cmd.program));
                return self.finish_harvest(result, &w, base, None, &stop).await;
            }
        };
        if sup.ending == Ending::TimedOut {
            let _ = events.send(Event::WorkerTimedOut { id: w.id });
        }
        let file = std::fs::read(&result_file).ok();
        let observed = Observed {
            exit_code: sup.exit_code,
            signal: sup.signal,
            stdout_tail: &sup.stdout_tail,
            result_file: file.as_deref(),
            model: w.model.as_deref(),
        };
        let outcome = adapter.outcome(&observed);
        result.exit_code = sup.exit_code;
        result.signal = sup.signal;
        result.duration = sup.duration.as_secs_f64();
        // The final report wins; what the live output said fills what it lacks (an
        // agent stopped mid-run prints no final report).
        result.steps = outcome.steps.or(sup.progress.steps);
        (result.cost, result.cost_source) = match outcome.cost {
            Some(c) => (Some(c), adapter.cost_source(&outcome, &observed)),
            None => (sup.progress.cost, sup.progress_source),
        };
        self.finish_harvest(result, &w, base, Some((sup, outcome)), &stop)
            .await
    }

    /// Commit leftovers, diff, and decide the final status.
    async fn finish_harvest(
        &self,
        mut result: WorkerResult,
        w: &PlannedWorker,
        base: Oid,
        ran: Option<(Supervised, AgentOutcome)>,
        stop: &watch::Receiver<StopLevel>,
    ) -> WorkerResult {
        let Some(path) = result.worktree_path.clone() else {
            return result;
        };
        let message = commit_message(
            &w.task.prompt,
            &w.agent,
            w.model.as_deref(),
            w.id,
            &self.plan.run_id,
        );
        let exclude = self.plan.exclude.clone();
        let identity = self.identity.clone();
        let branch = w.branch.clone();
        let harvested = tokio::task::spawn_blocking(move || {
            let spec = CommitSpec {
                identity: (&identity.0, &identity.1),
                message,
                exclude: &exclude,
            };
            harvest(&path, &branch, base, &spec)
        })
        .await;
        let harvested = match harvested {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => {
                result.status = Status::Failed;
                result.reason = Some(format!("harvest failed: {}", e.message()));
                return result;
            }
            Err(_) => {
                result.status = Status::Failed;
                result.reason = Some("harvest failed: task panicked".into());
                return result;
            }
        };
        result.commit = Some(harvested.commit.to_string());
        result.committed_by_fanout = harvested.committed;
        result.files_modified = harvested.files_modified;
        let Some((sup, outcome)) = ran else {
            // The agent never ran: the reason is already set.
            result.status = Status::Failed;
            return result;
        };
        let (status, reason) = decide(
            &sup,
            &outcome,
            result.files_modified.is_empty(),
            self.plan.limits.budget_per_worker,
            self.plan.limits.timeout_per_worker,
            self.plan.limits.inactivity_timeout,
        );
        result.status = status;
        let mut notes: Vec<String> = reason.into_iter().collect();
        // Checks decide success: run them on the committed result of any worker that
        // could still count (success or partial); a failed check fails the worker.
        if !self.plan.checks.is_empty()
            && matches!(status, Status::Success | Status::Partial)
            && let Some(dir) = result.worktree_path.clone()
        {
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
            result.checks = super::checks::run(
                &self.plan.checks,
                &dir,
                &env,
                &self.run_dir.join("logs"),
                w.id,
                Duration::from_secs_f64(self.plan.limits.kill_grace),
                stop.clone(),
            )
            .await;
            if let Some(why) = super::checks::failure(&result.checks, self.plan.checks.len()) {
                result.status = Status::Failed;
                notes.insert(0, why);
            } else if result.checks.len() < self.plan.checks.len() {
                result.status = Status::Failed;
                notes.insert(0, "interrupted during checks".to_owned());
            }
        }
        if let Some(n) = harvested.note {
            notes.push(n);
        }
        if sup.stragglers {
            notes.push("agent left processes running; fanout stopped them".into());
        }
        if sup.pipes_leaked {
            notes.push("a process outside the agent's group kept its output open".into());
        }
        result.reason = (!notes.is_empty()).then(|| notes.join("; "));
        result
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
) -> (Status, Option<String>) {
    match sup.ending {
        Ending::Interrupted => return (Status::Failed, Some("interrupted".into())),
        Ending::TimedOut => {
            let how = if sup.killed {
                "; killed after the grace period"
            } else {
                ""
            };
            return (
                Status::Timeout,
                Some(format!(
                    "timed out after {}s{how}",
                    format_secs(timeout.unwrap_or(sup.duration.as_secs_f64()))
                )),
            );
        }
        Ending::OverBudget => {
            let spent = sup.progress.cost.or(outcome.cost).unwrap_or(0.0);
            return (
                Status::Partial,
                Some(format!(
                    "budget exceeded (${spent:.4} of ${:.4}); stopped",
                    budget.unwrap_or(0.0)
                )),
            );
        }
        Ending::MaxSteps => {
            return (
                Status::Partial,
                Some(format!(
                    "max steps reached ({} steps); stopped",
                    sup.progress.steps.unwrap_or(0)
                )),
            );
        }
        Ending::Inactive => {
            return (
                Status::Timeout,
                Some(format!(
                    "no output for {}s (inactivity timeout); stopped",
                    format_secs(inactivity.unwrap_or(0.0))
                )),
            );
        }
        Ending::Exited => {}
    }
    let over_budget = match (budget, outcome.cost) {
        (Some(b), Some(c)) if c > b => Some(format!("budget exceeded: ${c:.4} of ${b:.4}")),
        _ => None,
    };
    match outcome.status {
        // What the agent noted (e.g. tools it was denied) may say why.
        AgentStatus::Success if no_changes => (
            Status::Failed,
            Some(match &outcome.reason {
                Some(r) => format!("agent finished but changed no files; {r}"),
                None => "agent finished but changed no files".into(),
            }),
        ),
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

    fn sup(ending: Ending) -> Supervised {
        Supervised {
            exit_code: Some(0),
            signal: None,
            ending,
            duration: Duration::from_secs(1),
            stdout_tail: vec![],
            stragglers: false,
            killed: false,
            pipes_leaked: false,
            progress: crate::agent::Progress::default(),
            progress_source: None,
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
    fn status_rules() {
        let s = sup(Ending::Exited);
        assert_eq!(
            decide(
                &s,
                &out(AgentStatus::Success, None),
                false,
                None,
                None,
                None
            )
            .0,
            Status::Success
        );
        assert_eq!(
            decide(&s, &out(AgentStatus::Success, None), true, None, None, None),
            (
                Status::Failed,
                Some("agent finished but changed no files".into())
            )
        );
        // Claude Code denied the write: the reason says so.
        let denied = AgentOutcome {
            reason: Some("permission denied: Write".into()),
            ..out(AgentStatus::Success, Some(0.01))
        };
        assert_eq!(
            decide(&s, &denied, true, None, None, None),
            (
                Status::Failed,
                Some("agent finished but changed no files; permission denied: Write".into())
            )
        );
        assert_eq!(
            decide(
                &s,
                &out(AgentStatus::Success, Some(2.0)),
                false,
                Some(1.0),
                None,
                None
            ),
            (
                Status::Partial,
                Some("budget exceeded: $2.0000 of $1.0000".into())
            )
        );
        assert_eq!(
            decide(
                &sup(Ending::TimedOut),
                &out(AgentStatus::Success, None),
                false,
                None,
                Some(5.0),
                None
            ),
            (Status::Timeout, Some("timed out after 5s".into()))
        );
        assert_eq!(
            decide(
                &sup(Ending::Interrupted),
                &out(AgentStatus::Success, None),
                false,
                None,
                None,
                None
            ),
            (Status::Failed, Some("interrupted".into()))
        );
        let mut over = sup(Ending::OverBudget);
        over.progress.cost = Some(1.25);
        assert_eq!(
            decide(
                &over,
                &out(AgentStatus::Success, None),
                false,
                Some(1.0),
                None,
                None
            ),
            (
                Status::Partial,
                Some("budget exceeded ($1.2500 of $1.0000); stopped".into())
            )
        );
        let mut steps = sup(Ending::MaxSteps);
        steps.progress.steps = Some(4);
        assert_eq!(
            decide(
                &steps,
                &out(AgentStatus::Failed, None),
                false,
                None,
                None,
                None
            ),
            (
                Status::Partial,
                Some("max steps reached (4 steps); stopped".into())
            )
        );
        assert_eq!(
            decide(
                &sup(Ending::Inactive),
                &out(AgentStatus::Success, None),
                false,
                None,
                None,
                Some(30.0)
            ),
            (
                Status::Timeout,
                Some("no output for 30s (inactivity timeout); stopped".into())
            )
        );
    }
}
