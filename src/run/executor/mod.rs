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
//! The executor owns no terminal output: it sends typed [`Event`](super::event::Event)s
//! to a reporter. Stopping is driven by a [`StopLevel`] watch channel that the signal
//! dispatcher ([`super::signals`]) owns.
//!
//! How the pieces fit. This file holds the [`Executor`] (what a run's workers share:
//! the plan, the repository, the permits, the gateway, the tamper guard) and the
//! helpers every part uses (a permit unless stopped, a result for a worker that never
//! ran, the tamper guard's hooks). Each part below adds its methods to it; a part
//! imports this file and only parts listed after it (the layout test forbids cycles):
//!
//! - [`schedule`]: [`Executor::run`], the whole run: the concurrency cap, the order
//!   workers start in, a dependent's wait for its dependencies, the run's budget
//!   before each start, a result for every worker, and each final result posted to
//!   dependents and reported as an event;
//! - [`dependencies`]: a dependent's base, made from its dependencies' branches (the
//!   first success of each task, merged), or why it cannot run;
//! - [`worker`]: one worker's life: checkout, door in the gateway, confinement, setup,
//!   then its agent ([`agent`]) and its end ([`finish`]); its branch at the base when
//!   it ends before its agent runs;
//! - [`agent`]: the agent's run as a supervised process group, and what it reported;
//! - [`finish`]: harvest (its worktree's git files checked and put back first), the
//!   plan's checks, and the notes of its final reason;
//! - [`verdict`]: the status and reason from what the agent did, and the log lines a
//!   failure's reason quotes;
//! - [`spend`]: what the run has spent against `budget_total` (leaf).

mod agent;
mod dependencies;
mod finish;
mod schedule;
mod spend;
mod verdict;
mod worker;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{Semaphore, watch};

use super::event::StopLevel;
use super::journal::JournalHandle;
use crate::git::TrustedConfig;
use crate::model::{Reason, Status, WorkerResult};
use crate::plan::{Plan, PlannedWorker};

pub use spend::spent_by;

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

impl Executor {
    /// The tamper guard's watch of worker `id` starts.
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

    /// A result for a worker that did not get to run its agent.
    fn skeleton(&self, w: &PlannedWorker, status: Status, reason: Reason) -> WorkerResult {
        WorkerResult {
            attempt: self.attempt,
            ..w.result(status, reason)
        }
    }
}
