//! Task dependencies (`depends_on`), with real git and real processes: a dependent
//! starts after its dependencies succeed, from a base that merges their branches; a
//! failed dependency skips its dependents; cycles and unknown ids are config errors.

use crate::common;

use common::*;

fn config(t: &TestEnv, agent_args: &[&str], tasks: &str) -> std::path::PathBuf {
    t.config(&format!(
        "parallel_runs:\n  agent: fake\n  workers: 4\nworktree_dir: '{}'\nagents:\n  fake:\n    command: {}\n    writable: ['{}']\ntasks:\n{tasks}",
        t.worktrees.display(),
        TestEnv::fake_agent_yaml(agent_args),
        t.shared().display()
    ))
}

fn run(t: &TestEnv, cfg: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "run", "-q", "--json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

#[test]
fn a_failed_link_skips_the_rest_of_the_chain() {
    let t = TestEnv::new();
    let cfg = config(
        &t,
        &["--fail-on", "FAILME", "--write", "out-{worker_id}.txt"],
        "  - {id: a, prompt: write a}\n  - {id: b, prompt: FAILME b, depends_on: [a]}\n  - {id: c, prompt: write c, depends_on: [b]}\n",
    );
    let (code, r) = run(&t, &cfg);
    assert_eq!(code, Some(1), "{r:#}");
    let st: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    // (4 workers, 3 tasks: worker 4 repeats the first task.)
    assert_eq!(st, ["success", "failed", "skipped", "success"], "{r:#}");
    let c = &r["results"][2];
    assert_eq!(
        c["reason"],
        "dependency b did not succeed (#2: failed: exit code 1: asked to fail)"
    );
    assert!(c["worktree_path"].is_null() && c["commit"].is_null(), "{c}");
    assert_eq!(r["totals"]["skipped"], 1);
    // The plan records the chain and its waves.
    let plan = &r["plan"]["workers"];
    assert_eq!(plan[1]["depends_on"], serde_json::json!([1, 4]));
    assert_eq!(plan[2]["depends_on"], serde_json::json!([2]));
    assert_eq!(plan[2]["wave"], 2);
    // No branch for the skipped worker.
    assert!(!t.branches().iter().any(|b| b.ends_with("w3-write-c")));
    // The summary lists it with its reason.
    let run_id = r["run_id"].as_str().unwrap();
    let summary = std::fs::read_to_string(t.run_dir(run_id).join("summary.md")).unwrap();
    assert!(summary.contains("1 skipped"), "{summary}");
    assert!(
        summary.contains("skipped: dependency b did not succeed"),
        "{summary}"
    );
}

#[test]
fn a_diamond_runs_the_middle_pair_in_parallel_and_merges_them_for_the_last() {
    let t = TestEnv::new();
    let trace = t.shared().join("trace");
    let cfg = config(
        &t,
        &[
            "--sleep",
            "1",
            "--trace",
            trace.to_str().unwrap(),
            "--write",
            "out-{worker_id}.txt",
        ],
        "  - {id: top, prompt: top}\n  - {id: left, prompt: left, depends_on: [top]}\n  - {id: right, prompt: right, depends_on: [top]}\n  - {id: bottom, prompt: bottom, depends_on: [left, right]}\n",
    );
    let (code, r) = run(&t, &cfg);
    assert_eq!(code, Some(0), "{r:#}");
    let text = std::fs::read_to_string(&trace).unwrap();
    // (kind, worker, time) per line.
    let ev: Vec<(String, String, u128)> = text
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p[0].to_owned(), p[1].to_owned(), p[2].parse().unwrap())
        })
        .collect();
    let at = |kind: &str, id: &str| {
        ev.iter()
            .find(|(k, i, _)| k == kind && i == id)
            .unwrap_or_else(|| panic!("no {kind} of worker {id} in\n{text}"))
            .2
    };
    // The middle pair overlapped; each started after the top ended; the bottom
    // started after both ended.
    assert!(
        at("start", "2") < at("end", "3") && at("start", "3") < at("end", "2"),
        "{text}"
    );
    assert!(
        at("end", "1") <= at("start", "2").min(at("start", "3")),
        "{text}"
    );
    assert!(
        at("end", "2").max(at("end", "3")) <= at("start", "4"),
        "{text}"
    );
    // The bottom's branch holds everyone's change; its own diff is only its file.
    let bottom = &r["results"][3];
    assert_eq!(bottom["files_modified"], serde_json::json!(["out-4.txt"]));
    let commit = bottom["commit"].as_str().unwrap();
    let tree = t.git(&["ls-tree", "--name-only", commit]);
    for f in ["out-1.txt", "out-2.txt", "out-3.txt", "out-4.txt"] {
        assert!(tree.lines().any(|l| l == f), "{f} missing from {tree}");
    }
}

#[test]
fn cycles_and_unknown_ids_are_config_errors_naming_the_ids() {
    let t = TestEnv::new();
    // `fanout plan` with these tasks: a usage error; its message.
    let plan_error = |tasks: &str| {
        let cfg = config(&t, &[], tasks);
        let out = t
            .fanout(&["--config", cfg.to_str().unwrap(), "plan"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = plan_error(
        "  - {id: a, prompt: a, depends_on: [c]}\n  - {id: b, prompt: b, depends_on: [a]}\n  - {id: c, prompt: c, depends_on: [b]}\n",
    );
    assert!(
        err.contains("tasks: dependency cycle a → c → b → a"),
        "{err}"
    );
    let err = plan_error("  - {id: a, prompt: a, depends_on: [nope]}\n");
    assert!(
        err.contains("tasks[0].depends_on: no task has id \"nope\" (ids: a)"),
        "{err}"
    );
    assert!(t.runs().is_empty());
}

#[test]
fn matrix_mode_runs_the_plan_in_waves_and_dependents_start_from_imported_branches() {
    let t = TestEnv::new();
    let remote = t.bare_origin();
    let cfg = config(
        &t,
        &["--fail-on", "FAILME", "--write", "out-{worker_id}.txt"],
        "  - {id: a, prompt: write a}\n  - {id: b, prompt: write b, depends_on: [a]}\n  - {id: f, prompt: FAILME f}\n  - {id: g, prompt: write g, depends_on: [f]}\n  - {id: h, prompt: FAILME h, depends_on: [a]}\n",
    );
    let cfg = cfg.to_str().unwrap();
    let plan = t.root().join("plan.json");
    let gh_out = t.root().join("gh-output");
    std::fs::write(&gh_out, "").unwrap();
    succeeded(
        t.fanout(&[
            "--config",
            cfg,
            "plan",
            "--plan-file",
            plan.to_str().unwrap(),
            "--github-output",
        ])
        .env("GITHUB_OUTPUT", &gh_out),
    );
    // Waves, not size chunks: chunk 1 holds a and f, chunk 2 their dependents.
    let outputs = std::fs::read_to_string(&gh_out).unwrap();
    let ids = |name: &str| -> Vec<u64> {
        let line = outputs
            .lines()
            .find(|l| l.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {outputs}"));
        let v: serde_json::Value = serde_json::from_str(&line[name.len() + 1..]).unwrap();
        v["include"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect()
    };
    assert!(outputs.contains("chunks=2\n"), "{outputs}");
    assert_eq!(ids("matrix-1"), [1, 3]);
    assert_eq!(ids("matrix-2"), [2, 4, 5]);

    // Each job: a fresh clone, as a runner's checkout would be.
    let results = t.root().join("results");
    let job = |id: u32, deps: bool| {
        let dir = t.root().join(format!("job-{id}"));
        t.git_in(
            t.root(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        let id_s = id.to_string();
        let mut args = vec![
            "--config",
            cfg,
            "worker",
            "--plan",
            plan.to_str().unwrap(),
            "--id",
            &id_s,
            "--out",
            results.to_str().unwrap(),
            "-q",
        ];
        if deps {
            args.extend(["--deps-from", results.to_str().unwrap()]);
        }
        t.command(FANOUT, &dir).args(&args).output().unwrap()
    };
    for id in [1, 3] {
        job(id, false);
    }
    // A dependent without the earlier results is told what it needs.
    let out = job(2, false);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --deps-from DIR"));
    std::fs::remove_dir_all(t.root().join("job-2")).unwrap();
    for id in [2, 4, 5] {
        job(id, true);
    }
    let read = |id: u32| -> serde_json::Value {
        let p = results.join(format!("fanout-result-{id}/result.json"));
        serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
    };
    let b = &read(2)["result"];
    assert_eq!(b["status"], "success", "{b}");
    assert_eq!(b["files_modified"], serde_json::json!(["out-2.txt"]));
    let g = &read(4)["result"];
    assert_eq!(g["status"], "skipped", "{g}");
    assert!(
        g["reason"]
            .as_str()
            .unwrap()
            .starts_with("dependency f did not succeed (#3: failed"),
        "{g}"
    );

    // Aggregate in another clone: every worker once; b's branch holds a's change too.
    let agg = t.root().join("agg");
    t.git_in(
        t.root(),
        &[
            "clone",
            "-q",
            remote.to_str().unwrap(),
            agg.to_str().unwrap(),
        ],
    );
    let out = t
        .command(FANOUT, &agg)
        .args([
            "--config",
            cfg,
            "aggregate",
            "--json",
            "--plan",
            plan.to_str().unwrap(),
            "--from",
            results.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let st: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        st,
        ["success", "success", "failed", "skipped", "failed"],
        "{r:#}"
    );
    // A dependent that failed changed nothing of its own, as its job said: its
    // dependency's files are not its.
    assert_eq!(read(5)["result"]["files_modified"], serde_json::json!([]));
    assert_eq!(
        r["results"][4]["files_modified"],
        serde_json::json!([]),
        "{r:#}"
    );
    let branch = r["results"][1]["branch"].as_str().unwrap();
    let tree = t.git_in(&agg, &["ls-tree", "--name-only", branch]);
    assert!(
        tree.lines().any(|l| l == "out-1.txt") && tree.lines().any(|l| l == "out-2.txt"),
        "{tree}"
    );
}

/// Agent `a` names a submodule in `.gitmodules` (an address of its choosing) with a
/// gitlink for it; `b` starts from `a`'s branch. fanout fetches submodules with its own
/// git, outside the sandbox, so it takes them only as the plan's base names them: `b`'s
/// setup fails saying why, and nothing is fetched from that address.
#[test]
fn a_dependent_fetches_no_submodule_an_agent_named() {
    let t = TestEnv::new();
    let leak = t.root().join("leak.git");
    let src = t.root().join("leak-src");
    std::fs::create_dir_all(&src).unwrap();
    t.git_in(&src, &["init", "-q", "-b", "main"]);
    std::fs::write(src.join("secret.txt"), "PRIVATE\n").unwrap();
    t.git_in(&src, &["add", "secret.txt"]);
    t.git_in(&src, &["commit", "-qm", "private"]);
    let sha = t.git_in(&src, &["rev-parse", "HEAD"]).trim().to_owned();
    t.git_in(
        t.root(),
        &[
            "clone",
            "-q",
            "--bare",
            src.to_str().unwrap(),
            leak.to_str().unwrap(),
        ],
    );
    let script = format!(
        r#"if [ "$1" = plant ]; then
  printf '[submodule "x"]\n\tpath = x\n\turl = {}\n' > .gitmodules
  git add .gitmodules && git update-index --add --cacheinfo 160000,{sha},x && git commit -qm plant || exit 9
else
  echo followed > b.txt
fi"#,
        leak.display()
    );
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\n  workers: 2\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, {}, sh, '{{task}}']\ntasks:\n  - {{id: a, prompt: plant}}\n  - {{id: b, prompt: follow, depends_on: [a]}}\n",
        t.worktrees.display(),
        serde_json::to_string(&script).unwrap()
    ));
    let (_, r) = run(&t, &cfg);
    let b = &r["results"][1];
    assert_eq!(b["status"], "failed", "{r:#}");
    assert!(
        b["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(".gitmodules differs from the base's"),
        "{b}"
    );
    if let Some(wt) = b["worktree_path"].as_str() {
        assert!(!std::path::Path::new(wt).join("x/secret.txt").exists());
    }
}
