//! The generated matrix workflow, end to end, under `act` (host mode: no
//! containers; see `tests/support/act.rs`): `fanout init --kind matrix` writes the
//! workflow, act runs plan → one job per worker (in parallel) → aggregate, with the
//! composite action (`action.yml` + `dist/`) copied into the repository, the bundled
//! fake agent, a local bare remote, and the loopback fake GitHub API.
//!
//! Two substitutions are made in the generated workflow and the action, and only
//! these:
//! - remote actions (`actions/upload-artifact`, `actions/download-artifact`,
//!   `actions/cache/restore`, `actions/cache/save`) cannot be fetched offline; they
//!   are replaced by **local stand-ins** (`.github/stand-ins/…`, written by
//!   `tests/support/act.rs`) with the same inputs and layout;
//! - the action reference is `./.fanout-action` (via `fanout init --action`).
//!
//! Most tests hand the action the binary under test (`FANOUT_BINARY`); the build
//! test gives it no release asset and a stand-in cargo instead, and counts builds.
//! act is installed on first use (`.ci/install-act.sh`, into the peers cache); when
//! it cannot be, the tests fail, telling how to get it; set `FANOUT_SKIP_ACT=1` to
//! skip them explicitly.

use crate::act_support;
use crate::common;
use crate::fake_github;

use std::path::{Path, PathBuf};
use std::time::Duration;

use act_support::{ActLog, copy_dir};
use common::*;
use serde_json::Value;

/// A user's repository set up for the matrix workflow, with a bare remote.
struct Fixture {
    t: TestEnv,
    act: PathBuf,
    remote: PathBuf,
    base: String,
    /// A stand-in cargo the action builds with (no release asset); `None`: the
    /// action is handed the binary under test.
    cargo: Option<PathBuf>,
}

impl Fixture {
    fn new() -> Option<Fixture> {
        Self::with_config("")
    }

    /// [`Fixture::new`] with `extra` appended to the repository's fanout.yml.
    fn with_config(extra: &str) -> Option<Fixture> {
        Self::setup(extra, false)
    }

    /// The `local` workflow (`mode: run`, publishing), whose agent is `agent`.
    fn local(agent: &str) -> Option<Fixture> {
        Self::setup_kind(
            "local",
            &format!(
                "parallel_runs:\n  agent: probe\nagents:\n  probe:\n    command: [sh, '{agent}']\n"
            ),
            false,
        )
    }

    /// The action as on a branch without release assets (dist/manifest.json's URLs
    /// are null until a release): it builds fanout from its own source, with a
    /// stand-in cargo that logs each build to `<root>/cargo-builds`.
    fn building() -> Option<Fixture> {
        Self::setup("", true)
    }

    fn setup(extra: &str, build: bool) -> Option<Fixture> {
        Self::setup_kind(
            "matrix",
            &format!(
                "parallel_runs:\n  agent: fake\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, --fail-on, FAILME, --write, 'out-{{worker_id}}.txt', '{{task}}']\n{extra}"
            ),
            build,
        )
    }

    /// `fanout init --kind KIND`'s workflow, with `config` as the repository's fanout.yml.
    fn setup_kind(kind: &str, config: &str, build: bool) -> Option<Fixture> {
        Self::setup_in(kind, |_| config.to_owned(), build)
    }

    /// [`Fixture::setup_kind`] with the config made from the test's root directory
    /// (for paths under it).
    fn setup_in(kind: &str, config: impl FnOnce(&Path) -> String, build: bool) -> Option<Fixture> {
        let act = act_support::binary()?;
        let t = TestEnv::new();
        let root = t.root().to_path_buf();
        let config = config(&root);
        let config = config.as_str();
        let remote = root.join("remote.git");
        t.git_in(
            &root,
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        t.git(&["remote", "add", "origin", remote.to_str().unwrap()]);

        // The repository a user would have: a config with the fake agent, the workflow
        // written by `fanout init`, the action (a copy of this crate's) and the stand-ins.
        t.write("fanout.yml", config);
        copy_action(&t.repo.join(".fanout-action"), build);
        act_support::install(&t.repo);
        for check in [false, true] {
            let mut args = vec!["init", "--kind", kind, "--action", "./.fanout-action"];
            args.extend(["--output", ".github/workflows/fanout.yml"]);
            if check {
                args.push("--check");
            }
            t.run_ok(&args);
        }
        let wf_path = t.repo.join(".github/workflows/fanout.yml");
        let generated = std::fs::read_to_string(&wf_path).unwrap();
        let substituted = act_support::substitute(&generated);
        assert_ne!(
            generated, substituted,
            "the template uses the artifact actions"
        );
        std::fs::write(&wf_path, substituted).unwrap();
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "add fanout workflow"]);
        t.git(&["push", "-q", "origin", "main"]);
        let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
        let cargo = build.then(|| {
            act_support::stand_in_cargo(&root.join("toolchain"), &root.join("cargo-builds"), FANOUT)
        });
        Some(Fixture {
            t,
            act,
            remote,
            base,
            cargo,
        })
    }

    /// Run the workflow under act with a workflow_dispatch event of `inputs`.
    fn act(
        &self,
        gh: &fake_github::FakeGitHub,
        inputs: Value,
    ) -> (std::process::Output, ActLog, PathBuf) {
        let t = &self.t;
        let root = t.root().to_path_buf();
        // Each run its own artifacts, as on GitHub; the cache outlives runs.
        let artifacts = (1..)
            .map(|n| root.join("artifacts").join(n.to_string()))
            .find(|p| !p.exists())
            .unwrap();
        std::fs::create_dir_all(&artifacts).unwrap();
        let event = root.join("event.json");
        std::fs::write(&event, serde_json::json!({ "inputs": inputs }).to_string()).unwrap();
        let tools = root.join("host-tools");
        act_support::stand_in_host_tools(&tools, &root.join("sudo.log"));
        let path = format!(
            "{}:{}",
            tools.display(),
            std::env::var("PATH").unwrap_or_default()
        );

        let out = t
            .command(self.act.to_str().unwrap(), &t.repo)
            .env("PATH", path)
            .env("ACT_DISABLE_VERSION_CHECK", "1")
            .args([
                "workflow_dispatch",
                "--json",
                "-W",
                ".github/workflows/fanout.yml",
            ])
            .arg("-e")
            .arg(&event)
            .args(["-P", "ubuntu-latest=-self-hosted", "--no-cache-server"])
            .arg("--action-cache-path")
            .arg(root.join("act-cache"))
            .args(["--env", "GITHUB_REPOSITORY=octo/demo"])
            .arg("--env")
            .arg(format!("GITHUB_API_URL={}", gh.url()))
            .arg("--env")
            .arg(match &self.cargo {
                Some(cargo) => format!("FANOUT_CARGO={}", cargo.display()),
                None => format!("FANOUT_BINARY={FANOUT}"),
            })
            .arg("--env")
            .arg(format!("FANOUT_TEST_ARTIFACTS={}", artifacts.display()))
            .arg("--env")
            .arg(format!(
                "FANOUT_TEST_CACHE={}",
                root.join("gha-cache").display()
            ))
            .args(["-s", "GITHUB_TOKEN=act-token"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let log = ActLog::parse(&out.stdout);
        (out, log, artifacts)
    }
}

/// The action as its users get it: action.yml (remote actions replaced by the
/// stand-ins) and dist/; with `source`, what a build reads too (Cargo.toml,
/// Cargo.lock, src/, templates/).
fn copy_action(dest: &Path, source: bool) {
    let project = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dest).unwrap();
    let action = std::fs::read_to_string(project.join("action.yml")).unwrap();
    std::fs::write(dest.join("action.yml"), act_support::substitute(&action)).unwrap();
    copy_dir(&project.join("dist"), &dest.join("dist"));
    if source {
        for f in ["Cargo.toml", "Cargo.lock"] {
            std::fs::copy(project.join(f), dest.join(f)).unwrap();
        }
        for d in ["src", "templates"] {
            copy_dir(&project.join(d), &dest.join(d));
        }
    }
}

#[test]
fn matrix_workflow_runs_under_act_plan_workers_aggregate_publish() {
    let Some(f) = Fixture::new() else { return };
    let (t, remote, base) = (&f.t, &f.remote, &f.base);
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, artifacts) = f.act(
        &gh,
        serde_json::json!({
            "tasks": "alpha task\n  beta task  \n\nFAILME gamma task\n",
            "models": "",
            "publish": "true"
        }),
    );
    let fail = |what: &str| -> ! {
        panic!(
            "{what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        )
    };

    // Plan: three tasks (trimmed, the empty line dropped), one chunk.
    if log.output("plan", "count") != Some("3") {
        fail("plan job: count output is not 3");
    }
    assert_eq!(log.output("plan", "chunks"), Some("1"));
    assert_eq!(log.output("plan", "count-2"), Some("0"));
    let matrix: Value = serde_json::from_str(log.output("plan", "matrix-1").unwrap()).unwrap();
    let tasks: Vec<&str> = matrix["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["alpha task", "beta task", "FAILME gamma task"]);
    // The plan's digest went out as a job output and came back to every job that
    // reads the plan artifact (action.sh prints the command line it runs).
    let sha = log.output("plan", "plan-sha256").unwrap_or_default();
    assert_eq!(sha.len(), 64, "plan-sha256 output: {sha:?}");
    let checked = log.raw.matches(&format!("--plan-sha256 {sha}")).count();
    if checked < 4 {
        fail(&format!(
            "{checked} of 4 worker/aggregate jobs checked the plan's digest"
        ));
    }

    // Three worker jobs ran and uploaded their artifacts; the failed one too.
    for id in 1..=3 {
        let dir = artifacts.join(format!("fanout-result-{id}"));
        assert!(
            dir.join("result.json").is_file(),
            "no result artifact for worker {id}"
        );
    }

    // Aggregate: outputs and the job summary.
    let Some(results) = log.output("aggregate", "results") else {
        fail("aggregate job: no results output")
    };
    let results: Value = serde_json::from_str(results).unwrap();
    assert_eq!(results["totals"]["workers"], 3);
    assert_eq!(results["totals"]["success"], 2, "{results:#}");
    assert_eq!(results["totals"]["failed"], 1, "{results:#}");
    assert_eq!(log.output("aggregate", "count"), Some("3"));
    let prs: Value = serde_json::from_str(log.output("aggregate", "pull-requests").unwrap_or(""))
        .unwrap_or_else(|e| fail(&format!("aggregate job: pull-requests output: {e}")));
    let ops: Vec<(u64, &str)> = prs
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["worker_id"].as_u64().unwrap(),
                p["operation"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [(1, "created"), (2, "created"), (3, "skipped")],
        "{prs:#}"
    );

    let summary = log.summaries.get("aggregate").cloned().unwrap_or_default();
    let rows: Vec<&str> = summary
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| #") && !l.starts_with("| -"))
        .collect();
    assert!(
        rows.iter().filter(|r| r.contains("success")).count() >= 2
            && rows.iter().any(|r| r.contains("failed")),
        "job summary table:\n{summary}"
    );
    assert!(
        summary.contains("/pull/"),
        "no PR links in the summary:\n{summary}"
    );

    // One PR per successful worker, on branches that hold the workers' commits.
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:#?}");
    let mut heads: Vec<String> = pulls.iter().map(|p| p.head_ref.clone()).collect();
    heads.sort();
    let branches: Vec<String> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "success")
        .map(|r| r["branch"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(heads, branches);
    for (i, branch) in branches.iter().enumerate() {
        let id = i + 1;
        let files = t.git_in(
            remote,
            &["diff", "--name-only", base, &format!("refs/heads/{branch}")],
        );
        assert_eq!(files.trim(), format!("out-{id}.txt"), "{branch}");
    }
    let failed = &results["results"][2];
    assert_eq!(failed["status"], "failed");
    assert!(
        !t.git_in(
            remote,
            &["branch", "--list", failed["branch"].as_str().unwrap()]
        )
        .contains("w3"),
        "the failed worker's branch was pushed"
    );
    gh.assert_no_violations();

    // The failed worker makes the run red: act reports the failure.
    assert!(
        !out.status.success(),
        "act succeeded despite a failed worker"
    );
    // The full report was uploaded by the workflow's last step.
    assert!(artifacts.join("fanout-report/results.json").is_file());
}

#[test]
fn empty_plan_under_act_skips_the_worker_and_aggregate_jobs() {
    let Some(f) = Fixture::new() else { return };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, artifacts) = f.act(
        &gh,
        serde_json::json!({"tasks": "  \n\n", "models": "", "publish": "true"}),
    );
    assert!(
        out.status.success(),
        "act failed on an empty plan:\n{}\n{}",
        log.raw,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.output("plan", "count"), Some("0"), "{}", log.raw);
    assert_eq!(log.output("plan", "count-1"), Some("0"));
    // Nothing after the plan ran: no worker or aggregate step, no artifact but the plan.
    for job in ["work-1", "work-2", "work-3", "work-4", "aggregate"] {
        assert!(
            !log.raw
                .lines()
                .any(|l| l.contains(&format!("\"jobID\":\"{job}\"")) && l.contains("Run Main")),
            "job {job} ran:\n{}",
            log.raw
        );
    }
    let names: Vec<String> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".ids")
        .collect();
    assert_eq!(names, ["fanout-plan"]);
    assert!(gh.requests().is_empty());
}

#[test]
fn dependent_tasks_run_in_waves_under_act() {
    // Tasks from the config, b depending on a and on the findings task s: two chunks
    // run one after the other; b's job imports a's and s's branches from their
    // artifacts, starts from them, and gets s's findings in its prompt.
    let Some(f) = Fixture::with_config(
        "tasks:\n  - {id: a, prompt: write a}\n  - {id: b, prompt: 'write b after {findings.s}', depends_on: [a, s]}\n  - {id: s, prompt: survey, output: findings}\n",
    ) else {
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, _artifacts) = f.act(
        &gh,
        serde_json::json!({"tasks": "", "models": "", "publish": "true"}),
    );
    assert!(
        out.status.success(),
        "act failed:\n{}\n{}",
        log.raw,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.output("plan", "chunks"), Some("2"), "{}", log.raw);
    // (Workers 1: a and 2: s in wave 1; 3: b in wave 2.)
    assert_eq!(log.output("plan", "count-1"), Some("2"));
    assert_eq!(log.output("plan", "count-2"), Some("1"));
    let results: Value = serde_json::from_str(log.output("aggregate", "results").unwrap()).unwrap();
    assert_eq!(results["totals"]["success"], 3, "{results:#}");
    // s's findings (the fake agent's last lines of output) are in the aggregate's report.
    let found = results["results"][1]["findings"].as_str().unwrap();
    assert!(found.contains("fake-agent: worker 2"), "{results:#}");
    let b = results["results"][2]["branch"].as_str().unwrap();
    let tree = f.t.git_in(
        &f.remote,
        &["ls-tree", "--name-only", &format!("refs/heads/{b}")],
    );
    assert!(
        ["out-1.txt", "out-2.txt", "out-3.txt"]
            .iter()
            .all(|f| tree.lines().any(|l| l == *f)),
        "b's branch does not hold a's and s's changes: {tree}"
    );
    assert_eq!(
        results["results"][2]["files_modified"],
        serde_json::json!(["out-3.txt"])
    );
    // The fake agent wrote the prompt it was given into its file: s's findings in it.
    let written =
        f.t.git_in(&f.remote, &["show", &format!("refs/heads/{b}:out-3.txt")]);
    assert!(
        written.contains(&format!("Task: write b after {found}")),
        "{written}"
    );
    assert_eq!(gh.pulls().len(), 3);
    gh.assert_no_violations();
}

#[test]
fn workers_caps_the_matrix_jobs_running_at_once_under_act() {
    // `workers: 1` and three tasks: the plan job's `max-parallel` output is 1, every
    // `work-N` job has `strategy.max-parallel: ${{ fromJSON(needs.plan.outputs.max-parallel) }}`
    // (tests of `fanout init`'s template), and the worker jobs' agents, which log their
    // start and end, never overlap. (act does not evaluate an expression in
    // `max-parallel`: it falls back to one job at a time, where GitHub takes the
    // value; without the key it runs up to 4 at once, so the overlap check catches a
    // template that lost it, and the output check the value.)
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().canonicalize().unwrap();
    let trace = shared.join("trace.log");
    let config = format!(
        "parallel_runs:\n  agent: fake\n  workers: 1\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, --trace, '{}', --sleep, '1', --write, 'out-{{worker_id}}.txt', '{{task}}']\n    writable: ['{}']\n",
        trace.display(),
        shared.display()
    );
    let Some(f) = Fixture::setup_kind("matrix", &config, false) else {
        return;
    };
    let workflow = std::fs::read_to_string(f.t.repo.join(".github/workflows/fanout.yml")).unwrap();
    assert_eq!(
        workflow
            .matches("max-parallel: ${{ fromJSON(needs.plan.outputs.max-parallel) }}")
            .count(),
        4
    );
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, _artifacts) = f.act(
        &gh,
        serde_json::json!({"tasks": "one\ntwo\nthree", "models": "", "publish": "false"}),
    );
    assert!(
        out.status.success(),
        "act failed:\n{}\n{}",
        log.raw,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.output("plan", "count-1"), Some("3"), "{}", log.raw);
    assert_eq!(log.output("plan", "max-parallel"), Some("1"), "{}", log.raw);
    // (start|end, worker, ns) in time order: each start follows the previous end.
    let traced = std::fs::read_to_string(&trace).unwrap_or_default();
    let mut events: Vec<(&str, &str, u128)> = traced
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (v[0], v[1], v[2].parse().unwrap())
        })
        .collect();
    events.sort_by_key(|e| e.2);
    let kinds: Vec<&str> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        ["start", "end", "start", "end", "start", "end"],
        "agents overlapped:\n{traced}"
    );
    for pair in events.chunks(2) {
        assert_eq!(pair[0].1, pair[1].1, "agents overlapped:\n{traced}");
    }
}

#[test]
fn without_a_release_asset_the_plan_job_builds_fanout_once_per_run_never_from_the_cache() {
    // dist/manifest.json has no asset URLs before a release (as on main), so the
    // action builds fanout from its source: the plan job builds (and caches) it and
    // hands the binary to the 20 worker jobs and the aggregate job. The next run's
    // plan job builds again rather than trust a cache entry, which any job of a run
    // (a worker job's agent too) could have saved: here a planted one.
    let Some(f) = Fixture::building() else { return };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let tasks: String = (1..=20).map(|i| format!("task number {i}\n")).collect();
    let inputs = serde_json::json!({"tasks": tasks, "models": "", "publish": "false"});
    let builds = || {
        std::fs::read_to_string(f.t.root().join("cargo-builds"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let (out, log, _) = f.act(&gh, inputs.clone());
    let fail = |what: &str| -> ! {
        panic!(
            "{what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        )
    };
    if !out.status.success() {
        fail("act failed");
    }
    assert_eq!(log.output("plan", "count"), Some("20"));
    let results: Value = serde_json::from_str(log.output("aggregate", "results").unwrap()).unwrap();
    assert_eq!(results["totals"]["success"], 20, "{results:#}");
    eprintln!("20 worker jobs + plan + aggregate: {} compile(s)", builds());
    if builds() != 1 {
        fail(&format!("{} builds, expected 1", builds()));
    }
    // Every worker job and the aggregate job took the plan job's binary (checked
    // against its sha256, the plan job's binary-sha256 output).
    let handed = |log: &ActLog, job: &str| {
        log.messages(job)
            .filter(|m| m.contains("using the fanout binary the plan job built"))
            .count()
    };
    assert_eq!(
        handed(&log, "work-1"),
        20,
        "worker jobs that took the plan's binary"
    );
    assert_eq!(handed(&log, "aggregate"), 1);
    assert!(
        log.messages("work-1").all(|m| !m.contains("building")),
        "a worker job built fanout"
    );
    let saves = std::fs::read_to_string(f.t.root().join("gha-cache/saves.log")).unwrap();
    assert_eq!(saves.lines().count(), 1, "{saves}");
    let key = saves.trim();
    assert!(
        key.starts_with(&format!("fanout-source-{}-", env!("CARGO_PKG_VERSION"))),
        "{saves}"
    );

    // A worker job saves a trojan under the key the next run looks up (the stand-in
    // cache has exact keys only; on GitHub it would be a key not yet taken, such as
    // the next version's): it would mark that it ran, then run fanout.
    let marker = f.t.root().join("trojan-ran");
    let trojan = f.t.root().join(format!("gha-cache/{key}/fanout"));
    assert!(trojan.is_file(), "no cached binary at {}", trojan.display());
    std::fs::write(
        &trojan,
        format!(
            "#!/bin/sh\necho \"$0\" >> '{}'\nexec '{FANOUT}' \"$@\"\n",
            marker.display()
        ),
    )
    .unwrap();
    let plan_sha = log.output("plan", "sha256").unwrap_or_default().to_owned();

    // The next run: the plan job builds again and ignores the cache; the worker and
    // aggregate jobs take its binary; the trojan never runs.
    let (out, log, _) = f.act(&gh, inputs);
    assert!(out.status.success(), "second run: {}", log.raw);
    eprintln!("second run: {} compile(s) in total", builds());
    assert_eq!(builds(), 2, "the second run's plan job did not build");
    assert!(
        log.messages("plan")
            .all(|m| !m.contains("using the cached build")),
        "{}",
        log.raw
    );
    assert!(
        !marker.exists(),
        "the cached trojan ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    let sha = log.output("plan", "sha256").unwrap_or_default();
    assert_eq!(sha.len(), 64, "{}", log.raw);
    assert_ne!(
        sha, plan_sha,
        "a fresh build (the stand-in cargo stamps each one)"
    );
    assert_eq!(handed(&log, "work-1"), 20);
    assert_eq!(handed(&log, "aggregate"), 1);
    gh.assert_no_violations();
}

/// The `local` workflow (`mode: run`, `publish: true`): the agents run in a step of the
/// action that holds no token, and the action's next step publishes. The agent looks
/// for the token in its own environment and in every ancestor's; it finds nothing,
/// and the pull requests are still opened.
#[test]
fn run_mode_runs_agents_without_the_token_and_publishes_in_a_later_step() {
    let probe = std::env::temp_dir().join(format!("fanout-act-probe-{}.sh", std::process::id()));
    std::fs::write(
        &probe,
        "#!/bin/sh\n# where an agent could find the token: its environment, its ancestors'\nout=\"saw-$FANOUT_WORKER_ID.txt\"\n{ env; p=$PPID; while [ \"$p\" -gt 1 ]; do echo \"== $p\"; tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null; p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2); done; } > \"$out\"\necho \"work $FANOUT_WORKER_ID\" > \"out-$FANOUT_WORKER_ID.txt\"\n",
    )
    .unwrap();
    let Some(f) = Fixture::local(probe.to_str().unwrap()) else {
        let _ = std::fs::remove_file(&probe);
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, _) = f.act(
        &gh,
        serde_json::json!({"tasks": "first task\nsecond task\n", "models": "", "workers": "2"}),
    );
    let _ = std::fs::remove_file(&probe);
    let fail = |what: &str| -> ! {
        panic!(
            "{what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        )
    };
    if !out.status.success() {
        fail("the workflow failed");
    }
    let Some(run_id) = log.output("fanout", "run-id") else {
        fail("no run-id output")
    };
    // The agents looked everywhere they could: no token. (The probe writes into its
    // worktree, the one place a sandboxed agent may write, so it is committed too.)
    let worktrees = f.t.home.join("data/fanout/worktrees");
    let mut seen = 0;
    for id in 1..=2 {
        let saw = std::fs::read_dir(&worktrees)
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join(run_id).join(format!("w{id}/saw-{id}.txt")))
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                fail(&format!(
                    "worker {id} left no probe under {}",
                    worktrees.display()
                ))
            });
        let text = std::fs::read_to_string(saw).unwrap();
        assert!(
            !text.contains("act-token"),
            "worker {id} found the token:\n{text}"
        );
        assert!(text.contains("FANOUT_WORKER_ID"), "{text}");
        seen += 1;
    }
    assert_eq!(seen, 2);
    // The publish step (the only one with the token) opened both pull requests.
    let prs: Value = serde_json::from_str(log.output("fanout", "pull-requests").unwrap_or(""))
        .unwrap_or_else(|e| fail(&format!("pull-requests output: {e}")));
    let ops: Vec<&str> = prs
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["operation"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["created", "created"], "{prs:#}");
    assert_eq!(gh.pulls().len(), 2);
    let messages: Vec<String> = log.messages("fanout").collect();
    let run_at = messages.iter().position(|m| m.contains("fanout run"));
    let publish_at = messages.iter().position(|m| m.contains("fanout publish"));
    assert!(
        matches!((run_at, publish_at), (Some(r), Some(p)) if r < p),
        "expected the run step, then the publish step: {messages:#?}"
    );
    for pr in gh.pulls() {
        let on_remote = f.t.git_in(
            &f.remote,
            &["rev-parse", &format!("refs/heads/{}", pr.head_ref)],
        );
        assert!(!on_remote.trim().is_empty());
    }
    gh.assert_no_violations();
}

/// The `nightly` template under act, two nights in a row against one fake GitHub:
/// each task publishes to its stable branch (`fanout/<task>`), with fanout's label
/// and marker; the second night, whose changes are the same, leaves both pull
/// requests as they are and opens none; one digest issue compares the nights.
#[test]
fn nightly_template_keeps_one_pull_request_per_task_and_a_digest_under_act() {
    let Some(f) = Fixture::setup_kind(
        "nightly",
        &format!(
            "parallel_runs:\n  agent: fake\n  workers: 2\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, --write, 'out-{{worker_id}}.txt', '{{task}}']\ntasks:\n  - {{id: docs, prompt: 'first task'}}\n  - {{id: lint, prompt: 'second task'}}\n"
        ),
        false,
    ) else {
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    for night in 1..=2 {
        let (out, log, _) = f.act(&gh, serde_json::json!({}));
        let fail = |what: &str| -> ! {
            panic!(
                "night {night}: {what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
                log.raw,
                String::from_utf8_lossy(&out.stderr)
            )
        };
        if !out.status.success() {
            fail("the workflow failed");
        }
        let prs: Value = serde_json::from_str(log.output("fanout", "pull-requests").unwrap_or(""))
            .unwrap_or_else(|e| fail(&format!("pull-requests output: {e}")));
        let ops: Vec<(&str, &str, &str)> = prs
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["branch"].as_str().unwrap(),
                    p["operation"].as_str().unwrap(),
                    p["pr_operation"].as_str().unwrap(),
                )
            })
            .collect();
        let want = if night == 1 {
            [
                ("fanout/docs", "created", "created"),
                ("fanout/lint", "created", "created"),
            ]
        } else {
            [
                ("fanout/docs", "unchanged", "none"),
                ("fanout/lint", "unchanged", "none"),
            ]
        };
        assert_eq!(ops, want, "night {night}: {prs:#}");
        let mut heads: Vec<String> = gh.pulls().into_iter().map(|p| p.head_ref).collect();
        heads.sort();
        assert_eq!(heads, ["fanout/docs", "fanout/lint"], "night {night}");
        for pr in gh.pulls() {
            assert_eq!(pr.state, "open");
            assert!(pr.labels.contains(&"fanout".to_owned()), "{pr:?}");
            let on_remote = f.t.git_in(
                &f.remote,
                &["rev-parse", &format!("refs/heads/{}", pr.head_ref)],
            );
            assert!(!on_remote.trim().is_empty());
        }
        let issues = gh.issues();
        assert_eq!(issues.len(), 1, "night {night}: {issues:?}");
        let body = issues[0].body.clone().unwrap_or_default();
        assert!(body.contains("compared with the night before"), "{body}");
        assert_eq!(
            body.contains("nothing to compare with yet"),
            night == 1,
            "night {night}: {body}"
        );
    }
    gh.assert_no_violations();
}

/// An executable shell script `body` in `dir` (outside the repository), for an agent.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    path
}

/// Item 8 of issue #28 under act: in the `local` workflow (`mode: run`), each agent
/// prints lines that would be workflow commands — `::add-mask::`, `::error::`,
/// `##[error]`, `::set-output`, `##[set-output]` — on stdout and stderr, and writes to
/// `$GITHUB_OUTPUT`. fanout shows its log in the worker's group, and act takes no
/// command from it: no annotation, no mask, no output of the step, and the publish
/// step (gated on the step's outputs) publishes as it would have. (act parses only
/// lines that start with `::` or `##[`; how the GitHub runner parses them, leading
/// whitespace trimmed and `##[` anywhere, is tested in tests/it/hostile_ci.rs.)
#[test]
fn agent_output_sets_no_annotation_mask_or_output_under_act() {
    let dir = tempfile::tempdir().unwrap();
    let agent = script(
        dir.path(),
        "forger.sh",
        r#"for line in '::add-mask::PWNED-mask' '::error::PWNED-error' '##[error]PWNED-legacy-error' \
    '::warning::PWNED-warning' '::set-output name=pwned::PWNED-output' \
    '##[set-output name=pwned2;]PWNED-output' '::set-output name=run-id::PWNED-run'; do
  echo "$line"; echo "$line" >&2
done
echo "pwned3=PWNED-file" >> "$GITHUB_OUTPUT" 2>/dev/null
echo "work $FANOUT_WORKER_ID" > "out-$FANOUT_WORKER_ID.txt"
"#,
    );
    let Some(f) = Fixture::local(agent.to_str().unwrap()) else {
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let (out, log, _) = f.act(
        &gh,
        serde_json::json!({"tasks": "first task\nsecond task\n", "models": "", "workers": "2"}),
    );
    let fail = |what: &str| -> ! {
        panic!(
            "{what}\n--- act stdout ---\n{}\n--- act stderr ---\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        )
    };
    if !out.status.success() {
        fail("the workflow failed");
    }
    // The agents' lines were shown (in their groups), and act acted on none of them.
    let shown = log
        .messages("fanout")
        .filter(|m| m.contains("PWNED-legacy-error"))
        .count();
    if shown < 2 {
        fail("the agents' log lines were not shown");
    }
    let forged: Vec<(String, String)> = log
        .commands("fanout")
        .into_iter()
        .filter(|(c, raw)| c != "ignored" && raw.contains("PWNED"))
        .collect();
    if !forged.is_empty() {
        fail(&format!("act took commands from agent output: {forged:#?}"));
    }
    for name in ["pwned", "pwned2", "pwned3"] {
        if let Some(v) = log.output("fanout", name) {
            fail(&format!("the agent set the step output {name}={v}"));
        }
    }
    let run_id = log.output("fanout", "run-id").unwrap_or_default();
    assert!(!run_id.contains("PWNED"), "{run_id}");
    assert_eq!(gh.pulls().len(), 2);
    gh.assert_no_violations();

    // Item 10 in the same run: Docker was stopped (through the sudo stand-in) before
    // any agent step, and the agents ran sandboxed (`sandbox: required`).
    let sudo = std::fs::read_to_string(f.t.root().join("sudo.log")).unwrap_or_default();
    assert!(
        sudo.contains("sudo systemctl stop docker.socket docker.service containerd.service"),
        "{sudo}"
    );
    let messages: Vec<String> = log.messages("fanout").collect();
    let locked = messages
        .iter()
        .position(|m| m.contains("Success - Main Stop Docker before any agent runs"));
    let ran = messages.iter().position(|m| m.contains("fanout: run"));
    if !matches!((locked, ran), (Some(l), Some(r)) if l < r) {
        fail("Docker was not stopped before the agents ran");
    }
    let results: Value =
        serde_json::from_str(log.output("fanout", "results").unwrap_or("{}")).unwrap();
    for r in results["results"].as_array().unwrap() {
        assert_eq!(r["sandboxed"], true, "{r:#}");
    }
}

/// Item 1 of issue #28 under act: in the matrix workflow, worker 1's agent does what
/// a worker job's token allows: it deletes the `fanout-plan` artifact and uploads one
/// of the same name holding the very plan (its digest still matches) and a
/// `fanout.yml` that names its own server as the remote. The aggregate job downloads
/// the plan by the id the plan job recorded, which the new artifact does not have: it
/// refuses to go on, and nothing reaches the server. In a second run the agent adds
/// an artifact of its own (`fanout-result-99`, with that `fanout.yml`) instead: it is
/// downloaded under `runner.temp`, never into the checkout, the aggregate publishes
/// where the plan says, and nothing reaches the server either. (The stand-in artifact
/// store stands for the artifact API, which the agent reaches here as a directory its
/// definition may write.)
#[test]
fn a_replaced_plan_artifact_carrying_a_fanout_yml_sends_nothing_elsewhere_under_act() {
    // The agent's server listens before the repository (whose config names the
    // agent) is made; the agent reads its URL from the test's directory.
    let trap_dir = tempfile::tempdir().unwrap();
    let trap_root = trap_dir.path().canonicalize().unwrap();
    let scratch = TestEnv::new();
    scratch.git_in(&trap_root, &["init", "-q", "--bare", "-b", "main", "x.git"]);
    let trap = crate::hostile::GitHttp::start(&scratch, &trap_root);
    let port = trap.port;
    let Some(f) = Fixture::setup_in(
        "matrix",
        |root| {
            let store = root.join("artifacts");
            std::fs::create_dir_all(&store).unwrap();
            let agent = script(
                root,
                "replacer.sh",
                &format!(
                    r#"set -e
echo "work $FANOUT_WORKER_ID" > "out-$FANOUT_WORKER_ID.txt"
[ "$FANOUT_WORKER_ID" = 1 ] || exit 0
art="$FANOUT_TEST_ARTIFACTS"
keep=$(mktemp -d)
cp "$art/fanout-plan/fanout-plan.json" "$keep/"
printf 'publish:\n  remote: http://127.0.0.1:{port}/x.git\n' > "$keep/fanout.yml"
if [ "$(cat '{root}/mode')" = replace ]; then
  rm -rf "$art/fanout-plan"
  for f in "$art"/.ids/*; do [ "$(cat "$f")" != fanout-plan ] || rm -f "$f"; done
  mkdir "$art/fanout-plan" && cp "$keep"/* "$art/fanout-plan/"
  echo fanout-plan > "$art/.ids/4242"
else
  mkdir "$art/fanout-result-99" && cp "$keep/fanout.yml" "$art/fanout-result-99/"
  echo fanout-result-99 > "$art/.ids/4343"
fi
"#,
                    root = root.display()
                ),
            );
            format!(
                "parallel_runs:\n  agent: replacer\n  workers: 2\nagents:\n  replacer:\n    command: [sh, '{}']\n    writable: ['{}']\n",
                agent.display(),
                store.display()
            )
        },
        false,
    ) else {
        return;
    };
    let t = &f.t;
    let root = t.root().to_path_buf();
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    let inputs = serde_json::json!({"tasks": "one\ntwo\n", "models": "", "publish": "true"});

    std::fs::write(root.join("mode"), "replace").unwrap();
    let (out, log, artifacts) = f.act(&gh, inputs.clone());
    let said = || format!("{}\n{}", log.raw, String::from_utf8_lossy(&out.stderr));
    assert!(
        artifacts.join("fanout-plan/fanout.yml").is_file(),
        "the agent did not replace the plan artifact:\n{}",
        said()
    );
    assert_eq!(
        trap.credentials(),
        "",
        "the token reached the agent's server"
    );
    assert!(!out.status.success(), "{}", said());
    assert!(
        log.messages("aggregate")
            .any(|m| m.contains("None of the provided artifact IDs were found")),
        "the aggregate job did not refuse the replaced plan:\n{}",
        said()
    );
    assert!(
        log.messages("aggregate")
            .all(|m| !m.contains("fanout: aggregate")),
        "fanout aggregate ran:\n{}",
        said()
    );
    assert!(gh.pulls().is_empty());

    std::fs::write(root.join("mode"), "add").unwrap();
    let (out, log, artifacts) = f.act(&gh, inputs);
    let said = || format!("{}\n{}", log.raw, String::from_utf8_lossy(&out.stderr));
    assert!(
        artifacts.join("fanout-result-99/fanout.yml").is_file(),
        "{}",
        said()
    );
    assert_eq!(
        trap.credentials(),
        "",
        "the token reached the agent's server"
    );
    assert!(out.status.success(), "{}", said());
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 2, "{}", said());
    for pr in pulls {
        let on_remote = t.git_in(&f.remote, &["branch", "--list", &pr.head_ref]);
        assert!(
            !on_remote.trim().is_empty(),
            "{} not on origin",
            pr.head_ref
        );
    }
    gh.assert_no_violations();
}

/// Item 10 of issue #28 under act: a run cancelled while a worker's agent runs starts
/// no later wave and no aggregate. act cannot show that with the jobs themselves: it
/// does not apply a cancellation to the `if:` of jobs that start after it (its
/// `cancelled()` there reads only the new job's own state, so with `always()` and
/// with `!cancelled()` alike it starts them, then skips their plain steps). What act
/// does model is `cancelled()` inside a job that is cancelled while it runs: so the
/// generated matrix workflow's conditions — of `work-2`..`work-4`, of the aggregate,
/// and of the worker jobs' result upload — are evaluated here as the conditions of
/// steps that come after a step interrupted by the cancellation (SIGINT to act, as a
/// user's cancel), with the plan's outputs they read. None runs; a control step with
/// `always()` does (the conditions were evaluated after the cancel).
#[test]
fn after_a_cancel_no_later_wave_and_no_aggregate_starts_under_act() {
    let Some(act) = act_support::binary() else {
        return;
    };
    let t = TestEnv::new();
    let wf_out = ".github/workflows/fanout.yml";
    t.run_ok(&["init", "--kind", "matrix", "--output", wf_out]);
    let generated = std::fs::read_to_string(t.repo.join(wf_out)).unwrap();
    let wf: Value = serde_saphyr::from_str(&generated).unwrap();
    let cond = |job: &str| wf["jobs"][job]["if"].as_str().unwrap().to_owned();
    let upload_if = wf["jobs"]["work-1"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["with"]["name"] == "fanout-result-${{ matrix.id }}")
        .and_then(|s| s["if"].as_str())
        .unwrap()
        .to_owned();
    let markers = t.root().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let mut probe = String::from(
        "name: cancel-probe\non: workflow_dispatch\njobs:\n  plan:\n    runs-on: ubuntu-latest\n    outputs:\n",
    );
    for o in ["count", "count-1", "count-2", "count-3", "count-4"] {
        probe.push_str(&format!("      {o}: ${{{{ steps.plan.outputs.{o} }}}}\n"));
    }
    probe.push_str(
        "    steps:\n      - id: plan\n        run: for o in count count-1 count-2 count-3 count-4; do echo \"$o=1\" >> \"$GITHUB_OUTPUT\"; done\n  work-1:\n    needs: plan\n    runs-on: ubuntu-latest\n    steps:\n      - name: an agent, running when the run is cancelled\n        run: touch \"$MARKERS/started\"; sleep 120\n",
    );
    let steps = [
        ("work-2", cond("work-2")),
        ("work-3", cond("work-3")),
        ("work-4", cond("work-4")),
        ("aggregate", cond("aggregate")),
        ("upload", upload_if),
        ("control", "always()".to_owned()),
    ];
    for (name, c) in &steps {
        probe.push_str(&format!(
            "      - name: {name}\n        if: \"{}\"\n        run: touch \"$MARKERS/{name}\"\n",
            c.replace('"', "\\\"")
        ));
    }
    std::fs::write(t.repo.join(".github/workflows/cancel-probe.yml"), &probe).unwrap();

    let mut child = t
        .command(act.to_str().unwrap(), &t.repo)
        .env("ACT_DISABLE_VERSION_CHECK", "1")
        .args([
            "workflow_dispatch",
            "-W",
            ".github/workflows/cancel-probe.yml",
        ])
        .args(["-P", "ubuntu-latest=-self-hosted", "--no-cache-server"])
        .arg("--action-cache-path")
        .arg(t.root().join("act-cache"))
        .arg("--env")
        .arg(format!("MARKERS={}", markers.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(t.root().join("act.log")).unwrap())
        .stderr(std::fs::File::create(t.root().join("act.err")).unwrap())
        .spawn()
        .unwrap();
    let started = wait_until(Duration::from_secs(120), || {
        markers.join("started").exists()
    });
    // The user cancels the run.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let status = wait_child(&mut child, Duration::from_secs(120));
    let log = ["act.log", "act.err"]
        .map(|f| std::fs::read_to_string(t.root().join(f)).unwrap_or_default())
        .join("\n");
    assert!(started, "the probe's agent step never started:\n{log}");
    assert!(
        markers.join("control").exists(),
        "the steps after the cancel were not evaluated (status {status:?}):\n{probe}\n{log}"
    );
    for (name, c) in &steps[..5] {
        assert!(
            !markers.join(name).exists(),
            "`{name}` would run after a cancel (if: {c}):\n{log}"
        );
    }
}

/// The `nightly` template under act with issues as tasks and tending: the action's
/// tend step reads GitHub with the token before the agents' step, which has none —
/// night 1 turns a labelled issue into a task and a pull request saying `Fixes #N`;
/// after the task's check failed, night 2 runs it again with the check's output in
/// its prompt (the fake agent writes its prompt into its file) and updates the pull
/// request.
#[test]
fn nightly_template_tends_and_takes_issues_under_act() {
    let Some(f) = Fixture::setup_kind(
        "nightly",
        &format!(
            "parallel_runs:\n  agent: fake\n  workers: 1\nagents:\n  fake:\n    command: ['{FANOUT}', fake-agent, --write, 'out-{{worker_id}}.txt', '{{task}}']\ntasks:\n  - {{id: docs, prompt: 'first task'}}\ntasks_from:\n  issues: {{label: fanout-task}}\n"
        ),
        false,
    ) else {
        return;
    };
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token("act-token");
    gh.set_git_dir(&f.remote);
    let issue = gh.add_issue("Tidy the changelog", "It repeats itself.", &["fanout-task"]);
    let night = |n: u32| {
        let (out, log, _) = f.act(&gh, serde_json::json!({}));
        assert!(
            out.status.success(),
            "night {n}: the workflow failed\n{}\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        );
        let prs: Value =
            serde_json::from_str(log.output("fanout", "pull-requests").unwrap_or("[]")).unwrap();
        prs.as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["branch"].as_str().unwrap().to_owned(),
                    p["operation"].as_str().unwrap().to_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    let issue_branch = format!("fanout/issue-{issue}");
    assert_eq!(
        night(1),
        [
            ("fanout/docs".to_owned(), "created".to_owned()),
            (issue_branch.clone(), "created".to_owned())
        ]
    );
    let pr = gh
        .pulls()
        .into_iter()
        .find(|p| p.head_ref == issue_branch)
        .unwrap();
    assert_eq!(pr.title, "Tidy the changelog");
    assert!(pr.body.unwrap().contains(&format!("Fixes #{issue}")));

    let head =
        f.t.git_in(&f.remote, &["rev-parse", "refs/heads/fanout/docs"])
            .trim()
            .to_owned();
    gh.add_check_run(
        &head,
        "test",
        "failure",
        "1 test failed",
        Some("error: boom in docs\n"),
    );
    assert_eq!(
        night(2),
        [
            ("fanout/docs".to_owned(), "updated".to_owned()),
            (issue_branch, "unchanged".to_owned())
        ]
    );
    let file = f.t.git_in(&f.remote, &["show", "fanout/docs:out-1.txt"]);
    assert!(file.contains("needs fixing: check `test` failed"), "{file}");
    assert!(file.contains("> error: boom in docs"), "{file}");
    gh.assert_no_violations();
}

/// The action's `run` mode with `publish: true` runs its agents in the sandbox or not
/// at all: the publish step after it holds the token in the same job, where an
/// unconfined agent could have changed what that step runs. The action's script
/// passes `--sandbox required` (whatever the config says), and refuses `sandbox: off`
/// before fanout starts.
#[test]
fn run_mode_with_publish_requires_the_sandbox() {
    let t = TestEnv::new();
    let args = t.root().join("args");
    let fake = t.root().join("fanout");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", args.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/action.sh");
    let action = |publish: &str, sandbox: &str| {
        let _ = std::fs::remove_file(&args);
        std::process::Command::new("bash")
            .arg(&script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FANOUT_BIN", &fake)
            .env("FANOUT_IN_MODE", "run")
            .env("FANOUT_IN_TASKS", "Improve the docs")
            .env("FANOUT_IN_PUBLISH", publish)
            .env("FANOUT_IN_SANDBOX", sandbox)
            .output()
            .unwrap()
    };
    let given = || std::fs::read_to_string(&args).unwrap_or_default();
    for sandbox in ["", "auto", "required"] {
        let out = action("true", sandbox);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            given().contains("--sandbox\nrequired\n"),
            "{sandbox:?}: {}",
            given()
        );
    }
    let out = action("true", "off");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs the sandbox"));
    assert_eq!(given(), "", "fanout ran");
    // Without publish, the input is passed on as it is.
    let out = action("false", "off");
    assert_eq!(out.status.code(), Some(0));
    assert!(given().contains("--sandbox\noff\n"), "{}", given());
}
