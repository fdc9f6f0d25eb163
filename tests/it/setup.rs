//! Worktree setup end to end: copied files (`copy:`, `.worktreeinclude`), setup
//! commands, submodules and port blocks, with real git repositories and real processes,
//! in local mode and in matrix mode (`fanout worker`).

use crate::common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::json;
use common::*;

/// Files on a branch.
fn tree(t: &TestEnv, branch: &str) -> Vec<String> {
    t.git(&["ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn worktree(r: &serde_json::Value) -> PathBuf {
    PathBuf::from(r["worktree_path"].as_str().expect("a worktree"))
}

/// `first-last` as a pair.
fn range(s: &str) -> (u32, u32) {
    let (a, b) = s.trim().split_once('-').expect("first-last");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn env_file_from_worktreeinclude_reaches_every_worktree_and_is_never_committed() {
    let t = TestEnv::new();
    t.write(".gitignore", "target/\n*.tmp\n.env\n");
    t.write(".worktreeinclude", "# files the agent needs\n.env\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "ignore .env"]);
    let secret = "API_KEY=s3cr3t\nDB_URL=postgres://localhost/dev\n";
    t.write(".env", secret);
    std::fs::set_permissions(t.repo.join(".env"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = t.fake_config(&[], "");
    let before = t.snapshot();
    let out = t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "3",
        "add a feature",
    ]);
    let report = json(&out);
    assert_eq!(report["totals"]["success"], 3, "{report:#}");
    for r in report["results"].as_array().unwrap() {
        let wt = worktree(r);
        // byte-identical, same permissions
        assert_eq!(std::fs::read_to_string(wt.join(".env")).unwrap(), secret);
        let mode = std::fs::metadata(wt.join(".env"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // ignored in the worktree too, and not on the branch
        t.git_in(&wt, &["check-ignore", "-q", ".env"]);
        let branch = r["branch"].as_str().unwrap();
        assert!(!tree(&t, branch).contains(&".env".to_owned()));
        let id = r["worker_id"].as_u64().unwrap();
        assert_eq!(
            r["files_modified"],
            serde_json::json!([format!("fanout-demo/w{id}.md")])
        );
        assert_eq!(r["setup"]["copied"], 1);
        // every worker has its own ports
        let ports = &r["setup"]["ports"];
        assert_eq!(
            ports["last"].as_u64().unwrap() - ports["first"].as_u64().unwrap(),
            9
        );
        let log = std::fs::read_to_string(r["log_path"].as_str().unwrap()).unwrap();
        assert!(log.contains("fanout: setup: copied 1 file: .env"), "{log}");
        assert!(log.contains("fake-agent: done"), "{log}");
    }
    let md = std::fs::read_to_string(
        t.run_dir(report["run_id"].as_str().unwrap())
            .join("summary.md"),
    )
    .unwrap();
    assert!(md.contains("### Worktree setup"), "{md}");
    assert!(md.contains("- #2: copied 1 file · ports "), "{md}");
    // the user's checkout is untouched
    assert_eq!(t.snapshot(), before);
}

#[test]
fn copy_globs_take_untracked_files_but_never_override_what_the_base_tracks() {
    let t = TestEnv::new();
    t.write("fixtures/local/tracked.json", "{\"committed\": true}\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "fixtures"]);
    // untracked (not ignored) files, one executable, and a dirty tracked file
    t.write("fixtures/local/a.json", "{\"a\": 1}\n");
    t.write("fixtures/local/deep/run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        t.repo.join("fixtures/local/deep/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    t.write("fixtures/local/tracked.json", "{\"dirty\": true}\n");
    t.write("fixtures/other.json", "not selected\n");
    let cfg = t.fake_config(&[], "copy: ['fixtures/local/', '!**/*.tmp']\n");
    t.write("fixtures/local/scratch.tmp", "taken back out\n");
    let report = json(&t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "2",
        "use the fixtures",
    ]));
    assert_eq!(report["plan"]["setup"]["copy"][0], "fixtures/local/");
    for r in report["results"].as_array().unwrap() {
        let wt = worktree(r);
        assert_eq!(r["setup"]["copied"], 2, "{r:#}");
        assert_eq!(
            std::fs::read(wt.join("fixtures/local/a.json")).unwrap(),
            b"{\"a\": 1}\n"
        );
        let mode = std::fs::metadata(wt.join("fixtures/local/deep/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        // the base's version of a tracked file, not the checkout's edit
        assert_eq!(
            std::fs::read(wt.join("fixtures/local/tracked.json")).unwrap(),
            b"{\"committed\": true}\n"
        );
        assert!(!wt.join("fixtures/other.json").exists());
        assert!(!wt.join("fixtures/local/scratch.tmp").exists());
        // copied files are not ignored in the worktree, yet never committed
        let branch = r["branch"].as_str().unwrap();
        let files = tree(&t, branch);
        assert!(
            !files
                .iter()
                .any(|f| f.ends_with("a.json") || f.ends_with("run.sh"))
        );
        let id = r["worker_id"].as_u64().unwrap();
        assert_eq!(
            r["files_modified"],
            serde_json::json!([format!("fanout-demo/w{id}.md")])
        );
    }
}

#[test]
fn setup_commands_run_in_order_with_ids_and_ports_and_leave_no_trace_on_the_branch() {
    let t = TestEnv::new();
    let cfg = t.config(&format!(
        r#"parallel_runs:
  agent: sh
worktree_dir: '{}'
agents:
  sh:
    command: [sh, -c, 'echo "$FANOUT_PORT $FANOUT_PORTS" > agent-ports.txt']
    result: {{format: exit-code}}
setup:
  - echo "$FANOUT_WORKER_ID $FANOUT_RUN_ID $FANOUT_PORT $FANOUT_PORTS" > setup-env.txt; echo first
  - run: |
      test -f setup-env.txt
      echo appended by setup >> README.md
      echo second
    timeout: 30
"#,
        t.worktrees.display()
    ));
    let report = json(&t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "2",
        "serve",
    ]));
    let run_id = report["run_id"].as_str().unwrap();
    assert_eq!(report["plan"]["setup"]["commands"][1]["timeout"], 30.0);
    assert_eq!(report["plan"]["setup"]["commands"][0]["timeout"], 300.0);
    for r in report["results"].as_array().unwrap() {
        assert_eq!(r["status"], "success", "{r:#}");
        let id = r["worker_id"].as_u64().unwrap();
        let wt = worktree(r);
        let first = r["setup"]["ports"]["first"].as_u64().unwrap();
        let last = r["setup"]["ports"]["last"].as_u64().unwrap();
        let seen = std::fs::read_to_string(wt.join("setup-env.txt")).unwrap();
        assert_eq!(seen.trim(), format!("{id} {run_id} {first} {first}-{last}"));
        // the agent gets the same block
        let branch = r["branch"].as_str().unwrap();
        let agent = t.git(&["show", &format!("{branch}:agent-ports.txt")]);
        assert_eq!(agent.trim(), format!("{first} {first}-{last}"));
        // both commands ran, in order, and what they left is not the agent's work
        let cmds = r["setup"]["commands"].as_array().unwrap();
        assert_eq!(cmds.len(), 2);
        assert!(
            cmds.iter()
                .all(|c| c["exit_code"] == 0 && c["duration"].is_f64())
        );
        assert!(
            cmds[0]["run"]
                .as_str()
                .unwrap()
                .starts_with("echo \"$FANOUT_WORKER_ID")
        );
        assert_eq!(r["files_modified"], serde_json::json!(["agent-ports.txt"]));
        assert!(!tree(&t, branch).contains(&"setup-env.txt".to_owned()));
        assert_eq!(
            t.git(&["show", &format!("{branch}:README.md")]),
            "# test repo\n"
        );
        assert!(
            std::fs::read_to_string(wt.join("README.md"))
                .unwrap()
                .contains("appended by setup")
        );
        // their output is in the worker's log, before the agent's
        let log = std::fs::read_to_string(r["log_path"].as_str().unwrap()).unwrap();
        let a = log.find("\nfirst\n").expect("first output");
        let b = log.find("\nsecond\n").expect("second output");
        let c = log.find("fanout: setup done; starting the agent").unwrap();
        assert!(a < b && b < c, "{log}");
    }
}

#[test]
fn a_failing_setup_fails_its_worker_and_the_agent_never_runs() {
    let t = TestEnv::new();
    t.write(
        "setup.sh",
        // Both lines on stderr: one pipe keeps their order (stdout and stderr are drained
        // concurrently, so lines across the two may interleave either way).
        "case \"$FANOUT_WORKER_ID\" in\n  2) echo 'preparing the db' >&2; echo 'no database for worker 2' >&2; exit 1;;\n  3) sleep 30;;\nesac\necho ready\n",
    );
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "setup script"]);
    let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let trace = t.shared().join("trace.log");
    let cfg = t.fake_config(
        &["--trace", trace.to_str().unwrap()],
        "setup:\n  - run: sh ./setup.sh\n    timeout: 3\n",
    );
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "3",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results[0]["status"], "success");

    let failed = &results[1];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["reason"],
        "setup failed: `sh ./setup.sh` exited 1: no database for worker 2"
    );
    assert_eq!(failed["setup"]["commands"][0]["exit_code"], 1);
    assert!(failed["exit_code"].is_null());
    // the branch and worktree exist (and are journaled), at the base
    assert_eq!(failed["commit"], base.as_str());
    assert!(worktree(failed).is_dir());
    assert!(
        t.branches()
            .contains(&failed["branch"].as_str().unwrap().to_owned())
    );

    let slow = &results[2];
    assert_eq!(slow["status"], "failed");
    assert_eq!(
        slow["reason"],
        "setup failed: `sh ./setup.sh` timed out after 3s"
    );
    assert_eq!(slow["setup"]["commands"][0]["timed_out"], true);

    // only worker 1's agent ever started
    let trace = std::fs::read_to_string(&trace).unwrap();
    let started: Vec<&str> = trace
        .lines()
        .filter(|l| l.starts_with("start"))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(started, ["1"], "{trace}");

    // the reason is in the summary, the output in the log
    let run_id = report["run_id"].as_str().unwrap();
    let md = std::fs::read_to_string(t.run_dir(run_id).join("summary.md")).unwrap();
    assert!(
        md.contains("failed: setup failed: \\`sh ./setup.sh\\` exited 1: no database for worker 2"),
        "{md}"
    );
    assert!(
        md.contains("- #2: `sh ./setup.sh` exited 1 · ports "),
        "{md}"
    );
    let log = std::fs::read_to_string(failed["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("preparing the db"), "{log}");
    assert!(!log.contains("fake-agent"), "{log}");

    // cleanup removes the failed worker's worktree and branch like any other
    let out = t.run_ok(&["cleanup", "--run", run_id]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("removed 3 worktrees, 3 branches"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!worktree(failed).exists());
    assert!(!t.branches().iter().any(|b| b.starts_with("fanout/")));
}

/// Two fanout processes with two workers each: each worker's setup records its ports
/// and waits until all four have, so all four hold their blocks at the same time.
#[test]
fn concurrent_workers_never_share_a_port() {
    let shared = tempfile::tempdir().unwrap();
    let seen = shared.path().join("seen");
    std::fs::create_dir(&seen).unwrap();
    let setup = format!(
        "setup:\n  - |\n    echo \"$FANOUT_PORTS\" > '{dir}'/\"$FANOUT_RUN_ID-$FANOUT_WORKER_ID\"\n    i=0\n    while [ \"$(ls '{dir}' | wc -l)\" -lt 4 ]; do\n      i=$((i+1)); [ $i -gt 600 ] && exit 9\n      sleep 0.1\n    done\n",
        dir = seen.display()
    );
    let envs: Vec<TestEnv> = (0..2).map(|_| TestEnv::new()).collect();
    let mut children = Vec::new();
    for (k, t) in envs.iter().enumerate() {
        // (the setup commands, sandboxed like the agent, may write `seen`)
        let cfg = t.config(&format!(
            "parallel_runs:\n  agent: fake\nworktree_dir: '{}'\nagents:\n  fake:\n    command: {}\n    writable: ['{}']\n{setup}",
            t.worktrees.display(),
            TestEnv::fake_agent_yaml(&["--sleep", "0.5"]),
            seen.display(),
        ));
        let child = t
            .fanout(&[
                "--config",
                cfg.to_str().unwrap(),
                "run",
                "--json",
                "-q",
                "-w",
                "2",
                "--run-id",
                &format!("ports-{k}"),
                "serve",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push(child);
    }
    let mut from_results = BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let report = json(&out);
        assert_eq!(report["totals"]["success"], 2, "{report:#}");
        for r in report["results"].as_array().unwrap() {
            let p = &r["setup"]["ports"];
            from_results.insert((
                p["first"].as_u64().unwrap() as u32,
                p["last"].as_u64().unwrap() as u32,
            ));
        }
    }
    let mut blocks: Vec<(u32, u32)> = std::fs::read_dir(&seen)
        .unwrap()
        .map(|e| range(&std::fs::read_to_string(e.unwrap().path()).unwrap()))
        .collect();
    blocks.sort();
    assert_eq!(blocks.len(), 4);
    assert!(blocks.iter().all(|(a, b)| b - a == 9), "{blocks:?}");
    assert!(blocks.windows(2).all(|w| w[0].1 < w[1].0), "{blocks:?}");
    assert_eq!(blocks.into_iter().collect::<BTreeSet<_>>(), from_results);
}

#[test]
fn submodules_are_initialized_unless_turned_off() {
    let mut t = TestEnv::new();
    // Local submodule URLs need git's file protocol (off by default since 2.38.1).
    for (k, v) in [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
        ("GIT_CONFIG_VALUE_0", "always"),
    ] {
        t.env.insert(k.into(), v.into());
    }
    let lib = t.root().join("lib-repo");
    std::fs::create_dir(&lib).unwrap();
    t.git_in(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "from the submodule\n").unwrap();
    t.git_in(&lib, &["add", "-A"]);
    t.git_in(&lib, &["commit", "-q", "-m", "lib"]);
    t.git(&[
        "submodule",
        "add",
        "-q",
        lib.to_str().unwrap(),
        "vendor/lib",
    ]);
    t.git(&["commit", "-q", "-m", "add the submodule"]);

    let cfg = t.fake_config(&[], "setup:\n  - cat vendor/lib/lib.txt\n");
    let report = json(&t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "1",
        "x",
    ]));
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r:#}");
    assert_eq!(
        std::fs::read_to_string(worktree(r).join("vendor/lib/lib.txt")).unwrap(),
        "from the submodule\n"
    );
    assert_eq!(
        r["setup"]["submodules"]["run"],
        "git submodule update --init --recursive"
    );
    assert_eq!(r["setup"]["submodules"]["exit_code"], 0);
    assert_eq!(
        r["files_modified"],
        serde_json::json!(["fanout-demo/w1.md"])
    );
    let run_id = report["run_id"].as_str().unwrap().to_owned();
    let first_worktree = worktree(r);

    let cfg = t.fake_config(&[], "submodules: false\n");
    let report = json(&t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "1",
        "x",
    ]));
    let r = &report["results"][0];
    assert!(r["setup"]["submodules"].is_null());
    assert!(!worktree(r).join("vendor/lib/lib.txt").exists());

    // a submodule that cannot be fetched fails the worker
    std::fs::rename(&lib, t.root().join("moved")).unwrap();
    let cfg = t.fake_config(&[], "");
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
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("setup failed: `git submodule update --init --recursive` exited "),
        "{reason}"
    );

    // worktrees with initialized submodules clean up
    t.run_ok(&["cleanup", "--run", &run_id]);
    assert!(!t.branches().iter().any(|b| b.contains(&run_id)));
    assert!(!first_worktree.exists());
}

/// What an agent (or anyone) planted in the shared repository's configuration — an
/// fsmonitor, a `!command` submodule update, a filter for every file, a credential
/// helper, hooks — never runs when fanout's own git initializes the submodules, and
/// the token in fanout's environment reaches no git command.
#[test]
fn submodule_setup_runs_nothing_planted_in_the_shared_config() {
    let mut t = TestEnv::new();
    for (k, v) in [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
        ("GIT_CONFIG_VALUE_0", "always"),
    ] {
        t.env.insert(k.into(), v.into());
    }
    let lib = t.root().join("lib-repo");
    std::fs::create_dir(&lib).unwrap();
    t.git_in(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("lib.txt"), "from the submodule\n").unwrap();
    t.git_in(&lib, &["add", "-A"]);
    t.git_in(&lib, &["commit", "-q", "-m", "lib"]);
    let lib_s = lib.to_str().unwrap();
    t.git(&["submodule", "add", "-q", lib_s, "vendor/lib"]);
    t.git(&["commit", "-q", "-m", "add the submodule"]);

    let markers = t.root().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let plant = t.root().join("plant.sh");
    std::fs::write(
        &plant,
        format!(
            "#!/bin/sh\nenv > '{}'/\"$1.$$\"\ncase \"$1\" in filter) cat ;; esac\nexit 0\n",
            markers.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plant, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = plant.display();
    for (k, v) in [
        ("core.fsmonitor", format!("{p} fsmonitor")),
        ("submodule.vendor/lib.update", format!("!{p} update")),
        ("submodule.vendor/lib.url", lib_s.to_owned()),
        ("credential.helper", format!("!{p} credential")),
        ("filter.evil.clean", format!("{p} filter")),
        ("filter.evil.smudge", format!("{p} filter")),
    ] {
        t.git(&["config", k, &v]);
    }
    std::fs::write(t.repo.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    for hook in ["post-checkout", "reference-transaction", "pre-commit"] {
        let h = t.repo.join(".git/hooks").join(hook);
        std::fs::write(&h, format!("#!/bin/sh\n'{p}' hook-{hook}\n")).unwrap();
        std::fs::set_permissions(&h, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }

    let cfg = t.fake_config(&[], "setup:\n  - cat vendor/lib/lib.txt\n");
    let token = "ghs_setupsubmoduletoken0123456789abcdefgh";
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
        .env("GITHUB_TOKEN", token)
        .output()
        .unwrap();
    let report = json(&out);
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r:#}");
    assert_eq!(r["setup"]["submodules"]["exit_code"], 0, "{r:#}");
    assert_eq!(
        std::fs::read_to_string(worktree(r).join("vendor/lib/lib.txt")).unwrap(),
        "from the submodule\n"
    );
    let ran: Vec<String> = std::fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ran, Vec::<String>::new(), "planted programs ran");
    // the plants are real: the user's own git runs them
    t.git(&["status"]);
    assert!(std::fs::read_dir(&markers).unwrap().next().is_some());
}

#[test]
fn bad_setup_entries_name_file_line_and_column() {
    let t = TestEnv::new();
    let check = |yaml: &str, expected: &str| {
        let cfg = t.config(yaml);
        let out = t
            .fanout(&["--config", cfg.to_str().unwrap(), "plan", "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let expected = expected.replace("FILE", cfg.to_str().unwrap());
        assert!(stderr.contains(&expected), "{stderr}\nexpected: {expected}");
    };
    check(
        "setup:\n  - npm ci\n  - run: make db\n    timout: 5\n",
        "FILE:4:5: key `setup[1].timout`: unknown field `timout`, expected one of run, timeout",
    );
    check(
        "setup:\n  - [npm, ci]\n",
        "FILE:2:5: key `setup[0]`: invalid type: sequence, expected a shell command, or {run: COMMAND, timeout: DURATION}",
    );
    check(
        "tasks: [x]\nsetup:\n  - ''\n",
        "FILE:3:5: key `setup[0]`: expected a shell command, found an empty string",
    );
    check(
        "copy:\n  - .env\n  - ../secrets/.env\n",
        "FILE:3:5: key `copy[1]`: `../secrets/.env`: `..` would leave the repository",
    );
    check(
        "ports: {base: 20000, size: 10}\n",
        "FILE:1:22: key `ports.size`: unknown field `size`",
    );
    check(
        "ports: {base: 65530}\n",
        "FILE: ports: a block of 10 ports from 65530 does not fit in 1–65535",
    );
}

#[test]
fn a_bad_worktreeinclude_line_fails_workers_naming_the_line() {
    let t = TestEnv::new();
    t.write(".worktreeinclude", ".env\n../outside\n");
    let cfg = t.fake_config(&[], "");
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
    assert_eq!(
        r["reason"],
        "setup failed: .worktreeinclude:2: `../outside`: `..` would leave the repository"
    );
}

/// Matrix mode: `fanout worker` in a job's fresh clone copies what earlier steps of the
/// job wrote, runs the setup commands with ports, and `fanout aggregate` keeps the
/// record.
#[test]
fn matrix_workers_run_setup_in_the_jobs_checkout() {
    let t = TestEnv::new();
    t.write(".gitignore", ".env\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "ignore .env"]);
    let remote = t.bare_origin();
    let cfg = t.fake_config(
        &[],
        "copy: [.env]\nsetup:\n  - echo \"port $FANOUT_PORT\"\n  - 'test -f .env || { echo no .env here; exit 1; }'\n",
    );
    let plan = t.root().join("plan.json");
    t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "plan",
        "--plan-file",
        plan.to_str().unwrap(),
        "-w",
        "2",
        "-t",
        "one",
        "-t",
        "two",
    ]);
    let plan_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(plan_json["setup"]["copy"], serde_json::json!([".env"]));

    let results = t.root().join("results");
    for id in [1u32, 2] {
        let job = t.root().join(format!("job-{id}"));
        t.git_in(
            t.root(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                job.to_str().unwrap(),
            ],
        );
        // an earlier step of job 1 wrote the .env (from secrets, say); job 2's did not
        if id == 1 {
            std::fs::write(job.join(".env"), "TOKEN=from-ci\n").unwrap();
        }
        let out = t
            .command(FANOUT, &job)
            .args(["--config", cfg.to_str().unwrap(), "worker", "--plan"])
            .arg(&plan)
            .args(["--id", &id.to_string(), "--out"])
            .arg(&results)
            .output()
            .unwrap();
        let artifact: serde_json::Value = serde_json::from_slice(
            &std::fs::read(results.join(format!("fanout-result-{id}/result.json"))).unwrap(),
        )
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let r = &artifact["result"];
        assert!(r["setup"]["ports"]["first"].is_u64(), "{r:#}");
        let log =
            std::fs::read_to_string(results.join(format!("fanout-result-{id}/log.txt"))).unwrap();
        if id == 1 {
            assert_eq!(out.status.code(), Some(0));
            assert_eq!(r["status"], "success");
            assert_eq!(r["setup"]["copied"], 1);
            assert_eq!(r["setup"]["commands"][1]["exit_code"], 0);
            let port = r["setup"]["ports"]["first"].as_u64().unwrap();
            assert!(log.contains(&format!("\nport {port}\n")), "{log}");
        } else {
            assert_eq!(r["status"], "failed");
            assert_eq!(r["setup"]["copied"], 0);
            assert_eq!(
                r["reason"],
                "setup failed: `test -f .env || { echo no .env here; exit 1; }` exited 1: no .env here"
            );
        }
    }

    let out = t
        .command(FANOUT, &t.repo)
        .args(["aggregate", "--json", "--plan"])
        .arg(&plan)
        .arg("--from")
        .arg(&results)
        .output()
        .unwrap();
    let report = json(&out);
    assert_eq!(report["results"][0]["setup"]["copied"], 1);
    let md = std::fs::read_to_string(
        t.run_dir(report["run_id"].as_str().unwrap())
            .join("summary.md"),
    )
    .unwrap();
    assert!(md.contains("### Worktree setup"), "{md}");
    assert!(
        md.contains("— failed: setup failed: \\`test -f .env \\|\\| { echo no .env here; exit 1; }\\` exited 1: no .env here"),
        "{md}"
    );
}

/// The README's example is valid: against `fanout schema`, and for `fanout plan`.
#[test]
fn the_readme_example_is_valid() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/worktree-setup.md"
    ))
    .unwrap();
    let section = readme
        .split("# Worktree setup\n")
        .nth(1)
        .expect("a Worktree setup section");
    let yaml = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a yaml example");
    let t = TestEnv::new();
    let schema: serde_json::Value = serde_json::from_slice(&t.run_ok(&["schema"]).stdout).unwrap();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(false)
        .build(&schema)
        .unwrap();
    let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{yaml}");
    let bad: serde_json::Value =
        serde_json::json!({"setup": [{"run": "x", "timout": 1}], "ports": {"base": 0}});
    assert!(!validator.is_valid(&bad));

    let cfg = t.config(yaml);
    let plan = json(&t.run_ok(&["--config", cfg.to_str().unwrap(), "plan", "--json", "x"]));
    let setup = &plan["setup"];
    assert_eq!(setup["copy"].as_array().unwrap().len(), 3);
    assert_eq!(setup["commands"][1]["timeout"], 600.0);
    assert_eq!(setup["submodules"], true);
    assert!(
        setup["ports"].is_null(),
        "the defaults are left out: {setup}"
    );
}

/// A `node_modules` as npm lays it out: a package whose CLI `.bin` links to (a
/// relative symlink), a private file, a read-only directory, old times; plus what
/// must neither hang nor fail the copy: a FIFO and symlink loops.
fn node_modules(t: &TestEnv) -> std::time::SystemTime {
    use std::os::unix::fs::symlink;
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000);
    t.write(".gitignore", "node_modules/\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "ignore node_modules"]);
    let nm = t.repo.join("node_modules");
    t.write(
        "node_modules/greet/bin/cli.sh",
        "#!/bin/sh\necho \"hello from greet, $1\"\n",
    );
    t.write("node_modules/greet/private.key", "k\n");
    t.write("node_modules/greet/lib/index.js", "module.exports = 1;\n");
    let set = |rel: &str, mode: u32| {
        let p = nm.join(rel);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set("greet/bin/cli.sh", 0o755);
    set("greet/private.key", 0o600);
    std::fs::create_dir_all(nm.join(".bin")).unwrap();
    symlink("../greet/bin/cli.sh", nm.join(".bin/greet")).unwrap();
    std::fs::create_dir_all(nm.join("loop")).unwrap();
    symlink("b", nm.join("loop/a")).unwrap();
    symlink("a", nm.join("loop/b")).unwrap();
    symlink(".", nm.join("loop/self")).unwrap();
    symlink("..", nm.join("loop/up")).unwrap();
    let fifo = nm.join("loop/fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for rel in [
        "greet/bin/cli.sh",
        "greet/private.key",
        "greet/lib/index.js",
    ] {
        let f = std::fs::File::options()
            .append(true)
            .open(nm.join(rel))
            .unwrap();
        f.set_modified(old).unwrap();
    }
    set("greet/lib", 0o555);
    for dir in ["greet/lib", "greet"] {
        std::fs::File::open(nm.join(dir))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    old
}

#[test]
fn a_copied_node_modules_keeps_its_bin_symlinks_modes_and_times() {
    let t = TestEnv::new();
    let old = node_modules(&t);
    let cfg = t.config(&format!(
        r#"parallel_runs:
  agent: sh
worktree_dir: '{}'
copy: [node_modules/]
agents:
  sh:
    command: [sh, -c, 'node_modules/.bin/greet "worker $FANOUT_WORKER_ID" > greeting.txt']
    result: {{format: exit-code}}
"#,
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
            "greet",
        ])
        .output()
        .unwrap();
    let report = json(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    for r in report["results"].as_array().unwrap() {
        assert_eq!(r["status"], "success", "{r:#}");
        let id = r["worker_id"].as_u64().unwrap();
        let branch = r["branch"].as_str().unwrap();
        // the package's CLI ran through `.bin`
        assert_eq!(
            t.git(&["show", &format!("{branch}:greeting.txt")]),
            format!("hello from greet, worker {id}\n")
        );
        let nm = worktree(r).join("node_modules");
        assert_eq!(
            std::fs::read_link(nm.join(".bin/greet")).unwrap(),
            std::path::Path::new("../greet/bin/cli.sh")
        );
        assert_eq!(
            std::fs::read_link(nm.join("loop/self")).unwrap(),
            std::path::Path::new(".")
        );
        assert_eq!(
            std::fs::read_link(nm.join("loop/a")).unwrap(),
            std::path::Path::new("b")
        );
        // modes and times as `cp -a` keeps them
        for (rel, mode) in [
            ("greet/bin/cli.sh", 0o755),
            ("greet/private.key", 0o600),
            ("greet/lib/index.js", 0o644),
            ("greet/lib", 0o555),
        ] {
            let meta = std::fs::symlink_metadata(nm.join(rel)).unwrap();
            assert_eq!(meta.permissions().mode() & 0o7777, mode, "{rel}");
            assert_eq!(meta.modified().unwrap(), old, "{rel}");
        }
        assert_eq!(
            std::fs::metadata(nm.join("greet"))
                .unwrap()
                .modified()
                .unwrap(),
            old
        );
        // the FIFO is skipped, and said so
        assert!(std::fs::symlink_metadata(nm.join("loop/fifo")).is_err());
        let warning = "not copied: 1 entry (FIFOs, sockets and devices are skipped, as are names that are not UTF-8): node_modules/loop/fifo";
        assert_eq!(
            r["setup"]["warnings"],
            serde_json::json!([warning]),
            "{r:#}"
        );
        // nothing of node_modules is committed
        assert!(
            !tree(&t, branch)
                .iter()
                .any(|f| f.starts_with("node_modules"))
        );
    }
}

/// A symlink copied into the worktree that points outside it gives a sandboxed
/// agent no way out: Landlock checks the path a write resolves to, not the link.
#[test]
fn a_copied_symlink_out_of_the_worktree_cannot_be_written_through_when_sandboxed() {
    let t = TestEnv::new();
    t.write(".gitignore", "node_modules/\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "ignore node_modules"]);
    let outside = t.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("kept.txt"), "original\n").unwrap();
    t.write("node_modules/pkg/index.js", "1\n");
    std::os::unix::fs::symlink(&outside, t.repo.join("node_modules/.cache")).unwrap();
    let cfg = t.config(&format!(
        r#"parallel_runs:
  agent: sh
worktree_dir: '{}'
sandbox: required
copy: [node_modules/]
agents:
  sh:
    command: [sh, -c, 'for f in planted.txt kept.txt; do if echo x >> node_modules/.cache/$f 2>/dev/null; then echo "DID $f"; else echo "DENIED $f"; fi; done; cat node_modules/.cache/kept.txt']
    result: {{format: exit-code}}
"#,
        t.worktrees.display()
    ));
    let report = json(&t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "1",
        "escape",
    ]));
    let r = &report["results"][0];
    assert_eq!(r["sandboxed"], true, "{r:#}");
    assert_eq!(
        std::fs::read_link(worktree(r).join("node_modules/.cache")).unwrap(),
        outside
    );
    let log = std::fs::read_to_string(r["log_path"].as_str().unwrap()).unwrap();
    // reading through it is allowed; writing is not
    for line in ["DENIED planted.txt\n", "DENIED kept.txt\n", "\noriginal\n"] {
        assert!(log.contains(line), "{line}{log}");
    }
    assert!(!outside.join("planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("kept.txt")).unwrap(),
        "original\n"
    );
}

/// A `.gitmodules` the base does not track, copied in by `copy:` (an untracked file in
/// the checkout, which an earlier unsandboxed agent may have left there): setup fetches
/// no submodule it names, and fails saying why.
#[test]
fn a_copied_gitmodules_fetches_nothing() {
    let t = TestEnv::new();
    t.write(
        ".gitmodules",
        "[submodule \"x\"]\n\tpath = x\n\turl = http://127.0.0.1:9/leak.git\n",
    );
    let cfg = t.fake_config(&[], "copy: ['.gitmodules']\n");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-q",
            "x",
        ])
        .output()
        .unwrap();
    let report = json(&out);
    let r = &report["results"][0];
    assert_eq!(r["status"], "failed", "{r:#}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(".gitmodules differs from the base's"),
        "{r:#}"
    );
}
