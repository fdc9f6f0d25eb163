//! A worker's end, once its agent ran (or could not start): what it left committed
//! on its branch (harvest, after its worktree's git files are checked and put back:
//! an agent that changed them fails), its verdict ([`super::verdict`]), the plan's
//! checks on the committed result, and the notes its final reason carries.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use git2::Oid;
use tokio::sync::watch;

use super::Executor;
use super::verdict::{decide, findings_outcome};
use crate::agent::{AgentOutcome, agent_env_with};
use crate::config::TaskOutput;
use crate::model::{Reason, Status, WorkerResult};
use crate::plan::PlannedWorker;
use crate::run::confine::Confinement;
use crate::run::event::StopLevel;
use crate::run::harvest::{CommitSpec, Harvest, WorkerTree, commit_message, harvest};
use crate::run::process::Supervised;
use crate::run::worktree;

impl Executor {
    /// Commit leftovers, diff, and decide the final status.
    pub(super) async fn finish_harvest(
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
            let changed = crate::run::links::check_admin(&common, &name, &path, true)
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
                crate::util::some_of(&changed, 10, ", ")
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
            &crate::run::setup::worker_vars(
                &self.plan.run_id,
                w.id,
                &w.branch,
                &dir,
                result.setup.as_ref().and_then(|s| s.ports),
            ),
            false,
        );
        let env = crate::run::setup::with_vars(env, confined.env());
        let site = crate::run::checks::CheckSite {
            dir: &dir,
            env: &env,
            log_dir: &self.run_dir.join("logs"),
            worker_id: w.id,
            grace: Duration::from_secs_f64(self.plan.limits.kill_grace),
            confine: confined.prepared.as_ref(),
        };
        let checks = self.plan.checks_of(w);
        result.checks = crate::run::checks::run(checks, site, stop.clone()).await;
        if let Some(why) = crate::run::checks::failure(&result.checks, checks.len()) {
            result.status = Status::Failed;
            notes.insert(0, why.into());
        } else if result.checks.len() < checks.len() {
            result.status = Status::Failed;
            notes.insert(0, Reason::interrupted_with(" during checks"));
        }
    }
}
