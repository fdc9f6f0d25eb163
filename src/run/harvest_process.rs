//! Each worker's harvest in a process of its own: a short-lived child of fanout's own
//! binary (`fanout harvest-worker`, hidden) puts the worktree's git files back
//! ([`super::worktree::restore_admin`]) and runs [`super::harvest::harvest`], reading
//! its [`Request`] as JSON on stdin and writing its [`Reply`] as JSON on stdout.
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
//! Trust: the child gets the run's environment (its credentials already taken out:
//! [`crate::secret::Secrets::take_from_env`]) and its own process group, so a Ctrl-C
//! at the terminal does not cut a harvest short (the run waits for it, as it would
//! for one in-process). Its reply is read capped, and parsed as data: it can do no
//! more than an agent could itself (its branch, the worktree's files), and the run's
//! tamper check comes after it. Its stderr (libgit2's and git's warnings) goes to a
//! log in the run directory, whose end is shown when the child fails.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git2::Oid;
use serde::{Deserialize, Serialize};

use super::harvest::{CommitSpec, Harvest, WorkerTree, harvest};
use crate::git::TrustedConfig;

/// Largest request or reply read: a reply lists every path the worker changed.
const MAX_MESSAGE_BYTES: u64 = 256 << 20;

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
    /// The filter drivers the worktree was checked out with.
    pub filters: TrustedConfig,
}

/// What a harvest found, as the child says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The worktree's git files found changed (each put back).
    pub restored: Vec<String>,
    /// The harvest, or why it failed.
    pub harvest: Result<Harvested, String>,
}

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
    /// Put the worktree's git files back and harvest it, here: what the child does.
    /// Err: the git files could not be put back (nothing was harvested).
    pub fn serve(&self) -> Result<Reply, String> {
        let restored = super::worktree::restore_admin(&self.common, &self.name, &self.path)
            .map_err(|e| format!("its worktree's git files could not be restored: {e}"))?;
        let base = Oid::from_str(&self.base).map_err(|e| format!("base: {}", e.message()))?;
        let spec = CommitSpec {
            identity: (&self.identity.0, &self.identity.1),
            message: self.message.clone(),
            exclude: &self.exclude,
            filters: &self.filters,
        };
        let wt = WorkerTree {
            common: &self.common,
            name: &self.name,
            path: &self.path,
            scratch: &self.scratch,
        };
        let harvest = harvest(&wt, &self.branch, base, &spec)
            .map(|h| Harvested {
                commit: h.commit.to_string(),
                committed: h.committed,
                files_modified: h.files_modified,
                note: h.note,
            })
            .map_err(|e| e.message().to_owned());
        Ok(Reply { restored, harvest })
    }

    /// Run this harvest in a child process of `exe` (fanout's own binary), its stderr
    /// to `log`; blocks until the child is done. Err: why no reply came.
    pub fn run_in_child(&self, exe: &Path, log: &Path) -> Result<Reply, String> {
        let request = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        let stderr =
            super::harvest::create_new(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut child = child_command(exe, &self.common)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
        // The child reads its whole request before it writes anything; each pipe is
        // closed once done with, so a child stopped midway never blocks the wait.
        let wrote = match child.stdin.take() {
            Some(mut stdin) => stdin.write_all(&request),
            None => Ok(()),
        };
        let mut out = Vec::new();
        let read = match child.stdout.take() {
            Some(stdout) => stdout.take(MAX_MESSAGE_BYTES).read_to_end(&mut out),
            None => Ok(0),
        };
        let status = child.wait().map_err(|e| e.to_string())?;
        let why = if !status.success() {
            format!("the harvest process {}", exited(status))
        } else if let Err(e) = wrote.and(read) {
            format!("talking to the harvest process: {e}")
        } else {
            match serde_json::from_slice(&out) {
                Ok(reply) => return Ok(reply),
                Err(e) => format!("the harvest process's reply: {e}"),
            }
        };
        Err(match super::excerpt::log_excerpt(log, &why) {
            Some(said) => format!("{why}: {said}"),
            None => why,
        })
    }
}

/// `exe harvest-worker`, in its own process group, in `dir`, with this process's
/// environment less any credential ([`child_env`]).
fn child_command(exe: &Path, dir: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_COMMAND)
        .current_dir(dir)
        .process_group(0)
        .env_clear()
        .envs(child_env(std::env::vars_os()));
    cmd
}

/// `vars` less any credential. fanout took them out of its own environment when it
/// started ([`crate::secret::Secrets::take_from_env`]); the child is spared them
/// whatever added one since.
fn child_env(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (OsString, OsString)> {
    vars.filter(|(k, _)| !crate::secret::is_credential(&k.to_string_lossy()))
}

/// The hidden subcommand the child runs.
pub const CHILD_COMMAND: &str = "harvest-worker";

/// fanout's own binary, for [`Request::run_in_child`]: the file this process was
/// started from even if its path was replaced since (Linux: `/proc/self/exe`).
pub fn own_binary() -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    return Ok(PathBuf::from("/proc/self/exe"));
    #[cfg(not(target_os = "linux"))]
    std::env::current_exe()
}

/// The child's side: read a [`Request`] on `input`, serve it, write the [`Reply`] on
/// `output`. Err: why no reply was written.
pub fn child(input: impl Read, mut output: impl Write) -> Result<(), String> {
    let mut bytes = Vec::new();
    input
        .take(MAX_MESSAGE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the request: {e}"))?;
    let request: Request =
        serde_json::from_slice(&bytes).map_err(|e| format!("the request: {e}"))?;
    drop(bytes);
    let reply = request.serve()?;
    serde_json::to_writer(&mut output, &reply).map_err(|e| format!("the reply: {e}"))?;
    output.flush().map_err(|e| format!("the reply: {e}"))
}

impl Reply {
    /// The restored files and the harvest, as [`harvest`] gives it.
    pub fn into_harvest(self) -> (Vec<String>, Result<Harvest, String>) {
        let harvest = self.harvest.and_then(|h| {
            Ok(Harvest {
                commit: Oid::from_str(&h.commit).map_err(|e| format!("commit: {}", e.message()))?,
                committed: h.committed,
                files_modified: h.files_modified,
                note: h.note,
            })
        });
        (self.restored, harvest)
    }
}

/// How a child ended, for a message.
fn exited(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended".into(),
    }
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
            filters: TrustedConfig::new().with("filter.x.clean", "cat"),
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

    #[test]
    fn the_request_and_reply_survive_the_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let sent = request(dir.path());
        let back: Request = serde_json::from_slice(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&sent).unwrap()
        );
        let reply = Reply {
            restored: vec!["gitdir".into()],
            harvest: Ok(Harvested {
                commit: "1".repeat(40),
                committed: true,
                files_modified: vec!["a".into()],
                note: None,
            }),
        };
        let (restored, h) = reply.into_harvest();
        assert_eq!(restored, vec!["gitdir".to_string()]);
        let h = h.unwrap();
        assert_eq!(h.commit.to_string(), "1".repeat(40));
        assert!(h.committed);
        // A reply naming no commit is a failed harvest, not a panic.
        let bad = Reply {
            restored: vec![],
            harvest: Ok(Harvested {
                commit: "not a commit".into(),
                committed: false,
                files_modified: vec![],
                note: None,
            }),
        };
        assert!(bad.into_harvest().1.unwrap_err().starts_with("commit:"));
    }

    #[test]
    fn a_child_that_fails_says_how_and_what_it_printed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("h.log");
        let exe = script(
            dir.path(),
            "cat >/dev/null; echo 'libgit2 said: out of luck' >&2; exit 3",
        );
        let err = request(dir.path()).run_in_child(&exe, &log).unwrap_err();
        assert!(err.contains("exited 3"), "{err}");
        assert!(err.contains("out of luck"), "{err}");
        let exe = script(dir.path(), "cat >/dev/null; kill -9 $$");
        let err = request(dir.path()).run_in_child(&exe, &log).unwrap_err();
        assert!(err.contains("killed by signal 9"), "{err}");
        let exe = script(dir.path(), "cat >/dev/null; echo '{\"restored\": 7}'");
        let err = request(dir.path()).run_in_child(&exe, &log).unwrap_err();
        assert!(err.contains("reply"), "{err}");
    }

    #[test]
    fn the_child_gets_its_subcommand_the_request_and_a_group_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("h.log");
        let seen = dir.path().join("seen");
        // It answers with a canned reply once it has written down what it was given.
        let exe = script(
            dir.path(),
            &format!(
                "echo \"$1 $(pwd) $(ps -o pgid= -p $$) $$\" > {seen}; cat >> {seen}; \
                 echo '{{\"restored\": [], \"harvest\": {{\"Err\": \"nothing\"}}}}'",
                seen = seen.display()
            ),
        );
        let sent = request(dir.path());
        let reply = sent.run_in_child(&exe, &log).unwrap();
        assert_eq!(reply.harvest, Err("nothing".into()));
        let seen = std::fs::read_to_string(&seen).unwrap();
        let (first, json) = seen.split_once('\n').unwrap();
        let words: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(words[0], CHILD_COMMAND);
        assert_eq!(Path::new(words[1]), dir.path().canonicalize().unwrap());
        assert_eq!(
            words[2], words[3],
            "the child leads a process group of its own"
        );
        let got: Request = serde_json::from_str(json).unwrap();
        assert_eq!(got.branch, sent.branch);
    }

    #[test]
    fn the_child_is_spared_credentials_and_keeps_the_rest() {
        let vars = [
            ("PATH", "/bin"),
            ("GITHUB_TOKEN", "ghs_x"),
            ("GH_TOKEN", "y"),
        ];
        let kept: Vec<_> = child_env(vars.iter().map(|(k, v)| (k.into(), v.into()))).collect();
        assert_eq!(kept, vec![(OsString::from("PATH"), OsString::from("/bin"))]);
    }

    #[test]
    fn a_planted_link_at_the_log_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let log = dir.path().join("h.log");
        std::os::unix::fs::symlink(&victim, &log).unwrap();
        let exe = script(dir.path(), "cat >/dev/null; echo noise >&2; exit 1");
        assert!(request(dir.path()).run_in_child(&exe, &log).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    }

    #[test]
    fn the_child_side_refuses_a_bad_request_and_answers_a_good_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        let err = child(&b"{not json"[..], &mut out).unwrap_err();
        assert!(err.starts_with("the request:"), "{err}");
        assert!(out.is_empty());
        // A worktree that is not there: its git files cannot be put back.
        let sent = serde_json::to_vec(&request(dir.path())).unwrap();
        let err = child(&sent[..], &mut out).unwrap_err();
        assert!(err.contains("git files could not be restored"), "{err}");
    }
}
