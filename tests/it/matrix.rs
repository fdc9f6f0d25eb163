//! Matrix mode without a runner: `fanout plan` outputs, `fanout worker` in separate
//! clones (as separate jobs would), and `fanout aggregate` verifying and importing
//! their bundles.

use crate::common;
use crate::fake_github;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

/// Parse a `$GITHUB_OUTPUT` file (both `k=v` and `k<<DELIM` forms).
fn outputs(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((k, delim)) = line.split_once("<<") {
            let mut v = Vec::new();
            for l in lines.by_ref() {
                if l == delim {
                    break;
                }
                v.push(l);
            }
            out.insert(k.to_owned(), v.join("\n"));
        } else if let Some((k, v)) = line.split_once('=') {
            out.insert(k.to_owned(), v.to_owned());
        }
    }
    out
}

struct Matrix {
    t: TestEnv,
    cfg: PathBuf,
    plan: PathBuf,
    results: PathBuf,
}

impl Matrix {
    fn new(tasks: &[&str]) -> Matrix {
        let t = TestEnv::new();
        t.bare_origin();
        let cfg = t.fake_config(&[], "");
        let plan = t.root().join("plan.json");
        let results = t.root().join("results");
        let workers = tasks.len().to_string();
        let mut args = vec![
            "--config",
            cfg.to_str().unwrap(),
            "plan",
            "--plan-file",
            plan.to_str().unwrap(),
            "-w",
            &workers,
        ];
        for task in tasks {
            args.extend(["-t", task]);
        }
        t.run_ok(&args);
        Matrix {
            t,
            cfg,
            plan,
            results,
        }
    }

    /// A fresh clone, as a new runner's checkout would be.
    fn clone(&self, name: &str) -> PathBuf {
        let dir = self.t.root().join(name);
        self.t.git_in(
            self.t.root(),
            &[
                "clone",
                "-q",
                self.t.root().join("remote.git").to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        dir
    }

    fn worker(&self, id: u32) -> std::process::Output {
        let job = self.clone(&format!("job-{id}"));
        let id = id.to_string();
        self.t
            .command(FANOUT, &job)
            .args(["--config", self.cfg.to_str().unwrap(), "worker", "--plan"])
            .arg(&self.plan)
            .args(["--id", &id, "--out"])
            .arg(&self.results)
            .output()
            .unwrap()
    }

    fn aggregate(&self, dir: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
        let out = self
            .t
            .command(FANOUT, dir)
            .args(["aggregate", "--json", "--plan"])
            .arg(&self.plan)
            .arg("--from")
            .arg(&self.results)
            .args(extra)
            .env("GITHUB_TOKEN", "agg-token")
            .output()
            .unwrap();
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    }
}

#[test]
fn plan_outputs_split_at_256_and_refuse_more_than_four_chunks() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let out_file = t.root().join("gh-output");
    let plan_file = t.root().join("plan.json");
    let mut args: Vec<String> = [
        "--config",
        cfg.to_str().unwrap(),
        "plan",
        "--plan-file",
        plan_file.to_str().unwrap(),
        "-w",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..300 {
        args.push("-t".into());
        args.push(format!("task {i}"));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = t
        .fanout(&argv)
        .env("GITHUB_OUTPUT", &out_file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = outputs(&out_file);
    assert_eq!(o["count"], "300");
    assert_eq!(o["chunks"], "2");
    assert_eq!(o["count-1"], "256");
    assert_eq!(o["count-2"], "44");
    assert_eq!(o["count-3"], "0");
    assert_eq!(o["count-4"], "0");
    let m1: serde_json::Value = serde_json::from_str(&o["matrix-1"]).unwrap();
    let m2: serde_json::Value = serde_json::from_str(&o["matrix-2"]).unwrap();
    assert_eq!(m1["include"].as_array().unwrap().len(), 256);
    assert_eq!(m1["include"][0]["id"], 1);
    assert_eq!(m2["include"][0]["id"], 257);
    assert_eq!(m2["include"][43]["id"], 300);
    assert_eq!(o["matrix"], o["matrix-1"]);
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_file).unwrap()).unwrap();
    assert_eq!(plan["workers"].as_array().unwrap().len(), 300);
    assert_eq!(plan["concurrency"], 10);

    // more than 4 × 256 workers cannot be a matrix: refused before anything is written
    let mut args: Vec<String> = ["--config", cfg.to_str().unwrap(), "plan"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for i in 0..1025 {
        args.push("-t".into());
        args.push(format!("t{i}"));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let big_out = t.root().join("gh-output-big");
    let out = t
        .fanout(&argv)
        .env("GITHUB_OUTPUT", &big_out)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1024"));
    assert!(!big_out.exists());
}

/// A wave larger than one matrix is split across matrices: 300 independent tasks and
/// one that depends on the first are accepted as three matrices of at most 256 jobs
/// (256 and 44 for the first wave, then the dependent), each worker once, the
/// dependent after its dependency.
#[test]
fn a_300_task_plan_with_a_dependent_is_cut_into_valid_matrices() {
    let t = TestEnv::new();
    let mut tasks = String::from("tasks:\n");
    for i in 0..300 {
        tasks.push_str(&format!("  - {{id: t{i}, prompt: task {i}}}\n"));
    }
    tasks.push_str("  - {id: last, prompt: after t0, depends_on: [t0]}\n");
    let cfg = t.fake_config(&[], &tasks);
    let out_file = t.root().join("gh-output");
    let plan_file = t.root().join("plan.json");
    succeeded(
        t.fanout(&["--config", cfg.to_str().unwrap(), "plan", "--plan-file"])
            .arg(&plan_file)
            .arg("--github-output")
            .env("GITHUB_OUTPUT", &out_file),
    );
    let o = outputs(&out_file);
    assert_eq!((o["count"].as_str(), o["chunks"].as_str()), ("301", "3"));
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan_file).unwrap()).unwrap();
    let mut chunk_of = BTreeMap::new();
    for n in 1..=4 {
        let m: serde_json::Value = serde_json::from_str(&o[&format!("matrix-{n}")]).unwrap();
        let include = m["include"].as_array().unwrap();
        assert!(include.len() <= 256, "matrix-{n}: {}", include.len());
        assert_eq!(o[&format!("count-{n}")], include.len().to_string());
        for e in include {
            assert!(e["model"].is_string() && e["agent"].is_string() && e["task"].is_string());
            let id = e["id"].as_u64().unwrap();
            assert!(chunk_of.insert(id, n).is_none(), "worker {id} twice");
        }
    }
    assert_eq!(chunk_of.len(), 301, "every worker once");
    for w in plan["workers"].as_array().unwrap() {
        let id = w["id"].as_u64().unwrap();
        for dep in w["depends_on"].as_array().into_iter().flatten() {
            assert!(
                chunk_of[&dep.as_u64().unwrap()] < chunk_of[&id],
                "worker {id} runs in a chunk after its dependency {dep}"
            );
        }
    }
    assert_eq!(
        (
            o["count-1"].as_str(),
            o["count-2"].as_str(),
            o["count-3"].as_str()
        ),
        ("256", "44", "1")
    );
}

#[test]
fn an_empty_plan_has_count_zero() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let out_file = t.root().join("gh-output");
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "plan",
            "--allow-empty",
            "--json",
        ])
        .env("GITHUB_OUTPUT", &out_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let o = outputs(&out_file);
    assert_eq!(o["count"], "0");
    assert_eq!(o["chunks"], "0");
    assert_eq!(o["matrix"], r#"{"include":[]}"#);
    // without --allow-empty no task stays an error
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "plan"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn workers_in_separate_clones_then_aggregate_imports_and_reports_every_worker() {
    let m = Matrix::new(&["one", "two", "three"]);
    for id in [1, 2] {
        let out = m.worker(id);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = m.results.join(format!("fanout-result-{id}"));
        assert!(dir.join("result.json").is_file());
        assert!(dir.join("branch.bundle").is_file());
        assert!(dir.join("log.txt").is_file());
    }
    // worker 3's job died without a result
    let agg = m.clone("aggregate");
    let summary = m.t.root().join("summary.md");
    let out_file = m.t.root().join("agg-output");
    let out =
        m.t.command(FANOUT, &agg)
            .args(["aggregate", "--json", "--plan"])
            .arg(&m.plan)
            .arg("--from")
            .arg(&m.results)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_OUTPUT", &out_file)
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for r in &results[..2] {
        assert_eq!(r["status"], "success", "{r}");
        let id = r["worker_id"].as_u64().unwrap();
        assert_eq!(
            r["files_modified"],
            serde_json::json!([format!("fanout-demo/w{id}.md")])
        );
        // the branch is imported, at the reported commit
        let branch = r["branch"].as_str().unwrap();
        let tip = m.t.git_in(&agg, &["rev-parse", branch]);
        assert_eq!(tip.trim(), r["commit"].as_str().unwrap());
    }
    assert_eq!(results[2]["status"], "failed");
    assert!(
        results[2]["reason"]
            .as_str()
            .unwrap()
            .starts_with("the worker's job left no result")
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("**2 of 3 workers succeeded**"), "{md}");
    assert!(md.contains("left no result"), "{md}");
    let o = outputs(&out_file);
    let res: serde_json::Value = serde_json::from_str(&o["results"]).unwrap();
    assert_eq!(res["totals"]["success"], 2);
    assert!(o["summary"].ends_with("summary.md"));
}

#[test]
fn tampered_bundles_are_refused_with_a_clear_message() {
    let m = Matrix::new(&["one", "two"]);
    for id in [1, 2] {
        assert_eq!(m.worker(id).status.code(), Some(0));
    }
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&m.plan).unwrap()).unwrap();
    let b1 = plan["workers"][0]["branch"].as_str().unwrap().to_owned();
    let b2 = plan["workers"][1]["branch"].as_str().unwrap().to_owned();
    // worker 1's bundle gains an extra ref
    let job1 = m.t.root().join("job-1");
    let bundle1 = m.results.join("fanout-result-1/branch.bundle");
    let base = plan["base"]["commit"].as_str().unwrap();
    m.t.git_in(&job1, &["checkout", "-q", "-b", "extra", &b1]);
    std::fs::write(job1.join("sneaky.txt"), "x").unwrap();
    m.t.git_in(&job1, &["add", "sneaky.txt"]);
    m.t.git_in(&job1, &["commit", "-q", "-m", "sneaky"]);
    m.t.git_in(
        &job1,
        &[
            "bundle",
            "create",
            "-q",
            bundle1.to_str().unwrap(),
            &format!("refs/heads/{b1}"),
            "refs/heads/extra",
            &format!("^{base}"),
        ],
    );
    // worker 2's bundle is based on another commit
    let job2 = m.t.root().join("job-2");
    m.t.git_in(&job2, &["checkout", "-q", "-b", "tamper", &b2]);
    std::fs::write(job2.join("extra.txt"), "x").unwrap();
    m.t.git_in(&job2, &["add", "extra.txt"]);
    m.t.git_in(&job2, &["commit", "-q", "-m", "more"]);
    m.t.git_in(
        &job2,
        &["update-ref", &format!("refs/heads/{b2}"), "tamper"],
    );
    let bundle2 = m.results.join("fanout-result-2/branch.bundle");
    m.t.git_in(
        &job2,
        &[
            "bundle",
            "create",
            "-q",
            bundle2.to_str().unwrap(),
            &format!("refs/heads/{b2}"),
            &format!("^{b2}~1"),
        ],
    );

    let agg = m.clone("aggregate");
    let (code, report) = m.aggregate(&agg, &[]);
    assert_eq!(code, Some(3), "{report}");
    let r1 = report["results"][0]["reason"].as_str().unwrap();
    assert!(
        r1.starts_with(&format!(
            "bundle refused: the bundle must hold only refs/heads/{b1}, it holds"
        )),
        "{r1}"
    );
    let r2 = report["results"][1]["reason"].as_str().unwrap();
    assert!(
        r2.starts_with("bundle refused: the bundle is not based on the plan's base commit"),
        "{r2}"
    );
    // nothing was imported
    let branches = m.t.git_in(&agg, &["branch", "--list", "fanout/*"]);
    assert_eq!(branches.trim(), "");
}

#[test]
fn aggregate_publishes_one_pr_per_successful_worker() {
    let m = Matrix::new(&["one", "two"]);
    for id in [1, 2] {
        assert_eq!(m.worker(id).status.code(), Some(0));
    }
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("agg-token");
    let url = gh.url();
    let agg = m.clone("aggregate");
    let (code, report) = m.aggregate(
        &agg,
        &[
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ],
    );
    assert_eq!(code, Some(0), "{report}");
    let ops: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["publish"]["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["created", "created"]);
    assert_eq!(gh.pulls().len(), 2);
    // the remote has the workers' commits
    for r in report["results"].as_array().unwrap() {
        let branch = r["branch"].as_str().unwrap();
        let remote_tip = m.t.git_in(
            m.t.root(),
            &["--git-dir", "remote.git", "rev-parse", branch],
        );
        assert_eq!(remote_tip.trim(), r["commit"].as_str().unwrap());
    }
    gh.assert_no_violations();
}

/// `aggregate --publish` against an API nothing answers on: publishing failed, exit 4
/// (not 3: the workers succeeded), and the report still says what each worker did.
#[test]
fn aggregate_publish_exits_4_when_github_cannot_be_reached() {
    let m = Matrix::new(&["one"]);
    assert_eq!(m.worker(1).status.code(), Some(0));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let agg = m.clone("aggregate");
    let (code, report) = m.aggregate(
        &agg,
        &[
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &api,
            "--max-attempts",
            "2",
            "--server-error-backoff",
            "0.05",
        ],
    );
    assert_eq!(code, Some(4), "{report}");
    assert_eq!(report["results"][0]["status"], "success");
    assert_eq!(report["results"][0]["publish"]["operation"], "failed");
}

#[test]
fn worker_refuses_a_checkout_without_the_base_commit() {
    let m = Matrix::new(&["one"]);
    // an unrelated repository
    let other = m.t.root().join("other");
    std::fs::create_dir_all(&other).unwrap();
    m.t.git_in(&other, &["init", "-q", "-b", "main"]);
    std::fs::write(other.join("f"), "x").unwrap();
    m.t.git_in(&other, &["add", "f"]);
    m.t.git_in(&other, &["commit", "-q", "-m", "x"]);
    let out =
        m.t.command(FANOUT, &other)
            .args(["worker", "--plan"])
            .arg(&m.plan)
            .args(["--id", "1", "--out"])
            .arg(&m.results)
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not in this checkout"));
    let out = m.worker(7);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--id 7: the plan has workers 1 to 1"));
}

/// `fanout aggregate` run again in the same checkout (a re-run job): branches already
/// at their bundle's commit are accepted; a branch that moved elsewhere is not replaced.
#[test]
fn aggregate_again_accepts_branches_already_at_their_bundles_commit() {
    let m = Matrix::new(&["one", "two"]);
    for id in [1, 2] {
        assert_eq!(m.worker(id).status.code(), Some(0));
    }
    let agg = m.clone("aggregate");
    let (code, first) = m.aggregate(&agg, &[]);
    assert_eq!(code, Some(0), "{first}");
    let (code, again) = m.aggregate(&agg, &[]);
    assert_eq!(code, Some(0), "{again}");
    for (a, b) in first["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["results"].as_array().unwrap())
    {
        assert_eq!(b["status"], "success", "{b}");
        assert_eq!(a["commit"], b["commit"]);
    }
    // worker 2's branch moved (someone committed on it): not replaced
    let branch = again["results"][1]["branch"].as_str().unwrap().to_owned();
    m.t.git_in(&agg, &["branch", "-f", &branch, "main"]);
    let (code, third) = m.aggregate(&agg, &[]);
    assert_eq!(code, Some(1), "{third}");
    assert_eq!(third["results"][0]["status"], "success", "{third}");
    assert!(
        third["results"][1]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("already exists in this repository; not replaced"),
        "{third}"
    );
}

/// The plan job's `plan-sha256` output is the digest of the plan file it wrote; with
/// it, `worker` and `aggregate` refuse a plan file that was replaced (a worker job can
/// upload artifacts, so the `fanout-plan` artifact is not proof on its own).
#[test]
fn a_replaced_plan_file_is_refused_by_its_digest() {
    let m = Matrix::new(&["one", "two"]);
    let out_file = m.t.root().join("plan-output");
    let plan2 = m.t.root().join("plan2.json");
    let out =
        m.t.command(FANOUT, &m.t.repo)
            .args(["--config", m.cfg.to_str().unwrap(), "plan", "-w", "2"])
            .args(["-t", "one", "-t", "two", "--plan-file"])
            .arg(&plan2)
            .env("GITHUB_OUTPUT", &out_file)
            .output()
            .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sha = outputs(&out_file)["plan-sha256"].clone();
    let bytes = std::fs::read(&plan2).unwrap();
    let want: String = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert_eq!(sha, want);

    // the worker runs with the right digest
    let job = m.clone("job-1");
    let worker = |plan: &Path, sha: &str| {
        m.t.command(FANOUT, &job)
            .args(["--config", m.cfg.to_str().unwrap(), "worker", "--plan"])
            .arg(plan)
            .args(["--plan-sha256", sha, "--id", "1", "--out"])
            .arg(&m.results)
            .output()
            .unwrap()
    };
    let out = worker(&plan2, &sha);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // a plan rewritten after the plan job (one branch repointed) is refused, by
    // worker and aggregate alike, before anything is done
    let forged = String::from_utf8(bytes).unwrap().replacen(
        "\"branch\": \"fanout/",
        "\"branch\": \"main-",
        1,
    );
    std::fs::write(&plan2, forged).unwrap();
    let out = worker(&plan2, &sha);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--plan-sha256") && err.contains("refusing"),
        "{err}"
    );
    let agg = m.clone("aggregate");
    let out =
        m.t.command(FANOUT, &agg)
            .args(["aggregate", "--plan"])
            .arg(&plan2)
            .args(["--plan-sha256", &sha, "--from"])
            .arg(&m.results)
            .output()
            .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not the one the plan job wrote"), "{err}");
    assert_eq!(m.t.git_in(&agg, &["for-each-ref", "refs/heads/fanout"]), "");
}

#[test]
fn aggregate_says_it_does_not_read_a_config_the_plan_overrides() {
    let m = Matrix::new(&["one"]);
    assert!(m.worker(1).status.success());
    let agg = m.clone("aggregate");
    let out =
        m.t.command(FANOUT, &agg)
            .args(["--config", m.cfg.to_str().unwrap(), "aggregate", "--plan"])
            .arg(&m.plan)
            .arg("--from")
            .arg(&m.results)
            .output()
            .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not read: the plan carries the settings"),
        "{stderr}"
    );
}
