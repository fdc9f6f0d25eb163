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

use github::GitHub;
use preview::{Preview, PullDecision};
pub use pulls::{Inputs, PublishOptions, counts, ineligible, record, verify};
use pulls::{open_or_update, outcome, push_all};
use push::{Lease, PushResult};

use crate::model::{Operation, PublishOutcome, WorkerResult};

/// Publish every eligible worker of `p.report` from the repository at `p.repo_dir`:
/// each branch checked against the plan ([`verify`]) and pushed with a lease asked
/// from the remote ([`push`]). Returns one outcome per worker, by worker id.
pub async fn publish(p: Inputs<'_>, github: &GitHub) -> BTreeMap<u32, PublishOutcome> {
    if p.stable() {
        return lifecycle::publish(p, github).await;
    }
    let mut out = BTreeMap::new();
    let (base, leases) = leases(p, &mut out);
    let Some(base) = base else { return out };
    let pushed = match push_all(p, &leases).await {
        Ok(map) => map,
        Err(why) => {
            for (id, _) in &leases {
                out.insert(*id, outcome(Operation::Failed, Some(why.clone())));
            }
            return out;
        }
    };
    for (id, lease) in &leases {
        let r = p.report.result(*id).expect("lease from a result");
        let result = match pushed.get(&lease.branch) {
            Some(PushResult::Pushed) | Some(PushResult::UpToDate) => {
                let mut o = match p.pull_text(r) {
                    Ok((title, body)) => {
                        open_or_update(&r.branch, &base, &title, &body, github, p.opts).await
                    }
                    Err(e) => outcome(Operation::Failed, Some(e)),
                };
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
pub async fn dry_run(p: Inputs<'_>, github: Option<&GitHub>) -> Vec<Preview> {
    if p.stable() {
        return lifecycle::dry_run(p, github).await;
    }
    let mut skipped = BTreeMap::new();
    let (base, leases) = leases(p, &mut skipped);
    let looked = pulls::look_all(p, &leases).await;
    let mut out = Vec::new();
    for r in &p.report.results {
        let lease = leases.iter().find(|(id, _)| *id == r.worker_id);
        let (Some((_, lease)), Some(base)) = (lease, base.as_deref()) else {
            let why = skipped.get(&r.worker_id).and_then(|o| o.reason.as_deref());
            out.push(Preview::skipped(r, why.unwrap_or_default()));
            continue;
        };
        let would = match &looked {
            Ok(m) => m.get(&lease.branch).cloned().map(Ok),
            Err(e) => Some(Err(e.clone())),
        };
        let pv = Preview::pushing(r.worker_id, lease, would.as_ref());
        out.push(if preview::pushable(would.as_ref()) {
            pull_preview(pv, p, r, base, github).await
        } else {
            pv.with_pull(
                "none: the branch would not be pushed".into(),
                PullDecision::None,
            )
        });
    }
    out
}

/// The pull request part of a per-run branch's preview.
async fn pull_preview(
    pv: Preview,
    p: Inputs<'_>,
    r: &WorkerResult,
    base: &str,
    github: Option<&GitHub>,
) -> Preview {
    let (title, body) = match p.pull_text(r) {
        Ok(tb) => tb,
        Err(e) => return pv.with_pull(format!("none: {e}"), PullDecision::None),
    };
    let pv = Preview {
        labels: p.opts.labels.clone(),
        ..pv
    }
    .with_text(&title, &body);
    let Some(github) = github else {
        return pv.with_pull(preview::NO_TOKEN.into(), PullDecision::Undecided);
    };
    let (line, write) = match github.find_open_pull(&r.branch, base).await {
        Ok(open) => match pulls::pull_action(open.as_ref(), &title, &body, &p.opts.labels) {
            pulls::PullAction::Open => (format!("open into {base}"), PullDecision::Open),
            pulls::PullAction::Update(n) => (format!("update #{n}"), PullDecision::Update(n)),
            pulls::PullAction::Leave(n) => (
                format!("leave #{n}: it already says this"),
                PullDecision::None,
            ),
        },
        Err(e) => (
            format!("undecided: the open pull requests cannot be read: {e}"),
            PullDecision::Undecided,
        ),
    };
    pv.with_pull(line, write)
}

/// The push lease of each worker to publish (its branch and commit, checked against
/// the plan: [`verify`]); the outcome of each that is not published goes into `out`; and the base
/// branch, when the run's base is one.
fn leases(
    p: Inputs<'_>,
    out: &mut BTreeMap<u32, PublishOutcome>,
) -> (Option<String>, Vec<(u32, Lease)>) {
    let (report, opts) = (p.report, p.opts);
    let base = pulls::base_of(report, opts);
    let repo = git2::Repository::open(p.repo_dir).ok();
    let mut leases = Vec::new();
    for r in &report.results {
        if let Some(why) = ineligible(r, opts.include_partial)
            .or_else(|| crate::fanin::select::not_selected(r, &report.results))
        {
            out.insert(r.worker_id, outcome(Operation::Skipped, Some(why)));
            continue;
        }
        if base.is_none() {
            out.insert(
                r.worker_id,
                outcome(
                    Operation::Failed,
                    Some("the run's base is not a branch; pass --base BRANCH".into()),
                ),
            );
            continue;
        }
        let checked = match &repo {
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
    (base, leases)
}
