//! Signals to fanout mid-run: every worker still gets a result row, the report is
//! written, the exit code is 130, and no agent process survives. And the harvest
//! child: deaf to stop signals (the run decides), gone with the run that started it.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

struct Interrupted {
    report: serde_json::Value,
    code: Option<i32>,
    mark: String,
    env: TestEnv,
}

/// Start 4 tasks on 3 workers whose agents hang; once all 3 run, send `signals`.
fn interrupt(signals: &[Signal], agent_extra: &[&str], grace: u32) -> Interrupted {
    let t = TestEnv::new();
    let mark = marker("signal");
    let trace = t.shared().join("trace.log");
    let trace_s = trace.display().to_string();
    let mut args = vec![
        "--spawn", "2", "--marker", &mark, "--sleep", "600", "--trace", &trace_s,
    ];
    args.extend_from_slice(agent_extra);
    let cfg = t.fake_config(&args, &format!("kill_grace: {grace}\n"));
    let mut child = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "3",
            "-t",
            "a",
            "-t",
            "b",
            "-t",
            "c",
            "-t",
            "d",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&trace)
            .map(|s| s.lines().filter(|l| l.starts_with("start")).count() == 3)
            .unwrap_or(false)
    });
    if !started {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "three agents should have started; trace:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&trace).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // give the agents a moment to start their children too
    assert!(wait_until(Duration::from_secs(10), || processes_with(
        &mark
    )
    .len()
        >= 9));
    let pid = Pid::from_raw(child.id() as i32);
    for (i, sig) in signals.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(300));
        }
        kill(pid, *sig).unwrap();
    }
    let status = wait_child(&mut child, Duration::from_secs(45));
    let out = child.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Interrupted {
        report,
        code: status.code(),
        mark,
        env: t,
    }
}

fn check(i: &Interrupted) {
    assert_eq!(i.code, Some(130));
    let results = i.report["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "every worker has a row");
    for r in results {
        assert_eq!(r["status"], "failed", "{r}");
        assert!(
            r["reason"].as_str().unwrap().starts_with("interrupted"),
            "{r}"
        );
    }
    // the queued worker never got a worktree
    assert_eq!(results[3]["worktree_path"], serde_json::Value::Null);
    // but the started ones kept their work, committed
    assert_eq!(
        results[0]["files_modified"],
        serde_json::json!(["fanout-demo/w1.md"])
    );
    assert_eq!(i.report["interrupted"], true);
    assert_eq!(i.report["exit_code"], 130);
    let run = &i.env.runs()[0];
    let dir = i.env.run_dir(run);
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(on_disk, i.report);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("(interrupted)"), "{md}");
    assert!(
        wait_until(Duration::from_secs(5), || processes_with(&i.mark)
            .is_empty()),
        "survivors: {:?}",
        processes_with(&i.mark)
    );
}

#[test]
fn sigint_mid_run_stops_everything_and_still_reports() {
    check(&interrupt(&[Signal::SIGINT], &[], 5));
}

#[test]
fn sigterm_mid_run_stops_everything_and_still_reports() {
    check(&interrupt(&[Signal::SIGTERM], &[], 5));
}

#[test]
fn a_second_signal_kills_agents_that_ignore_sigterm() {
    // With a 300 s grace, only the second signal can end this run within the bound.
    let i = interrupt(&[Signal::SIGINT, Signal::SIGINT], &["--ignore-term"], 300);
    check(&i);
}

/// The signals a process ignores, from `/proc/<pid>/status` (0 when it is gone).
fn ignored_signals(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0)
}

/// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
    })
}

const STOP_SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

fn all_stop_signals_ignored(pid: u32) -> bool {
    let ignored = ignored_signals(pid);
    STOP_SIGNALS
        .iter()
        .all(|s| ignored & (1u64 << (*s as i32 - 1)) != 0)
}

#[test]
fn a_harvest_child_ignores_stop_signals_and_refuses_a_parent_not_its_own() {
    use std::io::Write;
    // Started as a run starts it: told the pid of its parent, waiting for its request.
    let mut child = std::process::Command::new(FANOUT)
        .args(["harvest-worker", &std::process::id().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(
        wait_until(Duration::from_secs(20), || all_stop_signals_ignored(pid)),
        "SigIgn {:x}",
        ignored_signals(pid)
    );
    for s in STOP_SIGNALS {
        kill(Pid::from_raw(pid as i32), s).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "a stop signal ended it"
    );
    // A request that is no request: it says so, and answers nothing.
    child.stdin.take().unwrap().write_all(b"{not json").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fanout: error: the request:"), "{err}");

    // Told a parent that is not its own (fanout died and it was adopted): it stops.
    let out = std::process::Command::new(FANOUT)
        .args(["harvest-worker", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fanout is gone"), "{err}");
}

#[test]
fn a_harvest_child_dies_with_the_process_that_started_it() {
    // A shell stands for the run: it starts the child, says its pid, and ends when told.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("request");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Held open for writing (read-write: no wait for a reader): the child's request
    // never ends, so only its parent's death can end it.
    let _held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let mut shell = std::process::Command::new("sh")
        .args([
            "-c",
            r#""$0" harvest-worker $$ < "$1" & echo $!; read _"#,
            FANOUT,
            fifo.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(shell.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    assert!(wait_until(Duration::from_secs(20), || {
        all_stop_signals_ignored(pid)
    }));
    // Its death signal is asked for right after the signals are ignored.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!ended(pid), "it ended while its parent lived");
    drop(shell.stdin.take());
    shell.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || ended(pid)),
        "the harvest child outlived its parent"
    );
}
