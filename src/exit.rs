//! fanout's exit codes. They are part of the interface: CI scripts branch on them.
//!
//! | code | meaning |
//! |-----:|---------|
//! | 0    | every worker succeeded or found nothing to change (or the command had nothing to report); or the exit policy forgives the failures |
//! | 1    | some workers succeeded, some did not (`fail_on: any-failure`, the default) |
//! | 2    | usage or configuration error: nothing was run |
//! | 3    | no worker succeeded (`any-failure` or `all-failed`) |
//! | 4    | fanout itself failed (git, I/O), or publishing did (GitHub unreachable, credentials rejected): see the message |
//! | 130  | interrupted by SIGINT or SIGTERM; results were still written |
//!
//! The exit policy (`fail_on`, `--fail-on`) decides the codes 0, 1 and 3 of a
//! finished run: `any-failure` as above; `all-failed` exits 3 only when no worker
//! succeeded (else 0); `never` exits 0. A worker that is `unchanged`, or a findings
//! task's success, is never a failure.
//!
//! A library operation that cannot finish returns a [`Failure`], which says which of
//! the codes 2, 4 and 130 it maps to; the command line prints it.

use crate::model::{FailOn, Totals};

/// All workers succeeded.
pub const SUCCESS: i32 = 0;
/// Some, not all, workers succeeded.
pub const SOME_FAILED: i32 = 1;
/// Bad flags or config; nothing ran.
pub const USAGE: i32 = 2;
/// No worker succeeded.
pub const NONE_SUCCEEDED: i32 = 3;
/// fanout's own failure, or publishing's (GitHub unreachable, credentials rejected).
pub const FATAL: i32 = 4;
/// Stopped by a signal.
pub const INTERRUPTED: i32 = 130;

/// Why an operation could not finish, with the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// Bad flags, config or arguments: exit 2.
    Usage(String),
    /// fanout's own failure: exit 4.
    Fatal(String),
    /// Stopped by a signal: exit 130.
    Interrupted,
}

impl Failure {
    /// The exit code.
    pub fn code(&self) -> i32 {
        match self {
            Failure::Usage(_) => USAGE,
            Failure::Fatal(_) => FATAL,
            Failure::Interrupted => INTERRUPTED,
        }
    }
}

/// The exit code for a finished run, under the exit policy.
pub fn for_run(totals: &Totals, interrupted: bool, policy: FailOn) -> i32 {
    let all_good = totals.workers > 0 && totals.good() == totals.workers;
    match policy {
        _ if interrupted => INTERRUPTED,
        FailOn::Never => SUCCESS,
        _ if all_good => SUCCESS,
        FailOn::AnyFailure if totals.good() > 0 => SOME_FAILED,
        FailOn::AllFailed if totals.good() > 0 => SUCCESS,
        FailOn::AnyFailure | FailOn::AllFailed => NONE_SUCCEEDED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_by_outcome() {
        let t = |w, s| Totals {
            workers: w,
            success: s,
            ..Totals::default()
        };
        let any = FailOn::AnyFailure;
        assert_eq!(for_run(&t(3, 3), false, any), SUCCESS);
        assert_eq!(for_run(&t(3, 1), false, any), SOME_FAILED);
        assert_eq!(for_run(&t(3, 0), false, any), NONE_SUCCEEDED);
        assert_eq!(for_run(&t(3, 3), true, any), INTERRUPTED);
        let all = FailOn::AllFailed;
        assert_eq!(for_run(&t(3, 1), false, all), SUCCESS);
        assert_eq!(for_run(&t(3, 0), false, all), NONE_SUCCEEDED);
        assert_eq!(for_run(&t(3, 0), false, FailOn::Never), SUCCESS);
        assert_eq!(for_run(&t(3, 0), true, FailOn::Never), INTERRUPTED);
        // `unchanged` is not a failure.
        let quiet = Totals {
            unchanged: 2,
            ..t(3, 1)
        };
        assert_eq!(for_run(&quiet, false, any), SUCCESS);
    }
}
