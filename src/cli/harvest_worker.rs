//! `fanout harvest-worker` (hidden): the child process one worker's harvest runs in
//! during `fanout run` — a request as JSON on stdin, the reply as JSON on stdout. See
//! [`crate::run::harvest_process`]; not for people.

use super::common::CliError;

/// `fanout harvest-worker`.
pub fn harvest_worker() -> Result<i32, CliError> {
    crate::run::harvest_process::child(std::io::stdin().lock(), std::io::stdout().lock())
        .map(|()| 0)
        .map_err(CliError::Fatal)
}
