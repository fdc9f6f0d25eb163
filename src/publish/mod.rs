//! Publishing: every successful worker's branch becomes a pull request — pushed by
//! fanout (not the agent), created the first time, updated on every re-run, never
//! duplicated. Failed, partial (unless included), timed-out and empty workers get no
//! pull request and a reason. One worker's failure never stops the others.
//!
//! This stage takes a finished run's report (after fan-in, as the report stage wrote
//! it): [`report::publish_report`] resolves where and how to publish and records each
//! worker's outcome in `results.json`; [`publish`] does the pushing and the pull
//! requests over the GitHub client ([`github`]); [`body`] renders them.

pub mod body;
pub mod github;
pub mod push;
pub mod report;
pub mod target;

use std::collections::BTreeMap;

use git2::Oid;

use body::Templates;
use github::{ApiError, GitHub, NewPull, PullRequest};
use push::{Lease, PushResult};

use crate::model::{Operation, PublishOutcome, Status, WorkerResult};
use crate::run::results::RunReport;

/// How to publish.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Also publish `partial` workers.
    pub include_partial: bool,
    /// Labels for every pull request.
    pub labels: Vec<String>,
    /// Open as drafts.
    pub draft: bool,
    /// Users asked to review.
    pub reviewers: Vec<String>,
    /// Teams asked to review.
    pub team_reviewers: Vec<String>,
    /// Base branch override (default: the plan's base branch).
    pub base: Option<String>,
    /// Where to push (decided and checked before: [`target::push_to`]).
    pub push: target::PushTo,
    /// Link to the Actions run, for PR bodies.
    pub run_url: Option<String>,
    /// Web base (`https://github.com`) for compare links.
    pub server_url: String,
}

/// Why a worker is not published, or `None` when it is.
pub fn ineligible(r: &WorkerResult, include_partial: bool) -> Option<String> {
    match r.status {
        Status::Success => {}
        Status::Partial if include_partial => {}
        Status::Partial => {
            return Some("status partial (use --include partial to publish it)".into());
        }
        s => return Some(format!("status {s}")),
    }
    if r.files_modified.is_empty() {
        return Some("no changes".into());
    }
    if r.commit.is_none() {
        return Some("no commit".into());
    }
    None
}

fn outcome(op: Operation, reason: Option<String>) -> PublishOutcome {
    PublishOutcome {
        operation: op,
        number: None,
        url: None,
        reason,
        pushed_commit: None,
        compare_url: None,
    }
}

/// Publish every eligible worker of `report` from the repository at `repo_dir`: each
/// branch checked against the plan ([`verify`]) and pushed with a lease asked from the
/// remote ([`push`]). Returns one outcome per worker, by worker id.
pub async fn publish(
    report: &RunReport,
    repo_dir: &std::path::Path,
    github: &GitHub,
    push_token: Option<&str>,
    templates: &Templates,
    opts: &PublishOptions,
) -> BTreeMap<u32, PublishOutcome> {
    let mut out = BTreeMap::new();
    let base = opts
        .base
        .clone()
        .or_else(|| report.plan.base.branch.clone());
    let repo = git2::Repository::open(repo_dir).ok();
    let leases = leases(repo.as_ref(), report, opts, base.is_some(), &mut out);
    drop(repo);
    let Some(base) = base else { return out };
    let pushed = match push_all(repo_dir, opts, push_token, &leases).await {
        Ok(map) => map,
        Err(why) => {
            for (id, _) in &leases {
                out.insert(*id, outcome(Operation::Failed, Some(why.clone())));
            }
            return out;
        }
    };
    for (id, lease) in &leases {
        let r = report
            .results
            .iter()
            .find(|r| r.worker_id == *id)
            .expect("lease from a result");
        let result = match pushed.get(&lease.branch) {
            Some(PushResult::Pushed) | Some(PushResult::UpToDate) => {
                let mut o = pull_request(report, r, &base, github, templates, opts).await;
                o.pushed_commit = Some(lease.local.to_string());
                o
            }
            Some(PushResult::Refused(why)) => outcome(Operation::Failed, Some(why.clone())),
            None => outcome(Operation::Failed, Some("not pushed".into())),
        };
        out.insert(*id, result);
    }
    out
}

/// The push lease of each worker to publish (its branch and commit, checked against
/// the plan: [`verify`]); the outcome of each that is not published goes into `out`.
fn leases(
    repo: Option<&git2::Repository>,
    report: &RunReport,
    opts: &PublishOptions,
    has_base: bool,
    out: &mut BTreeMap<u32, PublishOutcome>,
) -> Vec<(u32, Lease)> {
    let mut leases = Vec::new();
    for r in &report.results {
        if let Some(why) = ineligible(r, opts.include_partial)
            .or_else(|| crate::fanin::select::not_selected(r, &report.results))
        {
            out.insert(r.worker_id, outcome(Operation::Skipped, Some(why)));
            continue;
        }
        if !has_base {
            out.insert(
                r.worker_id,
                outcome(
                    Operation::Failed,
                    Some("the run's base is not a branch; pass --base BRANCH".into()),
                ),
            );
            continue;
        }
        let checked = match repo {
            Some(repo) => verify(repo, report, r),
            None => Err("the repository cannot be opened".to_owned()),
        };
        match checked {
            Ok(lease) => leases.push((r.worker_id, lease)),
            Err(why) => {
                out.insert(
                    r.worker_id,
                    outcome(Operation::Failed, Some(format!("not published: {why}"))),
                );
            }
        }
    }
    leases
}

/// What may be pushed for `r`, trusting nothing in it that an agent could have
/// written: its branch must be the plan's branch for that worker (the run's
/// integration branch for worker 0), inside the run's namespace
/// (`<prefix>/<run-id>/`); its commit must exist here and descend from the plan's base
/// commit.
pub fn verify(
    repo: &git2::Repository,
    report: &RunReport,
    r: &WorkerResult,
) -> Result<Lease, String> {
    let plan = &report.plan;
    let first = plan.workers.first().ok_or("the plan has no worker")?;
    let namespace = match first.branch.rsplit_once('/') {
        Some((ns, _)) if ns.ends_with(&format!("/{}", plan.run_id)) || ns == plan.run_id => {
            format!("{ns}/")
        }
        _ => {
            return Err(format!(
                "the plan's branch {} is outside any run's namespace",
                first.branch
            ));
        }
    };
    let (planned, worker) = if r.worker_id == 0 {
        (format!("{namespace}integration"), None)
    } else {
        let w = plan
            .workers
            .iter()
            .find(|w| w.id == r.worker_id)
            .ok_or_else(|| format!("worker {} is not in the plan", r.worker_id))?;
        (w.branch.clone(), Some(w.id))
    };
    if r.branch != planned || !planned.starts_with(&namespace) || report.run_id != plan.run_id {
        return Err(format!(
            "branch {:?} is not the plan's branch for this worker ({planned})",
            r.branch
        ));
    }
    let local: Oid = r
        .commit
        .as_deref()
        .and_then(|c| c.parse().ok())
        .ok_or("bad commit id")?;
    let base: Oid = plan
        .base
        .commit
        .parse()
        .map_err(|_| "the plan's base commit is not a commit id")?;
    repo.find_commit(local).map_err(|_| {
        format!(
            "commit {} is not in this repository",
            crate::util::short(&local.to_string())
        )
    })?;
    if !repo.graph_descendant_of(local, base).unwrap_or(false) {
        return Err(format!(
            "commit {} does not descend from the run's base {}",
            crate::util::short(&local.to_string()),
            crate::util::short(&plan.base.commit)
        ));
    }
    Ok(Lease {
        branch: planned,
        local,
        base,
        owner: push::Owner {
            run_id: plan.run_id.clone(),
            worker,
        },
    })
}

/// One push for every branch; an error says why none was pushed.
async fn push_all(
    repo_dir: &std::path::Path,
    opts: &PublishOptions,
    push_token: Option<&str>,
    leases: &[(u32, Lease)],
) -> Result<BTreeMap<String, PushResult>, String> {
    let repo_dir = repo_dir.to_owned();
    let to = opts.push.clone();
    let token = push_token.map(str::to_owned);
    let batch: Vec<Lease> = leases.iter().map(|(_, l)| l.clone()).collect();
    let pushed = tokio::task::spawn_blocking(move || {
        let repo = git2::Repository::open(&repo_dir).map_err(|e| e.message().to_owned())?;
        push::push(&repo, &to, token.as_deref(), &batch)
    })
    .await;
    match pushed {
        Ok(result) => result,
        Err(_) => Err("push task failed".into()),
    }
}

fn compare_url(opts: &PublishOptions, github: &GitHub, base: &str, branch: &str) -> String {
    format!(
        "{}/{}/compare/{}...{}?expand=1",
        opts.server_url.trim_end_matches('/'),
        github.repo(),
        base,
        branch
    )
}

/// Create or update the pull request of one pushed branch.
async fn pull_request(
    report: &RunReport,
    r: &WorkerResult,
    base: &str,
    github: &GitHub,
    templates: &Templates,
    opts: &PublishOptions,
) -> PublishOutcome {
    let (title, body) =
        match templates.render_in(r, &report.results, &report.run_id, opts.run_url.as_deref()) {
            Ok(tb) => tb,
            Err(e) => return outcome(Operation::Failed, Some(e)),
        };
    let failed = |e: &ApiError| {
        let mut o = outcome(Operation::Failed, Some(e.to_string()));
        o.compare_url = Some(compare_url(opts, github, base, &r.branch));
        o
    };
    let mut notes: Vec<String> = Vec::new();
    let existing = match github.find_open_pull(&r.branch, base).await {
        Ok(p) => p,
        Err(e) => return failed(&e),
    };
    let pull = Pull {
        head: &r.branch,
        base,
        title: &title,
        body: &body,
    };
    let made = match existing {
        Some(pr) => update_if_needed(github, pr, &title, &body)
            .await
            .map_err(|e| failed(&e)),
        None => create(github, &pull, opts.draft, &failed, &mut notes).await,
    };
    let (op, pr) = match made {
        Ok(x) => x,
        Err(o) => return o,
    };
    let op = extras(github, &pr, op, opts, &mut notes).await;
    PublishOutcome {
        operation: op,
        number: Some(pr.number),
        url: Some(pr.html_url),
        reason: (!notes.is_empty()).then(|| notes.join("; ")),
        pushed_commit: None,
        compare_url: None,
    }
}

/// A pull request to open: its branch, base, title and body.
struct Pull<'a> {
    head: &'a str,
    base: &'a str,
    title: &'a str,
    body: &'a str,
}

/// Open `pull`: as a draft when asked and the repository allows it; when someone
/// opened it meanwhile (a concurrent run, an earlier attempt), update theirs; after
/// an unclear answer, look before sending again. An error is the worker's outcome.
async fn create(
    github: &GitHub,
    pull: &Pull<'_>,
    draft: bool,
    failed: &dyn Fn(&ApiError) -> PublishOutcome,
    notes: &mut Vec<String>,
) -> Result<(Operation, PullRequest), PublishOutcome> {
    let mut draft = draft;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let new = NewPull {
            title: pull.title,
            head: pull.head,
            base: pull.base,
            body: pull.body,
            draft,
            maintainer_can_modify: true,
        };
        match github.create_pull(&new).await {
            Ok(pr) => return Ok((Operation::Created, pr)),
            Err(e) if e.status() == Some(422) && e.message_lower().contains("already exists") => {
                return match github.find_open_pull(pull.head, pull.base).await {
                    Ok(Some(pr)) => update_if_needed(github, pr, pull.title, pull.body)
                        .await
                        .map_err(|e| failed(&e)),
                    Ok(None) => Err(failed(&e)),
                    Err(e) => Err(failed(&e)),
                };
            }
            Err(e) if draft && e.status() == Some(422) && e.message_lower().contains("draft") => {
                notes.push("draft pull requests are not supported in this repository; opened as ready for review".into());
                draft = false;
            }
            Err(e)
                if e.status() == Some(403)
                    && e.message_lower().contains("not permitted to create") =>
            {
                let mut o = failed(&e);
                o.reason = Some(format!(
                    "{e}. Enable \"Allow GitHub Actions to create and approve pull requests\" (Settings → Actions → General), or use a GitHub App token; open it by hand from the compare link"
                ));
                return Err(o);
            }
            Err(ApiError::Ambiguous(why)) if attempts < 3 => {
                // Never re-send blindly: did it take effect?
                match github.find_open_pull(pull.head, pull.base).await {
                    Ok(Some(pr)) => {
                        notes.push(format!("confirmed after an unclear answer ({why})"));
                        return match update_if_needed(github, pr, pull.title, pull.body).await {
                            Ok((_, pr)) => Ok((Operation::Created, pr)),
                            Err(e) => Err(failed(&e)),
                        };
                    }
                    Ok(None) => continue,
                    Err(e) => return Err(failed(&e)),
                }
            }
            Err(e) => return Err(failed(&e)),
        }
    }
}

/// Labels and reviewers: extras, they never fail the worker (a problem is a note).
/// Returns the operation, `updated` when labels were added to an unchanged one.
async fn extras(
    github: &GitHub,
    pr: &PullRequest,
    op: Operation,
    opts: &PublishOptions,
    notes: &mut Vec<String>,
) -> Operation {
    let missing: Vec<String> = opts
        .labels
        .iter()
        .filter(|l| !pr.labels.iter().any(|have| &have.name == *l))
        .cloned()
        .collect();
    let mut op = op;
    if !missing.is_empty() {
        match github.add_labels(pr.number, &missing).await {
            Ok(()) => {
                if op == Operation::Unchanged {
                    op = Operation::Updated;
                }
            }
            Err(e) => notes.push(format!("labels not added: {e}")),
        }
    }
    if op == Operation::Created
        && !(opts.reviewers.is_empty() && opts.team_reviewers.is_empty())
        && let Err(e) = github
            .request_reviewers(pr.number, &opts.reviewers, &opts.team_reviewers)
            .await
    {
        notes.push(format!("reviewers not requested: {e}"));
    }
    op
}

async fn update_if_needed(
    github: &GitHub,
    pr: PullRequest,
    title: &str,
    body: &str,
) -> Result<(Operation, PullRequest), ApiError> {
    let same_body = pr.body.as_deref().map(str::trim_end) == Some(body.trim_end());
    if pr.title == title && same_body {
        return Ok((Operation::Unchanged, pr));
    }
    let updated = github.update_pull(pr.number, title, body).await?;
    Ok((Operation::Updated, updated))
}

/// Attach outcomes to the report's results.
pub fn record(report: &mut RunReport, outcomes: BTreeMap<u32, PublishOutcome>) {
    for r in &mut report.results {
        if let Some(o) = outcomes.get(&r.worker_id) {
            r.publish = Some(o.clone());
        }
    }
}

/// Counts of operations, for messages and exit codes.
pub fn counts(report: &RunReport) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for r in &report.results {
        if let Some(p) = &r.publish {
            *m.entry(p.operation.as_str()).or_insert(0) += 1;
        }
    }
    m
}
