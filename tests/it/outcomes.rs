//! Outcomes that match maintenance (issue #12): `unchanged` is not a failure, a
//! findings task keeps the agent's final message, the exit policy (`fail_on`), reasons
//! that quote the log, unknown costs, hard budgets, per-task overrides. Real git
//! repositories, the real binary, the bundled fake agent as a real process.

use crate::common;

use crate::common::json;
use common::*;

fn by_task<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task_id"] == id)
        .unwrap_or_else(|| panic!("no result for task {id}: {report:#}"))
}

#[test]
fn a_quiet_task_is_unchanged_and_a_findings_task_keeps_its_message() {
    let t = TestEnv::new();
    let findings = "Flaky tests:\n- tests/net.rs (timeout)\n```\nlog ghp_abcdefghijklmnop1234\n```";
    let file = t.root().join("findings.md");
    std::fs::write(&file, findings).unwrap();
    let cfg = t.fake_config(
        &["--no-change", "--findings", file.to_str().unwrap()],
        "tasks:\n  - {id: quiet, prompt: fix what is broken}\n  - {id: survey, prompt: list the flaky tests, output: findings}\n",
    );
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "2",
        ])
        .output()
        .unwrap();
    let report = json(&out);
    // Nothing failed: a quiet night is green.
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["schema_version"], 3);
    let quiet = by_task(&report, "quiet");
    assert_eq!(quiet["status"], "unchanged", "{quiet:#}");
    assert_eq!(quiet["reason"], serde_json::Value::Null);
    assert!(quiet.get("findings").is_none(), "{quiet:#}");
    let survey = by_task(&report, "survey");
    assert_eq!(survey["status"], "success", "{survey:#}");
    assert_eq!(survey["files_modified"], serde_json::json!([]));
    let kept = survey["findings"].as_str().unwrap();
    assert!(
        kept.starts_with("Flaky tests:\n- tests/net.rs (timeout)"),
        "{kept}"
    );
    assert!(!kept.contains("ghp_"), "a token is masked: {kept}");
    assert_eq!(report["totals"]["unchanged"], 1);
    assert_eq!(report["totals"]["success"], 1);
    // results.json holds the same; the summary shows the findings collapsed, in a
    // fence the message's own backticks cannot close.
    let run = report["run_id"].as_str().unwrap();
    assert_eq!(t.results(run)["results"][1]["findings"], kept);
    let md = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
    assert!(md.contains("### Findings"), "{md}");
    assert!(md.contains("<details><summary>#2 survey</summary>"), "{md}");
    assert!(md.contains("````text\nFlaky tests:\n"), "{md}");
    assert!(!md.contains("Not successful"), "{md}");
    assert!(md.contains("1 unchanged"), "{md}");
    // The terminal table names the status.
    let text = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-w", "2"])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(0));
    let table = String::from_utf8_lossy(&text.stdout);
    assert!(table.contains("unchanged"), "{table}");
}

/// `fanout run` of the fake agent on `tasks`, with `flags`; its exit code and report.
fn run_with(
    t: &TestEnv,
    cfg: &std::path::Path,
    flags: &[&str],
) -> (Option<i32>, serde_json::Value) {
    let mut args = vec![
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "2",
    ];
    args.extend(flags);
    let out = t.fanout(&args).output().unwrap();
    (out.status.code(), json(&out))
}

#[test]
fn the_exit_policy_decides_what_fails_the_job_and_outputs_are_set_either_way() {
    let t = TestEnv::new();
    let some_fail = t.fake_config(&["--fail-on", "BREAK"], "tasks: [fix a, BREAK b]\n");
    // The default: any failure fails the job (1: some succeeded).
    let (code, report) = run_with(&t, &some_fail, &[]);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["exit_code"], 1);
    let (code, report) = run_with(&t, &some_fail, &["--fail-on", "all-failed"]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["plan"]["fail_on"], "all-failed");
    assert_eq!(report["totals"]["failed"], 1);
    // Every worker failed: all-failed fails the job; never does not, from the file.
    let all_fail = t.fake_config(&["--fail-on", "BREAK"], "tasks: [BREAK a, BREAK b]\n");
    let (code, _) = run_with(&t, &all_fail, &["--fail-on", "all-failed"]);
    assert_eq!(code, Some(3));
    let never = t.fake_config(
        &["--fail-on", "BREAK"],
        "tasks: [BREAK a, BREAK b]\nfail_on: never\n",
    );
    let outputs = t.root().join("github-output");
    let out = t
        .fanout(&["--config", never.to_str().unwrap(), "run", "-w", "2"])
        .env("GITHUB_OUTPUT", &outputs)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&outputs).unwrap();
    assert!(written.contains("\"failed\":2"), "{written}");
    assert!(
        written.lines().any(|l| l.starts_with("report=")),
        "{written}"
    );
    // The flag wins over the file.
    let (code, _) = run_with(&t, &never, &["--fail-on", "any-failure"]);
    assert_eq!(code, Some(3));
    // A bad policy is a usage error naming the file, line and key, or the flag.
    let bad = t.fake_config(&[], "tasks: [a]\nfail_on: sometimes\n");
    let out = t
        .fanout(&["--config", bad.to_str().unwrap(), "run", "-w", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fanout.yml:") && err.contains("fail_on"),
        "{err}"
    );
    assert!(err.contains("all-failed"), "{err}");
    assert!(
        t.branches().iter().all(|b| !b.contains("/a")),
        "nothing ran"
    );
    let out = t
        .fanout(&[
            "--config",
            bad.to_str().unwrap(),
            "run",
            "--fail-on",
            "maybe",
            "a",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fail-on"));
}

#[test]
fn unknown_costs_are_null_not_zero_and_partly_known_costs_say_so() {
    let t = TestEnv::new();
    // No worker reports a cost: the total is unknown, not $0.
    let none = t.fake_config(&["--no-result"], "tasks: [a, b]\n");
    let (code, report) = run_with(&t, &none, &[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(
        report["totals"]["cost"],
        serde_json::Value::Null,
        "{report:#}"
    );
    assert_eq!(report["totals"]["cost_unknown"], 2);
    let out = t
        .fanout(&["--config", none.to_str().unwrap(), "run", "-w", "2"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("total cost: unknown"), "{table}");
    let run = t.runs().last().unwrap().clone();
    let md = std::fs::read_to_string(t.run_dir(&run).join("summary.md")).unwrap();
    assert!(md.contains("cost unknown"), "{md}");
    // One of two reports a cost: the sum of the known, marked partial.
    let script = t.root().join("agent.sh");
    std::fs::write(
        &script,
        "echo x > \"w$FANOUT_WORKER_ID.txt\"\n[ \"$FANOUT_WORKER_ID\" = 1 ] && echo '{\"status\":\"success\",\"cost\":0.25}' > \"$FANOUT_RESULT\"\nexit 0\n",
    )
    .unwrap();
    let some = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, '{}']\ntasks: [a, b]\n",
        t.worktrees.display(),
        script.display()
    ));
    let (code, report) = run_with(&t, &some, &[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["totals"]["cost"], 0.25, "{report:#}");
    assert_eq!(report["totals"]["cost_unknown"], 1);
    let run = report["run_id"].as_str().unwrap();
    let md = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
    assert!(md.contains("cost $0.2500 (partial: 1 unknown)"), "{md}");
}

#[test]
fn a_failed_workers_reason_quotes_its_log_and_the_task_is_shown_everywhere() {
    let t = TestEnv::new();
    let script = t.root().join("agent.sh");
    std::fs::write(
        &script,
        "echo 'agent: starting'\nif [ \"$FANOUT_WORKER_ID\" = 2 ]; then\n  echo 'error: unknown model gpt-9 (key ghp_abcdefghijklmnop1234)' >&2\n  exit 1\nfi\necho x > out.txt\n",
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, '{}']\ntasks:\n  - {{id: tidy, prompt: tidy up}}\n  - Upgrade the parser to the new grammar and fix all the call sites\n",
        t.worktrees.display(),
        script.display()
    ));
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-w", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (table, live) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let run = t.runs().last().unwrap().clone();
    let r = &t.results(&run)["results"][1];
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("exit code 1") && reason.contains(" — log: "),
        "{reason}"
    );
    // stdout and stderr reach the log through two pipes: either order.
    let quoted = reason.split(" — log: ").nth(1).unwrap();
    let mut lines: Vec<&str> = quoted.split(" ⏎ ").collect();
    lines.sort();
    assert_eq!(
        lines,
        ["agent: starting", "error: unknown model gpt-9 (key ***)"],
        "{reason}"
    );
    // The task is a column of the table, in each live line and in the summary.
    let header = table.lines().find(|l| l.contains("STATUS")).unwrap();
    assert!(header.starts_with("#  STATUS   TASK"), "{table}");
    assert!(table.contains("tidy"), "{table}");
    assert!(table.contains("Upgrade the parser to t…"), "{table}");
    assert!(table.contains("unknown model gpt-9"), "{table}");
    assert!(!table.contains("ghp_"), "{table}");
    assert!(
        live.lines()
            .any(|l| l.contains("#1 tidy [default]") && l.contains("success")),
        "{live}"
    );
    assert!(
        live.lines()
            .any(|l| l.contains("#2 Upgrade the parser to t… [default]") && l.contains("failed")),
        "{live}"
    );
    let md = std::fs::read_to_string(t.run_dir(&run).join("summary.md")).unwrap();
    assert!(md.contains("| 1 | ✅ success | tidy | `"), "{md}");
    assert!(
        md.contains("| 2 | ❌ failed | Upgrade the parser to the new grammar a… |"),
        "{md}"
    );
    assert!(md.contains("unknown model gpt-9"), "{md}");
}
