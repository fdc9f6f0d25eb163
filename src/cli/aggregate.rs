//! `fanout aggregate`: matrix mode's fan-in. Reads every worker job's
//! `fanout-result-<id>/`, verifies and imports each branch bundle (only the expected
//! branch, based on the plan's base commit), recomputes what changed from git rather
//! than trusting the job's word, reports (summary, outputs) and publishes. A worker
//! job that died without a result is reported as failed, never silently missing.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Args;

use super::common::{CliError, Context, PublishArgs};
use super::worker::{WorkerArtifact, artifact_dir_name, load_plan};
use crate::model::{Status, Totals, WorkerResult};
use crate::plan::{Plan, PlannedWorker};
use crate::run::journal::{JOURNAL_SCHEMA_VERSION, Journal, JournalEntry};
use crate::run::results::{REPORT_SCHEMA_VERSION, RunReport};
use crate::util::{rfc3339, write_atomic};
use crate::{actions, exit, report};

/// `fanout aggregate`.
#[derive(Debug, Args, Clone)]
pub struct AggregateArgs {
    /// The plan file.
    #[arg(long, value_name = "PATH")]
    pub plan: PathBuf,
    /// Directory holding the downloaded `fanout-result-*` artifacts.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// Push successful branches and open or update their pull requests.
    #[arg(long)]
    pub publish: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also build one integration branch of every success that merges cleanly.
    #[arg(long)]
    pub integrate: bool,
    /// Publishing flags (with --publish).
    #[command(flatten, next_help_heading = "Publishing (with --publish)")]
    pub publish_args: PublishArgs,
}

/// Find `fanout-result-<id>/result.json` under `from` (directly, or one level down,
/// as artifact downloads sometimes nest).
fn find_artifact(from: &Path, id: u32) -> Option<PathBuf> {
    let name = artifact_dir_name(id);
    let direct = from.join(&name).join("result.json");
    if direct.is_file() {
        return Some(direct);
    }
    std::fs::read_dir(from).ok()?.flatten().find_map(|e| {
        let p = e.path().join(&name).join("result.json");
        p.is_file().then_some(p)
    })
}

fn missing(w: &PlannedWorker, reason: String) -> WorkerResult {
    WorkerResult {
        worker_id: w.id,
        attempt: 1,
        cost_source: None,
        branch: w.branch.clone(),
        model: w.model.clone(),
        status: Status::Failed,
        steps: None,
        cost: None,
        duration: 0.0,
        files_modified: Vec::new(),
        worktree_path: None,
        task: w.task.prompt.clone(),
        task_id: w.task.id.clone(),
        agent: w.agent.clone(),
        reason: Some(reason),
        commit: None,
        base_commit: None,
        committed_by_fanout: false,
        exit_code: None,
        signal: None,
        log_path: None,
        checks: Vec::new(),
        setup: None,
        selection: None,
        publish: None,
    }
}

/// Turn one worker's artifact into its result, importing its branch.
/// Read worker `w`'s artifact under `from`, verify its bundle and import its branch
/// into the repository at `repo_dir`; a missing or bad artifact is a failed result.
pub(super) fn collect(
    repo_dir: &Path,
    plan: &Plan,
    w: &PlannedWorker,
    from: &Path,
) -> WorkerResult {
    let Some(path) = find_artifact(from, w.id) else {
        return missing(
            w,
            "the worker's job left no result (it failed before fanout finished, was cancelled, or its artifact was not uploaded)".into(),
        );
    };
    let artifact: WorkerArtifact = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(a) => a,
        Err(e) => return missing(w, format!("unreadable result.json: {e}")),
    };
    let r = &artifact.result;
    if artifact.run_id != plan.run_id
        || artifact.base_commit != plan.base.commit
        || r.worker_id != w.id
        || r.branch != w.branch
    {
        return missing(
            w,
            format!(
                "result.json does not belong to this plan (run {}, worker {}, branch {})",
                artifact.run_id, r.worker_id, r.branch
            ),
        );
    }
    let mut result = r.clone();
    result.worktree_path = None;
    result.log_path = Some(path.with_file_name("log.txt")).filter(|p| p.is_file());
    result.publish = None;
    let Some(bundle_name) = &artifact.bundle else {
        result.commit = Some(plan.base.commit.clone());
        result.files_modified = Vec::new();
        if result.status == Status::Success {
            result.status = Status::Failed;
            result.reason = Some("no branch bundle: no changes".into());
        }
        return result;
    };
    let bundle = path.with_file_name(bundle_name);
    if bundle_name.contains('/') || !bundle.is_file() {
        return missing(w, format!("bundle {bundle_name:?} is missing"));
    }
    match crate::fanin::bundle::import(repo_dir, &bundle, &w.branch, &plan.base.commit) {
        Ok(tip) => {
            // A dependent worker's change is measured from where it started (the merge of
            // its dependencies), when that is really an ancestor of its branch.
            let files = git2::Repository::open(repo_dir).and_then(|repo| {
                let tip_oid: git2::Oid = tip.parse()?;
                let from = match r.base_commit.as_deref().map(str::parse::<git2::Oid>) {
                    Some(Ok(b)) if repo.graph_descendant_of(tip_oid, b).unwrap_or(false) => b,
                    _ => plan.base.commit.parse()?,
                };
                crate::run::harvest::changed_paths(&repo, from, tip_oid)
            });
            match files {
                Ok(files) => {
                    if result.commit.as_deref() != Some(tip.as_str()) {
                        result.reason = Some(format!(
                            "the bundle's commit {} differs from the reported one; the bundle wins",
                            &tip[..tip.len().min(12)]
                        ));
                    }
                    result.commit = Some(tip);
                    result.files_modified = files;
                }
                Err(e) => {
                    return missing(w, format!("reading the imported branch: {}", e.message()));
                }
            }
            if result.status == Status::Success && result.files_modified.is_empty() {
                result.status = Status::Failed;
                result.reason = Some("agent finished but changed no files".into());
            }
            result
        }
        Err(e) => {
            let mut m = missing(w, format!("bundle refused: {e}"));
            m.steps = result.steps;
            m.cost = result.cost;
            m.duration = result.duration;
            m
        }
    }
}

/// Entry point of `fanout aggregate`.
pub fn aggregate(ctx: &Context, args: &AggregateArgs) -> Result<i32, CliError> {
    let started = SystemTime::now();
    let repo = ctx.repo()?;
    let (file, _) = ctx.load_config(&repo)?;
    let plan = load_plan(ctx, &args.plan)?;
    let from = if args.from.is_absolute() {
        args.from.clone()
    } else {
        ctx.cwd.join(&args.from)
    };
    let git = repo.open().map_err(|e| CliError::Fatal(e.to_string()))?;
    let results: Vec<WorkerResult> = plan
        .workers
        .iter()
        .map(|w| {
            // Never take over a branch that exists here already.
            if git.find_branch(&w.branch, git2::BranchType::Local).is_ok() {
                return missing(
                    w,
                    format!(
                        "branch {} already exists in this repository; not replaced",
                        w.branch
                    ),
                );
            }
            collect(&repo.workdir, &plan, w, &from)
        })
        .collect();

    let run_dir = repo.run_dir(&plan.run_id);
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", run_dir.display())))?;
    let journal = Journal {
        schema_version: JOURNAL_SCHEMA_VERSION,
        extra_branches: Vec::new(),
        run_id: plan.run_id.clone(),
        created_at: rfc3339(started),
        repo_workdir: repo.workdir.clone(),
        worktree_root: run_dir.join("no-worktrees"),
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
            })
            .collect(),
    };
    journal
        .save(&run_dir)
        .map_err(|e| CliError::Fatal(format!("journal: {e}")))?;

    let mut results = results;
    let conflicts = crate::fanin::select::fan_in(&plan, &mut results, &repo.workdir);
    let totals = Totals::of(&results);
    let duration = results.iter().map(|r| r.duration).fold(0.0, f64::max);
    let mut report = RunReport {
        schema_version: REPORT_SCHEMA_VERSION,
        run_id: plan.run_id.clone(),
        started_at: rfc3339(started),
        finished_at: rfc3339(SystemTime::now()),
        duration,
        interrupted: false,
        exit_code: exit::for_run(&totals, false),
        plan: plan.clone(),
        results,
        totals,
        conflicts,
        integration: None,
    };
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let paths = report::summary::write(&report, &run_dir, step_summary.as_deref())
        .map_err(|e| CliError::Fatal(format!("writing the report: {e}")))?;
    if let Some(out) = actions::output_file() {
        actions::write_run_outputs(&out, &report, &paths)
            .map_err(|e| CliError::Fatal(format!("$GITHUB_OUTPUT: {e}")))?;
    }
    if args.integrate {
        let identity = file
            .commit
            .as_ref()
            .map(|c| (c.name.clone(), c.email.clone()))
            .unwrap_or_else(|| ("fanout".into(), "fanout@users.noreply.github.com".into()));
        super::run::integrate(&repo, &mut report, &identity)?;
    }
    let mut code = report.exit_code;
    if args.publish {
        let published = super::publish::publish_report(
            &repo,
            &file,
            &args.publish_args,
            &mut report,
            &paths.results,
        )?;
        if published != exit::SUCCESS && code == exit::SUCCESS {
            code = exit::SOME_FAILED;
        }
    }
    let mut json = serde_json::to_vec_pretty(&report).expect("serializes");
    json.push(b'\n');
    write_atomic(&paths.results, &json)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", paths.results.display())))?;
    if args.json {
        println!("{}", String::from_utf8_lossy(&json));
    } else {
        print!("{}", report::table::table(&report.results));
        if args.publish {
            print!("\n{}", super::publish::pr_table(&report));
        }
    }
    Ok(code)
}
