//! The `architect` adapter (PyPI `architect-ai-cli`), the agent runner fanout grew out of.
//!
//! Command: `architect run TASK --agent A --confirm-mode yolo --json --max-steps N
//! [--model M] [--budget B] [--timeout T] [extra args]`, with `LITELLM_LOG=ERROR` unless
//! set (litellm's debug lines otherwise go to stdout).
//!
//! Outcome: the last JSON object on stdout that has a `status` key (log lines before or
//! after it are ignored):
//!
//! | report | status | reason |
//! |---|---|---|
//! | `status: success` (exit 0) | success | |
//! | `status: success`, `stop_reason: timeout` | timeout | "agent's own timeout" |
//! | `status: partial` | partial | the `stop_reason`: "max steps reached", "budget exceeded", "context window full" |
//! | `status: failed` | failed | the `stop_reason` and the `output` text: "model API error: Unrecoverable LLM error: …" |
//! | `status: success`, exit code ≠ 0 | failed | "reported success but exited with code N" |
//! | no report | by exit code | 0 success, 1 failed, 2 partial, 3 config error, 4 auth error, 5 timeout, 130 interrupted |
//!
//! Steps are `steps` (architect counts the steps that called tools); cost is `cost`,
//! else `costs.total_cost_usd` (architect's own figure, from litellm's prices); both
//! are unknown (not zero) when absent — an API error reports neither. fanout passes
//! `--budget` and `--timeout`, which architect enforces itself (a budget stop is a
//! `partial` with `stop_reason: budget_exceeded`); architect prints its report only at
//! the end, so there is no live cost to watch.

use super::{
    Adapter, AgentOutcome, AgentSpec, AgentStatus, CommandLine, Observed, WorkerContext,
    clean_reason, format_usd_arg, json::last_json_object, sane_cost, sane_steps,
};

pub(super) struct ArchitectAdapter {
    spec: AgentSpec,
}

impl ArchitectAdapter {
    pub(super) fn new(spec: AgentSpec) -> Self {
        ArchitectAdapter { spec }
    }
}

fn stop_reason_text(reason: &str) -> String {
    match reason {
        "max_steps" => "max steps reached".into(),
        "budget_exceeded" => "budget exceeded".into(),
        "context_full" => "context window full".into(),
        "timeout" => "agent's own timeout".into(),
        "user_interrupt" => "stopped by a user interrupt".into(),
        "llm_error" => "model API error".into(),
        "llm_done" => "agent finished".into(),
        other => format!("stop reason {}", clean_reason(other)),
    }
}

impl Adapter for ArchitectAdapter {
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String> {
        let agent = self.spec.architect_agent.as_deref().unwrap_or("build");
        let mut args: Vec<String> = vec![
            "run".into(),
            ctx.task.to_owned(),
            "--agent".into(),
            agent.to_owned(),
            "--confirm-mode".into(),
            "yolo".into(),
            "--json".into(),
            "--max-steps".into(),
            ctx.max_steps.to_string(),
        ];
        if let Some(m) = ctx.model {
            args.extend(["--model".into(), m.to_owned()]);
        }
        if let Some(b) = ctx.budget {
            args.extend(["--budget".into(), format_usd_arg(b)]);
        }
        if let Some(t) = ctx.timeout {
            args.extend(["--timeout".into(), t.as_secs().max(1).to_string()]);
        }
        let mut defaults = Vec::new();
        if std::env::var_os("LITELLM_LOG").is_none() && !self.spec.env.contains_key("LITELLM_LOG") {
            defaults.push(("LITELLM_LOG".into(), "ERROR".into()));
        }
        super::builtin::command_line(&self.spec, ctx, args, Vec::new(), defaults)
    }

    /// The report's `output`: architect's final message.
    fn findings(&self, observed: &Observed<'_>) -> Option<String> {
        let report = last_json_object(observed.stdout_tail, |v| {
            v.get("status").is_some_and(|s| s.is_string())
        })?;
        Some(report.get("output")?.as_str()?.to_owned())
    }

    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome {
        let report = last_json_object(observed.stdout_tail, |v| {
            v.get("status").is_some_and(|s| s.is_string())
        });
        let Some(report) = report else {
            let (status, reason) = without_report(observed);
            return AgentOutcome {
                status,
                steps: None,
                cost: None,
                reason: Some(reason),
            };
        };
        let steps = sane_steps(report.get("steps"));
        let cost = sane_cost(report.get("cost"))
            .or_else(|| sane_cost(report.get("costs").and_then(|c| c.get("total_cost_usd"))));
        let (mut status, mut reason) = claimed(&report);
        if status == AgentStatus::Success
            && report.get("stop_reason").and_then(|s| s.as_str()) == Some("timeout")
        {
            status = AgentStatus::Timeout;
            reason = Some("agent's own timeout".into());
        }
        // A report of success with a failing exit code is not a success.
        if status == AgentStatus::Success {
            match (observed.exit_code, observed.signal) {
                (Some(0), _) | (None, None) => {}
                (Some(code), _) => {
                    status = AgentStatus::Failed;
                    reason = Some(format!("reported success but exited with code {code}"));
                }
                (None, Some(sig)) => {
                    status = AgentStatus::Failed;
                    reason = Some(format!("reported success but was killed by signal {sig}"));
                }
            }
        }
        AgentOutcome {
            status,
            steps,
            cost,
            reason,
        }
    }
}

/// The status and reason from architect's exit code alone (it printed no report).
fn without_report(observed: &Observed<'_>) -> (AgentStatus, String) {
    match (observed.exit_code, observed.signal) {
        (Some(0), _) => (
            AgentStatus::Success,
            "no JSON report on stdout; exit code 0".to_owned(),
        ),
        (Some(2), _) => (
            AgentStatus::Partial,
            "exit code 2 (partial), no JSON report".to_owned(),
        ),
        (Some(3), _) => (
            AgentStatus::Failed,
            "architect configuration error (exit code 3)".to_owned(),
        ),
        (Some(4), _) => (
            AgentStatus::Failed,
            "architect authentication error (exit code 4)".to_owned(),
        ),
        (Some(5), _) => (
            AgentStatus::Timeout,
            "architect's own timeout (exit code 5)".to_owned(),
        ),
        (Some(130), _) => (
            AgentStatus::Failed,
            "architect was interrupted (exit code 130)".to_owned(),
        ),
        (Some(c), _) => (
            AgentStatus::Failed,
            format!("exit code {c}, no JSON report"),
        ),
        (None, Some(sig)) => (AgentStatus::Failed, format!("killed by signal {sig}")),
        (None, None) => (
            AgentStatus::Failed,
            "agent did not exit normally".to_owned(),
        ),
    }
}

/// The status and reason architect's JSON report claims.
fn claimed(report: &serde_json::Value) -> (AgentStatus, Option<String>) {
    let stop = report
        .get("stop_reason")
        .and_then(|s| s.as_str())
        .map(stop_reason_text);
    match report["status"].as_str().unwrap_or_default() {
        "success" => (AgentStatus::Success, None),
        "partial" => (
            AgentStatus::Partial,
            Some(stop.unwrap_or_else(|| "agent reported partial".into())),
        ),
        "failed" | "error" => {
            // Its `output` says what went wrong (the API's message, …).
            let said = report
                .get("output")
                .and_then(|o| o.as_str())
                .map(clean_reason)
                .filter(|o| !o.is_empty());
            let stop = stop.unwrap_or_else(|| "agent reported failure".into());
            (
                AgentStatus::Failed,
                Some(match said {
                    Some(o) => clean_reason(&format!("{stop}: {o}")),
                    None => stop,
                }),
            )
        }
        "timeout" => (AgentStatus::Timeout, Some("agent's own timeout".into())),
        other => (
            AgentStatus::Failed,
            Some(format!("unknown status {:?}", clean_reason(other))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn adapter() -> Box<dyn Adapter> {
        AgentSpec::resolve("build", &Default::default(), "f.yml", false)
            .unwrap()
            .adapter()
    }

    /// The shape printed by `architect run --json` (architect-ai-cli 1.1.0), pretty-printed.
    const SUCCESS: &str = r#"{
  "status": "success",
  "stop_reason": "llm_done",
  "output": "Task complete.",
  "steps": 1,
  "tools_used": [
    {
      "name": "write_file",
      "success": true,
      "path": "say_hi.txt"
    }
  ],
  "duration_seconds": 1.3,
  "model": "gpt-4o",
  "costs": {
    "total_input_tokens": 2000,
    "total_output_tokens": 200,
    "total_cached_tokens": 0,
    "total_tokens": 2200,
    "total_cost_usd": 0.007,
    "by_source": {
      "agent": 0.007
    }
  },
  "cost": 0.007
}
"#;

    fn observe(code: i32, stdout: &str) -> AgentOutcome {
        adapter().outcome(&Observed {
            exit_code: Some(code),
            signal: None,
            stdout_tail: stdout.as_bytes(),
            result_file: None,
            model: None,
        })
    }

    #[test]
    fn command_line_matches_the_seed() {
        let ctx = WorkerContext {
            task: "add a README",
            model: Some("gpt-4o"),
            max_steps: 50,
            budget: Some(0.5),
            timeout: Some(Duration::from_secs(300)),
            result_file: Path::new("/r.json"),
            private_dir: Path::new("/r.json"),
            ..WorkerContext::for_test(Path::new("/w"))
        };
        let c = adapter().command(&ctx).unwrap();
        assert_eq!(c.program, "architect");
        assert_eq!(
            c.args,
            [
                "run",
                "add a README",
                "--agent",
                "build",
                "--confirm-mode",
                "yolo",
                "--json",
                "--max-steps",
                "50",
                "--model",
                "gpt-4o",
                "--budget",
                "0.5",
                "--timeout",
                "300"
            ]
        );
    }

    #[test]
    fn recorded_outputs_map_onto_outcomes() {
        use crate::agent::tests_support::recorded;
        assert_eq!(
            recorded("architect", "success.json", None),
            AgentOutcome {
                status: AgentStatus::Success,
                steps: Some(1),
                cost: Some(0.007),
                reason: None
            }
        );
        // --max-steps 2: partial, exit 2.
        assert_eq!(
            recorded("architect", "max_turns.json", None),
            AgentOutcome {
                status: AgentStatus::Partial,
                steps: Some(2),
                cost: Some(0.007),
                reason: Some("max steps reached".into())
            }
        );
        // HTTP 400: failed, no cost reported (unknown, not zero), the API's message kept.
        assert_eq!(
            recorded("architect", "api_error.json", None),
            AgentOutcome {
                status: AgentStatus::Failed,
                steps: Some(0),
                cost: None,
                reason: Some(
                    "model API error: Unrecoverable LLM error: litellm.BadRequestError: OpenAIException - fake-model: scripted API error"
                        .into()
                )
            }
        );
    }

    #[test]
    fn reads_the_real_shape() {
        let o = observe(0, SUCCESS);
        assert_eq!(o.status, AgentStatus::Success);
        assert_eq!(o.steps, Some(1));
        assert_eq!(o.cost, Some(0.007));
        assert_eq!(o.reason, None);
    }

    #[test]
    fn log_lines_before_the_json_do_not_turn_success_into_partial() {
        let out = format!(
            "\u{1b}[92m01:02:03 - LiteLLM:DEBUG\u{1b}[0m: utils.py:123 - {{'model': 'gpt-4o'}}\nLiteLLM: Params passed to completion() {{\"a\": 1}}\n{SUCCESS}"
        );
        let o = observe(0, &out);
        assert_eq!(
            (o.status, o.steps, o.cost),
            (AgentStatus::Success, Some(1), Some(0.007))
        );
    }

    #[test]
    fn partial_and_failed_reports() {
        let out = SUCCESS
            .replace("\"success\"", "\"partial\"")
            .replace("llm_done", "max_steps")
            .replace("\"cost\": 0.007", "\"cost\": null");
        let o = observe(2, &out);
        assert_eq!(o.status, AgentStatus::Partial);
        assert_eq!(o.reason.as_deref(), Some("max steps reached"));
        assert_eq!(o.cost, Some(0.007), "falls back to costs.total_cost_usd");
        let out = SUCCESS
            .replace("\"success\"", "\"failed\"")
            .replace("llm_done", "llm_error");
        let o = observe(1, &out);
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(o.reason.as_deref(), Some("model API error: Task complete."));
    }

    #[test]
    fn exit_codes_without_a_report() {
        assert_eq!(observe(5, "").status, AgentStatus::Timeout);
        assert_eq!(observe(2, "").status, AgentStatus::Partial);
        let o = observe(4, "Error: no key\n");
        assert_eq!(o.status, AgentStatus::Failed);
        assert!(o.reason.unwrap().contains("authentication"));
        let o = observe(0, "done\n");
        assert_eq!(
            (o.status, o.steps, o.cost),
            (AgentStatus::Success, None, None)
        );
        let o = observe(1, SUCCESS);
        assert_eq!(o.status, AgentStatus::Failed);
    }
}
