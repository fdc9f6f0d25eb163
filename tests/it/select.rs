//! Checks as the gate, best-of-N selection, the conflict map and the integration
//! branch, end to end with real git, real processes and the loopback fake GitHub.

use crate::common;
use crate::fake_github;

use common::*;
use fake_github::FakeGitHub;

const TOKEN: &str = "ghs_selecttoken";

/// A repo with a bare `origin`.
fn repo_with_remote() -> (TestEnv, std::path::PathBuf) {
    let t = TestEnv::new();
    let remote = t.bare_origin();
    (t, remote)
}

fn run_json(
    t: &TestEnv,
    gh: Option<&FakeGitHub>,
    args: &[&str],
) -> (Option<i32>, serde_json::Value) {
    let url = gh.map(FakeGitHub::url).unwrap_or_default();
    let mut all: Vec<&str> = args.to_vec();
    if gh.is_some() {
        all.extend([
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ]);
    }
    let out = t.fanout(&all).env("GITHUB_TOKEN", TOKEN).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

#[test]
fn a_check_only_one_models_change_passes_decides_the_winner_and_its_one_pr() {
    let (t, _remote) = repo_with_remote();
    // The fake agent writes "Model: <model>" into fanout-demo/w<N>.md; the check
    // passes only for model `b`. The agent claims success every time.
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: fake\nworktree_dir: '{}'\nagents:\n  fake:\n    command: {}\nchecks:\n  - run: \"grep -q 'Model: b' fanout-demo/*.md\"\n    name: model-b-only\nselect: best\n",
        t.worktrees.display(),
        TestEnv::fake_agent_yaml(&[])
    ));
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let (code, r) = run_json(
        &t,
        Some(&gh),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "--models",
            "a,b,c",
            "-w",
            "3",
            "fix it",
        ],
    );
    assert_eq!(code, Some(1), "{r:#}");
    let results = r["results"].as_array().unwrap();
    let status: Vec<&str> = results
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["failed", "success", "failed"]);
    // The agent's claim did not override the failed check; the check is recorded.
    let a = &results[0];
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .starts_with("check `model-b-only` exited 1"),
        "{a}"
    );
    assert_eq!(a["checks"][0]["passed"], false);
    assert_eq!(results[1]["checks"][0]["passed"], true);
    assert!(results[1]["checks"][0]["duration"].as_f64().is_some());
    // One winner, with its score; ranks for all three.
    let winners: Vec<u64> = results
        .iter()
        .filter(|w| w["selection"]["winner"] == true)
        .map(|w| w["worker_id"].as_u64().unwrap())
        .collect();
    assert_eq!(winners, [2]);
    assert_eq!(results[1]["selection"]["rank"], 1);
    assert!(results[1]["selection"]["terms"]["checks"].as_f64().unwrap() > 0.0);
    // One PR: the winner's, whose body lists the runners-up with their scores.
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!(pulls[0].head_ref, results[1]["branch"].as_str().unwrap());
    let body = pulls[0].body.clone().unwrap();
    assert!(body.contains("### Best of 3: this worker won"), "{body}");
    assert!(body.contains("| #1 | a | failed |"), "{body}");
    assert!(body.contains("| #3 | c | failed |"), "{body}");
    assert!(body.contains("✅ `model-b-only`"), "{body}");
    gh.assert_no_violations();
    // The summary shows the ranking.
    let run = r["run_id"].as_str().unwrap();
    let summary = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
    assert!(summary.contains("### Best of N"), "{summary}");
    assert!(summary.contains("#2 ("), "{summary}");
    assert!(summary.contains("**winner**"), "{summary}");
}

#[test]
fn best_of_n_between_successes_publishes_only_the_winner() {
    let (t, _remote) = repo_with_remote();
    // Both succeed; worker 1 reports a higher cost, so worker 2 scores better.
    let agent = t.root().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\necho \"$FANOUT_MODEL\" > out.txt\nif [ \"$FANOUT_MODEL\" = pricey ]; then c=1.0; else c=0.1; fi\necho \"{\\\"status\\\":\\\"success\\\",\\\"cost\\\":$c}\" > \"$FANOUT_RESULT\"\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: a\nworktree_dir: '{}'\nagents:\n  a:\n    command: ['{}']\n",
        t.worktrees.display(),
        agent.display()
    ));
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let (code, r) = run_json(
        &t,
        Some(&gh),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "--select-best",
            "--models",
            "pricey,cheap",
            "-w",
            "2",
            "same task",
        ],
    );
    assert_eq!(code, Some(0), "{r:#}");
    let results = r["results"].as_array().unwrap();
    assert_eq!(results[1]["selection"]["winner"], true, "{r:#}");
    assert_eq!(results[0]["selection"]["winner"], false);
    assert_eq!(results[0]["publish"]["operation"], "skipped");
    assert_eq!(
        results[0]["publish"]["reason"].as_str().unwrap(),
        format!(
            "not selected: #2 won its task (score {} vs {})",
            results[1]["selection"]["score"].as_f64().unwrap(),
            results[0]["selection"]["score"].as_f64().unwrap()
        )
    );
    assert_eq!(gh.pulls().len(), 1);
    assert_eq!(
        gh.pulls()[0].head_ref,
        results[1]["branch"].as_str().unwrap()
    );
}

#[test]
fn same_line_edits_are_a_conflict_and_integrate_leaves_one_out() {
    let (t, remote) = repo_with_remote();
    // The task names the file: workers 1 and 2 both write `same.txt` (different
    // contents: a true conflict), worker 3 writes `other.txt`.
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: fake\nworktree_dir: '{}'\nagents:\n  fake:\n    command: ['{}', fake-agent, --write, '{{task}}.txt', '{{task}}']\n",
        t.worktrees.display(),
        FANOUT
    ));
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let (code, r) = run_json(
        &t,
        Some(&gh),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "--integrate",
            "-w",
            "3",
            "-t",
            "same",
            "-t",
            "same",
            "-t",
            "other",
        ],
    );
    assert_eq!(code, Some(0), "{r:#}");
    // The conflict map: 1 and 2 conflict in same.txt; 3 overlaps with nobody.
    let overlaps = r["conflicts"]["overlaps"].as_array().unwrap();
    assert_eq!(overlaps.len(), 1, "{r:#}");
    assert_eq!(
        (overlaps[0]["a"].as_u64(), overlaps[0]["b"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(overlaps[0]["conflicts"], serde_json::json!(["same.txt"]));
    // The integration branch: 1 and 3 in, 2 out with the reason.
    let it = &r["integration"];
    assert_eq!(it["included"], serde_json::json!([1, 3]));
    assert_eq!(it["left_out"][0]["worker_id"], 2);
    assert_eq!(it["left_out"][0]["reason"], "conflicts with #1 in same.txt");
    let branch = it["branch"].as_str().unwrap();
    assert!(branch.ends_with("/integration"), "{branch}");
    let files = t.git(&["diff", "--name-only", "main", branch]);
    assert_eq!(files, "other.txt\nsame.txt\n");
    // Its PR was opened beside the three workers' PRs, and says what was left out.
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 4, "{pulls:#?}");
    let ipr = pulls
        .iter()
        .find(|p| p.head_ref == branch)
        .expect("integration PR");
    let body = ipr.body.clone().unwrap();
    assert!(
        body.contains("left out #2: conflicts with #1 in same.txt"),
        "{body}"
    );
    assert_eq!(it["publish"]["operation"], "created");
    assert!(
        t.git_in(&remote, &["branch", "--list", branch])
            .contains("integration")
    );
    // The summary names the conflict and the integration.
    let run = r["run_id"].as_str().unwrap();
    let summary = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
    assert!(
        summary.contains("#1 and #2: conflict in same.txt"),
        "{summary}"
    );
    assert!(
        summary.contains("left out #2: conflicts with #1 in same.txt"),
        "{summary}"
    );
    // Cleanup removes the integration branch with the run.
    t.run_ok(&["cleanup", "--run", run]);
    assert!(!t.branches().iter().any(|b| b.ends_with("/integration")));
}
