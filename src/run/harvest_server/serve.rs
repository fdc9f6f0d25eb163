//! The harvest server's own side: what runs in the server process and in the
//! children it forks ([`serve`]). The server keeps one child forked ahead of need, a
//! *spare*, blocked on a socket of its own; a harvest asked for is handed to it there
//! (the run's two descriptors, passed on), so no fork stands between a worker's end
//! and its harvest, and the next spare is forked while that harvest runs. The server
//! reaps its children itself (their endings come on a `signalfd`): for each harvest
//! it keeps its socket until the child has ended, writes how it ended after whatever
//! the child wrote (`\nexit <code>` or `\nsignal <number>`), and closes its copy.
//!
//! A child holds nothing of the server's but its own socket: it closes, first thing,
//! the server's socket to the run, its `signalfd` and every other harvest's socket
//! (so that no harvest's end waits on an unrelated spare). It is killed when the
//! server dies (`PR_SET_PDEATHSIG`, the server's pid checked after asking), and a
//! spare whose socket closes (the run is done asking) exits without harvesting.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    send, sendmsg, socketpair,
};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use crate::run::harvest_process::detach;

/// The server: set up (see the parent module's docs), then hand each harvest asked
/// for on `control` to a spare child, until the run closes it; then wait until every
/// child is gone, so that none is left for the run's reaper to take for an agent's.
pub(super) fn serve(control: &OwnedFd, parent: Pid) -> std::io::Result<()> {
    nix::unistd::setsid()?;
    detach(parent)?;
    quiet_stdio()?;
    for (name, _) in std::env::vars_os() {
        if crate::secret::is_scrubbed(&name.to_string_lossy()) {
            // SAFETY: the server has one thread.
            unsafe { std::env::remove_var(&name) };
        }
    }
    // Children's endings come as data, not to a handler.
    let sigchld = SigSet::from(Signal::SIGCHLD);
    sigchld.thread_block()?;
    let endings = SignalFd::with_flags(&sigchld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let mut children = Children {
        spare: None,
        busy: Vec::new(),
        ahead: true,
    };
    loop {
        children.keep_a_spare(control, &endings);
        let (message, ended) = wait_for_either(control, &endings)?;
        if ended {
            while let Ok(Some(_)) = endings.read_signal() {}
            children.reap(false);
        }
        if !message {
            continue;
        }
        match receive(control) {
            Ok(Received::Harvest(socket, stderr)) => {
                children.hand(control, &endings, socket, stderr);
            }
            // Not a harvest (only the run can send): what came is closed.
            Ok(Received::Other) | Err(Errno::EINTR) => {}
            Ok(Received::Closed) => {
                children.spare = None;
                children.reap(true);
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Wait until a message (or the end) comes on `control`, or a child ended: which.
fn wait_for_either(control: &OwnedFd, endings: &SignalFd) -> nix::Result<(bool, bool)> {
    loop {
        let mut fds = [
            PollFd::new(control.as_fd(), PollFlags::POLLIN),
            PollFd::new(endings.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd<'_>| fd.any().unwrap_or(false);
        return Ok((ready(&fds[0]), ready(&fds[1])));
    }
}

/// The server's children: the spare, and those harvesting, each with its harvest's
/// socket (for the line saying how it ended).
struct Children {
    spare: Option<Spare>,
    busy: Vec<(Pid, OwnedFd)>,
    /// Whether to fork the spare ahead of need: not after one ended unused (killed),
    /// until a harvest has been handed again, so that spares that cannot live are
    /// not forked over and over.
    ahead: bool,
}

/// A child forked ahead of need, waiting on its own socket for a harvest.
struct Spare {
    pid: Pid,
    socket: OwnedFd,
}

impl Children {
    /// Fork a spare if there is none, unless the last ended unused (there is none
    /// either when the fork failed: a harvest then forks its child when it comes).
    fn keep_a_spare(&mut self, control: &OwnedFd, endings: &SignalFd) {
        if self.ahead && self.spare.is_none() {
            self.spare = self.fork_spare(control, endings, &[]);
        }
    }

    /// Hand the harvest whose descriptors came to the spare (or to a child forked
    /// now): it keeps the harvest's `socket` until the child has ended. When none
    /// could take it, both descriptors close here and the run hears nothing back (it
    /// harvests otherwise).
    fn hand(&mut self, control: &OwnedFd, endings: &SignalFd, socket: OwnedFd, stderr: OwnedFd) {
        let fds = [socket.as_raw_fd(), stderr.as_raw_fd()];
        for _ in 0..2 {
            let spare = match self.spare.take() {
                Some(spare) => Some(spare),
                None => self.fork_spare(control, endings, &fds),
            };
            let Some(spare) = spare else {
                return;
            };
            let handed = send_harvest(&spare.socket, fds);
            // Its socket closes here either way: a spare takes one harvest.
            if handed.is_ok() {
                self.busy.push((spare.pid, socket));
                self.ahead = true;
                return;
            }
        }
    }

    /// Reap the children that ended, and say how each harvesting one did; `all`:
    /// wait for every child to end.
    fn reap(&mut self, all: bool) {
        let flags = (!all).then_some(WaitPidFlag::WNOHANG);
        loop {
            let (pid, line) = match waitpid(None, flags) {
                Ok(WaitStatus::Exited(pid, code)) => (pid, format!("\nexit {code}")),
                Ok(WaitStatus::Signaled(pid, sig, _)) => (pid, format!("\nsignal {}", sig as i32)),
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return,
                Err(Errno::EINTR) | Ok(_) => continue,
                Err(_) => return,
            };
            if self.spare.as_ref().is_some_and(|s| s.pid == pid) {
                self.spare = None;
                self.ahead = false;
            }
            if let Some(at) = self.busy.iter().position(|(p, _)| *p == pid) {
                let (_, socket) = self.busy.swap_remove(at);
                // The run may be gone from it (it took the reply): nothing to say.
                let _ = send(socket.as_raw_fd(), line.as_bytes(), MsgFlags::MSG_NOSIGNAL);
            }
        }
    }

    /// Fork a spare (which closes `also`, the server's too); `None` when it cannot be
    /// made.
    fn fork_spare(&self, control: &OwnedFd, endings: &SignalFd, also: &[RawFd]) -> Option<Spare> {
        let (ours, theirs) = pair().ok()?;
        let server = nix::unistd::getpid();
        let mut inherited: Vec<RawFd> = vec![control.as_raw_fd(), endings.as_raw_fd()];
        inherited.extend(self.busy.iter().map(|(_, s)| s.as_raw_fd()));
        inherited.push(ours.as_raw_fd());
        inherited.extend_from_slice(also);
        // SAFETY: the server has one thread, so the child may run any code.
        match unsafe { fork() }.ok()? {
            ForkResult::Parent { child } => Some(Spare {
                pid: child,
                socket: ours,
            }),
            ForkResult::Child => {
                let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    spare(server, &inherited, &theirs)
                }));
                exit_now(served.unwrap_or(101))
            }
        }
    }
}

/// A spare: close what it inherited of the server's, wait for a harvest on `socket`,
/// and serve it; its exit code. It never drops what it closed: it ends by `_exit`.
fn spare(server: Pid, inherited: &[RawFd], socket: &OwnedFd) -> i32 {
    for &fd in inherited {
        // SAFETY: the server's descriptors, copied by the fork, each closed once here
        // and never used again in this process.
        unsafe { nix::libc::close(fd) };
    }
    let unblocked = SigSet::from(Signal::SIGCHLD).thread_unblock();
    if unblocked.is_err() || detach(server).is_err() {
        return 1;
    }
    loop {
        match receive(socket) {
            Ok(Received::Harvest(socket, stderr)) => return harvest(socket, stderr),
            Err(Errno::EINTR) => {}
            // The run is done asking: no harvest for this one.
            _ => return 0,
        }
    }
}

/// The child: its stderr the run's unnamed file, then what an exec'd child does
/// ([`crate::run::harvest_process::child`]); its exit code.
fn harvest(socket: OwnedFd, stderr: OwnedFd) -> i32 {
    // SAFETY: dup2 onto stderr, which nothing else holds in this process.
    if unsafe { nix::libc::dup2(stderr.as_raw_fd(), 2) } < 0 {
        return 1;
    }
    drop(stderr);
    // Nothing of the harvest is relative to it; no directory an agent can remove.
    let _ = std::env::set_current_dir("/");
    let stream = UnixStream::from(socket);
    match crate::run::harvest_process::child(&stream, &stream) {
        Ok(()) => 0,
        Err(e) => {
            crate::util::out::errln!("fanout: error: {e}");
            crate::exit::FATAL
        }
    }
}

/// End this process now: no destructor, no exit handler, no flush of what the
/// process it was forked from had buffered.
pub(super) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit only ends the process.
    unsafe { nix::libc::_exit(code) }
}

/// `/dev/null` for stdin, stdout and stderr.
fn quiet_stdio() -> std::io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in 0..3 {
        // SAFETY: dup2 onto the standard descriptors, which nothing else holds here.
        if unsafe { nix::libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What came on a socket of the server's (from the run) or of a spare's (from the
/// server).
enum Received {
    /// A harvest: its socket and its stderr file.
    Harvest(OwnedFd, OwnedFd),
    /// Something else (closed as it came).
    Other,
    /// The other end closed the socket.
    Closed,
}

/// A socket pair the server's messages go over: one message a harvest
/// (`SOCK_SEQPACKET`), however many are sent at once.
pub(super) fn pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
}

/// Send a harvest's socket and stderr file (`fds`, in that order) on `to`, as
/// [`receive`] reads them.
pub(super) fn send_harvest(to: &OwnedFd, fds: [RawFd; 2]) -> nix::Result<usize> {
    sendmsg::<()>(
        to.as_raw_fd(),
        &[std::io::IoSlice::new(b"h")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
}

/// The next message on `socket`.
fn receive(socket: &OwnedFd) -> nix::Result<Received> {
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    if msg.bytes == 0 {
        return Ok(Received::Closed);
    }
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(got) = c {
            // SAFETY: descriptors just received are this process's own.
            fds.extend(
                got.into_iter()
                    .map(|fd| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }),
            );
        }
    }
    Ok(match <[OwnedFd; 2]>::try_from(fds) {
        Ok([socket, stderr]) => Received::Harvest(socket, stderr),
        Err(_) => Received::Other,
    })
}
