//! Nothing outlives its worker, and stopping is prompt and truthful: each worker's
//! processes run under a supervisor of their own (a child subreaper), so an exited
//! child is reaped, not waited for; a daemon that forked twice is stopped before that
//! worker's harvest; and the reason says how the agent was stopped.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A config whose agent is the fake agent behind a shell wrapper that leaves a child
/// which exits at once (and is never waited for: the wrapper execs the agent).
fn wrapped(t: &TestEnv, agent_args: &[&str], grace: u32) -> String {
    let mut items = vec![
        "sh".to_owned(),
        "-c".into(),
        "'true & exec \"$@\"'".into(),
        "wrapper".into(),
    ];
    let inner = TestEnv::fake_agent_yaml(agent_args);
    items.push(
        inner
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
    );
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: wrapped\nworktree_dir: '{}'\nkill_grace: {grace}\nagents:\n  wrapped:\n    command: [{}]\n    writable: ['{}']\n",
        t.worktrees.display(),
        items.join(", "),
        t.shared().display(),
    ));
    cfg.display().to_string()
}

#[test]
fn an_exited_child_of_a_shell_wrapper_is_reaped_not_waited_for() {
    let t = TestEnv::new();
    let cfg = wrapped(&t, &[], 30);
    let out = t.run_ok(&["--config", &cfg, "run", "--json", "-w", "1", "quick"]);
    let report = json(&out);
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["reason"], serde_json::Value::Null, "{r}");
    // The run (worktree, agent, harvest, report) against the agent's own time: the
    // exited child cost nothing (it used to be counted as a live member for 5 s).
    let run = report["duration"].as_f64().unwrap();
    let agent = r["duration"].as_f64().unwrap();
    assert!(run - agent < 4.0, "run {run}s, agent {agent}s");
}

#[test]
fn ctrl_c_on_an_agent_that_honours_sigterm_returns_within_the_grace_period() {
    let t = TestEnv::new();
    let trace = t.shared().join("trace.log");
    let trace_s = trace.display().to_string();
    let grace = 20;
    let cfg = wrapped(&t, &["--sleep", "600", "--trace", &trace_s], grace);
    let mut child = t
        .fanout(&["--config", &cfg, "run", "--json", "-w", "1", "slow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&trace).is_ok_and(|s| s.contains("start"))
    }));
    let asked = Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = wait_child(&mut child, Duration::from_secs(60));
    let took = asked.elapsed();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = &json(&out)["results"][0];
    assert_eq!(
        r["reason"], "interrupted; the agent honoured SIGTERM",
        "{r}"
    );
    assert!(took < Duration::from_secs(grace.into()), "{took:?}");
}

/// The agent's script: its work, then a daemon that forks twice (`setsid`) and keeps
/// rewriting a file of the worktree (whole: by rename), started before the agent
/// exits.
fn daemon_script(mark: &str) -> String {
    format!(
        r#"echo work > work.txt
( setsid sh -c 'n=0; while :; do n=$((n+1)); echo $n > daemon.tmp; mv daemon.tmp daemon.txt; done # {mark}' </dev/null >/dev/null 2>&1 & )
while [ ! -s daemon.txt ]; do sleep 0.01; done
exit 0
"#
    )
}

#[test]
fn a_double_forked_daemon_is_gone_before_its_workers_harvest() {
    let t = TestEnv::new();
    let mark = marker("daemon");
    let script = t.root().join("agent.sh");
    std::fs::write(&script, daemon_script(&mark)).unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: d\nworktree_dir: '{}'\nagents:\n  d:\n    command: [sh, '{}']\n",
        t.worktrees.display(),
        script.display(),
    ));
    let cfg = cfg.display().to_string();
    let out = t.run_ok(&["--config", &cfg, "run", "--json", "-w", "1", "daemon"]);
    let r = &json(&out)["results"][0];
    assert_eq!(r["status"], "success", "{r}");
    assert!(
        processes_with(&mark).is_empty(),
        "{:?}",
        processes_with(&mark)
    );
    // What was committed is what the worktree holds after the harvest: the daemon
    // wrote nothing after it (it was stopped before; a daemon still running during or
    // after the harvest leaves a later count in the worktree than in the commit).
    let commit = r["commit"].as_str().unwrap();
    let committed = t.git(&["show", &format!("{commit}:daemon.txt")]);
    let worktree = std::path::PathBuf::from(r["worktree_path"].as_str().unwrap());
    let left = std::fs::read_to_string(worktree.join("daemon.txt")).unwrap();
    assert_eq!(committed.trim(), left.trim());
    assert!(!committed.trim().is_empty());
    let reason = r["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("left processes running; fanout stopped them before harvest"),
        "{r}"
    );
}

/// The agent leaves a chain of processes 60 deep, each in a group of its own and
/// deaf to SIGTERM: all of it is gone before the harvest (killed in one round, not a
/// level a round, which left part of a deeper chain running after the run).
#[test]
fn a_deep_chain_of_processes_is_gone_before_its_workers_harvest() {
    let t = TestEnv::new();
    let mark = marker("chain");
    let done = t.shared().join("leaf");
    let script = t.root().join(format!("{mark}.py"));
    std::fs::write(
        &script,
        format!(
            r#"import os, signal, sys, time  # {mark}
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for depth in range(60):
        if os.fork():
            break
        os.setpgid(0, 0)
    else:
        open({done:?}, "w").close()
    while True:
        time.sleep(1)
while not os.path.exists({done:?}):
    time.sleep(0.01)
"#,
            done = done.display().to_string()
        ),
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: c\nworktree_dir: '{}'\nkill_grace: 1\nagents:\n  c:\n    command: [python3, '{}']\n    writable: ['{}']\n",
        t.worktrees.display(),
        script.display(),
        t.shared().display(),
    ));
    let cfg = cfg.display().to_string();
    let out = t
        .fanout(&["--config", &cfg, "run", "--json", "-w", "1", "chain"])
        .output()
        .unwrap();
    let left: Vec<i32> = processes_with(&mark)
        .into_iter()
        .map(|(p, _)| p as i32)
        .collect();
    kill_all(&left);
    assert!(done.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(left.is_empty(), "{} left running", left.len());
}

/// A sandboxed agent cannot kill its supervisor (a Landlock domain of its own, scoped
/// for signals); where the kernel cannot scope signals (Landlock ABI < 6) it can, and
/// the reason says the supervisor was killed.
#[test]
fn a_sandboxed_agent_cannot_kill_its_supervisor() {
    let t = TestEnv::new();
    let script = t.root().join("agent.sh");
    std::fs::write(
        &script,
        "if kill -KILL $PPID 2>/dev/null; then echo killed > k.txt; else echo denied > k.txt; fi\nexit 0\n",
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: k\nworktree_dir: '{}'\nagents:\n  k:\n    command: [sh, '{}']\n",
        t.worktrees.display(),
        script.display(),
    ));
    let cfg = cfg.display().to_string();
    let out = t
        .fanout(&["--config", &cfg, "run", "--json", "-w", "1", "kill"])
        .output()
        .unwrap();
    let r = &json(&out)["results"][0];
    let worktree = std::path::PathBuf::from(r["worktree_path"].as_str().unwrap());
    let said = std::fs::read_to_string(worktree.join("k.txt")).unwrap();
    let reason = r["reason"].as_str().unwrap_or_default();
    if r["sandbox_abi"].as_u64().unwrap_or(0) >= 6 {
        assert_eq!(said.trim(), "denied", "{r}");
        assert_eq!(r["status"], "success", "{r}");
        assert!(!reason.contains("supervisor was killed"), "{r}");
    } else {
        assert_eq!(said.trim(), "killed", "{r}");
        assert!(reason.contains("supervisor was killed"), "{r}");
    }
}

/// Checks run under the same supervision, in order, and stop at the first failure.
#[test]
fn checks_run_in_order_under_supervision_and_stop_at_the_first_failure() {
    let t = TestEnv::new();
    let cfg = t.fake_config(
        &[],
        "checks: ['echo fine; touch ran-1', 'echo broken >&2; exit 3', 'touch ran-3']\n",
    );
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
    assert_eq!(r["status"], "failed", "{r}");
    let checks = r["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2, "{r}");
    assert_eq!(checks[0]["passed"], true);
    assert_eq!(checks[1]["exit_code"], 3);
    assert_eq!(checks[1]["log_tail"], "broken");
    let worktree = std::path::PathBuf::from(r["worktree_path"].as_str().unwrap());
    assert!(worktree.join("ran-1").exists());
    assert!(!worktree.join("ran-3").exists());
}

/// A run whose fanout was SIGKILLed while its agent slept, leaving double-forked
/// daemons (on its first attempt only): one that keeps the environment fanout gave it
/// and, with `cleared`, one that clears it (`env -i`). The worker's supervisor lives on
/// with what it adopted, outside every process group fanout recorded. Returns the
/// config and the daemons' pids (the marked one first), each already running `sleep`.
fn killed_run_with_daemons(t: &TestEnv, cleared: bool) -> (String, Vec<i32>) {
    let shared = t.shared();
    let script = t.root().join("agent.sh");
    let clearing = r#"( setsid sh -c 'echo $$ > "$0/cleared.pid"; exec env -i sleep 600' '{s}' </dev/null >/dev/null 2>&1 & )"#;
    std::fs::write(
        &script,
        format!(
            r#"if [ -e '{s}/first' ]; then echo again > again.txt; exit 0; fi
touch '{s}/first'
echo "$TMPDIR" > '{s}/tmpdir'
( setsid sh -c 'echo $$ > "$0/kept.pid"; exec sleep 600' '{s}' </dev/null >/dev/null 2>&1 & )
{clearing}
exec sleep 600
"#,
            s = shared.display(),
            clearing = if cleared {
                clearing.replace("{s}", &shared.display().to_string())
            } else {
                String::new()
            }
        ),
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: d\nworktree_dir: '{}'\nkill_grace: 1\nagents:\n  d:\n    command: [sh, '{}']\n    writable: ['{}']\n",
        t.worktrees.display(),
        script.display(),
        shared.display(),
    ));
    let cfg = cfg.display().to_string();
    let mut fanout = t
        .fanout(&[
            "--config", &cfg, "run", "--json", "--run-id", "killed", "-w", "1", "x",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let names: &[&str] = if cleared {
        &["kept.pid", "cleared.pid"]
    } else {
        &["kept.pid"]
    };
    let pid = |name: &str| {
        std::fs::read_to_string(shared.join(name))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
    };
    // Each daemon has exec'd its `sleep` (before that, it still has the marks).
    let sleeping = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
    };
    assert!(
        wait_until(Duration::from_secs(60), || names
            .iter()
            .all(|n| pid(n).is_some_and(sleeping))),
        "the agent's daemons did not start"
    );
    fanout.kill().unwrap();
    fanout.wait().unwrap();
    let daemons: Vec<i32> = names.iter().map(|n| pid(n).unwrap()).collect();
    assert!(
        !daemons.iter().any(|&p| gone(p)),
        "a daemon died with fanout"
    );
    (cfg, daemons)
}

/// Whether process `p` has exited.
fn gone(p: i32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    });
    zombie || kill(Pid::from_raw(p), None).is_err()
}

/// `fanout --config cfg command…`: its output, and all it said.
fn fanout_says(t: &TestEnv, cfg: &str, command: &[&str]) -> (std::process::Output, String) {
    let mut args = vec!["--config", cfg];
    args.extend_from_slice(command);
    let out = t.fanout(&args).output().unwrap();
    let said = format!(
        "{command:?}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, said)
}

/// Stop `daemons` (what a failed test left).
fn kill_all(daemons: &[i32]) {
    for &p in daemons {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
}

/// A daemon that kept the run's marks is provably the run's: `command` (resume, or
/// cleanup) stops it without asking, and removes the private directory (`$TMPDIR`'s
/// parent) the killed fanout left.
fn a_marked_daemon_is_stopped_by(command: &[&str]) {
    let t = TestEnv::new();
    let (cfg, daemons) = killed_run_with_daemons(&t, false);
    let tmpdir = std::fs::read_to_string(t.shared().join("tmpdir")).unwrap();
    let private = std::path::Path::new(tmpdir.trim())
        .parent()
        .unwrap()
        .to_owned();
    let left = private.is_dir();
    let (out, said) = fanout_says(&t, &cfg, command);
    let stopped = wait_until(Duration::from_secs(30), || daemons.iter().all(|&p| gone(p)));
    kill_all(&daemons);
    assert!(stopped, "a daemon of the killed run still runs\n{said}");
    assert!(out.status.success(), "{said}");
    assert!(left, "the killed fanout left {}", private.display());
    assert!(!private.exists(), "{} is left\n{said}", private.display());
}

#[test]
fn resume_stops_a_marked_daemon_a_killed_fanouts_supervisor_adopted() {
    a_marked_daemon_is_stopped_by(&["resume", "killed", "--stop-survivors", "--json"]);
}

#[test]
fn cleanup_stops_a_marked_daemon_a_killed_fanouts_supervisor_adopted() {
    a_marked_daemon_is_stopped_by(&["cleanup", "--run", "killed", "--force"]);
}

/// A daemon beneath the run's supervisor that cleared its environment is not provably
/// the run's (it could be a shell the user opened in a tmux server an agent started):
/// `command` (resume, or cleanup) names it, says `--yes`, and stops nothing — the
/// marked daemon neither; with `--yes` both are stopped.
fn an_unmarked_daemon_is_stopped_only_with_yes(command: &[&str], refused: i32) {
    let t = TestEnv::new();
    let (cfg, daemons) = killed_run_with_daemons(&t, true);
    let (out, said) = fanout_says(&t, &cfg, command);
    let running = !daemons.iter().any(|&p| gone(p));
    let named = said.contains(&format!("pid {} (sleep)", daemons[1])) && said.contains("--yes");
    let marked_named = said.contains(&format!("pid {} (sleep)", daemons[0]));
    let mut yes = command.to_vec();
    yes.push("--yes");
    let (again, said_again) = fanout_says(&t, &cfg, &yes);
    let stopped = wait_until(Duration::from_secs(30), || daemons.iter().all(|&p| gone(p)));
    kill_all(&daemons);
    assert!(running, "stopped without --yes\n{said}");
    assert_eq!(out.status.code(), Some(refused), "{said}");
    assert!(named, "the unproven daemon is not named\n{said}");
    assert!(!marked_named, "the marked daemon is named unproven\n{said}");
    assert!(
        stopped,
        "a daemon of the killed run still runs\n{said_again}"
    );
    assert!(again.status.success(), "{said_again}");
}

#[test]
fn resume_stops_a_daemon_that_cleared_its_environment_only_with_yes() {
    an_unmarked_daemon_is_stopped_only_with_yes(
        &["resume", "killed", "--stop-survivors", "--json"],
        2,
    );
}

#[test]
fn cleanup_stops_a_daemon_that_cleared_its_environment_only_with_yes() {
    an_unmarked_daemon_is_stopped_only_with_yes(&["cleanup", "--run", "killed", "--force"], 1);
}
