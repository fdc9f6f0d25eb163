//! `fanout resume`: a run killed mid-way (SIGKILL: no report, only the journal and the
//! workers' records; or SIGINT: a report with interrupted workers) is finished by
//! running only the workers that did not finish; the final report has every worker
//! once.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A run of 3 workers, one at a time, whose worker 2 hangs on its first run only,
/// caught once worker 1 finished and worker 2 is running.
struct Halted {
    t: TestEnv,
    cfg: PathBuf,
    trace: PathBuf,
    mark: String,
    run_id: String,
    child: Child,
}

impl Halted {
    fn start(run_id: &str) -> Halted {
        let t = TestEnv::new();
        let mark = marker("resume");
        let trace = t.shared().join("trace.log");
        let hang = t.shared().join("hang");
        std::fs::create_dir_all(&hang).unwrap();
        std::fs::write(hang.join("hang-w2"), "").unwrap();
        let cfg = t.fake_config(
            &[
                "--trace",
                trace.to_str().unwrap(),
                "--hang-once",
                hang.to_str().unwrap(),
                "--marker",
                &mark,
            ],
            "",
        );
        let mut child = one_at_a_time(&t, &cfg, run_id, &["one", "two", "three"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Worker 1 is recorded as finished; worker 2 took its hang file: it hangs.
        let w1 = t.run_dir(run_id).join("results/w1.json");
        let ready = wait_until(Duration::from_secs(60), || {
            w1.is_file() && !hang.join("hang-w2").exists()
        });
        if !ready {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "worker 1 should have finished and worker 2 be hanging; trace:\n{}\nstderr:\n{}",
                std::fs::read_to_string(&trace).unwrap_or_default(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Halted {
            t,
            cfg,
            trace,
            mark,
            run_id: run_id.to_owned(),
            child,
        }
    }

    fn fanout(&self, args: &[&str]) -> Output {
        let mut all = vec!["--config", self.cfg.to_str().unwrap()];
        all.extend_from_slice(args);
        self.t.fanout(&all).output().unwrap()
    }

    /// `start <id>` lines of the agents' trace, in order.
    fn starts(&self) -> Vec<String> {
        std::fs::read_to_string(&self.trace)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("start "))
            .map(|l| l.split_whitespace().next().unwrap().to_owned())
            .collect()
    }

    fn status(&self) -> serde_json::Value {
        let out = self.t.run_ok(&["status", "--json"]);
        let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == self.run_id.as_str())
            .cloned()
            .unwrap()
    }
}

/// `fanout run --quiet --json --run-id <run_id> -w 1` of `tasks` with the config `cfg`.
fn one_at_a_time(t: &TestEnv, cfg: &Path, run_id: &str, tasks: &[&str]) -> Command {
    let mut args = vec![
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--quiet",
        "--json",
    ];
    args.extend(["--run-id", run_id, "-w", "1"]);
    for task in tasks {
        args.extend(["-t", task]);
    }
    t.fanout(&args)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// After the resume: the agents of workers 2 and 3 (only) ran again; the report has
/// workers 1, 2, 3 once each, all successful; each branch holds exactly its worker's
/// change in one commit; no agent process is left.
fn check_resumed(h: &Halted, out: &Output, starts_before: usize) {
    assert_eq!(out.status.code(), Some(0), "{}", text(out));
    let starts = h.starts();
    assert_eq!(
        starts[..starts_before],
        ["1", "2"],
        "before the resume: worker 1 ran, worker 2 started"
    );
    assert_eq!(
        starts[starts_before..],
        ["2", "3"],
        "the resume runs workers 2 and 3, not 1"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("no JSON report ({e}): {}", text(out));
    });
    assert_eq!(report, h.t.results(&h.run_id), "results.json is the report");
    assert_eq!(report["interrupted"], false);
    assert_eq!(report["exit_code"], 0);
    assert_eq!(report["totals"]["workers"], 3);
    assert_eq!(report["totals"]["success"], 3);
    let results = report["results"].as_array().unwrap();
    let ids: Vec<u64> = results
        .iter()
        .map(|r| r["worker_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3], "every worker once, in id order");
    let base = report["plan"]["base"]["commit"].as_str().unwrap();
    for (r, attempt) in results.iter().zip([None, Some(2), Some(2)]) {
        let id = r["worker_id"].as_u64().unwrap();
        assert_eq!(r["status"], "success", "{r}");
        assert_eq!(r["attempt"].as_u64(), attempt, "{r}");
        let branch = r["branch"].as_str().unwrap();
        assert!(
            branch.starts_with(&format!("fanout/{}/w{id}-", h.run_id)),
            "{branch}"
        );
        assert_eq!(
            h.t.git(&["diff", "--name-only", base, branch]),
            format!("fanout-demo/w{id}.md\n")
        );
        assert_eq!(
            h.t.git(&["rev-list", "--count", &format!("{base}..{branch}")]),
            "1\n"
        );
        assert_eq!(
            r["commit"].as_str().unwrap(),
            h.t.git(&["rev-parse", branch]).trim()
        );
    }
    let summary = std::fs::read_to_string(h.t.run_dir(&h.run_id).join("summary.md")).unwrap();
    assert!(!summary.contains("(interrupted)"), "{summary}");
    assert_eq!(h.status()["state"], "finished");
    assert_eq!(h.status()["unfinished"], 0);
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&h.mark)
            .is_empty()),
        "survivors: {:?}",
        processes_with(&h.mark)
    );
}

#[test]
fn resume_after_sigkill_runs_only_the_unfinished_workers() {
    let mut h = Halted::start("crash");

    // While the run is going, there is nothing to resume.
    let out = h.fanout(&["resume", "crash"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("still running"), "{}", text(&out));

    // A crash: fanout dies at once and cannot stop its agents; no report is written.
    h.child.kill().unwrap();
    h.child.wait().unwrap();
    let dir = h.t.run_dir("crash");
    assert!(!dir.join("results.json").exists());
    let st = h.status();
    assert_eq!(st["state"], "crashed", "{st}");
    assert_eq!(st["unfinished"], 2, "{st}");
    assert_eq!(st["workers"][0]["status"], "success", "{st}");
    assert!(
        !processes_with(&h.mark).is_empty(),
        "worker 2's agent outlives the killed fanout"
    );

    // resume refuses while the earlier attempt's agent is alive, and names it.
    let out = h.fanout(&["resume"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text(&out);
    assert!(
        err.contains("run crash: processes of its earlier attempt are still running"),
        "{err}"
    );
    assert!(err.contains("--stop-survivors"), "{err}");
    assert_eq!(h.starts(), ["1", "2"], "nothing ran");

    // --stop-survivors stops it, then runs workers 2 and 3.
    let before = h.starts().len();
    let out = h.fanout(&["resume", "--stop-survivors", "--quiet", "--json"]);
    assert!(
        text(&out).contains("resuming run crash (attempt 2): running #2, #3; keeping #1"),
        "{}",
        text(&out)
    );
    check_resumed(&h, &out, before);
}

#[test]
fn resume_after_sigint_runs_only_the_interrupted_workers() {
    let mut h = Halted::start("ctrl-c");
    kill(Pid::from_raw(h.child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait_child(&mut h.child, Duration::from_secs(45));
    assert_eq!(status.code(), Some(130));
    let report = h.t.results("ctrl-c");
    let statuses: Vec<(&str, &str)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap(),
                // How the agent was stopped follows a `;`.
                r["reason"]
                    .as_str()
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("success", ""),
            ("failed", "interrupted"),
            ("failed", "interrupted")
        ]
    );
    let st = h.status();
    assert_eq!(st["state"], "interrupted", "{st}");
    assert_eq!(st["unfinished"], 2, "{st}");

    let before = h.starts().len();
    let out = h.fanout(&["resume", "ctrl-c", "--quiet", "--json"]);
    check_resumed(&h, &out, before);
}

#[test]
fn resume_of_a_finished_run_has_nothing_to_do() {
    let t = TestEnv::new();
    let trace = t.shared().join("trace.log");
    let cfg = t.fake_config(&["--trace", trace.to_str().unwrap()], "");
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&["--config", cfg, "run", "--run-id", "done", "-w", "2", "x"]);
    let before = std::fs::read_to_string(&trace).unwrap();
    let results = t.results("done");

    let out = t.run_ok(&["--config", cfg, "resume"]);
    assert!(text(&out).contains("nothing to resume"), "{}", text(&out));
    let out = t.run_ok(&["--config", cfg, "resume", "done", "--json"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("run done: nothing to resume"),
        "{}",
        text(&out)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, results, "the existing report, unchanged");
    assert_eq!(t.results("done"), results);
    assert_eq!(
        std::fs::read_to_string(&trace).unwrap(),
        before,
        "no agent ran"
    );
}

#[test]
fn resume_of_an_unknown_run_is_a_usage_error() {
    let t = TestEnv::new();
    let out = t.fanout(&["resume", "no-such-run-42"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-run-42"), "{err}");
    assert!(err.contains("no such run"), "{err}");
}

/// Every worktree git knows in the repository's `.git/worktrees` is one the run's
/// journal records as made, and complete (no `locked` file left by a creation cut
/// short); every directory under the run's worktree root is one of them.
fn assert_no_orphan_worktree(t: &TestEnv, run_id: &str) {
    let bytes = std::fs::read(t.run_dir(run_id).join("journal.json")).unwrap();
    let journal: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let made: Vec<(String, PathBuf)> = journal["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["worktree_created"] == true)
        .map(|e| {
            (
                e["worktree_name"].as_str().unwrap().to_owned(),
                PathBuf::from(e["worktree_path"].as_str().unwrap()),
            )
        })
        .collect();
    for e in std::fs::read_dir(t.repo.join(".git/worktrees"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            made.iter().any(|(n, _)| *n == name),
            "{name} is not in the journal: {journal:#}"
        );
        assert!(!e.path().join("locked").exists(), "{name} is half made");
    }
    for e in std::fs::read_dir(t.worktrees.join(run_id))
        .into_iter()
        .flatten()
        .flatten()
    {
        assert!(
            made.iter().any(|(_, p)| *p == e.path()),
            "{} is not in the journal: {journal:#}",
            e.path().display()
        );
    }
}

#[test]
fn a_run_whose_tamper_snapshot_fails_runs_no_agent_and_resume_runs_them() {
    let t = TestEnv::new();
    let trace = t.shared().join("trace.log");
    let cfg = t.fake_config(&["--trace", trace.to_str().unwrap()], "");
    let cfg = cfg.to_str().unwrap();
    // An index libgit2 cannot read: the snapshot's scan of the checkout fails (each
    // worktree's checkout has an index of its own).
    let index = t.repo.join(".git/index");
    let good = std::fs::read(&index).unwrap();
    std::fs::write(&index, b"not an index").unwrap();
    let out = t
        .fanout(&[
            "--config", cfg, "run", "--quiet", "--json", "--run-id", "snap", "-w", "2", "-t",
            "one", "-t", "two", "-t", "three",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        text(&out).contains("fanout: error: the tamper snapshot: "),
        "{}",
        text(&out)
    );
    let ran = std::fs::read_to_string(&trace).unwrap_or_default();
    assert_eq!(ran, "", "an agent ran before the snapshot was taken");
    assert_no_orphan_worktree(&t, "snap");

    std::fs::write(&index, good).unwrap();
    let out = t
        .fanout(&["--config", cfg, "resume", "--json", "snap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["totals"]["success"], 3, "{report:#}");
    let ran = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(ran.lines().filter(|l| l.starts_with("start")).count(), 3);
    assert_no_orphan_worktree(&t, "snap");
}

/// A run of 5 workers, one at a time: the agents of workers 1–4 end on their own with
/// reasons worded like fanout's own causes (`interrupted` — what architect says of a
/// user interrupt —, `not started…`, `internal error…`); worker 5's agent hangs on its
/// first run only. Caught while worker 5 hangs.
struct Worded {
    t: TestEnv,
    cfg: PathBuf,
    trace: PathBuf,
    script: PathBuf,
    child: Child,
}

/// The tasks of [`Worded`]: `status|reason` the agent reports, and the one that hangs.
const WORDED: [&str; 5] = [
    "partial|interrupted",
    "failed|interrupted by the user",
    "failed|not started: x",
    "partial|internal error: y",
    "hang",
];

impl Worded {
    fn start(run_id: &str) -> Worded {
        let t = TestEnv::new();
        let trace = t.shared().join("trace.log");
        let hang = t.shared().join("hang-once");
        std::fs::write(&hang, "").unwrap();
        let script = t.root().join("worded-agent.sh");
        std::fs::write(
            &script,
            format!(
                "echo \"start $FANOUT_WORKER_ID\" >> '{trace}'\n\
                 echo \"$FANOUT_TASK\" > \"w$FANOUT_WORKER_ID.txt\"\n\
                 case \"$FANOUT_TASK\" in\n\
                 hang) if rm '{hang}' 2>/dev/null; then sleep 3600; fi\n\
                 \x20 echo '{{\"status\":\"success\"}}' > \"$FANOUT_RESULT\" ;;\n\
                 *) printf '{{\"status\":\"%s\",\"reason\":\"%s\"}}' \"${{FANOUT_TASK%%|*}}\" \"${{FANOUT_TASK#*|}}\" > \"$FANOUT_RESULT\" ;;\n\
                 esac\n",
                trace = trace.display(),
                hang = hang.display(),
            ),
        )
        .unwrap();
        let cfg = t.config(&format!(
            "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, '{}']\n    writable: ['{}']\n",
            t.worktrees.display(),
            script.display(),
            t.shared().display(),
        ));
        let mut child = one_at_a_time(&t, &cfg, run_id, &WORDED)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let w4 = t.run_dir(run_id).join("results/w4.json");
        if !wait_until(Duration::from_secs(60), || w4.is_file() && !hang.exists()) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("worker 5 should be hanging: {}", text(&out));
        }
        Worded {
            t,
            cfg,
            trace,
            script,
            child,
        }
    }

    /// Worker ids in the order their agents started.
    fn starts(&self) -> Vec<String> {
        let trace = std::fs::read_to_string(&self.trace).unwrap_or_default();
        trace
            .lines()
            .filter_map(|l| l.strip_prefix("start "))
            .map(str::to_owned)
            .collect()
    }

    /// The commits of the branches `results` name.
    fn branches(&self, results: &[serde_json::Value]) -> Vec<(String, String)> {
        results
            .iter()
            .map(|r| {
                let b = r["branch"].as_str().unwrap().to_owned();
                let at = self.t.git(&["rev-parse", &b]).trim().to_owned();
                assert_eq!(r["commit"].as_str(), Some(at.as_str()), "{r}");
                (b, at)
            })
            .collect()
    }

    /// Resume the run: only worker 5's agent runs again; workers 1–4 keep their words,
    /// their cause and their branches (`kept`); worker 5 succeeds.
    fn resume_keeps(&self, run_id: &str, extra: &[&str], kept: &[(String, String)]) {
        let mut args = vec!["--config", self.cfg.to_str().unwrap(), "resume", run_id];
        args.extend(["--quiet", "--json"]);
        args.extend_from_slice(extra);
        let out = self.t.fanout(&args).output().unwrap();
        let said = text(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no JSON report ({e}): {said}"));
        assert!(
            said.contains("running #5; keeping #1, #2, #3, #4"),
            "{said}"
        );
        assert_eq!(self.starts(), ["1", "2", "3", "4", "5", "5"], "{said}");
        let results = report["results"].as_array().unwrap();
        check_worded(&results[..4]);
        assert_eq!(results[4]["status"], "success", "{:#}", results[4]);
        assert_eq!(
            self.branches(&results[..4]),
            kept,
            "branches kept as they were"
        );
    }
}

/// Workers 1–4 (`results`) keep their agents' words under the cause `worker`.
fn check_worded(results: &[serde_json::Value]) {
    let got: Vec<(&str, &str, &str)> = results
        .iter()
        .map(|r| {
            let reason = r["reason"].as_str().unwrap_or("");
            let words = reason.split(" — log: ").next().unwrap();
            let cause = r["cause"].as_str().unwrap_or("");
            (r["status"].as_str().unwrap(), cause, words)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("partial", "worker", "interrupted"),
            ("failed", "worker", "interrupted by the user"),
            ("failed", "worker", "not started: x"),
            ("partial", "worker", "internal error: y"),
        ],
        "{results:#?}"
    );
}

#[test]
fn an_agents_words_never_make_resume_run_its_finished_worker_again_after_sigint() {
    let mut h = Worded::start("worded-int");
    kill(Pid::from_raw(h.child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait_child(&mut h.child, Duration::from_secs(45));
    assert_eq!(status.code(), Some(130));
    let report = h.t.results("worded-int");
    let results = report["results"].as_array().unwrap();
    check_worded(&results[..4]);
    let last = (&results[4]["status"], &results[4]["cause"]);
    assert_eq!(
        last,
        (&"failed".into(), &"interrupted".into()),
        "{report:#}"
    );
    h.resume_keeps("worded-int", &[], &h.branches(&results[..4]));
}

#[test]
fn an_agents_words_never_make_resume_run_its_finished_worker_again_after_sigkill() {
    let mut h = Worded::start("worded-kill");
    h.child.kill().unwrap();
    h.child.wait().unwrap();
    let dir = h.t.run_dir("worded-kill");
    assert!(!dir.join("results.json").exists());
    let records: Vec<serde_json::Value> = (1..=4)
        .map(|id| {
            let bytes = std::fs::read(dir.join(format!("results/w{id}.json"))).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .collect();
    check_worded(&records);
    h.resume_keeps("worded-kill", &["--stop-survivors"], &h.branches(&records));
    let script = h.script.to_str().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(script).is_empty()),
        "survivors: {:?}",
        processes_with(script)
    );
}

/// How far `fanout run` got making a worktree (`src/run/worktree.rs`, step by step)
/// when it was killed: what a SIGKILL can leave of `.git/worktrees/<name>` (the admin
/// dir) and of the worktree directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    /// The admin dir made, empty.
    AdminDir,
    /// ... with its `locked` file.
    Locked,
    /// ... and the worktree directory, empty.
    WorktreeDir,
    /// ... `HEAD` and `objects/` in the admin dir.
    Head,
    /// ... `commondir` and `gitdir`; the worktree has no `.git` yet.
    Gitdir,
    /// As the kill in the checkout left it: `.git` written, part of the files checked
    /// out, still locked.
    Checkout,
    /// Checked out and unlocked, but the journal not yet told.
    Unlocked,
}

const CUTS: [Cut; 7] = [
    Cut::AdminDir,
    Cut::Locked,
    Cut::WorktreeDir,
    Cut::Head,
    Cut::Gitdir,
    Cut::Checkout,
    Cut::Unlocked,
];

/// A repository whose `data.dat` goes through the user's `stall` smudge filter (in
/// their global git configuration, so fanout's checkouts run it): for a run named by
/// a file `stall-<run>` in the filter's folder, it takes that file, writes its pid and
/// its parent's (git's), and hangs; otherwise it passes the data through.
fn stalling_repo() -> (TestEnv, PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let t = TestEnv::new();
    let dir = t.root().join("filters");
    std::fs::create_dir_all(&dir).unwrap();
    let smudge = dir.join("stall");
    std::fs::write(
        &smudge,
        format!(
            "#!/bin/sh\nrun=$(basename \"$(dirname \"$PWD\")\")\nif [ -e '{d}'/stall-\"$run\" ]; then\n  rm '{d}'/stall-\"$run\"\n  echo \"$$ $PPID\" > '{d}'/stalled-\"$run\".tmp\n  mv '{d}'/stalled-\"$run\".tmp '{d}'/stalled-\"$run\"\n  exec sleep 600\nfi\nexec cat\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&smudge, std::fs::Permissions::from_mode(0o755)).unwrap();
    let global = t.root().join("gitconfig");
    std::fs::write(
        &global,
        format!(
            "[filter \"stall\"]\n\tsmudge = {}\n\tclean = cat\n\trequired = true\n",
            smudge.display()
        ),
    )
    .unwrap();
    t.write(".gitattributes", "*.dat filter=stall\n");
    t.write("data.dat", "payload\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "data"]);
    (t, dir, global)
}

/// Whether process `pid` is alive (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// `fanout run --run-id <run>` of one task, SIGKILLed while git checks out its
/// worktree (the checkout's filter stalls), the checkout then stopped too; then the
/// worktree cut back to what a kill at `cut` leaves.
fn killed_making_worktree(
    t: &TestEnv,
    cfg: &Path,
    filters: &Path,
    global: &Path,
    run: &str,
    cut: Cut,
) {
    std::fs::write(filters.join(format!("stall-{run}")), "").unwrap();
    let mut child = one_at_a_time(t, cfg, run, &["one"])
        .env("GIT_CONFIG_GLOBAL", global)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stalled = filters.join(format!("stalled-{run}"));
    if !wait_until(Duration::from_secs(60), || stalled.is_file()) {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "the checkout should have stalled: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let pids: Vec<i32> = std::fs::read_to_string(&stalled)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    kill(Pid::from_raw(pids[0]), Signal::SIGKILL).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || !alive(pids[0])
            && !alive(pids[1])),
        "the stalled checkout should end with its filter"
    );
    let path = t.worktrees.join(run).join("w1");
    let admin = t.repo.join(format!(".git/worktrees/fanout-{run}-w1"));
    assert!(admin.join("locked").is_file(), "killed while making it");
    assert!(path.join(".git").is_file());
    assert!(
        !path.join("data.dat").exists(),
        "killed before the checkout was done"
    );
    cut_back(t, &admin, &path, global, cut);
}

/// Leave of `admin` and the worktree `path` (as the kill in the checkout left them)
/// only what a kill at `cut` leaves.
fn cut_back(t: &TestEnv, admin: &Path, path: &Path, global: &Path, cut: Cut) {
    let rm = |p: &Path| {
        if p.is_dir() {
            std::fs::remove_dir_all(p).unwrap();
        } else if p.exists() {
            std::fs::remove_file(p).unwrap();
        }
    };
    if cut == Cut::Unlocked {
        // git finishes the checkout, then fanout unlocks it.
        t.command("git", path)
            .env("GIT_CONFIG_GLOBAL", global)
            .env("GIT_DIR", admin)
            .env("GIT_WORK_TREE", path)
            .args(["read-tree", "--reset", "-u", "HEAD"])
            .status()
            .unwrap()
            .success()
            .then_some(())
            .expect("the checkout finishes");
        assert_eq!(std::fs::read(path.join("data.dat")).unwrap(), b"payload\n");
        rm(&admin.join("locked"));
        return;
    }
    if cut == Cut::Checkout {
        return;
    }
    let kept: &[&str] = match cut {
        Cut::AdminDir => &[],
        Cut::Locked | Cut::WorktreeDir => &["locked"],
        Cut::Head => &["locked", "HEAD", "objects"],
        _ => &["locked", "HEAD", "objects", "commondir", "gitdir"],
    };
    for e in std::fs::read_dir(admin).unwrap().flatten() {
        if !kept.contains(&e.file_name().to_str().unwrap()) {
            rm(&e.path());
        }
    }
    if cut < Cut::WorktreeDir {
        rm(path);
        let _ = std::fs::remove_dir(path.parent().unwrap());
    } else {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            rm(&e.path());
        }
    }
}

/// fanout killed at any point of making a worktree: `fanout resume` makes it afresh and
/// finishes the worker (its branch holds the agent's change alone, no WIP branch is
/// made of the half-made checkout), and nothing half-made is left.
#[test]
fn resume_after_a_kill_while_making_a_worktree_finishes_the_worker() {
    let (t, filters, global) = stalling_repo();
    let cfg = t.fake_config(&[], "");
    let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    for cut in CUTS {
        let run = format!("cut-{}", format!("{cut:?}").to_lowercase());
        killed_making_worktree(&t, &cfg, &filters, &global, &run, cut);
        let out = t
            .fanout(&[
                "--config",
                cfg.to_str().unwrap(),
                "resume",
                &run,
                "--quiet",
                "--json",
            ])
            .env("GIT_CONFIG_GLOBAL", &global)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{cut:?}: {}", text(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &report["results"][0];
        assert_eq!(r["status"], "success", "{cut:?}: {r}");
        let branch = r["branch"].as_str().unwrap();
        assert_eq!(
            t.git(&["diff", "--name-only", &base, branch]),
            "fanout-demo/w1.md\n",
            "{cut:?}"
        );
        assert_eq!(
            t.git(&["rev-list", "--count", &format!("{base}..{branch}")]),
            "1\n",
            "{cut:?}"
        );
        let ours: Vec<String> = t
            .branches()
            .into_iter()
            .filter(|b| b.contains(&run))
            .collect();
        assert_eq!(ours, [branch.to_owned()], "{cut:?}: no WIP branch");
        // One worktree of the run, made afresh, and nothing half-made beside it.
        let admins: Vec<String> = std::fs::read_dir(t.repo.join(".git/worktrees"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("fanout-{run}-")))
            .collect();
        assert_eq!(admins, [format!("fanout-{run}-w1")], "{cut:?}");
        let admin = t.repo.join(".git/worktrees").join(&admins[0]);
        assert!(!admin.join("locked").exists(), "{cut:?}");
        let trees: Vec<_> = std::fs::read_dir(t.worktrees.join(&run))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(trees, ["w1"], "{cut:?}");
        let wt = t.worktrees.join(&run).join("w1");
        assert_eq!(
            std::fs::read(wt.join("data.dat")).unwrap(),
            b"payload\n",
            "{cut:?}"
        );
    }
}

/// fanout killed at any point of making a worktree: `fanout cleanup` removes what it
/// left (worktree directory, admin dir, the run's records) and nothing of the user's:
/// their files, branches and own worktree stay as they were.
#[test]
fn cleanup_after_a_kill_while_making_a_worktree_removes_it_and_nothing_else() {
    let (t, filters, global) = stalling_repo();
    let cfg = t.fake_config(&[], "");
    let mine = t.root().join("mine");
    t.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "mine",
        mine.to_str().unwrap(),
    ]);
    std::fs::write(mine.join("notes.txt"), "the user's\n").unwrap();
    for cut in CUTS {
        let run = format!("cut-{}", format!("{cut:?}").to_lowercase());
        killed_making_worktree(&t, &cfg, &filters, &global, &run, cut);
        let (files, branches) = (t.snapshot(), t.branches());
        let out = t
            .fanout(&["--config", cfg.to_str().unwrap(), "cleanup", "--run", &run])
            .env("GIT_CONFIG_GLOBAL", &global)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{cut:?}: {}", text(&out));
        let admin = t.repo.join(format!(".git/worktrees/fanout-{run}-w1"));
        assert!(!admin.exists(), "{cut:?}: {}", text(&out));
        assert!(!t.worktrees.join(&run).exists(), "{cut:?}: {}", text(&out));
        assert!(!t.run_dir(&run).exists(), "{cut:?}: {}", text(&out));
        assert_eq!(t.snapshot(), files, "{cut:?}");
        assert_eq!(t.branches(), branches, "{cut:?}");
        assert_eq!(
            std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
            "the user's\n"
        );
        assert!(
            t.repo.join(".git/worktrees/mine/gitdir").is_file(),
            "{cut:?}"
        );
    }
}

/// A worktree fanout could not make (a directory of the user's is at its path) is no
/// longer in the journal: `fanout cleanup` leaves that directory as it was.
#[test]
fn a_worktree_not_made_is_not_journaled_and_cleanup_leaves_what_was_there() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let theirs = t.worktrees.join("taken").join("w1");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("mine.txt"), "the user's\n").unwrap();
    let out = one_at_a_time(&t, &cfg, "taken", &["one"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = report["results"][0]["reason"].to_string();
    assert!(reason.contains("already exists"), "{}", text(&out));
    let bytes = std::fs::read(t.run_dir("taken").join("journal.json")).unwrap();
    let journal: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        journal["entries"][0]["worktree_created"], false,
        "{journal:#}"
    );
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "cleanup",
            "--run",
            "taken",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(theirs.join("mine.txt")).unwrap(),
        "the user's\n"
    );
}
