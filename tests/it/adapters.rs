//! The built-in adapters (`--agent claude|codex|aider`) through the whole run, with
//! stand-in CLIs: shell scripts, set with `binary:`, that record their command line and
//! environment, write a file, and replay output recorded from the real CLI
//! (`tests/fixtures/agents`) line by line. The real CLIs are `tests/agents_real.rs`'s.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/agents");

/// A stand-in for `cli` under the test's root. The task picks the recorded case
/// (`… max_turns …`, `… api_error …`, else `success`) and its exit code; `$DELAY`
/// seconds pass between lines.
fn stand_in(t: &TestEnv, cli: &str, marker: &str, suffix: &str, ext: &str) -> PathBuf {
    let dir = t.root().join(marker);
    std::fs::create_dir_all(&dir).unwrap();
    let codes: Value = serde_json::from_slice(
        &std::fs::read(Path::new(FIXTURES).join(cli).join("exit_codes.json")).unwrap(),
    )
    .unwrap();
    let code = |case: &str| codes[format!("{case}{suffix}")].as_i64().unwrap();
    let script = format!(
        r#"#!/bin/sh
printf '%s\n' "$@" > "$LOGDIR/argv-$FANOUT_WORKER_ID"
printf 'ANTHROPIC_BASE_URL=%s\nOPENAI_BASE_URL=%s\nGITHUB_TOKEN=%s\n' "${{ANTHROPIC_BASE_URL:-}}" "${{OPENAI_BASE_URL:-}}" "${{GITHUB_TOKEN:-}}" > "$LOGDIR/env-$FANOUT_WORKER_ID"
echo "hi from $FANOUT_WORKER_ID" > "out-$FANOUT_WORKER_ID.txt"
case "$FANOUT_TASK" in
  *max_turns*) case=max_turns; code={max_turns} ;;
  *api_error*) case=api_error; code={api_error} ;;
  *) case=success; code={success} ;;
esac
while IFS= read -r line; do
  printf '%s\n' "$line"
  sleep "${{DELAY:-0}}"
done < "{FIXTURES}/{cli}/$case{suffix}.{ext}"
exit "$code"
"#,
        max_turns = code("max_turns"),
        api_error = code("api_error"),
        success = code("success"),
    );
    let path = dir.join(cli);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// `fanout run --agent CLI ARGS` with `binary:` pointing at the stand-in; returns
/// results.json and the directory the stand-in logs to.
fn run(t: &TestEnv, cli: &str, bin: &Path, delay: &str, args: &[&str]) -> Value {
    let logs = t.root().join("stand-in-logs");
    std::fs::create_dir_all(&logs).unwrap();
    let cfg = t.config(&format!(
        "worktree_dir: '{}'\nagents:\n  {cli}:\n    binary: '{}'\n    env: {{LOGDIR: '{}', DELAY: '{delay}'}}\n    writable: ['{}']\n",
        t.worktrees.display(),
        bin.display(),
        logs.display(),
        logs.display(),
    ));
    let mut all = vec![
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "-q",
        "--agent",
        cli,
    ];
    all.extend(args);
    let out = t
        .fanout(&all)
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("GITHUB_TOKEN", "ghs_never_passed")
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "fanout {all:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = t.runs();
    t.results(runs.last().unwrap())
}

fn logged(t: &TestEnv, what: &str, id: u32) -> Vec<String> {
    std::fs::read_to_string(t.root().join("stand-in-logs").join(format!("{what}-{id}")))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The fields an adapter decides.
/// What the adapter read; the reason without the log lines fanout quotes after it
/// (tests/outcomes.rs tests those).
fn outcome(r: &Value) -> Value {
    let reason = r["reason"]
        .as_str()
        .map(|s| s.split(" — log: ").next().unwrap_or(s).to_owned());
    json!({
        "status": r["status"], "steps": r["steps"], "cost": r["cost"],
        "cost_source": r["cost_source"], "reason": reason,
    })
}

#[test]
fn claude_success_and_api_error_through_a_binary_override() {
    let t = TestEnv::new();
    let m = marker("claude");
    let bin = stand_in(&t, "claude", &m, "-stream", "jsonl");
    let r = run(
        &t,
        "claude",
        &bin,
        "0",
        &[
            "-w",
            "2",
            "--models",
            "claude-sonnet-4-5",
            "--max-steps",
            "9",
            "--budget-per-worker",
            "2",
            "-t",
            "write hello",
            "-t",
            "api_error please",
        ],
    );
    let (w1, w2) = (&r["results"][0], &r["results"][1]);
    assert_eq!(
        outcome(w1),
        json!({"status": "success", "steps": 2, "cost": 0.012, "cost_source": "agent", "reason": null}),
        "{w1}"
    );
    assert_eq!(w1["files_modified"], json!(["out-1.txt"]));
    assert_eq!(
        logged(&t, "argv", 1),
        [
            "-p",
            "write hello",
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            "9",
            "--permission-mode",
            "acceptEdits",
            "--model",
            "claude-sonnet-4-5",
            "--max-budget-usd",
            "2"
        ]
    );
    // Provider settings pass through from fanout's environment; GitHub tokens do not.
    assert_eq!(
        logged(&t, "env", 1),
        [
            "ANTHROPIC_BASE_URL=http://127.0.0.1:9",
            "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
            "GITHUB_TOKEN="
        ]
    );
    // is_error with subtype success: failed, the API's message; Claude Code's own
    // figure for it is a known zero.
    assert_eq!(
        outcome(w2),
        json!({"status": "failed", "steps": 1, "cost": 0.0, "cost_source": "agent",
               "reason": "API Error: 400 fake-model: scripted API error"}),
        "{w2}"
    );
    assert!(!logged(&t, "argv", 2).contains(&"--model".to_owned()));
}

#[test]
fn codex_is_priced_by_the_table_and_stopped_past_max_steps() {
    let t = TestEnv::new();
    let m = marker("codex");
    let bin = stand_in(&t, "codex", &m, "", "jsonl");
    let r = run(
        &t,
        "codex",
        &bin,
        "0.3",
        &[
            "-w",
            "2",
            "--models",
            "gpt-4o,gpt-4o",
            "--max-steps",
            "2",
            "-t",
            "write hello",
            "-t",
            "max_turns: keep writing",
        ],
    );
    let (w1, w2) = (&r["results"][0], &r["results"][1]);
    // A write and the final message: 2 steps; 2000 in + 200 out at gpt-4o's prices.
    assert_eq!(w1["status"], "success", "{w1}");
    assert_eq!(w1["steps"], 2, "{w1}");
    assert!((w1["cost"].as_f64().unwrap() - 0.007).abs() < 1e-12, "{w1}");
    assert_eq!(w1["cost_source"], "price-table", "{w1}");
    let worktree = w1["worktree_path"].as_str().unwrap();
    // Codex's own sandbox cannot run inside fanout's (Landlock): with fanout's on,
    // Codex is told to use none.
    let codex_sandbox = if w1["sandboxed"] == true {
        "danger-full-access"
    } else {
        "workspace-write"
    };
    assert_eq!(
        logged(&t, "argv", 1),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            codex_sandbox,
            "--cd",
            worktree,
            "-m",
            "gpt-4o",
            "--",
            "write hello"
        ]
    );
    // Codex has no step limit: fanout stops it at the third write. Its usage comes
    // only at the end, so the cost is unknown, not zero.
    assert_eq!(
        outcome(w2),
        json!({"status": "partial", "steps": 3, "cost": null, "cost_source": "unknown",
               "reason": "max steps reached (3 steps); stopped"}),
        "{w2}"
    );
    assert!(
        w2["duration"].as_f64().unwrap() < 2.9,
        "not stopped early: {w2}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()),
        "survivors: {:?}",
        processes_with(&m)
    );
}

#[test]
fn aider_reads_its_cost_lines_and_is_stopped_over_budget() {
    let t = TestEnv::new();
    let m = marker("aider");
    let bin = stand_in(&t, "aider", &m, "", "txt");
    let r = run(
        &t,
        "aider",
        &bin,
        "0.1",
        &[
            "-w",
            "3",
            "--budget-per-worker",
            "0.003",
            "-t",
            "write hello",
            "-t",
            "max_turns: reflect",
            "-t",
            "api_error please",
        ],
    );
    let w = |i: usize| &r["results"][i];
    assert_eq!(
        outcome(w(0)),
        json!({"status": "success", "steps": 1, "cost": 0.0012, "cost_source": "agent", "reason": null}),
        "{}",
        w(0)
    );
    assert_eq!(
        logged(&t, "argv", 1),
        [
            "--message",
            "write hello",
            "--yes-always",
            "--no-auto-commits",
            "--no-gitignore",
            "--no-check-update",
            "--analytics-disable",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-fancy-input",
            "--no-stream"
        ]
    );
    // Its session cost crosses $0.003 at the third `Cost:` line: stopped there.
    assert_eq!(
        outcome(w(1)),
        json!({"status": "partial", "steps": 3, "cost": 0.0036, "cost_source": "agent",
               "reason": "budget exceeded ($0.0036 of $0.0030); stopped"}),
        "{}",
        w(1)
    );
    // aider exits 0 on an API error: the error line decides.
    assert_eq!(
        outcome(w(2)),
        json!({"status": "failed", "steps": 0, "cost": null, "cost_source": "unknown",
               "reason": "litellm.BadRequestError: OpenAIException - fake-model: scripted API error"}),
        "{}",
        w(2)
    );
    assert!(wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()));
}
