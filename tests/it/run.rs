//! `fanout run` end to end: real git repositories, real processes.

use crate::common;

use std::path::Path;
use std::time::Duration;

use crate::common::json;
use common::*;

#[test]
fn four_tasks_two_workers_run_all_with_a_cap_and_commit_each_change() {
    let t = TestEnv::new();
    let trace = t.shared().join("trace.log");
    let trace_s = trace.display().to_string();
    let cfg = t.fake_config(&["--sleep", "1", "--trace", &trace_s], "");
    let cfg_s = cfg.display().to_string();
    let before = t.snapshot();
    let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let out = t.run_ok(&[
        "--config", &cfg_s, "run", "--json", "-w", "2", "-t", "one", "-t", "two", "-t", "three",
        "-t", "four",
    ]);
    let report = json(&out);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(report["totals"]["success"], 4);
    assert_eq!(report["plan"]["concurrency"], 2);

    // never more than 2 agents alive at once (and the cap was used)
    let trace = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(trace.lines().filter(|l| l.starts_with("start")).count(), 4);
    assert_eq!(max_overlap(&trace), 2, "{trace}");

    for (i, r) in results.iter().enumerate() {
        let id = i + 1;
        assert_eq!(r["worker_id"], id);
        let task = ["one", "two", "three", "four"][i];
        assert_eq!(r["task"], task);
        let branch = r["branch"].as_str().unwrap();
        let expected = format!("fanout-demo/w{id}.md");
        // exact files_modified, and the branch holds exactly that change
        assert_eq!(r["files_modified"], serde_json::json!([expected]));
        let diff = t.git(&["diff", "--name-only", &format!("{base}..{branch}")]);
        assert_eq!(diff.trim(), expected);
        let body = t.git(&["show", &format!("{branch}:{expected}")]);
        assert!(body.contains(&format!("Task: {task}")), "{body}");
        let msg = t.git(&["log", "-1", "--format=%an <%ae>%n%B", branch]);
        assert!(
            msg.starts_with("fanout <fanout@users.noreply.github.com>"),
            "{msg}"
        );
        assert!(msg.contains(&format!("Fanout-Worker: {id}")), "{msg}");
        assert_eq!(
            r["commit"].as_str().unwrap(),
            t.git(&["rev-parse", branch]).trim()
        );
        // worktree outside the checkout, clean after harvest
        let wt = std::path::PathBuf::from(r["worktree_path"].as_str().unwrap());
        assert!(!wt.starts_with(&t.repo));
        assert_eq!(t.git_in(&wt, &["status", "--porcelain"]), "");
        assert_eq!(r["steps"], 3);
        assert_eq!(r["cost"].as_f64().unwrap(), 0.001 * id as f64);
    }
    // the user's checkout is byte-for-byte unchanged
    assert_eq!(t.snapshot(), before);
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn one_task_three_workers_two_models_with_or_without_spaces() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg_s = cfg.display().to_string();
    for models in ["a,b", "a, b", " a ,b "] {
        let out = t.run_ok(&[
            "--config", &cfg_s, "plan", "--json", "-w", "3", "--models", models, "task",
        ]);
        let plan = json(&out);
        let got: Vec<serde_json::Value> = plan["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["model"].clone())
            .collect();
        assert_eq!(
            got,
            vec!["a".into(), "b".into(), serde_json::Value::Null],
            "{models}"
        );
    }
    // and the model reaches the agent
    let out = t.run_ok(&[
        "--config", &cfg_s, "run", "--json", "-w", "3", "--models", "a, b", "task",
    ]);
    let report = json(&out);
    for (r, model) in report["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["a", "b", "default"])
    {
        let branch = r["branch"].as_str().unwrap();
        let id = r["worker_id"].as_u64().unwrap();
        let body = t.git(&["show", &format!("{branch}:fanout-demo/w{id}.md")]);
        assert!(body.contains(&format!("Model: {model}")), "{body}");
    }
}

#[test]
fn timeout_stops_the_agent_and_all_its_descendants() {
    let t = TestEnv::new();
    let mark = marker("timeout");
    let cfg = t.fake_config(
        &[
            "--spawn",
            "3",
            "--marker",
            &mark,
            "--sleep",
            "600",
            "--ignore-term",
        ],
        "kill_grace: 1\n",
    );
    let cfg_s = cfg.display().to_string();
    let out = t
        .fanout(&[
            "--config",
            &cfg_s,
            "run",
            "--json",
            "-w",
            "1",
            "--timeout-per-worker",
            "1",
            "slow",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    let r = &report["results"][0];
    assert_eq!(r["status"], "timeout");
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.starts_with("timed out after 1s"), "{reason}");
    assert!(reason.contains("killed after the grace period"), "{reason}");
    // what it did before the timeout is kept, committed on its branch
    assert_eq!(
        r["files_modified"],
        serde_json::json!(["fanout-demo/w1.md"])
    );
    // no process from that tree survives
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&mark).is_empty()),
        "survivors: {:?}",
        processes_with(&mark)
    );
}

#[test]
fn agent_leftover_processes_are_reaped_after_a_clean_exit() {
    let t = TestEnv::new();
    let mark = marker("leftover");
    let cfg = t.fake_config(&["--spawn", "2", "--marker", &mark], "kill_grace: 1\n");
    let cfg_s = cfg.display().to_string();
    let out = t.run_ok(&["--config", &cfg_s, "run", "--json", "-w", "1", "quick"]);
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "success");
    assert!(
        r["reason"]
            .as_str()
            .unwrap()
            .contains("left processes running")
    );
    assert!(
        processes_with(&mark).is_empty(),
        "{:?}",
        processes_with(&mark)
    );
}

/// A worker's private directory (its `TMPDIR` lies in it) holds what its agent put
/// there, and is gone once the run is.
#[test]
fn a_workers_private_directory_is_gone_with_the_run() {
    let t = TestEnv::new();
    let tmp = t.root().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let seen = t.shared().join("seen");
    let agent = t.root().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nf=$(mktemp) && echo kept > \"$f\" && echo \"$f\" > '{}'\n",
            seen.display()
        ),
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, '{}']\n    result: {{format: exit-code}}\n    writable: ['{}']\n",
        t.worktrees.display(),
        agent.display(),
        t.shared().display()
    ));
    let cfg_s = cfg.display().to_string();
    succeeded(
        t.fanout(&["--config", &cfg_s, "run", "-q", "-w", "1", "work"])
            .env("TMPDIR", &tmp),
    );
    let made = std::fs::read_to_string(&seen).unwrap();
    let private = Path::new(made.trim()).parent().unwrap().parent().unwrap();
    // `$TMPDIR/fanout-<uid>/<run key>-w1`
    let mine = private.parent().unwrap();
    assert_eq!(mine.parent(), Some(tmp.as_path()), "{made}");
    let uid = nix::unistd::getuid();
    assert_eq!(mine.file_name().unwrap(), format!("fanout-{uid}").as_str());
    let name = private.file_name().unwrap().to_string_lossy();
    assert!(name.ends_with("-w1"), "{made}");
    assert!(!private.exists(), "{} is left", private.display());
}

#[test]
fn config_errors_name_file_line_column_and_key_and_create_nothing() {
    let t = TestEnv::new();
    let cases = [
        (
            "parallel_runs:\n  workers: 11\n",
            ":2:12: key `parallel_runs.workers`: expected an integer from 1 to 10, found 11",
        ),
        (
            "parallel_runs:\n  wrkers: 3\n",
            ":2:3: key `parallel_runs.wrkers`: unknown field `wrkers`",
        ),
        ("parallel_runs:\n  max_steps: lots\n", ":2:"),
        ("parallel_runs: [\n", ":1:16"),
        ("tasks:\n  - a\n  - {prompt: b, colour: red}\n", ":3:"),
    ];
    let before = t.branches();
    for (yaml, expected) in cases {
        let cfg = t.config(yaml);
        let cfg_s = cfg.display().to_string();
        let out = t
            .fanout(&["--config", &cfg_s, "run", "task"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{cfg_s}{expected}")),
            "for {yaml:?} expected {expected:?} in:\n{err}"
        );
    }
    // flags are named too
    let out = t.fanout(&["run", "-w", "0", "task"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--workers"));
    let out = t
        .fanout(&["run", "--models", "a,,b", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--models: empty model name"));
    let out = t
        .fanout(&["run", "--base", "no-such-ref", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--base \"no-such-ref\""));
    // nothing was created
    assert_eq!(t.branches(), before);
    assert!(t.runs().is_empty());
}

#[test]
fn fanout_yml_at_the_repo_root_is_read_by_default() {
    let t = TestEnv::new();
    t.write(
        "fanout.yml",
        &format!(
            "parallel_runs:\n  workers: 2\n  agent: fake\ntasks: [alpha, beta]\nmodels: [m1]\nworktree_dir: ../worktrees\nagents:\n  fake:\n    command: {}\n",
            TestEnv::fake_agent_yaml(&[])
        ),
    );
    t.git(&["add", "fanout.yml"]);
    t.git(&["commit", "-q", "-m", "config"]);
    let out = t.run_ok(&["run", "--json"]);
    let report = json(&out);
    let tasks: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["alpha", "beta"]);
    assert_eq!(report["results"][0]["model"], "m1");
    assert_eq!(report["results"][1]["model"], serde_json::Value::Null);
    assert_eq!(report["plan"]["base"]["branch"], "main");
}

#[test]
fn second_run_keeps_the_first_and_cleanup_is_scoped_to_one_run() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg_s = cfg.display().to_string();
    t.run_ok(&["--config", &cfg_s, "run", "-w", "2", "first"]);
    t.run_ok(&["--config", &cfg_s, "run", "-w", "2", "second"]);
    let runs = t.runs();
    assert_eq!(runs.len(), 2);
    let (r1, r2) = (t.results(&runs[0]), t.results(&runs[1]));
    let paths = |r: &serde_json::Value| -> Vec<(String, std::path::PathBuf)> {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w["branch"].as_str().unwrap().to_owned(),
                    w["worktree_path"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    let (p1, p2) = (paths(&r1), paths(&r2));
    for (b, wt) in p1.iter().chain(&p2) {
        assert!(t.branches().contains(b), "{b}");
        assert!(wt.join(".git").is_file(), "{}", wt.display());
    }
    // a user's own branch and worktree with similar names
    t.git(&["branch", "fanout-notes"]);
    let user_wt = t.root().join("worktrees").join("fanout-user");
    t.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "fanout/mine",
        user_wt.to_str().unwrap(),
    ]);

    let out = t.run_ok(&["cleanup", "--run", &runs[0]]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("removed 2 worktrees, 2 branches"), "{text}");
    for (b, wt) in &p1 {
        assert!(!t.branches().contains(b), "{b} should be gone");
        assert!(!wt.exists(), "{} should be gone", wt.display());
    }
    for (b, wt) in &p2 {
        assert!(t.branches().contains(b), "{b} should stay");
        assert!(wt.join(".git").is_file());
    }
    assert!(t.branches().contains(&"fanout-notes".to_owned()));
    assert!(t.branches().contains(&"fanout/mine".to_owned()));
    assert!(user_wt.join("README.md").is_file());
    assert_eq!(t.runs(), vec![runs[1].clone()]);
    // git agrees: no dangling worktree records
    let list = t.git(&["worktree", "list", "--porcelain"]);
    assert!(!list.contains(&runs[0]), "{list}");
    assert!(list.contains(&runs[1]));

    // --keep-branches removes worktrees only
    t.run_ok(&["cleanup", "--run", &runs[1], "--keep-branches"]);
    for (b, wt) in &p2 {
        assert!(t.branches().contains(b));
        assert!(!wt.exists());
    }
    // cleanup of an unknown run is a usage error
    let out = t.fanout(&["cleanup", "--run", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn excluded_paths_are_never_committed_and_files_modified_is_exact() {
    let t = TestEnv::new();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nexclude: ['*.secret']\nagents:\n  sh:\n    command: [sh, -c, 'mkdir -p .architect/sessions && echo {{{{}}}} > .architect/sessions/s.json && echo k > key.secret && echo changed > README.md && rm src/lib.rs && echo new > new.txt && echo junk > junk.tmp']\n",
        t.worktrees.display()
    ));
    let cfg_s = cfg.display().to_string();
    let out = t.run_ok(&["--config", &cfg_s, "run", "--json", "-w", "1", "edit"]);
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(
        r["files_modified"],
        serde_json::json!(["README.md", "new.txt", "src/lib.rs"])
    );
    let branch = r["branch"].as_str().unwrap();
    let tree = t.git(&["ls-tree", "-r", "--name-only", branch]);
    assert!(!tree.contains(".architect"), "{tree}");
    assert!(!tree.contains("key.secret"), "{tree}");
    assert!(!tree.contains("junk.tmp"), "ignored files stay out: {tree}");
    assert!(
        !tree.contains("src/lib.rs"),
        "deletions are committed: {tree}"
    );
}

#[test]
fn agents_never_see_github_tokens() {
    let t = TestEnv::new();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'env > env.txt']\n",
        t.worktrees.display()
    ));
    let cfg_s = cfg.display().to_string();
    let out = t
        .fanout(&["--config", &cfg_s, "run", "--json", "-w", "1", "look"])
        .env("GITHUB_TOKEN", "ghs_supersecret1")
        .env("GH_TOKEN", "ghp_supersecret2")
        .env("INPUT_GITHUB-TOKEN", "supersecret3")
        .env("OPENAI_API_KEY", "sk-passes")
        .output()
        .unwrap();
    let r = &json(&out)["results"][0];
    let branch = r["branch"].as_str().unwrap();
    let env = t.git(&["show", &format!("{branch}:env.txt")]);
    assert!(!env.contains("supersecret"), "{env}");
    // The model key stays with the run's gateway; the agent gets its door as proxy.
    assert!(!env.contains("sk-passes"), "{env}");
    assert!(env.contains("HTTPS_PROXY=http://127.0.0.1:"), "{env}");
    assert!(env.contains("FANOUT_WORKER_ID=1"));
    assert!(env.contains("FANOUT_RUN_ID="));
    assert!(!env.lines().any(|l| l.starts_with("GIT_DIR=")));
}

#[test]
fn outcomes_map_to_statuses_and_exit_codes() {
    let t = TestEnv::new();
    // all succeed: 0
    let cfg = t.fake_config(&[], "");
    let cfg_s = cfg.display().to_string();
    assert_eq!(
        t.fanout(&["--config", &cfg_s, "run", "-w", "2", "x"])
            .output()
            .unwrap()
            .status
            .code(),
        Some(0)
    );
    // no change: unchanged, not a failure: 0
    let cfg = t.fake_config(&["--no-change"], "");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "1",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "unchanged");
    assert_eq!(r["reason"], serde_json::Value::Null);
    // partial report, and a non-zero exit
    let cfg = t.fake_config(&["--status", "partial"], "");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "1",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(json(&out)["results"][0]["status"], "partial");
    let cfg = t.fake_config(&["--exit", "7"], "");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "1",
            "x",
        ])
        .output()
        .unwrap();
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "failed");
    assert_eq!(r["exit_code"], 7);
    let reason = r["reason"].as_str().unwrap();
    assert_eq!(reason.split(" — log: ").next(), Some("exit code 7"), "{r}");
    // work is kept on the branch even when the agent failed
    assert_eq!(
        r["files_modified"],
        serde_json::json!(["fanout-demo/w1.md"])
    );
    // over budget: partial
    let cfg = t.fake_config(&["--cost", "0.5"], "");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "1",
            "--budget-per-worker",
            "0.25",
            "x",
        ])
        .output()
        .unwrap();
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "partial");
    assert!(r["reason"].as_str().unwrap().starts_with("budget exceeded"));
    // A missing program is found before anything is created: a usage error (exit 2).
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: gone\nworktree_dir: '{}'\nagents:\n  gone:\n    command: [/nonexistent/agent]\n",
        t.worktrees.display()
    ));
    let runs = t.runs();
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "1",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("parallel_runs.agent gone: the agent's program `/nonexistent/agent`, which does not exist"),
        "{err}"
    );
    assert_eq!(t.runs(), runs, "no run was started");
}

#[test]
fn mixed_outcomes_exit_1() {
    let t = TestEnv::new();
    // worker 2 gets model "bad"; the agent fails only for it
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'test \"$FANOUT_MODEL\" != bad && echo ok > ok.txt']\n",
        t.worktrees.display()
    ));
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "2",
            "--models",
            "good,bad",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["totals"]["success"], 1);
    assert_eq!(report["totals"]["failed"], 1);
    assert_eq!(report["exit_code"], 1);
}

#[test]
fn report_files_and_the_step_summary() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let summary = t.root().join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "-w",
            "2",
            "--models",
            "m-a",
            "do it",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("STATUS"), "{stdout}");
    let run = &t.runs()[0];
    let md = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
    assert!(md.contains(&format!("## fanout run `{run}`")), "{md}");
    assert!(md.contains("**2 of 2 workers succeeded**"), "{md}");
    assert!(md.contains("| 1 | ✅ success |"), "{md}");
    assert!(md.contains("m-a"));
    let appended = std::fs::read_to_string(&summary).unwrap();
    assert!(appended.starts_with("earlier step\n"));
    assert!(appended.contains(&md));
    let report = t.results(run);
    assert_eq!(report["schema_version"], 3);
    assert_eq!(report["totals"]["workers"], 2);
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.run_dir(run).join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan, report["plan"]);
    // the log holds both streams
    let log = std::fs::read_to_string(report["results"][0]["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("fake-agent: done"), "{log}");
    assert!(log.contains("fake-agent: task: do it"), "{log}");
}

#[test]
fn dirty_checkout_is_warned_about_and_not_included() {
    let t = TestEnv::new();
    t.write("README.md", "local edit\n");
    t.write("scratch.txt", "untracked\n");
    let cfg = t.fake_config(&[], "");
    let before = t.snapshot();
    let out = t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "1",
        "x",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has 2 uncommitted changes; they are not included"),
        "{err}"
    );
    let branch = json(&out)["results"][0]["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        t.git(&["show", &format!("{branch}:README.md")]),
        "# test repo\n"
    );
    assert_eq!(t.snapshot(), before);
}

#[test]
fn uncommitted_changes_are_counted_per_file_leaving_out_the_worktree_root() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let inside = t.repo.join(".fanout-wt");
    let run = || {
        let out = t.run_ok(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "--worktree-dir",
            inside.to_str().unwrap(),
            "-w",
            "1",
            "x",
        ]);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // A clean checkout: no warning of uncommitted changes.
    let err = run();
    assert!(err.contains("worktrees go inside the checkout"), "{err}");
    assert!(!err.contains("uncommitted"), "{err}");
    // The first run's worktree is now untracked under the root: not counted; the
    // files of an untracked directory are, one by one.
    assert!(inside.is_dir());
    t.write("README.md", "local edit\n");
    for f in ["notes/a.txt", "notes/b.txt", "notes/c.txt"] {
        t.write(f, "mine\n");
    }
    let err = run();
    assert!(
        err.contains("has 4 uncommitted changes; they are not included"),
        "{err}"
    );
}

#[test]
fn status_lists_runs_worktrees_and_sizes() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    t.run_ok(&["--config", cfg.to_str().unwrap(), "run", "-w", "2", "x"]);
    let out = t.run_ok(&["status", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &runs[0];
    assert_eq!(run["state"], "finished");
    assert_eq!(run["workers"].as_array().unwrap().len(), 2);
    let w = &run["workers"][0];
    assert_eq!(w["status"], "success");
    assert_eq!(w["uncommitted"], 0);
    assert_eq!(w["worktree_exists"], true);
    assert!(w["disk_bytes"].as_u64().unwrap() > 0);
    let text = String::from_utf8_lossy(&t.run_ok(&["status"]).stdout).into_owned();
    assert!(text.contains("finished"), "{text}");
}

#[test]
fn schema_is_json_schema_of_the_file() {
    let t = TestEnv::new();
    let out = t.run_ok(&["schema"]);
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(schema["properties"]["parallel_runs"].is_object());
    assert!(schema["properties"]["agents"].is_object());
}

#[test]
fn demo_runs_three_workers() {
    let t = TestEnv::new();
    let dir = t.root().join("demo");
    let out = t
        .command(FANOUT, t.root())
        .args(["demo", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(" success ").count(), 3, "{stdout}");
}

/// After the table, `run` says what to do next — where the results are, the branches,
/// how to see the status, publish and clean up — and where each failed worker's log
/// is; not with --quiet or --json, whose output is for scripts.
#[test]
fn run_says_what_next_and_where_the_failed_workers_log_is() {
    let t = TestEnv::new();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'test \"$FANOUT_MODEL\" != bad && echo ok > out-$FANOUT_WORKER_ID.txt']\n",
        t.worktrees.display()
    ));
    let cfg = cfg.to_str().unwrap();
    let args = [
        "--config", cfg, "run", "-w", "2", "--models", "good,bad", "Tidy up",
    ];
    // This fanout first on PATH: the lines call it `fanout` (first_contact's demo test
    // has the other case, its path).
    let bin_dir = std::path::Path::new(FANOUT).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = t.fanout(&args).env("PATH", path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = t.runs().pop().expect("a run");
    let run_dir = t.run_dir(&id);
    for hint in [
        format!("results:   {}", run_dir.join("results.json").display()),
        format!("branches:  git branch --list 'fanout/{id}/*'"),
        format!("status:    fanout status --run {id}"),
        format!("publish:   fanout publish --run {id}"),
        format!("clean up:  fanout cleanup --run {id}"),
    ] {
        assert!(stdout.contains(&hint), "{hint:?} missing from:\n{stdout}");
    }
    let report = t.results(&id);
    let failed = &report["results"][1];
    assert_eq!(failed["status"], "failed");
    let log = failed["log_path"]
        .as_str()
        .expect("the failed worker's log");
    assert!(std::path::Path::new(log).is_file(), "{log}");
    assert!(
        stdout.contains(&format!("log:       {log} (worker 2 failed)")),
        "{stdout}"
    );
    let ok_log = report["results"][0]["log_path"].as_str().unwrap();
    assert!(
        !stdout.contains(ok_log),
        "only failed workers' logs: {stdout}"
    );
    // the hints name real things: the branches they list exist
    let listed = t.git(&["branch", "--list", &format!("fanout/{id}/*")]);
    assert_eq!(listed.lines().count(), 2, "{listed}");

    for quiet in [["-q"], ["--json"]] {
        let mut args = args.to_vec();
        args.insert(3, quiet[0]);
        let out = t.fanout(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("clean up:"), "{quiet:?}: {stdout}");
        assert!(!stdout.contains("log:"), "{quiet:?}: {stdout}");
    }
}

/// A worktree directory whose path is not UTF-8 (the run's records name it as text)
/// is a usage error naming it, before anything is made: no run directory is left.
#[test]
fn a_worktree_directory_that_is_not_utf8_is_refused_before_anything_is_made() {
    use std::os::unix::ffi::OsStrExt;
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let odd = t.root().join(std::ffi::OsStr::from_bytes(b"wt\xff"));
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-t", "x"])
        .arg("--worktree-dir")
        .arg(&odd)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--worktree-dir") && err.contains("not valid UTF-8"),
        "{err}"
    );
    assert!(t.runs().is_empty(), "a run directory was made");
    assert!(!odd.exists());
}
