//! Posting a findings task's findings when its run is published (`findings:` on the
//! task), after the pull requests:
//!
//! * `comment` — a comment on the task's tracking issue: one issue per task key,
//!   labelled [`LABEL`] and found by its hidden marker ([`super::tracking`]), opened
//!   the first time; one comment per run. The marker remembers the last run posted,
//!   so publishing the same run again posts nothing twice.
//! * `review` with `review_of: <task>` — a pull-request review (event `COMMENT`) on
//!   the pull request that task opened or updated in this same publish (the one of
//!   its first successful worker: the branch the reviewer started from). When it
//!   opened or updated none (it failed, or its pull request already held this change),
//!   nothing is posted and the outcome says why.
//!
//! One worker posts per task: the first that succeeded with findings. Its publish
//! outcome becomes `posted` (the issue's or pull request's number and URL), or says
//! why nothing was posted. Findings are an agent's text: masked again and posted in a
//! code fence it cannot close (no mention, link or HTML of its own takes effect). A
//! 403 (a token without `issues: write` / `pull-requests: write`) neither stops
//! publishing nor fails the run's publish: the outcome is `skipped`, saying which
//! permission is missing.
//!
//! [`preview`] says what [`post`] would do (`publish --dry-run`) from the same
//! posters, the tracking issues only listed and the review decided from the reviewed
//! task's pull-request preview.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::github::{ApiError, GitHub, Issue};
use super::preview::{NO_TOKEN_ISSUES, Preview, PullDecision};
use super::pulls::{PublishOptions, outcome};
use super::stable::task_key;
use super::tracking;
use crate::config::FindingsPost;
use crate::model::{Operation, PublishOutcome, Status, WorkerResult};
use crate::plan::Task;
use crate::report::summary::{fence, first_line, md_escape};
use crate::run::results::RunReport;

/// The label of every findings tracking issue.
pub const LABEL: &str = "fanout-findings";
const OPEN: &str = "<!-- fanout:findings ";
const REVIEW_OPEN: &str = "<!-- fanout:review ";
/// Longest marker read from an issue body.
const MARKER_LIMIT: usize = 4096;

/// What a tracking issue's marker says: whose issue it is, the last run posted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Tracked {
    task: String,
    #[serde(default)]
    run: Option<String>,
}

/// One task's findings to post.
struct Poster<'a> {
    r: &'a WorkerResult,
    task: &'a Task,
    key: String,
    how: FindingsPost,
}

/// Post the findings of every findings task that asks for it; each poster's outcome
/// goes into `outcomes` (by worker id), where the pull requests' already are.
pub async fn post(
    report: &RunReport,
    github: &GitHub,
    opts: &PublishOptions,
    outcomes: &mut BTreeMap<u32, PublishOutcome>,
) {
    let (posters, quiet) = posters(report);
    for id in quiet {
        settle(
            outcomes,
            id,
            outcome(
                Operation::Skipped,
                Some("no findings to post (the agent gave no final message)".into()),
            ),
        );
    }
    let mut issues: Option<Result<Vec<Issue>, ApiError>> = None;
    for p in posters {
        let o = match p.how {
            FindingsPost::Comment => {
                if issues.is_none() {
                    issues = Some(tracking::marked(github, LABEL, OPEN).await);
                }
                match issues.as_ref().expect("listed") {
                    Ok(list) => comment(report, github, opts, &p, list).await,
                    Err(e) => failed("the tracking issue was not found", e),
                }
            }
            FindingsPost::Review => review(report, github, &p, outcomes).await,
        };
        settle(outcomes, p.r.worker_id, o);
    }
}

/// What [`post`] would do, said on each poster's preview in `previews` (and on each
/// quiet findings task's): the tracking issues listed (a read) with `github`, a client
/// holding a token; without it, a comment is undecided.
pub async fn preview(report: &RunReport, github: Option<&GitHub>, previews: &mut [Preview]) {
    let (posters, quiet) = posters(report);
    let mut said: Vec<(u32, String)> = quiet
        .into_iter()
        .map(|id| {
            (
                id,
                "none: no findings to post (the agent gave no final message)".into(),
            )
        })
        .collect();
    let mut issues: Option<Result<Vec<Issue>, ApiError>> = None;
    for p in posters {
        let line = match (p.how, github) {
            (FindingsPost::Comment, None) => NO_TOKEN_ISSUES.to_owned(),
            (FindingsPost::Comment, Some(github)) => {
                if issues.is_none() {
                    issues = Some(tracking::marked(github, LABEL, OPEN).await);
                }
                match issues.as_ref().expect("listed") {
                    Ok(list) => would_comment(report, &p, list),
                    Err(e) => format!("undecided: the tracking issues cannot be read: {e}"),
                }
            }
            (FindingsPost::Review, _) => would_review(report, &p, previews),
        };
        said.push((p.r.worker_id, line));
    }
    for (id, line) in said {
        if let Some(pv) = previews.iter_mut().find(|pv| pv.worker_id == id) {
            pv.findings = Some(line);
        }
    }
}

/// What `findings: comment` would do given the tracking issues `issues`.
fn would_comment(report: &RunReport, p: &Poster<'_>, issues: &[Issue]) -> String {
    let found = issues.iter().find_map(|i| {
        let t: Tracked = tracking::reveal(i.body.as_deref()?, OPEN, MARKER_LIMIT)?;
        (t.task == p.key).then_some((i.number, t))
    });
    match found {
        Some((n, t)) if t.run.as_deref() == Some(report.run_id.as_str()) => {
            format!("none: this run's findings are already on #{n}")
        }
        Some((n, _)) => format!("comment on #{n}, the tracking issue of `{}`", p.key),
        None => format!(
            "open the tracking issue \"fanout findings: {}\" (label {LABEL}) and comment on it",
            p.key
        ),
    }
}

/// What `findings: review` would do, from the reviewed task's pull-request preview.
fn would_review(report: &RunReport, p: &Poster<'_>, previews: &[Preview]) -> String {
    let of = p.task.review_of.as_deref().unwrap_or_default();
    let w = match reviewed_of(report, of) {
        Ok(w) => w,
        Err(why) => return format!("none: {why}"),
    };
    let pv = previews.iter().find(|pv| pv.worker_id == w.worker_id);
    let (decided, pull) = pv.map_or((PullDecision::None, "none"), |pv| {
        (pv.pull, pv.pull_request.as_str())
    });
    match decided {
        PullDecision::Update(n) => format!("review #{n}, task {of}'s pull request"),
        PullDecision::Open => format!("review the pull request task {of} would open"),
        PullDecision::Undecided => {
            format!("undecided: it reviews the pull request of task {of}, itself undecided")
        }
        PullDecision::None | PullDecision::Queued => format!(
            "none: not posted: task {of} would open or update no pull request in this publish (worker #{}: {pull})",
            w.worker_id
        ),
    }
}

/// The worker posting for each task that asks for it; and the workers of such tasks
/// that succeeded with nothing to post (none of their task did).
fn posters(report: &RunReport) -> (Vec<Poster<'_>>, Vec<u32>) {
    let mut by_key: BTreeMap<String, (&Task, Vec<&WorkerResult>)> = BTreeMap::new();
    for w in &report.plan.workers {
        if w.task.findings.is_none() {
            continue;
        }
        let Some(r) = report.result(w.id) else {
            continue;
        };
        by_key
            .entry(task_key(&w.task))
            .or_insert_with(|| (&w.task, Vec::new()))
            .1
            .push(r);
    }
    let mut posters = Vec::new();
    let mut quiet = Vec::new();
    for (key, (task, mut rs)) in by_key {
        rs.sort_by_key(|r| r.worker_id);
        let ok = |r: &&&WorkerResult| r.status == Status::Success;
        match rs.iter().filter(ok).find(|r| r.findings.is_some()) {
            Some(r) => posters.push(Poster {
                r,
                task,
                key,
                how: task.findings.expect("filtered"),
            }),
            None => quiet.extend(rs.iter().filter(ok).map(|r| r.worker_id).take(1)),
        }
    }
    (posters, quiet)
}

/// Record a poster's outcome: it replaces a `skipped` one (a findings task opens no
/// pull request), else it is a note on the pull request's.
fn settle(outcomes: &mut BTreeMap<u32, PublishOutcome>, id: u32, o: PublishOutcome) {
    match outcomes.get_mut(&id) {
        Some(pr) if pr.operation != Operation::Skipped => {
            let note = format!(
                "findings {}{}",
                o.operation.as_str(),
                o.reason.map(|r| format!(": {r}")).unwrap_or_default()
            );
            pr.reason = Some(match pr.reason.take() {
                Some(r) => format!("{r}; {note}"),
                None => note,
            });
        }
        _ => {
            outcomes.insert(id, o);
        }
    }
}

/// A failed request's outcome: `skipped` for a 403 (a permission the token lacks,
/// like labels), else `failed`.
fn failed(what: &str, e: &ApiError) -> PublishOutcome {
    if e.status() == Some(403) {
        return outcome(
            Operation::Skipped,
            Some(format!(
                "{what}: {e} (posting findings needs the token's issues: write, and pull-requests: write for a review)"
            )),
        );
    }
    outcome(Operation::Failed, Some(format!("{what}: {e}")))
}

fn posted(number: u64, url: String, note: Option<String>) -> PublishOutcome {
    PublishOutcome {
        number: Some(number),
        url: Some(url),
        ..outcome(Operation::Posted, note)
    }
}

/// The findings text as posted: masked again, in a fence it cannot close.
fn fenced(r: &WorkerResult) -> String {
    let text = crate::secret::mask_tokens(r.findings.as_deref().unwrap_or_default());
    let f = fence(&text);
    format!("{f}\n{text}\n{f}")
}

/// Who wrote them: the worker, its agent and model.
fn by(r: &WorkerResult) -> String {
    format!(
        "worker #{}, agent `{}`, model `{}`",
        r.worker_id,
        md_escape(&r.agent),
        md_escape(r.model.as_deref().unwrap_or("default"))
    )
}

/// `findings: comment`: comment on the task's tracking issue (opened if absent), then
/// note tonight's run in its marker.
async fn comment(
    report: &RunReport,
    github: &GitHub,
    opts: &PublishOptions,
    p: &Poster<'_>,
    issues: &[Issue],
) -> PublishOutcome {
    let found = issues.iter().find_map(|i| {
        let t: Tracked = tracking::reveal(i.body.as_deref()?, OPEN, MARKER_LIMIT)?;
        (t.task == p.key).then_some((i.number, t))
    });
    let url = |n: u64| {
        format!(
            "{}/{}/issues/{n}",
            opts.server_url.trim_end_matches('/'),
            github.repo()
        )
    };
    if let Some((n, t)) = &found
        && t.run.as_deref() == Some(report.run_id.as_str())
    {
        return PublishOutcome {
            number: Some(*n),
            url: Some(url(*n)),
            ..outcome(
                Operation::Unchanged,
                Some(format!("this run's findings are already on #{n}")),
            )
        };
    }
    let number = match found {
        Some((n, _)) => n,
        None => {
            let body = issue_body(&p.key, p.task, None);
            let title = format!("fanout findings: {}", p.key);
            match github
                .create_issue(&title, &body, &[LABEL.to_owned()])
                .await
            {
                Ok(n) => n,
                Err(e) => return failed("the tracking issue was not opened", &e),
            }
        }
    };
    let run_link = opts
        .run_url
        .as_deref()
        .map(|u| format!(" ([workflow run]({u}))"))
        .unwrap_or_default();
    let text = format!(
        "**Findings of `{}`**, run `{}`{run_link} ({}):\n\n{}\n",
        p.key,
        report.run_id,
        by(p.r),
        fenced(p.r)
    );
    if let Err(e) = github.comment(number, &text).await {
        return PublishOutcome {
            number: Some(number),
            ..failed(&format!("not posted on #{number}"), &e)
        };
    }
    let body = issue_body(&p.key, p.task, Some(&report.run_id));
    let note = match github.update_issue(number, &body).await {
        Ok(_) => None,
        Err(e) => Some(format!(
            "the issue's record of this run was not saved ({e}): publishing this run again would post again"
        )),
    };
    posted(number, url(number), note)
}

/// The body of task `key`'s tracking issue, its marker noting the last run posted.
fn issue_body(key: &str, task: &Task, run: Option<&str>) -> String {
    let last = match run {
        Some(r) => format!("Last posted: run `{r}`."),
        None => "Nothing posted yet.".into(),
    };
    let marker = tracking::hide(
        OPEN,
        &Tracked {
            task: key.to_owned(),
            run: run.map(str::to_owned),
        },
    );
    format!(
        "The findings of the fanout task `{key}`: every run that publishes it posts the agent's final message here as a comment.\n\n> {}\n\n{last}\n\n{marker}\n",
        md_escape(&first_line(&task.prompt, 200))
    )
}

/// The worker of task `of` in `report` whose pull request is reviewed ([`reviewed`]).
fn reviewed_of<'a>(report: &'a RunReport, of: &str) -> Result<&'a WorkerResult, String> {
    let mut writers: Vec<&WorkerResult> = report
        .results
        .iter()
        .filter(|r| r.task_id.as_deref() == Some(of))
        .collect();
    writers.sort_by_key(|r| r.worker_id);
    reviewed(of, &writers)
}

/// The worker of the reviewed task `of` whose pull request is reviewed (its first
/// success), or why there is none: it found nothing to change, or it did not succeed.
fn reviewed<'a>(of: &str, writers: &[&'a WorkerResult]) -> Result<&'a WorkerResult, String> {
    if let Some(w) = writers.iter().find(|r| r.status == Status::Success) {
        return Ok(w);
    }
    if writers.iter().any(|r| r.status == Status::Unchanged) {
        return Err(format!(
            "not posted: task {of} found nothing to change (unchanged), so it has no pull request to review"
        ));
    }
    Err(format!(
        "not posted: task {of} did not succeed, so it has no pull request to review"
    ))
}

/// `findings: review`: review the pull request the reviewed task opened or updated
/// in this publish.
async fn review(
    report: &RunReport,
    github: &GitHub,
    p: &Poster<'_>,
    outcomes: &BTreeMap<u32, PublishOutcome>,
) -> PublishOutcome {
    let of = p.task.review_of.as_deref().unwrap_or_default();
    let skip = |why: String| outcome(Operation::Skipped, Some(why));
    let w = match reviewed_of(report, of) {
        Ok(w) => w,
        Err(why) => return skip(why),
    };
    let pr = outcomes.get(&w.worker_id);
    let (number, url) = match pr {
        Some(o) if matches!(o.operation, Operation::Created | Operation::Updated) => {
            match (o.number, o.url.clone()) {
                (Some(n), Some(u)) => (n, u),
                _ => {
                    return skip(format!(
                        "not posted: task {of}'s pull request has no number"
                    ));
                }
            }
        }
        other => {
            let what = other.map_or("not published".to_owned(), |o| {
                format!(
                    "{}{}",
                    o.operation.as_str(),
                    o.reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )
            });
            return skip(format!(
                "not posted: task {of} opened or updated no pull request in this publish (worker #{}: {what})",
                w.worker_id
            ));
        }
    };
    let marker = tracking::hide(
        REVIEW_OPEN,
        &Tracked {
            task: p.key.clone(),
            run: Some(report.run_id.clone()),
        },
    );
    let text = format!(
        "**Review by the fanout task `{}`**, run `{}` ({}):\n\n{}\n\n{marker}\n",
        p.key,
        report.run_id,
        by(p.r),
        fenced(p.r)
    );
    match github.review(number, &text).await {
        Ok(()) => posted(number, url, None),
        Err(e) => PublishOutcome {
            number: Some(number),
            ..failed(&format!("the review was not posted on #{number}"), &e)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(id: u32, status: Status) -> WorkerResult {
        WorkerResult::new(id, "b", "t", "a", status)
    }

    #[test]
    fn a_reviewer_says_why_there_is_no_pull_request_to_review() {
        let (ok, failed, same) = (
            writer(1, Status::Success),
            writer(2, Status::Failed),
            writer(3, Status::Unchanged),
        );
        assert_eq!(reviewed("docs", &[&failed, &ok]).unwrap().worker_id, 1);
        let why = reviewed("docs", &[&same]).unwrap_err();
        assert!(
            why.contains("task docs found nothing to change (unchanged)"),
            "{why}"
        );
        let why = reviewed("docs", &[&failed]).unwrap_err();
        assert!(why.contains("task docs did not succeed"), "{why}");
    }
}
