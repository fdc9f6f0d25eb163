//! `publish --dry-run`: what publishing would do, worker by worker — the branch and
//! commit, whether it would be pushed (and why not), and the pull request it would
//! open, update, leave or close, with its labels, title and the body's first lines;
//! a findings task's post ([`super::findings::preview`]) and, once for the run, the
//! digest issue ([`super::digest::preview`]).
//!
//! This module owns only the preview's record and how it is printed. The decisions
//! are publishing's own: [`super::dry_run`] (per-run branches) and
//! [`super::lifecycle::dry_run`] (stable ones) run the same checks, the same
//! push lease ([`super::push::look`]: the remote's branches read, nothing written)
//! and the same pull-request decisions ([`super::pulls::pull_action`],
//! [`super::lifecycle::decide`]) as a real publish, and stop before the first write.
//! Only reads reach GitHub (`GET`), and only with a token; without one, what depends
//! on GitHub is said to be undecided.

use serde::Serialize;

use super::push::{Lease, PushResult, WouldPush};
use crate::model::WorkerResult;
use crate::util::short;

/// How many lines of a pull request's body a preview shows.
pub const BODY_LINES: usize = 4;

/// What publishing would do for one worker.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Preview {
    /// The worker.
    pub worker_id: u32,
    /// The branch it would publish to.
    pub branch: String,
    /// The commit it would push.
    pub commit: Option<String>,
    /// `push: …`, `no push: …` or `push undecided: …`.
    pub push: String,
    /// `open …`, `update #N`, `leave #N …`, `close #N …`, `queued: …`, `none: …` or
    /// `undecided: …`.
    pub pull_request: String,
    /// What [`Preview::pull_request`] says would happen, for the decisions that
    /// follow it (a findings review, the digest's queue).
    #[serde(skip)]
    pub pull: PullDecision,
    /// The labels the pull request would carry.
    pub labels: Vec<String>,
    /// Its title, when it would be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The first lines of its body, when it would be written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<String>,
    /// A findings task's post: `comment on #N …`, `open a tracking issue …`,
    /// `review #N …`, `none: …` or `undecided: …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<String>,
    /// What else the night would do on its account (`retarget #N onto …`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

/// What would happen to a preview's pull request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PullDecision {
    /// Nothing is written (none, left as it is, closed).
    #[default]
    None,
    /// One is opened.
    Open,
    /// The open one is updated, by number.
    Update(u64),
    /// The change waits for room (`publish.max_open`).
    Queued,
    /// GitHub's state decides, and it cannot be read.
    Undecided,
}

/// What publishing a run would do: each worker's preview, and the digest issue's
/// (`update #N …`, `open …`, `undecided: …`) when the digest is kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Previews {
    /// One per worker, the integration branch's last.
    pub workers: Vec<Preview>,
    /// The digest issue's, when kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl Preview {
    /// A worker with nothing to publish: no push, no pull request, and why.
    pub fn nothing(worker_id: u32, branch: &str, commit: Option<&str>, why: &str) -> Preview {
        Preview {
            worker_id,
            branch: branch.to_owned(),
            commit: commit.map(str::to_owned),
            push: format!("no push: {why}"),
            pull_request: "none".into(),
            ..Preview::default()
        }
    }

    /// Worker `r`, not published, and why.
    pub fn skipped(r: &WorkerResult, why: &str) -> Preview {
        Preview::nothing(r.worker_id, &r.branch, r.commit.as_deref(), why)
    }

    /// Worker `worker_id`'s push of `lease` (or its deletion), from what
    /// [`super::push::look`] found; its pull request still to say.
    pub fn pushing(
        worker_id: u32,
        lease: &Lease,
        would: Option<&Result<WouldPush, String>>,
    ) -> Preview {
        Preview {
            push: match lease.delete {
                true => delete_line(would),
                false => push_line(would),
            },
            commit: (!lease.delete).then(|| lease.local.to_string()),
            ..Preview::nothing(worker_id, &lease.branch, None, "")
        }
    }

    /// With its pull request line and what that line decides.
    pub fn with_pull(self, pull_request: String, pull: PullDecision) -> Preview {
        Preview {
            pull_request,
            pull,
            ..self
        }
    }

    /// The title and the body's first lines that say something (not fanout's marker
    /// comment, nor a table's rule).
    pub fn with_text(self, title: &str, body: &str) -> Preview {
        Preview {
            title: Some(title.to_owned()),
            body: body
                .lines()
                .filter(|l| !l.trim_start().starts_with("<!--"))
                .filter(|l| l.chars().any(char::is_alphanumeric))
                .take(BODY_LINES)
                .map(str::to_owned)
                .collect(),
            ..self
        }
    }
}

/// The push line of a branch, from what [`super::push::look`] found.
fn push_line(would: Option<&Result<WouldPush, String>>) -> String {
    match would {
        Some(Ok(WouldPush::Write { from: None })) => "push: a new branch on the remote".into(),
        Some(Ok(WouldPush::Write { from: Some(tip) })) => format!(
            "push: replaces the remote's {} (fanout's)",
            short(&tip.to_string())
        ),
        Some(Ok(WouldPush::Not(PushResult::UpToDate))) => {
            "no push: the remote already has this commit".into()
        }
        Some(Ok(WouldPush::Not(PushResult::Refused(why)))) => format!("no push: {why}"),
        Some(Ok(WouldPush::Not(PushResult::Pushed))) | None => {
            "push undecided: the remote's branches were not read".into()
        }
        Some(Err(why)) => format!("push undecided: the remote's branches cannot be read: {why}"),
    }
}

/// The push line of a branch's deletion, from what [`super::push::look`] found.
fn delete_line(would: Option<&Result<WouldPush, String>>) -> String {
    match would {
        Some(Ok(WouldPush::Write { from })) => format!(
            "delete: the remote's branch at {} (fanout's)",
            from.map_or("?".into(), |tip| short(&tip.to_string()).to_owned())
        ),
        Some(Ok(WouldPush::Not(PushResult::UpToDate))) => {
            "no delete: the remote has no such branch".into()
        }
        Some(Ok(WouldPush::Not(PushResult::Refused(why)))) => format!("no delete: {why}"),
        other => push_line(other).replacen("push", "delete", 1),
    }
}

/// Whether a pull request may follow the push `would` (pushed, or already there).
pub fn pushable(would: Option<&Result<WouldPush, String>>) -> bool {
    matches!(
        would,
        Some(Ok(
            WouldPush::Write { .. } | WouldPush::Not(PushResult::UpToDate)
        ))
    )
}

/// What a preview says when GitHub's state decides and there is no token to ask.
pub const NO_TOKEN: &str = "undecided: the pull requests on GitHub are read only with a token ($GITHUB_TOKEN or $GH_TOKEN)";

/// What a findings or digest preview says when an issue on GitHub decides and there
/// is no token to ask.
pub const NO_TOKEN_ISSUES: &str =
    "undecided: the issues on GitHub are read only with a token ($GITHUB_TOKEN or $GH_TOKEN)";

/// The previews as text, one block per worker, then the digest issue's line.
pub fn render(previews: &Previews) -> String {
    let mut text = String::new();
    for p in &previews.workers {
        let commit = p.commit.as_deref().map(short).unwrap_or("none");
        text.push_str(&format!(
            "worker {}  {}  commit {commit}\n",
            p.worker_id, p.branch
        ));
        text.push_str(&format!("  {}\n", p.push));
        text.push_str(&format!("  pull request: {}\n", p.pull_request));
        if !p.labels.is_empty() {
            text.push_str(&format!("  labels: {}\n", p.labels.join(", ")));
        }
        if let Some(title) = &p.title {
            text.push_str(&format!("  title: {title}\n"));
        }
        for (i, line) in p.body.iter().enumerate() {
            let head = if i == 0 { "body:" } else { "     " };
            text.push_str(&format!("  {head} {line}\n"));
        }
        if let Some(line) = &p.findings {
            text.push_str(&format!("  findings: {line}\n"));
        }
        for line in &p.also {
            text.push_str(&format!("  also: {line}\n"));
        }
    }
    if let Some(line) = &previews.digest {
        text.push_str(&format!("digest: {line}\n"));
    }
    text.push_str("dry run: nothing was pushed, opened, updated or closed\n");
    text
}
