//! Running a plan end to end, as `fanout run`, `resume`, `worker` and `demo` do: the
//! attempt ([`crate::run::attempt`], with live progress), fan-in (selection and the
//! conflict map), the report (`results.json`, `summary.md`, the Actions step summary
//! and outputs); then, when asked, the integration branch and publishing
//! ([`After::run`]). With `publish.when: as-ready`, [`execute_plan_as_ready`] also
//! hands each finished worker, from memory, to [`crate::publish::ready`] while the run
//! goes on (the run stage itself knows nothing of publishing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::ConfigFile;
use crate::exit::{self, Failure};
use crate::fanin::conflicts::{IntegrateError, integrate_report};
use crate::model::WorkerResult;
use crate::plan::Plan;
use crate::plan::settings::Settings;
use crate::publish::ready::AsReady;
use crate::publish::report::{
    PublishFlags, check_publishing, preview_report, publish_report, record_early,
};
use crate::repo::{PushRecord, UserRepo};
use crate::report::progress::{Style, reporter};
use crate::report::summary::{ReportPaths, render_summary};
use crate::run::attempt::{self, Attempt, Attempted, ExecOptions};
use crate::run::event::{Event, Reporter};
use crate::run::journal::Journal;
use crate::run::results::RunReport;
use crate::util::out::errln;
use crate::util::write_atomic;

/// Before anything is created: the program of every agent the run's workers run must
/// be there — the run's and those tasks name ([`crate::agent::preflight`], with
/// fanout's `PATH`). Ok holds warnings to show; a missing program is a usage error
/// (exit 2) saying what to do, for each agent that lacks one.
pub fn check_agent(settings: &Settings) -> Result<Vec<String>, Failure> {
    let defined = &settings.agent_choice.1;
    let path = std::env::var_os("PATH");
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    for (spec, choice) in settings.agents_used() {
        match crate::agent::preflight::check(spec, &choice, defined, path.as_deref()) {
            Ok(w) => warnings.extend(w),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(warnings)
    } else {
        Err(Failure::Usage(errors.join("\n")))
    }
}

/// Start a new run of `plan` in `repo` (run directory, journal, plan.json), run it
/// and write its report (used by `run`, `worker` and `demo`). The results in `kept` (a matrix worker's dependencies, run in
/// earlier jobs) are not run again; they count for the workers that depend on them.
pub fn execute_plan(
    repo: &UserRepo,
    opts: &ExecOptions,
    plan: Plan,
    style: Style,
    kept: BTreeMap<u32, WorkerResult>,
) -> Result<RunReport, Failure> {
    let attempt = attempt::start(repo, opts, &plan, kept)?;
    run_attempt(repo, &opts.identity, plan, style, attempt)
}

/// Run every worker of `plan` not in `attempt.kept`, showing progress in `style`,
/// and write the report of all of them, kept ones included, in id order.
pub fn run_attempt(
    repo: &UserRepo,
    identity: &(String, String),
    plan: Plan,
    style: Style,
    attempt: Attempt,
) -> Result<RunReport, Failure> {
    let shown = reporter(style, &plan);
    let done = attempt::execute(repo, identity, plan, shown, attempt)?;
    conclude(repo, done)
}

/// What was published while the run went on, by worker id, and why publishing
/// stopped if it did.
pub type Published = crate::publish::ready::Early;

/// [`execute_plan`], publishing each worker as soon as it has finished and been
/// harvested (`publish.when: as-ready`): the executor's `WorkerFinished` events are
/// tapped on their way to the progress reporter and their results handed, in memory,
/// to `ready` on a thread of its own, so the run never waits for GitHub. A signal
/// stopping the run stops early publishing too. Returns the report and what was
/// published, for [`After::run`].
pub fn execute_plan_as_ready(
    repo: &UserRepo,
    opts: &ExecOptions,
    plan: Plan,
    style: Style,
    ready: AsReady,
) -> Result<(RunReport, Published), Failure> {
    let attempt = attempt::start(repo, opts, &plan, BTreeMap::new())?;
    if attempt.sandbox.abi.is_none() {
        errln!("fanout: {UNCONFINED_AS_READY}");
        let report = run_attempt(repo, &opts.identity, plan, style, attempt)?;
        return Ok((report, Published::default()));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let publisher = std::thread::Builder::new()
        .name("fanout-as-ready".into())
        .spawn(move || publish_ready(ready, &rx, &stop_rx))
        .map_err(|e| Failure::Fatal(format!("the as-ready publisher: {e}")))?;
    let tap = Box::new(Tap {
        shown: reporter(style, &plan),
        ready: tx,
        stop: stop_tx,
    });
    // The tap goes when the attempt ends; then the publisher finishes what it has.
    let done = attempt::execute(repo, &opts.identity, plan, tap, attempt);
    let published = publisher
        .join()
        .map_err(|_| Failure::Fatal("the as-ready publisher panicked".into()))?;
    let report = conclude(repo, done?)?;
    Ok((report, published))
}

/// Why a run without the sandbox publishes at its end, `publish.when: as-ready`
/// notwithstanding: unconfined agents still running could rewrite the shared git
/// configuration (a proxy, a URL rewrite) between a push's checks and the push; at
/// the end of the run every agent is gone and the tamper check has restored it.
const UNCONFINED_AS_READY: &str = "publish.when: as-ready needs the sandbox (agents still running could change the repository's git configuration under a push); this run's agents run without it, so its workers are published after the run";

/// The progress reporter, with each finished worker's result also sent to the
/// as-ready publisher, and a stop said to it.
struct Tap {
    shown: Box<dyn Reporter>,
    ready: std::sync::mpsc::Sender<WorkerResult>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Reporter for Tap {
    fn event(&mut self, ev: &Event) {
        match ev {
            Event::WorkerFinished(r) => {
                let _ = self.ready.send(WorkerResult::clone(r));
            }
            Event::Stopping(_) => {
                let _ = self.stop.send(true);
            }
            _ => {}
        }
        self.shown.event(ev);
    }

    fn finish(&mut self) {
        self.shown.finish();
    }
}

/// The as-ready publisher's loop: publish what finished (all that is waiting at once)
/// until the run ends or is stopped; returns what was published.
fn publish_ready(
    mut ready: AsReady,
    rx: &std::sync::mpsc::Receiver<WorkerResult>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Published {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        if *stop.borrow() {
            break;
        }
        let mut stop = stop.clone();
        ready.publish(batch, async move {
            if stop.wait_for(|s| *s).await.is_err() {
                // The run is over without a stop: nothing cuts publishing short.
                std::future::pending::<()>().await;
            }
        });
    }
    ready.finish()
}

/// Fan the attempt's results in, write the report, and remove the run's pid file.
fn conclude(repo: &UserRepo, done: Attempted) -> Result<RunReport, Failure> {
    let Attempted {
        plan,
        mut results,
        interrupted,
        started_at,
        clock,
        run_dir,
        pid_file,
        sandbox_notice,
    } = done;
    let conflicts = crate::fanin::select::fan_in(&plan, &mut results, &repo.workdir);
    let duration = clock.elapsed().as_secs_f64();
    let mut report = RunReport::new(plan, results, conflicts, started_at, duration, interrupted);
    report.sandbox_notice = sandbox_notice;
    write_report(&report, &run_dir)?;
    pid_file.remove();
    Ok(report)
}

/// Write a finished run's report into `run_dir` (`results.json`, `summary.md`), the
/// summary to `$GITHUB_STEP_SUMMARY` and the run's outputs to `$GITHUB_OUTPUT`, when
/// they are set.
pub fn write_report(report: &RunReport, run_dir: &Path) -> Result<ReportPaths, Failure> {
    let fatal = |what: &str, e: std::io::Error| Failure::Fatal(format!("{what}: {e}"));
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let paths = crate::report::summary::write(report, run_dir, step_summary.as_deref())
        .map_err(|e| fatal("writing the report", e))?;
    if let Some(out) = crate::actions::outputs::output_file() {
        crate::actions::outputs::write_run_outputs(&out, report, &paths)
            .map_err(|e| fatal("$GITHUB_OUTPUT", e))?;
    }
    Ok(paths)
}

/// What to do once a run's report is written: integrate and publish.
#[derive(Clone, Copy)]
pub struct After<'a> {
    pub repo: &'a UserRepo,
    /// The config file, read once.
    pub file: &'a ConfigFile,
    /// Publish, with these flags.
    pub publish: Option<&'a PublishFlags>,
    /// Build the integration branch too (with the config's commit identity).
    pub integrate: bool,
}

impl After<'_> {
    /// Publishing can go ahead (the token, the repository, its remote): checked
    /// before the first worker starts.
    pub fn check(&self, record: Option<&PushRecord>) -> Result<(), Failure> {
        match self.publish {
            Some(flags) => check_publishing(flags, record),
            None => Ok(()),
        }
    }

    /// Integrate and publish the finished run `report` (neither when a signal stopped
    /// it), pushing to the remotes of `record` (the repository's when the run started),
    /// rewriting `results_path` with what publishing did; workers already `published`
    /// while the run went on (`publish.when: as-ready`) are not pushed or opened again.
    /// Returns the exit code: the run's, made `1` when publishing failed for some
    /// workers of an otherwise successful run (under the exit policy: never with
    /// `fail_on: never`, `3` when all failed with `all-failed`), `4` when publishing
    /// stopped (GitHub unreachable, credentials rejected, its deadline passed).
    pub fn run(
        &self,
        report: &mut RunReport,
        record: Option<&PushRecord>,
        results_path: &Path,
        published: &Published,
    ) -> Result<i32, Failure> {
        let (repo, file) = (self.repo, self.file);
        if self.integrate && !report.interrupted {
            integrate(repo, report, &file.commit_identity())?;
        }
        let mut code = report.exit_code;
        let early = &published.published;
        if report.interrupted && !early.is_empty() {
            record_early(report, early, results_path)?;
        }
        if let Some(why) = &published.stopped
            && self.publish.is_some()
            && !report.interrupted
        {
            // The same GitHub, moments later: the publish timeout is not spent twice.
            record_early(report, early, results_path)?;
            errln!(
                "fanout: publish failed: {why}; not tried again at the end of the run: what was done is in results.json; run `fanout publish` again to continue"
            );
            return Ok(exit::FATAL);
        }
        if let Some(flags) = self.publish
            && flags.dry_run
        {
            if !report.interrupted {
                let previews = preview_report(repo, file, flags, record, report)?;
                errln!("{}", crate::publish::preview::render(&previews).trim_end());
            }
            return Ok(code);
        }
        if let Some(flags) = self.publish
            && !report.interrupted
        {
            let published = publish_report(repo, file, flags, record, report, results_path, early)?;
            if published == exit::FATAL {
                code = exit::FATAL;
            } else if published != exit::SUCCESS && code == exit::SUCCESS {
                // Publishing's code already follows the exit policy (`fail_on`).
                code = match report.plan.fail_on {
                    crate::config::FailOn::AllFailed => published,
                    _ => exit::SOME_FAILED,
                };
            }
        }
        Ok(code)
    }
}

/// Build the integration branch into `report`, record it in the run's journal (so
/// cleanup removes it) and rewrite its results.json and summary.md. Used by
/// `run --integrate`, `resume --integrate` and `aggregate --integrate`.
pub fn integrate(
    repo: &UserRepo,
    report: &mut RunReport,
    identity: &(String, String),
) -> Result<(), Failure> {
    let git = repo
        .open()
        .map_err(|e| Failure::Fatal(format!("git: {}", e.message())))?;
    match integrate_report(&git, report, (&identity.0, &identity.1)) {
        Ok(()) => {}
        Err(IntegrateError::Empty) => {
            errln!("fanout: --integrate: no successful worker to integrate");
            return Ok(());
        }
        Err(e) => return Err(Failure::Fatal(format!("--integrate: {e}"))),
    }
    let run_dir = repo.run_dir(&report.run_id);
    if let Some(it) = &report.integration {
        let mut journal =
            Journal::load(&run_dir).map_err(|e| Failure::Fatal(format!("journal: {e}")))?;
        if !journal.extra_branches.contains(&it.branch) {
            journal.extra_branches.push(it.branch.clone());
            journal
                .save(&run_dir)
                .map_err(|e| Failure::Fatal(format!("journal: {e}")))?;
        }
        errln!(
            "fanout: integration branch {} merges {} worker(s); {} left out",
            it.branch,
            it.included.len(),
            it.left_out.len()
        );
    }
    report
        .save_signed(&run_dir.join("results.json"))
        .map_err(|e| Failure::Fatal(format!("results.json: {e}")))?;
    let md = render_summary(report, None);
    write_atomic(&run_dir.join("summary.md"), md.as_bytes())
        .map_err(|e| Failure::Fatal(format!("summary.md: {e}")))?;
    Ok(())
}
