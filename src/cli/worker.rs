//! `fanout worker`: matrix mode's per-job step. Runs exactly one worker of a plan in
//! this checkout, with the same supervision and harvest as local mode, and writes
//! `fanout-result-<id>/` (result.json, the branch as a git bundle, the agent's log)
//! for `actions/upload-artifact`. The job needs no write token: nothing is pushed here.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};

use super::common::{CliError, Context};
use super::run::{ExecOptions, execute_plan_keeping};
use crate::model::WorkerResult;
use crate::plan::Plan;
use crate::report::progress::Style;

/// `fanout worker`.
#[derive(Debug, Args, Clone)]
pub struct WorkerArgs {
    /// The plan file written by `fanout plan --plan-file`.
    #[arg(long, value_name = "PATH")]
    pub plan: PathBuf,
    /// The worker to run.
    #[arg(long, value_name = "N")]
    pub id: u32,
    /// Directory for `fanout-result-<id>/`.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// No live progress bars.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Where the `fanout-result-*` artifacts of earlier waves are (needed by a worker
    /// with task dependencies: it starts from their branches).
    #[arg(long, value_name = "DIR")]
    pub deps_from: Option<PathBuf>,
}

/// What a worker job hands to the aggregate job (`result.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerArtifact {
    /// Version of this shape.
    pub schema_version: u32,
    /// The plan's run id.
    pub run_id: String,
    /// The plan's base commit.
    pub base_commit: String,
    /// The worker's result.
    pub result: WorkerResult,
    /// Name of the bundle file beside it, when the branch has commits.
    pub bundle: Option<String>,
}

/// The directory name of a worker's artifact.
pub fn artifact_dir_name(id: u32) -> String {
    format!("fanout-result-{id}")
}

/// Read a plan file.
pub fn load_plan(ctx: &Context, path: &Path) -> Result<Plan, CliError> {
    let path = if path.is_absolute() {
        path.to_owned()
    } else {
        ctx.cwd.join(path)
    };
    let bytes = std::fs::read(&path)
        .map_err(|e| CliError::Usage(format!("--plan {}: {e}", path.display())))?;
    let plan: Plan = serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!("--plan {}: not a fanout plan: {e}", path.display()))
    })?;
    if plan.schema_version != crate::plan::PLAN_SCHEMA_VERSION {
        return Err(CliError::Usage(format!(
            "--plan {}: plan version {} is not supported by this fanout (expects {})",
            path.display(),
            plan.schema_version,
            crate::plan::PLAN_SCHEMA_VERSION
        )));
    }
    Ok(plan)
}

/// Entry point of `fanout worker`.
pub fn worker(ctx: &Context, args: &WorkerArgs) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, _) = ctx.load_config(&repo)?;
    let plan = load_plan(ctx, &args.plan)?;
    let Some(w) = plan.workers.iter().find(|w| w.id == args.id).cloned() else {
        return Err(CliError::Usage(format!(
            "--id {}: the plan has workers 1 to {}",
            args.id,
            plan.workers.len()
        )));
    };
    let git = repo.open().map_err(|e| CliError::Fatal(e.to_string()))?;
    let base_ok = plan
        .base
        .commit
        .parse::<git2::Oid>()
        .ok()
        .and_then(|oid| git.find_commit(oid).ok())
        .is_some();
    if !base_ok {
        return Err(CliError::Usage(format!(
            "the plan's base commit {} is not in this checkout: check out the same commit (actions/checkout with `ref: {}`, or fetch-depth: 0)",
            plan.base.commit, plan.base.commit
        )));
    }
    let out = if args.out.is_absolute() {
        args.out.clone()
    } else {
        ctx.cwd.join(&args.out)
    };
    let dir = out.join(artifact_dir_name(w.id));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", dir.display())))?;

    // A dependent worker: import its dependencies' branches from the earlier waves'
    // artifacts (verified like `aggregate` does); the executor starts it from them, or
    // skips it when one did not succeed.
    let mut kept = std::collections::BTreeMap::new();
    if !w.depends_on.is_empty() {
        let Some(deps_dir) = &args.deps_from else {
            return Err(CliError::Usage(format!(
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
        let deps_dir = if deps_dir.is_absolute() {
            deps_dir.clone()
        } else {
            ctx.cwd.join(deps_dir)
        };
        for d in &w.depends_on {
            let Some(dw) = plan.workers.iter().find(|x| x.id == *d) else {
                continue;
            };
            let r = super::aggregate::collect(&repo.workdir, &plan, dw, &deps_dir);
            kept.insert(*d, r);
        }
    }
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
        identity: file
            .commit
            .as_ref()
            .map(|c| (c.name.clone(), c.email.clone()))
            .unwrap_or_else(|| ("fanout".into(), "fanout@users.noreply.github.com".into())),
        run_dir_name: Some(format!("{}-w{}", plan.run_id, w.id)),
    };
    let report = execute_plan_keeping(&repo, &opts, one, Style::detect(args.quiet), kept)?;
    let result = report
        .results
        .into_iter()
        .find(|r| r.worker_id == w.id)
        .expect("the worker has a result");
    // This job's exit code is its own worker's (kept dependencies are not its work).
    let code = crate::exit::for_run(
        &crate::model::Totals::of(std::slice::from_ref(&result)),
        report.interrupted,
    );

    let has_commits = result
        .commit
        .as_deref()
        .is_some_and(|c| c != plan.base.commit);
    let bundle = if has_commits {
        let path = dir.join("branch.bundle");
        crate::fanin::bundle::create(&repo.workdir, &w.branch, &plan.base.commit, &path)
            .map_err(|e| CliError::Fatal(format!("bundling {}: {e}", w.branch)))?;
        Some("branch.bundle".to_owned())
    } else {
        None
    };
    if let Some(log) = &result.log_path {
        let _ = std::fs::copy(log, dir.join("log.txt"));
    }
    let artifact = WorkerArtifact {
        schema_version: 1,
        run_id: plan.run_id.clone(),
        base_commit: plan.base.commit.clone(),
        result,
        bundle,
    };
    let mut json = serde_json::to_vec_pretty(&artifact).expect("serializes");
    json.push(b'\n');
    std::fs::write(dir.join("result.json"), json)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", dir.display())))?;
    println!("{}", dir.display());
    Ok(code)
}
