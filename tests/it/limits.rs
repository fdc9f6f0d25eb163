//! Limits that need the agent's live output, with real processes (the bundled fake
//! agent): the inactivity timeout, a per-worker budget crossed while a streaming
//! agent runs, the run-wide `budget_total`, and GitHub tokens kept from agents
//! unless a definition allows them.

use crate::common;

use std::time::Duration;

use common::*;

/// Run fanout with `yaml` as the config; returns results.json of the run.
fn run(t: &TestEnv, yaml: &str, args: &[&str]) -> serde_json::Value {
    let cfg = t.config(&format!(
        "worktree_dir: '{}'\n{yaml}",
        t.worktrees.display()
    ));
    let mut all = vec!["--config", cfg.to_str().unwrap(), "run", "-q"];
    all.extend(args);
    let before = t.runs();
    let out = t.fanout(&all).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "fanout {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    t.results(&new_run(t, &before))
}

/// The run made since `before` (run ids of the same second sort by their random part,
/// so the last by name is not always the newest).
fn new_run(t: &TestEnv, before: &[String]) -> String {
    let mut new: Vec<String> = t
        .runs()
        .into_iter()
        .filter(|r| !before.contains(r))
        .collect();
    assert_eq!(new.len(), 1, "runs before: {before:?}, now: {:?}", t.runs());
    new.remove(0)
}

fn agent(extra: &[&str]) -> String {
    format!(
        "parallel_runs:\n  agent: fake\nagents:\n  fake:\n    command: {}\n",
        TestEnv::fake_agent_yaml(extra)
    )
}

#[test]
fn a_silent_agent_is_stopped_by_the_inactivity_timeout_a_chatty_one_is_not() {
    let t = TestEnv::new();
    let m = marker("idle");
    let silent = agent(&["--sleep", "60", "--spawn", "1", "--marker", &m]);
    let r = run(
        &t,
        &silent,
        &["-w", "1", "-t", "quiet", "--inactivity-timeout", "1"],
    );
    let w = &r["results"][0];
    assert_eq!(w["status"], "timeout", "{w}");
    // the reason, then the last lines of the log (tests/outcomes.rs)
    let reason = w["reason"].as_str().unwrap();
    assert_eq!(
        reason.split(" — log: ").next(),
        Some("no output for 1s (inactivity timeout); stopped"),
        "{w}"
    );
    // Its whole process group is gone, the helper it spawned too.
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()),
        "survivors: {:?}",
        processes_with(&m)
    );
    // The change it made before going quiet is still committed.
    assert_eq!(
        w["files_modified"],
        serde_json::json!(["fanout-demo/w1.md"])
    );

    // Printing every 200 ms for 2.5 s: never idle for 1 s, so it finishes.
    let chatty = agent(&["--sleep", "2.5", "--tick", "200"]);
    let r = run(
        &t,
        &chatty,
        &["-w", "1", "-t", "talk", "--inactivity-timeout", "1"],
    );
    assert_eq!(r["results"][0]["status"], "success", "{}", r["results"][0]);
    // The config key works as the flag does.
    let r = run(
        &t,
        &silent.replace(
            "parallel_runs:\n  agent: fake\n",
            "parallel_runs:\n  agent: fake\n  inactivity_timeout: 1\n",
        ),
        &["-w", "1", "-t", "quiet again"],
    );
    assert_eq!(r["results"][0]["status"], "timeout");
}

#[test]
fn output_on_stderr_alone_keeps_an_agent_alive() {
    let t = TestEnv::new();
    // Progress on stderr every 200 ms for 2 s, nothing on stdout, then a change.
    let yaml = "parallel_runs:\n  agent: chatty\nagents:\n  chatty:\n    command: [sh, -c, 'for i in 1 2 3 4 5 6 7 8 9 10; do echo working >&2; sleep 0.2; done; echo done > done.txt']\n    result: {format: exit-code}\n";
    let r = run(
        &t,
        yaml,
        &["-w", "1", "-t", "work", "--inactivity-timeout", "1"],
    );
    let w = &r["results"][0];
    assert_eq!(w["status"], "success", "{w}");
    assert_eq!(w["files_modified"], serde_json::json!(["done.txt"]), "{w}");
}

#[test]
fn a_streaming_agent_is_stopped_when_its_cost_crosses_the_budget() {
    let t = TestEnv::new();
    let m = marker("budget");
    // A custom agent whose JSON lines carry a running cost: +$0.10 every 100 ms.
    let yaml = format!(
        "parallel_runs:\n  agent: streamer\nagents:\n  streamer:\n    command: {}\n    result:\n      format: jsonl\n      cost: cost\n      steps: steps\n",
        TestEnv::fake_agent_yaml(&[
            "--sleep",
            "60",
            "--tick",
            "100",
            "--cost-per-tick",
            "0.1",
            "--marker",
            &m,
            "--spawn",
            "1"
        ])
    );
    let r = run(
        &t,
        &yaml,
        &["-w", "1", "-t", "spend", "--budget-per-worker", "0.35"],
    );
    let w = &r["results"][0];
    assert_eq!(w["status"], "partial", "{w}");
    let reason = w["reason"].as_str().unwrap();
    assert_eq!(
        reason.split(" — log: ").next(),
        Some("budget exceeded ($0.4000 of $0.3500); stopped"),
        "{w}"
    );
    assert_eq!(w["cost"], 0.4, "{w}");
    assert_eq!(w["steps"], 4, "{w}");
    assert_eq!(w["cost_source"], "agent", "{w}");
    assert!(
        w["duration"].as_f64().unwrap() < 30.0,
        "not stopped early: {w}"
    );
    assert!(wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()));
}

#[test]
fn budget_total_stops_starting_workers_once_spent() {
    let t = TestEnv::new();
    // One at a time, $0.50 each (reported in $FANOUT_RESULT), $0.80 for the run:
    // the first two start (0 and 0.50 spent before them), the third does not.
    let yaml = agent(&["--cost", "0.5"]);
    let r = run(
        &t,
        &yaml,
        &[
            "-w",
            "1",
            "-t",
            "a",
            "-t",
            "b",
            "-t",
            "c",
            "--budget-total",
            "0.8",
        ],
    );
    let status: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["success", "success", "failed"], "{r:#}");
    let third = &r["results"][2];
    assert_eq!(
        third["reason"],
        "not started: the run's budget of $0.8000 was spent ($1.0000)"
    );
    assert!(
        third["worktree_path"].is_null(),
        "a worktree was made: {third}"
    );
    assert_eq!(r["totals"]["cost"], 1.0);
    // The third branch was never created.
    assert_eq!(
        t.branches()
            .iter()
            .filter(|b| b.starts_with("fanout/"))
            .count(),
        2
    );
}

#[test]
fn github_tokens_reach_an_agent_only_when_its_definition_allows() {
    let t = TestEnv::new();
    let probe = "command: [sh, -c, 'printf \"%s|%s|%s\" \"${{GITHUB_TOKEN:-none}}\" \"${{GH_TOKEN:-none}}\" \"${{ACTIONS_RUNTIME_TOKEN:-none}}\" > token.txt']";
    let run_with = |allow: &str| {
        let cfg = t.config(&format!(
            "worktree_dir: '{}'\nparallel_runs:\n  agent: probe\nagents:\n  probe:\n    {probe}\n{allow}",
            t.worktrees.display()
        ));
        let before = t.runs();
        succeeded(
            t.fanout(&[
                "--config",
                cfg.to_str().unwrap(),
                "run",
                "-q",
                "-w",
                "1",
                "-t",
                "probe",
            ])
            .env("GITHUB_TOKEN", "ghs_secret")
            .env("GH_TOKEN", "gho_secret")
            .env("ACTIONS_RUNTIME_TOKEN", "runtime"),
        );
        let r = t.results(&new_run(&t, &before));
        let commit = r["results"][0]["commit"].as_str().unwrap().to_owned();
        t.git(&["show", &format!("{commit}:token.txt")])
    };
    assert_eq!(run_with(""), "none|none|none");
    assert_eq!(
        run_with("    allow_github_token: true\n"),
        "ghs_secret|gho_secret|none"
    );
}

#[test]
fn budget_total_stops_running_workers_once_the_run_spent_it() {
    let t = TestEnv::new();
    let m = marker("runbudget");
    // Three streaming agents at once, each +$0.10 every 100 ms for 20 s ($2.00 each,
    // $6.00 in all), and a fourth task waiting for a slot; the run may spend $1.00.
    let yaml = format!(
        "parallel_runs:\n  agent: streamer\n  budget_total: 1.0\nagents:\n  streamer:\n    command: {}\n    result:\n      format: jsonl\n      cost: cost\n      steps: steps\n",
        TestEnv::fake_agent_yaml(&[
            "--sleep",
            "20",
            "--tick",
            "100",
            "--cost-per-tick",
            "0.1",
            "--marker",
            &m,
        ])
    );
    let r = run(
        &t,
        &yaml,
        &["-w", "3", "-t", "a", "-t", "b", "-t", "c", "-t", "d"],
    );
    let results = r["results"].as_array().unwrap();
    for w in &results[..3] {
        assert_eq!(w["status"], "partial", "{w}");
        let reason = w["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("the run's budget_total was reached; stopped"),
            "{w}"
        );
        assert!(w["duration"].as_f64().unwrap() < 20.0, "not stopped: {w}");
    }
    let fourth = &results[3];
    assert_eq!(fourth["status"], "failed", "{fourth}");
    assert!(
        fourth["reason"]
            .as_str()
            .unwrap()
            .starts_with("not started: the run's budget"),
        "{fourth}"
    );
    // Spent: the cap, plus at most one reporting interval of each running agent (a
    // tick each, $0.10, between the cap being reached and each agent being stopped).
    let total = r["totals"]["cost"].as_f64().unwrap();
    assert!(
        (1.0..=1.0 + 3.0 * 0.1 + 1e-9).contains(&total),
        "spent {total}: {r:#}"
    );
    assert!(wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()));
}

/// A worker stopped by `budget_total` whose agent reports no cost: its reason says
/// the cost is unknown, never a made-up `$0.0000`.
#[test]
fn a_worker_of_unknown_cost_stopped_by_budget_total_says_its_cost_is_unknown() {
    let t = TestEnv::new();
    let m = marker("runbudget-unknown");
    let agent = |extra: &[&str]| {
        let mut args = vec!["--sleep", "20", "--marker", &m];
        args.extend_from_slice(extra);
        TestEnv::fake_agent_yaml(&args)
    };
    // `spender` reports its cost as it goes; `quiet` reports none (exit code only).
    let yaml = format!(
        "parallel_runs:\n  agent: spender\n  budget_total: 0.5\nagents:\n  spender:\n    command: {}\n    result: {{format: jsonl, cost: cost}}\n  quiet:\n    command: {}\n    result: {{format: exit-code}}\ntasks:\n  - {{id: quiet, prompt: q, agent: quiet}}\n  - {{id: spend, prompt: s}}\n",
        agent(&["--tick", "100", "--cost-per-tick", "0.1"]),
        agent(&[]),
    );
    let r = run(&t, &yaml, &["-w", "2"]);
    let quiet = &r["results"][0];
    assert_eq!(quiet["status"], "partial", "{quiet}");
    let reason = quiet["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "the run's budget_total was reached; stopped (this worker's cost is unknown)"
        ),
        "{quiet}"
    );
    assert!(!reason.contains("$0.0000"), "{quiet}");
    assert!(wait_until(Duration::from_secs(5), || processes_with(&m).is_empty()));
}
