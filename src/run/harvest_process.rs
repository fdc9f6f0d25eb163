//! Each worker's harvest in a process of its own: a short-lived child runs
//! [`super::harvest::harvest`], reading its [`Request`] as JSON and writing its
//! [`Reply`] as JSON on one socket. The child is forked by the harvest server
//! ([`super::harvest_server`]) when the command started one; else it is fanout's own
//! binary executed again (`fanout harvest-worker <pid>`, hidden, [`Request::run_in_child`];
//! what follows is about that child, and the server keeps its children to the same).
//!
//! Why a process: a harvest reads a worktree's whole index and trees through libgit2,
//! a megabyte or two at 5,000 files, freed when it ends. Done inside the run, those
//! transients interleave with the few allocations the run keeps (results, events) and
//! pin heap pages that glibc cannot hand back: the run's resident heap grew with the
//! number of tasks although its live heap did not (see [`crate::util::runtime`]). In a
//! child, all of it goes back to the kernel when the child exits. And whatever a
//! worktree an agent left makes libgit2 do (abort, run out of memory), it fails that
//! worker's harvest, not the run.
//!
//! What the child is trusted with, and how it is kept to it:
//! - It is fanout's own binary ([`own_binary`]), given the run's environment less
//!   credentials and the variables kept from agents ([`crate::secret::is_scrubbed`]),
//!   and the filter drivers read when the run started (as data in its request).
//! - Its stdin and stdout are one end of a socket pair, which no other process can
//!   open again through `/proc/<pid>/fd` (a pipe can be): nobody else can feed it a
//!   request, read its reply, or keep its output open. Its stderr is an unnamed file
//!   (in memory: nothing in a directory an agent can write), read back only when it
//!   fails.
//! - It is started in a process group of its own (a Ctrl-C at the terminal signals
//!   the foreground group only: it does not cut a harvest short, the run waits for it
//!   as for one in-process). First thing, before it reads its request, it ignores
//!   SIGINT, SIGTERM and SIGHUP (the run decides when to stop) and asks to be killed
//!   if fanout dies (`PR_SET_PDEATHSIG`), then checks that fanout, whose pid it is
//!   given, is still its parent: no harvest outlives its run. It does that itself
//!   rather than between fork and exec, so that it can be started by `posix_spawn`
//!   (no `fork` of the whole run, whose page tables grow with its memory: about
//!   0.7 ms a harvest) and so that it never goes through clap ([`started_as_child`]).
//! - Its reply is read capped and parsed as data. The worktree's git files are put
//!   back, and the verdict on them made, by the run itself before the child starts
//!   ([`super::worktree::restore_admin`]); the reply says no more than an agent could
//!   make a harvest say (its branch's commit, its files), and the run's tamper check
//!   still comes after it. Like every fanout process the child makes itself
//!   non-dumpable first thing; until then (a few milliseconds) a same-user process
//!   allowed to ptrace it could take it over, which a sandboxed agent never is
//!   (Landlock) and Yama's default scope forbids.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git2::Oid;
use serde::{Deserialize, Serialize};

use super::harvest::{CommitSpec, Harvest, WorkerTree, harvest};
use crate::git::TrustedConfig;

/// Largest request or reply read: a reply lists every path the worker changed.
const MAX_MESSAGE_BYTES: u64 = 256 << 20;

/// How much of the end of a failed child's stderr is read.
const STDERR_TAIL_BYTES: u64 = 16 << 10;

/// The hidden subcommand the child runs: `<fanout> harvest-worker <pid of the run>`.
pub const CHILD_COMMAND: &str = "harvest-worker";

/// Whether this process was started as a harvest child: `args` (the whole command
/// line) are `<program> harvest-worker <pid>`; the pid of the run that started it.
/// `main` asks before anything else, clap included ([`child_main`]).
pub fn started_as_child(mut args: impl Iterator<Item = OsString>) -> Option<nix::unistd::Pid> {
    let _program = args.next()?;
    if args.next()? != CHILD_COMMAND {
        return None;
    }
    let pid: i32 = args.next()?.to_str()?.parse().ok()?;
    (pid > 0 && args.next().is_none()).then(|| nix::unistd::Pid::from_raw(pid))
}

/// The child, from `main`: detach from the run's signals ([`detach`]), then serve the
/// request on stdin with the reply on stdout ([`child`]). Err: why no reply was
/// written.
pub fn child_main(parent: nix::unistd::Pid) -> Result<(), String> {
    detach(parent).map_err(|e| format!("detaching from the run: {e}"))?;
    child(std::io::stdin().lock(), std::io::stdout().lock())
}

/// One worker's harvest, as the run asks for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The user's repository's common git directory.
    pub common: PathBuf,
    /// git's name for the worktree.
    pub name: String,
    /// The worktree's directory.
    pub path: PathBuf,
    /// fanout's scratch directory for the index and `HEAD` it writes.
    pub scratch: PathBuf,
    /// The worker's branch (without `refs/heads/`).
    pub branch: String,
    /// The base commit.
    pub base: String,
    /// Author/committer name and e-mail.
    pub identity: (String, String),
    /// The commit message.
    pub message: String,
    /// Paths never committed.
    pub exclude: Vec<String>,
    /// The filter drivers the worktree was checked out with, as `(key, value)`.
    pub filters: Vec<(String, String)>,
}

/// The child's answer: the harvest, or why it failed.
pub type Reply = Result<Harvested, String>;

/// [`Harvest`] on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Harvested {
    /// The branch's commit.
    pub commit: String,
    /// Whether fanout made a commit.
    pub committed: bool,
    /// Paths that differ between base and branch, sorted.
    pub files_modified: Vec<String>,
    /// Something odd the agent did.
    pub note: Option<String>,
}

impl Request {
    /// Harvest, here: what the child does.
    pub fn serve(&self) -> Reply {
        let base = Oid::from_str(&self.base).map_err(|e| format!("base: {}", e.message()))?;
        let filters = self
            .filters
            .iter()
            .fold(TrustedConfig::new(), |t, (k, v)| t.with(k, v));
        let spec = CommitSpec {
            identity: (&self.identity.0, &self.identity.1),
            message: self.message.clone(),
            exclude: &self.exclude,
            filters: &filters,
        };
        let wt = WorkerTree {
            common: &self.common,
            name: &self.name,
            path: &self.path,
            scratch: &self.scratch,
        };
        let h = harvest(&wt, &self.branch, base, &spec).map_err(|e| e.message().to_owned())?;
        Ok(Harvested {
            commit: h.commit.to_string(),
            committed: h.committed,
            files_modified: h.files_modified,
            note: h.note,
        })
    }

    /// Run this harvest in a child process of `exe` (fanout's own binary); blocks until
    /// the child is done. Err: why no harvest came back.
    pub fn run_in_child(&self, exe: &Path) -> Result<Harvest, String> {
        let mut stderr = scratch_file().map_err(|e| format!("a scratch file: {e}"))?;
        let (mut ours, theirs) = UnixStream::pair().map_err(|e| format!("a socket: {e}"))?;
        let mut cmd = child_command(exe, &self.common);
        let io = |e: std::io::Error| format!("the harvest process: {e}");
        cmd.stdin(Stdio::from(OwnedFd::from(theirs.try_clone().map_err(io)?)))
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .stderr(stderr.try_clone().map_err(io)?);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
        // Its end of the socket closes with it (the copies `cmd` held go with `cmd`).
        drop(cmd);
        let heard = talk(&mut ours, self);
        drop(ours);
        let status = child.wait().map_err(io)?;
        outcome(Ended::of(status), heard, &mut stderr)
    }
}

/// What came back from a harvest child.
#[derive(Debug)]
pub enum Heard {
    /// Its reply, whole: the line it ends with its last write ([`child`]). Nothing
    /// after it can change the harvest, so it is taken without waiting for the rest
    /// (the child's exit, the server's line on how it ended).
    Reply(Reply),
    /// No whole reply came first: all it wrote, to the end, or why it could not be
    /// read.
    Rest(std::io::Result<Vec<u8>>),
}

/// Send `request` on `socket` (the child reads the whole request before it writes
/// anything), then hear what the child writes ([`hear`]).
pub fn talk(socket: &mut UnixStream, request: &Request) -> Heard {
    let sent = serde_json::to_vec(request)
        .map_err(std::io::Error::other)
        .and_then(|bytes| socket.write_all(&bytes))
        .and_then(|()| socket.shutdown(std::net::Shutdown::Write));
    match sent {
        Ok(()) => hear(socket, MAX_MESSAGE_BYTES),
        Err(e) => Heard::Rest(Err(e)),
    }
}

/// The child's reply as soon as its line is whole and reads as a reply; else all of
/// `from`, up to `cap` bytes (more is an error). A reply is one line (JSON written
/// compact escapes every newline), and a reply cut short never reads as one (an
/// object whose end is missing), so a line that does not is read on to the end, for
/// how the child ended.
fn hear(from: impl Read, cap: u64) -> Heard {
    use std::io::BufRead;
    let mut from = std::io::BufReader::new(from.take(cap + 1));
    let mut out = Vec::new();
    if let Err(e) = from.read_until(b'\n', &mut out) {
        return Heard::Rest(Err(e));
    }
    if let Some(line) = out.strip_suffix(b"\n")
        && let Ok(reply) = serde_json::from_slice::<Reply>(line)
    {
        return Heard::Reply(reply);
    }
    let rest = from.read_to_end(&mut out).and_then(|_| {
        if out.len() as u64 > cap {
            return Err(std::io::Error::other(format!(
                "its reply is over {cap} bytes"
            )));
        }
        Ok(out)
    });
    Heard::Rest(rest)
}

/// How a harvest child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// Nobody could tell.
    Unknown,
}

impl Ended {
    fn of(status: std::process::ExitStatus) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Ended::Exited(code),
            (None, Some(sig)) => Ended::Signaled(sig),
            _ => Ended::Unknown,
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Exited(code) => write!(f, "exited {code}"),
            Ended::Signaled(sig) => write!(f, "was killed by signal {sig}"),
            Ended::Unknown => write!(f, "ended, no one can say how"),
        }
    }
}

/// The harvest a child gave back, or why there is none (with the last lines of its
/// `stderr`): its whole reply, else from all it wrote (`rest`) and how it `ended`.
pub fn outcome(ended: Ended, heard: Heard, stderr: &mut std::fs::File) -> Result<Harvest, String> {
    let rest = match heard {
        Heard::Reply(reply) => return reply.and_then(Harvested::into_harvest),
        Heard::Rest(rest) => rest,
    };
    let why = match ended {
        Ended::Exited(0) => match rest.map(|out| serde_json::from_slice::<Reply>(&out)) {
            Ok(Ok(reply)) => return reply.and_then(Harvested::into_harvest),
            Ok(Err(e)) => format!("the harvest process's reply: {e}"),
            Err(e) => format!("talking to the harvest process: {e}"),
        },
        other => format!("the harvest process {other}"),
    };
    Err(match stderr_tail(stderr) {
        Some(said) => format!("{why}: {said}"),
        None => why,
    })
}

/// An unnamed file for the child's stderr: in memory on Linux (`memfd_create`: no
/// inode to allocate in a file system, which on a busy ext4 `/tmp` costs more than
/// the rest of starting the child), else in the temporary directory. Neither can be
/// opened again by path.
pub fn scratch_file() -> std::io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        let fd = memfd_create(c"fanout-harvest-stderr", MFdFlags::MFD_CLOEXEC)?;
        Ok(std::fs::File::from(fd))
    }
    #[cfg(not(target_os = "linux"))]
    tempfile::tempfile()
}

/// `exe harvest-worker <our pid>`, in `dir`, with this process's environment less
/// what no child gets ([`child_env`]), in a process group of its own. Nothing runs
/// between fork and exec, so the standard library starts it with `posix_spawn`.
fn child_command(exe: &Path, dir: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_COMMAND)
        .arg(std::process::id().to_string())
        .current_dir(dir)
        .env_clear()
        .envs(child_env(std::env::vars_os()))
        .process_group(0);
    cmd
}

/// In the child, first thing: SIGINT, SIGTERM and SIGHUP ignored, killed when its
/// parent dies, and its parent still `parent` (else it died before the death signal
/// was asked for). The harvest server and its children detach alike.
pub fn detach(parent: nix::unistd::Pid) -> std::io::Result<()> {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: SIG_IGN installs no handler.
        unsafe { signal(sig, SigHandler::SigIgn) }?;
    }
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if nix::unistd::getppid() != parent {
        return Err(std::io::Error::other("fanout is gone"));
    }
    Ok(())
}

/// `vars` less credentials and what agents are not given either
/// ([`crate::secret::is_scrubbed`]). fanout took its credentials out of its own
/// environment when it started ([`crate::secret::Secrets::take_from_env`]); the child
/// is spared them whatever added one since.
fn child_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (OsString, OsString)> {
    vars.filter(|(k, _)| !crate::secret::is_scrubbed(&k.to_string_lossy()))
}

/// fanout's own binary, for [`Request::run_in_child`]. On Linux `/proc/self/exe`: the
/// very file this process was started from, even if its path was replaced since.
/// Elsewhere, the path it was started from. Either way the running program must
/// answer `harvest-worker <pid>` as fanout's `main` does ([`started_as_child`], then
/// [`child_main`]): a program that runs plans through this library from a `main` of
/// its own must dispatch it too.
pub fn own_binary() -> std::io::Result<PathBuf> {
    if cfg!(target_os = "linux") {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    std::env::current_exe()
}

/// The child's side: read a [`Request`] on `input`, serve it, write the [`Reply`] on
/// `output`, as one line in one write (the run takes the reply once its line ends:
/// [`hear`]). Err: why no reply was written.
pub fn child(input: impl Read, mut output: impl Write) -> Result<(), String> {
    let mut bytes = Vec::new();
    input
        .take(MAX_MESSAGE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the request: {e}"))?;
    let request: Request =
        serde_json::from_slice(&bytes).map_err(|e| format!("the request: {e}"))?;
    drop(bytes);
    let mut line = serde_json::to_vec(&request.serve()).map_err(|e| format!("the reply: {e}"))?;
    line.push(b'\n');
    output
        .write_all(&line)
        .and_then(|()| output.flush())
        .map_err(|e| format!("the reply: {e}"))
}

impl Harvested {
    /// As [`harvest`] gives it; the commit must be a full object name.
    fn into_harvest(self) -> Result<Harvest, String> {
        let full = self.commit.len() == 40 && self.commit.bytes().all(|b| b.is_ascii_hexdigit());
        let commit = Oid::from_str(&self.commit)
            .ok()
            .filter(|_| full)
            .ok_or_else(|| format!("commit: {:?} is no object name", self.commit))?;
        Ok(Harvest {
            commit,
            committed: self.committed,
            files_modified: self.files_modified,
            note: self.note,
        })
    }
}

/// The last lines a failed child wrote on stderr (fanout's `fanout: error: ` prefix
/// taken off), joined, bounded and masked; `None` when it wrote none.
fn stderr_tail(file: &mut std::fs::File) -> Option<String> {
    let bytes = crate::util::tail_of(file, STDERR_TAIL_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim().trim_start_matches("fanout: error: "))
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    (!tail.is_empty()).then(|| crate::secret::mask_tokens(crate::util::head(&tail, 500)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(common: &Path) -> Request {
        Request {
            common: common.to_owned(),
            name: "w1".into(),
            path: common.join("nowhere"),
            scratch: common.to_owned(),
            branch: "fanout/x/w1".into(),
            base: "0".repeat(40),
            identity: ("fanout".into(), "fanout@example.invalid".into()),
            message: "m".into(),
            exclude: vec!["*.log".into()],
            filters: vec![("filter.x.clean".into(), "cat".into())],
        }
    }

    /// A stand-in "binary": a shell script with `body`.
    fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join("exe.sh");
        std::fs::write(&exe, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }

    fn harvested(commit: &str) -> Harvested {
        Harvested {
            commit: commit.into(),
            committed: true,
            files_modified: vec!["a".into()],
            note: None,
        }
    }

    #[test]
    fn the_request_survives_the_round_trip_and_a_reply_names_a_whole_commit() {
        let dir = tempfile::tempdir().unwrap();
        let sent = request(dir.path());
        let back: Request = serde_json::from_slice(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&sent).unwrap()
        );
        let h = harvested(&"1".repeat(40)).into_harvest().unwrap();
        assert_eq!(h.commit.to_string(), "1".repeat(40));
        assert_eq!(h.files_modified, vec!["a".to_string()]);
        // Short, padded or not hex at all: a failed harvest, not a guess or a panic.
        for bad in ["abc1234", "not a commit", &"g".repeat(40), &"1".repeat(41)] {
            let err = harvested(bad).into_harvest().unwrap_err();
            assert!(err.contains("is no object name"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_child_that_fails_says_how_and_what_it_printed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = script(
            dir.path(),
            "cat >/dev/null; echo 'fanout: error: libgit2 said: out of luck' >&2; exit 4",
        );
        let err = request(dir.path()).run_in_child(&exe).unwrap_err();
        assert_eq!(
            err,
            "the harvest process exited 4: libgit2 said: out of luck"
        );
        let exe = script(dir.path(), "cat >/dev/null; kill -9 $$");
        let err = request(dir.path()).run_in_child(&exe).unwrap_err();
        assert_eq!(err, "the harvest process was killed by signal 9");
        let exe = script(dir.path(), "cat >/dev/null; echo '{\"Ok\": 7}'");
        let err = request(dir.path()).run_in_child(&exe).unwrap_err();
        assert!(err.starts_with("the harvest process's reply:"), "{err}");
        // A harvest that failed in the child is that failure.
        let exe = script(
            dir.path(),
            "cat >/dev/null; echo '{\"Err\": \"no such tree\"}'",
        );
        let err = request(dir.path()).run_in_child(&exe).unwrap_err();
        assert_eq!(err, "no such tree");
    }

    fn rest(heard: Heard) -> std::io::Result<Vec<u8>> {
        match heard {
            Heard::Rest(rest) => rest,
            Heard::Reply(reply) => panic!("a reply: {reply:?}"),
        }
    }

    #[test]
    fn a_reply_over_the_cap_is_refused() {
        let big = vec![b'x'; 11];
        let err = rest(hear(&big[..], 10)).unwrap_err();
        assert_eq!(err.to_string(), "its reply is over 10 bytes");
        assert_eq!(rest(hear(&big[..], 11)).unwrap(), big);
        // A reply's line is capped too.
        let line = b"{\"Err\":\"0123456789\"}\n";
        assert!(rest(hear(&line[..], 10)).is_err());
    }

    #[test]
    fn a_whole_reply_is_taken_without_waiting_for_the_end() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        // Were the end awaited, the read would time out: `theirs` stays open.
        ours.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        (&theirs)
            .write_all(b"{\"Err\":\"no such tree\"}\nexit 0")
            .unwrap();
        match hear(&ours, MAX_MESSAGE_BYTES) {
            Heard::Reply(reply) => assert_eq!(reply.unwrap_err(), "no such tree"),
            Heard::Rest(rest) => panic!("no reply: {rest:?}"),
        }
        // A line that is no whole reply (cut short, or none at all before the
        // ending) is read on to the end, for how the child ended.
        for written in [
            "{\"Ok\":\nsignal 9",
            "\nexit 4",
            "{\"Ok\": 7}\nexit 0",
            "{}",
        ] {
            let got = rest(hear(written.as_bytes(), MAX_MESSAGE_BYTES)).unwrap();
            assert_eq!(got, written.as_bytes());
        }
    }

    #[test]
    fn the_child_leads_a_process_group_is_told_its_parent_and_talks_over_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        // It writes down what it was given, then answers with a canned reply.
        let exe = script(
            dir.path(),
            &format!(
                "echo \"$1 $2 $(pwd) $(ps -o pgid= -p $$) $$ $(readlink /proc/$$/fd/0) \
                 $(readlink /proc/$$/fd/1)\" > {seen}; \
                 cat >> {seen}; echo '{{\"Err\": \"nothing\"}}'",
                seen = seen.display()
            ),
        );
        let sent = request(dir.path());
        assert_eq!(sent.run_in_child(&exe).unwrap_err(), "nothing");
        let seen = std::fs::read_to_string(&seen).unwrap();
        let (first, json) = seen.split_once('\n').unwrap();
        let words: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(words[0], CHILD_COMMAND);
        assert_eq!(
            words[1],
            std::process::id().to_string(),
            "told who its parent is"
        );
        assert_eq!(Path::new(words[2]), dir.path().canonicalize().unwrap());
        assert_eq!(
            words[3], words[4],
            "the child leads a process group of its own"
        );
        assert!(words[5].starts_with("socket:"), "{first}");
        assert_eq!(words[5], words[6], "one socket for its stdin and stdout");
        let got: Request = serde_json::from_str(json).unwrap();
        assert_eq!(got.branch, sent.branch);
        assert_eq!(got.filters, sent.filters);
    }

    #[test]
    fn the_child_is_spared_credentials_and_what_agents_are_not_given() {
        let vars = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "ghs_x"),
            ("GH_TOKEN", "y"),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
            ("GIT_DIR", "/elsewhere"),
        ];
        let kept: Vec<_> = child_env(vars.iter().map(|(k, v)| (k.into(), v.into()))).collect();
        assert_eq!(kept, vec![(OsString::from("PATH"), OsString::from("/bin"))]);
    }

    #[test]
    fn the_child_side_refuses_a_bad_request_and_answers_a_failed_harvest() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        let err = child(&b"{not json"[..], &mut out).unwrap_err();
        assert!(err.starts_with("the request:"), "{err}");
        assert!(out.is_empty());
        // No repository there: the harvest fails, and the reply says why.
        let sent = serde_json::to_vec(&request(dir.path())).unwrap();
        child(&sent[..], &mut out).unwrap();
        // One line, ended.
        let line = out.strip_suffix(b"\n").unwrap();
        assert!(!line.contains(&b'\n'));
        let reply: Reply = serde_json::from_slice(line).unwrap();
        assert!(reply.is_err(), "{reply:?}");
    }
}
