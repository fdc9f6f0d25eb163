//! Publishing: every successful worker's branch becomes a pull request — pushed by
//! fanout (not the agent), created the first time, updated on every re-run, never
//! duplicated. Failed, partial (unless included), timed-out and empty workers get no
//! pull request and a reason. One worker's failure never stops the others.
//!
//! This stage takes a finished run's report (after fan-in, as the report stage wrote
//! it): [`report::publish_report`] resolves where and how to publish and records each
//! worker's outcome in `results.json`; [`publish`] does the pushing and the pull
//! requests over the GitHub client ([`github`]); [`body`] renders them. Branches go
//! over http(s) through fanout's own smart-HTTP transport ([`smart_http`]). With
//! `branch: stable` each task publishes to one branch across runs ([`stable`]) and its
//! pull request lives on from run to run ([`lifecycle`]): dependent tasks stack
//! ([`stack`]), `publish.max_open` queues the rest; before a night, [`tend`] reads
//! what GitHub says of tonight's tasks (issues as tasks, pull requests to tend). After the pull requests,
//! findings tasks post their findings ([`findings`]: a comment on a tracking issue, or
//! a review of another task's pull request), and the morning digest is written
//! ([`digest`]); both keep issues found by their markers ([`tracking`]). With
//! `publish.when: as-ready`, `run --publish` publishes each worker while the run goes
//! on ([`ready`]), and the end-of-run publish leaves those be.

pub mod body;
pub mod digest;
pub mod findings;
pub mod github;
pub mod lifecycle;
pub mod preview;
pub mod pulls;
pub mod push;
pub mod ready;
pub mod report;
pub mod smart_http;
pub mod stable;
pub mod stack;
pub mod target;
pub mod tend;
pub mod tracking;

use std::collections::BTreeMap;

use body::Templates;
use github::GitHub;
pub use pulls::{PublishOptions, counts, ineligible, record, verify};
use pulls::{open_or_update, outcome, push_all};
use push::{Lease, PushResult};

use crate::model::{Operation, PublishOutcome, WorkerResult};
use crate::run::results::RunReport;

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
    let integration = report.results.iter().any(|r| r.worker_id == 0);
    if opts.branch == stable::BranchMode::Stable && !integration {
        return lifecycle::publish(report, repo_dir, github, push_token, templates, opts).await;
    }
    let mut out = BTreeMap::new();
    let base = pulls::base_of(report, opts);
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

/// What [`publish`] would do, without writing anything: the same eligibility and
/// checks, the push decided from the remote's branches as they are now, the pull
/// request from the open one GitHub lists (with `github`, a client holding a token;
/// without it, undecided). See [`preview`] for the record.
pub async fn dry_run(
    report: &RunReport,
    repo_dir: &std::path::Path,
    github: Option<&GitHub>,
    push_token: Option<&str>,
    templates: &Templates,
    opts: &PublishOptions,
) -> Vec<preview::Preview> {
    let integration = report.results.iter().any(|r| r.worker_id == 0);
    if opts.branch == stable::BranchMode::Stable && !integration {
        return lifecycle::dry_run(report, repo_dir, github, push_token, templates, opts).await;
    }
    let mut skipped = BTreeMap::new();
    let base = pulls::base_of(report, opts);
    let repo = git2::Repository::open(repo_dir).ok();
    let leases = leases(repo.as_ref(), report, opts, base.is_some(), &mut skipped);
    drop(repo);
    let looked = pulls::look_all(repo_dir, opts, push_token, &leases).await;
    let mut out = Vec::new();
    for r in &report.results {
        let lease = leases.iter().find(|(id, _)| *id == r.worker_id);
        let (Some((_, lease)), Some(base)) = (lease, base.as_deref()) else {
            let why = skipped
                .get(&r.worker_id)
                .and_then(|o| o.reason.clone())
                .unwrap_or_default();
            out.push(preview::Preview::nothing(
                r.worker_id,
                &r.branch,
                r.commit.as_deref(),
                &why,
            ));
            continue;
        };
        let would = looked
            .as_ref()
            .map(|m| m.get(&lease.branch).cloned().map(Ok));
        let would = match would {
            Ok(w) => w,
            Err(e) => Some(Err(e.clone())),
        };
        let p = preview::Preview {
            push: preview::push_line(would.as_ref()),
            commit: Some(lease.local.to_string()),
            ..preview::Preview::nothing(r.worker_id, &lease.branch, None, "")
        };
        out.push(if preview::pushable(would.as_ref()) {
            pull_preview(p, (report, r), base, github, templates, opts).await
        } else {
            preview::Preview {
                pull_request: "none: the branch would not be pushed".into(),
                ..p
            }
        });
    }
    out
}

/// The pull request part of a per-run branch's preview.
async fn pull_preview(
    p: preview::Preview,
    (report, r): (&RunReport, &WorkerResult),
    base: &str,
    github: Option<&GitHub>,
    templates: &Templates,
    opts: &PublishOptions,
) -> preview::Preview {
    let (title, body) = match pull_text(report, r, templates, opts) {
        Ok(tb) => tb,
        Err(e) => {
            return preview::Preview {
                pull_request: format!("none: {e}"),
                ..p
            };
        }
    };
    let p = preview::Preview {
        labels: opts.labels.clone(),
        ..p
    }
    .with_text(&title, &body);
    let Some(github) = github else {
        return preview::Preview {
            pull_request: preview::NO_TOKEN.into(),
            ..p
        };
    };
    let pull_request = match github.find_open_pull(&r.branch, base).await {
        Ok(open) => match pulls::pull_action(open.as_ref(), &title, &body, &opts.labels) {
            pulls::PullAction::Open => format!("open into {base}"),
            pulls::PullAction::Update(n) => format!("update #{n}"),
            pulls::PullAction::Leave(n) => format!("leave #{n}: it already says this"),
        },
        Err(e) => format!("undecided: the open pull requests cannot be read: {e}"),
    };
    preview::Preview { pull_request, ..p }
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
            Some(repo) => verify(repo, report, r).and_then(|lease| {
                match pulls::changes_ci(repo, &lease, opts.allow_workflow_changes) {
                    Some(why) => Err(why),
                    None => Ok(lease),
                }
            }),
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

/// Create or update the pull request of one pushed branch.
async fn pull_request(
    report: &RunReport,
    r: &WorkerResult,
    base: &str,
    github: &GitHub,
    templates: &Templates,
    opts: &PublishOptions,
) -> PublishOutcome {
    let (title, body) = match pull_text(report, r, templates, opts) {
        Ok(tb) => tb,
        Err(e) => return outcome(Operation::Failed, Some(e)),
    };
    open_or_update(&r.branch, base, &title, &body, github, opts).await
}

/// The title and body of a per-run branch's pull request.
fn pull_text(
    report: &RunReport,
    r: &WorkerResult,
    templates: &Templates,
    opts: &PublishOptions,
) -> Result<(String, String), String> {
    templates.render_in(r, &report.results, &report.run_id, opts.run_url.as_deref())
}
