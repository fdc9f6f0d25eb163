//! The GitHub REST client fanout needs, and nothing more: pull requests (find, list,
//! create, update, close, label, request reviewers), issue comments, and GitHub App
//! installation tokens.
//!
//! Requests go through octocrab's raw calls (`_get`, `_post`, `_patch`) so that fanout
//! sees every status and header: mutations are serialized and paced, rate limits are
//! honoured from the headers ([`retry`]), 5xx, dropped connections and requests left
//! unanswered past the request timeout are retried for idempotent requests (each
//! retry said at WARN: which request, attempt n of m, why, the wait), the whole
//! publish is bounded by a deadline ([`ApiError::Deadline`]), and a `POST` that creates a pull request is never blindly
//! re-sent after an ambiguous failure ([`ApiError::Ambiguous`]: the caller looks first).
//!
//! The API base comes from `GITHUB_API_URL` (GitHub Enterprise Server works), so tests
//! point the real client at a loopback fake.

pub mod auth;
pub mod reads;
pub mod retry;

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use octocrab::Octocrab;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use retry::RetryPolicy;

/// `owner/name` of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoSlug {
    /// Owner (user or organization).
    pub owner: String,
    /// Repository name.
    pub name: String,
}

impl RepoSlug {
    /// Parse `owner/name`.
    pub fn parse(s: &str) -> Option<RepoSlug> {
        let (owner, name) = s.trim().split_once('/')?;
        let name = name.strip_suffix(".git").unwrap_or(name);
        let ok = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        (ok(owner) && ok(name)).then(|| RepoSlug {
            owner: owner.to_owned(),
            name: name.to_owned(),
        })
    }

    /// From a remote URL: `https://github.com/o/r(.git)`, `git@github.com:o/r.git`,
    /// `ssh://git@host/o/r.git`.
    pub fn from_remote_url(url: &str) -> Option<RepoSlug> {
        let url = url.trim().trim_end_matches('/');
        let path = if let Some(rest) = url.split_once("://").map(|(_, r)| r) {
            rest.split_once('/')?.1
        } else if let Some((host, path)) = url.split_once(':') {
            if host.contains('/') {
                return None;
            }
            path
        } else {
            return None;
        };
        let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.len() < 2 {
            return None;
        }
        let name = parts.pop()?;
        let owner = parts.pop()?;
        RepoSlug::parse(&format!("{owner}/{name}"))
    }
}

impl std::fmt::Display for RepoSlug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// A pull request, as much as fanout reads of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its page.
    pub html_url: String,
    /// Title.
    pub title: String,
    /// Body.
    #[serde(default)]
    pub body: Option<String>,
    /// Whether it is a draft.
    #[serde(default)]
    pub draft: Option<bool>,
    /// `open` or `closed`.
    pub state: String,
    /// Head branch.
    pub head: BranchRef,
    /// Base branch.
    pub base: BranchRef,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// When it was merged (`None`: not merged).
    #[serde(default)]
    pub merged_at: Option<String>,
    /// Whether it merges cleanly into its base: only `pulls/get` says (`None`: not
    /// asked, or GitHub is still computing it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mergeable: Option<bool>,
    /// `clean`, `dirty` (conflicts), `behind`, `unstable`, `blocked`, `unknown`: only
    /// `pulls/get` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mergeable_state: Option<String>,
}

/// An issue, as much as fanout reads of it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Issue {
    /// Its number.
    pub number: u64,
    /// Title.
    #[serde(default)]
    pub title: String,
    /// Body.
    #[serde(default)]
    pub body: Option<String>,
    /// `open` or `closed`.
    #[serde(default)]
    pub state: String,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Present when the "issue" is a pull request.
    #[serde(default)]
    pub pull_request: Option<Value>,
}

/// `head` / `base` of a pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchRef {
    /// Branch name.
    #[serde(rename = "ref")]
    pub branch: String,
    /// Commit.
    pub sha: String,
    /// The repository the branch is in (`None`: GitHub gave none, as for a pull
    /// request whose fork was deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<RepoRef>,
}

/// The repository of a pull request's head or base, as much as fanout reads of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoRef {
    /// GitHub's id of the repository (kept across renames).
    pub id: u64,
}

impl PullRequest {
    /// Whether its head branch is in the repository it asks to merge into: never so
    /// for a pull request from a fork, which anyone may open, with any body (a
    /// marker included) and a head branch named as one of this repository's. Only
    /// such a pull request can be fanout's, and only its branch is fanout's to push
    /// to or delete.
    pub fn is_from_this_repository(&self) -> bool {
        matches!((&self.head.repo, &self.base.repo), (Some(h), Some(b)) if h.id == b.id)
    }
}

/// A label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// Its name.
    pub name: String,
}

/// What creating a pull request needs.
#[derive(Debug, Clone, Serialize)]
pub struct NewPull<'a> {
    /// Title.
    pub title: &'a str,
    /// Head branch (same repository).
    pub head: &'a str,
    /// Base branch.
    pub base: &'a str,
    /// Body.
    pub body: &'a str,
    /// Open as draft.
    pub draft: bool,
    /// Let maintainers push to the branch.
    pub maintainer_can_modify: bool,
}

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum ApiError {
    /// GitHub answered with an error status (after any retries).
    #[error("GitHub answered {status}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// GitHub's `message` (and the first error's `message`, if any).
        message: String,
    },
    /// A request that creates something failed in a way that leaves unknown whether
    /// it took effect (5xx, dropped connection): look before trying again.
    #[error("no clear answer from GitHub ({0}); it may or may not have taken effect")]
    Ambiguous(String),
    /// GitHub could not be reached.
    #[error("cannot reach GitHub: {0}")]
    Transport(String),
    /// The answer was not what the API describes.
    #[error("unexpected answer from GitHub: {0}")]
    Decode(String),
    /// Bad credentials or key.
    #[error("{0}")]
    Auth(String),
    /// The publish's deadline passed ([`RetryPolicy::total`]).
    #[error("{0}")]
    Deadline(String),
}

impl ApiError {
    /// Whether this failure will be every later request's too, so publishing stops
    /// asking (exit 4): GitHub cannot be reached, or it rejects the credentials (401,
    /// or a 403 other than a repository's refusal to let Actions create pull requests).
    pub fn stops_publishing(&self) -> bool {
        match self {
            ApiError::Transport(_) | ApiError::Auth(_) | ApiError::Deadline(_) => true,
            ApiError::Status { status: 401, .. } => true,
            ApiError::Status {
                status: 403,
                message,
            } => !message
                .to_ascii_lowercase()
                .contains("not permitted to create"),
            _ => false,
        }
    }
}

impl ApiError {
    /// The HTTP status, when GitHub answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The message, lower-cased, for matching GitHub's known error texts.
    pub fn message_lower(&self) -> String {
        self.to_string().to_ascii_lowercase()
    }
}

/// The client: one repository, paced and retried.
#[derive(Debug)]
pub struct GitHub {
    crab: Octocrab,
    repo: RepoSlug,
    policy: RetryPolicy,
    pace: Duration,
    /// Held for the whole of each mutation: serializes them, and remembers when the
    /// last one was sent and answered.
    mutation_gate: tokio::sync::Mutex<Option<Sent>>,
    /// The failure that stopped publishing ([`ApiError::stops_publishing`]): every
    /// later request fails with it without being sent.
    stopped: std::sync::Mutex<Option<ApiError>>,
    /// When publishing must be over: [`RetryPolicy::total`] after the client was made.
    deadline: Instant,
}

/// The last mutation any client of this process sent: a client made later (each
/// early publish of `publish.when: as-ready` connects anew, then the end-of-run
/// publish does) keeps the pace from it, so the server sees the pace between all of
/// this process's writes, not only within one client's.
static LAST_MUTATION: std::sync::Mutex<Option<Sent>> = std::sync::Mutex::new(None);

fn note_mutation(sent: Sent) {
    *LAST_MUTATION.lock().unwrap_or_else(|e| e.into_inner()) = Some(sent);
}

/// A mutation as the pacing sees it: when it was sent, how long its answer took.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sent {
    at: Instant,
    answered_after: Option<Duration>,
}

/// How much later than `pace` after the last mutation was sent the next may go, so
/// that the server sees at least `pace` between them whatever either took to reach
/// it: the last one's round trip (the server got it before its answer came back),
/// at most a tenth of `pace` (a slow answer mostly means a slow server, not a slow
/// way there). Without an answer (a transport error), the tenth.
fn pace_margin(pace: Duration, round_trip: Option<Duration>) -> Duration {
    let cap = pace / 10;
    round_trip.map_or(cap, |rtt| rtt.min(cap))
}

/// An answer from the API: its status, the headers that say when to retry, its body.
struct Answer {
    status: u16,
    retry_after: Option<String>,
    remaining: Option<String>,
    reset: Option<String>,
    /// Where a redirect points.
    location: Option<String>,
    text: String,
}

impl Answer {
    fn info(&self) -> retry::ResponseInfo<'_> {
        retry::ResponseInfo {
            status: self.status,
            retry_after: self.retry_after.as_deref(),
            remaining: self.remaining.as_deref(),
            reset: self.reset.as_deref(),
            body: &self.text,
        }
    }
}

/// A request that got no (whole) answer: why, and whether a retry is worth a warning.
struct Unanswered {
    what: String,
    warn: bool,
}

/// Seconds since the epoch (rate-limit resets are given in them).
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

enum Verb {
    Get,
    Post,
    Patch,
}

impl Verb {
    fn as_str(&self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Patch => "PATCH",
        }
    }
}

/// A duration as people write it (`2s`, `1m 30s`, `50ms`).
fn human(d: Duration) -> String {
    let millis = Duration::from_millis(d.as_millis() as u64);
    humantime::format_duration(millis).to_string()
}

impl GitHub {
    /// A client for `repo` over an authenticated octocrab.
    pub fn new(crab: Octocrab, repo: RepoSlug, policy: RetryPolicy, pace: Duration) -> GitHub {
        GitHub {
            crab,
            repo,
            deadline: Instant::now() + policy.total,
            policy,
            pace,
            mutation_gate: tokio::sync::Mutex::new(
                *LAST_MUTATION.lock().unwrap_or_else(|e| e.into_inner()),
            ),
            stopped: std::sync::Mutex::new(None),
        }
    }

    /// Why publishing stopped (GitHub unreachable, credentials rejected), if it did.
    pub fn stopped(&self) -> Option<ApiError> {
        self.stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One API request, retried as [`RetryPolicy`] says; after a failure that stops
    /// publishing, nothing more is sent.
    async fn request(
        &self,
        verb: Verb,
        path: &str,
        body: Option<&Value>,
        idempotent: bool,
    ) -> Result<Value, ApiError> {
        self.request_as(verb, path, body, idempotent, false).await
    }

    /// POST `payload` to `path` (under the repository) as an extra
    /// ([`request_as`](Self::request_as)); the answer is not read.
    async fn post_extra(
        &self,
        path: &str,
        payload: &Value,
        idempotent: bool,
    ) -> Result<(), ApiError> {
        let path = self.repo_path(path);
        self.request_as(Verb::Post, &path, Some(payload), idempotent, true)
            .await
            .map(drop)
    }

    /// [`request`](Self::request); an `extra` (labels, reviewers, comments, reviews,
    /// the digest and findings issues) refused with a 403 does not stop publishing: a
    /// token may open pull requests without being allowed to label them or to write
    /// issues.
    async fn request_as(
        &self,
        verb: Verb,
        path: &str,
        body: Option<&Value>,
        idempotent: bool,
        extra: bool,
    ) -> Result<Value, ApiError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let result = self.attempts(verb, path, body, idempotent).await;
        if let Err(e) = &result
            && e.stops_publishing()
            && !(extra && e.status() == Some(403))
        {
            let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
            stopped.get_or_insert_with(|| e.clone());
        }
        result
    }

    /// The repository.
    pub fn repo(&self) -> &RepoSlug {
        &self.repo
    }

    /// [`request`](Self::request)'s attempts: each within the request timeout and the
    /// publish's deadline, each retry said (which request, attempt n of m, why, the
    /// wait) and never begun past the deadline.
    async fn attempts(
        &self,
        verb: Verb,
        path: &str,
        body: Option<&Value>,
        idempotent: bool,
    ) -> Result<Value, ApiError> {
        let mutation = !matches!(verb, Verb::Get);
        let mut gate = if mutation {
            Some(self.mutation_gate.lock().await)
        } else {
            None
        };
        let request = format!("{} {path}", verb.as_str());
        let mut attempt = 0;
        loop {
            attempt += 1;
            if let Some(gate) = gate.as_mut() {
                self.keep_pace(gate).await;
            }
            let exchanged = self.exchange_in_time(&verb, path, body, &request).await?;
            if let Some(Some(sent)) = gate.as_deref_mut() {
                sent.answered_after = Some(sent.at.elapsed());
                note_mutation(*sent);
            }
            let answer = match exchanged {
                Ok(a) => a,
                Err(Unanswered { what, warn }) => {
                    if !idempotent {
                        return Err(ApiError::Ambiguous(what));
                    }
                    match self.policy.wait_after_transport_error(attempt) {
                        Some(wait) => {
                            self.retry_after(&request, attempt, &what, wait, warn)
                                .await?;
                            continue;
                        }
                        None => return Err(ApiError::Transport(what)),
                    }
                }
            };
            let status = answer.status;
            if (200..300).contains(&status) {
                if answer.text.trim().is_empty() {
                    return Ok(Value::Null);
                }
                return serde_json::from_str(&answer.text)
                    .map_err(|e| ApiError::Decode(format!("{path}: {e}")));
            }
            if !idempotent && status >= 500 {
                return Err(ApiError::Ambiguous(format!("HTTP {status}")));
            }
            let message = error_message(&answer.text);
            match self.policy.wait_after(&answer.info(), attempt, now_secs()) {
                Some(wait) => {
                    let why = format!("GitHub answered {status}: {message}");
                    self.retry_after(&request, attempt, &why, wait, true)
                        .await?;
                }
                None => return Err(ApiError::Status { status, message }),
            }
        }
    }

    /// Send one request, waiting for its answer at most the request timeout and never
    /// past the deadline (an `Err`: the deadline passed).
    async fn exchange_in_time(
        &self,
        verb: &Verb,
        path: &str,
        body: Option<&Value>,
        request: &str,
    ) -> Result<Result<Answer, Unanswered>, ApiError> {
        let limit = self.policy.request_timeout.min(self.time_left(request)?);
        match tokio::time::timeout(limit, self.exchange(verb, path, body)).await {
            Ok(answered) => Ok(answered),
            Err(_) => {
                self.time_left(request)?;
                Ok(Err(Unanswered {
                    what: format!("no answer within {}", human(limit)),
                    warn: true,
                }))
            }
        }
    }

    /// Time left before the deadline; an error naming it once it has passed.
    fn time_left(&self, request: &str) -> Result<Duration, ApiError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ApiError::Deadline(format!(
                "{}: {request} was still unanswered",
                self.deadline_text()
            )));
        }
        Ok(left)
    }

    fn deadline_text(&self) -> String {
        format!(
            "publishing did not finish within its deadline of {} (--publish-timeout, publish.timeout)",
            human(self.policy.total)
        )
    }

    /// Say what is retried and why, then wait `wait` — unless that passes the deadline.
    async fn retry_after(
        &self,
        request: &str,
        attempt: u32,
        why: &str,
        wait: Duration,
        warn: bool,
    ) -> Result<(), ApiError> {
        if Instant::now() + wait >= self.deadline {
            return Err(ApiError::Deadline(format!(
                "{}: {request} failed ({why}) and its next attempt, in {}, would be past it",
                self.deadline_text(),
                human(wait)
            )));
        }
        if warn {
            tracing::warn!(
                "GitHub: {request}: attempt {attempt} of {} failed ({why}); retrying in {}",
                self.policy.max_attempts,
                human(wait)
            );
        }
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Wait until `pace` (and a margin: [`pace_margin`]) after the last mutation was
    /// sent, and note this one.
    async fn keep_pace(&self, last: &mut Option<Sent>) {
        if let Some(last) = *last {
            let next = last.at + self.pace + pace_margin(self.pace, last.answered_after);
            let now = Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
        }
        let sent = Sent {
            at: Instant::now(),
            answered_after: None,
        };
        *last = Some(sent);
        note_mutation(sent);
    }

    /// Send one request and read its whole answer.
    async fn exchange(
        &self,
        verb: &Verb,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Unanswered> {
        let sent = match verb {
            Verb::Get => self.crab._get(path).await,
            Verb::Post => self.crab._post(path, body).await,
            Verb::Patch => self.crab._patch(path, body).await,
        };
        let response = sent.map_err(|e| Unanswered {
            what: first_line(&e),
            warn: true,
        })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (retry_after, remaining, reset, location) = (
            header("retry-after"),
            header("x-ratelimit-remaining"),
            header("x-ratelimit-reset"),
            header("location"),
        );
        let bytes = match response.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                return Err(Unanswered {
                    what: format!("reading the response: {e}"),
                    warn: false,
                });
            }
        };
        Ok(Answer {
            status,
            retry_after,
            remaining,
            reset,
            location,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    fn repo_path(&self, rest: &str) -> String {
        format!(
            "/repos/{}/{}{rest}",
            encode(&self.repo.owner),
            encode(&self.repo.name)
        )
    }

    /// The open pull request whose head is `branch` (in this repository) and whose base
    /// is `base`, if any.
    pub async fn find_open_pull(
        &self,
        branch: &str,
        base: &str,
    ) -> Result<Option<PullRequest>, ApiError> {
        let path = self.repo_path(&format!(
            "/pulls?state=open&head={}&base={}&per_page=100",
            encode(&format!("{}:{branch}", self.repo.owner)),
            encode(base)
        ));
        let v = self.request(Verb::Get, &path, None, true).await?;
        let pulls: Vec<PullRequest> =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("pulls: {e}")))?;
        Ok(pulls.into_iter().find(|p| p.head.branch == branch))
    }

    /// Every pull request (open or closed, newest first; the first 100) whose head is
    /// `branch` in this repository.
    pub async fn list_pulls(&self, branch: &str) -> Result<Vec<PullRequest>, ApiError> {
        let path = self.repo_path(&format!(
            "/pulls?state=all&head={}&sort=created&direction=desc&per_page=100",
            encode(&format!("{}:{branch}", self.repo.owner)),
        ));
        let v = self.request(Verb::Get, &path, None, true).await?;
        let pulls: Vec<PullRequest> =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("pulls: {e}")))?;
        Ok(pulls
            .into_iter()
            .filter(|p| p.head.branch == branch)
            .collect())
    }

    /// Change a pull request: `payload` is `pulls/update`'s body.
    async fn patch_pull(&self, number: u64, payload: Value) -> Result<PullRequest, ApiError> {
        let v = self
            .request(
                Verb::Patch,
                &self.repo_path(&format!("/pulls/{number}")),
                Some(&payload),
                true,
            )
            .await?;
        serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("pull request: {e}")))
    }

    /// Comment on an issue or pull request. Not retried after an ambiguous failure (a
    /// second comment would be a duplicate).
    pub async fn comment(&self, number: u64, body: &str) -> Result<(), ApiError> {
        let payload = serde_json::json!({ "body": body });
        self.post_extra(&format!("/issues/{number}/comments"), &payload, false)
            .await
    }

    /// Issues in `state` (`open`, `closed`) labelled `label` (the first 100, newest
    /// first), pull requests left out.
    pub async fn list_issues(&self, state: &str, label: &str) -> Result<Vec<Issue>, ApiError> {
        let path = self.repo_path(&format!(
            "/issues?state={state}&labels={}&sort=created&direction=desc&per_page=100",
            encode(label)
        ));
        let v = self.request_as(Verb::Get, &path, None, true, true).await?;
        let issues: Vec<Issue> =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("issues: {e}")))?;
        Ok(issues
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .collect())
    }

    /// Open an issue; returns its number. Not retried after an ambiguous failure.
    pub async fn create_issue(
        &self,
        title: &str,
        body: &str,
        labels: &[String],
    ) -> Result<u64, ApiError> {
        let payload = serde_json::json!({"title": title, "body": body, "labels": labels});
        let v = self
            .request_as(
                Verb::Post,
                &self.repo_path("/issues"),
                Some(&payload),
                false,
                true,
            )
            .await?;
        let issue: Issue =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("issue: {e}")))?;
        Ok(issue.number)
    }

    /// Replace an issue's body; returns its number.
    pub async fn update_issue(&self, number: u64, body: &str) -> Result<u64, ApiError> {
        let payload = serde_json::json!({ "body": body });
        let v = self
            .request_as(
                Verb::Patch,
                &self.repo_path(&format!("/issues/{number}")),
                Some(&payload),
                true,
                true,
            )
            .await?;
        let issue: Issue =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("issue: {e}")))?;
        Ok(issue.number)
    }

    /// Submit a review with `body` (a comment, neither approving nor requesting
    /// changes). Not retried after an ambiguous failure; a 403 does not stop
    /// publishing (an extra, like a comment).
    pub async fn review(&self, number: u64, body: &str) -> Result<(), ApiError> {
        let payload = serde_json::json!({"body": body, "event": "COMMENT"});
        self.post_extra(&format!("/pulls/{number}/reviews"), &payload, false)
            .await
    }

    /// Create a pull request. Not retried after an ambiguous failure.
    pub async fn create_pull(&self, new: &NewPull<'_>) -> Result<PullRequest, ApiError> {
        let body = serde_json::to_value(new).expect("serializes");
        let v = self
            .request(Verb::Post, &self.repo_path("/pulls"), Some(&body), false)
            .await?;
        serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("pull request: {e}")))
    }

    /// Update a pull request's title and body.
    pub async fn update_pull(
        &self,
        number: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ApiError> {
        self.patch_pull(number, serde_json::json!({"title": title, "body": body}))
            .await
    }

    /// Add labels to an issue or pull request.
    pub async fn add_labels(&self, number: u64, labels: &[String]) -> Result<(), ApiError> {
        let payload = serde_json::json!({ "labels": labels });
        self.post_extra(&format!("/issues/{number}/labels"), &payload, true)
            .await
    }

    /// Request reviews from users and teams.
    pub async fn request_reviewers(
        &self,
        number: u64,
        reviewers: &[String],
        team_reviewers: &[String],
    ) -> Result<(), ApiError> {
        let payload = serde_json::json!({
            "reviewers": reviewers,
            "team_reviewers": team_reviewers,
        });
        self.post_extra(
            &format!("/pulls/{number}/requested_reviewers"),
            &payload,
            true,
        )
        .await
    }
}

/// GitHub's error text: `message`, plus the first entry of `errors`.
fn error_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.chars().take(200).collect();
    };
    let mut msg = v
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if let Some(first) = v
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        let detail = first
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| first.as_str().map(str::to_owned))
            .or_else(|| first.get("code").and_then(Value::as_str).map(str::to_owned));
        if let Some(d) = detail {
            msg = if msg.is_empty() {
                d
            } else {
                format!("{msg}: {d}")
            };
        }
    }
    msg
}

/// The first line of an error (octocrab's can carry a backtrace after it).
fn first_line(e: &dyn std::fmt::Display) -> String {
    let said = e.to_string();
    said.lines().next().unwrap_or("error").to_owned()
}

/// Percent-encode a path segment or query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_made_later_keeps_the_pace_from_the_last_mutation_of_any_other() {
        let client = || {
            let crab = Octocrab::builder()
                .base_uri("http://127.0.0.1:9")
                .unwrap()
                .build()
                .unwrap();
            let slug = RepoSlug {
                owner: "o".into(),
                name: "r".into(),
            };
            GitHub::new(crab, slug, RetryPolicy::default(), Duration::ZERO)
        };
        let first = client();
        let mut gate = first.mutation_gate.lock().await;
        first.keep_pace(&mut gate).await;
        let sent = gate.expect("noted");
        drop(gate);
        // Other tests' clients may have sent since: never an older one, never none.
        let later = *client().mutation_gate.lock().await;
        assert!(later.is_some_and(|l| l.at >= sent.at), "{later:?} {sent:?}");
    }

    #[test]
    fn the_pace_margin_is_the_last_round_trip_at_most_a_tenth_of_the_pace() {
        let ms = Duration::from_millis;
        let pace = Duration::from_secs(1);
        assert_eq!(pace_margin(pace, Some(ms(3))), ms(3));
        assert_eq!(pace_margin(pace, Some(ms(700))), ms(100));
        assert_eq!(pace_margin(pace, None), ms(100));
        assert_eq!(pace_margin(Duration::ZERO, Some(ms(3))), Duration::ZERO);
    }

    #[test]
    fn slugs_from_urls() {
        let want = Some(RepoSlug {
            owner: "octo".into(),
            name: "repo".into(),
        });
        for url in [
            "https://github.com/octo/repo.git",
            "https://github.com/octo/repo",
            "git@github.com:octo/repo.git",
            "ssh://git@github.example.com/octo/repo.git",
            "https://x-access-token@ghe.example.com/octo/repo/",
        ] {
            assert_eq!(RepoSlug::from_remote_url(url), want, "{url}");
        }
        assert_eq!(RepoSlug::from_remote_url("/srv/git/remote.git"), None);
        assert_eq!(RepoSlug::parse("octo/repo"), want);
        assert_eq!(RepoSlug::parse("octo"), None);
        assert_eq!(RepoSlug::parse("oc to/repo"), None);
    }

    #[test]
    fn github_error_messages() {
        let body = r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for octo:b."}],"documentation_url":"x"}"#;
        assert_eq!(
            error_message(body),
            "Validation Failed: A pull request already exists for octo:b."
        );
        assert_eq!(error_message("<html>"), "<html>");
    }

    #[test]
    fn encoding() {
        assert_eq!(encode("octo:fanout/r1/w1-x"), "octo%3Afanout%2Fr1%2Fw1-x");
    }
}
