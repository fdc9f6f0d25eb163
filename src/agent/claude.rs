//! The `claude` adapter: Claude Code (npm `@anthropic-ai/claude-code`), headless.
//!
//! Command: `claude -p TASK --output-format stream-json --verbose --max-turns N
//! --permission-mode MODE [--model M] [--max-budget-usd B] [args…]`. The permission
//! mode defaults to `acceptEdits` (file edits inside the worktree without prompts;
//! `bypassPermissions`, which also runs commands, is refused by Claude Code as root)
//! and is set with `permission_mode:` in the agent's definition.
//!
//! Outcome: the last `{"type": "result"}` object on stdout (stream-json prints it last;
//! `--output-format json` prints only it — both are read).
//!
//! | result | status | reason |
//! |---|---|---|
//! | `is_error: false` | success | denied tools, if any: "permission denied: Write, Bash" |
//! | `is_error: true`, `subtype: error_max_turns` | partial | "max turns reached" |
//! | `is_error: true`, `subtype: error_max_budget_usd` | partial | "budget exceeded" |
//! | `is_error: true`, `api_error_status: N` | failed | "API error N: …" |
//! | `is_error: true`, anything else | failed | the `result` text or `errors` |
//! | no result object | failed | "no result from Claude Code", with the exit code |
//!
//! `is_error` decides, not `subtype` (an API error reports `subtype: success`). A
//! success with a non-zero exit code is failed. Steps are `num_turns`; cost is
//! `total_cost_usd`, Claude Code's own figure (`cost_source: agent`; an API error
//! reports a known 0). fanout also passes the budget as `--max-budget-usd`, which
//! Claude Code enforces itself. While it runs, assistant messages are counted and
//! their token usage priced by the price table, so fanout's own budget check can stop
//! it before the final figure arrives; that live figure is an under-estimate
//! (stream-json carries a message's usage as of its start, output tokens mostly
//! uncounted) and unknown for a model without a price.
//!
//! Configuration: Claude Code runs with `CLAUDE_CONFIG_DIR` set to a private copy of
//! the user's (`$CLAUDE_CONFIG_DIR`, else `~/.claude`: `settings.json`, `CLAUDE.md`,
//! `.credentials.json`, `agents/`, `commands/`, `skills/`, `output-styles/`, and the
//! `.claude.json` beside it) in the worker's private directory, so that its sessions
//! and state — and any hook an agent writes into `settings.json` — are dropped with
//! the worker. An `env: {CLAUDE_CONFIG_DIR: …}` in the definition wins (then that
//! directory must be in `writable:` for a sandboxed run). A login Claude Code
//! refreshes during a run stays in the worker's copy.

use std::collections::BTreeMap;

use serde_json::Value;

use super::json::last_json_object;
use super::prices::{self, Usage};
use super::private;
use super::{
    Adapter, AgentOutcome, AgentSpec, AgentStatus, CommandLine, Observed, PERMISSION_DENIED,
    Progress, StreamWatch, WorkerContext, clean_reason, format_usd_arg, sane_cost, sane_steps,
};

/// The variable that moves Claude Code's configuration directory.
const CONFIG_VAR: &str = "CLAUDE_CONFIG_DIR";

/// The worker's private copy of Claude Code's configuration.
fn config_dir(ctx: &WorkerContext<'_>) -> std::path::PathBuf {
    ctx.private_dir.join("claude")
}

/// Seed the private configuration `to` from the user's directory `from` and state
/// file `state` (`.claude.json`).
fn seed_config(
    from: Option<&std::path::Path>,
    state: Option<&std::path::Path>,
    to: &std::path::Path,
) -> std::io::Result<()> {
    let Some(from) = from else {
        return std::fs::create_dir_all(to);
    };
    private::seed(
        from,
        to,
        &[".credentials.json", "settings.json", "CLAUDE.md"],
        &["agents", "commands", "skills", "output-styles"],
    )?;
    match state {
        Some(state) => private::copy_file(state, &to.join(".claude.json")),
        None => Ok(()),
    }
}

/// Claude Code's login in the worker's private configuration.
pub(super) fn login_file(ctx: &WorkerContext<'_>) -> std::path::PathBuf {
    config_dir(ctx).join(".credentials.json")
}

/// Remove the API key older Claude Code versions keep in `.claude.json`
/// (`primaryApiKey`) from the worker's private copy of that file. A copy that is not a
/// JSON object is removed whole (nothing shows it holds no key; Claude Code makes a
/// new one).
pub(super) fn drop_stored_key(ctx: &WorkerContext<'_>) -> std::io::Result<()> {
    let path = config_dir(ctx).join(".claude.json");
    let bytes = match crate::util::read_capped(&path, private::MAX_FILE) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        read => read?,
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(mut state)) => {
            if state.remove("primaryApiKey").is_none() {
                return Ok(());
            }
            let text = serde_json::to_vec_pretty(&state).map_err(std::io::Error::other)?;
            crate::util::write_atomic(&path, &text)
        }
        _ => std::fs::remove_file(&path),
    }
}

pub(super) struct ClaudeAdapter {
    spec: AgentSpec,
}

impl ClaudeAdapter {
    pub(super) fn new(spec: AgentSpec) -> Self {
        ClaudeAdapter { spec }
    }
}

fn is_result(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("result")
}

/// Tool names from `permission_denials`.
fn denied_tools(result: &Value) -> Vec<String> {
    let mut names: Vec<String> = result
        .get("permission_denials")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("tool_name").and_then(Value::as_str))
        .map(clean_reason)
        .collect();
    names.dedup();
    names
}

/// How the process ended, when that was not a clean exit: a report of success from
/// a process that failed or was killed is not one.
fn failed_exit(observed: &Observed<'_>) -> Option<String> {
    match (observed.exit_code, observed.signal) {
        (Some(0), _) | (None, None) => None,
        (Some(code), _) => Some(format!("exited with code {code}")),
        (None, Some(sig)) => Some(format!("was killed by signal {sig}")),
    }
}

impl Adapter for ClaudeAdapter {
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String> {
        let mut args: Vec<String> = vec![
            "-p".into(),
            ctx.task.to_owned(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--max-turns".into(),
            ctx.max_steps.to_string(),
            "--permission-mode".into(),
            self.spec
                .permission_mode
                .clone()
                .unwrap_or_else(|| "acceptEdits".into()),
        ];
        if let Some(m) = ctx.model {
            args.extend(["--model".into(), m.to_owned()]);
        }
        if let Some(b) = ctx.budget {
            args.extend(["--max-budget-usd".into(), format_usd_arg(b)]);
        }
        let config = vec![(CONFIG_VAR.to_owned(), config_dir(ctx).display().to_string())];
        super::builtin::command_line(&self.spec, ctx, args, Vec::new(), config)
    }

    fn prepare(&self, ctx: &WorkerContext<'_>) -> std::io::Result<()> {
        if self.spec.env.contains_key(CONFIG_VAR) {
            return Ok(());
        }
        // `.claude.json` is in the config dir when one is set, else beside it in HOME.
        let set = std::env::var_os(CONFIG_VAR).is_some_and(|v| !v.is_empty());
        let from = crate::util::user_dir(CONFIG_VAR, ".claude");
        let state = from.as_ref().map(|f| {
            if set {
                f.join(".claude.json")
            } else {
                f.with_file_name(".claude.json")
            }
        });
        seed_config(from.as_deref(), state.as_deref(), &config_dir(ctx))
    }

    /// The result object's `result`: Claude Code's final message.
    fn findings(&self, observed: &Observed<'_>) -> Option<String> {
        let result = last_json_object(observed.stdout_tail, is_result)?;
        Some(result.get("result")?.as_str()?.to_owned())
    }

    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome {
        let Some(result) = last_json_object(observed.stdout_tail, is_result) else {
            let how = match (observed.exit_code, observed.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                (None, None) => "did not exit normally".into(),
            };
            return AgentOutcome {
                status: AgentStatus::Failed,
                steps: None,
                cost: None,
                reason: Some(format!("no result from Claude Code ({how})")),
            };
        };
        let steps = sane_steps(result.get("num_turns"));
        let cost = sane_cost(result.get("total_cost_usd"));
        let is_error = result.get("is_error").and_then(Value::as_bool);
        let subtype = result.get("subtype").and_then(Value::as_str).unwrap_or("");
        let text = result
            .get("result")
            .and_then(Value::as_str)
            .map(clean_reason)
            .filter(|s| !s.is_empty())
            .or_else(|| {
                let errs: Vec<String> = result
                    .get("errors")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(clean_reason)
                    .collect();
                (!errs.is_empty()).then(|| errs.join("; "))
            });
        let denied = denied_tools(&result);
        let denied_note =
            (!denied.is_empty()).then(|| format!("{PERMISSION_DENIED}: {}", denied.join(", ")));
        let api_status = result.get("api_error_status").and_then(Value::as_u64);
        let (mut status, mut reason) = match (is_error, subtype) {
            (Some(false), _) => (AgentStatus::Success, denied_note.clone()),
            (Some(true), "error_max_turns") => {
                (AgentStatus::Partial, Some("max turns reached".to_owned()))
            }
            (Some(true), "error_max_budget_usd") => {
                (AgentStatus::Partial, Some("budget exceeded".to_owned()))
            }
            (Some(true), _) => (
                AgentStatus::Failed,
                Some(match (api_status, &text) {
                    (Some(code), Some(t)) if t.contains(&code.to_string()) => t.clone(),
                    (Some(code), Some(t)) => format!("API error {code}: {t}"),
                    (Some(code), None) => format!("API error {code}"),
                    (None, Some(t)) => t.clone(),
                    (None, None) => format!("Claude Code reported an error ({subtype})"),
                }),
            ),
            (None, _) => (
                AgentStatus::Failed,
                Some("Claude Code's result has no is_error field".to_owned()),
            ),
        };
        if status != AgentStatus::Success
            && let Some(d) = &denied_note
        {
            reason = Some(match reason {
                Some(r) => format!("{r}; {d}"),
                None => d.clone(),
            });
        }
        if status == AgentStatus::Success
            && let Some(why) = failed_exit(observed)
        {
            status = AgentStatus::Failed;
            reason = Some(format!("reported success but {why}"));
        }
        AgentOutcome {
            status,
            steps,
            cost,
            reason,
        }
    }

    fn watch(&self, model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        Some(Box::new(ClaudeWatch {
            model: model.map(str::to_owned),
            prices: self.spec.prices.clone(),
            usage_by_model: BTreeMap::new(),
            seen: Vec::new(),
            turns: 0,
            final_cost: None,
        }))
    }
}

/// Live reading of `--output-format stream-json`.
struct ClaudeWatch {
    model: Option<String>,
    prices: BTreeMap<String, prices::Price>,
    usage_by_model: BTreeMap<String, Usage>,
    /// Message ids already counted (a message may come in several events).
    seen: Vec<String>,
    turns: u32,
    final_cost: Option<f64>,
}

impl StreamWatch for ClaudeWatch {
    fn line(&mut self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line.trim_ascii()) else {
            return;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                let msg = &v["message"];
                if let Some(id) = msg.get("id").and_then(Value::as_str) {
                    if self.seen.iter().any(|s| s == id) {
                        return;
                    }
                    if self.seen.len() < 10_000 {
                        self.seen.push(id.to_owned());
                    }
                }
                self.turns = self.turns.saturating_add(1);
                let u = &msg["usage"];
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                let cached = n("cache_read_input_tokens");
                let usage = Usage {
                    input: n("input_tokens") + cached + n("cache_creation_input_tokens"),
                    cached_input: cached,
                    output: n("output_tokens"),
                };
                let model = msg
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| self.model.clone())
                    .unwrap_or_default();
                self.usage_by_model.entry(model).or_default().add(usage);
            }
            Some("result") => self.final_cost = sane_cost(v.get("total_cost_usd")),
            _ => {}
        }
    }

    fn cost_source(&self) -> Option<super::CostSource> {
        match (self.final_cost, self.progress().cost) {
            (Some(_), _) => Some(super::CostSource::Agent),
            (None, Some(_)) => Some(super::CostSource::PriceTable),
            (None, None) => None,
        }
    }

    fn progress(&self) -> Progress {
        // Before any priced message there is no cost (an empty sum is not a zero).
        let cost = self.final_cost.or_else(|| {
            if self.usage_by_model.is_empty() {
                return None;
            }
            self.usage_by_model
                .iter()
                .map(|(m, u)| prices::cost(m, *u, &self.prices))
                .sum::<Option<f64>>()
        });
        Progress {
            cost,
            steps: Some(self.turns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tests_support::{builtin, fixture, observed, recorded};

    fn adapter() -> Box<dyn Adapter> {
        builtin("claude")
    }

    #[test]
    fn recorded_outputs_map_onto_outcomes() {
        // The same three runs, with --output-format json and stream-json.
        for (json, stream) in [
            ("success.json", "success-stream.jsonl"),
            ("max_turns.json", "max_turns-stream.jsonl"),
            ("api_error.json", "api_error-stream.jsonl"),
        ] {
            assert_eq!(
                recorded("claude", json, None),
                recorded("claude", stream, None),
                "{json}"
            );
        }
        assert_eq!(
            recorded("claude", "success-stream.jsonl", None),
            AgentOutcome {
                status: AgentStatus::Success,
                steps: Some(2),
                cost: Some(0.012),
                reason: None
            }
        );
        // --max-turns 2: is_error, subtype error_max_turns, exit 1.
        assert_eq!(
            recorded("claude", "max_turns-stream.jsonl", None),
            AgentOutcome {
                status: AgentStatus::Partial,
                steps: Some(3),
                cost: Some(0.012),
                reason: Some("max turns reached".into())
            }
        );
        // HTTP 400: subtype success but is_error, api_error_status 400; Claude Code's
        // own cost figure is a known zero.
        assert_eq!(
            recorded("claude", "api_error-stream.jsonl", None),
            AgentOutcome {
                status: AgentStatus::Failed,
                steps: Some(1),
                cost: Some(0.0),
                reason: Some("API Error: 400 fake-model: scripted API error".into())
            }
        );
    }

    #[test]
    fn is_error_decides_and_denials_are_reported() {
        let a = adapter();
        let run = |json: &str, exit: i32| a.outcome(&observed(json.as_bytes(), exit));
        // An API error says subtype success: is_error wins.
        let o = run(
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"overloaded","num_turns":1}"#,
            1,
        );
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(o.reason.as_deref(), Some("API error 529: overloaded"));
        // Success that wrote nothing because the permission mode denied it.
        let o = run(
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"total_cost_usd":0.5,"permission_denials":[{"tool_name":"Write"},{"tool_name":"Bash"}]}"#,
            0,
        );
        assert_eq!(o.status, AgentStatus::Success);
        assert_eq!(o.reason.as_deref(), Some("permission denied: Write, Bash"));
        // Claimed success, failing exit code.
        let o = run(r#"{"type":"result","is_error":false,"num_turns":1}"#, 2);
        assert_eq!(o.status, AgentStatus::Failed);
        // Claimed success, killed by a signal (found by fuzz/agent_claude).
        let o = a.outcome(&Observed {
            exit_code: None,
            signal: Some(9),
            ..observed(br#"{"type":"result","is_error":false,"num_turns":1}"#, 0)
        });
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(
            o.reason.as_deref(),
            Some("reported success but was killed by signal 9")
        );
        // Nothing usable.
        let o = run("Error: something broke\n", 1);
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(
            o.reason.as_deref(),
            Some("no result from Claude Code (exit code 1)")
        );
        assert_eq!((o.steps, o.cost), (None, None));
        // A negative or absurd cost is not a cost.
        let o = run(
            r#"{"type":"result","is_error":false,"total_cost_usd":-1}"#,
            0,
        );
        assert_eq!(o.cost, None);
    }

    #[test]
    fn the_live_watch_counts_turns_and_prices_tokens() {
        let a = adapter();
        let mut w = a.watch(None).unwrap();
        let stream = fixture("claude", "max_turns-stream.jsonl");
        let lines: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
        // Before the result line: two assistant turns, priced by the table when the
        // model has a price (the fake's model has none: the cost stays unknown).
        for l in &lines[..lines.len() - 2] {
            w.line(l);
        }
        assert_eq!(
            w.progress(),
            Progress {
                cost: None,
                steps: Some(2)
            }
        );
        w.line(lines[lines.len() - 2]);
        assert_eq!(w.progress().cost, Some(0.012));

        let mut w = a.watch(Some("claude-sonnet-4-5")).unwrap();
        w.line(br#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":1000,"output_tokens":100}}}"#);
        w.line(br#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":1000,"output_tokens":100}}}"#);
        w.line(b"not json");
        let p = w.progress();
        assert_eq!(p.steps, Some(1));
        // 1000 × $3 + 100 × $15 per million.
        assert!((p.cost.unwrap() - 0.0045).abs() < 1e-12, "{p:?}");
    }

    #[test]
    fn command_line() {
        let a = adapter();
        let dir = std::path::Path::new("/w");
        let ctx = WorkerContext {
            task: "do it",
            model: Some("claude-sonnet-4-5"),
            max_steps: 7,
            budget: Some(0.5),
            ..WorkerContext::for_test(dir)
        };
        let c = a.command(&ctx).unwrap();
        assert_eq!(c.program, "claude");
        assert_eq!(
            c.args,
            [
                "-p",
                "do it",
                "--output-format",
                "stream-json",
                "--verbose",
                "--max-turns",
                "7",
                "--permission-mode",
                "acceptEdits",
                "--model",
                "claude-sonnet-4-5",
                "--max-budget-usd",
                "0.5"
            ]
        );
    }

    #[test]
    fn claude_gets_a_private_seeded_configuration() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path().join(".claude");
        std::fs::create_dir_all(user.join("projects")).unwrap();
        std::fs::create_dir_all(user.join("commands")).unwrap();
        std::fs::write(user.join("settings.json"), r#"{"hooks": {}}"#).unwrap();
        std::fs::write(user.join(".credentials.json"), "{}").unwrap();
        std::fs::write(user.join("commands/review.md"), "review").unwrap();
        std::fs::write(user.join("projects/old.jsonl"), "{}").unwrap();
        std::fs::write(d.path().join(".claude.json"), r#"{"state": 1}"#).unwrap();
        let private = d.path().join("private");
        let to = private.join("claude");
        seed_config(Some(&user), Some(&d.path().join(".claude.json")), &to).unwrap();
        for (f, body) in [
            ("settings.json", r#"{"hooks": {}}"#),
            (".credentials.json", "{}"),
            ("commands/review.md", "review"),
            (".claude.json", r#"{"state": 1}"#),
        ] {
            assert_eq!(std::fs::read_to_string(to.join(f)).unwrap(), body, "{f}");
        }
        assert!(!to.join("projects").exists());
        // the command points Claude Code there
        let dir = std::path::Path::new("/w");
        let ctx = WorkerContext {
            private_dir: &private,
            sandboxed: true,
            ..WorkerContext::for_test(dir)
        };
        let c = adapter().command(&ctx).unwrap();
        assert!(
            c.env
                .contains(&("CLAUDE_CONFIG_DIR".into(), to.display().to_string()))
        );
        // nothing to seed from: an empty directory
        let none = d.path().join("none");
        seed_config(None, None, &none).unwrap();
        assert!(none.is_dir());
    }
}
