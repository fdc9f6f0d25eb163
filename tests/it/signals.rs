//! Signals to fanout mid-run: every worker still gets a result row, the report is
//! written, the exit code is 130, and no agent process survives.

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
