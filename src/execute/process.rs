//! One supervised agent process.
//!
//! The agent runs as the leader of its own process group (`process_group(0)`), with
//! stdin closed and stdout/stderr drained concurrently into one log file; only a
//! bounded tail of stdout is kept in memory for the adapter to parse. Stopping is
//! SIGTERM to the whole group, a grace period, then SIGKILL. When the leader exits,
//! anything it left running in its group is stopped the same way, so no process an
//! agent started outlives its worker.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::StopLevel;

/// How much of stdout is kept in memory for parsing.
pub const STDOUT_TAIL_BYTES: usize = 4 << 20;
/// How long to wait for output pipes to close after the group is gone.
const PIPE_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Minimum spacing of last-line updates.
const LINE_UPDATE_EVERY: Duration = Duration::from_millis(100);

/// What to run.
#[derive(Debug)]
pub struct ProcessSpec<'a> {
    /// Program.
    pub program: &'a str,
    /// Arguments.
    pub args: &'a [String],
    /// Working directory.
    pub cwd: &'a Path,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Log file for stdout and stderr.
    pub log: &'a Path,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
}

/// Why the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself.
    Exited,
    /// fanout stopped it at the timeout.
    TimedOut,
    /// fanout stopped it because fanout was interrupted.
    Interrupted,
}

/// What was observed.
#[derive(Debug)]
pub struct Supervised {
    /// Exit code, if it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, if any.
    pub signal: Option<i32>,
    /// Why it ended.
    pub ending: Ending,
    /// Wall-clock time from spawn to exit.
    pub duration: Duration,
    /// The last [`STDOUT_TAIL_BYTES`] of stdout.
    pub stdout_tail: Vec<u8>,
    /// Processes of its group outlived the leader and had to be stopped.
    pub stragglers: bool,
    /// SIGKILL was needed.
    pub killed: bool,
    /// The output pipes were still held open by a process outside the group.
    pub pipes_leaked: bool,
}

/// Run `spec` to completion under supervision. `on_line` gets the latest output line,
/// at most every 100 ms. Errors only when the process cannot be started.
pub async fn supervise(
    spec: ProcessSpec<'_>,
    mut stop: watch::Receiver<StopLevel>,
    on_line: impl FnMut(&str) + Send + 'static,
) -> std::io::Result<Supervised> {
    let log = tokio::fs::File::create(spec.log).await?;
    let mut cmd = tokio::process::Command::new(spec.program);
    cmd.args(spec.args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let pgid = Pid::from_raw(child.id().expect("a fresh child has a pid") as i32);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let drain = tokio::spawn(drain(stdout, stderr, log, on_line));

    let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut ending = Ending::Exited;
    let mut killed = false;
    let mut stop_open = true;
    // A stop requested before we started counts too.
    let mut pending = Some(*stop.borrow());
    let status = loop {
        if let Some(level) = pending.take() {
            match level {
                StopLevel::Run => {}
                StopLevel::Graceful => {
                    if kill_at.is_none() && !killed {
                        ending = Ending::Interrupted;
                        signal_group(pgid, Signal::SIGTERM);
                        kill_at = Some(tokio::time::Instant::now() + spec.grace);
                    }
                }
                StopLevel::Kill => {
                    if ending == Ending::Exited {
                        ending = Ending::Interrupted;
                    }
                    signal_group(pgid, Signal::SIGKILL);
                    killed = true;
                    kill_at = None;
                }
            }
        }
        tokio::select! {
            st = child.wait() => break st?,
            _ = sleep_until(deadline), if deadline.is_some() && ending == Ending::Exited && !killed => {
                ending = Ending::TimedOut;
                signal_group(pgid, Signal::SIGTERM);
                kill_at = Some(tokio::time::Instant::now() + spec.grace);
            }
            _ = sleep_until(kill_at), if kill_at.is_some() => {
                signal_group(pgid, Signal::SIGKILL);
                killed = true;
                kill_at = None;
            }
            changed = stop.changed(), if stop_open => {
                match changed {
                    Ok(()) => pending = Some(*stop.borrow_and_update()),
                    Err(_) => stop_open = false,
                }
            }
        }
    };
    let duration = started.elapsed();

    // The leader is gone; stop whatever it left in its group. (When fanout signalled
    // the group itself, members may simply still be dying: not the agent's fault.)
    let lingering = group_alive(pgid);
    let stragglers = lingering && ending == Ending::Exited;
    if lingering {
        let grace = if *stop.borrow() == StopLevel::Kill {
            Duration::ZERO
        } else {
            spec.grace.min(Duration::from_secs(5))
        };
        signal_group(pgid, Signal::SIGTERM);
        let until = Instant::now() + grace;
        while group_alive(pgid) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if group_alive(pgid) {
            signal_group(pgid, Signal::SIGKILL);
            killed = true;
        }
    }

    let mut drain = drain;
    let (stdout_tail, pipes_leaked) = match tokio::time::timeout(PIPE_CLOSE_WAIT, &mut drain).await
    {
        Ok(Ok(tail)) => (tail, false),
        Ok(Err(_)) => (Vec::new(), false),
        Err(_) => {
            drain.abort();
            (Vec::new(), true)
        }
    };

    Ok(Supervised {
        exit_code: status.code(),
        signal: status.signal(),
        ending,
        duration,
        stdout_tail,
        stragglers,
        killed,
        pipes_leaked,
    })
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn signal_group(pgid: Pid, sig: Signal) {
    // ESRCH (group already gone) is the common, harmless case.
    let _ = killpg(pgid, sig);
}

/// Does any process remain in the group? (Zombies count until reaped.)
fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

/// Copy both streams into the log as they come, keep a bounded tail of stdout, and
/// report the latest complete output line.
async fn drain(
    mut stdout: impl AsyncRead + Unpin,
    mut stderr: impl AsyncRead + Unpin,
    log: tokio::fs::File,
    mut on_line: impl FnMut(&str),
) -> Vec<u8> {
    let mut log = tokio::io::BufWriter::new(log);
    let mut tail: Vec<u8> = Vec::new();
    let mut a = vec![0u8; 16 * 1024];
    let mut b = vec![0u8; 16 * 1024];
    let (mut out_open, mut err_open) = (true, true);
    let mut lines = LastLine::default();
    let mut last_sent = Instant::now() - LINE_UPDATE_EVERY;
    while out_open || err_open {
        let chunk: &[u8] = tokio::select! {
            r = stdout.read(&mut a), if out_open => match r {
                Ok(0) | Err(_) => { out_open = false; continue; }
                Ok(n) => {
                    tail.extend_from_slice(&a[..n]);
                    if tail.len() > 2 * STDOUT_TAIL_BYTES {
                        let cut = tail.len() - STDOUT_TAIL_BYTES;
                        tail.drain(..cut);
                    }
                    &a[..n]
                }
            },
            r = stderr.read(&mut b), if err_open => match r {
                Ok(0) | Err(_) => { err_open = false; continue; }
                Ok(n) => &b[..n],
            },
        };
        let _ = log.write_all(chunk).await;
        if lines.feed(chunk) && last_sent.elapsed() >= LINE_UPDATE_EVERY {
            on_line(&lines.last);
            last_sent = Instant::now();
        }
    }
    let _ = log.flush().await;
    if tail.len() > STDOUT_TAIL_BYTES {
        let cut = tail.len() - STDOUT_TAIL_BYTES;
        tail.drain(..cut);
    }
    tail
}

/// The last complete, non-blank output line (bounded).
#[derive(Default)]
struct LastLine {
    partial: Vec<u8>,
    last: String,
}

impl LastLine {
    const MAX: usize = 400;

    /// Feed bytes; true when a new complete line arrived.
    fn feed(&mut self, chunk: &[u8]) -> bool {
        let mut updated = false;
        for part in chunk.split_inclusive(|b| *b == b'\n') {
            let complete = part.last() == Some(&b'\n');
            let room = Self::MAX.saturating_sub(self.partial.len());
            self.partial
                .extend_from_slice(&part[..part.len().min(room)]);
            if complete {
                let text = String::from_utf8_lossy(&self.partial);
                let clean: String = strip_ansi(text.trim())
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect();
                if !clean.trim().is_empty() {
                    self.last = clean.trim().to_owned();
                    updated = true;
                }
                self.partial.clear();
            }
        }
        updated
    }
}

/// Remove ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_line_tracking() {
        let mut l = LastLine::default();
        assert!(!l.feed(b"partial"));
        assert!(l.feed(b" line\n\x1b[31mred\x1b[0m\n   \n"));
        assert_eq!(l.last, "red");
        let big = vec![b'x'; 10_000];
        l.feed(&big);
        assert!(l.feed(b"\n"));
        assert_eq!(l.last.len(), LastLine::MAX);
    }
}
