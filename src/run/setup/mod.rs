//! Worktree setup: what happens in a worker's new worktree before its agent starts.
//!
//! In order: the worker claims a block of ports ([`ports`]); files the agent needs but
//! git leaves out are copied from the user's checkout ([`copy`]: `copy:` globs and
//! `.worktreeinclude`); submodules are initialized (`git submodule update --init
//! --recursive`, by default when the base has a `.gitmodules`, through the hardened
//! [`crate::git::Git`]: nothing an agent planted in the shared configuration runs,
//! and no credential is in its environment); then the `setup:`
//! commands run, each with `sh -c` as its own supervised process group, their output
//! appended to the worker's log. Any failure fails the worker with a reason saying
//! what failed, and the agent is not started.
//!
//! Setup commands run in the worker's sandbox, like its agent and checks (the
//! submodule step is fanout's own git, unconfined). They (and the agent, and checks)
//! get `FANOUT_RUN_ID`, `FANOUT_WORKER_ID`,
//! `FANOUT_BRANCH`, `FANOUT_WORKTREE`, `FANOUT_PORT` (the block's first port) and
//! `FANOUT_PORTS` (`first-last`), with the agent's scrubbed environment.
//!
//! What setup leaves in the worktree is not the agent's work: the paths it copied, and
//! the paths setup changed or created that git does not ignore, are recorded in the
//! worktree's git directory ([`Baseline`]); harvest leaves them out of the worker's
//! commit unless the agent changed them afterwards (copied files: never committed).
//!
//! This module runs the setup part of the plan ([`SetupPlan`], resolved from
//! `fanout.yml` by [`crate::plan::setup`]); its outcome is a [`SetupRecord`] in the
//! result.

pub mod copy;
pub mod ports;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::model::{PortRange, Reason, SetupRecord, SetupStep, timed_out_after};
use crate::plan::setup::SetupPlan;
use crate::run::event::StopLevel;
use crate::run::process::{Ending, LiveLimits, ProcessSpec, supervise};
use crate::util::duration::format_secs;
use crate::util::glob;

/// Seconds `git submodule update` may run.
pub const SUBMODULE_TIMEOUT: f64 = 1800.0;
/// The submodule command, as shown in logs and reasons.
pub const SUBMODULE_COMMAND: &str = "git submodule update --init --recursive";

/// The worker being set up.
#[derive(Debug)]
pub struct Worker<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The worker.
    pub worker_id: u32,
    /// Its branch.
    pub branch: &'a str,
    /// The user's checkout (copied files come from here).
    pub checkout: &'a Path,
    /// Where the run's worktrees live (never searched for files to copy).
    pub worktree_root: &'a Path,
    /// The new worktree.
    pub worktree: &'a Path,
    /// The worker's log: started afresh here, setup output appended.
    pub log: &'a Path,
    /// fanout's environment, before scrubbing.
    pub base_env: &'a [(OsString, OsString)],
    /// SIGTERM → SIGKILL grace.
    pub grace: Duration,
    /// The worker's sandbox, for setup commands.
    pub confine: Option<&'a crate::sandbox::Restrictions>,
    /// Variables of the worker's confinement (temporary directory, object quarantine)
    /// every setup command gets.
    pub extra_env: &'a [(OsString, OsString)],
    /// The plan's base commit: the submodules fanout fetches are those its
    /// `.gitmodules` names.
    pub base: &'a str,
    /// The commit the worktree was made from (the base, or a dependent's merge of its
    /// dependencies' branches).
    pub start: &'a str,
}

/// What setup did.
#[derive(Debug)]
pub struct SetupOutcome {
    /// For the result.
    pub record: SetupRecord,
    /// Why the worker fails (`setup failed: …`, or `interrupted`), when it does.
    pub failure: Option<Reason>,
    /// `FANOUT_PORT` and `FANOUT_PORTS`, for the agent.
    pub env: Vec<(String, String)>,
    /// The port block, held until dropped (when the worker finishes).
    pub lease: Option<ports::PortLease>,
}

/// Prepare `w`'s worktree as `plan` says, with the port block claimed for it
/// ([`claim_ports`]). `on_line` gets the latest output line.
pub async fn prepare(
    plan: &SetupPlan,
    w: &Worker<'_>,
    ports: std::io::Result<ports::PortLease>,
    stop: watch::Receiver<StopLevel>,
    on_line: impl FnMut(&str) + Send + Clone + 'static,
) -> SetupOutcome {
    let mut out = SetupOutcome {
        record: SetupRecord::default(),
        failure: None,
        env: Vec::new(),
        lease: None,
    };
    let mut log = Log::start(w.log);
    match prepare_steps(plan, w, ports, &stop, on_line, &mut out, &mut log).await {
        // (Only a log that setup wrote to says so.)
        Ok(()) if log.wrote => log.line("fanout: setup done; starting the agent"),
        Ok(()) => {}
        Err(why) => {
            log.line(&format!("fanout: {why}"));
            out.failure = Some(why);
        }
    }
    out
}

async fn prepare_steps(
    plan: &SetupPlan,
    w: &Worker<'_>,
    ports: std::io::Result<ports::PortLease>,
    stop: &watch::Receiver<StopLevel>,
    on_line: impl FnMut(&str) + Send + Clone + 'static,
    out: &mut SetupOutcome,
    log: &mut Log,
) -> Result<(), Reason> {
    // Ports first: setup commands may already start servers on them.
    take_ports(ports, out)?;
    let copied = copy_left_out(plan, w, out, log).await?;
    let mut ran_anything = !copied.is_empty();

    // Submodules.
    let has_gitmodules = w.worktree.join(".gitmodules").is_file();
    if plan.submodules.unwrap_or(has_gitmodules) && has_gitmodules {
        ran_anything = true;
        gitmodules_of_the_base(w)?;
        let git = crate::git::Git::new(w.worktree)
            .parent_env(w.base_env.iter().cloned())
            .args(["submodule", "update", "--init", "--recursive"]);
        let inv = tokio::task::spawn_blocking(move || git.invocation())
            .await
            .map_err(|_| failed("submodules: task panicked".into()))?
            .map_err(|e| failed(format!("submodules: {e}")))?;
        let step = Step {
            label: SUBMODULE_COMMAND.to_owned(),
            header: format!("submodules: {SUBMODULE_COMMAND}"),
            program: inv.program,
            args: inv
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            env: inv.env,
            timeout: SUBMODULE_TIMEOUT,
            confined: false,
        };
        let (rec, why) = run_step(&step, w, stop, on_line.clone(), log).await;
        out.record.submodules = Some(rec);
        if let Some(why) = why {
            return Err(why);
        }
    }

    // Setup commands.
    ran_anything |= !plan.commands.is_empty();
    run_commands(plan, w, stop, on_line, out, log).await?;

    // What setup left behind is not the agent's work.
    if ran_anything {
        record_baseline(w, copied).await?;
    }
    Ok(())
}

fn failed(e: String) -> String {
    format!("setup failed: {e}")
}

/// The commit the worktree was made from has the plan's base's `.gitmodules`.
/// Submodules are fetched by fanout's own git, outside the sandbox, with the user's
/// git credentials and SSH agent, from what that file names: a dependent starts from
/// branches agents wrote, and one of them may have named a submodule at any host (or
/// at another of the user's repositories, by a relative URL) for the next agent to
/// read.
fn gitmodules_of_the_base(w: &Worker<'_>) -> Result<(), String> {
    // The commits' entries, not the worktree's bytes: the checkout ran the user's
    // filters and line-ending rules, and no agent has run there yet. The commit the
    // worktree was made from must have one (else the file was copied in by setup).
    let entry = |repo: &git2::Repository, commit: &str| -> Option<git2::Oid> {
        let commit = repo.find_commit(commit.parse().ok()?).ok()?;
        let entry = commit
            .tree()
            .ok()?
            .get_path(Path::new(".gitmodules"))
            .ok()?;
        Some(entry.id())
    };
    let same = git2::Repository::open(w.checkout).ok().is_some_and(|repo| {
        let start = entry(&repo, w.start);
        start.is_some() && start == entry(&repo, w.base)
    });
    if same {
        return Ok(());
    }
    Err(failed(
        "submodules: .gitmodules differs from the base's (a dependency's agent changed it); fanout fetches submodules only as the plan's base names them (a setup command, which runs in the sandbox, can fetch others)".into(),
    ))
}

/// Claim a worker's block of ports (held until the lease is dropped, when the worker is
/// done). Blocking: the executor claims it while the worker's worktree is checked out.
pub fn claim_ports(plan: &SetupPlan) -> std::io::Result<ports::PortLease> {
    ports::PortAllocator::new(
        ports::PortAllocator::default_dir(),
        plan.ports.base,
        plan.ports.block,
    )
    .claim()
}

/// The worker's block of ports, for its setup commands and agent.
fn take_ports(
    claimed: std::io::Result<ports::PortLease>,
    out: &mut SetupOutcome,
) -> Result<(), String> {
    let lease = claimed.map_err(|e| failed(format!("no port block: {e}")))?;
    let block = PortRange {
        first: lease.first,
        last: lease.last,
    };
    out.env = port_vars(block).to_vec();
    out.record.ports = Some(block);
    out.lease = Some(lease);
    Ok(())
}

/// Copy what git leaves out (`copy:` and `.worktreeinclude`); the paths copied.
async fn copy_left_out(
    plan: &SetupPlan,
    w: &Worker<'_>,
    out: &mut SetupOutcome,
    log: &mut Log,
) -> Result<Vec<String>, String> {
    let include = match std::fs::read_to_string(w.checkout.join(glob::INCLUDE_FILE)) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(failed(format!("{}: {e}", glob::INCLUDE_FILE))),
    };
    let patterns = glob::Patterns::new(&plan.copy, include.as_deref()).map_err(failed)?;
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let (checkout, root, wt) = (
        w.checkout.to_owned(),
        w.worktree_root.to_owned(),
        w.worktree.to_owned(),
    );
    let (done, unmatched) =
        tokio::task::spawn_blocking(move || copy_files(&checkout, &root, &wt, &patterns))
            .await
            .map_err(|_| failed("copying: task panicked".into()))?
            .map_err(failed)?;
    out.record.copied = done.copied.len();
    log.line(&copied_line(&done.copied));
    let mut warnings = unmatched
        .into_iter()
        .map(|pattern| format!(
            "{pattern} matches no file of the checkout that git ignores or does not track; nothing copied for it"
        ))
        .collect::<Vec<_>>();
    if !done.skipped.is_empty() {
        warnings.push(skipped_line(&done.skipped));
    }
    for warning in warnings {
        log.line(&format!("fanout: setup: warning: {warning}"));
        out.record.warnings.push(warning);
    }
    Ok(done.copied)
}

/// The `setup:` commands, in order, each with `sh -c` and the worker's environment,
/// up to the first that fails.
async fn run_commands(
    plan: &SetupPlan,
    w: &Worker<'_>,
    stop: &watch::Receiver<StopLevel>,
    on_line: impl FnMut(&str) + Send + Clone + 'static,
    out: &mut SetupOutcome,
    log: &mut Log,
) -> Result<(), Reason> {
    let env = with_vars(
        crate::agent::agent_env_with(
            w.base_env.iter().cloned(),
            &worker_vars(
                w.run_id,
                w.worker_id,
                w.branch,
                w.worktree,
                out.record.ports,
            ),
            false,
        ),
        w.extra_env,
    );
    let total = plan.commands.len();
    for (i, c) in plan.commands.iter().enumerate() {
        let step = Step {
            label: short(&c.run),
            header: format!("{}/{total}: {}", i + 1, short(&c.run)),
            program: "sh",
            args: vec!["-c".to_owned(), c.run.clone()],
            env: env.clone(),
            timeout: c.timeout,
            confined: true,
        };
        let (rec, why) = run_step(&step, w, stop, on_line.clone(), log).await;
        out.record.commands.push(SetupStep {
            run: c.run.clone(),
            ..rec
        });
        if let Some(why) = why {
            return Err(why);
        }
    }
    Ok(())
}

/// Record what setup changed in the worktree ([`Baseline`]): harvest leaves it out.
async fn record_baseline(w: &Worker<'_>, copied: Vec<String>) -> Result<(), String> {
    let wt = w.worktree.to_owned();
    tokio::task::spawn_blocking(move || {
        let baseline = Baseline::capture(&wt, copied)?;
        let repo = git2::Repository::open(&wt)?;
        baseline
            .save(repo.path())
            .map_err(|e| git2::Error::from_str(&e.to_string()))
    })
    .await
    .map_err(|_| failed("recording what setup changed: task panicked".into()))?
    .map_err(|e| failed(format!("recording what setup changed: {}", e.message())))
}

/// Select and copy: what was copied, and the patterns that selected nothing.
fn copy_files(
    checkout: &Path,
    worktree_root: &Path,
    worktree: &Path,
    patterns: &glob::Patterns,
) -> Result<(copy::Copied, Vec<String>), String> {
    let repo = git2::Repository::open(checkout)
        .map_err(|e| format!("{}: {}", checkout.display(), e.message()))?;
    let root = repo
        .workdir()
        .unwrap_or(checkout)
        .canonicalize()
        .map_err(|e| format!("{}: {e}", checkout.display()))?;
    let skip = worktree_root.canonicalize().ok();
    let selection = copy::select(&repo, &root, patterns, skip.as_deref())
        .map_err(|e| format!("finding files to copy: {e}"))?;
    let done = copy::copy_into(&root, worktree, &selection, patterns)?;
    // A pattern selected something if it names a file copied or one left alone.
    let mut unmatched = patterns.unmatched(&done.copied);
    if !unmatched.is_empty() && !done.present.is_empty() {
        let also = patterns.unmatched(&done.present);
        unmatched.retain(|p| also.contains(p));
    }
    Ok((done, unmatched))
}

/// The warning for entries not copied (special files, names that are not UTF-8).
fn skipped_line(skipped: &[String]) -> String {
    let names = crate::util::some_of(skipped, 5, ", ");
    format!(
        "not copied: {} (FIFOs, sockets and devices are skipped, as are names that are not UTF-8): {names}",
        match skipped.len() {
            1 => "1 entry".to_owned(),
            n => format!("{n} entries"),
        }
    )
}

fn copied_line(copied: &[String]) -> String {
    let names = crate::util::some_of(copied, 20, ", ");
    match copied.len() {
        0 => "fanout: setup: copied no files (none matched, or the worktree has them)".into(),
        1 => format!("fanout: setup: copied 1 file: {names}"),
        n => format!("fanout: setup: copied {n} files: {names}"),
    }
}

/// A command's first line, bounded, for logs, reasons and the summary.
pub(crate) fn short(cmd: &str) -> String {
    let first = cmd.trim().lines().next().unwrap_or("").trim();
    let many = cmd.trim().lines().count() > 1;
    if first.chars().count() > 60 {
        format!("{}…", first.chars().take(59).collect::<String>())
    } else if many {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

struct Step {
    /// For the reason and the record.
    label: String,
    /// For the log: `1/2: npm ci`.
    header: String,
    program: &'static str,
    args: Vec<String>,
    env: Vec<(OsString, OsString)>,
    timeout: f64,
    /// Runs in the worker's sandbox (setup commands; not fanout's own git).
    confined: bool,
}

/// Run one step under supervision; its record, and why it failed.
async fn run_step(
    step: &Step,
    w: &Worker<'_>,
    stop: &watch::Receiver<StopLevel>,
    mut on_line: impl FnMut(&str) + Send + 'static,
    log: &mut Log,
) -> (SetupStep, Option<Reason>) {
    let mut rec = SetupStep {
        run: step.label.clone(),
        exit_code: None,
        timed_out: false,
        duration: 0.0,
    };
    if *stop.borrow() != StopLevel::Run {
        return (rec, Some(Reason::interrupted()));
    }
    log.line(&format!("fanout: setup {}", step.header));
    on_line(&format!("setup {}", step.header));
    let from = std::fs::metadata(w.log).map(|m| m.len()).unwrap_or(0);
    let spec = ProcessSpec {
        program: step.program,
        args: &step.args,
        cwd: w.worktree,
        env: step.env.clone(),
        log: w.log,
        timeout: Some(Duration::from_secs_f64(step.timeout)),
        grace: w.grace,
        live: LiveLimits::default(),
        confine: w.confine.filter(|_| step.confined),
    };
    let sup = match supervise(spec, stop.clone(), on_line).await {
        Ok(s) => s,
        Err(e) => {
            let why = format!("setup failed: could not start {}: {e}", step.program);
            return (rec, Some(why.into()));
        }
    };
    rec.exit_code = sup.exit_code;
    rec.timed_out = sup.ending == Ending::TimedOut;
    rec.duration = sup.duration.as_secs_f64();
    let how = match (sup.ending, sup.exit_code) {
        (Ending::Interrupted, _) => return (rec, Some(Reason::interrupted())),
        (Ending::TimedOut, _) => timed_out_after(&format_secs(step.timeout)),
        (_, Some(0)) => {
            log.line(&format!(
                "fanout: setup {} exited 0 after {:.1}s",
                step.header, rec.duration
            ));
            return (rec, None);
        }
        (_, Some(c)) => format!("exited {c}"),
        (_, None) => "was killed".to_owned(),
    };
    let last = last_line(w.log, from)
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    (
        rec,
        Some(format!("setup failed: `{}` {how}{last}", step.label).into()),
    )
}

/// The last non-blank line written to `log` after byte `from`.
fn last_line(log: &Path, from: u64) -> Option<String> {
    const TAIL: u64 = 64 * 1024;
    let len = std::fs::metadata(log).ok()?.len();
    let bytes = crate::util::read_tail(log, TAIL.min(len.saturating_sub(from))).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(crate::agent::clean_reason)
}

/// The worker's log, as setup writes to it (best effort: a log that cannot be written
/// never fails a worker).
struct Log {
    path: std::path::PathBuf,
    wrote: bool,
}

impl Log {
    /// Start the log afresh.
    fn start(path: &Path) -> Log {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = crate::util::open_log(path, true);
        Log {
            path: path.to_owned(),
            wrote: false,
        }
    }

    fn line(&mut self, text: &str) {
        self.wrote = true;
        if let Ok(mut f) = crate::util::open_log(&self.path, false) {
            let _ = writeln!(f, "{text}");
        }
    }
}

/// Name of the baseline file in a worktree's git directory.
pub const BASELINE_FILE: &str = "fanout-setup.json";

/// What setup left in a worktree, kept in its git directory
/// (`.git/worktrees/<name>/fanout-setup.json`, gone with the worktree) for harvest
/// and for cleanup's and resume's look for unsaved work. The worker can write that
/// directory, so the file is signed ([`crate::util::sign`]) and names its directory:
/// one the worker wrote, or copied from another worktree, reads as no baseline (then
/// cleanup keeps what setup left, as if it were the user's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The name of the git directory it was saved in (`worktrees/<name>`).
    #[serde(default)]
    pub worktree: String,
    /// Files copied from the checkout: never committed.
    #[serde(default)]
    pub copied: Vec<String>,
    /// Paths setup changed or created (that git does not ignore), with their content
    /// id after setup (`""`: deleted): left out while still so.
    #[serde(default)]
    pub changed: BTreeMap<String, String>,
}

impl Baseline {
    /// The worktree's state now: every path that differs from its index (untracked
    /// files included, ignored files and submodules not).
    pub fn capture(worktree: &Path, copied: Vec<String>) -> Result<Baseline, git2::Error> {
        let repo = git2::Repository::open(worktree)?;
        let mut opts = git2::StatusOptions::new();
        opts.include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_ignored(false)
            .exclude_submodules(true);
        let mut changed = BTreeMap::new();
        for entry in repo.statuses(Some(&mut opts))?.iter() {
            let Ok(path) = entry.path() else { continue };
            if copied.iter().any(|c| c == path) {
                continue;
            }
            changed.insert(path.to_owned(), content_id(&worktree.join(path)));
        }
        Ok(Baseline {
            worktree: String::new(),
            copied,
            changed,
        })
    }

    /// Write it, signed, into `git_dir` (only when there is something to say).
    pub fn save(&self, git_dir: &Path) -> std::io::Result<()> {
        let path = git_dir.join(BASELINE_FILE);
        if self.copied.is_empty() && self.changed.is_empty() {
            for p in [crate::util::sign::sig_path(&path), path] {
                match std::fs::remove_file(&p) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            return Ok(());
        }
        let named = Baseline {
            worktree: dir_name(git_dir),
            ..self.clone()
        };
        let json = serde_json::to_vec_pretty(&named).expect("serializes");
        crate::util::sign::write_signed(&path, &json)
    }

    /// The baseline fanout saved in `git_dir`, or an empty one (none there, or not
    /// fanout's own for this directory).
    pub fn load(git_dir: &Path) -> Baseline {
        crate::util::sign::read_signed(&git_dir.join(BASELINE_FILE))
            .ok()
            .and_then(|b| Baseline::parse(&b).ok())
            .filter(|b| b.worktree == dir_name(git_dir))
            .unwrap_or_default()
    }

    /// A baseline from its file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Baseline, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// Should harvest leave `rel` (relative to `worktree`) out of the commit?
    pub fn keeps_out(&self, rel: &str, worktree: &Path) -> bool {
        if self.copied.iter().any(|c| c == rel) {
            return true;
        }
        self.changed
            .get(rel)
            .is_some_and(|id| *id == content_id(&worktree.join(rel)))
    }
}

/// The last component of `dir` (a worktree's git directory: its name).
fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Git's blob id of what is at `path` (a symlink's target, not what it points at);
/// `""` when nothing is there.
fn content_id(path: &Path) -> String {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return String::new();
    };
    let oid = if meta.file_type().is_symlink() {
        std::fs::read_link(path).ok().and_then(|t| {
            git2::Oid::hash_object(git2::ObjectType::Blob, t.as_os_str().as_encoded_bytes()).ok()
        })
    } else if meta.is_file() {
        git2::Oid::hash_file(git2::ObjectType::Blob, path).ok()
    } else {
        None
    };
    oid.map(|o| o.to_string()).unwrap_or_else(|| "?".into())
}

/// `env` with `extra` set on top (a variable in both takes `extra`'s value).
pub fn with_vars(
    env: Vec<(OsString, OsString)>,
    extra: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = env
        .into_iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .collect();
    out.extend(extra.iter().cloned());
    out
}

/// `FANOUT_PORT` (a block's first port) and `FANOUT_PORTS` (`first-last`).
pub fn port_vars(block: PortRange) -> [(String, String); 2] {
    [
        ("FANOUT_PORT".to_owned(), block.first.to_string()),
        (
            "FANOUT_PORTS".to_owned(),
            format!("{}-{}", block.first, block.last),
        ),
    ]
}

/// The `FANOUT_*` variables of the commands fanout runs in a worker's worktree besides
/// its agent (setup commands, checks).
pub fn worker_vars(
    run_id: &str,
    worker_id: u32,
    branch: &str,
    worktree: &Path,
    ports: Option<PortRange>,
) -> Vec<(String, String)> {
    let mut v = vec![
        ("FANOUT_RUN_ID".to_owned(), run_id.to_owned()),
        ("FANOUT_WORKER_ID".to_owned(), worker_id.to_string()),
        ("FANOUT_BRANCH".to_owned(), branch.to_owned()),
        ("FANOUT_WORKTREE".to_owned(), worktree.display().to_string()),
    ];
    v.extend(ports.into_iter().flat_map(port_vars));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels() {
        assert_eq!(short("  npm ci  "), "npm ci");
        assert_eq!(short("set -e\nmake"), "set -e …");
        assert_eq!(short(&"x".repeat(80)).chars().count(), 60);
    }

    #[test]
    fn baseline_keeps_out_what_setup_left_until_the_agent_changes_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("lock.json"), "v1\n").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("lock.json")).unwrap();
        index.write().unwrap();
        // setup rewrites a tracked file, creates one, and copies one
        std::fs::write(dir.path().join("lock.json"), "v2\n").unwrap();
        std::fs::write(dir.path().join("generated.txt"), "gen\n").unwrap();
        std::fs::write(dir.path().join("local.cfg"), "mine\n").unwrap();
        let b = Baseline::capture(dir.path(), vec!["local.cfg".into()]).unwrap();
        assert_eq!(
            b.changed.keys().collect::<Vec<_>>(),
            ["generated.txt", "lock.json"]
        );
        b.save(repo.path()).unwrap();
        let b = Baseline::load(repo.path());
        assert!(b.keeps_out("lock.json", dir.path()));
        assert!(b.keeps_out("generated.txt", dir.path()));
        assert!(b.keeps_out("local.cfg", dir.path()));
        assert!(!b.keeps_out("src/new.rs", dir.path()));
        // the agent changes them afterwards: its changes count, except a copied file's
        std::fs::write(dir.path().join("lock.json"), "v3\n").unwrap();
        std::fs::write(dir.path().join("local.cfg"), "edited\n").unwrap();
        assert!(!b.keeps_out("lock.json", dir.path()));
        assert!(b.keeps_out("local.cfg", dir.path()));
        // nothing to record: no file
        Baseline::default().save(repo.path()).unwrap();
        assert!(!repo.path().join(BASELINE_FILE).exists());
        assert!(!crate::util::sign::sig_path(&repo.path().join(BASELINE_FILE)).exists());
    }

    #[test]
    fn a_baseline_the_worker_wrote_or_copied_from_another_worktree_is_none() {
        let dirs = tempfile::tempdir().unwrap();
        let (w1, w2) = (dirs.path().join("w1"), dirs.path().join("w2"));
        for d in [&w1, &w2] {
            std::fs::create_dir(d).unwrap();
        }
        let b = Baseline {
            copied: vec!["README.md".into()],
            ..Baseline::default()
        };
        b.save(&w1).unwrap();
        assert_eq!(Baseline::load(&w1).copied, ["README.md"]);
        // written by the worker: unsigned
        std::fs::write(
            w2.join(BASELINE_FILE),
            r#"{"worktree":"w2","copied":["README.md"]}"#,
        )
        .unwrap();
        assert_eq!(Baseline::load(&w2), Baseline::default());
        // copied, signature and all, from another worktree
        for f in [BASELINE_FILE.to_owned(), format!("{BASELINE_FILE}.sig")] {
            std::fs::copy(w1.join(&f), w2.join(&f)).unwrap();
        }
        assert_eq!(Baseline::load(&w2), Baseline::default());
        // changed after fanout signed it
        let path = w1.join(BASELINE_FILE);
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("README.md", "main.c");
        std::fs::write(&path, text).unwrap();
        assert_eq!(Baseline::load(&w1), Baseline::default());
    }
}
