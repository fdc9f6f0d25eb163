//! One attempt at a plan: a fresh run ([`start`] makes its run directory, journal and
//! `plan.json`; attempt 1), or `fanout resume` of a run that did not finish (a later
//! attempt, keeping the workers that did). [`execute`] runs every worker not kept,
//! under the signal dispatcher, feeding a [`Reporter`] the executor's events and
//! recording each worker's result as soon as it is final (`results/w<N>.json`). The
//! run's tamper snapshot is taken on a thread while the executor makes the first
//! worktrees; no worker's setup or agent starts before it is complete.
//!
//! What the attempt produced goes on to fan-in and the report; the run's pid file
//! stays until the report is written ([`Attempted::pid_file`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use secrecy::SecretString;

use super::event::{Event, Reporter};
use super::executor::Executor;
use super::journal::{JOURNAL_SCHEMA_VERSION, Journal, JournalEntry, JournalHandle};
use super::signals::Dispatcher;
use super::tamper::guard::Guard;
use super::tamper::{SNAPSHOT_FILE, Snapshot};
use super::worktree;
use crate::exit::Failure;
use crate::git::TrustedConfig;
use crate::git::harden::{Entry, Scope};
use crate::model::WorkerResult;
use crate::plan::Plan;
use crate::plan::settings::Settings;
use crate::repo::{PushRecord, UserRepo};
use crate::util::out::errln;
use crate::util::{rfc3339, short};

/// What running a plan needs besides the plan.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Worktree root override.
    pub worktree_dir: Option<std::path::PathBuf>,
    /// Commit identity.
    pub identity: (String, String),
    /// Name of the run directory (default: the run id).
    pub run_dir_name: Option<String>,
    /// The repository's remotes as publishing will use them (read now, before any
    /// agent, unless given).
    pub push_record: Option<PushRecord>,
    /// `publish.remote` of the config file.
    pub publish_remote: Option<String>,
    /// The GitHub token, for an agent whose definition says `allow_github_token:
    /// true` (nothing else fanout starts gets it).
    pub agent_tokens: Vec<(String, SecretString)>,
}

impl ExecOptions {
    /// From validated settings.
    pub fn from_settings(s: &Settings) -> ExecOptions {
        ExecOptions {
            worktree_dir: s.worktree_dir.clone(),
            identity: s.commit_identity.clone(),
            run_dir_name: None,
            push_record: None,
            publish_remote: s.publish_remote.clone(),
            agent_tokens: Vec::new(),
        }
    }
}

/// How the plan's `sandbox:` mode and `network:` work out on this machine
/// ([`crate::sandbox::decide`], [`crate::sandbox::decide_network`]): the ABI the run
/// confines its workers with and whether they are pinned to the gateway, or the
/// refusal (`sandbox: required` without Landlock, `network.enforce: required` without
/// Landlock's network rules: exit 2, nothing made yet). A notice (`auto` without
/// them) is printed once, here, and kept for the summary ([`Decision::notices`]).
///
/// [`Decision::notices`]: crate::sandbox::Decision::notices
pub fn sandbox_decision(
    mode: crate::sandbox::Mode,
    network: &crate::plan::network::NetworkPlan,
) -> Result<crate::sandbox::Decision, Failure> {
    let probe = crate::sandbox::probe();
    let mut decision = crate::sandbox::decide(mode, &probe).map_err(Failure::Usage)?;
    decision.network = crate::sandbox::decide_network(
        network.enforce,
        network.open,
        decision.abi,
        crate::sandbox::network_support(&probe),
    )
    .map_err(Failure::Usage)?;
    for n in [&decision.notice, &decision.network.notice]
        .into_iter()
        .flatten()
    {
        errln!("fanout: {n}");
    }
    Ok(decision)
}

/// One attempt at a plan, ready to execute.
#[derive(Debug)]
pub struct Attempt {
    /// The run directory (it holds the journal and plan.json already).
    pub run_dir: PathBuf,
    /// Where the run's worktrees go.
    pub worktree_root: PathBuf,
    /// The run's journal.
    pub journal: JournalHandle,
    /// 1 for `fanout run`, one more per resume.
    pub number: u32,
    /// Results of workers that finished in an earlier attempt: not run again.
    pub kept: BTreeMap<u32, WorkerResult>,
    /// The GitHub token for an agent allowed it (see [`ExecOptions::agent_tokens`]).
    pub agent_tokens: Vec<(String, SecretString)>,
    /// How its workers are confined.
    pub sandbox: crate::sandbox::Decision,
    /// The filter drivers worktree checkouts run ([`trusted_filters`]).
    pub trusted: TrustedConfig,
    /// The repository's configuration as listed at the start, when every worktree
    /// reads the same ([`crate::git::Listed::shareable`]).
    pub listed: Option<crate::git::Listed>,
    /// The runtime the executor runs on ([`runtime`]).
    pub runtime: tokio::runtime::Runtime,
    /// What the run's gateway is started with ([`super::gated::for_plan`]), checked
    /// before anything is made.
    pub gateway: crate::gateway::GatewayConfig,
}

/// A multi-threaded runtime: the executor's, and publishing's.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Fatal(format!("tokio runtime: {e}")))
}

/// What an attempt produced: one result per planned worker, in id order (kept ones
/// included), before fan-in.
#[derive(Debug)]
pub struct Attempted {
    /// The plan that was run.
    pub plan: Plan,
    /// The results.
    pub results: Vec<WorkerResult>,
    /// Whether a signal stopped the attempt.
    pub interrupted: bool,
    /// When it started.
    pub started_at: SystemTime,
    /// How long it took.
    pub clock: Instant,
    /// The run directory.
    pub run_dir: PathBuf,
    /// Removed once the report is written.
    pub pid_file: PidFile,
    /// Why workers ran unconfined (or less confined than they could), for the summary.
    pub sandbox_notice: Option<String>,
}

/// Start a new run of `plan` in `repo`: its run directory, journal and `plan.json`
/// (warning about worktrees inside the checkout; uncommitted changes are said once
/// [`execute`] has the tamper snapshot's scan of the checkout). `kept`
/// holds results already known (not run; they count for the workers that depend on
/// them: matrix mode's earlier waves).
pub fn start(
    repo: &UserRepo,
    opts: &ExecOptions,
    plan: &Plan,
    kept: BTreeMap<u32, WorkerResult>,
) -> Result<Attempt, Failure> {
    let started_at = SystemTime::now();
    let runtime = runtime()?;
    let config = read_config(repo)?;
    let sandbox = sandbox_decision(plan.sandbox, &plan.network)?;
    let gateway = gateway_config(plan)?;
    let run_dir = repo.run_dir(opts.run_dir_name.as_deref().unwrap_or(&plan.run_id));
    let worktree_root = repo.worktree_root(opts.worktree_dir.as_deref());
    // The run's records name these paths as text (JSON): checked before anything is
    // made, so that nothing is left half made.
    for (path, what) in [
        (&repo.workdir, "the repository's path"),
        (
            &worktree_root,
            "the worktree directory (--worktree-dir, worktree_dir:)",
        ),
    ] {
        if path.to_str().is_none() {
            return Err(Failure::Usage(format!(
                "{what} {} is not valid UTF-8; fanout's run records cannot name it",
                path.display()
            )));
        }
    }
    if run_dir.exists() {
        return Err(Failure::Usage(format!(
            "run {} already exists in {}",
            plan.run_id,
            run_dir.display()
        )));
    }
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| Failure::Fatal(format!("{}: {e}", run_dir.display())))?;
    let fatal = |what: &str, e: std::io::Error| Failure::Fatal(format!("{what}: {e}"));
    if worktree_root.starts_with(&repo.workdir) {
        errln!(
            "fanout: warning: worktrees go inside the checkout ({}); they may show up as untracked files",
            worktree_root.display()
        );
    }
    let mut journal = new_journal(repo, plan, &worktree_root, started_at);
    journal.push = Some(match &opts.push_record {
        Some(r) => r.clone(),
        None => push_record(repo, opts.publish_remote.clone()),
    });
    let journal = JournalHandle::create(&run_dir, journal).map_err(|e| fatal("journal", e))?;
    let mut plan_json = serde_json::to_vec_pretty(plan).expect("plan serializes");
    plan_json.push(b'\n');
    crate::util::sign::write_signed(&run_dir.join("plan.json"), &plan_json)
        .map_err(|e| fatal("plan.json", e))?;
    Ok(Attempt {
        run_dir,
        worktree_root,
        journal,
        number: 1,
        kept,
        agent_tokens: opts.agent_tokens.clone(),
        sandbox,
        trusted: trusted_filters(config.iter()),
        listed: crate::git::Listed::shareable(&config),
        runtime,
        gateway,
    })
}

/// What `plan`'s gateway is started with, from fanout's environment
/// ([`super::gated::for_plan`]); a provider's upstream it refuses is a usage error.
pub fn gateway_config(plan: &Plan) -> Result<crate::gateway::GatewayConfig, Failure> {
    let env: Vec<_> = std::env::vars_os().collect();
    super::gated::for_plan(&env, plan).map_err(|e| Failure::Usage(format!("the gateway: {e}")))
}

/// The remotes of `repo` now ([`PushRecord::read`]); none when it cannot be opened.
pub fn push_record(repo: &UserRepo, publish_remote: Option<String>) -> PushRecord {
    match repo.open() {
        Ok(git) => PushRecord::read(&git, publish_remote),
        Err(_) => PushRecord {
            publish_remote,
            ..PushRecord::default()
        },
    }
}

/// The git configuration `repo` sees now (every scope). Refused when it holds a credential
/// every agent could read (`actions/checkout`'s persisted token above all): fanout
/// runs no agent in such a repository.
pub fn read_config(repo: &UserRepo) -> Result<Vec<Entry>, Failure> {
    let config = crate::git::list_config(&repo.workdir)
        .map_err(|e| Failure::Fatal(format!("reading the repository's git config: {e}")))?;
    let keys = crate::git::credentials_in(&config);
    let Some(first) = keys.first() else {
        return Ok(config);
    };
    Err(Failure::Usage(format!(
        "the repository's git configuration holds a credential every agent could read ({}); \
         fanout runs no agent here. In a workflow, check out with `persist-credentials: false` \
         (fanout pushes with its own token); else remove it: git config --unset-all '{first}'",
        keys.join(", ")
    )))
}

/// The filter drivers (Git LFS, any clean/smudge/process filter) that worktree
/// checkouts and harvest run: those of the user's own scopes (`Scope::Protected`:
/// global configuration — where `git lfs install` writes — and fanout's command line
/// or environment) in `config`, read before any agent ran. A driver in the
/// repository's `.git/config` is not trusted, even at the run's start: an agent of an
/// earlier run may have written it. A driver an agent configures during the run never
/// runs in fanout's checkouts (see [`crate::git::TrustedConfig`]).
pub fn trusted_filters<'a>(config: impl IntoIterator<Item = &'a Entry>) -> TrustedConfig {
    TrustedConfig::from_entries(
        config.into_iter().filter(|e| e.scope == Scope::Protected),
        &["filter."],
    )
}

/// Warn when the checkout at `workdir` has uncommitted changes (files modified,
/// staged, deleted or untracked: `checkout`, the tamper snapshot's scan, path →
/// hash): workers start from the base. The files `fanout init` wrote, as it wrote
/// them (`by_init`), are not the user's changes and go unsaid.
fn warn_about_checkout(
    workdir: &Path,
    checkout: &BTreeMap<String, String>,
    by_init: &BTreeMap<String, String>,
    base: &str,
) {
    let n = checkout
        .iter()
        .filter(|(path, hash)| by_init.get(*path) != Some(*hash))
        .count();
    if n > 0 {
        errln!(
            "fanout: warning: {} has {n} uncommitted change{}; they are not included (workers start from {})",
            workdir.display(),
            if n == 1 { "" } else { "s" },
            short(base)
        );
    }
}

/// Take the run's tamper snapshot ([`Snapshot::for_run`]: an earlier attempt's is
/// loaded) on a thread of its own while the executor makes the first worktrees, and
/// hand it to the returned guard, which holds every worker's setup, agent and checks
/// until then (see [`super::tamper`] for why making worktrees meanwhile is safe). A
/// snapshot taken now also tells whether the checkout has uncommitted changes: said
/// before any worker runs. The thread is joined once the executor is done.
fn snapshot_meanwhile(
    repo: &UserRepo,
    plan: &Arc<Plan>,
    worktree_root: &Path,
    run_dir: &Path,
    confined: bool,
) -> Result<(Arc<Guard>, std::thread::JoinHandle<()>), Failure> {
    let guard = Arc::new(Guard::pending(confined));
    let (workdir, worktree_root, run_dir) = (
        repo.workdir.clone(),
        worktree_root.to_owned(),
        run_dir.to_owned(),
    );
    let (plan, to) = (Arc::clone(plan), Arc::clone(&guard));
    let by_init = repo.written_by_init();
    let thread = std::thread::Builder::new()
        .name("fanout-snapshot".into())
        .spawn(move || {
            let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let fresh = !run_dir.join(SNAPSHOT_FILE).exists();
                let s = Snapshot::for_run(&workdir, &plan, &worktree_root, &run_dir)?;
                if fresh {
                    warn_about_checkout(&workdir, &s.checkout, &by_init, &plan.base.commit);
                }
                Ok(s)
            }));
            to.taken(taken.unwrap_or_else(|_| Err("taking it panicked".into())));
        })
        .map_err(|e| Failure::Fatal(format!("the tamper snapshot: {e}")))?;
    Ok((guard, thread))
}

/// A new run's journal: one entry per worker, nothing created yet.
fn new_journal(
    repo: &UserRepo,
    plan: &Plan,
    worktree_root: &std::path::Path,
    started_at: SystemTime,
) -> Journal {
    Journal {
        schema_version: JOURNAL_SCHEMA_VERSION,
        extra_branches: Vec::new(),
        push: None,
        run_id: plan.run_id.clone(),
        created_at: rfc3339(started_at),
        repo_workdir: repo.workdir.clone(),
        worktree_root: worktree_root.to_owned(),
        entries: plan
            .workers
            .iter()
            .map(|w| JournalEntry {
                worker_id: w.id,
                branch: w.branch.clone(),
                base_commit: plan.base.commit.clone(),
                worktree_name: worktree::worktree_name(&plan.run_id, w.id),
                worktree_path: worktree::worktree_path(worktree_root, &plan.run_id, w.id),
                branch_created: false,
                worktree_created: false,
                worktree_incomplete: false,
            })
            .collect(),
    }
}

/// Run every worker of `plan` not in `attempt.kept`, feeding `reporter` every event
/// and recording each result as soon as it is final (`results/w<N>.json`, for
/// `fanout resume`). The run's pid file is written first and left for the caller to
/// remove once the report is written.
pub fn execute(
    repo: &UserRepo,
    identity: &(String, String),
    plan: Plan,
    reporter: Box<dyn Reporter>,
    attempt: Attempt,
) -> Result<Attempted, Failure> {
    let started_at = SystemTime::now();
    let clock = Instant::now();
    let Attempt {
        run_dir,
        worktree_root,
        journal,
        number,
        kept,
        agent_tokens,
        sandbox,
        trusted,
        listed,
        runtime,
        gateway,
    } = attempt;
    let fatal = |what: &str, e: std::io::Error| Failure::Fatal(format!("{what}: {e}"));
    let common_dir = repo.common_dir.clone();
    let plan = Arc::new(plan);
    let (tamper, snapshot) =
        snapshot_meanwhile(repo, &plan, &worktree_root, &run_dir, sandbox.abi.is_some())?;
    let mut gateway = gateway;
    // What earlier attempts spent counts against `budget_total`.
    gateway.spent_before = kept.values().filter_map(super::executor::spent_by).sum();
    let gateway = crate::gateway::Gateway::start(gateway, runtime.handle().clone())
        .map_err(Failure::Fatal)?;
    let gateway = Arc::new(gateway);
    let pid_file = PidFile::create(&run_dir);
    super::reaper::adopt_orphans();
    let executor = Arc::new(Executor {
        plan: Arc::clone(&plan),
        repo_dir: repo.workdir.clone(),
        run_dir: run_dir.clone(),
        worktree_root,
        journal: Arc::new(journal),
        identity: identity.clone(),
        // The providers' keys stay with the gateway: no process of a worker gets them.
        base_env: super::gated::without_keys(std::env::vars_os().collect()),
        agent_tokens,
        kept: kept.clone(),
        attempt: number,
        sandbox: sandbox.abi,
        pin_network: sandbox.network.pinned,
        common_dir,
        tamper: Some(Arc::clone(&tamper)),
        trusted,
        listed: std::sync::Mutex::new(listed),
        checkouts: super::executor::cpu_slots(),
        harvests: super::executor::cpu_slots(),
        gateway: Arc::clone(&gateway),
    });

    let (results, interrupted) = runtime
        .block_on(supervised(
            executor,
            reporter,
            kept,
            run_dir.clone(),
            number,
        ))
        .map_err(|e| fatal("signal handlers", e))?;
    // Every door closed: the gateway ends with the last worker.
    runtime.block_on(async {
        if let Ok(g) = Arc::try_unwrap(gateway) {
            g.shutdown().await;
        }
    });
    // Dropped, the runtime waits for its blocking work (checkouts, harvests, private
    // directories' removal): nothing a worker started runs when the last check looks.
    drop(runtime);
    let _ = snapshot.join();
    if let Some(e) = tamper.failed() {
        // No worker ran anything: those whose worktree was made end `not started`
        // (the journal has their worktrees, for cleanup or resume).
        return Err(Failure::Fatal(format!("the tamper snapshot: {e}")));
    }
    after_the_last_worker(&tamper);
    Ok(Attempted {
        plan: Arc::unwrap_or_clone(plan),
        results,
        interrupted,
        started_at,
        clock,
        run_dir,
        pid_file,
        sandbox_notice: sandbox.notices(),
    })
}

/// Once every worker is done: stop what the agents left running, then the tamper
/// check after the last worker, each said on stderr when it found something.
fn after_the_last_worker(tamper: &Guard) {
    let left = super::reaper::sweep();
    if left > 0 {
        errln!(
            "fanout: stopped {left} process{} the agents left running",
            if left == 1 { "" } else { "es" }
        );
    }
    let left = tamper.end();
    if !left.is_empty() {
        said_changed(tamper, &left);
    }
}

/// Say what the tamper check after the last worker found (`left`).
fn said_changed(tamper: &Guard, left: &[super::tamper::Change]) {
    let changes = super::tamper::guard::describe(left);
    if tamper.confined() {
        errln!(
            "fanout: warning: while the run went on, something outside its sandboxed workers changed your repository (left as it is: it may be your own work): {changes}"
        );
    } else {
        errln!(
            "fanout: warning: after the last worker, something a worker left running changed what an agent must not: {changes}"
        );
    }
}

/// The executor's run under the signal dispatcher, with a task that records each
/// result of this attempt and hands every event to the reporter.
async fn supervised(
    executor: Arc<Executor>,
    mut rep: Box<dyn Reporter>,
    kept: BTreeMap<u32, WorkerResult>,
    records: PathBuf,
    number: u32,
) -> std::io::Result<(Vec<WorkerResult>, bool)> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let dispatcher = Dispatcher::install(tx.clone())?;
    for r in kept.values() {
        let _ = tx.send(Event::WorkerFinished(Box::new(r.clone())));
    }
    let shown = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if let Event::WorkerFinished(r) = &ev
                && r.attempt == number
            {
                let _ = super::resume::record(&records, r);
            }
            rep.event(&ev);
        }
        rep.finish();
    });
    let results = executor.run(tx, dispatcher.subscribe()).await;
    let interrupted = dispatcher.stopped();
    drop(dispatcher);
    let _ = shown.await;
    Ok((results, interrupted))
}

/// Marker file holding the pid of the fanout process running a run.
pub const PID_FILE: &str = "fanout.pid";

/// The pid file of the fanout process running a run: written when an attempt starts,
/// removed once its report is written. One left behind by a dead process means that
/// fanout died mid-run.
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    /// Write this process's pid into `run_dir`, with its start time and the boot's id
    /// (`<pid> <start> <boot>`): a process that gets the pid after a crash or a reboot
    /// is not taken for this one ([`crate::store::runs::live_pid`]).
    pub fn create(run_dir: &Path) -> PidFile {
        let path = run_dir.join(PID_FILE);
        let pid = std::process::id();
        let text = match crate::util::procfs::identity(pid as i32) {
            Some(who) => format!("{pid} {who}"),
            None => pid.to_string(),
        };
        let _ = std::fs::write(&path, text);
        PidFile(path)
    }

    /// The run is done: remove the file.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
