//! A worker's agent: its command line (pointed at its door in the gateway, its
//! configuration prepared), its environment (scrubbed, plus what setup, its
//! dependencies and, when allowed, the GitHub token add), its run as a supervised
//! process group within the plan's limits (output shown live, live cost counted for
//! the run's budget, its gateway deadline from its start), and what it reported.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::Executor;
use super::spend::Spend;
use crate::agent::{Adapter, AgentOutcome, Observed, WorkerContext, agent_env_with};
use crate::config::TaskOutput;
use crate::gateway::WorkerCredential;
use crate::model::WorkerResult;
use crate::plan::PlannedWorker;
use crate::run::confine::Confinement;
use crate::run::event::{Event, StopLevel};
use crate::run::inputs::Given;
use crate::run::process::{Ending, LiveLimits, ProcessSpec, Supervised, supervise};

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

    /// Run `w`'s agent as a supervised process group in its worktree, within the
    /// plan's limits, its output shown live and its live cost counted for the run's
    /// budget. An error is why it could not run.
    pub(super) async fn run_agent(
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
        });
        let env = crate::run::setup::with_vars(
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
            live: LiveLimits {
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
            },
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
pub(super) struct Live<'a> {
    pub(super) events: &'a mpsc::UnboundedSender<Event>,
    pub(super) stop: &'a watch::Receiver<StopLevel>,
    pub(super) spend: Arc<Spend>,
    /// Its door in the run's gateway.
    pub(super) door: &'a WorkerCredential,
}

/// What a worker's agent is asked: its prompt (a dependent's with its dependencies'
/// findings put in), and the variables setup and its dependencies add.
pub(super) struct Briefing {
    prompt: String,
    env: Vec<(String, String)>,
}

impl Briefing {
    /// `w`'s prompt and `setup_env`, with what its dependencies gave it (their findings
    /// written into its private directory, `$FANOUT_FINDINGS_DIR` naming them).
    pub(super) fn of(
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
pub(super) struct Paths {
    /// Its worktree.
    pub(super) worktree: PathBuf,
    /// Its log.
    pub(super) log: PathBuf,
    /// `$FANOUT_RESULT`.
    pub(super) result_file: PathBuf,
}

/// Largest `$FANOUT_RESULT` read.
const RESULT_FILE_MAX: u64 = 16 << 20;

/// What the agent reported (its result file, else its output), into `result`: exit,
/// signal, duration, steps and cost. The final report wins; what the live output said
/// fills what it lacks (an agent stopped mid-run prints no final report).
pub(super) fn read_outcome(
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
