//! The architect adapter end to end, with a stand-in `architect` executable that
//! prints exactly what `architect run --json` prints (FORMATS.md): litellm debug
//! lines first on stdout, its banner on stderr, then pretty-printed JSON.
//! (Runs of the real architect CLI against a fake model server come with the
//! agent-adapters work.)

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::*;

const REPORT: &str = r#"{
  "status": "__STATUS__",
  "stop_reason": "__STOP__",
  "output": "Task complete.",
  "steps": 4,
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
}"#;

/// Install a stand-in `architect` in a bin dir; returns the dir.
fn fake_architect(t: &TestEnv, status: &str, stop: &str, code: i32) -> std::path::PathBuf {
    let bin = t.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let report = REPORT
        .replace("__STATUS__", status)
        .replace("__STOP__", stop);
    let script = format!(
        r#"#!/bin/sh
printf '%s\n' "$@" > "$ARGS_FILE.$FANOUT_WORKER_ID"
echo "architect v1.1.0 — banner" >&2
echo "02:03:04 - LiteLLM:DEBUG: utils.py:301 - {{'model': 'gpt-4o', 'messages': [...]}}"
echo "LiteLLM: Params passed to completion() {{\"a\": 1}}"
mkdir -p .architect/sessions && echo '{{}}' > .architect/sessions/s1.json
echo hi > say_hi.txt
cat <<'JSON'
{report}
JSON
exit {code}
"#
    );
    let path = bin.join("architect");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn run(t: &TestEnv, bin: &std::path::Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let wt = t.worktrees.display().to_string();
    let mut args = vec!["run", "--json", "--worktree-dir", &wt];
    args.extend_from_slice(extra);
    let out = t
        .fanout(&args)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        // in the cache directory the architect adapter declares writable (sandbox)
        .env("ARGS_FILE", t.home.join(".architect/cache/args"))
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code(), v)
}

#[test]
fn seed_default_agent_runs_architect_and_reads_its_json_after_log_lines() {
    let t = TestEnv::new();
    let bin = fake_architect(&t, "success", "llm_done", 0);
    let (code, report) = run(
        &t,
        &bin,
        &[
            "-w",
            "2",
            "--models",
            "gpt-4o",
            "--budget-per-worker",
            "0.5",
            "--timeout-per-worker",
            "120",
            "say hi",
        ],
    );
    assert_eq!(code, Some(0));
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["steps"], 4);
    assert_eq!(r["cost"], 0.007);
    assert_eq!(r["agent"], "build");
    // .architect/ is never committed
    assert_eq!(r["files_modified"], serde_json::json!(["say_hi.txt"]));
    let args = std::fs::read_to_string(t.home.join(".architect/cache/args.1")).unwrap();
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "run",
            "say hi",
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
            "120"
        ]
    );
    // worker 2 uses the default model: no --model
    let args = std::fs::read_to_string(t.home.join(".architect/cache/args.2")).unwrap();
    assert!(!args.contains("--model"), "{args}");
}

#[test]
fn architect_partial_and_failure_reports() {
    let t = TestEnv::new();
    let bin = fake_architect(&t, "partial", "max_steps", 2);
    let (code, report) = run(&t, &bin, &["-w", "1", "x"]);
    assert_eq!(code, Some(3));
    let r = &report["results"][0];
    assert_eq!(r["status"], "partial");
    let reason = r["reason"].as_str().unwrap();
    // the reason, then the last lines of the log (tests/outcomes.rs)
    assert_eq!(reason.split(" — log: ").next(), Some("max steps reached"));
    assert_eq!(r["cost"], 0.007);

    let t = TestEnv::new();
    let bin = fake_architect(&t, "failed", "llm_error", 1);
    let (_, report) = run(&t, &bin, &["-w", "1", "--agent", "review", "x"]);
    let r = &report["results"][0];
    assert_eq!(r["status"], "failed");
    // architect's `output` is quoted after its stop reason
    let reason = r["reason"].as_str().unwrap();
    assert_eq!(
        reason.split(" — log: ").next(),
        Some("model API error: Task complete.")
    );
    let args = std::fs::read_to_string(t.home.join(".architect/cache/args.1")).unwrap();
    assert!(args.contains("--agent\nreview\n"), "{args}");
}
