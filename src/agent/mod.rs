//! Agents: how to build a worker's command line, and how to read what the agent
//! reported. Agents are untrusted: their output is parsed defensively, their
//! environment is scrubbed of GitHub credentials, and a claim they make never
//! outranks what fanout observed (exit code, timeout, diff).
//!
//! Resolution of an agent name (from `--agent` or `parallel_runs.agent`):
//! 1. a definition under `agents:` in `fanout.yml`;
//! 2. a built-in: `claude`, `codex`, `aider`, `architect` (architect's `build` agent);
//! 3. otherwise architect's own agent of that name (the seed's `agent: build`).
//!
//! Each adapter's module documents its command line and how its output maps onto a
//! status, steps and cost. Agents that stream their progress (Claude's stream-json,
//! Codex's JSON lines, aider's `Cost:` lines, a custom agent's JSON lines) are read
//! line by line as they run ([`StreamWatch`]), so a budget or step limit stops them
//! when crossed rather than after the fact.

mod aider;
mod architect;
mod claude;
mod codex;
mod command;
pub mod json;
pub mod prices;
mod template;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::config::AdapterKind;
use crate::config::{AgentDef, Price, ResultSpec};
pub use template::{PLACEHOLDERS, expand};

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

/// Files each built-in adapter's CLI writes that are never committed.
fn default_exclude(kind: AdapterKind) -> Vec<String> {
    match kind {
        AdapterKind::Aider => vec![".aider*".into()],
        _ => Vec::new(),
    }
}

impl AgentSpec {
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
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
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
            permission_mode: None,
            result: None,
            allow_github_token: false,
            prices: BTreeMap::new(),
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
        let adapter = def.adapter.unwrap_or(if !def.command.is_empty() {
            AdapterKind::Command
        } else {
            match name {
                "claude" => AdapterKind::Claude,
                "codex" => AdapterKind::Codex,
                "aider" => AdapterKind::Aider,
                _ => AdapterKind::Architect,
            }
        });
        if def.result.is_some() && adapter != AdapterKind::Command {
            return Err(format!(
                "{origin}.result: only the command adapter reads a `result` spec; the {adapter:?} adapter reads its CLI's own output"
            ));
        }
        if def.permission_mode.is_some() && adapter != AdapterKind::Claude {
            return Err(format!(
                "{origin}.permission_mode: only used by the claude adapter"
            ));
        }
        let mut exclude = default_exclude(adapter);
        exclude.extend(def.exclude.iter().cloned());
        let check = |key: &str, list: &[String]| -> Result<(), String> {
            for (i, arg) in list.iter().enumerate() {
                template::check(arg).map_err(|e| format!("{origin}.{key}[{i}]: {e}"))?;
            }
            Ok(())
        };
        check("command", &def.command)?;
        check("model_args", &def.model_args)?;
        check("budget_args", &def.budget_args)?;
        check("args", &def.args)?;
        for key in def.env.keys() {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(format!(
                    "{origin}.env: {key:?} is not a valid variable name"
                ));
            }
        }
        match adapter {
            AdapterKind::Command => {
                let Some((program, rest)) = def.command.split_first() else {
                    return Err(format!(
                        "{origin}.command: the command adapter needs an argv list, e.g. [my-agent, \"{{task}}\"]"
                    ));
                };
                if program.trim().is_empty() {
                    return Err(format!("{origin}.command[0]: empty program name"));
                }
                let mut args = rest.to_vec();
                args.extend(def.args.iter().cloned());
                if let Some(r) = &def.result {
                    for (key, path) in [
                        ("status", &r.status),
                        ("steps", &r.steps),
                        ("cost", &r.cost),
                        ("reason", &r.reason),
                    ] {
                        if let Some(p) = path
                            && (p.trim().is_empty() || p.split('.').any(str::is_empty))
                        {
                            return Err(format!(
                                "{origin}.result.{key}: {p:?} is not a dotted JSON path like `result.cost_usd`"
                            ));
                        }
                    }
                }
                Ok(AgentSpec {
                    name: name.to_owned(),
                    adapter,
                    program: program.clone(),
                    args,
                    model_args: def.model_args.clone(),
                    budget_args: def.budget_args.clone(),
                    architect_agent: None,
                    env: def.env.clone(),
                    exclude,
                    permission_mode: None,
                    result: def.result.clone(),
                    allow_github_token: def.allow_github_token,
                    prices: BTreeMap::new(),
                })
            }
            AdapterKind::Architect
            | AdapterKind::Claude
            | AdapterKind::Codex
            | AdapterKind::Aider => {
                if !def.command.is_empty() {
                    return Err(format!(
                        "{origin}.command: not used by the {} adapter (use `binary` and `args`)",
                        default_program(adapter)
                    ));
                }
                if def.agent.is_some() && adapter != AdapterKind::Architect {
                    return Err(format!(
                        "{origin}.agent: only used by the architect adapter"
                    ));
                }
                if !def.model_args.is_empty() || !def.budget_args.is_empty() {
                    return Err(format!(
                        "{origin}: model_args and budget_args are for the command adapter; the {} adapter passes the model and budget itself",
                        default_program(adapter)
                    ));
                }
                Ok(AgentSpec {
                    name: name.to_owned(),
                    adapter,
                    program: def
                        .binary
                        .clone()
                        .unwrap_or_else(|| default_program(adapter).to_owned()),
                    args: def.args.clone(),
                    model_args: Vec::new(),
                    budget_args: Vec::new(),
                    architect_agent: (adapter == AdapterKind::Architect).then(|| {
                        def.agent.clone().unwrap_or_else(|| {
                            if name == "architect" { "build" } else { name }.to_owned()
                        })
                    }),
                    env: def.env.clone(),
                    exclude,
                    permission_mode: def.permission_mode.clone(),
                    result: None,
                    allow_github_token: def.allow_github_token,
                    prices: BTreeMap::new(),
                })
            }
        }
    }

    /// The adapter for this definition.
    pub fn adapter(&self) -> Box<dyn Adapter> {
        match self.adapter {
            AdapterKind::Command => Box::new(command::CommandAdapter::new(self.clone())),
            AdapterKind::Architect => Box::new(architect::ArchitectAdapter::new(self.clone())),
            AdapterKind::Claude => Box::new(claude::ClaudeAdapter::new(self.clone())),
            AdapterKind::Codex => Box::new(codex::CodexAdapter::new(self.clone())),
            AdapterKind::Aider => Box::new(aider::AiderAdapter::new(self.clone())),
        }
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

/// Where a cost figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// The agent's own USD figure.
    Agent,
    /// Token usage × the price table.
    PriceTable,
}

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
    /// A reader of the agent's live output, for agents that stream progress.
    fn watch(&self, _model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        None
    }
}

/// Variables that never reach an agent: GitHub and Actions credentials, and git
/// variables that would point the agent's git at the user's repository.
pub fn is_scrubbed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const EXACT: &[&str] = &[
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "GITHUB_PAT",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_RUNTIME_URL",
        "ACTIONS_RESULTS_URL",
        "ACTIONS_CACHE_URL",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_PREFIX",
        "GIT_NAMESPACE",
        "GIT_ASKPASS",
        "SSH_AUTH_SOCK",
    ];
    EXACT.contains(&upper.as_str())
        || upper.contains("GITHUB_TOKEN")
        || upper.starts_with("GH_") && upper.ends_with("TOKEN")
        || upper.starts_with("FANOUT_")
            && (upper.contains("TOKEN") || upper.contains("PRIVATE_KEY"))
        || upper.starts_with("GITHUB_APP_")
        || upper.starts_with("INPUT_")
            && (upper.contains("TOKEN") || upper.contains("KEY") || upper.contains("SECRET"))
}

/// The environment an agent gets: fanout's own, less [`is_scrubbed`] names, plus `extra`.
/// Model provider keys (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, base URLs, …) pass.
pub fn agent_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    agent_env_with(parent, extra, false)
}

/// [`agent_env`], letting `GITHUB_TOKEN` and `GH_TOKEN` through when `allow_github_token`
/// (an agent definition's explicit `allow_github_token: true`). Actions runtime and
/// OIDC tokens never pass.
pub fn agent_env_with(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[(String, String)],
    allow_github_token: bool,
) -> Vec<(OsString, OsString)> {
    let allowed =
        |k: &str| !is_scrubbed(k) || allow_github_token && matches!(k, "GITHUB_TOKEN" | "GH_TOKEN");
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(allowed))
        .collect();
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
        ] {
            assert!(is_scrubbed(name), "{name} should be scrubbed");
        }
        for name in [
            "PATH",
            "HOME",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_REPOSITORY",
            "GITHUB_STEP_SUMMARY",
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
    fn unknown_placeholders_are_config_errors() {
        let defs = crate::config::parse(
            "agents:\n  bad:\n    command: [x, '{tsk}']\n",
            Path::new("f.yml"),
        )
        .unwrap()
        .agents;
        let e = AgentSpec::resolve("bad", &defs, "f.yml", false).unwrap_err();
        assert!(
            e.starts_with("f.yml: agents.bad.command[1]: unknown placeholder {tsk}"),
            "{e}"
        );
    }

    #[test]
    fn usd_args_have_no_exponent() {
        assert_eq!(format_usd_arg(0.5), "0.5");
        assert_eq!(format_usd_arg(2.0), "2");
        assert_eq!(format_usd_arg(0.0000001), "0");
        assert_eq!(format_usd_arg(1e-5), "0.00001");
    }
}
