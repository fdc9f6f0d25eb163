//! Per-task settings (`tasks[].agent`, `model`, `timeout`, `budget`, `checks`,
//! `output`), with real processes: two agents in one run (writer and reviewer), each
//! worker stopped by its own limits and judged by its own checks; which wins over a
//! flag; every agent checked before anything is made; and a two-agent plan run as
//! matrix jobs.

use crate::common;

use std::path::Path;

use common::*;

/// A command agent `name` running the bundled fake agent with `args`.
fn fake(name: &str, args: &[&str], extra: &str) -> String {
    format!(
        "  {name}:\n    command: {}\n{extra}",
        TestEnv::fake_agent_yaml(args)
    )
}

/// Writer and reviewer in one run, with the run's limits (a 1 s timeout, a failing
/// check) that only some tasks keep.
/// `marker` is on the reviewer's command line, to find its processes.
fn two_agent_config(t: &TestEnv, marker: &str) -> String {
    let agents = [
        fake("writer", &["--write", "writer.txt", "--sleep", "2"], ""),
        fake(
            "reader",
            &["--write", "reader.txt", "--sleep", "60", "--marker", marker],
            "",
        ),
        fake(
            "streamer",
            &[
                "--write",
                "streamed.txt",
                "--sleep",
                "60",
                "--tick",
                "100",
                "--cost-per-tick",
                "0.1",
            ],
            "    result: {format: jsonl, cost: cost, steps: steps}\n",
        ),
    ]
    .concat();
    format!(
        "worktree_dir: '{}'
parallel_runs:
  agent: writer
  workers: 4
  timeout_per_worker: 1s
agents:
{agents}checks: ['false']
tasks:
  # the run's agent, a longer timeout of its own, no checks
  - {{id: fix, prompt: fix it, timeout: 30s, checks: []}}
  # another agent, the run's 1 s timeout
  - {{id: review, prompt: review it, agent: reader}}
  # a streaming agent stopped by its own budget, judged by its own check
  - {{id: spend, prompt: spend it, agent: streamer, budget: 0.25, timeout: 30s, checks: [test -f streamed.txt]}}
  # the run's agent and the run's (failing) check
  - {{id: lint, prompt: lint it, timeout: 30s}}
",
        t.worktrees.display()
    )
}

/// Each worker of results.json by its task id.
fn by_task<'a>(results: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    results["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task_id"] == id)
        .unwrap_or_else(|| panic!("no worker of task {id}: {results:#}"))
}

#[test]
fn each_worker_runs_its_tasks_agent_limits_and_checks() {
    let t = TestEnv::new();
    let m = marker("reviewer");
    let cfg = t.config(&two_agent_config(&t, &m));
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let run = t.runs().pop().unwrap();
    let r = t.results(&run);
    let row = |id| {
        let w = by_task(&r, id);
        (
            w["agent"].as_str().unwrap().to_owned(),
            w["status"].as_str().unwrap().to_owned(),
        )
    };

    // The writer ran 2 s, past the run's 1 s timeout: its own 30 s held.
    assert_eq!(row("fix"), ("writer".into(), "success".into()));
    let fix = by_task(&r, "fix");
    assert_eq!(fix["files_modified"], serde_json::json!(["writer.txt"]));
    // `checks: []` runs none (the run's `false` would have failed it).
    assert!(fix["checks"].as_array().is_none_or(Vec::is_empty), "{fix}");
    // The reviewer is another program (its own file), stopped at the run's 1 s.
    assert_eq!(row("review"), ("reader".into(), "timeout".into()));
    let review = by_task(&r, "review");
    assert_eq!(review["files_modified"], serde_json::json!(["reader.txt"]));
    assert!(review["duration"].as_f64().unwrap() < 20.0, "{review}");
    // The streamer crossed its own $0.25 (the run has no budget); its own check passed.
    assert_eq!(row("spend"), ("streamer".into(), "partial".into()));
    let spend = by_task(&r, "spend");
    let reason = spend["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("budget exceeded ($0.3000 of $0.2500); stopped"),
        "{spend}"
    );
    assert_eq!(spend["checks"][0]["name"], "test -f streamed.txt");
    assert_eq!(spend["checks"][0]["passed"], true);
    // Without checks of its own, the run's failing check fails the worker.
    assert_eq!(row("lint"), ("writer".into(), "failed".into()));
    let lint = by_task(&r, "lint");
    assert_eq!(lint["checks"][0]["name"], "false");
    assert!(
        lint["reason"]
            .as_str()
            .unwrap()
            .starts_with("check `false`"),
        "{lint}"
    );
    assert!(wait_until(std::time::Duration::from_secs(5), || {
        processes_with(&m).is_empty()
    }));

    // The plan kept every worker's own settings; reports name each worker's agent.
    let plan = &r["plan"];
    assert_eq!(plan["schema_version"], 2);
    assert_eq!(plan["agents"]["reader"]["name"], "reader");
    let summary = std::fs::read_to_string(t.run_dir(&run).join("summary.md")).unwrap();
    assert!(
        summary.contains("agents `writer`, `reader`, `streamer`"),
        "{summary}"
    );
    assert!(summary.contains("| default (reader) |"), "{summary}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("default (streamer)"), "{table}");
}

#[test]
fn a_tasks_own_setting_wins_over_a_flag_and_a_note_says_so() {
    let t = TestEnv::new();
    let cfg = t.config(&two_agent_config(&t, "unused"));
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "plan",
            "--json",
            "--agent",
            "streamer",
            "--timeout-per-worker",
            "5m",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let agents: Vec<(&str, &str)> = plan["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["task"]["id"].as_str().unwrap(),
                w["agent"].as_str().unwrap(),
            )
        })
        .collect();
    // `--agent` is the run's agent: tasks without their own take it.
    assert_eq!(
        agents,
        [
            ("fix", "streamer"),
            ("review", "reader"),
            ("spend", "streamer"),
            ("lint", "streamer")
        ]
    );
    assert_eq!(plan["limits"]["timeout_per_worker"], 300.0);
    assert_eq!(plan["workers"][0]["task"]["timeout"], 30.0);
    assert!(
        stderr.contains(
            "fanout: note: --agent: not for task `review` — a task's own `agent:` wins over the flag"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("fanout: note: --timeout-per-worker: not for task `fix`, `spend`, `lint`"),
        "{stderr}"
    );
}

#[test]
fn every_agent_a_task_names_is_checked_before_anything_is_made() {
    let t = TestEnv::new();
    let cfg = t.config(&format!(
        "worktree_dir: '{}'\nparallel_runs:\n  agent: writer\nagents:\n{}  codex: {{binary: /nonexistent/codex}}\ntasks:\n  - {{id: fix, prompt: fix it}}\n  - {{id: review, prompt: review it, agent: codex, output: findings}}\n",
        t.worktrees.display(),
        fake("writer", &[], "")
    ));
    let branches = t.branches();
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-q"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "task `review`: agent codex: the agent's program `/nonexistent/codex`, which does not exist"
        ),
        "{stderr}"
    );
    assert_eq!(t.branches(), branches);
    assert!(t.runs().is_empty(), "{:?}", t.runs());
}

#[test]
fn a_two_agent_plan_runs_as_matrix_jobs_each_with_its_agent() {
    let t = TestEnv::new();
    t.bare_origin();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: writer\n  workers: 1\nagents:\n{}{}tasks:\n  - {{id: fix, prompt: fix it}}\n  - {{id: review, prompt: review it, agent: reader, timeout: 1s}}\n",
        fake("writer", &["--write", "writer.txt"], ""),
        fake("reader", &["--write", "reader.txt", "--sleep", "60"], "")
    ));
    let plan = t.root().join("plan.json");
    let gh_output = t.root().join("gh-output");
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "plan", "--plan-file"])
        .arg(&plan)
        .env("GITHUB_OUTPUT", &gh_output)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs = std::fs::read_to_string(&gh_output).unwrap();
    assert!(outputs.lines().any(|l| l == "max-parallel=1"), "{outputs}");
    let matrix = outputs
        .lines()
        .find_map(|l| l.strip_prefix("matrix-1="))
        .unwrap();
    let matrix: serde_json::Value = serde_json::from_str(matrix).unwrap();
    assert_eq!(matrix["include"][1]["agent"], "reader", "{matrix}");

    let results = t.root().join("results");
    for (id, agent, status, file) in [
        (1, "writer", "success", "writer.txt"),
        (2, "reader", "timeout", "reader.txt"),
    ] {
        let job = clone(&t, &format!("job-{id}"));
        let out = t
            .command(FANOUT, &job)
            .args(["--config", cfg.to_str().unwrap(), "worker", "-q", "--plan"])
            .arg(&plan)
            .args(["--id", &id.to_string(), "--out"])
            .arg(&results)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let artifact: serde_json::Value = serde_json::from_slice(
            &std::fs::read(results.join(format!("fanout-result-{id}/result.json")))
                .unwrap_or_else(|e| panic!("worker {id}: {e}\n{stderr}")),
        )
        .unwrap();
        let result = &artifact["result"];
        assert_eq!(result["agent"], agent, "{result}");
        assert_eq!(result["status"], status, "{result}");
        assert_eq!(result["files_modified"], serde_json::json!([file]));
    }
}

/// A fresh clone of the test's bare origin, as a new runner's checkout would be.
fn clone(t: &TestEnv, name: &str) -> std::path::PathBuf {
    let dir = t.root().join(name);
    let remote = t.root().join("remote.git");
    t.git_in(
        t.root(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    assert!(Path::new(&dir).is_dir());
    dir
}
