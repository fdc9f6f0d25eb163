//! The per-worker supervisor: fanout's own binary, started as
//! `fanout --fanout-supervisor <program> <args…>` (in the process group and sandbox
//! [`super::process`] made for it), makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), starts the program in its process group, and reaps
//! every process that ends beneath it — the agent, and every orphan of its tree,
//! `setsid` and double-forked daemons included, which the kernel re-parents to the
//! nearest subreaper: here, not fanout. So every process the program started is, until
//! it ends, a descendant of the supervisor; an exited one never lingers as a zombie.
//!
//! It tells fanout how the program ended on descriptor 3 (one line: `exit <code>`,
//! `signal <n>`, or `error <errno>` when it could not be started), then keeps reaping
//! until it has no child left, and exits. fanout stops whatever is left
//! ([`super::process`]) and takes the supervisor's own exit as the proof that nothing
//! of the worker runs any more: its harvest starts after that, never before.
//!
//! It stops on no signal fanout sends the group (SIGTERM, SIGINT, SIGHUP are caught);
//! only SIGKILL ends it early. The program starts with the default handlers and, when
//! the supervisor is sandboxed, in a Landlock domain of its own that may not signal the
//! supervisor ([`own_domain`]). Unsandboxed, a hostile program can kill it (same uid):
//! fanout then says so, and what the program left outside its process group is
//! stopped only when the run ends.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::process::ExitCode;

use nix::errno::Errno;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use nix::sys::wait::{WaitStatus, waitpid};

/// The first argument that makes fanout's binary a supervisor.
pub const ARG: &str = "--fanout-supervisor";
/// The descriptor the supervisor reports on.
pub const REPORT_FD: RawFd = 3;

/// How the supervised program ended, as the supervisor reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
    /// It could not be started (an errno).
    NotStarted(i32),
}

impl Report {
    /// The line the supervisor writes.
    fn line(self) -> String {
        match self {
            Report::Exited(c) => format!("exit {c}\n"),
            Report::Signaled(s) => format!("signal {s}\n"),
            Report::NotStarted(e) => format!("error {e}\n"),
        }
    }

    /// A report from the supervisor's line; `None` when there was none (the supervisor
    /// was killed before the program ended) or it is not one.
    pub fn parse(text: &str) -> Option<Report> {
        let (kind, n) = text.trim().split_once(' ')?;
        let n: i32 = n.parse().ok()?;
        match kind {
            "exit" => Some(Report::Exited(n)),
            "signal" => Some(Report::Signaled(n)),
            "error" => Some(Report::NotStarted(n)),
            _ => None,
        }
    }
}

/// The program and its arguments when this process was started as a supervisor.
pub fn started_as_supervisor(mut args: impl Iterator<Item = OsString>) -> Option<Vec<OsString>> {
    let _me = args.next()?;
    if args.next()? != ARG {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    (!rest.is_empty()).then_some(rest)
}

extern "C" fn noted(_: nix::libc::c_int) {}

/// Be the supervisor of `command` (program, then arguments); see the module docs.
pub fn main(command: Vec<OsString>) -> ExitCode {
    // SAFETY: fanout hands the supervisor descriptor 3, open for writing, and nothing
    // else in this process uses it.
    let mut report = unsafe { std::fs::File::from_raw_fd(REPORT_FD) };
    // Not for the program: it must not hold fanout's channel.
    let _ = nix::fcntl::fcntl(
        &report,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let catch = SigAction::new(
        SigHandler::Handler(noted),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler does nothing; exec resets it to the default in the program.
        let _ = unsafe { sigaction(sig, &catch) };
    }
    let mut program = std::process::Command::new(&command[0]);
    program.args(&command[1..]);
    #[cfg(target_os = "linux")]
    if let Some(domain) = own_domain() {
        use std::os::unix::process::CommandExt;
        let mut domain = Some(domain);
        // SAFETY: this process has one thread, so the child may allocate; it only
        // restricts itself before exec.
        unsafe {
            program.pre_exec(move || match domain.take() {
                Some(d) => d
                    .restrict_self()
                    .map(|_| ())
                    .map_err(|e| std::io::Error::other(e.to_string())),
                None => Ok(()),
            });
        }
    }
    let spawned = program.spawn();
    let agent = match spawned {
        Ok(child) => nix::unistd::Pid::from_raw(child.id() as i32),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(nix::libc::ENOENT);
            let _ = report.write_all(Report::NotStarted(errno).line().as_bytes());
            return ExitCode::from(127);
        }
    };
    let mut report = Some(report);
    loop {
        let ended = match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == agent => Some(Report::Exited(code)),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == agent => {
                Some(Report::Signaled(sig as i32))
            }
            Ok(_) | Err(Errno::EINTR) => None,
            Err(_) => break,
        };
        if let Some(how) = ended
            && let Some(mut r) = report.take()
        {
            let _ = r.write_all(how.line().as_bytes());
        }
    }
    ExitCode::SUCCESS
}

/// When the supervisor is itself sandboxed (`no_new_privs` is set), a Landlock domain
/// for the program nested in the supervisor's, scoped for signals (Landlock ABI 6;
/// nothing on older kernels): the program cannot signal its supervisor, and — being
/// in a nested domain — cannot ptrace it either.
#[cfg(target_os = "linux")]
fn own_domain() -> Option<landlock::RulesetCreated> {
    use landlock::{Ruleset, RulesetAttr, Scope};
    if nix::sys::prctl::get_no_new_privs() != Ok(true) {
        return None;
    }
    Ruleset::default().scope(Scope::Signal).ok()?.create().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_back() {
        for r in [
            Report::Exited(3),
            Report::Signaled(9),
            Report::NotStarted(2),
        ] {
            assert_eq!(Report::parse(&r.line()), Some(r));
        }
        assert_eq!(Report::parse(""), None);
        assert_eq!(Report::parse("exit x"), None);
    }

    #[test]
    fn only_the_supervisor_argument_first_makes_one() {
        let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            started_as_supervisor(os(&["fanout", ARG, "sh", "-c", "x"]).into_iter()),
            Some(os(&["sh", "-c", "x"]))
        );
        assert_eq!(
            started_as_supervisor(os(&["fanout", ARG]).into_iter()),
            None
        );
        assert_eq!(
            started_as_supervisor(os(&["fanout", "run", ARG]).into_iter()),
            None
        );
    }
}
