//! What fanout reads of GitHub around a night, besides a branch's pull requests: every
//! open pull request (to find its own by their markers: the cap on open pull requests,
//! stacks, tending), one pull request's mergeability, a commit's check runs and the
//! log of an Actions job, an issue; and the pull-request changes of the nightly
//! lifecycle (a new base, a close with a new body).
//!
//! A job's log is where GitHub redirects to (its log storage, another host): it is
//! fetched without the token, its tail only (`Range`), bounded.

use serde::Deserialize;

use super::{ApiError, GitHub, Issue, PullRequest, Verb, encode};

/// Most pages of open pull requests read (100 each).
const MAX_PAGES: u32 = 10;
/// Most bytes of a job's log read: its end.
pub const LOG_TAIL: usize = 64 * 1024;

/// A check run on a commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckRun {
    /// Its id (an Actions job's id too, for a check run of GitHub Actions).
    pub id: u64,
    /// Its name.
    pub name: String,
    /// `completed`, `in_progress`, …
    pub status: String,
    /// `success`, `failure`, `timed_out`, … (`None` until completed).
    #[serde(default)]
    pub conclusion: Option<String>,
    /// What it said.
    #[serde(default)]
    pub output: CheckOutput,
    /// The app that ran it (`github-actions` for a job).
    #[serde(default)]
    pub app: Option<CheckApp>,
}

/// A check run's output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CheckOutput {
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Summary.
    #[serde(default)]
    pub summary: Option<String>,
    /// Details.
    #[serde(default)]
    pub text: Option<String>,
}

/// The app behind a check run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckApp {
    /// Its slug.
    #[serde(default)]
    pub slug: Option<String>,
}

impl CheckRun {
    /// Whether it finished red: a failure, a timeout, or a start that failed.
    pub fn failed(&self) -> bool {
        self.status == "completed"
            && matches!(
                self.conclusion.as_deref(),
                Some("failure" | "timed_out" | "startup_failure")
            )
    }

    /// Whether it is an Actions job's (whose log can be read).
    pub fn is_actions_job(&self) -> bool {
        self.app
            .as_ref()
            .and_then(|a| a.slug.as_deref())
            .is_some_and(|s| s == "github-actions")
    }
}

/// An issue's state, as `issues/get` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueState {
    /// Open.
    pub open: bool,
    /// Its labels' names.
    pub labels: Vec<String>,
}

#[derive(Deserialize)]
struct CheckRuns {
    check_runs: Vec<CheckRun>,
}

impl GitHub {
    /// Every item of a listing, page by page (100 each, at most [`MAX_PAGES`]):
    /// `query` is the listing's path and query, `&page=N` added; `extra`: a 403 does
    /// not stop publishing.
    async fn every_page<T: serde::de::DeserializeOwned>(
        &self,
        query: &str,
        extra: bool,
    ) -> Result<Vec<T>, ApiError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let path = self.repo_path(&format!("{query}&per_page=100&page={page}"));
            let v = self.request_as(Verb::Get, &path, None, true, extra).await?;
            let items: Vec<T> =
                serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("{query}: {e}")))?;
            let last = items.len() < 100;
            all.extend(items);
            if last {
                break;
            }
        }
        Ok(all)
    }

    /// Every open pull request of the repository (the first 1000, newest first).
    pub async fn list_open_pulls(&self) -> Result<Vec<PullRequest>, ApiError> {
        self.every_page("/pulls?state=open&sort=created&direction=desc", false)
            .await
    }

    /// Open issues labelled `label` (the first 1000, oldest first), pull requests
    /// left out. An extra: a token without `issues: read` is refused here, not for
    /// publishing.
    pub async fn list_labelled_issues(&self, label: &str) -> Result<Vec<Issue>, ApiError> {
        let query = format!(
            "/issues?state=open&labels={}&sort=created&direction=asc",
            encode(label)
        );
        let all: Vec<Issue> = self.every_page(&query, true).await?;
        Ok(all
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .collect())
    }

    /// One pull request, with its mergeability.
    pub async fn pull_state(&self, number: u64) -> Result<PullRequest, ApiError> {
        let path = self.repo_path(&format!("/pulls/{number}"));
        let v = self.request(Verb::Get, &path, None, true).await?;
        serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("pull request: {e}")))
    }

    /// The check runs of commit `sha` (the latest of each, the first 100).
    pub async fn check_runs(&self, sha: &str) -> Result<Vec<CheckRun>, ApiError> {
        let path = self.repo_path(&format!(
            "/commits/{}/check-runs?filter=latest&per_page=100",
            encode(sha)
        ));
        // An extra: a token without `checks: read` is refused here, not for publishing.
        let v = self.request_as(Verb::Get, &path, None, true, true).await?;
        let runs: CheckRuns =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("check runs: {e}")))?;
        Ok(runs.check_runs)
    }

    /// An issue's state and labels.
    pub async fn issue_state(&self, number: u64) -> Result<IssueState, ApiError> {
        let path = self.repo_path(&format!("/issues/{number}"));
        let v = self.request_as(Verb::Get, &path, None, true, true).await?;
        let issue: Issue =
            serde_json::from_value(v).map_err(|e| ApiError::Decode(format!("issue: {e}")))?;
        Ok(IssueState {
            open: issue.state == "open",
            labels: issue.labels.into_iter().map(|l| l.name).collect(),
        })
    }

    /// The end of the log of Actions job `job` (at most [`LOG_TAIL`] bytes), or
    /// `None` when it has none (expired, not a job's check). The API redirects to the
    /// log's storage, which is read without the token.
    pub async fn job_log_tail(&self, job: u64) -> Result<Option<String>, ApiError> {
        if let Some(e) = self.stopped() {
            return Err(e);
        }
        let path = self.repo_path(&format!("/actions/jobs/{job}/logs"));
        let request = format!("GET {path}");
        let answer = match self
            .exchange_in_time(&Verb::Get, &path, None, &request)
            .await?
        {
            Ok(a) => a,
            Err(u) => return Err(ApiError::Transport(u.what)),
        };
        let location = match (answer.status, answer.location) {
            (300..=399, Some(l)) => l,
            (404 | 410, _) => return Ok(None),
            (status, _) => {
                return Err(ApiError::Status {
                    status,
                    message: super::error_message(&answer.text),
                });
            }
        };
        let limit = self.policy.request_timeout;
        let fetched = tokio::task::spawn_blocking(move || read_tail(&location));
        match tokio::time::timeout(limit, fetched).await {
            Ok(Ok(got)) => got.map(Some).map_err(ApiError::Transport),
            Ok(Err(_)) => Err(ApiError::Transport("reading a job's log failed".into())),
            Err(_) => Err(ApiError::Transport("a job's log: no answer in time".into())),
        }
    }

    /// Change a pull request's base branch.
    pub async fn retarget(&self, number: u64, base: &str) -> Result<PullRequest, ApiError> {
        self.patch_pull(number, serde_json::json!({ "base": base }))
            .await
    }

    /// Close a pull request, its body replaced by `body` in the same request.
    pub async fn close_with_body(&self, number: u64, body: &str) -> Result<PullRequest, ApiError> {
        self.patch_pull(
            number,
            serde_json::json!({ "state": "closed", "body": body }),
        )
        .await
    }

    /// Replace a pull request's body.
    pub async fn set_pull_body(&self, number: u64, body: &str) -> Result<PullRequest, ApiError> {
        self.patch_pull(number, serde_json::json!({ "body": body }))
            .await
    }
}

/// The last [`LOG_TAIL`] bytes of the text at `url` (asked with a `Range`; a server
/// that sends it all is read up to 16 times that, and its end kept), without
/// credentials.
fn read_tail(url: &str) -> Result<String, String> {
    use std::io::Read;
    let agent = crate::publish::smart_http::agent_for(url)?;
    let response = agent
        .get(url)
        .header("Range", format!("bytes=-{LOG_TAIL}"))
        .call()
        .map_err(|e| format!("a job's log: {e}"))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(format!("a job's log: the log store answered {status}"));
    }
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take((LOG_TAIL * 16) as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("a job's log: {e}"))?;
    let start = bytes.len().saturating_sub(LOG_TAIL);
    Ok(String::from_utf8_lossy(&bytes[start..]).into_owned())
}
