//! The harvest server: a process forked from fanout while it still has one thread,
//! which forks each worker's harvest child ([`super::harvest_process`]) instead of
//! the run executing fanout's binary again for every harvest. A fork of a small,
//! single-threaded process skips what an exec costs each time — mapping and
//! relocating a 20 MB binary, the C and Rust start-up, `main`'s own — about 1.5 ms of
//! a harvest; the child is the same code, speaking the same request and reply.
//!
//! How a harvest goes: the run makes a socket pair and an unnamed file for the
//! child's stderr, and sends the server its ends (`SCM_RIGHTS`, on a `SOCK_SEQPACKET`
//! pair: one message a harvest, however many are asked for at once). The server hands
//! them on to a *spare*, a child it forked ahead of need ([`serve`]): the child reads
//! the request, harvests, writes the reply (JSON on one line) and exits; the server,
//! which reaps it, then writes how it ended (`\nexit <code>` or `\nsignal <number>`) on
//! the same socket and closes its copy. The run takes a whole reply as soon as its
//! line ends, without waiting for the child to be gone ([`Heard::Reply`]); otherwise
//! it reads to the end, for how the child ended
//! ([`super::harvest_process::Ended`]). The server outlives its children: once the
//! run is done asking, it waits for them before it ends ([`HarvestServer::close`]).
//!
//! What the server is trusted with, and how it is kept to it — as the exec'd child:
//! - It is a fork of fanout made before anything else of the run (no thread, no agent,
//!   no worktree yet), non-dumpable like fanout, so no agent can read or ptrace it,
//!   nor its children (the flag is kept across fork: unlike an exec'd child, there is
//!   no moment when they are open to ptrace). It forgets the run's
//!   credentials first thing (the caller says how) and takes every variable no child
//!   gets out of its environment ([`crate::secret::is_scrubbed`]).
//! - Its stdin, stdout and stderr are `/dev/null`; a child's stderr is the unnamed file
//!   the run gave for it. It talks only over sockets, which no other process can open
//!   again through `/proc/<pid>/fd`.
//! - It leads a session of its own and ignores SIGINT, SIGTERM and SIGHUP (the run
//!   decides when to stop, and waits for a harvest in progress); it and each child are
//!   killed when the process that forked them dies
//!   (`PR_SET_PDEATHSIG`, and their parent's pid checked after asking): no harvest
//!   outlives its run. It ends when the run closes its socket, once its children
//!   have. Should it be gone before (killed), each harvest executes fanout's binary
//!   instead ([`Harvester`]).

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork};

use super::harvest_process::{Ended, Heard, Request};
use crate::run::harvest::Harvest;

mod serve;

/// How long [`HarvestServer::close`] gives the server to end on its own.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How the run starts each harvest child.
#[derive(Debug, Clone)]
pub enum Harvester {
    /// Forked by the server; by executing the binary when the server is gone (killed:
    /// the harvest is not lost with it).
    Server(Arc<HarvestServer>, PathBuf),
    /// By executing this binary (fanout's own: [`super::harvest_process::own_binary`]),
    /// when there is no server.
    Exec(PathBuf),
}

impl Harvester {
    /// Run `request` in a child; blocks until it is done. Err: why no harvest came back.
    pub fn harvest(&self, request: &Request) -> Result<Harvest, String> {
        match self {
            Harvester::Server(server, exe) => server
                .ask()
                .ok()
                .and_then(|asked| asked.answer(request))
                .unwrap_or_else(|| request.run_in_child(exe)),
            Harvester::Exec(exe) => request.run_in_child(exe),
        }
    }

    /// No more harvests will be asked for: the server may end (see
    /// [`HarvestServer::done_asking`]).
    pub fn done_asking(&self) {
        if let Harvester::Server(server, _) = self {
            server.done_asking();
        }
    }
}

/// A harvest the server took: the run's end of the child's socket, and its stderr.
#[derive(Debug)]
pub struct Asked {
    socket: UnixStream,
    stderr: std::fs::File,
}

impl Asked {
    /// Send `request`, and read what the child and the server answer; `None` when
    /// nothing at all came back (no child was made: the server could not fork, or
    /// died), for the caller to harvest otherwise.
    pub fn answer(mut self, request: &Request) -> Option<Result<Harvest, String>> {
        let (heard, ended) = match super::harvest_process::talk(&mut self.socket, request) {
            Heard::Rest(Ok(bytes)) if bytes.is_empty() => return None,
            Heard::Rest(Ok(bytes)) => {
                let (written, ended) = split_ending(bytes);
                (Heard::Rest(Ok(written)), ended)
            }
            Heard::Rest(Err(e)) if nobody_there(&e) => return None,
            // A whole reply (how the child ends after it changes nothing), or a
            // socket that failed.
            other => (other, Ended::Unknown),
        };
        Some(super::harvest_process::outcome(
            ended,
            heard,
            &mut self.stderr,
        ))
    }
}

/// Whether `e` says the other end of a harvest's socket was closed before anything
/// came back.
fn nobody_there(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
    matches!(e.kind(), BrokenPipe | ConnectionReset)
}

/// The server, as the run holds it: its socket, and its pid (reaped when dropped).
#[derive(Debug)]
pub struct HarvestServer {
    control: OwnedFd,
    /// Until it is reaped ([`HarvestServer::close`]): a pid reaped may be reused.
    pid: std::sync::Mutex<Option<Pid>>,
}

impl HarvestServer {
    /// Fork the server — only while this process has one thread (`None` otherwise, or
    /// when it cannot be made: the run then executes its binary for each harvest). In
    /// the server, `forget` runs first: it drops what the server must not keep (the
    /// run's credentials).
    pub fn start(forget: impl FnOnce()) -> Option<HarvestServer> {
        if threads() != Some(1) {
            return None;
        }
        let (ours, theirs) = serve::pair().ok()?;
        let parent = nix::unistd::getpid();
        // SAFETY: this process has one thread, so the child may run any code.
        match unsafe { fork() }.ok()? {
            ForkResult::Parent { child } => {
                drop(theirs);
                Some(HarvestServer {
                    control: ours,
                    pid: std::sync::Mutex::new(Some(child)),
                })
            }
            ForkResult::Child => {
                drop(ours);
                let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    forget();
                    serve::serve(&theirs, parent)
                }));
                // Never back into the caller's frames: they are the run's.
                serve::exit_now(i32::from(!matches!(served, Ok(Ok(())))))
            }
        }
    }

    /// Run `request` in a fresh child of the server; blocks until it is done. Err: why
    /// no harvest came back.
    pub fn harvest(&self, request: &Request) -> Result<Harvest, String> {
        self.ask()
            .map_err(|e| format!("the harvest server: {e}"))?
            .answer(request)
            .unwrap_or_else(|| Err("the harvest server: no answer".into()))
    }

    /// Have the server fork a child for one harvest. Err: the server is gone, or the
    /// socket or file could not be made.
    pub fn ask(&self) -> std::io::Result<Asked> {
        let stderr = super::harvest_process::scratch_file()?;
        let (socket, theirs) = UnixStream::pair()?;
        serve::send_harvest(&self.control, [theirs.as_raw_fd(), stderr.as_raw_fd()])?;
        // Its end is the server's now: the child's and the server's copies close when
        // the child has ended, and then what came back is whole.
        drop(theirs);
        Ok(Asked { socket, stderr })
    }

    /// No more harvests will be asked for: the server ends once those asked for are
    /// done and their children gone, while the run goes on. Harvests asked for
    /// afterwards fail.
    pub fn done_asking(&self) {
        use nix::sys::socket::{Shutdown, shutdown};
        let _ = shutdown(self.control.as_raw_fd(), Shutdown::Write);
    }

    /// End the server ([`HarvestServer::done_asking`]) and reap it, once no harvest is
    /// in progress. A harvest's reply is taken before its child is gone
    /// ([`Heard::Reply`]): the server ends once its children have, and one that has
    /// not within [`CLOSE_WAIT`] (stopped) is killed (SIGKILL: it holds nothing but
    /// what it is given). Before the run's reaper sweeps its children
    /// ([`super::reaper::sweep`]): neither the server nor a child it left behind is an
    /// agent's leftover. Again, it does nothing.
    pub fn close(&self) {
        self.done_asking();
        let pid = self.pid.lock().map(|mut p| p.take()).unwrap_or(None);
        if let Some(pid) = pid {
            if !hung_up_within(&self.control, CLOSE_WAIT) {
                // Not reaped yet, so still the server's (a zombie at worst).
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            }
            let _ = waitpid(pid, None);
        }
    }
}

impl Drop for HarvestServer {
    fn drop(&mut self) {
        self.close();
    }
}

/// What the child wrote, and how it ended, from what came back: the server's line
/// follows the last newline (a reply has none inside).
fn split_ending(bytes: Vec<u8>) -> (Vec<u8>, Ended) {
    let Some(at) = bytes.iter().rposition(|&b| b == b'\n') else {
        return (bytes, Ended::Unknown);
    };
    let line = String::from_utf8_lossy(&bytes[at + 1..]).into_owned();
    let number = |s: &str| s.trim().parse::<i32>().ok();
    let ended = match line.split_once(' ') {
        Some(("exit", code)) => number(code).map_or(Ended::Unknown, Ended::Exited),
        Some(("signal", sig)) => number(sig).map_or(Ended::Unknown, Ended::Signaled),
        _ => Ended::Unknown,
    };
    let mut written = bytes;
    written.truncate(at);
    (written, ended)
}

/// Whether the other end of `control` closed within `wait`: the server's, when it
/// ends (it never writes on it).
fn hung_up_within(control: &OwnedFd, wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(control.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Err(Errno::EINTR) => {}
            Ok(ready) => return ready > 0,
            Err(_) => return false,
        }
    }
}

/// How many threads this process has.
fn threads() -> Option<usize> {
    crate::util::proc_status("Threads")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_line_after_the_reply_says_how_the_child_ended() {
        let split = |b: &str| {
            let (written, ended) = split_ending(b.as_bytes().to_vec());
            (String::from_utf8(written).unwrap(), ended)
        };
        assert_eq!(
            split("{\"Err\":\"a\\nb\"}\nexit 0"),
            ("{\"Err\":\"a\\nb\"}".to_owned(), Ended::Exited(0))
        );
        // Cut short mid-reply: what came, and the signal.
        assert_eq!(
            split("{\"Ok\":\nsignal 9"),
            ("{\"Ok\":".to_owned(), Ended::Signaled(9))
        );
        assert_eq!(split("\nexit 4"), (String::new(), Ended::Exited(4)));
        // No line from the server (it was killed too), or one that is no ending.
        assert_eq!(split("{\"Ok\":"), ("{\"Ok\":".to_owned(), Ended::Unknown));
        assert_eq!(split("{}\nexit x"), ("{}".to_owned(), Ended::Unknown));
        assert_eq!(split("{}\nbye"), ("{}".to_owned(), Ended::Unknown));
    }

    #[test]
    fn no_server_is_forked_from_a_process_with_threads() {
        // The test harness runs tests on threads of their own.
        assert!(threads().is_some_and(|n| n > 1));
        assert!(HarvestServer::start(|| unreachable!("nothing runs in a child")).is_none());
    }
}
