//! One worker's life, from its slot to its result: its worktree checked out (HEAD
//! detached at the base, a checkout permit per CPU), its door in the run's gateway,
//! its confinement and port block, then — once the tamper snapshot is taken — its
//! setup, its briefing, its agent ([`super::agent`]) and its end ([`super::finish`]).
//! A worker that ends before its agent runs gets its branch at the base.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use git2::Oid;
use tokio::sync::{mpsc, watch};

use super::agent::{Briefing, Live, Paths, read_outcome};
use super::spend::Spend;
use super::{Executor, slot};
use crate::gateway::WorkerCredential;
use crate::model::{Reason, Status, WorkerResult};
use crate::plan::PlannedWorker;
use crate::run::confine::{Confinement, Place};
use crate::run::event::{Event, StopLevel};
use crate::run::inputs::Given;
use crate::run::setup::ports::PortLease;
use crate::run::worktree;

/// What a worker gets once its worktree is checked out (see [`Executor::reserve`]).
struct Reserved {
    /// Its confinement.
    confined: std::io::Result<Confinement>,
    /// Its port block, held until the worker is done.
    ports: std::io::Result<PortLease>,
}

impl Executor {
    /// Log file of worker `id`.
    fn log_path(run_dir: &Path, id: u32) -> PathBuf {
        run_dir.join("logs").join(format!("w{id}.log"))
    }

    /// Run `w`, from the plan's base, or (a dependent) from its dependencies' merged
    /// branches with what they give it. Its door in the run's gateway opens once its
    /// worktree is checked out (its sandbox is pinned to the door's port) and closes
    /// once it is done; what the gateway measured goes in its result when its
    /// processes started.
    pub(super) async fn run_one_from(
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
            result.gateway = Some(crate::run::gated::record(&usage, result.cost));
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
        confined.add_env(crate::run::gated::proxy_vars(&door.proxy_url));
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
        // Journaled first, as harvest does: a kill between the two leaves no branch
        // that cleanup does not know of.
        let _ = self.journal.update(w.id, |e| e.branch_created = true);
        let _ = git2::Repository::open(&self.common_dir).and_then(|repo| {
            repo.reference(
                &format!("refs/heads/{}", w.branch),
                base,
                true,
                "fanout: worker ended before its agent ran",
            )
            .map(drop)
        });
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
        let ports = crate::run::setup::claim_ports(&self.plan.setup);
        let network = self
            .pin_network
            .then(|| crate::run::confine::pinned(door, ports.as_ref().ok()));
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
        (confined, ports): (&Confinement, std::io::Result<PortLease>),
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
            .prepare(w, (&at, base), (confined, ports), live.events, live.stop)
            .await;
        for message in &prepared.record.warnings {
            let _ = live.events.send(Event::Warning {
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
        // Named before it is made: a kill while git makes it leaves nothing the journal
        // does not name (resume and cleanup remove what it left).
        let noted = self.journal.update(w.id, |e| {
            e.worktree_created = true;
            e.worktree_incomplete = true;
        });
        if let Err(e) = noted {
            let why = format!("could not create worktree: journal: {e}").into();
            return Err(self.skeleton(w, Status::Failed, why));
        }
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
                let _ = self.journal.update(w.id, |e| e.worktree_incomplete = false);
                Ok((base, path))
            }
            Ok(Err(e)) => {
                // Undone ([`worktree::create`]): nothing of it is left.
                let _ = self.journal.update(w.id, |e| {
                    e.worktree_created = false;
                    e.worktree_incomplete = false;
                });
                let why = format!("could not create worktree: {e}").into();
                Err(self.skeleton(w, Status::Failed, why))
            }
            Err(_) => {
                let why = "could not create worktree: task failed".into();
                Err(self.skeleton(w, Status::Failed, why))
            }
        }
    }

    /// Worktree setup for `w` ([`crate::run::setup::prepare`]), its output shown live.
    async fn prepare(
        &self,
        w: &PlannedWorker,
        (at, start): (&Paths, Oid),
        (confined, ports): (&Confinement, std::io::Result<PortLease>),
        events: &mpsc::UnboundedSender<Event>,
        stop: &watch::Receiver<StopLevel>,
    ) -> crate::run::setup::SetupOutcome {
        let setup_events = events.clone();
        let id = w.id;
        let start = start.to_string();
        crate::run::setup::prepare(
            &self.plan.setup,
            &crate::run::setup::Worker {
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
                base: &self.plan.base.commit,
                start: &start,
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
}
