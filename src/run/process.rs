//! One supervised agent process.
//!
//! The agent runs as the leader of its own session and process group (`setsid`, made
//! between fork and exec, so the group exists from the first instant; the session has
//! no controlling terminal, so no keystrokes can be pushed into the user's), with
//! stdin closed and stdout/stderr drained concurrently into one log file; only a
//! bounded tail of stdout is kept in memory for the adapter to parse. Stopping is
//! SIGTERM to the whole group, a grace period, then SIGKILL. When the leader exits,
//! anything it left running in its group is stopped the same way, so no process an
//! agent started outlives its worker.
//!
//! A confined process ([`ProcessSpec::confine`]) restricts itself between fork and
//! exec, after `setsid`, with the ruleset fanout built for it (see
//! [`crate::sandbox::Restrictions`]): the program starts already confined.
//!
//! While a group runs, its id is recorded next to its log ([`group_record_path`]), so
//! that after a crash of fanout itself (which cannot stop its agents) `fanout resume`
//! can tell which groups are still alive.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::event::StopLevel;
use super::supervisor::Report;
use crate::agent::{Progress, StreamWatch, WATCH_LINE_MAX};
use crate::model::CostSource;

/// How much of stdout is kept in memory for parsing.
pub const STDOUT_TAIL_BYTES: usize = 4 << 20;
/// How long to wait for output pipes to close after the group is gone.
const PIPE_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Minimum spacing of last-line updates.
const LINE_UPDATE_EVERY: Duration = Duration::from_millis(100);

/// What to run.
pub struct ProcessSpec<'a> {
    /// Program.
    pub program: &'a str,
    /// Arguments.
    pub args: &'a [String],
    /// Working directory.
    pub cwd: &'a Path,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Log file for stdout and stderr (appended to; created when missing).
    pub log: &'a Path,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
    /// The agent's live limits; none for checks and setup steps.
    pub live: LiveLimits,
    /// Run it confined: the worker's prepared sandbox ([`Confinement::prepared`]).
    ///
    /// [`Confinement::prepared`]: super::confine::Confinement::prepared
    pub confine: Option<&'a crate::sandbox::Restrictions>,
}

/// What the live output is checked against while the process runs.
#[derive(Default)]
pub struct LiveLimits {
    /// Stop the agent when it printed nothing (stdout or stderr) for this long.
    pub inactivity: Option<Duration>,
    /// Reads stdout as it comes, for the limits below.
    pub watch: Option<Box<dyn StreamWatch>>,
    /// Stop the agent when its live cost exceeds this (USD).
    pub budget: Option<f64>,
    /// Stop the agent when its live step count exceeds this (only when the watch says
    /// the agent has no limit of its own).
    pub max_steps: Option<u32>,
    /// Stop the agent once this turns true: the run's `budget_total` was reached (by
    /// any worker's spend).
    pub run_budget: Option<watch::Receiver<bool>>,
    /// Stop the agent once the run's gateway says so: it measured the worker's budget,
    /// or the run's `budget_total`, reached on the wire.
    pub gateway: Option<watch::Receiver<Option<crate::gateway::Stop>>>,
    /// Told each time the live progress changes.
    pub on_progress: Option<Box<dyn FnMut(Progress) + Send>>,
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
    /// fanout stopped it: its live cost went over the budget.
    OverBudget,
    /// fanout stopped it: the run's spend reached `budget_total`.
    RunBudget,
    /// fanout stopped it: it took more steps than allowed.
    MaxSteps,
    /// fanout stopped it: no output for the inactivity timeout.
    Inactive,
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
    /// Processes it started outlived it and had to be stopped.
    pub stragglers: bool,
    /// fanout sent the group SIGTERM (at a limit, or when asked to stop).
    pub termed: bool,
    /// SIGKILL was needed.
    pub killed: bool,
    /// Its supervisor ended before it reported (something killed it): what the
    /// program left outside its group is stopped only when the run ends.
    pub supervisor_lost: bool,
    /// The output pipes were still held open by a process outside the group.
    pub pipes_leaked: bool,
    /// What the live output said last (cost, steps), when it was watched.
    pub progress: Progress,
    /// Where the live cost came from.
    pub progress_source: Option<CostSource>,
    /// Why the gateway had the agent stopped, when it did.
    pub gateway_stop: Option<crate::gateway::Stop>,
}

/// The limits the drain checks on each stdout line.
struct LineLimits {
    budget: Option<f64>,
    max_steps: Option<u32>,
}

/// Run `spec` to completion under supervision. `on_line` gets the latest output line,
/// at most every 100 ms. Errors only when the process cannot be started.
pub async fn supervise(
    mut spec: ProcessSpec<'_>,
    mut stop: watch::Receiver<StopLevel>,
    on_line: impl FnMut(&str) + Send + 'static,
) -> std::io::Result<Supervised> {
    let log = tokio::fs::File::from_std(crate::util::open_log(spec.log, false)?);
    let (report_rx, report_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let mut cmd = command(&mut spec, report_tx.as_raw_fd())?;
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    drop(report_tx);
    let ended = read_report(report_rx);
    let pgid = Pid::from_raw(child.id().expect("a fresh child has a pid") as i32);
    let group_record = group_record_path(spec.log);
    let _ = super::groups::record(&group_record, pgid.as_raw(), spec.program);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let last_output = Arc::new(AtomicU64::new(0));
    let (limit_tx, limit_rx) = tokio::sync::mpsc::unbounded_channel::<Ending>();
    let watching = Watching {
        watch: spec.live.watch.take(),
        limits: LineLimits {
            budget: spec.live.budget,
            max_steps: spec.live.max_steps,
        },
        limit_tx,
        on_progress: spec.live.on_progress.take(),
        last_output: Arc::clone(&last_output),
        started,
    };
    let drain = tokio::spawn(drain(stdout, stderr, log, on_line, watching));
    let mut st = Stopping {
        pgid,
        grace: spec.grace,
        ending: Ending::Exited,
        kill_at: None,
        killed: false,
        termed: false,
    };
    let limits = Limits {
        deadline: spec.timeout.map(|t| tokio::time::Instant::now() + t),
        inactivity: spec.live.inactivity,
        last_output,
        started,
        reached: limit_rx,
        run_budget: spec.live.run_budget.take(),
        gateway: spec.live.gateway.take(),
        gateway_stop: None,
    };
    let (report, gateway_stop) = wait_for_exit(ended, &mut st, limits, &mut stop).await;
    let duration = started.elapsed();
    let stragglers = stop_stragglers(&mut st, &stop, &mut child).await;
    // The tree is gone: nothing left for a later `fanout resume` to worry about.
    let _ = std::fs::remove_file(&group_record);
    let (stdout_tail, progress, progress_source, pipes_leaked) = finish_drain(drain).await;
    let (exit_code, signal) = match report {
        Some(Report::Exited(c)) => (Some(c), None),
        Some(Report::Signaled(s)) => (None, Some(s)),
        Some(Report::NotStarted(errno)) => return Err(std::io::Error::from_raw_os_error(errno)),
        None => (None, Some(Signal::SIGKILL as i32)),
    };
    Ok(Supervised {
        exit_code,
        signal,
        supervisor_lost: report.is_none(),
        termed: st.termed,
        ending: st.ending,
        duration,
        stdout_tail,
        stragglers,
        killed: st.killed,
        pipes_leaked,
        progress,
        progress_source,
        gateway_stop,
    })
}

/// The command for `spec`: fanout's own binary as its supervisor
/// ([`super::supervisor`], reporting on `report`), in its own session and process
/// group, a clean environment, output piped; confined by its policy between fork and
/// exec.
fn command(spec: &mut ProcessSpec<'_>, report: RawFd) -> std::io::Result<tokio::process::Command> {
    let env = std::mem::take(&mut spec.env);
    let confine = spec.confine.cloned();
    let mut cmd = tokio::process::Command::new(own_binary()?);
    cmd.arg(super::supervisor::ARG)
        .arg(spec.program)
        .args(spec.args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    // SAFETY: setsid(2), dup2(2), fcntl(2) and `Restrictions::apply` (prctl, capset,
    // landlock_restrict_self) are system calls only, async-signal-safe; nothing else
    // runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // The report channel as descriptor 3, kept open across exec.
            let ok = if report == super::supervisor::REPORT_FD {
                nix::libc::fcntl(report, nix::libc::F_SETFD, 0)
            } else {
                nix::libc::dup2(report, super::supervisor::REPORT_FD)
            };
            if ok < 0 {
                return Err(std::io::Error::last_os_error());
            }
            match &confine {
                Some(c) => c.apply(),
                None => Ok(()),
            }
        });
    }
    Ok(cmd)
}

/// fanout's own binary, run as each worker's supervisor. On Linux `/proc/self/exe`:
/// the very file this process was started from, even if its path was replaced since.
/// A program that runs plans through this library from a `main` of its own must
/// dispatch [`super::supervisor::started_as_supervisor`] as fanout's does.
fn own_binary() -> std::io::Result<PathBuf> {
    if cfg!(target_os = "linux") {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    std::env::current_exe()
}

/// The supervisor's report of how its program ended, read on a thread of its own;
/// `None` when the channel closed without one (the supervisor was killed).
fn read_report(rx: std::os::fd::OwnedFd) -> tokio::sync::oneshot::Receiver<Option<Report>> {
    let (tx, out) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let file = std::fs::File::from(rx);
        let _ = std::io::Read::read_to_string(&mut std::io::Read::take(file, 64), &mut text);
        let _ = tx.send(Report::parse(&text));
    });
    out
}

/// How fanout is stopping a process group, if it is: why, when SIGKILL follows the
/// SIGTERM, and whether it was sent.
struct Stopping {
    pgid: Pid,
    grace: Duration,
    ending: Ending,
    kill_at: Option<tokio::time::Instant>,
    killed: bool,
    /// SIGTERM was sent (the ending says why).
    termed: bool,
}

impl Stopping {
    /// Nothing has stopped it yet: a limit may.
    fn running(&self) -> bool {
        self.ending == Ending::Exited && !self.killed
    }

    /// SIGTERM the group for `why`; SIGKILL follows after the grace.
    fn term(&mut self, why: Ending) {
        self.ending = why;
        self.termed = true;
        // The supervisor, the group's leader, takes no notice: it outlives its program.
        signal_group(self.pgid, Signal::SIGTERM);
        self.kill_at = Some(tokio::time::Instant::now() + self.grace);
    }

    /// SIGKILL every process of the tree but its supervisor.
    fn kill(&mut self) {
        if signal_tree(self.pgid, Signal::SIGKILL) {
            self.killed = true;
        }
        self.kill_at = None;
    }

    /// fanout was asked to stop, at `level`.
    fn requested(&mut self, level: StopLevel) {
        match level {
            StopLevel::Run => {}
            StopLevel::Graceful => {
                if self.kill_at.is_none() && !self.killed {
                    self.term(Ending::Interrupted);
                }
            }
            StopLevel::Kill => {
                if self.ending == Ending::Exited {
                    self.ending = Ending::Interrupted;
                }
                self.kill();
            }
        }
    }
}

/// What may stop the process besides a stop request: the timeout, the drain's line
/// limits (budget, steps), and inactivity.
struct Limits {
    deadline: Option<tokio::time::Instant>,
    inactivity: Option<Duration>,
    last_output: Arc<AtomicU64>,
    started: Instant,
    reached: tokio::sync::mpsc::UnboundedReceiver<Ending>,
    run_budget: Option<watch::Receiver<bool>>,
    gateway: Option<watch::Receiver<Option<crate::gateway::Stop>>>,
    /// What the gateway said, once it did.
    gateway_stop: Option<crate::gateway::Stop>,
}

impl Limits {
    /// Stop the group for what the gateway said (`why`), unless it is already
    /// stopping.
    fn gateway_said(&mut self, st: &mut Stopping, why: Option<crate::gateway::Stop>) {
        use crate::gateway::Stop;
        let Some(why) = why else { return };
        if !st.running() {
            return;
        }
        self.gateway_stop = Some(why);
        st.term(match why {
            Stop::Budget { .. } => Ending::OverBudget,
            Stop::RunBudget { .. } => Ending::RunBudget,
        });
    }
}

/// Wait for the supervisor's report that its program ended, stopping the group at a
/// limit or when fanout is asked to stop (a stop requested before it started counts
/// too). `None`: the supervisor ended without one. With it, why the gateway had it
/// stopped, when it did.
async fn wait_for_exit(
    mut ended: tokio::sync::oneshot::Receiver<Option<Report>>,
    st: &mut Stopping,
    mut limits: Limits,
    stop: &mut watch::Receiver<StopLevel>,
) -> (Option<Report>, Option<crate::gateway::Stop>) {
    let mut idle_check = limits.inactivity.map(|limit| {
        let every = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::time::interval(every)
    });
    let mut limits_open = true;
    let mut stop_open = true;
    let mut run_budget = limits.run_budget.take();
    if run_budget.as_mut().is_some_and(|r| *r.borrow_and_update()) {
        st.term(Ending::RunBudget);
    }
    let mut gateway = limits.gateway.take();
    if let Some(g) = gateway.as_mut() {
        let now = *g.borrow_and_update();
        limits.gateway_said(st, now);
    }
    let mut pending = Some(*stop.borrow());
    loop {
        if let Some(level) = pending.take() {
            st.requested(level);
        }
        tokio::select! {
            report = &mut ended => return (report.ok().flatten(), limits.gateway_stop),
            _ = sleep_until(limits.deadline), if limits.deadline.is_some() && st.running() => {
                st.term(Ending::TimedOut);
            }
            limit = limits.reached.recv(), if limits_open && st.running() => {
                match limit {
                    Some(why) => st.term(why),
                    None => limits_open = false,
                }
            }
            _ = tick(&mut idle_check), if idle_check.is_some() && st.running() => {
                let limit = limits.inactivity.expect("checked");
                let last = Duration::from_millis(limits.last_output.load(Ordering::Relaxed));
                if limits.started.elapsed().saturating_sub(last) >= limit {
                    st.term(Ending::Inactive);
                }
            }
            reached = changed(&mut run_budget), if run_budget.is_some() && st.running() => {
                match reached {
                    Some(true) => st.term(Ending::RunBudget),
                    Some(false) => {}
                    None => run_budget = None,
                }
            }
            said = gateway_changed(&mut gateway), if gateway.is_some() && st.running() => {
                match said {
                    Some(why) => limits.gateway_said(st, why),
                    None => gateway = None,
                }
            }
            _ = sleep_until(st.kill_at), if st.kill_at.is_some() => st.kill(),
            changed = stop.changed(), if stop_open => {
                match changed {
                    Ok(()) => pending = Some(*stop.borrow_and_update()),
                    Err(_) => stop_open = false,
                }
            }
        }
    }
}

/// The next value of `rx` (`None` once its sender is gone).
async fn changed(rx: &mut Option<watch::Receiver<bool>>) -> Option<bool> {
    let rx = rx.as_mut()?;
    rx.changed().await.ok()?;
    Some(*rx.borrow_and_update())
}

/// The gateway's next word (`None` once it is gone).
async fn gateway_changed(
    rx: &mut Option<watch::Receiver<Option<crate::gateway::Stop>>>,
) -> Option<Option<crate::gateway::Stop>> {
    let rx = rx.as_mut()?;
    rx.changed().await.ok()?;
    Some(*rx.borrow_and_update())
}

/// How long fanout keeps killing a tree whose supervisor does not end (stopped or
/// stuck) before it kills the supervisor too.
const SUPERVISOR_WAIT: Duration = Duration::from_secs(5);

/// The program is gone; stop whatever it left — in its group, or re-parented to its
/// supervisor — and wait for the supervisor to end: then nothing of the tree runs.
/// Returns whether the program left processes running (when fanout signalled the
/// group itself, members may simply still be dying: not the agent's fault).
async fn stop_stragglers(
    st: &mut Stopping,
    stop: &watch::Receiver<StopLevel>,
    supervisor: &mut tokio::process::Child,
) -> bool {
    let stragglers =
        !super::reaper::tree_of(st.pgid.as_raw()).is_empty() && st.ending == Ending::Exited;
    let grace = if *stop.borrow() == StopLevel::Kill {
        Duration::ZERO
    } else {
        st.grace
    };
    let kill_at = Instant::now() + grace;
    let mut termed = std::collections::BTreeSet::new();
    // Only a process that stopped it keeps the supervisor from reaping.
    let _ = nix::sys::signal::kill(st.pgid, Signal::SIGCONT);
    loop {
        if !matches!(supervisor.try_wait(), Ok(None)) {
            return stragglers;
        }
        let now = Instant::now();
        for pid in super::reaper::tree_of(st.pgid.as_raw()) {
            let pid = Pid::from_raw(pid);
            if now >= kill_at {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                st.killed = true;
            } else if termed.insert(pid) {
                let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            }
        }
        if now >= kill_at + SUPERVISOR_WAIT {
            // Dead or stuck: what it would have reaped falls to the run's sweep.
            let _ = supervisor.start_kill();
            let _ = supervisor.wait().await;
            return stragglers;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What the drain read: the stdout tail and the live progress; and whether the output
/// pipes were still held open (by a process outside the group) after a short wait.
async fn finish_drain(
    mut drain: tokio::task::JoinHandle<(Vec<u8>, Progress, Option<CostSource>)>,
) -> (Vec<u8>, Progress, Option<CostSource>, bool) {
    match tokio::time::timeout(PIPE_CLOSE_WAIT, &mut drain).await {
        Ok(Ok((tail, progress, source))) => (tail, progress, source, false),
        Ok(Err(_)) => (Vec::new(), Progress::default(), None, false),
        Err(_) => {
            drain.abort();
            (Vec::new(), Progress::default(), None, true)
        }
    }
}

/// Where [`supervise`] records a process group while it lives: next to its log,
/// with the extension `pgid` (see [`super::groups`]).
pub fn group_record_path(log: &Path) -> PathBuf {
    log.with_extension("pgid")
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// What the drain does besides copying: feed stdout lines to the watch, check the
/// limits, and note when the agent last printed anything.
struct Watching {
    watch: Option<Box<dyn StreamWatch>>,
    limits: LineLimits,
    limit_tx: tokio::sync::mpsc::UnboundedSender<Ending>,
    on_progress: Option<Box<dyn FnMut(Progress) + Send>>,
    last_output: Arc<AtomicU64>,
    started: Instant,
}

impl Watching {
    fn output(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_output.store(ms, Ordering::Relaxed);
    }

    /// Feed complete stdout lines; check limits when the progress changed.
    fn lines(&mut self, splitter: &mut LineSplitter, chunk: &[u8], last: &mut Progress) {
        let Some(w) = self.watch.as_mut() else { return };
        splitter.feed(chunk, |line| w.line(line));
        self.check(last);
    }

    fn finish(&mut self, splitter: &mut LineSplitter, last: &mut Progress) {
        if let Some(w) = self.watch.as_mut() {
            splitter.flush(|line| w.line(line));
        }
        self.check(last);
    }

    fn check(&mut self, last: &mut Progress) {
        let Some(w) = self.watch.as_ref() else { return };
        let p = w.progress();
        if p == *last {
            return;
        }
        *last = p;
        if let Some(cb) = self.on_progress.as_mut() {
            cb(p);
        }
        if let (Some(b), Some(c)) = (self.limits.budget, p.cost)
            && c > b
        {
            let _ = self.limit_tx.send(Ending::OverBudget);
        }
        if w.enforces_steps()
            && let (Some(max), Some(n)) = (self.limits.max_steps, p.steps)
            && n > max
        {
            let _ = self.limit_tx.send(Ending::MaxSteps);
        }
    }
}

/// Splits a byte stream into lines, each cut at [`WATCH_LINE_MAX`] bytes.
pub(crate) struct LineSplitter {
    partial: Vec<u8>,
    max: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        LineSplitter::with_max(WATCH_LINE_MAX)
    }
}

impl LineSplitter {
    /// Lines cut at `max` bytes (the fuzz target cuts short lines, to reach the cut).
    pub(crate) fn with_max(max: usize) -> LineSplitter {
        LineSplitter {
            partial: Vec::new(),
            max,
        }
    }

    pub(crate) fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&[u8])) {
        for part in chunk.split_inclusive(|b| *b == b'\n') {
            let room = self.max.saturating_sub(self.partial.len());
            let body = part.strip_suffix(b"\n").unwrap_or(part);
            self.partial
                .extend_from_slice(&body[..body.len().min(room)]);
            if part.last() == Some(&b'\n') {
                each(&self.partial);
                self.partial.clear();
            }
        }
    }

    pub(crate) fn flush(&mut self, mut each: impl FnMut(&[u8])) {
        if !self.partial.is_empty() {
            each(&self.partial);
            self.partial.clear();
        }
    }
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

/// Signal every live process of the supervisor `pgid`'s tree but the supervisor;
/// whether there was any.
fn signal_tree(pgid: Pid, sig: Signal) -> bool {
    if !crate::util::procfs::available() {
        // No /proc to tell the tree (macOS): the group, supervisor included.
        return killpg(pgid, sig).is_ok();
    }
    let tree = super::reaper::tree_of(pgid.as_raw());
    for &pid in &tree {
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
    }
    !tree.is_empty()
}

/// Copy both streams into the log as they come, keep a bounded tail of stdout, and
/// report the latest complete output line.
async fn drain(
    mut stdout: impl AsyncRead + Unpin,
    mut stderr: impl AsyncRead + Unpin,
    log: tokio::fs::File,
    mut on_line: impl FnMut(&str),
    mut watching: Watching,
) -> (Vec<u8>, Progress, Option<CostSource>) {
    let mut splitter = LineSplitter::default();
    let mut progress = Progress::default();
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
                    watching.lines(&mut splitter, &a[..n], &mut progress);
                    &a[..n]
                }
            },
            r = stderr.read(&mut b), if err_open => match r {
                Ok(0) | Err(_) => { err_open = false; continue; }
                Ok(n) => &b[..n],
            },
        };
        watching.output();
        let _ = log.write_all(chunk).await;
        if lines.feed(chunk) && last_sent.elapsed() >= LINE_UPDATE_EVERY {
            on_line(&lines.last);
            last_sent = Instant::now();
        }
    }
    let _ = log.flush().await;
    watching.finish(&mut splitter, &mut progress);
    if tail.len() > STDOUT_TAIL_BYTES {
        let cut = tail.len() - STDOUT_TAIL_BYTES;
        tail.drain(..cut);
    }
    let source = watching.watch.as_ref().and_then(|w| w.cost_source());
    (tail, progress, source)
}

/// The last complete, non-blank output line (bounded).
#[derive(Default)]
pub(crate) struct LastLine {
    partial: Vec<u8>,
    last: String,
}

impl LastLine {
    pub(crate) const MAX: usize = 400;

    /// The last complete line.
    pub(crate) fn last(&self) -> &str {
        &self.last
    }

    /// Feed bytes; true when a new complete line arrived.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> bool {
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
    fn line_splitter_bounds_and_joins() {
        let mut s = LineSplitter::default();
        let mut got: Vec<Vec<u8>> = Vec::new();
        s.feed(b"ab", |l| got.push(l.to_vec()));
        s.feed(b"c\nd\n\ne", |l| got.push(l.to_vec()));
        s.flush(|l| got.push(l.to_vec()));
        assert_eq!(
            got,
            [b"abc".to_vec(), b"d".to_vec(), b"".to_vec(), b"e".to_vec()]
        );
        let mut got = Vec::new();
        let big = vec![b'x'; WATCH_LINE_MAX + 10];
        s.feed(&big, |_| {});
        s.feed(b"\n", |l| got.push(l.len()));
        assert_eq!(got, [WATCH_LINE_MAX]);
    }

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
