//! The plan: which worker runs which task on which model, on which branch, from which
//! commit. A plan is pure data (serializable, portable: no paths of this machine), so
//! `fanout plan --json` can print it and matrix mode can ship it to other runners.
//!
//! This stage turns the file and the flags (and tonight's inputs from GitHub, as
//! data: [`night`]) into [`settings::Settings`] (validated,
//! with the checks later stages own: agent definitions, `copy:` globs), orders tasks
//! by their dependencies ([`deps`]; findings passed between tasks and posted:
//! [`findings`]), assigns tasks and models to workers
//! ([`assign::build`]), resolves worktree setup ([`setup`]) and the network ([`network`]) and, for matrix mode, cuts
//! the plan into matrix chunks ([`matrix`]). It hands a [`Plan`] to the run stage.

pub mod assign;
pub mod deps;
pub mod findings;
pub mod matrix;
pub mod network;
pub mod night;
pub mod settings;
pub mod setup;
pub mod slots;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent::AgentSpec;
use crate::model::{Reason, Status, WorkerResult};
pub use crate::repo::Base;
use crate::util::{RECORD_LIMIT, read_capped};
use setup::SetupPlan;

/// Version of the plan's JSON shape: a plan whose tasks set their own agent, limits or
/// checks is written as version [`PLAN_OVERRIDES_VERSION`], so that a fanout that
/// would ignore them refuses it instead; any other plan as version 1. Both are read.
pub const PLAN_SCHEMA_VERSION: u32 = 1;
/// Version of a plan with per-task overrides (`agent`, `timeout`, `budget`, `checks`),
/// findings posted or passed on (`findings`, `review_of`, `{findings.<id>}`),
/// `hidden:` paths, or a `network:` other than the default.
pub const PLAN_OVERRIDES_VERSION: u32 = 2;

/// A validated plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    /// Version of this JSON shape.
    pub schema_version: u32,
    /// Unique id of the run; scopes branch and worktree names.
    pub run_id: String,
    /// The commit every worker starts from.
    pub base: Base,
    /// How many workers may run at once.
    pub concurrency: u32,
    /// The run's agent definition: every worker's, but those whose task names its own.
    pub agent: AgentSpec,
    /// The other agents tasks name (`tasks[].agent`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, AgentSpec>,
    /// Per-worker limits.
    pub limits: Limits,
    /// Paths never committed from a worktree.
    pub exclude: Vec<String>,
    /// One entry per worker run, ids 1..=N in order.
    pub workers: Vec<PlannedWorker>,
    /// Checks run after each agent, on its committed result (but for tasks with
    /// checks of their own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// How workers sharing a task are selected.
    #[serde(default)]
    pub select: Select,
    /// How each new worktree is prepared before its agent.
    #[serde(default, skip_serializing_if = "SetupPlan::is_default")]
    pub setup: SetupPlan,
    /// Whether agents, setup commands and checks are confined (`sandbox:`).
    #[serde(default, skip_serializing_if = "crate::sandbox::Mode::is_auto")]
    pub sandbox: crate::sandbox::Mode,
    /// Paths confined processes may not read, besides the user's credentials
    /// (`hidden:`, as written: absolute or `~/…`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// What agents reach through the run's gateway, and how the sandbox enforces it
    /// (`network:`).
    #[serde(default, skip_serializing_if = "network::NetworkPlan::is_default")]
    pub network: network::NetworkPlan,
    /// When the run exits non-zero (`fail_on`); the aggregate of a matrix run follows
    /// it too.
    #[serde(default, skip_serializing_if = "crate::config::FailOn::is_default")]
    pub fail_on: crate::config::FailOn,
    /// Tasks whose open pull request was settled before the night without an agent
    /// (rebased, left to people): not run tonight, said in the digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<Settled>,
    /// What a matrix run's aggregate publishes with, as the plan job read it at the
    /// base commit (`fanout plan` writes it; [`FaninSettings`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanin: Option<FaninSettings>,
}

/// A task whose open pull request was settled without an agent tonight (see
/// [`night`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    /// The task's key.
    pub key: String,
    /// Its pull request.
    pub pr: u64,
    /// What fanout did, in a phrase (`rebased onto main (abc1234)`, `left to people
    /// after 3 tends (label fanout-stuck)`).
    pub what: String,
}

/// The settings a matrix run's aggregate job publishes with: the config's `publish:`
/// block (its body template's text included) and commit identity, as the plan job
/// read them at the base commit. The aggregate takes them from the plan (whose digest
/// it checks), never from a checkout a job downloaded artifacts into: an artifact
/// carries data, never settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FaninSettings {
    /// The `publish:` block (`body_template` left out: its text is below).
    pub publish: crate::config::PublishConfig,
    /// The text of `publish.body_template`, when the config names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_template: Option<String>,
    /// The identity of the commits fanout makes (`commit:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<crate::config::CommitIdentity>,
}

impl FaninSettings {
    /// From the config `file` of the repository at `workdir` (the body template read
    /// from there, bounded); an error names the key and the file.
    pub fn read(
        file: &crate::config::ConfigFile,
        workdir: &std::path::Path,
    ) -> Result<FaninSettings, String> {
        let mut publish = file.publish.clone();
        let body_template = match publish.body_template.take() {
            Some(p) => {
                let path = workdir.join(&p);
                let text = crate::util::read_capped_string(&path, crate::util::CONFIG_LIMIT)
                    .map_err(|e| format!("publish.body_template {}: {e}", path.display()))?;
                Some(text)
            }
            None => None,
        };
        Ok(FaninSettings {
            publish,
            body_template,
            commit: file.commit.clone(),
        })
    }

    /// A config holding these settings and nothing else, for the stages that publish.
    pub fn config_file(&self) -> crate::config::ConfigFile {
        let mut publish = self.publish.clone();
        publish.body_template = None;
        publish.body_template_text = self.body_template.clone();
        crate::config::ConfigFile {
            publish,
            commit: self.commit.clone(),
            ..Default::default()
        }
    }
}

/// A check, resolved.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// Name for reports.
    pub name: String,
    /// Command (`sh -c`).
    pub run: String,
    /// Seconds before it is stopped.
    pub timeout: f64,
}

/// Selection among workers sharing a task.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Select {
    /// `all` or `best`.
    pub mode: crate::config::SelectMode,
    /// Score weights.
    pub weights: crate::config::SelectWeights,
}

/// Limits applied to each worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limits {
    /// Most agent steps.
    pub max_steps: u32,
    /// USD per worker.
    pub budget_per_worker: Option<f64>,
    /// Wall-clock seconds per worker.
    pub timeout_per_worker: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL.
    pub kill_grace: f64,
    /// Seconds without output after which a worker is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactivity_timeout: Option<f64>,
    /// USD for the whole run: no worker starts once known costs reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_total: Option<f64>,
}

/// One task as given by the user, with the settings it overrides (`None`: the run's).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The user's id for the task, if any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub id: Option<String>,
    /// The prompt.
    pub prompt: String,
    /// A model this task is pinned to.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    /// Ids of tasks that must succeed before this one starts.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub depends_on: Vec<String>,
    /// What the task produces (`changes` or `findings`).
    #[serde(skip_serializing_if = "crate::config::TaskOutput::is_changes", default)]
    pub output: crate::config::TaskOutput,
    /// The agent this task runs instead of the run's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent: Option<String>,
    /// Wall-clock seconds per worker of this task, instead of the run's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeout: Option<f64>,
    /// USD per worker of this task, instead of the run's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub budget: Option<f64>,
    /// This task's checks, instead of the run's (empty: none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub checks: Option<Vec<Check>>,
    /// Where publishing posts this findings task's findings, if anywhere.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub findings: Option<crate::config::FindingsPost>,
    /// With `findings: review`: the id of the task whose pull request this one reviews
    /// (also among `depends_on`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub review_of: Option<String>,
    /// Untrusted text fanout adds after the prompt, quoted as data (the issue a task
    /// comes from, why its pull request runs again: [`night`]). Never expanded, never
    /// in a branch name, commit message or title.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub context: Option<String>,
    /// The issue this task comes from (`tasks_from: {issues: …}`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub issue: Option<IssueRef>,
    /// Why this task's open pull request runs again tonight (tending).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tend: Option<TendNote>,
}

/// Why a task's pull request is re-run tonight, as its task carries it (for the
/// publish: the marker's count, the comment, the digest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TendNote {
    /// The pull request.
    pub pr: u64,
    /// This tend's number.
    pub attempt: u32,
    /// Of at most.
    pub max: u32,
    /// Why, in a phrase.
    pub why: String,
}

/// The issue a task comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IssueRef {
    /// Its number.
    pub number: u64,
    /// Its title, one line, bounded (untrusted: for the pull request's title).
    pub title: String,
}

/// One worker run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedWorker {
    /// 1-based, stable.
    pub id: u32,
    /// The task.
    pub task: Task,
    /// The model, or `None` for the agent's default.
    pub model: Option<String>,
    /// Name of the agent definition ([`Plan::agent_of`] resolves it).
    pub agent: String,
    /// Branch created for this worker.
    pub branch: String,
    /// Workers (of the tasks this task depends on) that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<u32>,
    /// 0 for workers without dependencies; else one more than their latest dependency.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wave: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Task {
    /// What the agent is asked: the prompt, then any [`Task::context`].
    pub fn agent_prompt(&self) -> String {
        self.with_context(self.prompt.clone())
    }

    /// `prompt` (this task's, its placeholders expanded) with [`Task::context`] after
    /// it; the context itself is never expanded.
    pub fn with_context(&self, prompt: String) -> String {
        match &self.context {
            Some(c) => format!("{prompt}\n\n{c}"),
            None => prompt,
        }
    }

    /// The task for a column or a live line: its id, else its prompt, shortened.
    pub fn label(&self, max: usize) -> String {
        crate::model::task_label(self.id.as_deref(), &self.prompt, max)
    }

    /// Whether the task overrides the run's agent, limits or checks (what a plan of
    /// version 1 cannot say).
    pub fn overrides(&self) -> bool {
        self.agent.is_some()
            || self.timeout.is_some()
            || self.budget.is_some()
            || self.checks.is_some()
    }
}

/// What one worker runs with: the run's settings, less what its task overrides.
#[derive(Debug, Clone, Copy)]
pub struct WorkerLimits {
    /// Most agent steps.
    pub max_steps: u32,
    /// USD for this worker.
    pub budget: Option<f64>,
    /// Wall-clock seconds for this worker.
    pub timeout: Option<f64>,
}

impl PlannedWorker {
    /// The model for display: the name or `default`.
    pub fn model_label(&self) -> &str {
        self.model.as_deref().unwrap_or("default")
    }

    /// The model for a column, with the agent when `with_agent` (a plan of several
    /// agents): `gpt-5 (codex)`.
    pub fn model_cell(&self, with_agent: bool) -> String {
        crate::model::model_cell(self.model.as_deref(), &self.agent, with_agent)
    }

    /// A first-attempt result for this worker that did not get to run its agent.
    pub fn result(&self, status: Status, reason: Reason) -> WorkerResult {
        WorkerResult {
            model: self.model.clone(),
            task_id: self.task.id.clone(),
            reason: Some(reason),
            ..WorkerResult::new(
                self.id,
                &self.branch,
                &self.task.prompt,
                &self.agent,
                status,
            )
        }
    }
}

impl Plan {
    /// Worker `id`, when the plan has it.
    pub fn worker(&self, id: u32) -> Option<&PlannedWorker> {
        self.workers.iter().find(|w| w.id == id)
    }

    /// The agent definition worker `w` runs: its task's, else the run's.
    pub fn agent_of(&self, w: &PlannedWorker) -> &AgentSpec {
        self.agents.get(&w.agent).unwrap_or(&self.agent)
    }

    /// Every agent definition the plan's workers run, the run's first when one does.
    pub fn agents_used(&self) -> Vec<&AgentSpec> {
        let mut used: Vec<&AgentSpec> = Vec::new();
        for w in &self.workers {
            let a = self.agent_of(w);
            if !used.iter().any(|u| u.name == a.name) {
                used.push(a);
            }
        }
        used.sort_by_key(|a| a.name != self.agent.name);
        used
    }

    /// Whether the plan's workers run more than one agent.
    pub fn several_agents(&self) -> bool {
        self.workers
            .iter()
            .any(|w| w.agent != self.workers[0].agent)
    }

    /// The names of the agents the plan runs (the run's when it runs none).
    pub fn agent_names(&self) -> Vec<&str> {
        let used = self.agents_used();
        if used.is_empty() {
            return vec![self.agent.name.as_str()];
        }
        used.iter().map(|a| a.name.as_str()).collect()
    }

    /// The agents the plan runs, for a header: `agent claude`, `agents claude, codex`.
    pub fn agents_label(&self) -> String {
        let names = self.agent_names();
        let s = if names.len() > 1 { "s" } else { "" };
        format!("agent{s} {}", names.join(", "))
    }

    /// Worker `w`'s steps, budget and timeout: its task's, else the run's.
    pub fn limits_of(&self, w: &PlannedWorker) -> WorkerLimits {
        WorkerLimits {
            max_steps: self.limits.max_steps,
            budget: w.task.budget.or(self.limits.budget_per_worker),
            timeout: w.task.timeout.or(self.limits.timeout_per_worker),
        }
    }

    /// The checks run on worker `w`'s result: its task's, else the run's.
    pub fn checks_of<'a>(&'a self, w: &'a PlannedWorker) -> &'a [Check] {
        w.task.checks.as_deref().unwrap_or(&self.checks)
    }

    /// The checks run on the result of the worker with id `id` (none for an id the
    /// plan does not have).
    pub fn checks_of_id(&self, id: u32) -> &[Check] {
        self.worker(id).map_or(&[], |w| self.checks_of(w))
    }

    /// Whether every worker can start its agent: each placeholder its agent's argument
    /// templates use has a value for it ([`AgentSpec::check_placeholders`]). An error
    /// names the first worker that could not, its task and model, and the agent.
    pub fn check_arguments(&self) -> Result<(), String> {
        for w in &self.workers {
            let limits = self.limits_of(w);
            let spec = self.agent_of(w);
            spec.check_placeholders(
                w.model.is_some(),
                limits.budget.is_some(),
                limits.timeout.is_some(),
            )
            .map_err(|e| {
                format!(
                    "agents.{}: worker {} (task `{}`, model {}) could not start: {e}",
                    spec.name,
                    w.id,
                    w.task.label(40),
                    w.model_label()
                )
            })?;
        }
        Ok(())
    }

    /// The plan's shape in a phrase: `3 workers: 1 task × 3 attempts, 3 at a time`.
    pub fn shape(&self) -> String {
        let mut per_task: Vec<(&Task, usize)> = Vec::new();
        for w in &self.workers {
            match per_task.iter_mut().find(|(t, _)| **t == w.task) {
                Some((_, n)) => *n += 1,
                None => per_task.push((&w.task, 1)),
            }
        }
        let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        let fewest = per_task.iter().map(|(_, n)| *n).min().unwrap_or(0);
        let most = per_task.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let attempts = if fewest == most {
            plural(most, "attempt")
        } else {
            format!("{fewest}–{most} attempts")
        };
        format!(
            "{}: {} × {attempts}, {} at a time",
            plural(self.workers.len(), "worker"),
            plural(per_task.len(), "task"),
            self.concurrency.min(self.workers.len() as u32)
        )
    }

    /// Read a plan file (`fanout plan --plan-file`, a run's `plan.json`; at most
    /// [`RECORD_LIMIT`] bytes), of a version this fanout reads.
    pub fn read(path: &std::path::Path) -> Result<Plan, String> {
        Plan::parse(&read_capped(path, RECORD_LIMIT).map_err(|e| e.to_string())?)
    }

    /// [`Plan::read`] from the file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Plan, String> {
        let plan: Plan =
            serde_json::from_slice(bytes).map_err(|e| format!("not a fanout plan: {e}"))?;
        if !(PLAN_SCHEMA_VERSION..=PLAN_OVERRIDES_VERSION).contains(&plan.schema_version) {
            return Err(format!(
                "plan version {} is not supported by this fanout (expects {PLAN_SCHEMA_VERSION} to {PLAN_OVERRIDES_VERSION})",
                plan.schema_version
            ));
        }
        Ok(plan)
    }

    /// The version this plan is written as: [`PLAN_OVERRIDES_VERSION`] when a task
    /// overrides the run's agent, limits or checks, posts its findings, takes another
    /// task's (`{findings.<id>}`: a fanout before them would pass the placeholder on
    /// as text), or has context (an issue, a tend: one before them would run it
    /// without), else [`PLAN_SCHEMA_VERSION`].
    pub fn version_needed(&self) -> u32 {
        let newer = |t: &Task| {
            t.overrides()
                || t.findings.is_some()
                || !findings::placeholders(&t.prompt).is_empty()
                || t.context.is_some()
        };
        if self.workers.iter().any(|w| newer(&w.task))
            || !self.agents.is_empty()
            || !self.hidden.is_empty()
            || !self.network.is_default()
        {
            PLAN_OVERRIDES_VERSION
        } else {
            PLAN_SCHEMA_VERSION
        }
    }
}

/// A fresh run id: UTC time plus 6 hex digits of entropy, e.g. `20261123-014512-3fa2c1`.
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let now = time::OffsetDateTime::now_utc();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(now.unix_timestamp_nanos() as u128);
    h.write_u32(std::process::id());
    let fmt = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    format!(
        "{}-{:06x}",
        now.format(fmt).expect("formats"),
        h.finish() & 0xff_ffff
    )
}

/// Is `s` a plausible run id (what [`new_run_id`] makes, or a user's safe name)?
pub fn is_valid_run_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggregates_settings_travel_in_the_plan_with_the_body_templates_text() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".github")).unwrap();
        std::fs::write(dir.path().join(".github/pr.md.j2"), "Task: {{ task }}\n").unwrap();
        let file = crate::config::parse(
            "publish:\n  labels: [ci]\n  remote: upstream\n  body_template: .github/pr.md.j2\ncommit: {name: Bot, email: bot@example.invalid}\n",
            std::path::Path::new("fanout.yml"),
        )
        .unwrap();
        let carried = FaninSettings::read(&file, dir.path()).unwrap();
        assert_eq!(carried.body_template.as_deref(), Some("Task: {{ task }}\n"));
        assert_eq!(carried.publish.body_template, None);
        let json = serde_json::to_value(&carried).unwrap();
        let back: FaninSettings = serde_json::from_value(json).unwrap();
        assert_eq!(back, carried);
        let cfg = back.config_file();
        assert_eq!(cfg.publish.labels, ["ci"]);
        assert_eq!(cfg.publish.remote.as_deref(), Some("upstream"));
        assert_eq!(
            cfg.publish.body_template_text.as_deref(),
            Some("Task: {{ task }}\n")
        );
        assert_eq!(cfg.commit_identity().0, "Bot");
        assert!(cfg.agents.is_empty() && cfg.tasks.is_empty());
        // A missing template is an error naming the key.
        std::fs::remove_file(dir.path().join(".github/pr.md.j2")).unwrap();
        let e = FaninSettings::read(&file, dir.path()).unwrap_err();
        assert!(e.starts_with("publish.body_template "), "{e}");
    }

    #[test]
    fn run_ids_are_valid_and_distinct() {
        let a = new_run_id();
        let b = new_run_id();
        assert!(is_valid_run_id(&a), "{a}");
        assert_eq!(a.len(), "20261123-014512-3fa2c1".len());
        assert_ne!(a, b);
        assert!(!is_valid_run_id("../etc"));
    }
}
