//! Matrix mode, one GitHub Actions job per worker: [`worker`] runs one worker of a
//! plan in this checkout (the same supervision and harvest as a local run) and leaves
//! its artifact for the aggregate job; [`aggregate`] verifies and imports every
//! worker's artifact, fans in, reports and, when asked, integrates and publishes. A
//! worker job needs no write token: nothing is pushed there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use secrecy::ExposeSecret;

use super::run::{After, execute_plan, write_report};
use crate::config::ConfigFile;
use crate::exit::Failure;
use crate::fanin::artifact::{artifact_dir_name, collect, missing};
use crate::model::{Totals, WorkerResult};
use crate::plan::{Plan, PlannedWorker};
use crate::repo::{PushRecord, UserRepo};
use crate::report::progress::Style;
use crate::report::summary::ReportPaths;
use crate::run::attempt::ExecOptions;
use crate::run::journal::{JOURNAL_SCHEMA_VERSION, Journal, JournalEntry};
use crate::run::results::RunReport;
use crate::util::rfc3339;

/// One worker job of a matrix.
#[derive(Debug, Clone)]
pub struct WorkerJob {
    /// The worker to run.
    pub id: u32,
    /// Where `fanout-result-<id>/` goes.
    pub out: PathBuf,
    /// Where the artifacts of earlier waves are (a worker with dependencies starts
    /// from their branches).
    pub deps_from: Option<PathBuf>,
    /// How progress is shown.
    pub style: Style,
    /// The GitHub token, for an agent allowed it (see
    /// [`crate::run::attempt::ExecOptions::agent_tokens`]).
    pub agent_tokens: Vec<(String, secrecy::SecretString)>,
}

/// Run worker `job.id` of `plan` in this checkout and write its artifact; returns the
/// artifact's directory and the job's exit code (its own worker's: kept dependencies
/// are not its work).
pub fn worker(
    repo: &UserRepo,
    file: &ConfigFile,
    plan: &Plan,
    job: &WorkerJob,
) -> Result<(PathBuf, i32), Failure> {
    let w = planned_worker(plan, job.id)?;
    check_base(repo, plan)?;
    let dir = job.out.join(artifact_dir_name(w.id));
    std::fs::create_dir_all(&dir).map_err(|e| Failure::Fatal(format!("{}: {e}", dir.display())))?;
    let kept = import_dependencies(repo, plan, &w, job.deps_from.as_deref())?;
    let mut one = plan.clone();
    one.workers = plan
        .workers
        .iter()
        .filter(|x| x.id == w.id || kept.contains_key(&x.id))
        .cloned()
        .collect();
    one.concurrency = 1;
    let opts = ExecOptions {
        worktree_dir: file.worktree_dir.clone().or_else(|| {
            std::env::var_os("RUNNER_TEMP").map(|t| PathBuf::from(t).join("fanout-worktrees"))
        }),
        identity: file.commit_identity(),
        run_dir_name: Some(format!("{}-w{}", plan.run_id, w.id)),
        push_record: None,
        publish_remote: file.publish.remote.clone(),
        agent_tokens: job.agent_tokens.clone(),
    };
    let report = execute_plan(repo, &opts, one, job.style, kept)?;
    let result = report
        .results
        .into_iter()
        .find(|r| r.worker_id == w.id)
        .expect("the worker has a result");
    let code = crate::exit::for_run(
        &Totals::of(std::slice::from_ref(&result)),
        report.interrupted,
        plan.fail_on,
    );
    let mut secrets = crate::fanin::artifact::secret_values_in_env();
    secrets.extend(
        job.agent_tokens
            .iter()
            .map(|(_, t)| t.expose_secret().to_owned()),
    );
    crate::fanin::artifact::write(&repo.workdir, plan, &w.branch, result, &dir, &secrets)
        .map_err(Failure::Fatal)?;
    Ok((dir, code))
}

/// Worker `id` of `plan`.
fn planned_worker(plan: &Plan, id: u32) -> Result<PlannedWorker, Failure> {
    plan.worker(id).cloned().ok_or_else(|| {
        Failure::Usage(format!(
            "--id {id}: the plan has workers 1 to {}",
            plan.workers.len()
        ))
    })
}

/// The plan's base commit must be in this checkout.
fn check_base(repo: &UserRepo, plan: &Plan) -> Result<(), Failure> {
    let git = repo
        .open()
        .map_err(|e| Failure::Fatal(format!("git: {}", e.message())))?;
    let base_ok = plan
        .base
        .commit
        .parse::<git2::Oid>()
        .ok()
        .and_then(|oid| git.find_commit(oid).ok())
        .is_some();
    if base_ok {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "the plan's base commit {} is not in this checkout: check out the same commit (actions/checkout with `ref: {}`, or fetch-depth: 0)",
        plan.base.commit, plan.base.commit
    )))
}

/// A dependent worker: import its dependencies' branches from the earlier waves'
/// artifacts (verified like `aggregate` does); the executor starts it from them, or
/// skips it when one did not succeed.
fn import_dependencies(
    repo: &UserRepo,
    plan: &Plan,
    w: &PlannedWorker,
    deps_from: Option<&Path>,
) -> Result<BTreeMap<u32, WorkerResult>, Failure> {
    let mut kept = BTreeMap::new();
    if w.depends_on.is_empty() {
        return Ok(kept);
    }
    let Some(deps_dir) = deps_from else {
        return Err(Failure::Usage(format!(
            "--id {}: worker {} depends on workers {}: pass --deps-from DIR with their fanout-result-* artifacts",
            w.id,
            w.id,
            w.depends_on
                .iter()
                .map(|d| format!("#{d}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    for d in &w.depends_on {
        let Some(dw) = plan.worker(*d) else {
            continue;
        };
        kept.insert(*d, collect(&repo.workdir, plan, dw, deps_dir));
    }
    Ok(kept)
}

/// What [`aggregate_settings`] checks.
#[derive(Debug, Clone, Copy)]
pub struct SettingsCheck {
    /// `--publish`.
    pub publish: bool,
    /// The plan file's digest was given and checked (`--plan-sha256`).
    pub digest_checked: bool,
    /// Running in GitHub Actions.
    pub in_actions: bool,
}

/// The settings the aggregate of `plan` publishes with: those the plan carries (the
/// plan job read them at the base commit; [`crate::plan::FaninSettings`]), and a
/// config file here (`load`) only for a plan without them. In GitHub Actions, where
/// any job of the run can upload artifacts, publishing needs the plan's digest and
/// the settings in it: an artifact carries data, never settings.
pub fn aggregate_settings(
    plan: &Plan,
    load: impl FnOnce() -> Result<ConfigFile, Failure>,
    check: SettingsCheck,
) -> Result<ConfigFile, Failure> {
    let guarded = check.publish && check.in_actions;
    if guarded && !check.digest_checked {
        return Err(Failure::Usage(
            "aggregate --publish in GitHub Actions needs --plan-sha256 (the plan job's `plan-sha256` output): without it, a plan artifact a job replaced would decide where the token goes".into(),
        ));
    }
    match &plan.fanin {
        Some(settings) => Ok(settings.config_file()),
        None if guarded => Err(Failure::Usage(
            "the plan carries no publish settings (written by an older fanout?): write it with `fanout plan --plan-file` in the plan job; the aggregate job does not read them from its checkout".into(),
        )),
        None => load(),
    }
}

/// Collect every worker's artifact under `from` into a report of `plan` (its branches
/// imported), write it, integrate and publish as `after` says, and rewrite
/// `results.json` last; returns the report, where it was written, and the exit code.
pub fn aggregate(
    after: &After<'_>,
    plan: &Plan,
    from: &Path,
) -> Result<(RunReport, ReportPaths, i32), Failure> {
    let (repo, file) = (after.repo, after.file);
    let started = SystemTime::now();
    let git = repo
        .open()
        .map_err(|e| Failure::Fatal(format!("git: {}", e.message())))?;
    // (No agent ran in this checkout: its remotes are the user's.)
    let record = PushRecord::read(&git, file.publish.remote.clone());
    after.check(Some(&record))?;
    let results: Vec<WorkerResult> = plan
        .workers
        .iter()
        .map(|w| {
            // Never take over a branch that exists here already — unless it is where
            // the bundle puts it (an aggregate run again: same commit, accepted).
            let here = git
                .refname_to_id(&format!("refs/heads/{}", w.branch))
                .ok()
                .map(|o| o.to_string());
            let same = here.is_some() && here == crate::fanin::artifact::bundle_tip(from, w);
            if here.is_some() && !same {
                return missing(
                    w,
                    format!(
                        "branch {} already exists in this repository; not replaced",
                        w.branch
                    ),
                );
            }
            collect(&repo.workdir, plan, w, from)
        })
        .collect();
    let run_dir = repo.run_dir(&plan.run_id);
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| Failure::Fatal(format!("{}: {e}", run_dir.display())))?;
    aggregate_journal(repo, &git, plan, &results, started, record.clone())
        .save(&run_dir)
        .map_err(|e| Failure::Fatal(format!("journal: {e}")))?;
    let mut results = results;
    let conflicts = crate::fanin::select::fan_in(plan, &mut results, &repo.workdir);
    let duration = results.iter().map(|r| r.duration).fold(0.0, f64::max);
    let mut report = RunReport::new(plan.clone(), results, conflicts, started, duration, false);
    let paths = write_report(&report, &run_dir)?;
    let code = after.run(
        &mut report,
        Some(&record),
        &paths.results,
        &Default::default(),
    )?;
    report
        .save_signed(&paths.results)
        .map_err(|e| Failure::Fatal(format!("{}: {e}", paths.results.display())))?;
    Ok((report, paths, code))
}

/// The aggregate run's journal: the branches it imported (no worktrees), so cleanup
/// removes them and nothing else.
fn aggregate_journal(
    repo: &UserRepo,
    git: &git2::Repository,
    plan: &Plan,
    results: &[WorkerResult],
    started: SystemTime,
    push: PushRecord,
) -> Journal {
    Journal {
        schema_version: JOURNAL_SCHEMA_VERSION,
        extra_branches: Vec::new(),
        push: Some(push),
        run_id: plan.run_id.clone(),
        created_at: rfc3339(started),
        repo_workdir: repo.workdir.clone(),
        worktree_root: repo.run_dir(&plan.run_id).join("no-worktrees"),
        entries: results
            .iter()
            .map(|r| JournalEntry {
                worker_id: r.worker_id,
                branch: r.branch.clone(),
                base_commit: plan.base.commit.clone(),
                worktree_name: String::new(),
                worktree_path: PathBuf::new(),
                branch_created: git.find_branch(&r.branch, git2::BranchType::Local).is_ok()
                    && r.commit.as_deref() != Some(plan.base.commit.as_str())
                    && r.commit.is_some(),
                worktree_created: false,
                worktree_incomplete: false,
            })
            .collect(),
    }
}
