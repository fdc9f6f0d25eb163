//! The results model: what a run produces for each worker ([`WorkerResult`]: status,
//! cost, checks, setup, selection, publishing) and what fan-in finds across workers
//! ([`fanin`]: the conflict map, the integration branch). Pure data, shared by every
//! stage from the run on; it imports none of them. The report around these results,
//! with the plan that was run, is [`crate::run::results::RunReport`] (`results.json`).
//!
//! # Status, precisely
//!
//! * `success` — the agent exited cleanly and reported success (or reported nothing and
//!   exited 0), stayed within its budget, and the branch differs from the base
//!   (non-empty `files_modified`); or, for a task with `output: findings`, it
//!   succeeded whether or not it changed files (its final message is `findings`).
//! * `unchanged` — the agent exited cleanly and reported success but changed nothing:
//!   it decided nothing needed changing. Not a failure (a quiet night is green).
//! * `partial` — the agent stopped early by its own account (max steps, budget
//!   exceeded) or spent more than `budget_per_worker`; its changes are committed.
//! * `failed` — anything else: non-zero exit, a failure report, a worktree that could not be made, or the run was interrupted (reason
//!   `interrupted`).
//! * `timeout` — fanout stopped the agent at `timeout_per_worker` (SIGTERM, grace,
//!   SIGKILL) or at the inactivity timeout, or the agent reported its own timeout.
//!   Whatever it reported and changed so far is kept.
//! * `skipped` — the worker never ran because a task it depends on (`depends_on`)
//!   did not succeed; the reason names the dependency. No worktree, no branch.

pub mod fanin;
mod reason;

pub use reason::{Cause, Reason, timed_out_after};

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a cost figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// The agent's own USD figure.
    Agent,
    /// Token usage × the price table.
    PriceTable,
}

/// When a finished run exits non-zero (`fail_on`, `--fail-on`). `unchanged` and a
/// findings task's success are never failures.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
    PartialEq,
    Eq,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum FailOn {
    /// Any worker that failed, timed out, stopped early or was skipped: exit 1 (some
    /// good), 3 (none good).
    #[default]
    AnyFailure,
    /// Only when no worker succeeded or found nothing to change: exit 3.
    AllFailed,
    /// Never: exit 0 whatever the workers did (fanout's own errors still exit 2 or 4).
    Never,
}

impl FailOn {
    /// Whether this is the default (`any-failure`).
    pub fn is_default(&self) -> bool {
        *self == FailOn::AnyFailure
    }
}

/// A worker's final status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// See the module docs.
    Success,
    /// See the module docs.
    Unchanged,
    /// See the module docs.
    Partial,
    /// See the module docs.
    Failed,
    /// See the module docs.
    Timeout,
    /// See the module docs.
    Skipped,
}

impl Status {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Unchanged => "unchanged",
            Status::Partial => "partial",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
            Status::Skipped => "skipped",
        }
    }
    /// All statuses, in report order.
    pub const ALL: [Status; 6] = [
        Status::Success,
        Status::Unchanged,
        Status::Partial,
        Status::Failed,
        Status::Timeout,
        Status::Skipped,
    ];
}

impl Status {
    /// Whether this outcome is what was wanted: `success`, or `unchanged` (the agent
    /// succeeded and nothing needed changing). Everything else counts as a failure for
    /// the exit policy.
    pub fn is_good(self) -> bool {
        matches!(self, Status::Success | Status::Unchanged)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One worker's outcome (a row of `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerResult {
    /// 1-based worker id.
    pub worker_id: u32,
    /// Which attempt at the run produced this result: 1 for `fanout run`, then one
    /// more per `fanout resume` (only a worker that did not finish is run again).
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
    /// The worker's branch.
    pub branch: String,
    /// The model, `None` for the agent's default.
    pub model: Option<String>,
    /// Final status.
    pub status: Status,
    /// Agent steps, when known.
    pub steps: Option<u32>,
    /// Cost in USD, when known (never a made-up zero).
    pub cost: Option<f64>,
    /// Where the cost came from: `agent` (its own USD figure), `price-table` (token
    /// usage × prices) or `unknown` (no cost; also what results written before this
    /// field existed read as).
    #[serde(default, with = "cost_source_text")]
    pub cost_source: Option<CostSource>,
    /// Wall-clock seconds of the agent's run (0 when it never started).
    pub duration: f64,
    /// Paths that differ between the base commit and the branch, sorted.
    pub files_modified: Vec<String>,
    /// The worker's worktree, absent when none was made.
    pub worktree_path: Option<PathBuf>,
    /// The task's prompt.
    pub task: String,
    /// The task's id, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The agent definition's name.
    pub agent: String,
    /// Why the status is not `success`, or a note (`reason`), and its cause
    /// (`cause`, beside it: `worker`, `interrupted`, `budget_spent`, `snapshot_failed`
    /// or `internal_error`).
    #[serde(flatten, with = "reason::fields")]
    pub reason: Option<Reason>,
    /// The agent's final message, for a task with `output: findings` (capped in
    /// size, credentials masked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<String>,
    /// The branch's commit after harvest.
    pub commit: Option<String>,
    /// Where the branch started, when not the plan's base (a dependent task: the merge
    /// of its dependencies' branches). `files_modified` is measured from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// Whether fanout made a commit of the agent's leftover changes.
    #[serde(default)]
    pub committed_by_fanout: bool,
    /// The agent's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the agent, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The agent's combined stdout/stderr log.
    pub log_path: Option<PathBuf>,
    /// The checks run on the worker's committed result, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckResult>,
    /// How the worktree was prepared before the agent (absent when none was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupRecord>,
    /// Best-of-N: this worker's score among the workers sharing its task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// What publishing did with this worker's branch (absent until published).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<PublishOutcome>,
    /// Whether the worker's agent, setup commands and checks ran in the sandbox
    /// (Landlock); `false` in results written before the sandbox existed.
    #[serde(default)]
    pub sandboxed: bool,
    /// The Landlock ABI they were confined with, when they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_abi: Option<u8>,
    /// What the run's gateway measured of the worker's traffic (absent when the worker
    /// never reached the gateway: none of its processes started, or it ran before the
    /// gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayRecord>,
}

/// What the run's gateway measured of one worker's traffic: its model calls, tokens
/// and cost as read from the responses, the time it waited on rate limits, and what
/// it was denied. `cost` beside it in the worker's result is what the agent claimed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayRecord {
    /// Model calls sent upstream (a retry is the same call).
    pub requests: u64,
    /// Of their sendings, those repeated after a rate-limit refusal.
    #[serde(default)]
    pub retries: u64,
    /// Input tokens no cache touched.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from a cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Input tokens written to a cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Their cost, USD, by the price table.
    pub cost: f64,
    /// Successful model calls whose usage could not be read.
    #[serde(default)]
    pub unmetered: u64,
    /// Responses of a model without a price (counted at no cost).
    #[serde(default)]
    pub unpriced: u64,
    /// Model calls refused because a budget was reached.
    #[serde(default)]
    pub refused: u64,
    /// Seconds its requests waited for a provider's rate limits.
    pub rate_limit_wait: f64,
    /// Attempts denied (a host not allowed, a model call without its key, an
    /// endpoint the gateway does not pass), in all.
    pub denied_total: u64,
    /// The first distinct targets denied, with their counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<DeniedTarget>,
    /// The agent's claimed `cost` and this `cost` differ by more than
    /// [`COST_TOLERANCE`] of the larger (and a hundredth of a cent).
    #[serde(default)]
    pub cost_mismatch: bool,
}

/// How far the agent's claimed cost may be from the gateway's before the result says
/// `cost_mismatch`: 5% of the larger of the two (price tables round differently).
pub const COST_TOLERANCE: f64 = 0.05;

impl GatewayRecord {
    /// Whether `claimed` (the agent's cost) differs from the gateway's measure by more
    /// than [`COST_TOLERANCE`] of the larger and $0.0001. An unknown claim is no
    /// mismatch.
    pub fn mismatched(&self, claimed: Option<f64>) -> bool {
        claimed.is_some_and(|c| {
            let diff = (c - self.cost).abs();
            diff > 0.0001 && diff > COST_TOLERANCE * c.max(self.cost)
        })
    }
}

/// A target the gateway denied a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedTarget {
    /// Why: `host` (not in the allow-list), `credential` (a model call without the
    /// worker's key) or `endpoint` (a path the gateway does not pass).
    pub kind: String,
    /// `host:port`, or `METHOD /path`.
    pub target: String,
    /// Attempts.
    pub count: u64,
}

impl WorkerResult {
    /// A result of the first attempt with nothing known beyond who the worker is and
    /// its `status`: no agent run, no cost, no commit, no checks; callers set the rest.
    pub fn new(worker_id: u32, branch: &str, task: &str, agent: &str, status: Status) -> Self {
        WorkerResult {
            worker_id,
            attempt: 1,
            branch: branch.to_owned(),
            model: None,
            status,
            steps: None,
            cost: None,
            cost_source: None,
            duration: 0.0,
            files_modified: Vec::new(),
            worktree_path: None,
            task: task.to_owned(),
            task_id: None,
            agent: agent.to_owned(),
            reason: None,
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

    /// The task for a column: its id, else its prompt's first line, shortened.
    pub fn task_label(&self, max: usize) -> String {
        task_label(self.task_id.as_deref(), &self.task, max)
    }

    /// The model for a column ([`model_cell`]), with the agent when `with_agent`.
    pub fn model_cell(&self, with_agent: bool) -> String {
        model_cell(self.model.as_deref(), &self.agent, with_agent)
    }
}

/// Whether the workers of `results` ran more than one agent (then tables name each
/// worker's agent next to its model).
pub fn several_agents(results: &[WorkerResult]) -> bool {
    results.iter().any(|r| r.agent != results[0].agent)
}

/// A worker's model for a column: `gpt-5`, `default` (the agent's default model); with
/// its agent when `with_agent` (a run of several agents): `gpt-5 (codex)`.
pub fn model_cell(model: Option<&str>, agent: &str, with_agent: bool) -> String {
    let model = model.unwrap_or("default");
    if with_agent {
        format!("{model} ({agent})")
    } else {
        model.to_owned()
    }
}

/// A task for a column, a live line or a summary row: `id`, else the first non-blank
/// line of `prompt`, at most `max` characters (cut with `…`), control characters
/// dropped.
pub fn task_label(id: Option<&str>, prompt: &str, max: usize) -> String {
    let text = id.unwrap_or_else(|| {
        prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
    });
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    if text.chars().count() > max {
        let head: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", head.trim_end())
    } else {
        text
    }
}

/// `cost_source` as text: `None` is written `"unknown"`, and read from it or `null`.
mod cost_source_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::CostSource;

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    enum Text {
        Agent,
        PriceTable,
        Unknown,
    }

    pub fn serialize<S: Serializer>(v: &Option<CostSource>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(CostSource::Agent) => Text::Agent,
            Some(CostSource::PriceTable) => Text::PriceTable,
            None => Text::Unknown,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CostSource>, D::Error> {
        Ok(match Option::<Text>::deserialize(d)? {
            Some(Text::Agent) => Some(CostSource::Agent),
            Some(Text::PriceTable) => Some(CostSource::PriceTable),
            Some(Text::Unknown) | None => None,
        })
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Its name.
    pub name: String,
    /// Whether it passed (exit code 0 within its time limit).
    pub passed: bool,
    /// Exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// It was stopped at its time limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Seconds it took.
    pub duration: f64,
    /// The last lines of its output.
    pub log_tail: String,
}

/// What worktree setup did for one worker ([`crate::run::setup`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupRecord {
    /// Files copied from the checkout (`copy:`, `.worktreeinclude`).
    #[serde(default)]
    pub copied: usize,
    /// `git submodule update --init --recursive`, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submodules: Option<SetupStep>,
    /// The `setup:` commands that ran, in order (up to the first that failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<SetupStep>,
    /// The worker's ports (`FANOUT_PORT` is the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<PortRange>,
    /// What setup warned about without failing the worker (a `copy:` pattern that
    /// matched no file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One setup step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupStep {
    /// The command.
    pub run: String,
    /// Exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// It was stopped at its time limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Seconds it took.
    pub duration: f64,
}

/// A block of ports, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port.
    pub last: u16,
}

/// A worker's place among the workers that share its task (`select: best`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The shared task's key (its id, else its prompt).
    pub task: String,
    /// The score (higher is better).
    pub score: f64,
    /// 1 for the best.
    pub rank: u32,
    /// This worker is the task's winner (only a successful worker can win).
    pub winner: bool,
    /// The terms of the score, weighted.
    pub terms: std::collections::BTreeMap<String, f64>,
}

/// What publishing did for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// A pull request was opened.
    Created,
    /// The open pull request was updated.
    Updated,
    /// The open pull request was already up to date.
    Unchanged,
    /// The task's open pull request was closed (and its branch deleted): tonight's
    /// worker found nothing to change (stable branches, `close_stale`).
    Closed,
    /// A findings task's findings were posted (`findings: comment` on its tracking
    /// issue, `findings: review` on another task's pull request): the number and URL
    /// are that or pull request's.
    Posted,
    /// A success waiting for room (stable branches, `publish.max_open`): no push, no
    /// pull request yet; published when fewer of fanout's pull requests are open.
    Queued,
    /// Not eligible (status, empty diff): no push, no pull request.
    Skipped,
    /// Something went wrong; see the reason.
    Failed,
}

impl Operation {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Updated => "updated",
            Operation::Unchanged => "unchanged",
            Operation::Closed => "closed",
            Operation::Posted => "posted",
            Operation::Queued => "queued",
            Operation::Skipped => "skipped",
            Operation::Failed => "failed",
        }
    }
}

/// The publish record of one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishOutcome {
    /// What was done.
    pub operation: Operation,
    /// Pull request number.
    pub number: Option<u64>,
    /// Pull request URL.
    pub url: Option<String>,
    /// Why it was skipped or failed, or a note (e.g. opened as non-draft).
    pub reason: Option<String>,
    /// The commit fanout pushed to the branch (the lease for the next push).
    pub pushed_commit: Option<String>,
    /// A link to open the pull request by hand, when fanout could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_url: Option<String>,
    /// The branch published to, when it is not the worker's own (a stable branch:
    /// `<prefix>/<task-key>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// Sums over all workers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Number of workers.
    pub workers: usize,
    /// Per status.
    pub success: usize,
    /// Per status.
    #[serde(default)]
    pub unchanged: usize,
    /// Per status.
    pub partial: usize,
    /// Per status.
    pub failed: usize,
    /// Per status.
    pub timeout: usize,
    /// Per status.
    #[serde(default)]
    pub skipped: usize,
    /// Sum of known costs; `None` (JSON `null`) when workers ran and none of their
    /// costs is known — never a made-up zero. With some unknown (`cost_unknown`), the
    /// sum of the known ones: a lower bound.
    pub cost: Option<f64>,
    /// Workers whose cost is unknown.
    pub cost_unknown: usize,
    /// Sum of known steps; `None` (JSON `null`) when workers ran and none of their
    /// step counts is known — never a made-up zero. With some unknown
    /// (`steps_unknown`), the sum of the known ones: a lower bound.
    pub steps: Option<u64>,
    /// Workers that ran whose step count is unknown.
    #[serde(default)]
    pub steps_unknown: usize,
    /// Distinct files modified across workers.
    pub files_modified: usize,
}

impl Totals {
    /// Compute from results.
    pub fn of(results: &[WorkerResult]) -> Totals {
        let mut t = Totals {
            workers: results.len(),
            ..Totals::default()
        };
        let mut files = std::collections::BTreeSet::new();
        for r in results {
            match r.status {
                Status::Success => t.success += 1,
                Status::Unchanged => t.unchanged += 1,
                Status::Partial => t.partial += 1,
                Status::Failed => t.failed += 1,
                Status::Timeout => t.timeout += 1,
                Status::Skipped => t.skipped += 1,
            }
            match r.cost {
                Some(c) => t.cost = Some(t.cost.unwrap_or(0.0) + c),
                // A worker that never ran cost nothing: that zero is not made up.
                None if r.status == Status::Skipped => {}
                None => t.cost_unknown += 1,
            }
            match r.steps {
                Some(n) => t.steps = Some(t.steps.unwrap_or(0) + u64::from(n)),
                None if r.status == Status::Skipped => {}
                None => t.steps_unknown += 1,
            }
            files.extend(r.files_modified.iter().cloned());
        }
        t.files_modified = files.len();
        if t.cost.is_none() && t.cost_unknown == 0 {
            // Nothing ran, or only workers that never started: nothing was spent.
            t.cost = Some(0.0);
        }
        if t.steps.is_none() && t.steps_unknown == 0 {
            t.steps = Some(0);
        }
        t
    }

    /// Workers whose outcome was wanted (`success` or `unchanged`).
    pub fn good(&self) -> usize {
        self.success + self.unchanged
    }

    /// Count for one status.
    pub fn count(&self, s: Status) -> usize {
        match s {
            Status::Success => self.success,
            Status::Unchanged => self.unchanged,
            Status::Partial => self.partial,
            Status::Failed => self.failed,
            Status::Timeout => self.timeout,
            Status::Skipped => self.skipped,
        }
    }
}

fn first_attempt() -> u32 {
    1
}

fn is_first_attempt(n: &u32) -> bool {
    *n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_source_is_written_always_and_read_from_old_results() {
        // A result written before `cost_source` existed.
        let old = serde_json::json!({
            "worker_id": 1, "branch": "b", "model": null, "status": "success", "steps": 2,
            "cost": 0.5, "duration": 1.0, "files_modified": [], "worktree_path": null,
            "task": "t", "agent": "build", "reason": null, "commit": null,
            "exit_code": 0, "log_path": null
        });
        let mut r: WorkerResult = serde_json::from_value(old).unwrap();
        assert_eq!(r.cost_source, None);
        assert_eq!(serde_json::to_value(&r).unwrap()["cost_source"], "unknown");
        for (source, text) in [
            (Some(CostSource::Agent), "agent"),
            (Some(CostSource::PriceTable), "price-table"),
            (None, "unknown"),
        ] {
            r.cost_source = source;
            let v = serde_json::to_value(&r).unwrap();
            assert_eq!(v["cost_source"], text);
            let back: WorkerResult = serde_json::from_value(v).unwrap();
            assert_eq!(back.cost_source, source);
        }
    }
}
