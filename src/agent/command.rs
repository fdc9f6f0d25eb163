//! The `command` adapter: any program, from an argv template.
//!
//! Outcome: the exit code decides failure (non-zero is `failed`). An optional report
//! adds steps and cost and may lower the status to `partial` or `failed`; it can never
//! raise a non-zero exit to success. Where the report is, per `result.format`:
//!
//! - `file` (default): the `$FANOUT_RESULT` file, JSON `{"status":
//!   "success"|"partial"|"failed", "steps": N, "cost": USD, "reason": "…"}`;
//! - `json`: the last JSON object printed on stdout;
//! - `jsonl`: JSON lines on stdout, each field from the last line that has it (the cost
//!   is also read live, so a budget stops the agent when crossed);
//! - `exit-code`: no report.
//!
//! `result.status`, `.steps`, `.cost` and `.reason` are dotted JSON paths (defaults:
//! the names above); `result.success` and `result.partial` list the status values that
//! mean those (defaults `success`, `partial`); any other value is a failure.

use serde_json::Value;

use super::json::{at_path, json_lines, last_json_object};
use super::{
    Adapter, AgentOutcome, AgentSpec, AgentStatus, CommandLine, Observed, Progress, StreamWatch,
    WorkerContext, clean_reason, expand, fanout_env, format_usd_arg, sane_cost, sane_steps,
};
use crate::config::{ResultFormat, ResultSpec};

/// The fields of an agent's report, read by the paths of a [`ResultSpec`].
#[derive(Debug, Default)]
struct Report {
    status: Option<String>,
    steps: Option<u32>,
    cost: Option<f64>,
    reason: Option<String>,
}

fn path_or<'a>(p: &'a Option<String>, default: &'a str) -> &'a str {
    p.as_deref().unwrap_or(default)
}

/// A status value as text: strings lower-cased, booleans `true`/`false`.
fn status_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_ascii_lowercase()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Report {
    /// Read each field from the first of `objects` (latest first) that has it.
    fn from_objects<'a>(
        spec: &ResultSpec,
        objects: impl Iterator<Item = &'a Value> + Clone,
    ) -> Report {
        let find = |path: &str| objects.clone().find_map(|o| at_path(o, path));
        Report {
            status: find(path_or(&spec.status, "status")).and_then(status_text),
            steps: sane_steps(find(path_or(&spec.steps, "steps"))),
            cost: sane_cost(find(path_or(&spec.cost, "cost"))),
            reason: find(path_or(&spec.reason, "reason"))
                .and_then(Value::as_str)
                .map(clean_reason)
                .filter(|s| !s.is_empty()),
        }
    }
}

/// `success`, `partial` or `failed` for a reported status value.
fn classify(spec: &ResultSpec, status: &str) -> Option<&'static str> {
    let listed = |list: &[String], default: &str| {
        if list.is_empty() {
            status == default
        } else {
            list.iter().any(|v| v.trim().eq_ignore_ascii_case(status))
        }
    };
    if listed(&spec.success, "success") {
        Some("success")
    } else if listed(&spec.partial, "partial") {
        Some("partial")
    } else if spec.success.is_empty() && spec.partial.is_empty() {
        (status == "failed").then_some("failed")
    } else {
        Some("failed")
    }
}

pub(super) struct CommandAdapter {
    spec: AgentSpec,
}

impl CommandAdapter {
    pub(super) fn new(spec: AgentSpec) -> Self {
        CommandAdapter { spec }
    }
}

/// Values of the placeholders for one worker.
pub(super) fn lookup<'a>(ctx: &'a WorkerContext<'a>) -> impl FnMut(&str) -> Option<String> + 'a {
    move |name| match name {
        "task" => Some(ctx.task.to_owned()),
        "model" => ctx.model.map(str::to_owned),
        "worker_id" => Some(ctx.worker_id.to_string()),
        "branch" => Some(ctx.branch.to_owned()),
        "worktree" => Some(ctx.worktree.display().to_string()),
        "run_id" => Some(ctx.run_id.to_owned()),
        "max_steps" => Some(ctx.max_steps.to_string()),
        "budget" => ctx.budget.map(format_usd_arg),
        "timeout" => ctx.timeout.map(|t| t.as_secs().max(1).to_string()),
        _ => None,
    }
}

impl Adapter for CommandAdapter {
    fn command(&self, ctx: &WorkerContext<'_>) -> Result<CommandLine, String> {
        let mut vars = lookup(ctx);
        let mut args = Vec::new();
        for t in &self.spec.args {
            args.push(expand(t, &mut vars)?);
        }
        if ctx.model.is_some() {
            for t in &self.spec.model_args {
                args.push(expand(t, &mut vars)?);
            }
        }
        if ctx.budget.is_some() {
            for t in &self.spec.budget_args {
                args.push(expand(t, &mut vars)?);
            }
        }
        let mut env = fanout_env(ctx);
        env.extend(self.spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(CommandLine {
            program: expand(&self.spec.program, &mut vars)?,
            args,
            env,
        })
    }

    fn watch(&self, _model: Option<&str>) -> Option<Box<dyn StreamWatch>> {
        let spec = self.spec.result.clone()?;
        (spec.format == ResultFormat::Jsonl).then(|| {
            Box::new(JsonlWatch {
                spec,
                progress: Progress::default(),
            }) as Box<dyn StreamWatch>
        })
    }

    /// The report's `findings` (else `output`) field; else the last lines of stdout.
    fn findings(&self, observed: &Observed<'_>) -> Option<String> {
        let spec = self.spec.result.clone().unwrap_or_default();
        let objects: Vec<Value> = match spec.format {
            ResultFormat::File => observed
                .result_file
                .and_then(|b| serde_json::from_slice::<Value>(b).ok())
                .into_iter()
                .collect(),
            ResultFormat::Json => last_json_object(observed.stdout_tail, |_| true)
                .into_iter()
                .collect(),
            ResultFormat::Jsonl => json_lines(observed.stdout_tail).collect(),
            ResultFormat::ExitCode => Vec::new(),
        };
        let reported = objects.iter().rev().find_map(|o| {
            ["findings", "output"]
                .iter()
                .find_map(|k| o.get(*k)?.as_str().map(str::to_owned))
        });
        reported.or_else(|| {
            let tail =
                super::findings::last_lines(&String::from_utf8_lossy(observed.stdout_tail), 40);
            (!tail.is_empty()).then_some(tail)
        })
    }

    fn outcome(&self, observed: &Observed<'_>) -> AgentOutcome {
        let spec = self.spec.result.clone().unwrap_or_default();
        let (report, unreadable) = read_report(&spec, observed);
        let steps = report.as_ref().and_then(|r| r.steps);
        let cost = report.as_ref().and_then(|r| r.cost);
        let claimed_raw = report.as_ref().and_then(|r| r.status.clone());
        let claimed = claimed_raw
            .as_deref()
            .map(|s| classify(&spec, s).unwrap_or(s))
            .map(str::to_owned);
        let claimed_reason = report.as_ref().and_then(|r| r.reason.clone());
        let (status, reason) = judge(observed, claimed.as_deref(), claimed_reason);
        let reason = if unreadable {
            Some(match reason {
                Some(r) => format!("{r}; result file is not a JSON object"),
                None => "result file is not a JSON object".to_owned(),
            })
        } else {
            reason
        };
        AgentOutcome {
            status,
            steps,
            cost,
            reason,
        }
    }
}

/// The agent's report, read as `spec` says (its result file, its last JSON object or
/// its JSON lines on stdout, or nothing: the exit code alone); and whether a result
/// file was there but was not a JSON object.
fn read_report(spec: &ResultSpec, observed: &Observed<'_>) -> (Option<Report>, bool) {
    match spec.format {
        ResultFormat::ExitCode => (None, false),
        ResultFormat::File => {
            let v = observed
                .result_file
                .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
                .filter(Value::is_object);
            let unreadable = observed.result_file.is_some() && v.is_none();
            (
                v.map(|v| Report::from_objects(spec, std::iter::once(&v))),
                unreadable,
            )
        }
        ResultFormat::Json => {
            let v = last_json_object(observed.stdout_tail, |_| true);
            (
                v.map(|v| Report::from_objects(spec, std::iter::once(&v))),
                false,
            )
        }
        ResultFormat::Jsonl => {
            let mut lines: Vec<Value> = json_lines(observed.stdout_tail).collect();
            lines.reverse();
            let r = (!lines.is_empty()).then(|| Report::from_objects(spec, lines.iter()));
            (r, false)
        }
    }
}

/// The status and reason from the exit code and what the agent claimed (its status,
/// classified, and its reason): a claim never outranks a failing exit.
fn judge(
    observed: &Observed<'_>,
    claimed: Option<&str>,
    claimed_reason: Option<String>,
) -> (AgentStatus, Option<String>) {
    match (observed.exit_code, claimed) {
        (Some(0), None | Some("success")) => (AgentStatus::Success, None),
        (Some(0), Some("partial")) => (
            AgentStatus::Partial,
            Some(claimed_reason.unwrap_or_else(|| "agent reported partial".into())),
        ),
        (Some(0), Some("failed")) => (
            AgentStatus::Failed,
            Some(claimed_reason.unwrap_or_else(|| "agent reported failure".into())),
        ),
        (Some(0), Some(other)) => (
            AgentStatus::Failed,
            Some(match &claimed_reason {
                Some(r) => format!("agent reported {:?}: {r}", clean_reason(other)),
                None => format!("agent reported an unknown status {:?}", clean_reason(other)),
            }),
        ),
        (Some(code), Some("partial")) => (
            AgentStatus::Partial,
            Some(
                claimed_reason
                    .unwrap_or_else(|| format!("agent reported partial, exit code {code}")),
            ),
        ),
        (Some(code), _) => (
            AgentStatus::Failed,
            Some(match &claimed_reason {
                Some(r) => format!("exit code {code}: {r}"),
                None => format!("exit code {code}"),
            }),
        ),
        (None, _) => (
            AgentStatus::Failed,
            Some(match observed.signal {
                Some(sig) => format!("killed by signal {sig}"),
                None => "agent did not exit normally".to_owned(),
            }),
        ),
    }
}

/// Live reading of a `jsonl` agent's cost and steps.
struct JsonlWatch {
    spec: ResultSpec,
    progress: Progress,
}

impl StreamWatch for JsonlWatch {
    fn line(&mut self, line: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(line.trim_ascii()) else {
            return;
        };
        if let Some(c) = sane_cost(at_path(&v, path_or(&self.spec.cost, "cost"))) {
            self.progress.cost = Some(c);
        }
        if let Some(n) = sane_steps(at_path(&v, path_or(&self.spec.steps, "steps"))) {
            self.progress.steps = Some(n);
        }
    }

    fn progress(&self) -> Progress {
        self.progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn adapter(yaml: &str) -> Box<dyn Adapter> {
        let defs = crate::config::parse(yaml, Path::new("f.yml"))
            .unwrap()
            .agents;
        AgentSpec::resolve("a", &defs, "f.yml", false)
            .unwrap()
            .adapter()
    }

    fn ctx<'a>(model: Option<&'a str>, budget: Option<f64>) -> WorkerContext<'a> {
        WorkerContext {
            run_id: "r1",
            worker_id: 2,
            task: "say \"hi\"; $(rm -rf /)",
            model,
            branch: "fanout/r1/w2",
            worktree: Path::new("/tmp/wt"),
            max_steps: 7,
            budget,
            timeout: None,
            result_file: Path::new("/tmp/r.json"),
            private_dir: Path::new("/tmp/r.json"),
            sandboxed: false,
        }
    }

    #[test]
    fn argv_is_expanded_per_argument() {
        let a = adapter(
            "agents:\n  a:\n    command: [agent, --task, '{task}', '--dir={worktree}', 'w{worker_id}']\n    model_args: [--model, '{model}']\n    budget_args: ['--budget={budget}']\n",
        );
        let c = a.command(&ctx(None, None)).unwrap();
        assert_eq!(c.program, "agent");
        assert_eq!(
            c.args,
            vec!["--task", "say \"hi\"; $(rm -rf /)", "--dir=/tmp/wt", "w2"]
        );
        let c = a.command(&ctx(Some("m1"), Some(0.25))).unwrap();
        assert_eq!(&c.args[4..], ["--model", "m1", "--budget=0.25"]);
        assert!(
            c.env
                .contains(&("FANOUT_RESULT".into(), "/tmp/r.json".into()))
        );
        assert!(c.env.contains(&("FANOUT_MODEL".into(), "m1".into())));
    }

    fn outcome(exit: Option<i32>, file: Option<&str>) -> AgentOutcome {
        let a = adapter("agents:\n  a:\n    command: [x]\n");
        a.outcome(&Observed {
            exit_code: exit,
            signal: if exit.is_none() { Some(9) } else { None },
            stdout_tail: b"",
            result_file: file.map(str::as_bytes),
            model: None,
        })
    }

    #[test]
    fn exit_code_and_result_file() {
        let o = outcome(Some(0), None);
        assert_eq!(
            (o.status, o.steps, o.cost),
            (AgentStatus::Success, None, None)
        );
        let o = outcome(
            Some(0),
            Some(r#"{"status":"success","steps":4,"cost":0.12}"#),
        );
        assert_eq!(
            (o.status, o.steps, o.cost),
            (AgentStatus::Success, Some(4), Some(0.12))
        );
        let o = outcome(
            Some(0),
            Some(r#"{"status":"partial","reason":"max steps"}"#),
        );
        assert_eq!(o.status, AgentStatus::Partial);
        assert_eq!(o.reason.as_deref(), Some("max steps"));
        // a non-zero exit is never raised to success by the agent's claim
        let o = outcome(Some(3), Some(r#"{"status":"success","steps":1}"#));
        assert_eq!(o.status, AgentStatus::Failed);
        assert_eq!(o.reason.as_deref(), Some("exit code 3"));
        assert_eq!(o.steps, Some(1));
        let o = outcome(None, None);
        assert_eq!(o.reason.as_deref(), Some("killed by signal 9"));
    }

    #[test]
    fn hostile_result_files_are_contained() {
        let o = outcome(Some(0), Some("not json"));
        assert_eq!(o.status, AgentStatus::Success);
        assert_eq!(
            o.reason.as_deref(),
            Some("result file is not a JSON object")
        );
        let o = outcome(
            Some(0),
            Some(r#"{"status":"success","steps":-1,"cost":-5}"#),
        );
        assert_eq!((o.steps, o.cost), (None, None));
        let o = outcome(Some(0), Some(r#"{"status":"winning"}"#));
        assert_eq!(o.status, AgentStatus::Failed);
        let long = format!(
            r#"{{"status":"failed","reason":"{}\n\u001b[31m"}}"#,
            "x".repeat(5000)
        );
        let o = outcome(Some(0), Some(&long));
        assert!(o.reason.unwrap().chars().count() <= 300);
    }
}
