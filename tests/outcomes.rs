//! Outcomes that match maintenance (issue #12): `unchanged` is not a failure, a
//! findings task keeps the agent's final message, the exit policy (`fail_on`), reasons
//! that quote the log, unknown costs, hard budgets, per-task overrides. Real git
//! repositories, the real binary, the bundled fake agent as a real process.

mod common;

use common::*;

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

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
    assert_eq!(report["schema_version"], 2);
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
