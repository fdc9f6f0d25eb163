//! What `fanout resume` needs to know about a run that a crash or a signal cut short.
//!
//! * Each worker's result is recorded in `<run dir>/results/w<N>.json` as soon as it is
//!   final (written atomically), so even a run whose fanout was SIGKILLed — no
//!   `results.json`, only the journal — still knows which workers finished.
//! * A worker *finished* when it reached a final status on its own: its agent ran to
//!   its end (success, partial, failed, timeout), or it could not run for a reason a
//!   second attempt would meet again (no worktree, a dependency that did not succeed).
//!   A worker stopped or never started because fanout was interrupted, held back by
//!   the run's budget or its tamper snapshot, or lost to an internal error did not (its
//!   record's `cause`, never its words: [`crate::model::Cause`]); neither did a worker
//!   with no record. Resuming is not retrying failures.
//! * Every process group fanout supervises is recorded next to its log while it lives
//!   ([`crate::run::process::group_record_path`]); a crashed fanout cannot stop its
//!   agents, so [`survivors`] tells which of those groups are still alive.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::model::{Reason, WorkerResult};
use crate::plan::Plan;
use crate::util::{read_capped, write_atomic};

/// Folder of the per-worker result records in a run directory.
pub const RECORDS_DIR: &str = "results";
/// File holding the number of the run's latest attempt (absent: 1).
pub const ATTEMPT_FILE: &str = "attempt";

/// Where worker `id`'s result is recorded.
pub fn record_path(run_dir: &Path, id: u32) -> PathBuf {
    run_dir.join(RECORDS_DIR).join(format!("w{id}.json"))
}

/// Record a worker's final result (atomically).
pub fn record(run_dir: &Path, result: &WorkerResult) -> std::io::Result<()> {
    std::fs::create_dir_all(run_dir.join(RECORDS_DIR))?;
    let mut json = serde_json::to_vec_pretty(result).expect("result serializes");
    json.push(b'\n');
    crate::util::sign::write_signed(&record_path(run_dir, result.worker_id), &json)
}

/// Whether `result` is final: see the module docs.
pub fn finished(result: &WorkerResult) -> bool {
    result.reason.as_ref().is_none_or(Reason::is_final)
}

/// A worker's record from its bytes.
pub fn parse_record(bytes: &[u8]) -> Result<WorkerResult, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// Worker `id`'s record in `run_dir`, when it has a readable one fanout signed (one
/// that does not verify is said, and counts as none: the worker runs again).
pub fn read_record(run_dir: &Path, id: u32) -> Option<WorkerResult> {
    parse_record(&verified(&record_path(run_dir, id))?).ok()
}

/// The finished workers of `plan` in `run_dir`, by id: from their records, else (for a
/// run made before records existed) from `results.json`.
pub fn load_finished(run_dir: &Path, plan: &Plan) -> BTreeMap<u32, WorkerResult> {
    let report = super::results::read_report(run_dir);
    let mut out = BTreeMap::new();
    for w in &plan.workers {
        let recorded = read_record(run_dir, w.id).or_else(|| {
            let r = report.as_ref()?.result(w.id)?;
            // Selection is recomputed over the merged results.
            Some(WorkerResult {
                selection: None,
                ..r.clone()
            })
        });
        if let Some(r) = recorded.filter(|r| r.worker_id == w.id && finished(r)) {
            out.insert(w.id, r);
        }
    }
    out
}

/// A record's bytes when fanout signed it; one that does not verify is said and
/// ignored (its worker runs again).
fn verified(path: &Path) -> Option<Vec<u8>> {
    match crate::util::sign::read_signed(path) {
        Ok(b) => Some(b),
        Err(e) if e.is_missing() => None,
        Err(e) => {
            crate::util::out::errln!("fanout: warning: {e}");
            None
        }
    }
}

/// The run's latest attempt (1 until it is resumed).
pub fn attempt(run_dir: &Path) -> u32 {
    parse_attempt(&read_capped(&run_dir.join(ATTEMPT_FILE), 64).unwrap_or_default())
}

/// The attempt number an `attempt` file's bytes hold: 1 when they hold none (never 0).
pub fn parse_attempt(bytes: &[u8]) -> u32 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(1)
}

/// Note that attempt `n` of the run is starting.
pub fn set_attempt(run_dir: &Path, n: u32) -> std::io::Result<()> {
    write_atomic(&run_dir.join(ATTEMPT_FILE), format!("{n}\n").as_bytes())
}

/// A process group of an earlier attempt that is still alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    /// The process group id.
    pub pgid: i32,
    /// The program fanout started as its leader.
    pub program: String,
    /// The record naming it.
    pub record: PathBuf,
    /// Its live processes fanout cannot prove it started ([`super::groups::unproven`]).
    pub unproven: Vec<(i32, String)>,
}

/// The recorded process groups of `run_dir` that are still alive and still fanout's
/// ([`super::groups::alive`]): found by the group ids fanout recorded, whatever
/// program the group runs now (an agent that exec'd another, or died leaving
/// background children, is found). A record fanout did not sign is said and never
/// acted on; records of groups that are gone are removed.
pub fn survivors(run_dir: &Path) -> Vec<Survivor> {
    let Ok(rd) = std::fs::read_dir(run_dir.join("logs")) else {
        return Vec::new();
    };
    let mut records: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pgid"))
        .collect();
    records.sort();
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    for record in records {
        match super::groups::read(&record) {
            Ok(g) if super::groups::alive(&g) => out.push(Survivor {
                unproven: super::groups::unproven(&g, &run_id),
                pgid: g.pgid,
                program: g.program,
                record,
            }),
            Ok(_) => {
                let _ = std::fs::remove_file(&record);
                let _ = std::fs::remove_file(crate::util::sign::sig_path(&record));
            }
            Err(e) => crate::util::out::errln!("fanout: warning: {e}; that group is not signalled"),
        }
    }
    out
}

/// A process-group record's `(pgid, program)` ([`super::groups::parse`]).
pub fn parse_group_record(bytes: &[u8]) -> Option<(i32, String)> {
    super::groups::parse(bytes).map(|g| (g.pgid, g.program))
}

/// Stop `groups`: SIGTERM, up to `grace` for them to go, then SIGKILL. Returns the
/// groups still alive afterwards (none, normally). Their records are removed once
/// they are gone.
pub fn stop_survivors(groups: &[Survivor], grace: Duration) -> Vec<Survivor> {
    // Alive: its record, re-read, names a group still alive.
    let alive =
        |s: &Survivor| super::groups::read(&s.record).is_ok_and(|g| super::groups::alive(&g));
    let wait = |limit: Duration| {
        let until = Instant::now() + limit;
        while groups.iter().any(alive) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for s in groups {
        let _ = killpg(Pid::from_raw(s.pgid), Signal::SIGTERM);
    }
    wait(grace);
    for s in groups.iter().filter(|s| alive(s)) {
        let _ = killpg(Pid::from_raw(s.pgid), Signal::SIGKILL);
    }
    wait(Duration::from_secs(5));
    let left: Vec<Survivor> = groups.iter().filter(|s| alive(s)).cloned().collect();
    for s in groups.iter().filter(|s| !left.contains(s)) {
        let _ = std::fs::remove_file(&s.record);
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn result(id: u32, status: Status, reason: Option<Reason>) -> WorkerResult {
        let branch = format!("fanout/r/w{id}");
        WorkerResult {
            reason,
            ..WorkerResult::new(id, &branch, "t", "fake", status)
        }
    }

    fn own(words: &str) -> Option<Reason> {
        Some(Reason::from(words))
    }

    fn plan(workers: u32) -> Plan {
        let flags = crate::plan::settings::PlanFlags {
            workers: Some(workers),
            ..Default::default()
        };
        crate::plan::assign::of_text("tasks: [t]\n", &flags)
    }

    #[test]
    fn finished_means_a_final_status_of_its_own() {
        use Status::*;
        assert!(finished(&result(1, Success, None)));
        assert!(finished(&result(1, Unchanged, None)));
        assert!(finished(&result(1, Failed, own("agent changed no files"))));
        assert!(finished(&result(1, Timeout, own("timed out after 5s"))));
        assert!(finished(&result(1, Skipped, own("dependency a failed"))));
        // An agent's words are its own, whatever they say.
        assert!(finished(&result(
            1,
            Success,
            own("interrupted by the user")
        )));
        assert!(finished(&result(1, Failed, own("internal error: y"))));
        for cause in [
            Reason::interrupted(),
            Reason::interrupted_with(" during checks"),
            Reason::budget_spent(1.0, 1.2),
            Reason::snapshot_failed("x"),
            Reason::internal_error("worker task panicked"),
        ] {
            assert!(!finished(&result(1, Failed, Some(cause))));
        }
    }

    #[test]
    fn records_win_over_results_json_and_unfinished_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let plan = plan(4);
        // Worker 1 recorded as a success; worker 2 recorded as interrupted; worker 3
        // only in an old results.json (failed on its own); worker 4 nowhere.
        record(d, &result(1, Status::Success, None)).unwrap();
        record(d, &result(2, Status::Failed, Some(Reason::interrupted()))).unwrap();
        let mut old = result(3, Status::Failed, own("exit 1"));
        old.selection = Some(crate::model::Selection {
            task: "t".into(),
            score: 1.0,
            rank: 1,
            winner: false,
            terms: Default::default(),
        });
        let report = serde_json::json!({
            "schema_version": 1, "run_id": "r", "started_at": "", "finished_at": "",
            "duration": 0.0, "interrupted": true, "plan": plan,
            "results": [
                result(1, Status::Failed, Some(Reason::interrupted())),
                result(2, Status::Failed, Some(Reason::interrupted())),
                old,
            ],
            "totals": crate::model::Totals::default(), "exit_code": 130,
        });
        crate::util::sign::write_signed(&d.join("results.json"), report.to_string().as_bytes())
            .unwrap();
        let kept = load_finished(d, &plan);
        assert_eq!(kept.keys().copied().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(kept[&1].status, Status::Success);
        assert_eq!(kept[&3].selection, None);
        assert_eq!(attempt(d), 1);
        set_attempt(d, 2).unwrap();
        assert_eq!(attempt(d), 2);
    }

    #[test]
    fn group_records_and_attempts_that_say_nothing_are_refused() {
        assert_eq!(
            parse_group_record(b"4242\nclaude\n"),
            Some((4242, "claude".to_owned()))
        );
        for bad in [
            &b"4242\n\n"[..],
            b"4242\n",
            b"4242",
            b"1\nsh\n",
            b"0\nsh\n",
            b"-5\nsh\n",
            b"x\nsh\n",
            b"\xff\nsh\n",
        ] {
            assert_eq!(parse_group_record(bad), None, "{bad:?}");
        }
        assert_eq!(parse_attempt(b"3\n"), 3);
        for bad in [&b""[..], b"0", b"-1", b"many", b"99999999999"] {
            assert_eq!(parse_attempt(bad), 1, "{bad:?}");
        }
    }

    #[test]
    fn a_record_naming_no_program_is_no_survivor() {
        // A live group whose record names no program: an empty name would match any
        // process, so `resume --stop-survivors` would signal a group fanout never made.
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let sign = crate::util::sign::write_signed;
        sign(&logs.join("w1.pgid"), format!("{}\n\n", c.id()).as_bytes()).unwrap();
        let found = survivors(dir.path());
        crate::run::groups::record(&logs.join("w2.pgid"), c.id() as i32, "sleep").unwrap();
        let named = survivors(dir.path());
        let _ = c.kill();
        let _ = c.wait();
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!(named[0].program, "sleep");
    }

    #[test]
    fn records_of_dead_groups_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // A child that has exited (and been reaped): its group is gone.
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        crate::run::groups::record(&logs.join("w1.pgid"), pid as i32, "true").unwrap();
        // A record fanout did not sign is never acted on (nor removed).
        std::fs::write(
            logs.join("w2.pgid"),
            format!("{}\nsh\n", std::process::id()),
        )
        .unwrap();
        assert!(survivors(dir.path()).is_empty());
        assert!(!logs.join("w1.pgid").exists());
        assert!(logs.join("w2.pgid").exists());
    }
}
