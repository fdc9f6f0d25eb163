//! `fanout harvest-worker <pid>` (hidden, and not parsed by clap: `main` recognises
//! the whole command line first): the child process one worker's harvest runs in
//! during `fanout run` — a request as JSON on stdin, the reply as JSON on stdout. See
//! [`crate::run::harvest_process`]; not for people.

use std::process::ExitCode;

use crate::util::out::errln;

/// `fanout harvest-worker <pid>`, started by the run whose pid is `parent`.
pub fn harvest_worker(parent: nix::unistd::Pid) -> ExitCode {
    match crate::run::harvest_process::child_main(parent) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("fanout: error: {e}");
            ExitCode::from(crate::exit::FATAL.clamp(0, 255) as u8)
        }
    }
}
