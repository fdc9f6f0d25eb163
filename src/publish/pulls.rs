//! What both ways of publishing share ([`super::publish`] for per-run branches,
//! [`super::lifecycle`] for stable ones): the options, which workers are eligible,
//! checking a worker's branch against the plan, pushing, and opening or updating a
//! pull request with its labels and reviewers.

use std::collections::BTreeMap;

use git2::Oid;

use super::body::Templates;
use super::github::{ApiError, GitHub, NewPull, PullRequest};
use super::push::{self, Lease, PushResult};
use super::stable;
use super::target;

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
    /// Per-run branches, or one stable branch per task ([`stable`]).
    pub branch: stable::BranchMode,
    /// Stable branches: close a task's pull request when its worker changed nothing.
    pub close_stale: bool,
    /// Stable branches: open a pull request again after a human closed it.
    pub reopen: bool,
    /// Keep the morning digest issue ([`super::digest`]).
    pub digest: bool,
    /// Stable branches: most of fanout's pull requests open at once
    /// (`publish.max_open`); tonight's other successes are queued.
    pub max_open: Option<u32>,
    /// Publish branches that change the repository's CI ([`changes_ci`]).
    pub allow_workflow_changes: bool,
}

/// Whether a change to `path` changes what the repository's CI runs or who must
/// review it: a workflow or a local action under `.github/`, the root action
/// (`action.yml`/`action.yaml`), or a `CODEOWNERS` where GitHub reads one (the root,
/// `.github/`, `docs/`).
pub fn is_ci_path(path: &str) -> bool {
    path.starts_with(".github/workflows/")
        || path.starts_with(".github/actions/")
        || matches!(
            path,
            "action.yml" | "action.yaml" | "CODEOWNERS" | ".github/CODEOWNERS" | "docs/CODEOWNERS"
        )
}

/// Why `lease` is held back: its commit changes the repository's CI ([`is_ci_path`],
/// measured from git against the run's base) and `allow` is off; `None` otherwise.
pub fn changes_ci(repo: &git2::Repository, lease: &Lease, allow: bool) -> Option<String> {
    if allow || lease.delete {
        return None;
    }
    let changed = match crate::run::harvest::changed_paths(repo, lease.base, lease.local) {
        Ok(paths) => paths,
        Err(e) => return Some(format!("what it changes cannot be read: {}", e.message())),
    };
    let ci: Vec<&str> = changed
        .iter()
        .map(String::as_str)
        .filter(|p| is_ci_path(p))
        .collect();
    if ci.is_empty() {
        return None;
    }
    Some(format!(
        "it changes {} (workflows, actions or CODEOWNERS: a push runs the repository's CI, with its secrets, on what the agent wrote); set publish.allow_workflow_changes: true to publish such branches",
        ci.join(", ")
    ))
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

pub(super) fn outcome(op: Operation, reason: Option<String>) -> PublishOutcome {
    PublishOutcome {
        operation: op,
        number: None,
        url: None,
        reason,
        pushed_commit: None,
        compare_url: None,
        branch: None,
    }
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
    // `<prefix>/<run-id>/`, the prefix never empty: a branch of the user's (`release/1.0`)
    // is in no run's namespace, whatever a forged plan names.
    let namespace = match first.branch.rsplit_once('/') {
        Some((ns, _))
            if ns
                .strip_suffix(&format!("/{}", plan.run_id))
                .is_some_and(|prefix| !prefix.is_empty()) =>
        {
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
        let w = (plan.worker(r.worker_id))
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
        claimed: Vec::new(),
        delete: false,
    })
}

/// What one publish reads: the run's report and repository, the token to push
/// with, the pull requests' templates and the options.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub(crate) report: &'a RunReport,
    pub(crate) repo_dir: &'a std::path::Path,
    pub(crate) push_token: Option<&'a str>,
    pub(crate) templates: &'a Templates,
    pub(crate) opts: &'a PublishOptions,
}

impl<'a> Inputs<'a> {
    /// The same, for `report`.
    pub(crate) fn with_report(self, report: &'a RunReport) -> Self {
        Inputs { report, ..self }
    }

    /// Whether the workers publish to stable branches ([`super::lifecycle`]): the integration
    /// branch never does.
    pub(super) fn stable(&self) -> bool {
        self.opts.branch == stable::BranchMode::Stable
            && !self.report.results.iter().any(|r| r.worker_id == 0)
    }

    /// The title and body of a per-run branch's pull request.
    pub(super) fn pull_text(&self, r: &WorkerResult) -> Result<(String, String), String> {
        let (report, run_url) = (self.report, self.opts.run_url.as_deref());
        (self.templates).render_titled(r, &report.results, (&report.run_id, run_url), None)
    }
}

/// One push for every branch; an error says why none was pushed.
pub(super) async fn push_all(
    p: Inputs<'_>,
    leases: &[(u32, Lease)],
) -> Result<BTreeMap<String, PushResult>, String> {
    let pushed = on_remote(p, leases, push::push).await;
    pushed.unwrap_or_else(|_| Err("push task failed".into()))
}

/// What pushing each lease would do ([`push::look`]), by branch; an error says why
/// the remote's branches cannot be read.
pub(super) async fn look_all(
    p: Inputs<'_>,
    leases: &[(u32, Lease)],
) -> Result<BTreeMap<String, push::WouldPush>, String> {
    if leases.is_empty() {
        return Ok(BTreeMap::new());
    }
    let looked = on_remote(p, leases, push::look).await;
    looked.unwrap_or_else(|_| Err("the look at the remote failed".into()))
}

/// What a push or a look at the remote reads.
type RemoteFn<T> =
    fn(&git2::Repository, &target::PushTo, Option<&str>, &[Lease]) -> Result<T, String>;

/// `f` on a blocking thread, with the repository at `p.repo_dir`, the remote to push
/// to, the push token and the leases.
async fn on_remote<T: Send + 'static>(
    p: Inputs<'_>,
    leases: &[(u32, Lease)],
    f: RemoteFn<T>,
) -> Result<Result<T, String>, tokio::task::JoinError> {
    let (dir, to) = (p.repo_dir.to_owned(), p.opts.push.clone());
    let token = p.push_token.map(str::to_owned);
    let batch: Vec<Lease> = leases.iter().map(|(_, l)| l.clone()).collect();
    tokio::task::spawn_blocking(move || {
        let repo = git2::Repository::open(&dir).map_err(|e| e.message().to_owned())?;
        f(&repo, &to, token.as_deref(), &batch)
    })
    .await
}

pub(super) fn compare_url(
    opts: &PublishOptions,
    github: &GitHub,
    base: &str,
    branch: &str,
) -> String {
    format!(
        "{}/{}/compare/{}...{}?expand=1",
        opts.server_url.trim_end_matches('/'),
        github.repo(),
        base,
        branch
    )
}

/// The base branch of the pull requests of `report`.
pub(super) fn base_of(report: &RunReport, opts: &PublishOptions) -> Option<String> {
    opts.base
        .clone()
        .or_else(|| report.plan.base.branch.clone())
}

/// Open the pull request of the pushed branch `head` into `base`, or update the open
/// one; then its labels and reviewers.
pub(super) async fn open_or_update(
    head: &str,
    base: &str,
    title: &str,
    body: &str,
    github: &GitHub,
    opts: &PublishOptions,
) -> PublishOutcome {
    let failed = |e: &ApiError| {
        let mut o = outcome(Operation::Failed, Some(e.to_string()));
        o.compare_url = Some(compare_url(opts, github, base, head));
        o
    };
    let mut notes: Vec<String> = Vec::new();
    let existing = match github.find_open_pull(head, base).await {
        Ok(p) => p,
        Err(e) => return failed(&e),
    };
    let pull = Pull {
        head,
        base,
        title,
        body,
    };
    let action = pull_action(existing.as_ref(), title, body, &opts.labels);
    let made = match (action, existing) {
        (PullAction::Leave(_), Some(pr)) => Ok((Operation::Unchanged, pr)),
        (_, Some(pr)) => update_if_needed(github, pr, title, body)
            .await
            .map_err(|e| failed(&e)),
        (_, None) => create(github, &pull, opts.draft, &failed, &mut notes).await,
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
        branch: None,
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
pub(super) async fn extras(
    github: &GitHub,
    pr: &PullRequest,
    op: Operation,
    opts: &PublishOptions,
    notes: &mut Vec<String>,
) -> Operation {
    let missing = missing_labels(pr, &opts.labels);
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
    if same_text(&pr, title, body) {
        return Ok((Operation::Unchanged, pr));
    }
    let updated = github.update_pull(pr.number, title, body).await?;
    Ok((Operation::Updated, updated))
}

/// Whether open pull request `pr` already says `title` and `body`.
fn same_text(pr: &PullRequest, title: &str, body: &str) -> bool {
    pr.title == title && pr.body.as_deref().map(str::trim_end) == Some(body.trim_end())
}

/// The labels of `labels` that `pr` lacks.
fn missing_labels(pr: &PullRequest, labels: &[String]) -> Vec<String> {
    labels
        .iter()
        .filter(|l| !pr.labels.iter().any(|have| &have.name == *l))
        .cloned()
        .collect()
}

/// What [`open_or_update`] does with the pull request of a pushed branch, given the
/// open one (`existing`) and what it should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullAction {
    /// Open one.
    Open,
    /// Update the open one (its title, body or labels differ), by number.
    Update(u64),
    /// The open one already says it all, by number.
    Leave(u64),
}

/// The [`PullAction`] for `existing`, the title, body and labels wanted.
pub fn pull_action(
    existing: Option<&PullRequest>,
    title: &str,
    body: &str,
    labels: &[String],
) -> PullAction {
    match existing {
        None => PullAction::Open,
        Some(pr) if same_text(pr, title, body) && missing_labels(pr, labels).is_empty() => {
            PullAction::Leave(pr.number)
        }
        Some(pr) => PullAction::Update(pr.number),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_change_the_repositorys_ci() {
        for p in [
            ".github/workflows/ci.yml",
            ".github/workflows/sub/x.yaml",
            ".github/actions/setup/action.yml",
            "action.yml",
            "action.yaml",
            "CODEOWNERS",
            ".github/CODEOWNERS",
            "docs/CODEOWNERS",
        ] {
            assert!(is_ci_path(p), "{p}");
        }
        for p in [
            "src/action.yml",
            ".github/dependabot.yml",
            ".github/workflows",
            "docs/guide.md",
            "sub/CODEOWNERS",
            "workflows/ci.yml",
        ] {
            assert!(!is_ci_path(p), "{p}");
        }
    }
}
