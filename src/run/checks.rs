//! Checks: the user's commands (`checks:` in fanout.yml) run in a worker's worktree
//! after harvest, on the committed result. They decide success: a worker whose agent
//! claims success is `success` only when every check passes. Each check runs with
//! `sh -c` as its own supervised process group (timeout: SIGTERM, grace, SIGKILL),
//! with the agent's scrubbed environment, in the worker's sandbox when the run has
//! one, its output in its own log file; the result keeps whether it passed, its exit
//! code, duration and the last lines of output.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use tokio::sync::watch;

use crate::model::{CheckResult, timed_out_after};
use crate::plan::Check;
use crate::run::event::StopLevel;
use crate::run::process::{Ending, LiveLimits, ProcessSpec, supervise};

/// Lines of output kept in a check's result.
const TAIL_LINES: usize = 20;
/// Bytes of output kept in a check's result.
const TAIL_BYTES: usize = 4000;

/// The last lines of `log` (bounded).
fn tail(log: &Path) -> String {
    let bytes = crate::util::read_tail(log, TAIL_BYTES as u64).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// Where and how a worker's checks run.
#[derive(Debug, Clone, Copy)]
pub struct CheckSite<'a> {
    /// The worktree.
    pub dir: &'a Path,
    /// The complete environment.
    pub env: &'a [(OsString, OsString)],
    /// Logs go to `<log_dir>/w<id>-check-<n>.log`.
    pub log_dir: &'a Path,
    /// The worker.
    pub worker_id: u32,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
    /// The worker's sandbox, when it has one.
    pub confine: Option<&'a crate::sandbox::Restrictions>,
}

/// Run `checks` in order at `site`; stops at the first failure (the rest are not run).
pub async fn run(
    checks: &[Check],
    site: CheckSite<'_>,
    stop: watch::Receiver<StopLevel>,
) -> Vec<CheckResult> {
    let CheckSite {
        dir,
        env,
        log_dir,
        worker_id,
        grace,
        confine,
    } = site;
    let mut out = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        if *stop.borrow() != StopLevel::Run {
            break;
        }
        let log = log_dir.join(format!("w{worker_id}-check-{}.log", i + 1));
        // `supervise` appends: each run of a check starts its log afresh.
        let _ = crate::util::open_log(&log, true);
        let args = vec!["-c".to_owned(), check.run.clone()];
        let spec = ProcessSpec {
            program: "sh",
            args: &args,
            cwd: dir,
            env: env.to_vec(),
            log: &log,
            timeout: Some(Duration::from_secs_f64(check.timeout)),
            grace,
            live: LiveLimits::default(),
            confine,
        };
        let result = match supervise(spec, stop.clone(), |_| {}).await {
            Ok(sup) => CheckResult {
                name: check.name.clone(),
                passed: sup.ending == Ending::Exited && sup.exit_code == Some(0),
                exit_code: sup.exit_code,
                timed_out: sup.ending == Ending::TimedOut,
                duration: sup.duration.as_secs_f64(),
                log_tail: tail(&log),
            },
            Err(e) => CheckResult {
                name: check.name.clone(),
                passed: false,
                exit_code: None,
                timed_out: false,
                duration: 0.0,
                log_tail: format!("could not start sh: {e}"),
            },
        };
        let passed = result.passed;
        out.push(result);
        if !passed {
            break;
        }
    }
    out
}

/// Why the checks failed, or `None` when they all passed.
pub fn failure(results: &[CheckResult], planned: usize) -> Option<String> {
    let failed = results.iter().find(|r| !r.passed)?;
    let how = if failed.timed_out {
        timed_out_after(&format!("{:.0}s", failed.duration))
    } else {
        match failed.exit_code {
            Some(c) => format!("exited {c}"),
            None => "was killed".to_owned(),
        }
    };
    let last = failed
        .log_tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", crate::agent::clean_reason(l)))
        .unwrap_or_default();
    let skipped = planned.saturating_sub(results.len());
    let rest = if skipped > 0 {
        format!(
            " ({skipped} later check{} not run)",
            if skipped == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    Some(format!("check `{}` {how}{last}{rest}", failed.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(name: &str, passed: bool, exit: Option<i32>, tail: &str) -> CheckResult {
        CheckResult {
            name: name.into(),
            passed,
            exit_code: exit,
            timed_out: false,
            duration: 1.0,
            log_tail: tail.into(),
        }
    }

    #[test]
    fn failure_reasons() {
        assert_eq!(failure(&[res("a", true, Some(0), "")], 1), None);
        assert_eq!(
            failure(
                &[
                    res("a", true, Some(0), ""),
                    res("cargo test", false, Some(101), "test x ... FAILED\n\n")
                ],
                3
            )
            .unwrap(),
            "check `cargo test` exited 101: test x ... FAILED (1 later check not run)"
        );
    }

    #[test]
    fn a_check_stopped_at_its_limit_says_it_timed_out() {
        let mut slow = res("sleep 9", false, None, "");
        slow.timed_out = true;
        slow.duration = 3.2;
        let why = failure(&[slow], 1).expect("a failure");
        assert!(why.contains("timed out after 3s"), "{why}");
    }
}
