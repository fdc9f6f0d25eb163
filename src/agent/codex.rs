//! The `codex` adapter: OpenAI Codex CLI (npm `@openai/codex`), headless.
//!
//! Command: `codex exec --json --skip-git-repo-check -s SANDBOX --cd WORKTREE [-m MODEL]
//! [args…] TASK`. SANDBOX is Codex's own: `workspace-write` (it writes inside the
//! worktree only) when fanout's sandbox is off; `danger-full-access` when fanout's is
//! on — Codex's sandbox (bubblewrap) cannot mount anything inside Landlock, and
//! fanout's sandbox already confines it to the same places.
//!
//! Configuration: `CODEX_HOME` is a private copy of the user's (`$CODEX_HOME`, else
//! `~/.codex`: `config.toml`, `auth.json`, `AGENTS.md`, `AGENTS.override.md`,
//! `instructions.md`, `prompts/`, `rules/`, `skills/`) in the worker's private
//! directory: sessions and logs go there and are dropped with the worker, and a
//! `notify` program or provider an agent writes into `config.toml` never reaches the
//! user's next session. An `env: {CODEX_HOME: …}` in the definition wins.
//!
//! Outcome, from its JSON lines on stdout:
//!
//! | events | status | reason |
//! |---|---|---|
//! | `turn.completed`, no failure | success | failed commands, if any: "2 commands exited non-zero" |
//! | `turn.failed` or a top-level `error` event | failed | the error's message |
//! | nothing of the above | failed | "no turn completed", with the exit code |
//! | a non-zero exit code after `turn.completed` | failed | the exit code |
//!
//! An `item.completed` whose item is of type `error` is a warning (e.g. model
//! metadata), not a failure.
//!
//! Steps: `codex exec` runs one turn (one `turn.completed` per prompt), so turns say
//! nothing; fanout counts the completed items that each cost a model response: actions
//! (`command_execution`, `file_change`, `mcp_tool_call`, `web_search`) and agent
//! messages (`agent_message`) — like Claude's `num_turns`, a write and a final answer
//! are 2 steps. Reasoning items and warnings do not count. Codex has no step limit of
//! its own: fanout counts steps live and stops it past `max_steps` (partial, "max steps
//! reached"). Command items that exited non-zero are counted and named in the reason.
//!
//! Cost: Codex reports tokens (`turn.completed.usage`: input, cached input, output),
//! never dollars: cost is the summed usage × the price table for the worker's model
//! (`cost_source: price-table`), and unknown when the worker has no model (Codex's
//! default model is not reported) or the model has no price.

use std::collections::BTreeMap;

use serde_json::Value;

use super::json::json_lines;
use super::prices::{self, Usage};
use super::private;
use super::{
    Adapter, AgentOutcome, AgentSpec, AgentStatus, CommandLine, CostSource, Observed, Progress,
    StreamWatch, WorkerContext, clean_reason,
};

/// The variable that moves Codex's configuration directory.
const HOME_VAR: &str = "CODEX_HOME";

/// The worker's private copy of Codex's configuration.
fn home_dir(ctx: &WorkerContext<'_>) -> std::path::PathBuf {
    ctx.private_dir.join("codex")
}

/// Seed the worker's private Codex home `to` from the user's (`from`: `$CODEX_HOME`,
/// else `~/.codex`, when it exists): configuration and instructions, never sessions.
fn seed_home(from: Option<std::path::PathBuf>, to: &std::path::Path) -> std::io::Result<()> {
    match from {
        Some(from) => private::seed(
            &from,
            to,
            &[
                "config.toml",
                "auth.json",
                "AGENTS.md",
                "AGENTS.override.md",
                "instructions.md",
            ],
            &["prompts", "rules", "skills"],
        ),
        None => std::fs::create_dir_all(to),
    }
}

/// Codex's login in the worker's private configuration.
pub(super) fn login_file(ctx: &WorkerContext<'_>) -> std::path::PathBuf {
    home_dir(ctx).join("auth.json")
}

pub(super) struct CodexAdapter {
    spec: AgentSpec,
}

impl CodexAdapter {
    pub(super) fn new(spec: AgentSpec) -> Self {
        CodexAdapter { spec }
    }
}

/// Completed items that count as a step (each took a model response).
const STEPS: [&str; 5] = [
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "web_search",
    "agent_message",
];

/// What the event stream says so far.
#[derive(Debug, Default, Clone)]
struct Tally {
    steps: u32,
    failed_commands: u32,
    usage: Usage,
    turns_completed: u32,
    error: Option<String>,
}

/// An error message, unwrapping the JSON body Codex sometimes embeds in it.
fn error_message(v: &Value) -> String {
    let raw = v
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| {
            v.get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
        })
        .unwrap_or("unknown error");
    let inner = serde_json::from_str::<Value>(raw).ok().and_then(|j| {
        j.get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    clean_reason(inner.as_deref().unwrap_or(raw))
}

impl Tally {
    fn event(&mut self, v: &Value) {
        match v.get("type").and_then(Value::as_str) {
            Some("item.completed") => {
                let item = &v["item"];
                let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
                if STEPS.contains(&kind) {
                    self.steps = self.steps.saturating_add(1);
                }
                if kind == "command_execution"
                    && item
                        .get("exit_code")
                        .and_then(Value::as_i64)
                        .is_some_and(|c| c != 0)
                {
                    self.failed_commands = self.failed_commands.saturating_add(1);
                }
            }
            Some("turn.completed") => {
                self.turns_completed = self.turns_completed.saturating_add(1);
                let u = &v["usage"];
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                self.usage.add(Usage {
                    input: n("input_tokens"),
                    cached_input: n("cached_input_tokens"),
                    output: n("output_tokens"),
                });
            }
            Some("turn.failed") => {
                self.error = Some(error_message(v.get("error").unwrap_or(&Value::Null)));
            }
            Some("error") if self.error.is_none() => {
                self.error = Some(error_message(v));
            }
            _ => {}
        }
    }

    fn cost(&self, model: Option<&str>, table: &BTreeMap<String, prices::Price>) -> Option<f64> {
        if self.usage.is_empty() {
            return None;
        }
        prices::cost(model?, self.usage, table)
    }
}

impl Adapter for CodexAdapter {
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String> {
        let mut args: Vec<String> = vec![
            "exec".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
            "-s".into(),
            if ctx.sandboxed {
                "danger-full-access"
            } else {
                "workspace-write"
            }
            .into(),
            "--cd".into(),
            ctx.worktree.display().to_string(),
        ];
        if let Some(m) = ctx.model {
            args.extend(["-m".into(), m.to_owned()]);
        }
        // The prompt last, after `--` so a task starting with '-' is not a flag.
        let tail = vec!["--".into(), ctx.task.to_owned()];
        let home = vec![(HOME_VAR.to_owned(), home_dir(ctx).display().to_string())];
        super::builtin::command_line(&self.spec, ctx, args, tail, home)
    }

    fn prepare(&self, ctx: &WorkerContext<'_>) -> std::io::Result<()> {
        if self.spec.env.contains_key(HOME_VAR) {
            return Ok(());
        }
        seed_home(crate::util::user_dir(HOME_VAR, ".codex"), &home_dir(ctx))
    }

    /// The text of the last completed `agent_message` item.
    fn findings(&self, observed: &Observed<'_>) -> Option<String> {
        json_lines(observed.stdout_tail)
            .filter(|v| v.get("type").and_then(serde_json::Value::as_str) == Some("item.completed"))
            .filter_map(|v| {
                let item = v.get("item")?;
                (item.get("type")?.as_str()? == "agent_message")
                    .then(|| item.get("text")?.as_str().map(str::to_owned))?
            })
            .last()
    }

    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome {
        let mut t = Tally::default();
        for v in json_lines(observed.stdout_tail) {
            t.event(&v);
        }
        let cost = t.cost(observed.model, &self.spec.prices);
        let steps = Some(t.steps);
        let (status, reason) = if let Some(e) = &t.error {
            (AgentStatus::Failed, Some(e.clone()))
        } else if t.turns_completed == 0 {
            let how = match (observed.exit_code, observed.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                (None, None) => "did not exit normally".into(),
            };
            (
                AgentStatus::Failed,
                Some(format!("no turn completed ({how})")),
            )
        } else if let Some(code) = observed.exit_code.filter(|c| *c != 0) {
            (AgentStatus::Failed, Some(format!("exit code {code}")))
        } else if let (None, Some(sig)) = (observed.exit_code, observed.signal) {
            // A completed turn does not make a killed process a success.
            (AgentStatus::Failed, Some(format!("killed by signal {sig}")))
        } else {
            let note = match t.failed_commands {
                0 => None,
                1 => Some("1 command exited non-zero".to_owned()),
                n => Some(format!("{n} commands exited non-zero")),
            };
            (AgentStatus::Success, note)
        };
        AgentOutcome {
            status,
            steps,
            cost,
            reason,
        }
    }

    fn cost_source(&self, outcome: &AgentOutcome, _observed: &Observed<'_>) -> Option<CostSource> {
        outcome.cost.map(|_| CostSource::PriceTable)
    }

    fn watch(&self, model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        Some(Box::new(CodexWatch {
            tally: Tally::default(),
            model: model.map(str::to_owned),
            prices: self.spec.prices.clone(),
        }))
    }
}

struct CodexWatch {
    tally: Tally,
    model: Option<String>,
    prices: BTreeMap<String, prices::Price>,
}

impl StreamWatch for CodexWatch {
    fn line(&mut self, line: &[u8]) {
        if let Ok(v) = serde_json::from_slice::<Value>(line.trim_ascii()) {
            self.tally.event(&v);
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            cost: self.tally.cost(self.model.as_deref(), &self.prices),
            steps: Some(self.tally.steps),
        }
    }

    fn enforces_steps(&self) -> bool {
        true
    }

    fn cost_source(&self) -> Option<CostSource> {
        self.progress().cost.map(|_| CostSource::PriceTable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tests_support::{builtin, fixture, observed_with_model, recorded};

    fn adapter() -> Box<dyn Adapter> {
        builtin("codex")
    }

    #[test]
    fn recorded_outputs_map_onto_outcomes() {
        // One write and the final message: 2 steps. No model given: tokens but no
        // price, so the cost is unknown, not zero.
        assert_eq!(
            recorded("codex", "success.jsonl", None),
            AgentOutcome {
                status: AgentStatus::Success,
                steps: Some(2),
                cost: None,
                reason: None
            }
        );
        // With a priced model: 2000 in, 200 out at gpt-4o's $2.50 / $10 per million.
        let a = adapter();
        let out = fixture("codex", "success.jsonl");
        let seen = observed_with_model(&out, 0, Some("gpt-4o"));
        let o = a.outcome(&seen);
        assert!((o.cost.unwrap() - 0.007).abs() < 1e-12, "{o:?}");
        assert_eq!(a.cost_source(&o, &seen), Some(CostSource::PriceTable));
        // Codex has no turn limit: the fake stopped after 3 writes, exit 0 (fanout's
        // own step limit is what stops it; see the live watch below).
        assert_eq!(
            recorded("codex", "max_turns.jsonl", None),
            AgentOutcome {
                status: AgentStatus::Success,
                steps: Some(4),
                cost: None,
                reason: None
            }
        );
        // HTTP 400: an `error` event, then `turn.failed`; the API's message is unwrapped
        // from the JSON body codex embeds in it.
        assert_eq!(
            recorded("codex", "api_error.jsonl", Some("gpt-4o")),
            AgentOutcome {
                status: AgentStatus::Failed,
                steps: Some(0),
                cost: None,
                reason: Some("fake-model: scripted API error".into())
            }
        );
    }

    #[test]
    fn failed_commands_warnings_and_garbage() {
        let a = adapter();
        let run = |s: &str, exit: i32| a.outcome(&observed_with_model(s.as_bytes(), exit, None));
        let o = run(
            concat!(
                r#"{"type":"item.completed","item":{"type":"error","message":"model metadata not found"}}"#,
                "\n",
                r#"{"type":"item.completed","item":{"type":"command_execution","exit_code":1}}"#,
                "\n",
                r#"{"type":"item.completed","item":{"type":"command_execution","exit_code":2}}"#,
                "\n",
                r#"{"type":"item.completed","item":{"type":"command_execution","exit_code":0}}"#,
                "\n",
                r#"{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":1}}"#,
                "\n",
            ),
            0,
        );
        assert_eq!(o.status, AgentStatus::Success);
        assert_eq!(o.steps, Some(3));
        assert_eq!(o.reason.as_deref(), Some("2 commands exited non-zero"));
        let o = run("Error: not logged in\n", 1);
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(o.reason.as_deref(), Some("no turn completed (exit code 1)"));
        let o = run(r#"{"type":"turn.completed","usage":{}}"#, 3);
        assert_eq!(o.reason.as_deref(), Some("exit code 3"));
        // A completed turn, then killed by a signal (found by fuzz/agent_codex).
        let out = br#"{"type":"turn.completed","usage":{}}"#;
        let o = a.outcome(&Observed {
            exit_code: None,
            signal: Some(9),
            ..observed_with_model(out, 0, None)
        });
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(o.reason.as_deref(), Some("killed by signal 9"));
        // Reasoning items are not steps; a plain error message is taken as it is.
        let o = run(
            concat!(
                r#"{"type":"item.completed","item":{"type":"reasoning","text":"hm"}}"#,
                "\n",
                r#"{"type":"item.completed","item":{"type":"agent_message","text":"trying"}}"#,
                "\n",
                r#"{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}"#,
                "\n",
            ),
            1,
        );
        assert_eq!(
            o,
            AgentOutcome {
                status: AgentStatus::Failed,
                steps: Some(1),
                cost: None,
                reason: Some("stream disconnected before completion".into())
            }
        );
    }

    #[test]
    fn command_line() {
        let dir = std::path::Path::new("/w/t");
        let ctx = WorkerContext {
            task: "-v: fix it",
            model: Some("gpt-5"),
            max_steps: 7,
            budget: Some(0.5),
            ..WorkerContext::for_test(dir)
        };
        let c = adapter().command(&ctx).unwrap();
        assert_eq!(c.program, "codex");
        assert_eq!(
            c.args,
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-s",
                "workspace-write",
                "--cd",
                "/w/t",
                "-m",
                "gpt-5",
                "--",
                "-v: fix it"
            ]
        );
        assert!(c.env.contains(&("CODEX_HOME".into(), "/w/t/codex".into())));
        // Inside fanout's sandbox, Codex's own (bubblewrap) cannot run.
        let confined = WorkerContext {
            sandboxed: true,
            ..ctx
        };
        let c = adapter().command(&confined).unwrap();
        assert_eq!(c.args[3..5], ["-s", "danger-full-access"]);
    }

    #[test]
    fn codex_home_is_a_private_copy_of_the_users() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join(".codex");
        std::fs::create_dir_all(home.join("sessions")).unwrap();
        std::fs::write(home.join("config.toml"), "model = \"x\"\n").unwrap();
        std::fs::write(home.join("sessions/old.jsonl"), "{}").unwrap();
        let private = d.path().join("private");
        let ctx = WorkerContext {
            private_dir: &private,
            sandboxed: true,
            ..WorkerContext::for_test(d.path())
        };
        // (`home` stands for the user's $CODEX_HOME)
        seed_home(Some(home), &home_dir(&ctx)).unwrap();
        assert_eq!(
            std::fs::read_to_string(private.join("codex/config.toml")).unwrap(),
            "model = \"x\"\n"
        );
        assert!(!private.join("codex/sessions").exists());
    }

    #[test]
    fn the_live_watch_counts_actions_for_the_step_limit() {
        let a = adapter();
        let mut w = a.watch(Some("gpt-4o")).unwrap();
        assert!(w.enforces_steps());
        let out = fixture("codex", "max_turns.jsonl");
        let mut seen = Vec::new();
        for l in out.split(|b| *b == b'\n') {
            w.line(l);
            seen.push(w.progress().steps.unwrap());
        }
        assert_eq!(seen.iter().max(), Some(&4));
        // The steps rise one by one as items complete (the executor stops at max_steps).
        assert!(seen.windows(2).all(|p| p[1] <= p[0] + 1));
        let cost = w.progress().cost.unwrap();
        assert!((cost - (4000.0 * 2.5 + 400.0 * 10.0) / 1e6).abs() < 1e-12);
    }
}
