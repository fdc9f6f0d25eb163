//! Agents: how to build a worker's command line, and how to read what the agent
//! reported. Agents are untrusted: their output is parsed defensively, their
//! environment is scrubbed of GitHub credentials, and a claim they make never
//! outranks what fanout observed (exit code, timeout, diff).
//!
//! Resolution of an agent name (from `--agent` or `parallel_runs.agent`):
//! 1. a definition under `agents:` in `fanout.yml`;
//! 2. a built-in: `claude`, `codex`, `aider`, `architect` (architect's `build` agent);
//! 3. otherwise architect's own agent of that name (e.g. `agent: build`).
//!
//! Environment: an agent gets fanout's own environment less
//! [`is_scrubbed`](crate::secret::is_scrubbed) names, plus
//! the `FANOUT_*` variables and its definition's `env:`. Settings such as
//! `CODEX_HOME` and `HOME` pass; the providers' keys are taken out by the run (its
//! gateway holds them) and each CLI is pointed at the gateway instead ([`door`]);
//! GitHub credentials never pass, unless the definition says
//! `allow_github_token: true` (then `GITHUB_TOKEN` and `GH_TOKEN` pass; Actions runtime
//! and OIDC tokens never).
//!
//! Each adapter's module documents its command line and how its output maps onto a
//! status, steps and cost. Agents that stream their progress (Claude's stream-json,
//! Codex's JSON lines, aider's `Cost:` lines, a custom agent's JSON lines) are read
//! line by line as they run ([`StreamWatch`]), so a budget or step limit stops them
//! when crossed rather than after the fact.
//!
//! This stage follows the config file: it reads only `config` and the results model.
//! The plan carries an [`AgentSpec`] ([`AgentSpec::resolve`], with the checks of
//! [`check`]); the run stage builds each worker's command line from it and reads the
//! agent's output through its [`Adapter`] ([`AgentSpec::adapter`]).

mod aider;
mod architect;
mod builtin;
pub mod check;
mod claude;
mod codex;
mod command;
mod dispatch;
pub mod door;
pub mod findings;
pub mod json;
pub mod preflight;
pub mod prices;
mod private;
mod template;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::config::AdapterKind;
use crate::config::{AgentDef, Price, ResultSpec};
pub use crate::model::CostSource;
use crate::secret::{is_git_config_var, is_scrubbed};
pub use template::expand;

/// A resolved agent definition; serializable so a plan carries it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AgentSpec {
    /// The name the user picked.
    pub name: String,
    /// Which adapter reads it.
    pub adapter: AdapterKind,
    /// Program to run.
    pub program: String,
    /// Argument templates (command adapter) or extra arguments (architect).
    pub args: Vec<String>,
    /// Appended when the worker has a model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_args: Vec<String>,
    /// Appended when a budget is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budget_args: Vec<String>,
    /// Architect's own agent name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architect_agent: Option<String>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Paths this agent writes that are never committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Paths outside the worktree the agent may write when sandboxed (`writable:`,
    /// after what its built-in adapter declares): absolute or `~/…`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// Claude Code's permission mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// How a `command` agent's outcome is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultSpec>,
    /// Whether GitHub tokens reach this agent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_github_token: bool,
    /// Price overrides from the config (`prices:`), for cost from token usage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Price>,
    /// A `command` agent's opt-in to the gateway (`gateway:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<crate::config::GatewayOptIn>,
}

/// The program a built-in adapter runs by default.
fn default_program(kind: AdapterKind) -> &'static str {
    match kind {
        AdapterKind::Command => "",
        AdapterKind::Architect => "architect",
        AdapterKind::Claude => "claude",
        AdapterKind::Codex => "codex",
        AdapterKind::Aider => "aider",
    }
}

/// What each built-in adapter's CLI writes outside the worktree, when sandboxed.
/// Claude Code and Codex get a private, seeded copy of their configuration instead
/// (see their modules), so that nothing an agent writes there reaches the user's next
/// session; aider and architect keep caches under HOME.
fn default_writable(kind: AdapterKind) -> Vec<String> {
    match kind {
        AdapterKind::Aider => vec!["~/.aider/caches".into()],
        AdapterKind::Architect => vec![
            "~/.architect/cache".into(),
            "~/.architect/index_cache".into(),
        ],
        _ => Vec::new(),
    }
}

/// Files each built-in adapter's CLI writes that are never committed.
fn default_exclude(kind: AdapterKind) -> Vec<String> {
    match kind {
        AdapterKind::Aider => vec![".aider*".into()],
        _ => Vec::new(),
    }
}

impl AgentSpec {
    /// Whether every placeholder this definition's argument templates use has a value
    /// for a worker with (or without) a model, a budget and a timeout: the program
    /// (command adapter) and `args:` are always expanded, so `{model}` there needs a
    /// model (`model_args:` is for an optional one); every other placeholder always
    /// has a value. Checked when the plan is made, so that no worker fails at start.
    pub fn check_placeholders(
        &self,
        model: bool,
        budget: bool,
        timeout: bool,
    ) -> Result<(), String> {
        let mut vars = |name: &str| match name {
            "model" => model.then(String::new),
            "budget" => budget.then(String::new),
            "timeout" => timeout.then(String::new),
            _ => Some(String::new()),
        };
        let program = (self.adapter == AdapterKind::Command).then_some(&self.program);
        for t in program.into_iter().chain(&self.args) {
            expand(t, &mut vars)?;
        }
        Ok(())
    }

    /// Resolve `name` against the file's definitions (see the module docs).
    pub fn resolve(
        name: &str,
        defs: &BTreeMap<String, AgentDef>,
        file: &str,
        from_flag: bool,
    ) -> Result<AgentSpec, String> {
        let origin = if from_flag {
            "--agent".to_owned()
        } else {
            format!("{file}: parallel_runs.agent")
        };
        let name = name.trim();
        if !crate::config::is_agent_name(name) {
            return Err(format!(
                "{origin}: agent name {name:?} may only hold letters, digits, '-', '_' and '.'"
            ));
        }
        if let Some(def) = defs.get(name) {
            return Self::from_def(name, def, &format!("{file}: agents.{name}"));
        }
        let builtin = |adapter: AdapterKind| AgentSpec {
            name: name.to_owned(),
            adapter,
            program: default_program(adapter).to_owned(),
            args: Vec::new(),
            model_args: Vec::new(),
            budget_args: Vec::new(),
            architect_agent: None,
            env: BTreeMap::new(),
            exclude: default_exclude(adapter),
            writable: default_writable(adapter),
            permission_mode: None,
            result: None,
            allow_github_token: false,
            prices: BTreeMap::new(),
            gateway: None,
        };
        match name {
            "command" => Err(format!(
                "{origin}: the `command` adapter needs a definition: add `agents: {{my-agent: {{command: [prog, \"{{task}}\"]}}}}` to {file}"
            )),
            "claude" => Ok(builtin(AdapterKind::Claude)),
            "codex" => Ok(builtin(AdapterKind::Codex)),
            "aider" => Ok(builtin(AdapterKind::Aider)),
            _ => Ok(AgentSpec {
                architect_agent: Some(if name == "architect" { "build" } else { name }.to_owned()),
                ..builtin(AdapterKind::Architect)
            }),
        }
    }

    fn from_def(name: &str, def: &AgentDef, origin: &str) -> Result<AgentSpec, String> {
        // A file's definitions were checked (with line and column) when it was parsed;
        // this catches definitions made otherwise.
        check::definition(name, def).map_err(|p| {
            let key = crate::config::key_path(&p.path);
            let sep = if key.starts_with('[') { "" } else { "." };
            format!("{origin}{sep}{key}: {}", p.message)
        })?;
        let adapter = def.adapter_for(name);
        let mut exclude = default_exclude(adapter);
        exclude.extend(def.exclude.iter().cloned());
        let mut writable = default_writable(adapter);
        writable.extend(def.writable.iter().cloned());
        let (program, args) = match adapter {
            AdapterKind::Command => {
                let Some((program, rest)) = def.command.split_first() else {
                    return Err(format!(
                        "{origin}.command: the command adapter needs an argv list"
                    ));
                };
                let mut args = rest.to_vec();
                args.extend(def.args.iter().cloned());
                (program.clone(), args)
            }
            _ => (
                def.binary
                    .clone()
                    .unwrap_or_else(|| default_program(adapter).to_owned()),
                def.args.clone(),
            ),
        };
        Ok(AgentSpec {
            name: name.to_owned(),
            adapter,
            program,
            args,
            model_args: def.model_args.clone(),
            budget_args: def.budget_args.clone(),
            architect_agent: (adapter == AdapterKind::Architect).then(|| {
                def.agent
                    .clone()
                    .unwrap_or_else(|| if name == "architect" { "build" } else { name }.to_owned())
            }),
            env: def.env.clone(),
            exclude,
            writable,
            permission_mode: def.permission_mode.clone(),
            result: def.result.clone(),
            allow_github_token: def.allow_github_token,
            prices: BTreeMap::new(),
            gateway: def.gateway.clone(),
        })
    }
}

/// What an adapter knows about the worker it builds a command for.
#[derive(Debug, Clone)]
pub struct WorkerContext<'a> {
    /// Run id.
    pub run_id: &'a str,
    /// 1-based worker id.
    pub worker_id: u32,
    /// The prompt.
    pub task: &'a str,
    /// The model, if not the default.
    pub model: Option<&'a str>,
    /// The worker's branch.
    pub branch: &'a str,
    /// The worker's worktree (the agent's working directory).
    pub worktree: &'a Path,
    /// Most steps.
    pub max_steps: u32,
    /// Budget in USD.
    pub budget: Option<f64>,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Where the agent may write its result JSON (`$FANOUT_RESULT`).
    pub result_file: &'a Path,
    /// The worker's private directory (its temporary files; a private copy of its
    /// CLI's configuration, see [`Adapter::prepare`]), removed when it is done.
    pub private_dir: &'a Path,
    /// Whether the agent runs in fanout's sandbox (Landlock).
    pub sandboxed: bool,
}

#[cfg(test)]
impl<'a> WorkerContext<'a> {
    /// Worker 1 of run `r`, task `t` on branch `b`, one step, no model, budget,
    /// timeout or sandbox; `dir` its worktree, result file and private directory.
    pub(crate) fn for_test(dir: &'a Path) -> WorkerContext<'a> {
        WorkerContext {
            run_id: "r",
            worker_id: 1,
            task: "t",
            model: None,
            branch: "b",
            worktree: dir,
            max_steps: 1,
            budget: None,
            timeout: None,
            result_file: dir,
            private_dir: dir,
            sandboxed: false,
        }
    }
}

/// A command line to run; never passed through a shell.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLine {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set on top of the scrubbed environment.
    pub env: Vec<(String, String)>,
}

/// What fanout observed of the agent's process.
#[derive(Debug, Clone, Default)]
pub struct Observed<'a> {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended it, when one did.
    pub signal: Option<i32>,
    /// The last bytes of its standard output.
    pub stdout_tail: &'a [u8],
    /// Contents of `$FANOUT_RESULT`, when it wrote one.
    pub result_file: Option<&'a [u8]>,
    /// The model the worker was given, if any.
    pub model: Option<&'a str>,
}

/// The agent's own account of how it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    /// It says it finished.
    Success,
    /// It stopped early with some work done (max steps, budget).
    Partial,
    /// It failed.
    Failed,
    /// It hit its own time limit.
    Timeout,
}

/// How an adapter's reason starts when the agent was denied a tool (Claude Code's
/// `permission_denials`): a success without changes is then a failure, not `unchanged`.
pub const PERMISSION_DENIED: &str = "permission denied";

/// What an adapter read from the agent's output.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutcome {
    /// The agent's status.
    pub status: AgentStatus,
    /// Steps taken, if reported.
    pub steps: Option<u32>,
    /// Cost in USD, if reported. Never a made-up zero.
    pub cost: Option<f64>,
    /// Why it was not a success, or a note.
    pub reason: Option<String>,
}

impl AgentOutcome {
    /// Where `cost` came from; adapters that price tokens override this.
    pub fn cost_source(&self) -> Option<CostSource> {
        self.cost.map(|_| CostSource::Agent)
    }
}

/// Cumulative progress read from an agent's live output.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Progress {
    /// USD spent so far, when known.
    pub cost: Option<f64>,
    /// Steps so far, when known.
    pub steps: Option<u32>,
}

/// Longest stdout line handed to a [`StreamWatch`]; longer lines are cut.
pub const WATCH_LINE_MAX: usize = 1 << 20;

/// Reads an agent's stdout line by line while it runs.
pub trait StreamWatch: Send {
    /// One complete line (without its newline, at most [`WATCH_LINE_MAX`] bytes).
    fn line(&mut self, line: &[u8]);
    /// Progress so far.
    fn progress(&self) -> Progress;
    /// Whether fanout must stop the agent at `max_steps` itself (the CLI has no limit).
    fn enforces_steps(&self) -> bool {
        false
    }
    /// Where the live cost comes from (when there is one).
    fn cost_source(&self) -> Option<CostSource> {
        self.progress().cost.map(|_| CostSource::Agent)
    }
}

/// An agent adapter: builds the command, reads the outcome.
pub trait Adapter: Send + Sync {
    /// The command line for one worker.
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String>;
    /// Read the agent's outcome from what was observed. Must not panic on any input.
    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome;
    /// Where the outcome's cost came from.
    fn cost_source(&self, outcome: &AgentOutcome, _observed: &Observed<'_>) -> Option<CostSource> {
        outcome.cost_source()
    }
    /// The agent's final message, where its CLI puts it (unbounded: the run bounds it
    /// with [`findings::bounded`]). `None` when it gave none.
    fn findings(&self, _observed: &Observed<'_>) -> Option<String> {
        None
    }
    /// A reader of the agent's live output, for agents that stream progress.
    fn watch(&self, _model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        None
    }
    /// Prepare what the CLI needs in the worker's private directory before it runs
    /// (Claude Code and Codex: a private copy of their configuration, so that nothing
    /// an agent writes there reaches the user's next session).
    fn prepare(&self, _ctx: &WorkerContext<'_>) -> std::io::Result<()> {
        Ok(())
    }
}

/// The environment an agent gets: fanout's own, less [`is_scrubbed`] names, plus `extra`.
/// Model provider keys are not its business: the run hands it `parent` already without
/// them (`run::gated::without_keys`), and the adapters add the gateway's placeholder.
#[cfg(test)]
pub fn agent_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    agent_env_with(parent, extra, false)
}

/// [`agent_env`], letting `GITHUB_TOKEN` and `GH_TOKEN` of `extra` through when
/// `allow_github_token` (an agent definition's explicit `allow_github_token: true`;
/// fanout passes the token it took at start). `parent`'s credentials never pass, nor do
/// Actions runtime and OIDC tokens; git configuration in `GIT_CONFIG_COUNT`/`_KEY_n`/
/// `_VALUE_n` passes less credential entries, renumbered; `GIT_CONFIG_PARAMETERS` never.
pub fn agent_env_with(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(String, String)],
    allow_github_token: bool,
) -> Vec<(OsString, OsString)> {
    let allowed =
        |k: &str| !is_scrubbed(k) || allow_github_token && matches!(k, "GITHUB_TOKEN" | "GH_TOKEN");
    let parent: Vec<(OsString, OsString)> = parent.into_iter().collect();
    let mut env: BTreeMap<OsString, OsString> = parent
        .iter()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| !is_scrubbed(k) && !is_git_config_var(k))
        })
        .cloned()
        .collect();
    // Git configuration given in the environment passes, less credentials (an
    // `http.extraheader` with a token, a credential helper, a URL with a password).
    let config = crate::secret::git_config_from_env(&parent);
    if !config.is_empty() {
        env.insert("GIT_CONFIG_COUNT".into(), config.len().to_string().into());
        for (i, (k, v)) in config.into_iter().enumerate() {
            env.insert(format!("GIT_CONFIG_KEY_{i}").into(), k.into());
            env.insert(format!("GIT_CONFIG_VALUE_{i}").into(), v.into());
        }
    }
    for (k, v) in extra {
        if allowed(k) {
            env.insert(k.into(), v.into());
        }
    }
    env.into_iter().collect()
}

/// The `FANOUT_*` variables every agent gets.
pub fn fanout_env(ctx: &WorkerContext<'_>) -> Vec<(String, String)> {
    let mut v = vec![
        ("FANOUT_RUN_ID".to_owned(), ctx.run_id.to_owned()),
        ("FANOUT_WORKER_ID".to_owned(), ctx.worker_id.to_string()),
        ("FANOUT_TASK".to_owned(), ctx.task.to_owned()),
        ("FANOUT_BRANCH".to_owned(), ctx.branch.to_owned()),
        (
            "FANOUT_WORKTREE".to_owned(),
            ctx.worktree.display().to_string(),
        ),
        (
            "FANOUT_RESULT".to_owned(),
            ctx.result_file.display().to_string(),
        ),
        ("FANOUT_MAX_STEPS".to_owned(), ctx.max_steps.to_string()),
    ];
    if let Some(m) = ctx.model {
        v.push(("FANOUT_MODEL".to_owned(), m.to_owned()));
    }
    if let Some(b) = ctx.budget {
        v.push(("FANOUT_BUDGET".to_owned(), format_usd_arg(b)));
    }
    if let Some(t) = ctx.timeout {
        v.push(("FANOUT_TIMEOUT".to_owned(), t.as_secs().to_string()));
    }
    v
}

/// A USD amount as an argument: no exponent, no trailing zeros.
pub fn format_usd_arg(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_owned()
    }
}

/// A cost the agent reported, if it is a sane number.
pub(crate) fn sane_cost(v: Option<&serde_json::Value>) -> Option<f64> {
    let c = v?.as_f64()?;
    (c.is_finite() && c >= 0.0).then_some(c)
}

/// A step count the agent reported, if it is a sane number.
pub(crate) fn sane_steps(v: Option<&serde_json::Value>) -> Option<u32> {
    v?.as_u64().and_then(|s| u32::try_from(s).ok())
}

/// A reason string from agent output: one line, bounded.
pub(crate) fn clean_reason(s: &str) -> String {
    let line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.trim();
    if line.chars().count() > 300 {
        let cut: String = line.chars().take(299).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// Helpers for the adapters' tests: recorded CLI output under `tests/fixtures/agents`.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::Observed;

    /// `tests/fixtures/agents/<cli>/<name>`.
    pub fn fixture(cli: &str, name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/agents")
            .join(cli)
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The exit code the CLI had when `case` was recorded (`<cli>/exit_codes.json`).
    pub fn exit_code(cli: &str, case: &str) -> i32 {
        let codes: serde_json::Value =
            serde_json::from_slice(&fixture(cli, "exit_codes.json")).expect("exit_codes.json");
        let code = codes[case]
            .as_i64()
            .unwrap_or_else(|| panic!("{cli}/exit_codes.json has no {case}"));
        i32::try_from(code).expect("an exit code")
    }

    /// The built-in adapter `name` (no definitions in a file).
    pub fn builtin(name: &str) -> Box<dyn super::Adapter> {
        super::AgentSpec::resolve(name, &Default::default(), "f.yml", true)
            .expect("a built-in")
            .adapter()
    }

    /// What the built-in adapter `cli` reads from the recorded `file` (case: the file
    /// name up to its extension), for a worker given `model`.
    pub fn recorded(cli: &str, file: &str, model: Option<&str>) -> super::AgentOutcome {
        let out = fixture(cli, file);
        let case = file.split('.').next().expect("a file name");
        builtin(cli).outcome(&observed_with_model(&out, exit_code(cli, case), model))
    }

    /// An agent that printed `out` and exited with `exit`.
    pub fn observed(out: &[u8], exit: i32) -> Observed<'_> {
        observed_with_model(out, exit, None)
    }

    /// [`observed`], for a worker given `model`.
    pub fn observed_with_model<'a>(
        out: &'a [u8],
        exit: i32,
        model: Option<&'a str>,
    ) -> Observed<'a> {
        Observed {
            exit_code: Some(exit),
            signal: None,
            stdout_tail: out,
            result_file: None,
            model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_adapter_finds_the_final_message_where_its_cli_puts_it() {
        use tests_support::{builtin, fixture, observed};
        let found = |cli: &str, file: &str| {
            let out = fixture(cli, file);
            builtin(cli).findings(&observed(&out, 0))
        };
        assert_eq!(found("claude", "success.json").as_deref(), Some("Done."));
        assert_eq!(
            found("claude", "success-stream.jsonl").as_deref(),
            Some("Done.")
        );
        assert_eq!(found("codex", "success.jsonl").as_deref(), Some("Done."));
        assert_eq!(found("architect", "success.json").as_deref(), Some("Done."));
        assert_eq!(
            found("aider", "success.txt").as_deref(),
            Some("hello-3.txt\n\n```\nhi\n\n```")
        );
        let reply = b"Aider v0.86.2\nRepo-map: disabled\n\nThe flaky test is tests/net.rs.\nIt times out.\n\nTokens: 1k sent, 9 received.\n";
        assert_eq!(
            builtin("aider").findings(&observed(reply, 0)).as_deref(),
            Some("The flaky test is tests/net.rs.\nIt times out.")
        );
        assert_eq!(builtin("claude").findings(&observed(b"", 1)), None);
        // A command agent: its report's `findings`, else `output`, else its stdout's end.
        let defs: BTreeMap<String, AgentDef> = crate::config::parse(
            "agents:\n  a:\n    command: [x]\n    result: {format: jsonl}\n  b:\n    command: [x]\n",
            Path::new("f.yml"),
        )
        .unwrap()
        .agents;
        let cmd = |name: &str| {
            AgentSpec::resolve(name, &defs, "f.yml", true)
                .unwrap()
                .adapter()
        };
        let lines = b"{\"output\": \"first\"}\n{\"findings\": \"last\"}\n";
        assert_eq!(
            cmd("a").findings(&observed(lines, 0)).as_deref(),
            Some("last")
        );
        let file = Observed {
            result_file: Some(br#"{"status":"success","output":"from the file"}"#),
            ..observed(b"noise", 0)
        };
        assert_eq!(cmd("b").findings(&file).as_deref(), Some("from the file"));
        let plain = (1..=50).map(|i| format!("line {i}\n")).collect::<String>();
        let tail = cmd("b").findings(&observed(plain.as_bytes(), 0)).unwrap();
        assert!(
            tail.starts_with("line 11\n") && tail.ends_with("line 50"),
            "{tail}"
        );
    }

    #[test]
    fn github_credentials_never_reach_agents() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "gh_token",
            "INPUT_GITHUB-TOKEN",
            "INPUT_APP-PRIVATE-KEY",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "ACTIONS_RUNTIME_TOKEN",
            "GITHUB_APP_PRIVATE_KEY",
            "FANOUT_APP_PRIVATE_KEY",
            "MY_GITHUB_TOKEN",
            "GIT_DIR",
            "GIT_INDEX_FILE",
            "GITHUB_OUTPUT",
            "GITHUB_ENV",
            "GITHUB_PATH",
            "GITHUB_STATE",
            "GITHUB_STEP_SUMMARY",
        ] {
            assert!(is_scrubbed(name), "{name} should be scrubbed");
        }
        for name in [
            "PATH",
            "HOME",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_REPOSITORY",
            "FANOUT_RESULT",
        ] {
            assert!(!is_scrubbed(name), "{name} should pass");
        }
        let env = agent_env(
            [
                ("PATH".into(), "/bin".into()),
                ("GITHUB_TOKEN".into(), "ghs_secret".into()),
            ],
            &[
                ("GH_TOKEN".into(), "x".into()),
                ("FOO".into(), "bar".into()),
            ],
        );
        assert_eq!(
            env,
            vec![
                (OsString::from("FOO"), OsString::from("bar")),
                (OsString::from("PATH"), OsString::from("/bin"))
            ]
        );
    }

    #[test]
    fn git_config_in_the_environment_loses_credentials_and_the_token_comes_only_from_fanout() {
        let pairs = |v: Vec<(OsString, OsString)>| -> Vec<String> {
            v.iter()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect()
        };
        let parent: Vec<(OsString, OsString)> = [
            ("GIT_CONFIG_COUNT", "3"),
            ("GIT_CONFIG_KEY_0", "http.https://github.com/.extraheader"),
            (
                "GIT_CONFIG_VALUE_0",
                "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzXw==",
            ),
            ("GIT_CONFIG_KEY_1", "user.name"),
            ("GIT_CONFIG_VALUE_1", "me"),
            ("GIT_CONFIG_KEY_2", "credential.helper"),
            ("GIT_CONFIG_VALUE_2", "store"),
            ("GIT_CONFIG_PARAMETERS", "'http.extraheader'='x'"),
            ("GITHUB_TOKEN", "ghs_from_the_parent"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        assert_eq!(
            pairs(agent_env_with(parent.clone(), &[], true)),
            [
                "GIT_CONFIG_COUNT=1",
                "GIT_CONFIG_KEY_0=user.name",
                "GIT_CONFIG_VALUE_0=me"
            ]
        );
        let given = [("GITHUB_TOKEN".to_owned(), "ghs_given".to_owned())];
        assert!(
            pairs(agent_env_with(parent.clone(), &given, true))
                .contains(&"GITHUB_TOKEN=ghs_given".to_owned())
        );
        assert!(
            !pairs(agent_env_with(parent, &given, false))
                .iter()
                .any(|p| p.contains("ghs_"))
        );
    }

    #[test]
    fn resolution_order() {
        let defs: BTreeMap<String, AgentDef> = crate::config::parse(
            "agents:\n  fake:\n    command: [sh, -c, 'echo {task}']\n  review:\n    binary: /opt/architect\n",
            Path::new("f.yml"),
        )
        .unwrap()
        .agents;
        let a = AgentSpec::resolve("fake", &defs, "f.yml", false).unwrap();
        assert_eq!(a.adapter, AdapterKind::Command);
        assert_eq!(a.program, "sh");
        assert_eq!(a.args, vec!["-c", "echo {task}"]);
        let r = AgentSpec::resolve("review", &defs, "f.yml", false).unwrap();
        assert_eq!(r.adapter, AdapterKind::Architect);
        assert_eq!(r.program, "/opt/architect");
        assert_eq!(r.architect_agent.as_deref(), Some("review"));
        let b = AgentSpec::resolve("build", &defs, "f.yml", false).unwrap();
        assert_eq!(b.adapter, AdapterKind::Architect);
        assert_eq!(b.architect_agent.as_deref(), Some("build"));
        let e = AgentSpec::resolve("command", &defs, "f.yml", true).unwrap_err();
        assert!(e.starts_with("--agent: the `command` adapter needs"), "{e}");
        let e = AgentSpec::resolve("a b", &defs, "f.yml", false).unwrap_err();
        assert!(e.starts_with("f.yml: parallel_runs.agent:"), "{e}");
    }

    #[test]
    fn definitions_are_checked_when_not_from_a_file() {
        // A file's definitions are checked (with line and column) by config::parse;
        // definitions built otherwise get the same checks here.
        let def = |yaml: &str| -> AgentDef {
            let mut agents = crate::config::parse(yaml, Path::new("ok.yml"))
                .unwrap()
                .agents;
            agents.pop_first().unwrap().1
        };
        let mut bad = def("agents:\n  bad:\n    command: [x, '{task}']\n");
        bad.command[1] = "{tsk}".into();
        let defs = BTreeMap::from([("bad".to_owned(), bad)]);
        let e = AgentSpec::resolve("bad", &defs, "f.yml", false).unwrap_err();
        assert!(
            e.starts_with("f.yml: agents.bad.command[1]: unknown placeholder {tsk}"),
            "{e}"
        );
        let mut claude = def("agents:\n  claude:\n    binary: /opt/claude\n");
        claude.result = Some(ResultSpec::default());
        let defs = BTreeMap::from([("claude".to_owned(), claude)]);
        let e = AgentSpec::resolve("claude", &defs, "f.yml", true).unwrap_err();
        assert!(
            e.starts_with("f.yml: agents.claude.result: only the command adapter"),
            "{e}"
        );
    }

    #[test]
    fn builtins_take_binary_args_env_and_permission_mode_overrides() {
        let defs = crate::config::parse(
            "agents:\n  claude:\n    binary: /opt/bin/claude\n    args: [--fallback-model, '{model}x']\n    env: {CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1'}\n    permission_mode: bypassPermissions\n  codex: {binary: ./codex}\n  my-aider: {adapter: aider, binary: aider2}\n",
            Path::new("f.yml"),
        )
        .unwrap()
        .agents;
        let c = AgentSpec::resolve("claude", &defs, "f.yml", true).unwrap();
        assert_eq!(
            (c.adapter, c.program.as_str(), c.permission_mode.as_deref()),
            (
                AdapterKind::Claude,
                "/opt/bin/claude",
                Some("bypassPermissions")
            )
        );
        assert_eq!(c.args, ["--fallback-model", "{model}x"]);
        let x = AgentSpec::resolve("codex", &defs, "f.yml", true).unwrap();
        assert_eq!(
            (x.adapter, x.program.as_str()),
            (AdapterKind::Codex, "./codex")
        );
        let a = AgentSpec::resolve("my-aider", &defs, "f.yml", true).unwrap();
        assert_eq!(
            (a.adapter, a.program.as_str()),
            (AdapterKind::Aider, "aider2")
        );
        assert_eq!(a.exclude, [".aider*"]);
        // Not defined in the file: the built-in with its default program.
        let none = BTreeMap::new();
        for (name, kind) in [
            ("claude", AdapterKind::Claude),
            ("codex", AdapterKind::Codex),
            ("aider", AdapterKind::Aider),
            ("architect", AdapterKind::Architect),
        ] {
            let s = AgentSpec::resolve(name, &none, "f.yml", true).unwrap();
            assert_eq!((s.adapter, s.program.as_str()), (kind, name));
        }
    }

    /// Every adapter that reads output: the built-ins, and command agents of each format.
    fn all_adapters() -> Vec<(String, Box<dyn Adapter>)> {
        let mut v: Vec<(String, Box<dyn Adapter>)> = ["claude", "codex", "aider", "architect"]
            .iter()
            .map(|n| ((*n).to_owned(), tests_support::builtin(n)))
            .collect();
        let defs = crate::config::parse(
            "agents:\n  json: {command: [x], result: {format: json, status: result.status, cost: total_cost_usd, steps: num_turns, success: ['false'], partial: [error_max_turns]}}\n  jsonl: {command: [x], result: {format: jsonl, cost: usage.cost, steps: usage.turns, reason: message}}\n  file: {command: [x]}\n",
            Path::new("f.yml"),
        )
        .unwrap()
        .agents;
        for name in ["json", "jsonl", "file"] {
            let a = AgentSpec::resolve(name, &defs, "f.yml", false).unwrap();
            v.push((format!("command/{name}"), a.adapter()));
        }
        v
    }

    /// Whether `c` is a number written in `text` (an agent's own figure, not made up).
    fn written_in(text: &[u8], c: f64) -> bool {
        let text = String::from_utf8_lossy(text);
        text.split(|ch: char| !(ch.is_ascii_digit() || ".eE+-".contains(ch)))
            .flat_map(|tok| [tok, tok.trim_end_matches(['.', 'e', 'E', '+', '-'])])
            .filter_map(|tok| tok.parse::<f64>().ok())
            .any(|v| v == c || (v - c).abs() <= 1e-12 * c.abs())
    }

    /// Read `out` with every adapter and its live watch; panics on a made-up cost or an
    /// unbounded reason.
    fn read_everything(adapters: &[(String, Box<dyn Adapter>)], out: &[u8], what: &str) {
        for exit in [Some(0), Some(1), Some(2), None] {
            for (name, a) in adapters {
                let seen = Observed {
                    exit_code: exit,
                    signal: exit.is_none().then_some(9),
                    stdout_tail: out,
                    result_file: Some(out),
                    model: None,
                };
                let o = a.outcome(&seen);
                if let Some(c) = o.cost {
                    assert!(
                        c.is_finite() && c >= 0.0 && written_in(out, c),
                        "{name} on {what}: cost {c} is not in the output"
                    );
                    assert!(a.cost_source(&o, &seen).is_some(), "{name} on {what}");
                }
                if let Some(r) = &o.reason {
                    assert!(
                        r.chars().count() <= 1000 && !r.chars().any(char::is_control),
                        "{name} on {what}: reason {r:?}"
                    );
                }
                if exit == Some(0)
                    && let Some(mut w) = a.watch(None)
                {
                    for line in out.split(|b| *b == b'\n') {
                        w.line(&line[..line.len().min(WATCH_LINE_MAX)]);
                        if let Some(c) = w.progress().cost {
                            assert!(
                                c.is_finite() && c >= 0.0 && written_in(out, c),
                                "{name} watching {what}: live cost {c} is not in the output"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A small deterministic PRNG (xorshift64*), so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn recorded_outputs() -> Vec<(String, Vec<u8>)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
        let mut all = Vec::new();
        for cli in ["claude", "codex", "aider", "architect"] {
            let mut names: Vec<_> = std::fs::read_dir(root.join(cli))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n != "exit_codes.json")
                .collect();
            names.sort();
            for n in names {
                all.push((format!("{cli}/{n}"), tests_support::fixture(cli, &n)));
            }
        }
        all
    }

    #[test]
    fn truncated_output_never_panics_nor_makes_up_a_cost() {
        let adapters = all_adapters();
        for (name, out) in recorded_outputs() {
            // Every cut near a line end, and every 17th byte elsewhere.
            let cuts = (0..=out.len()).filter(|&i| {
                i % 17 == 0 || out[i.saturating_sub(2)..(i + 2).min(out.len())].contains(&b'\n')
            });
            for cut in cuts {
                read_everything(&adapters, &out[..cut], &format!("{name}[..{cut}]"));
            }
        }
    }

    #[test]
    fn garbage_never_panics_nor_makes_up_a_cost() {
        const PIECES: &[&str] = &[
            "{\"type\":\"result\",",
            "\"is_error\":false,",
            "\"total_cost_usd\":",
            "\"cost\":",
            "1e309",
            "-0.5",
            "NaN",
            "18446744073709551617",
            "\"num_turns\":-3,",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":99999999999999999999}}",
            "{\"type\":\"item.completed\",\"item\":{\"type\":\"command_execution\",\"exit_code\":-1}}",
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"{\\\"error\\\": 1}\"}}",
            "Tokens: 9e99k sent, inf received. Cost: $-1 message, $NaN session.",
            "Cost: $0.5 message, $",
            "Only 3 reflections allowed",
            "litellm.APIError",
            "\u{1b}[31m",
            "\n",
            "}",
            "{",
            "\"status\":\"partial\"",
            "\"usage\":{\"cost\":[1]}",
        ];
        let adapters = all_adapters();
        let outputs = recorded_outputs();
        let mut rng = Rng(0x5eed_f00d_dead_beef);
        for round in 0..400 {
            let mut out = if round % 4 == 0 {
                Vec::new()
            } else {
                outputs[rng.below(outputs.len())].1.clone()
            };
            for _ in 0..1 + rng.below(12) {
                let at = rng.below(out.len() + 1);
                match rng.below(3) {
                    0 => {
                        let p = PIECES[rng.below(PIECES.len())].as_bytes();
                        out.splice(at..at, p.iter().copied());
                    }
                    1 if at < out.len() => out[at] = rng.next() as u8,
                    _ => {
                        let junk: Vec<u8> = (0..rng.below(40)).map(|_| rng.next() as u8).collect();
                        out.splice(at..at, junk);
                    }
                }
            }
            read_everything(&adapters, &out, &format!("garbage round {round}"));
        }
    }

    #[test]
    fn usd_args_have_no_exponent() {
        assert_eq!(format_usd_arg(0.5), "0.5");
        assert_eq!(format_usd_arg(2.0), "2");
        assert_eq!(format_usd_arg(0.0000001), "0");
        assert_eq!(format_usd_arg(1e-5), "0.00001");
    }
}
