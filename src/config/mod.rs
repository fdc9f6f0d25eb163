//! The `fanout.yml` file: its raw shape, its JSON Schema, and loading it with
//! errors that name the file, line, column and key: finding it (`--config` or
//! `fanout.yml` at the top of the checkout) and reading it, bounded ([`read_file`]).
//!
//! This module owns only what the file says, and imports nothing from the stages that
//! read it. Merging it with command-line flags and validating the combination
//! (agent definitions, `copy:` globs: checks that belong to later stages) is
//! [`crate::plan::settings`]'s job; turning settings into workers is [`crate::plan`]'s.
//!
//! The `parallel_runs:` block is honoured exactly:
//!
//! ```yaml
//! parallel_runs:
//!   workers: 3            # 1–10
//!   agent: build
//!   max_steps: 50
//!   budget_per_worker: null
//!   timeout_per_worker: null
//! ```
//!
//! Everything else (tasks, models, agents, base, worktree_dir, exclude, …) is fanout's own.
//!
//! Durations (`timeout_per_worker`, `inactivity_timeout`, `kill_grace`, check and
//! setup timeouts, publishing waits) take humantime's syntax, as the flags do
//! (`90s`, `10m`, `1h30m`, `2d`); a bare number is seconds, as `parallel_runs:` always took.

pub mod error;
mod text;
pub mod units;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::model::FailOn;
use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

pub use error::{ConfigError, KeySeg, Problem, key_path};
pub use units::{MAX_WORKERS, Seconds, Usd, WorkerCount};

use error::{key, snippet, strip_location_prefix, suggest_field};

/// The whole `fanout.yml` file.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "fanout.yml",
    description = "Configuration of fanout, the parallel coding-agent runner"
)]
pub struct ConfigFile {
    /// How many workers, which agent, and the limits of each worker.
    #[serde(default)]
    pub parallel_runs: ParallelRuns,
    /// Tasks to run: plain prompts or `{id, prompt, …}` objects, which may set their own
    /// `model`, `agent`, `timeout`, `budget`, `checks` and `output` (a task's own setting
    /// wins over the run's, flags included). Command-line tasks replace these.
    #[serde(default)]
    pub tasks: Vec<TaskEntry>,
    /// Models handed to workers in order; workers beyond the list use the agent's default model.
    #[serde(default)]
    pub models: Vec<String>,
    /// Run every task on every model instead of assigning round-robin.
    #[serde(default)]
    pub cross: bool,
    /// The commit or branch workers start from (default: `HEAD`).
    pub base: Option<String>,
    /// Prefix of the branches fanout creates (default: `fanout`).
    pub branch_prefix: Option<String>,
    /// Directory under which worktrees are created; relative paths are taken from the
    /// repository root. Default: a per-user data directory outside the checkout.
    pub worktree_dir: Option<PathBuf>,
    /// Paths never committed from a worker's worktree (`dir/` for a directory, `*` globs).
    /// `.architect/` and `.fanout/` are always excluded.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Seconds between SIGTERM and SIGKILL when a worker is stopped (default 10).
    pub kill_grace: Option<Seconds>,
    /// Agent definitions, by name. `parallel_runs.agent` and `--agent` pick one of these,
    /// a built-in adapter (`architect`), or else architect's agent of that name.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentDef>,
    /// Identity used for the commits fanout makes on worker branches.
    pub commit: Option<CommitIdentity>,
    /// How successful branches become pull requests.
    #[serde(default)]
    pub publish: PublishConfig,
    /// Model prices in USD per million tokens, for agents that report tokens but no cost
    /// (Codex, custom agents). Entries here override fanout's shipped defaults; a model
    /// in neither gets an unknown cost, never a made-up one.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Commands run in each worktree after the agent, on the committed result (with
    /// `sh -c`). A worker is `success` only when every check passes.
    #[serde(default)]
    pub checks: Vec<CheckDef>,
    /// When several workers share a task: `all` keeps every success, `best` picks one
    /// winner per task by score (and publishes only the winner).
    #[serde(default)]
    pub select: SelectMode,
    /// Weights of the best-of-N score.
    #[serde(default)]
    pub select_weights: SelectWeights,
    /// Files of the checkout that git ignores or does not track (`.env`, local config),
    /// copied into each new worktree: globs from the repository root, `.gitignore`
    /// style. The lines of a `.worktreeinclude` file at the root are added to these.
    #[serde(default)]
    pub copy: Vec<CopyGlob>,
    /// Commands run in each new worktree before its agent, in order (a string runs with
    /// `sh -c`; `{run, timeout}` sets a time limit, default 300 s). One that fails or
    /// times out fails its worker, and the agent is not started.
    #[serde(default)]
    pub setup: Vec<SetupDef>,
    /// Run `git submodule update --init --recursive` in each new worktree before the
    /// setup commands (default: when the base commit has a `.gitmodules`).
    pub submodules: Option<bool>,
    /// Each live worker's block of ports, never shared with another live worker on this
    /// machine: `FANOUT_PORT` is its first port, `FANOUT_PORTS` is `first-last`.
    pub ports: Option<PortsDef>,
    /// Confine agents, setup commands and checks (Landlock, Linux): `auto` (the
    /// default: where the kernel has it, else run without and say so), `required`
    /// (refuse to run without it), `off`. Confined, a process writes only to its
    /// worktree, its own temporary directory and its agent's `writable:` paths.
    pub sandbox: Option<crate::sandbox::Mode>,
    /// What agents reach on the network, through the run's gateway: `open` (no
    /// filter), or `{allow: [HOST, "*.DOMAIN", PRESET, …], enforce: auto|required}`.
    /// By default only the configured providers' API hosts, and `enforce: auto`.
    pub network: Option<NetworkDef>,
    /// Paths confined agents, setup commands and checks may not read, besides the
    /// credentials hidden by default (ssh keys, git credential stores, `gh`/`hub`,
    /// `.netrc`, cloud CLIs, Docker and Kubernetes configuration, GnuPG, publishing
    /// tokens): absolute, or `~/…` under the home directory. None may hold the
    /// repository.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// When the run exits non-zero: `any-failure` (default), `all-failed`, `never`.
    #[serde(default)]
    pub fail_on: FailOn,
    /// More tasks, from elsewhere than this file: `{issues: {label: fanout}}` makes
    /// each open issue with the label a task (read before the plan is made; needs
    /// credentials, as publishing does). Issue text is data, never configuration.
    pub tasks_from: Option<TasksFrom>,
    /// Tending fanout's open pull requests (stable branches): before a night's plan,
    /// a pull request whose checks failed, or that conflicts with its base, has its
    /// task run again knowing why (or, for a conflict git can resolve, is rebased by
    /// fanout), at most `max_attempts` times; then it is labelled and left to people.
    #[serde(default)]
    pub tend: TendConfig,
}

/// `tasks_from:`: where more tasks come from.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TasksFrom {
    /// Open issues with a label, each one task keyed `issue-<number>` (its own stable
    /// branch and pull request, which says `Fixes #<number>`): its prompt is fanout's,
    /// its title and text quoted after it as untrusted data. An issue closed, or no
    /// longer labelled, stops its task: its pull request is closed with a comment.
    pub issues: Option<IssueSource>,
}

/// `tasks_from.issues`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IssueSource {
    /// The label that makes an issue a task.
    pub label: String,
    /// Labels that order the issues' tasks (and so which pull requests open first
    /// under `publish.max_open`): the first listed first; unlabelled ones last, oldest
    /// first.
    #[serde(default)]
    pub priority: Vec<String>,
}

/// `tend:`: tending fanout's own open pull requests.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TendConfig {
    /// Most tends of one pull request (a re-run for failed checks or a conflict, or a
    /// rebase) before it is labelled `fanout-stuck` and left to people (default 3; 0
    /// turns tending off).
    pub max_attempts: Option<u32>,
}

impl TendConfig {
    /// Tends before a pull request is left to people.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(3)
    }
}

/// A `copy:` glob, trimmed; its syntax is checked with the settings
/// ([`crate::util::glob::check`]: no `..`, nothing under `.git`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct CopyGlob(pub String);

impl<'de> Deserialize<'de> for CopyGlob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CopyGlob;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a glob relative to the repository root, like `.env` or `config/*.local`",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CopyGlob, E> {
                Ok(CopyGlob(v.trim().to_owned()))
            }
        }
        d.deserialize_str(V)
    }
}

impl JsonSchema for CopyGlob {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CopyGlob".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "description": "A pattern in .gitignore syntax, from the repository root (`*`, `?`, `[ab]`, `**`; a trailing `/` for a directory; `!` to take files back out)"
        })
    }
}

/// A setup command: a shell command, or `{run, timeout}`.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum SetupDef {
    /// Just the command, run with `sh -c`.
    Command(String),
    /// A command with a time limit.
    Detailed(SetupSpec),
}

/// The object form of a setup command.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SetupSpec {
    /// The command, run with `sh -c` in the new worktree.
    pub run: String,
    /// Seconds before it is stopped and fails its worker (default 300).
    pub timeout: Option<Seconds>,
}

impl text::TextOrMap for SetupDef {
    const EXPECTING: &'static str = "a shell command, or {run: COMMAND, timeout: DURATION}";
    fn text(v: String) -> Result<Self, String> {
        if v.trim().is_empty() {
            return Err("expected a shell command, found an empty string".into());
        }
        Ok(SetupDef::Command(v))
    }
    fn map<'de, A: de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let spec = SetupSpec::deserialize(de::value::MapAccessDeserializer::new(map))?;
        if spec.run.trim().is_empty() {
            return Err(de::Error::custom(
                "expected a shell command in `run`, found an empty string",
            ));
        }
        Ok(SetupDef::Detailed(spec))
    }
}

impl<'de> Deserialize<'de> for SetupDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text::deserialize(d)
    }
}

/// `network:`: `open`, or the allow-list and how it is enforced.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum NetworkDef {
    /// `open`: the gateway's proxy lets every host through (the report says so).
    Open(OpenWord),
    /// Only the hosts listed (and the providers' API hosts).
    Allow(NetworkSpec),
}

/// The word `open`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OpenWord {
    /// No filter.
    Open,
}

/// The object form of `network:`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Hosts agents may reach through the gateway besides the providers' API hosts:
    /// `example.com`, `*.example.com` (its sub-domains), `host:port` (443 through
    /// CONNECT and 80 as plain HTTP otherwise), an IP address, or a preset: `npm`,
    /// `pypi`, `crates`, `go`, `github`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// `auto` (the default): pin agents to the gateway where the kernel can (Landlock
    /// ABI 4, Linux 6.7), else run with the proxy alone and say the network is
    /// unconfined; `required`: refuse to run where the kernel cannot.
    #[serde(default)]
    pub enforce: crate::sandbox::Enforce,
}

impl text::TextOrMap for NetworkDef {
    const EXPECTING: &'static str =
        "`open`, or {allow: [HOST, \"*.DOMAIN\", PRESET, …], enforce: auto|required}";
    fn text(v: String) -> Result<Self, String> {
        match v.trim() {
            "open" => Ok(NetworkDef::Open(OpenWord::Open)),
            other => Err(format!(
                "expected `open` or {{allow: [HOST, …], enforce: auto|required}}, found {other:?}"
            )),
        }
    }
    fn map<'de, A: de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        NetworkSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(NetworkDef::Allow)
    }
}

impl<'de> Deserialize<'de> for NetworkDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text::deserialize(d)
    }
}

/// The `ports:` block.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PortsDef {
    /// First port of the first block (default 20000).
    #[schemars(range(min = 1))]
    pub base: Option<u16>,
    /// Ports per worker (default 10).
    #[schemars(range(min = 1))]
    pub block: Option<u16>,
}

/// A check: a shell command, or `{run, name, timeout}`.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum CheckDef {
    /// Just the command.
    Command(String),
    /// A command with a name and a time limit.
    Detailed(CheckSpec),
}

impl text::TextOrMap for CheckDef {
    const EXPECTING: &'static str =
        "a shell command, or {run: COMMAND, name: NAME, timeout: DURATION}";
    fn text(v: String) -> Result<Self, String> {
        Ok(CheckDef::Command(v))
    }
    fn map<'de, A: de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        CheckSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(CheckDef::Detailed)
    }
}

impl<'de> Deserialize<'de> for CheckDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text::deserialize(d)
    }
}

/// The object form of a check.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// The command, run with `sh -c` in the worktree.
    pub run: String,
    /// A short name for reports (default: the command).
    pub name: Option<String>,
    /// Seconds before the check is stopped and counts as failed (default 600).
    pub timeout: Option<Seconds>,
}

/// How workers that share a task are selected.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SelectMode {
    /// Every successful worker stands on its own (one PR each).
    #[default]
    All,
    /// One winner per task, by score.
    Best,
}

/// Weights of the best-of-N score; each term is between 0 and 1 before weighting.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SelectWeights {
    /// All checks passed (1) or not (0).
    pub checks: f64,
    /// Agent status: success 1, partial 0.5, else 0.
    pub status: f64,
    /// Smaller diffs score higher (1 − lines changed / most in the group).
    pub diff: f64,
    /// Cheaper scores higher (1 − cost / highest in the group; unknown cost scores 0).
    pub cost: f64,
    /// Faster scores higher (1 − duration / longest in the group).
    pub duration: f64,
}

impl Default for SelectWeights {
    fn default() -> Self {
        SelectWeights {
            checks: 100.0,
            status: 10.0,
            diff: 1.0,
            cost: 1.0,
            duration: 0.5,
        }
    }
}

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input (prompt) tokens.
    pub input: f64,
    /// Output (completion, reasoning) tokens.
    pub output: f64,
    /// Cached input tokens (default: the input price).
    pub cached_input: Option<f64>,
}

/// The `publish:` block.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PublishConfig {
    /// Labels added to every pull request.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Open pull requests as drafts.
    #[serde(default)]
    pub draft: bool,
    /// Users asked to review.
    #[serde(default)]
    pub reviewers: Vec<String>,
    /// Teams asked to review (slugs).
    #[serde(default)]
    pub team_reviewers: Vec<String>,
    /// Statuses published besides `success` (only `partial` is allowed).
    #[serde(default)]
    pub include: Vec<IncludeStatus>,
    /// The remote to push to (default `origin`).
    pub remote: Option<String>,
    /// The base branch of the pull requests (default: the run's base branch).
    pub base: Option<String>,
    /// Title template (minijinja); default `templates/pr-title.j2`.
    pub title: Option<String>,
    /// Body template file (minijinja), relative to the repository root.
    pub body_template: Option<PathBuf>,
    /// The body template's text, when it came with a plan rather than from a file
    /// (`crate::plan::FaninSettings`); never read from fanout.yml.
    #[serde(skip)]
    #[schemars(skip)]
    pub body_template_text: Option<String>,
    /// Least time between two API mutations (default 1 s).
    pub pace: Option<Seconds>,
    /// Least wait after a rate-limit answer without timing headers (default 60 s).
    pub rate_limit_wait: Option<Seconds>,
    /// Longest single wait before a retry (default 15 min).
    pub max_wait: Option<Seconds>,
    /// Most attempts per API request (default 6).
    pub max_attempts: Option<u32>,
    /// `stable`: one branch and one open pull request per task, updated by every run
    /// (`<prefix>/<task-key>`); `per-run`: new branches every run. Default: `stable`
    /// in a scheduled workflow (`GITHUB_EVENT_NAME=schedule`), else `per-run`.
    pub branch: Option<BranchMode>,
    /// Stable branches: close a task's pull request (and delete its branch) when a run
    /// finds nothing to change (default `true`).
    pub close_stale: Option<bool>,
    /// Longest the whole of publishing may take, waits and retries included (default
    /// 15 min); past it, publishing stops (exit 4) and a re-run continues.
    pub timeout: Option<Seconds>,
    /// Longest one API request may go unanswered before it is retried (default 30 s).
    pub request_timeout: Option<Seconds>,
    /// `issue`: keep one rolling issue (label `fanout-digest`) with tonight's results
    /// compared with the night before; `off` (the default): none.
    pub digest: Option<DigestMode>,
    /// When `run --publish` publishes: `end` (the default) publishes every worker once
    /// the run is over; `as-ready` publishes each worker as soon as it has finished and
    /// been harvested, while the others still run.
    pub when: Option<PublishWhen>,
    /// Stable branches: at most this many of fanout's pull requests open at once;
    /// tonight's other successes wait in a queue (in the order of the tasks), said in
    /// the digest, and are published as pull requests are merged or closed.
    #[schemars(range(min = 1))]
    pub max_open: Option<u32>,
    /// Publish branches that change `.github/workflows/`, `.github/actions/`, a root
    /// `action.yml`/`action.yaml` or a `CODEOWNERS` file (default `false`: such a
    /// branch is not pushed, and its reason says why). A push made with a GitHub App's
    /// token runs the repository's CI, with its secrets, on what the agent wrote.
    #[serde(default)]
    pub allow_workflow_changes: bool,
}

/// When `run --publish` publishes the workers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum PublishWhen {
    /// Once the whole run is over.
    #[default]
    End,
    /// Each worker as soon as it has finished and been harvested.
    AsReady,
}

/// The morning digest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum DigestMode {
    /// One rolling issue.
    Issue,
    /// None.
    Off,
}

/// Which branch a worker's pull request comes from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum BranchMode {
    /// `<prefix>/<run-id>/w<N>-…`: new branches (and pull requests) every run.
    #[default]
    PerRun,
    /// `<prefix>/<task-key>`: one branch and one open pull request per task, updated by
    /// every run.
    Stable,
}

/// Statuses that may be published besides `success`.
#[derive(
    Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum IncludeStatus {
    /// Workers that stopped early with some work done.
    Partial,
}

/// The `parallel_runs:` block: how many workers, which agent, their limits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParallelRuns {
    /// Number of workers, 1–10. With more tasks than workers, every task still runs and
    /// this is the number running at once.
    #[serde(default = "default_workers")]
    pub workers: WorkerCount,
    /// The agent every worker runs.
    #[serde(default = "default_agent")]
    pub agent: String,
    /// Most agent steps (turns) per worker.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Most USD one worker may spend; `null` for no limit.
    #[serde(default)]
    pub budget_per_worker: Option<Usd>,
    /// Wall-clock limit of one worker in seconds; `null` for no limit.
    #[serde(default)]
    pub timeout_per_worker: Option<Seconds>,
    /// Stop a worker whose agent printed nothing (stdout or stderr) for this many seconds.
    #[serde(default)]
    pub inactivity_timeout: Option<Seconds>,
    /// Most USD the whole run may spend: once the known costs reach it, no new worker
    /// starts (those are reported failed, "not started").
    #[serde(default)]
    pub budget_total: Option<Usd>,
}

impl Default for ParallelRuns {
    fn default() -> Self {
        ParallelRuns {
            workers: default_workers(),
            agent: default_agent(),
            max_steps: default_max_steps(),
            budget_per_worker: None,
            timeout_per_worker: None,
            inactivity_timeout: None,
            budget_total: None,
        }
    }
}

fn default_workers() -> WorkerCount {
    WorkerCount(3)
}
fn default_agent() -> String {
    "build".to_owned()
}
fn default_max_steps() -> u32 {
    50
}

/// A task: a plain prompt, or an object with an id, its dependencies, and settings of
/// its own (model, agent, limits, checks, output). A prompt YAML would type (`- yes`,
/// `- 1`) is the text written.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum TaskEntry {
    /// Just the prompt.
    Prompt(String),
    /// A prompt with an id (used in branch names) and optionally settings of its own.
    Detailed(TaskDef),
}

impl text::TextOrMap for TaskEntry {
    const EXPECTING: &'static str = "a task: a prompt, or {id: ID, prompt: PROMPT, model: MODEL, agent: AGENT, depends_on: [ID, …], output: findings, timeout: DURATION, budget: USD, checks: [COMMAND, …], findings: comment|review, review_of: ID}";
    fn text(v: String) -> Result<Self, String> {
        Ok(TaskEntry::Prompt(v))
    }
    fn map<'de, A: de::MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        TaskDef::deserialize(de::value::MapAccessDeserializer::new(map)).map(TaskEntry::Detailed)
    }
}

impl<'de> Deserialize<'de> for TaskEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text::deserialize(d)
    }
}

/// The object form of a task.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaskDef {
    /// Short identifier: letters, digits, `-`, `_`, `.`.
    pub id: Option<String>,
    /// What the agent is asked to do.
    pub prompt: String,
    /// A model this task always runs on, whatever `models` says.
    pub model: Option<String>,
    /// Ids of tasks that must succeed first; this task starts from a base that merges
    /// their branches, and is `skipped` when one of them does not succeed.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// What the task produces: `changes` (the default: a branch with the agent's
    /// changes) or `findings` (the agent's final message; succeeding without changing
    /// a file is its normal outcome).
    #[serde(default)]
    pub output: TaskOutput,
    /// The agent this task runs (a definition under `agents:` or a built-in: `claude`,
    /// `codex`, `aider`, `architect`), instead of the run's. Without its own `model`,
    /// such a task runs on its agent's default model: the run's `models:` are the run
    /// agent's.
    pub agent: Option<String>,
    /// Wall-clock limit of this task's workers, instead of `timeout_per_worker`.
    pub timeout: Option<Seconds>,
    /// Most USD one of this task's workers may spend, instead of `budget_per_worker`.
    pub budget: Option<Usd>,
    /// Checks of this task's workers, instead of the run's `checks:` (`[]`: none).
    pub checks: Option<Vec<CheckDef>>,
    /// Where publishing posts a findings task's findings: `comment` (a comment on the
    /// task's tracking issue, one per night) or `review` (a review on the pull request
    /// of the task named by `review_of`). Needs `output: findings`.
    pub findings: Option<FindingsPost>,
    /// With `findings: review`: the id of the task (`output: changes`) whose pull
    /// request this task reviews. Implies `depends_on` that task: the reviewer starts
    /// from its branch.
    pub review_of: Option<String>,
}

/// Where a findings task's findings are posted when the run is published.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FindingsPost {
    /// A comment on the task's tracking issue (label `fanout-findings`), opened the
    /// first time.
    Comment,
    /// A pull-request review (a comment, neither approving nor requesting changes) on
    /// the pull request of the task named by `review_of`.
    Review,
}

/// What a task produces.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TaskOutput {
    /// A branch with the agent's changes; no change is `unchanged`.
    #[default]
    Changes,
    /// The agent's final message (research, review, triage); kept in `results.json`.
    Findings,
}

impl TaskOutput {
    /// Whether this is the default (`changes`).
    pub fn is_changes(&self) -> bool {
        *self == TaskOutput::Changes
    }
}

/// Which built-in adapter an agent definition uses.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AdapterKind {
    /// Any command: an argv template, never run through a shell.
    Command,
    /// `architect run … --json`.
    Architect,
    /// Claude Code: `claude -p … --output-format stream-json`.
    Claude,
    /// Codex: `codex exec --json`.
    Codex,
    /// aider: `aider --message … --yes-always`.
    Aider,
}

/// How a `command` agent's outcome is read.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ResultFormat {
    /// The `$FANOUT_RESULT` file (`{"status", "steps", "cost", "reason"}` unless paths say otherwise).
    #[default]
    File,
    /// The last JSON object printed on stdout.
    Json,
    /// JSON lines on stdout: each path is read from the last line that has it; a cost
    /// path is also watched live, for budgets.
    Jsonl,
    /// Only the exit code (0 is success).
    ExitCode,
}

/// `agents.<name>.result`: where a `command` agent reports its outcome.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ResultSpec {
    /// Where to read it from.
    #[serde(default)]
    pub format: ResultFormat,
    /// Dotted JSON path of the status (default `status`).
    pub status: Option<String>,
    /// Dotted JSON path of the step count (default `steps`).
    pub steps: Option<String>,
    /// Dotted JSON path of the cost in USD (default `cost`).
    pub cost: Option<String>,
    /// Dotted JSON path of a reason or message (default `reason`).
    pub reason: Option<String>,
    /// Status values meaning success (default `["success"]`; `true` matches a boolean).
    #[serde(default)]
    pub success: Vec<String>,
    /// Status values meaning partial (default `["partial"]`).
    #[serde(default)]
    pub partial: Vec<String>,
}

/// An agent definition under `agents:`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentDef {
    /// The adapter (default: `command` when `command` is given, else `architect`).
    pub adapter: Option<AdapterKind>,
    /// `command` adapter: the argv template. Placeholders: `{task}`, `{model}`,
    /// `{worker_id}`, `{branch}`, `{worktree}`, `{run_id}`, `{max_steps}`, `{budget}`,
    /// `{timeout}`; `{{` and `}}` for literal braces.
    #[serde(default)]
    pub command: Vec<String>,
    /// Arguments appended only when the worker has a model (e.g. `["--model", "{model}"]`).
    #[serde(default)]
    pub model_args: Vec<String>,
    /// Arguments appended only when a budget is set (e.g. `["--budget", "{budget}"]`).
    #[serde(default)]
    pub budget_args: Vec<String>,
    /// The program to run, for the built-in adapters (default `architect`, `claude`,
    /// `codex` or `aider`).
    pub binary: Option<String>,
    /// `architect` adapter: architect's own agent name (default: this definition's name
    /// when it is not `architect`, else `build`).
    pub agent: Option<String>,
    /// Extra arguments appended to the command line.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for the agent (GitHub tokens are still removed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Paths this agent writes that must never be committed.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Paths outside the worktree this agent may write when sandboxed (caches, its
    /// CLI's state): absolute, or `~/…` under the home directory; a missing one is made
    /// as a directory. Everything else outside the worktree is read-only to it.
    #[serde(default)]
    pub writable: Vec<String>,
    /// `claude` adapter: the permission mode (default `acceptEdits`: edits without
    /// prompts; `bypassPermissions` also runs commands, but Claude Code refuses it as root).
    pub permission_mode: Option<String>,
    /// `command` adapter: how its outcome is read (default: the `$FANOUT_RESULT` file).
    pub result: Option<ResultSpec>,
    /// Pass `GITHUB_TOKEN`/`GH_TOKEN` to this agent. Off by default: agents never get a
    /// GitHub token unless this says so (Actions runtime tokens never pass).
    #[serde(default)]
    pub allow_github_token: bool,
    /// `command` adapter: reach the model through the run's gateway. The agent gets
    /// the provider's base URL in `base_url_env` and its placeholder key in `key_env`
    /// (the gateway adds the real key; the agent never sees it).
    pub gateway: Option<GatewayOptIn>,
}

/// How a `command` agent is handed the gateway (`agents.<name>.gateway`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GatewayOptIn {
    /// The variable that gets the provider's base URL through the gateway.
    pub base_url_env: String,
    /// The variable that gets the worker's placeholder key.
    pub key_env: String,
    /// Which provider: `anthropic` (Messages API, base URL without `/v1`) or `openai`
    /// (default; base URL ending in `/v1`).
    #[serde(default = "default_gateway_provider")]
    pub provider: String,
}

fn default_gateway_provider() -> String {
    "openai".to_owned()
}

/// Author of fanout's commits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommitIdentity {
    /// Author and committer name.
    pub name: String,
    /// Author and committer e-mail.
    pub email: String,
}

/// The text of the config file at `path` (at most [`crate::util::CONFIG_LIMIT`] bytes).
pub fn read_text(path: &Path) -> Result<String, ConfigError> {
    crate::util::read_capped_string(path, crate::util::CONFIG_LIMIT).map_err(|source| {
        ConfigError::Read {
            path: path.to_owned(),
            source,
        }
    })
}

/// The config file's text, and the path its messages name: `given` (`--config`, as
/// typed, relative to `cwd`) must exist and be readable; otherwise `fanout.yml` at the
/// top of the checkout `workdir`, whose absence means the defaults (no text).
pub fn read_file(
    given: Option<&Path>,
    cwd: &Path,
    workdir: &Path,
) -> Result<(PathBuf, Option<String>), crate::exit::Failure> {
    let Some(given) = given else {
        let path = workdir.join("fanout.yml");
        let text = if path.is_file() {
            Some(read_text(&path)?)
        } else {
            None
        };
        return Ok((path, text));
    };
    let text = crate::util::read_capped_string(&cwd.join(given), crate::util::CONFIG_LIMIT)
        .map_err(|e| crate::exit::Failure::Usage(format!("--config {}: {e}", given.display())))?;
    Ok((given.to_owned(), Some(text)))
}

/// `FILE:LINE:COLUMN` of the value at `keys` in the config file at `path`, for a
/// message about it written after parsing (a run's agent refused at preflight); the
/// file's name alone when it cannot be read or has no such key.
pub fn located(path: &Path, keys: &[&str]) -> String {
    match read_text(path).ok().and_then(|t| error::value_at(&t, keys)) {
        Some((line, column)) => format!("{}:{line}:{column}", path.display()),
        None => path.display().to_string(),
    }
}

/// A key given twice, said in fanout's words (the YAML library names it and its own
/// option; the key path ends in `?`): the key's full path, and the message.
fn duplicate(key: &str, message: &str) -> Option<(String, String)> {
    let name = message
        .strip_prefix("duplicate mapping key: ")?
        .split(", set DuplicateKeyPolicy")
        .next()?;
    let parent = key.strip_suffix('?').unwrap_or(key);
    Some((
        format!("{parent}{name}"),
        format!("`{name}` is set twice; keep one"),
    ))
}

/// Parse config text; `path` is used in error messages only.
pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    let mut key = String::new();
    let result = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            key = e.path().to_string();
            e.into_inner()
        })
    });
    let mut cfg: ConfigFile = result.map_err(|err| {
        let loc = err.location();
        let (line, column) = loc.map(|l| (l.line(), l.column())).unwrap_or((1, 1));
        let bare = err.without_snippet().to_string();
        let message = strip_location_prefix(&bare);
        let (key, message) = match duplicate(&key, message) {
            Some(said) => said,
            None => {
                let m = misplaced(&key, message).unwrap_or_else(|| suggest_field(message));
                (key.clone(), m)
            }
        };
        ConfigError::Invalid {
            path: path.to_owned(),
            line: line as usize,
            column: column as usize,
            key,
            message,
            snippet: snippet(text, line as usize, column as usize),
        }
    })?;
    restore_text(&mut cfg, text);
    cfg.check().map_err(|p| ConfigError::at(text, path, p))?;
    Ok(cfg)
}

/// A key of `parallel_runs:` written at the top level (`workers: 4`): say where it
/// belongs, rather than suggest a top-level key it merely resembles.
fn misplaced(key: &str, message: &str) -> Option<String> {
    let field = message.strip_prefix("unknown field `")?.split_once('`')?.0;
    let schema = schemars::schema_for!(ParallelRuns);
    let belongs = key == field && schema.get("properties")?.get(field).is_some();
    belongs.then(|| {
        format!("unknown field `{field}` at the top level: it belongs under `parallel_runs:`; move it there, indented (`parallel_runs:` then `  {field}: …`)")
    })
}

/// A list of tasks written on its own (`--tasks-file`), as `tasks:` holds them:
/// the config text it is read as (`tasks:` and every line indented), for [`parse`];
/// errors are placed back with [`ConfigError::in_list`].
pub fn list_text(text: &str) -> String {
    let mut out = String::from("tasks:\n");
    for line in text.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The lists whose scalar items are text.
const TEXT_LISTS: [&str; 3] = ["tasks", "checks", "setup"];

/// Put back, in `cfg` read from `text`, the written text of each scalar item of
/// `tasks:`, `checks:` and `setup:` that YAML typed as a bool or a number.
fn restore_text(cfg: &mut ConfigFile, text: &str) {
    for list in TEXT_LISTS {
        for (i, written) in error::typed_items(text, list) {
            let slot = match list {
                "tasks" => match cfg.tasks.get_mut(i) {
                    Some(TaskEntry::Prompt(p)) => p,
                    _ => continue,
                },
                "checks" => match cfg.checks.get_mut(i) {
                    Some(CheckDef::Command(c)) => c,
                    _ => continue,
                },
                _ => match cfg.setup.get_mut(i) {
                    Some(SetupDef::Command(c)) => c,
                    _ => continue,
                },
            };
            *slot = written;
        }
    }
}

impl ConfigFile {
    /// The author of fanout's commits: `commit:`, else `fanout`.
    pub fn commit_identity(&self) -> (String, String) {
        self.commit
            .as_ref()
            .map(|c| (c.name.clone(), c.email.clone()))
            .unwrap_or_else(|| ("fanout".into(), "fanout@users.noreply.github.com".into()))
    }

    /// Checks that the schema cannot express and that need nothing but the file:
    /// agent names, prices. (Agent definitions and `copy:` globs are checked by the
    /// stages that own them, when the settings read the file.)
    pub fn check(&self) -> Result<(), Problem> {
        if self.publish.max_open == Some(0) {
            return Err(Problem::at(
                vec![key("publish"), key("max_open")],
                "expected 1 or more: at most this many of fanout's pull requests are open",
            )
            .in_value());
        }
        for name in self.agents.keys() {
            if !is_agent_name(name) {
                return Err(Problem::at(
                    vec![key("agents"), key(name)],
                    format!("agent name {name:?} may only hold letters, digits, '-', '_' and '.'"),
                ));
            }
        }
        for (model, price) in &self.prices {
            for (field, v) in [
                ("input", Some(price.input)),
                ("output", Some(price.output)),
                ("cached_input", price.cached_input),
            ] {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(Problem::at(
                        vec![key("prices"), key(model), key(field)],
                        format!("expected USD per million tokens, zero or more, found {v}"),
                    )
                    .in_value());
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` may name an agent: letters, digits, `-`, `_`, `.`.
pub fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl AgentDef {
    /// The adapter this definition uses: `adapter` when given, else `command` when a
    /// command is given, else the built-in of that name (`claude`, `codex`, `aider`),
    /// else `architect`.
    pub fn adapter_for(&self, name: &str) -> AdapterKind {
        self.adapter.unwrap_or(if !self.command.is_empty() {
            AdapterKind::Command
        } else {
            match name {
                "claude" => AdapterKind::Claude,
                "codex" => AdapterKind::Codex,
                "aider" => AdapterKind::Aider,
                _ => AdapterKind::Architect,
            }
        })
    }
}

impl AdapterKind {
    /// The program a built-in adapter runs unless `binary` says otherwise (`command`
    /// for the command adapter, which has none).
    pub fn program(self) -> &'static str {
        match self {
            AdapterKind::Command => "command",
            AdapterKind::Architect => "architect",
            AdapterKind::Claude => "claude",
            AdapterKind::Codex => "codex",
            AdapterKind::Aider => "aider",
        }
    }
}

/// The JSON Schema of `fanout.yml`, pretty-printed.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ConfigFile);
    serde_json::to_string_pretty(&schema).expect("schema serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        parse(text, Path::new("fanout.yml")).expect_err("should fail")
    }

    #[test]
    fn seed_block_is_honoured() {
        let cfg = parse(
            "parallel_runs:\n  workers: 5\n  agent: review\n  max_steps: 7\n  budget_per_worker: 0.5\n  timeout_per_worker: 120\n",
            Path::new("f.yml"),
        )
        .unwrap();
        assert_eq!(cfg.parallel_runs.workers, WorkerCount(5));
        assert_eq!(cfg.parallel_runs.agent, "review");
        assert_eq!(cfg.parallel_runs.max_steps, 7);
        assert_eq!(cfg.parallel_runs.budget_per_worker, Some(Usd(0.5)));
        assert_eq!(cfg.parallel_runs.timeout_per_worker, Some(Seconds(120.0)));
    }

    #[test]
    fn seed_defaults_and_nulls() {
        let cfg = parse(
            "parallel_runs:\n  budget_per_worker: null\n  timeout_per_worker: null\n",
            Path::new("f.yml"),
        )
        .unwrap();
        assert_eq!(cfg.parallel_runs.workers, WorkerCount(3));
        assert_eq!(cfg.parallel_runs.agent, "build");
        assert_eq!(cfg.parallel_runs.max_steps, 50);
        assert_eq!(cfg.parallel_runs.budget_per_worker, None);
        assert_eq!(cfg.parallel_runs.timeout_per_worker, None);
    }

    #[test]
    fn workers_out_of_range_names_line_column_and_key() {
        let e = err("parallel_runs:\n  workers: 11\n");
        assert_eq!(
            e.to_string(),
            "fanout.yml:2:12: key `parallel_runs.workers`: expected an integer from 1 to 10, found 11"
        );
        let e = err("parallel_runs:\n  workers: 0\n");
        assert!(e.to_string().starts_with("fanout.yml:2:12:"), "{e}");
    }

    #[test]
    fn unknown_key_is_named_with_alternatives() {
        let e = err("tasks: [a]\nparallel_runs:\n  wrkers: 3\n");
        let s = e.to_string();
        assert!(
            s.starts_with("fanout.yml:3:3: key `parallel_runs.wrkers`: unknown field `wrkers`"),
            "{s}"
        );
        assert!(s.contains("workers"), "{s}");
        // a misspelt block (`parallel:`) is an unknown key, not silently ignored
        let s = err("parallel:\n  workers: 2\n").to_string();
        assert!(s.starts_with("fanout.yml:1:1:"), "{s}");
        assert!(s.contains("unknown field `parallel`"), "{s}");
    }

    #[test]
    fn wrong_type_says_what_was_expected() {
        let s = err("parallel_runs:\n  workers: many\n").to_string();
        assert!(s.starts_with("fanout.yml:2:"), "{s}");
        assert!(
            s.contains("key `parallel_runs.workers`: invalid type: string \"many\""),
            "{s}"
        );
        assert!(s.contains("an integer from 1 to 10"), "{s}");
        let s = err("parallel_runs:\n  max_steps: -3\n").to_string();
        assert!(
            s.starts_with("fanout.yml:2:14: key `parallel_runs.max_steps`:"),
            "{s}"
        );
    }

    #[test]
    fn bad_yaml_has_a_location() {
        let e = err("parallel_runs: [\n");
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("not located")
        };
        assert_eq!((line, column), (1, 16));
        let s = err("tasks:\n  - a\n - b\n").to_string();
        assert!(s.starts_with("fanout.yml:"), "{s}");
    }

    #[test]
    fn tasks_in_both_forms() {
        let cfg = parse(
            "tasks:\n  - fix the bug\n  - id: docs\n    prompt: write docs\n    model: m1\n",
            Path::new("f.yml"),
        )
        .unwrap();
        assert_eq!(cfg.tasks[0], TaskEntry::Prompt("fix the bug".into()));
        assert_eq!(
            cfg.tasks[1],
            TaskEntry::Detailed(TaskDef {
                depends_on: Vec::new(),
                id: Some("docs".into()),
                prompt: "write docs".into(),
                model: Some("m1".into()),
                ..TaskDef::default()
            })
        );
    }

    #[test]
    fn yaml_scalars_in_lists_are_the_text_written() {
        let cfg = parse(
            "tasks:\n  - yes\n  - 1\n  - 1.10\n  - on\n  - {id: on, prompt: 1, depends_on: [2]}\n  - 'no'\nchecks: [true, {run: false}]\nsetup: [1e3]\n",
            Path::new("f.yml"),
        )
        .unwrap();
        let prompt = |p: &str| TaskEntry::Prompt(p.into());
        assert_eq!(
            cfg.tasks[..5],
            [prompt("yes"), prompt("1"), prompt("1.10"), prompt("on"), {
                TaskEntry::Detailed(TaskDef {
                    id: Some("on".into()),
                    prompt: "1".into(),
                    model: None,
                    depends_on: vec!["2".into()],
                    ..TaskDef::default()
                })
            }]
        );
        assert_eq!(cfg.tasks[5], prompt("no"));
        assert_eq!(
            cfg.checks,
            [
                CheckDef::Command("true".into()),
                CheckDef::Detailed(CheckSpec {
                    run: "false".into(),
                    name: None,
                    timeout: None
                })
            ]
        );
        assert_eq!(cfg.setup, [SetupDef::Command("1e3".into())]);
    }

    #[test]
    fn text_or_object_errors_say_what_was_expected() {
        for (text, want) in [
            (
                "tasks:\n  - [a, b]\n",
                "fanout.yml:2:5: key `tasks[0]`: invalid type: sequence, expected a task: a prompt, or {id: ID, prompt: PROMPT, model: MODEL, agent: AGENT, depends_on: [ID, …], output: findings, timeout: DURATION, budget: USD, checks: [COMMAND, …], findings: comment|review, review_of: ID}",
            ),
            (
                "tasks:\n  - {id: a, promt: b}\n",
                "fanout.yml:2:13: key `tasks[0].promt`: unknown field `promt`, expected one of id, prompt, model, depends_on",
            ),
            (
                "checks:\n  - [cargo, test]\n",
                "fanout.yml:2:5: key `checks[0]`: invalid type: sequence, expected a shell command, or {run: COMMAND, name: NAME, timeout: DURATION}",
            ),
            (
                "setup: [~]\n",
                "fanout.yml:1:9: key `setup[0]`: expected a shell command, or {run: COMMAND, timeout: DURATION}, found nothing",
            ),
        ] {
            let got = err(text).to_string();
            assert!(got.starts_with(want), "{text}\n got: {got}\nwant: {want}");
        }
    }

    /// An error as the user sees it: the message, then the line under a caret.
    fn shown(text: &str) -> String {
        let e = err(text);
        format!("{e}\n{}", e.snippet().unwrap_or_default())
    }

    #[test]
    fn tasks_take_settings_of_their_own() {
        let cfg = parse(
            "tasks:\n  - id: fix\n    prompt: fix it\n    agent: claude\n    timeout: 10m\n    budget: 0.5\n    checks: [cargo test, {run: make lint, name: lint}]\n  - id: review\n    prompt: review it\n    agent: codex\n    output: findings\n    depends_on: [fix]\n    checks: []\n  - plain\n",
            Path::new("f.yml"),
        )
        .unwrap();
        let TaskEntry::Detailed(fix) = &cfg.tasks[0] else {
            panic!("{:?}", cfg.tasks[0])
        };
        assert_eq!(fix.agent.as_deref(), Some("claude"));
        assert_eq!(fix.timeout, Some(Seconds(600.0)));
        assert_eq!(fix.budget, Some(Usd(0.5)));
        assert_eq!(fix.checks.as_ref().map(Vec::len), Some(2));
        let TaskEntry::Detailed(review) = &cfg.tasks[1] else {
            panic!("{:?}", cfg.tasks[1])
        };
        assert_eq!(review.agent.as_deref(), Some("codex"));
        assert_eq!(review.output, TaskOutput::Findings);
        // `checks: []` is "none", not "the run's"; no `checks:` is the run's.
        assert_eq!(review.checks, Some(Vec::new()));
        assert_eq!(review.timeout, None);
        assert_eq!(cfg.tasks[2], TaskEntry::Prompt("plain".into()));
    }

    #[test]
    fn bad_task_settings_name_file_line_and_key() {
        insta::assert_snapshot!(
            shown("tasks:\n  - id: fix\n    prompt: fix it\n    timeout: 10 minutes later\n"),
            @r#"
        fanout.yml:4:14: key `tasks[0].timeout`: expected a duration like 90s, 10m, 1h30m or 2d, found "10 minutes later": a number was expected at character 12
          |
        4 |     timeout: 10 minutes later
          |              ^
        "#
        );
        insta::assert_snapshot!(
            shown("tasks:\n  - {id: fix, prompt: fix it, budget: -2}\n"),
            @r"
        fanout.yml:2:39: key `tasks[0].budget`: expected an amount of USD, zero or more, found -2
          |
        2 |   - {id: fix, prompt: fix it, budget: -2}
          |                                       ^
        "
        );
        insta::assert_snapshot!(
            shown("tasks:\n  - id: fix\n    prompt: fix it\n    checks: [[cargo, test]]\n"),
            @r"
        fanout.yml:4:14: key `tasks[0].checks[0]`: invalid type: sequence, expected a shell command, or {run: COMMAND, name: NAME, timeout: DURATION}
          |
        4 |     checks: [[cargo, test]]
          |              ^
        "
        );
        insta::assert_snapshot!(
            shown("tasks:\n  - id: fix\n    promt: fix it\n"),
            @r"
        fanout.yml:3:5: key `tasks[0].promt`: unknown field `promt`, expected one of id, prompt, model, depends_on, output, agent, timeout, budget, checks, findings, review_of; did you mean `prompt`?
          |
        3 |     promt: fix it
          |     ^
        "
        );
        insta::assert_snapshot!(
            shown("tasks:\n  - id: fix\n    prompt: fix it\n    timout: 5m\n"),
            @r"
        fanout.yml:4:5: key `tasks[0].timout`: unknown field `timout`, expected one of id, prompt, model, depends_on, output, agent, timeout, budget, checks, findings, review_of; did you mean `timeout`?
          |
        4 |     timout: 5m
          |     ^
        "
        );
        // A key of `parallel_runs:` at the top level: where it belongs (issue #29).
        assert_eq!(
            err("tasks: [a]\nworkers: 4\n").to_string(),
            "fanout.yml:2:1: key `workers`: unknown field `workers` at the top level: it belongs under `parallel_runs:`; move it there, indented (`parallel_runs:` then `  workers: …`)"
        );
        // Nothing close: the list alone.
        let s = err("tasks:\n  - {id: fix, prompt: fix it, colour: red}\n").to_string();
        assert!(s.ends_with("budget, checks, findings, review_of"), "{s}");
    }

    #[test]
    fn durations_accept_units() {
        assert_eq!(Seconds::parse("90s").unwrap(), Seconds(90.0));
        assert_eq!(Seconds::parse("10m").unwrap(), Seconds(600.0));
        assert_eq!(Seconds::parse("1h30m").unwrap(), Seconds(5400.0));
        assert!(Seconds::parse("soon").is_err());
        assert!(Seconds::parse("0").is_err());
        assert!(Seconds::parse("0s").is_err());
        let cfg = parse(
            "parallel_runs:\n  timeout_per_worker: 10m\n  inactivity_timeout: 1h30m\nkill_grace: 0.5\n",
            Path::new("f"),
        )
        .unwrap();
        assert_eq!(cfg.parallel_runs.timeout_per_worker, Some(Seconds(600.0)));
        assert_eq!(cfg.parallel_runs.inactivity_timeout, Some(Seconds(5400.0)));
        assert_eq!(cfg.kill_grace, Some(Seconds(0.5)));
        let e = err("parallel_runs:\n  timeout_per_worker: 10 minutes later\n").to_string();
        assert!(
            e.starts_with("fanout.yml:2:23: key `parallel_runs.timeout_per_worker`: expected a duration like 90s, 10m, 1h30m or 2d, found \"10 minutes later\""),
            "{e}"
        );
    }

    #[test]
    fn nightly_keys_parse_and_a_cap_of_zero_is_refused() {
        let cfg = parse(
            "tasks_from:\n  issues: {label: fanout, priority: [P0]}\ntend: {max_attempts: 5}\npublish: {max_open: 2}\n",
            Path::new("f.yml"),
        )
        .unwrap();
        let issues = cfg.tasks_from.unwrap().issues.unwrap();
        assert_eq!(
            (issues.label.as_str(), issues.priority.len()),
            ("fanout", 1)
        );
        assert_eq!(cfg.tend.max_attempts(), 5);
        assert_eq!(TendConfig::default().max_attempts(), 3);
        assert_eq!(cfg.publish.max_open, Some(2));
        let e = err("publish:\n  max_open: 0\n").to_string();
        assert!(
            e.starts_with("fanout.yml:2:13: key `publish.max_open`: expected 1 or more"),
            "{e}"
        );
        let e = err("tasks_from:\n  issues: {lable: x}\n").to_string();
        assert!(e.contains("unknown field `lable`"), "{e}");
    }

    #[test]
    fn sandbox_modes_parse_off_included() {
        use crate::sandbox::Mode;
        for (text, mode) in [
            ("sandbox: auto\n", Mode::Auto),
            ("sandbox: required\n", Mode::Required),
            ("sandbox: off\n", Mode::Off),
        ] {
            let cfg = parse(text, Path::new("f.yml")).unwrap();
            assert_eq!(cfg.sandbox, Some(mode), "{text}");
        }
        assert_eq!(
            parse("tasks: [a]\n", Path::new("f.yml")).unwrap().sandbox,
            None
        );
        let s = err("sandbox: maybe\n").to_string();
        assert!(s.starts_with("fanout.yml:1:10: key `sandbox`:"), "{s}");
        assert!(s.contains("required"), "{s}");
    }

    #[test]
    fn network_is_open_or_an_allow_list_with_its_enforcement() {
        use crate::sandbox::Enforce;
        let net = |text: &str| parse(text, Path::new("f.yml")).unwrap().network;
        assert_eq!(
            net("network: open\n"),
            Some(NetworkDef::Open(OpenWord::Open))
        );
        assert_eq!(net("tasks: [a]\n"), None);
        let Some(NetworkDef::Allow(spec)) =
            net("network:\n  allow: [npm, \"*.example.com\"]\n  enforce: required\n")
        else {
            panic!("an allow-list")
        };
        assert_eq!(spec.allow, ["npm", "*.example.com"]);
        assert_eq!(spec.enforce, Enforce::Required);
        let Some(NetworkDef::Allow(spec)) = net("network: {}\n") else {
            panic!("an allow-list")
        };
        assert_eq!((spec.allow.len(), spec.enforce), (0, Enforce::Auto));
        let s = err("network: closed\n").to_string();
        assert!(
            s.starts_with("fanout.yml:1:10: key `network`: expected `open`"),
            "{s}"
        );
        let s = err("network:\n  enforce: always\n").to_string();
        assert!(
            s.starts_with("fanout.yml:2:12: key `network.enforce`:") && s.contains("required"),
            "{s}"
        );
        let s = err("network:\n  alow: [npm]\n").to_string();
        assert!(s.contains("unknown field `alow`"), "{s}");
    }

    #[test]
    fn schema_describes_the_seed_block() {
        let schema: serde_json::Value = serde_json::from_str(&json_schema()).unwrap();
        let props = &schema["properties"];
        assert!(props["parallel_runs"].is_object());
        let text = json_schema();
        assert!(text.contains("\"maximum\": 10"), "{text}");
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    }
}
