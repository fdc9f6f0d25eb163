//! The morning digest (`publish.digest: issue`, `--digest issue`): one rolling issue,
//! found by its label and hidden marker, whose body is tonight's table compared with
//! the previous night — new failures, tasks fixed, pull requests opened, updated and
//! closed, cost tonight against the trailing average, pull requests waiting for review.
//! The same comparison goes to the step summary.
//!
//! The history of past nights lives in the issue body itself (hidden JSON, the last
//! [`KEEP`] nights), so a fresh runner has it. It comes from GitHub, so it is
//! untrusted: read bounded, parsed into plain data, anything odd dropped (the marker
//! and the finding of the issue: [`super::tracking`]).
//!
//! [`preview`] says which issue [`post`] would write (`publish --dry-run`), found the
//! same way, with reads only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::github::{ApiError, GitHub, Issue};
use super::preview::{Preview, PullDecision};
use super::stable::task_key;
use super::tracking;
use crate::model::{Operation, WorkerResult};
use crate::report::summary::md_escape;
use crate::run::results::RunReport;

/// The label of the digest issue.
pub const LABEL: &str = "fanout-digest";
/// Its title.
pub const TITLE: &str = "fanout: nightly digest";
/// Nights kept in the history.
pub const KEEP: usize = 30;
/// Longest history fanout reads from a body.
const HISTORY_LIMIT: usize = 256 * 1024;
const OPEN: &str = "<!-- fanout:digest ";

/// One night, as the digest remembers it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Night {
    /// The run.
    pub run: String,
    /// Status of each task (its key), the best of its workers.
    pub tasks: BTreeMap<String, String>,
    /// Known cost, USD.
    pub cost: f64,
    /// Workers whose agent ran and reported no cost: `cost` leaves them out.
    #[serde(default)]
    pub unknown: usize,
    /// Pull requests by operation (`created`, `updated`, `closed`).
    #[serde(default)]
    pub prs: BTreeMap<String, usize>,
    /// Pull requests open after tonight (waiting for review): `#N`.
    #[serde(default)]
    pub open: Vec<u64>,
    /// Tasks whose change waits for room (`publish.max_open`), in order: tonight only.
    #[serde(default, skip_serializing)]
    pub queued: Vec<String>,
    /// What tending did tonight (re-runs, rebases, pull requests left to people or
    /// closed with their issue), a line each: tonight only.
    #[serde(default, skip_serializing)]
    pub tended: Vec<String>,
}

fn good(status: &str) -> bool {
    matches!(status, "success" | "unchanged")
}

impl Night {
    /// Tonight, from the published report.
    pub fn of(report: &RunReport) -> Night {
        let mut night = Night {
            run: report.run_id.clone(),
            cost: report
                .results
                .iter()
                .filter_map(|r| r.cost)
                .fold(0.0, |a, b| a + b),
            unknown: report
                .results
                .iter()
                .filter(|r| r.cost.is_none() && r.duration > 0.0)
                .count(),
            ..Night::default()
        };
        night.tended = tended(report);
        for r in &report.results {
            let key = key_of(report, r);
            let status = r.status.as_str().to_owned();
            let keep = night
                .tasks
                .get(&key)
                .is_some_and(|s| good(s) && !good(&status));
            if !keep {
                night.tasks.insert(key.clone(), status);
            }
            let Some(p) = &r.publish else { continue };
            if p.operation == Operation::Queued && !night.queued.contains(&key) {
                night.queued.push(key.clone());
            }
            if matches!(
                p.operation,
                Operation::Created | Operation::Updated | Operation::Closed
            ) {
                *night
                    .prs
                    .entry(p.operation.as_str().to_owned())
                    .or_insert(0) += 1;
            }
            if still_open(report, r, p.operation)
                && let Some(n) = p.number
                && !night.open.contains(&n)
            {
                night.open.push(n);
            }
        }
        night
    }
}

/// Whether the number of `r`'s outcome `op` is a pull request left open after
/// tonight: opened, updated or left as it was — or, for a task that changes files,
/// kept open while tonight's worker published nothing (it failed, or an update or
/// close failed): that pull request is still waiting for review.
fn still_open(report: &RunReport, r: &WorkerResult, op: Operation) -> bool {
    let changes = report
        .plan
        .worker(r.worker_id)
        .is_some_and(|w| w.task.output == crate::config::TaskOutput::Changes);
    match op {
        Operation::Created | Operation::Updated | Operation::Unchanged => true,
        Operation::Skipped | Operation::Failed => changes,
        _ => false,
    }
}

/// What tending did tonight: each task re-run for its pull request (why, which tend,
/// what became of it), then each settled without an agent (rebased, left to people).
fn tended(report: &RunReport) -> Vec<String> {
    let mut lines = Vec::new();
    for w in &report.plan.workers {
        let Some(t) = &w.task.tend else { continue };
        let op = report
            .result(w.id)
            .and_then(|r| r.publish.as_ref())
            .map_or("not published", |p| p.operation.as_str());
        let line = format!(
            "#{} `{}`: run again, {} (tend {} of {}): {op}",
            t.pr,
            md_escape(&task_key(&w.task)),
            tame(&t.why),
            t.attempt,
            t.max
        );
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    for s in &report.plan.settled {
        lines.push(format!(
            "#{} `{}`: {}",
            s.pr,
            md_escape(&s.key),
            tame(&s.what)
        ));
    }
    lines
}

/// A phrase fanout wrote about a pull request (names from GitHub in it are in code
/// spans they cannot close: [`crate::publish::tend`]), kept from mentioning anyone or
/// opening HTML.
fn tame(text: &str) -> String {
    text.replace('<', "&lt;").replace('@', "@\u{200b}")
}

fn key_of(report: &RunReport, r: &WorkerResult) -> String {
    report
        .plan
        .worker(r.worker_id)
        .map(|w| task_key(&w.task))
        .unwrap_or_else(|| format!("worker-{}", r.worker_id))
}

/// The nights before tonight, oldest first, from a digest body (empty when there is
/// none, or it does not parse).
pub fn history(body: &str) -> Vec<Night> {
    let mut nights: Vec<Night> = tracking::reveal(body, OPEN, HISTORY_LIMIT).unwrap_or_default();
    nights.retain(|n| n.run.len() <= 64 && n.tasks.len() <= 1000 && n.cost.is_finite());
    let skip = nights.len().saturating_sub(KEEP);
    nights.drain(..skip);
    nights
}

/// Tonight compared with the night before.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Tasks failing tonight that were fine (or absent) the night before.
    pub new_failures: Vec<String>,
    /// Tasks fine tonight that failed the night before.
    pub fixed: Vec<String>,
    /// The trailing average cost of the previous nights whose every cost is known,
    /// when there are any.
    pub average_cost: Option<f64>,
    /// Previous nights left out of the average: some of their costs were unknown.
    pub partly_unknown: usize,
}

/// Compare `tonight` with `before` (oldest first).
pub fn compare(before: &[Night], tonight: &Night) -> Comparison {
    let last = before.last();
    let was = |k: &str| last.and_then(|n| n.tasks.get(k)).map(String::as_str);
    let new_failures = tonight
        .tasks
        .iter()
        .filter(|(k, s)| !good(s) && was(k).is_none_or(good))
        .map(|(k, _)| k.clone())
        .collect();
    let fixed = tonight
        .tasks
        .iter()
        .filter(|(k, s)| good(s) && was(k).is_some_and(|w| !good(w)))
        .map(|(k, _)| k.clone())
        .collect();
    // A night with unknown costs would pull the average down: left out, and said.
    let known: Vec<&Night> = before.iter().filter(|n| n.unknown == 0).collect();
    let average_cost =
        (!known.is_empty()).then(|| known.iter().fold(0.0, |a, n| a + n.cost) / known.len() as f64);
    Comparison {
        new_failures,
        fixed,
        average_cost,
        partly_unknown: before.len() - known.len(),
    }
}

/// The comparison in Markdown (the digest body's top, and the step summary's).
pub fn render_comparison(tonight: &Night, c: &Comparison, has_before: bool) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.iter()
                .map(|k| format!("`{}`", md_escape(k)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let count = |op: &str| tonight.prs.get(op).copied().unwrap_or(0);
    let mut out = format!(
        "### Tonight compared with the night before (run `{}`)\n\n",
        tonight.run
    );
    if !has_before {
        out.push_str("_The first night in this digest: nothing to compare with yet._\n\n");
    }
    out.push_str(&format!("- New failures: {}\n", list(&c.new_failures)));
    out.push_str(&format!("- Fixed: {}\n", list(&c.fixed)));
    out.push_str(&format!(
        "- Pull requests: {} opened, {} updated, {} closed\n",
        count("created"),
        count("updated"),
        count("closed")
    ));
    let mut avg = c.average_cost.map_or_else(
        || {
            if c.partly_unknown > 0 {
                "no earlier night with every cost known".to_owned()
            } else {
                "no earlier night".to_owned()
            }
        },
        |a| format!("${a:.2}"),
    );
    if c.partly_unknown > 0 && c.average_cost.is_some() {
        avg.push_str(&format!(
            ", leaving out {} night(s) with unknown costs",
            c.partly_unknown
        ));
    }
    let unknown = match tonight.unknown {
        0 => String::new(),
        n => format!(" + {n} worker(s) of unknown cost"),
    };
    out.push_str(&format!(
        "- Cost: ${:.2}{unknown} tonight (trailing average {avg})\n",
        tonight.cost
    ));
    let waiting: Vec<String> = tonight.open.iter().map(|n| format!("#{n}")).collect();
    out.push_str(&format!(
        "- Waiting for review: {}\n",
        if waiting.is_empty() {
            "none".to_owned()
        } else {
            waiting.join(", ")
        }
    ));
    if !tonight.queued.is_empty() {
        out.push_str(&format!(
            "- Queued, waiting for room (publish.max_open): {}\n",
            list(&tonight.queued)
        ));
    }
    if !tonight.tended.is_empty() {
        out.push_str("- Tended:\n");
        for l in &tonight.tended {
            out.push_str(&format!("  - {l}\n"));
        }
    }
    out
}

/// The whole digest body: the comparison, tonight's table, and the history (hidden).
pub fn render_body(before: &[Night], tonight: &Night) -> String {
    let c = compare(before, tonight);
    let mut out = render_comparison(tonight, &c, !before.is_empty());
    let last = before.last();
    out.push_str("\n| Task | Tonight | Night before |\n|---|---|---|\n");
    for (k, s) in &tonight.tasks {
        let was = last
            .and_then(|n| n.tasks.get(k))
            .map_or("–", String::as_str);
        out.push_str(&format!("| `{}` | {s} | {was} |\n", md_escape(k)));
    }
    let mut nights: Vec<Night> = before.to_vec();
    nights.push(tonight.clone());
    let skip = nights.len().saturating_sub(KEEP);
    nights.drain(..skip);
    out.push_str(&format!(
        "\n_Kept up to date by fanout every night._\n\n{}\n",
        tracking::hide(OPEN, &nights)
    ));
    out
}

/// Find the digest issue (open, labelled, carrying the marker), write tonight's body
/// into it or open it. Returns the comparison for the step summary, and the issue.
/// When someone closed the digest, a new one is opened, carrying the closed one's
/// history on (the close is respected; the nights are not lost).
pub async fn post(github: &GitHub, report: &RunReport) -> Result<(String, u64), ApiError> {
    let tonight = Night::of(report);
    let (found, carried) = find(github).await?;
    let before = found
        .as_ref()
        .or(carried.as_ref())
        .and_then(|i| i.body.as_deref())
        .map(history)
        .unwrap_or_default();
    let before: Vec<Night> = before
        .into_iter()
        .filter(|n| n.run != tonight.run)
        .collect();
    let body = render_body(&before, &tonight);
    let number = match found {
        Some(issue) => github.update_issue(issue.number, &body).await?,
        None => {
            github
                .create_issue(TITLE, &body, &[LABEL.to_owned()])
                .await?
        }
    };
    let c = compare(&before, &tonight);
    Ok((render_comparison(&tonight, &c, !before.is_empty()), number))
}

/// What [`post`] would do: update the open digest issue, or open one (its history
/// carried from the last closed one), and the tasks it would list as queued (those
/// whose preview in `previews` is `queued: …`); with `github`, a client holding a
/// token, else undecided. Only reads (the issues listed).
pub async fn preview(github: Option<&GitHub>, report: &RunReport, previews: &[Preview]) -> String {
    let mut queued: Vec<String> = Vec::new();
    for p in previews.iter().filter(|p| p.pull == PullDecision::Queued) {
        let key = report.result(p.worker_id).map(|r| key_of(report, r));
        if let Some(key) = key.filter(|k| !queued.contains(k)) {
            queued.push(key);
        }
    }
    let queued = match queued.is_empty() {
        true => String::new(),
        false => format!(
            "; queued, waiting for room (publish.max_open): `{}`",
            queued.join("`, `")
        ),
    };
    match github {
        Some(github) => format!("{}{queued}", which_issue(github).await),
        None => super::preview::NO_TOKEN_ISSUES.to_owned(),
    }
}

/// The digest issue [`post`] would write: the open one, else a new one.
async fn which_issue(github: &GitHub) -> String {
    match find(github).await {
        Ok((Some(issue), _)) => format!("update #{} with tonight's table", issue.number),
        Ok((None, carried)) => {
            let carried = carried
                .map(|i| format!(", its history carried from closed #{}", i.number))
                .unwrap_or_default();
            format!("open the issue \"{TITLE}\" (label {LABEL}) with tonight's table{carried}")
        }
        Err(e) => format!("undecided: the digest issue cannot be looked up: {e}"),
    }
}

/// The open digest issue (labelled, carrying the marker); when there is none, the
/// closed one whose history a new one carries on. Reads only.
async fn find(github: &GitHub) -> Result<(Option<Issue>, Option<Issue>), ApiError> {
    let found = tracking::marked(github, LABEL, OPEN)
        .await?
        .into_iter()
        .next();
    if found.is_some() {
        return Ok((found, None));
    }
    let carried = github
        .list_issues("closed", LABEL)
        .await?
        .into_iter()
        .find(|i| i.body.as_deref().is_some_and(|b| b.contains(OPEN)));
    Ok((None, carried))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night(run: &str, tasks: &[(&str, &str)], cost: f64) -> Night {
        Night {
            run: run.into(),
            tasks: tasks
                .iter()
                .map(|(k, s)| (k.to_string(), s.to_string()))
                .collect(),
            cost,
            ..Night::default()
        }
    }

    #[test]
    fn tonight_is_compared_with_the_night_before() {
        let one = night(
            "r1",
            &[("a", "success"), ("b", "failed"), ("c", "success")],
            1.0,
        );
        let two = night(
            "r2",
            &[("a", "failed"), ("b", "unchanged"), ("c", "success")],
            3.0,
        );
        let c = compare(std::slice::from_ref(&one), &two);
        assert_eq!(c.new_failures, vec!["a".to_owned()]);
        assert_eq!(c.fixed, vec!["b".to_owned()]);
        assert_eq!(c.average_cost, Some(1.0));
        let body = render_body(std::slice::from_ref(&one), &two);
        assert!(body.contains("New failures: `a`"), "{body}");
        assert!(body.contains("Fixed: `b`"), "{body}");
        assert!(
            body.contains("$3.00 tonight (trailing average $1.00)"),
            "{body}"
        );
        assert_eq!(history(&body), vec![one, two]);
    }

    #[test]
    fn unknown_costs_are_said_and_left_out_of_the_average() {
        let mut one = night("r1", &[("a", "success")], 1.0);
        let mut two = night("r2", &[("a", "success")], 0.2);
        two.unknown = 2; // two agents that report no cost: $0.20 is not what it cost
        let three = night("r3", &[("a", "success")], 3.0);
        let c = compare(&[one.clone(), two.clone()], &three);
        assert_eq!((c.average_cost, c.partly_unknown), (Some(1.0), 1));
        let body = render_body(&[one.clone(), two.clone()], &three);
        assert!(
            body.contains(
                "$3.00 tonight (trailing average $1.00, leaving out 1 night(s) with unknown costs)"
            ),
            "{body}"
        );
        let body = render_body(std::slice::from_ref(&three), &two);
        assert!(
            body.contains("$0.20 + 2 worker(s) of unknown cost tonight (trailing average $3.00)"),
            "{body}"
        );
        one.unknown = 1;
        let c = compare(&[one, two], &three);
        assert_eq!((c.average_cost, c.partly_unknown), (None, 2));
        // a history written before `unknown` existed still reads (as all known)
        let old = format!("{OPEN}[{{\"run\":\"r0\",\"tasks\":{{}},\"cost\":1.5}}] -->");
        assert_eq!(history(&old)[0].unknown, 0);
    }

    #[test]
    fn history_from_github_is_read_defensively() {
        assert!(history("no marker").is_empty());
        assert!(history(&format!("{OPEN}not json -->")).is_empty());
        let huge = format!("{OPEN}[{}] -->", " ".repeat(HISTORY_LIMIT + 1));
        assert!(history(&huge).is_empty());
        let many: Vec<Night> = (0..50).map(|i| night(&format!("r{i}"), &[], 0.0)).collect();
        let body = tracking::hide(OPEN, &many);
        let kept = history(&body);
        assert_eq!(kept.len(), KEEP);
        assert_eq!(kept.last().unwrap().run, "r49");
        // A task named to close the comment cannot.
        let sly = night("r1", &[("x --> <b>", "failed")], 0.0);
        let body = render_body(&[], &sly);
        assert_eq!(history(&body), vec![sly]);
    }
}
