//! A loopback fake of the GitHub REST API, checked against GitHub's official
//! OpenAPI description.
//!
//! The fake serves the handful of operations fanout uses to publish pull
//! requests (see `tests/openapi/regenerate.sh` for the list). Every request it
//! receives is matched against `tests/openapi/github-trimmed.json` (path
//! template, method, path/query parameters, JSON request body); anything that
//! does not match is recorded in [`FakeGitHub::violations`] and answered with
//! HTTP 422. Every response the fake itself sends is validated against the
//! response schema of the operation too, so bugs in the fake show up as
//! violations as well. Tests should end with [`FakeGitHub::assert_no_violations`].
//!
//! A GitHub App's installation token works only as far as it was asked for, as on
//! GitHub: on the repositories its request named (404 elsewhere), and for writes its
//! permissions allow (403 "Resource not accessible by integration": an issue needs
//! `issues: write`, a pull request or a label or comment on one `pull_requests: write`).
//!
//! The server runs on its own thread with its own tokio runtime, so it can be
//! used from synchronous tests, and is shut down when the [`FakeGitHub`] value
//! is dropped. It only ever binds `127.0.0.1`.
//!
//! Include it with `#[allow(dead_code)]` (or from a module that allows it):
//! not every test binary uses every helper.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

#[path = "openapi.rs"]
pub mod openapi;
use openapi::{Operation, Spec, parse_query};

/// The trimmed OpenAPI description (see `tests/openapi/regenerate.sh`).
const SPEC_JSON: &str = include_str!("../openapi/github-trimmed.json");

/// The id of the (single) GitHub App installation the fake knows about.
pub const INSTALLATION_ID: u64 = 4242;

/// Allowed clock skew for JWT `iat`/`exp` checks, in seconds.
const JWT_LEEWAY_SECS: u64 = 60;
/// GitHub rejects app JWTs that expire more than ten minutes from now.
const JWT_MAX_LIFETIME_SECS: u64 = 600;

const DOCS_REST: &str = "https://docs.github.com/rest";
const DOCS_CREATE_PR: &str = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request";
const DOCS_UPDATE_PR: &str = "https://docs.github.com/rest/pulls/pulls#update-a-pull-request";
const DOCS_PRIMARY_RATE_LIMIT: &str = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-the-primary-rate-limit";
const DOCS_SECONDARY_RATE_LIMIT: &str = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits";

const RATE_LIMIT: u64 = 5000;

/// Where the fake serves job logs: the redirect of `actions/download-job-logs-for-workflow-run`
/// points here (GitHub's points to its log storage, another host), outside the API.
const LOG_STORE: &str = "/_fake/job-logs/";

// ---------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------

/// What an injected fault does to the request it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer with this status and a GitHub-style JSON error body.
    Status(u16),
    /// 403 with `retry-after` and GitHub's secondary-rate-limit message.
    SecondaryRateLimit { retry_after_secs: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` = now + n.
    PrimaryRateLimit { reset_in_secs: u64 },
    /// 429 with `retry-after`.
    TooManyRequests { retry_after_secs: u64 },
    /// Perform the operation (e.g. really create the PR), then close the TCP
    /// connection without sending a response.
    DropAfterProcessing,
    /// 422 "Draft pull requests are not supported in this repository." — only
    /// matches (and is only consumed by) a `pulls/create` whose body has
    /// `draft: true`.
    DraftNotSupported,
    /// Answer a `pulls/list` as if no pull request were open (simulates a PR
    /// opened by someone else right after the lookup). Only matches (and is
    /// only consumed by) `pulls/list` requests.
    HideOpenPulls,
    /// 403 "GitHub Actions is not permitted to create or approve pull requests."
    ActionsCannotCreatePr,
}

/// A fault to inject. Faults are matched in the order they were injected;
/// each match consumes one of `times`, and the fault is removed at zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// HTTP method to match (case-insensitive); empty matches any method.
    pub method: String,
    /// Substring the request path (without query) must contain; empty matches
    /// any path.
    pub path_contains: String,
    pub kind: FaultKind,
    /// How many matching requests this fault applies to.
    pub times: u32,
}

impl Fault {
    /// A fault that applies once to `method` requests whose path contains
    /// `path_contains`.
    pub fn new(method: &str, path_contains: &str, kind: FaultKind) -> Fault {
        Fault {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            kind,
            times: 1,
        }
    }

    /// Apply the fault to `n` matching requests instead of one.
    pub fn times(mut self, n: u32) -> Fault {
        self.times = n;
        self
    }
}

/// A request the fake received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Upper-case method, e.g. `POST`.
    pub method: String,
    /// Percent-encoded path as sent, without the query.
    pub path: String,
    /// Decoded query parameters (last one wins on duplicates).
    pub query: BTreeMap<String, String>,
    /// The raw query string, if any.
    pub raw_query: Option<String>,
    /// Headers with lower-case names; repeated headers are joined with ", ".
    pub headers: BTreeMap<String, String>,
    /// The JSON body; `Null` when empty, a `String` when it is not JSON.
    pub body: Value,
    /// The operationId the request matched, if any.
    pub operation_id: Option<String>,
    /// The status the fake answered with; `None` when it dropped the connection.
    pub status: Option<u16>,
    /// When the request was received.
    pub at: Instant,
}

/// A pull request held by the fake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    /// `"open"` or `"closed"`.
    pub state: String,
    /// Owner part of the head (`owner:branch`); the repo owner when the create
    /// request gave a bare branch name.
    pub head_owner: String,
    pub head_ref: String,
    pub head_sha: String,
    pub base_ref: String,
    pub title: String,
    pub body: Option<String>,
    pub draft: bool,
    pub maintainer_can_modify: bool,
    pub labels: Vec<String>,
    pub requested_reviewers: Vec<String>,
    pub requested_teams: Vec<String>,
    /// `https://github.com/{owner}/{repo}/pull/{number}`.
    pub html_url: String,
    /// Unix seconds.
    pub created_at: u64,
    pub updated_at: u64,
    pub closed_at: Option<u64>,
    /// Merged (then also `closed`).
    pub merged: bool,
}

/// An issue held by the fake (pull requests are kept apart, in `pulls`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    /// `"open"` or `"closed"`.
    pub state: String,
    pub title: String,
    pub body: Option<String>,
    pub labels: Vec<String>,
    pub created_at: u64,
    pub updated_at: u64,
}

/// A comment on an issue or pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    /// The issue's or pull request's number.
    pub number: u64,
    pub body: String,
}

/// A check run on a commit (`checks/list-for-ref`), with the log of its job when
/// it stands for one of GitHub Actions (`actions/download-job-logs-for-workflow-run`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    /// Also the id of its Actions job.
    pub id: u64,
    pub head_sha: String,
    pub name: String,
    /// `completed`, `in_progress`, `queued`.
    pub status: String,
    /// `success`, `failure`, `timed_out`, …; `None` while not completed.
    pub conclusion: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub text: Option<String>,
    /// `github-actions` for a job's check run; its log is then served.
    pub app_slug: String,
    pub log: Option<String>,
}

/// A review submitted on a pull request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub pull_number: u64,
    pub body: String,
    /// `COMMENT`, `APPROVE`, `REQUEST_CHANGES`, or empty (pending).
    pub event: String,
}

/// Handle to a running fake GitHub server.
pub struct FakeGitHub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeGitHub {
    /// Starts a fake for the repository `owner/repo` on `127.0.0.1:<free port>`.
    pub fn start(owner: &str, repo: &str) -> FakeGitHub {
        // Compile the spec here so that a broken spec fails the test thread.
        let _ = spec();
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("fake GitHub: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("fake GitHub: set_nonblocking");
        let addr = listener.local_addr().expect("fake GitHub: local_addr");
        let state = Arc::new(Mutex::new(State::new(
            owner,
            repo,
            format!("http://{addr}"),
            addr.port(),
        )));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server_state = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("fake-github-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake GitHub: tokio runtime");
                runtime.block_on(serve(listener, server_state, rx));
            })
            .expect("fake GitHub: spawn server thread");
        FakeGitHub {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// Base URL, e.g. `http://127.0.0.1:40123` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The personal access token `/repos/...` calls must present
    /// (`Authorization: Bearer <token>` or `token <token>`).
    pub fn set_token(&self, token: &str) {
        self.lock().token = Some(token.to_string());
    }

    /// Configures the GitHub App whose RS256 JWTs the app endpoints accept.
    pub fn set_app(&self, app_id: u64, public_key_pem: &str) {
        let key = jsonwebtoken::DecodingKey::from_rsa_pem(public_key_pem.as_bytes())
            .expect("fake GitHub: set_app needs an RSA public key in PEM form");
        self.lock().app = Some(App { id: app_id, key });
    }

    /// Whether `token` is the configured PAT or an installation token the fake
    /// issued.
    pub fn accepts_token(&self, token: &str) -> bool {
        self.lock().accepts_token(token)
    }

    /// Installation tokens issued so far, oldest first.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.lock().installation_tokens.clone()
    }

    /// Queues a fault (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// Faults not yet (fully) consumed.
    pub fn pending_faults(&self) -> Vec<Fault> {
        self.lock().faults.clone()
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// The requests after the first `from` that are not reads, as `METHOD path`.
    pub fn writes_since(&self, from: usize) -> Vec<String> {
        self.lock().requests[from..]
            .iter()
            .filter(|r| r.method != "GET")
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// Spec violations seen so far (by requests, or by the fake's own responses).
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// Request-body properties the operation does not define. The OpenAPI
    /// schemas allow them (and GitHub ignores them), so by default they are
    /// only collected here, not treated as violations — octocrab 0.54, for one,
    /// sends `pull_number` in the body of `pulls/update`.
    pub fn unknown_body_properties(&self) -> Vec<String> {
        self.lock().unknown_properties.clone()
    }

    /// When `true`, unknown request-body properties are violations (answered
    /// with 422) instead of being collected in [`Self::unknown_body_properties`].
    pub fn set_strict_bodies(&self, strict: bool) {
        self.lock().strict_bodies = strict;
    }

    /// Panics, listing them, if any violation was recorded.
    #[track_caller]
    pub fn assert_no_violations(&self) {
        let violations = self.violations();
        assert!(
            violations.is_empty(),
            "the fake GitHub recorded {} OpenAPI violation(s):\n  {}",
            violations.len(),
            violations.join("\n  ")
        );
    }

    /// Current pull requests, by number.
    pub fn pulls(&self) -> Vec<PullRequest> {
        self.lock().pulls.clone()
    }

    /// Seeds an open pull request as if created earlier; returns its number.
    /// `head` is `branch` or `owner:branch`.
    pub fn add_pull(&self, head: &str, base: &str, title: &str) -> u64 {
        let mut state = self.lock();
        let (head_owner, head_ref) = state.split_head(head);
        state.insert_pull(
            head_owner,
            head_ref,
            base,
            title,
            None,
            false,
            true,
            now_secs(),
        )
    }

    /// Retitles a pull request as a person would in the web interface.
    pub fn set_pull_title(&self, number: u64, title: &str) {
        self.edit_pull(number, |pr| pr.title = title.into());
    }

    /// Rewrites a pull request's body as its author would.
    pub fn set_pull_body(&self, number: u64, body: &str) {
        self.edit_pull(number, |pr| pr.body = Some(body.into()));
    }

    fn edit_pull(&self, number: u64, edit: impl FnOnce(&mut PullRequest)) {
        let mut state = self.lock();
        edit(
            state
                .pulls
                .iter_mut()
                .find(|p| p.number == number)
                .expect("a pull request"),
        );
    }

    /// Closes a pull request as a human would (without merging).
    pub fn close_pull(&self, number: u64) {
        self.edit_pull(number, |pr| {
            pr.state = "closed".into();
            pr.closed_at = Some(now_secs());
        });
    }

    /// Merges a pull request (its state becomes `closed`, `merged_at` is set); with a
    /// repository behind the fake ([`set_git_dir`](Self::set_git_dir)), its head is
    /// merged into its base there.
    pub fn merge_pull(&self, number: u64) {
        {
            let state = self.lock();
            let pr = state.find_pull(number).expect("a pull request").clone();
            state.merge_in_git(&pr);
        }
        self.close_pull(number);
        self.edit_pull(number, |pr| pr.merged = true);
    }

    /// A human closes issue `number`.
    pub fn close_issue(&self, number: u64) {
        self.edit_issue(number, |i| i.state = "closed".into());
    }

    fn edit_issue(&self, number: u64, edit: impl FnOnce(&mut Issue)) {
        let mut s = self.lock();
        edit(
            s.issues
                .iter_mut()
                .find(|i| i.number == number)
                .expect("an issue"),
        );
    }

    /// Current issues (pull requests not included).
    pub fn issues(&self) -> Vec<Issue> {
        self.lock().issues.clone()
    }

    /// Someone opens an issue with these labels; returns its number.
    pub fn add_issue(&self, title: &str, body: &str, labels: &[&str]) -> u64 {
        let mut s = self.lock();
        let number = s.next_number();
        let now = now_secs();
        s.issues.push(Issue {
            number,
            state: "open".into(),
            title: title.into(),
            body: Some(body.into()),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            created_at: now,
            updated_at: now,
        });
        number
    }

    /// Someone sets issue `number`'s labels.
    pub fn set_issue_labels(&self, number: u64, labels: &[&str]) {
        self.edit_issue(number, |i| {
            i.labels = labels.iter().map(|l| (*l).to_owned()).collect()
        });
    }

    /// The repository behind the fake, a bare git repository: with it, a pull
    /// request's `head.sha` and `base.sha` are its branches' tips, `pulls/get` says
    /// whether it merges cleanly (`mergeable`, by `git merge-tree`), and
    /// [`merge_pull`](Self::merge_pull) merges it there as GitHub would.
    pub fn set_git_dir(&self, dir: &std::path::Path) {
        self.lock().git_dir = Some(dir.to_owned());
    }

    /// Branch protection's "require branches to be up to date before merging": a
    /// pull request that merges cleanly but whose head lacks its base's tip is
    /// `mergeable_state: behind`.
    pub fn require_up_to_date(&self) {
        self.lock().up_to_date_required = true;
    }

    /// A check run finished on `head_sha` with `conclusion`, as a GitHub Actions
    /// job whose log is `log` (or another app's check, without a log, when `None`).
    /// Returns its id (the job's id too).
    pub fn add_check_run(
        &self,
        head_sha: &str,
        name: &str,
        conclusion: &str,
        summary: &str,
        log: Option<&str>,
    ) -> u64 {
        let mut s = self.lock();
        let id = 9000 + s.check_runs.len() as u64 + 1;
        s.check_runs.push(CheckRun {
            id,
            head_sha: head_sha.into(),
            name: name.into(),
            status: "completed".into(),
            conclusion: Some(conclusion.into()),
            title: Some(format!("{name}: {conclusion}")),
            summary: Some(summary.into()),
            text: None,
            app_slug: if log.is_some() {
                "github-actions".into()
            } else {
                "octoapp".into()
            },
            log: log.map(str::to_owned),
        });
        id
    }

    /// Comments posted so far, oldest first.
    pub fn comments(&self) -> Vec<Comment> {
        self.lock().comments.clone()
    }

    /// Reviews submitted so far, oldest first.
    pub fn reviews(&self) -> Vec<Review> {
        self.lock().reviews.clone()
    }

    /// Times at which POST and PATCH requests were received, in order.
    pub fn mutation_times(&self) -> Vec<Instant> {
        self.lock().mutation_times.clone()
    }

    pub fn installation_id(&self) -> u64 {
        INSTALLATION_ID
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Validates `body` against the response schema the spec documents for
/// `operation_id` and `status`; returns the violations (empty when valid).
/// Statuses the operation does not document are checked against `basic-error`.
pub fn validate_response_against_spec(
    operation_id: &str,
    status: u16,
    body: &Value,
) -> Vec<String> {
    match spec().operations.iter().find(|op| op.id == operation_id) {
        Some(op) => spec().check_response(op, status, body),
        None => vec![format!("no operation `{operation_id}` in the trimmed spec")],
    }
}

/// A `components/examples` value from the trimmed spec, as published.
pub fn spec_example(name: &str) -> Value {
    spec().examples[name]["value"].clone()
}

fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| Spec::load(SPEC_JSON, "tests/openapi/github-trimmed.json"))
}

// ---------------------------------------------------------------------------
// HTTP server
// ---------------------------------------------------------------------------

/// Returned by the service to make hyper close the connection unanswered.
#[derive(Debug)]
struct DropConnection;

impl fmt::Display for DropConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("fake GitHub dropped the connection on purpose")
    }
}

impl std::error::Error for DropConnection {}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let listener =
        tokio::net::TcpListener::from_std(listener).expect("fake GitHub: tokio listener");
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let service = service_fn(move |request| handle(Arc::clone(&state), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

async fn handle(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, DropConnection> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let reply = lock(&state).handle(&parts, &body);
    if reply.drop_connection {
        return Err(DropConnection);
    }
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let bytes = match reply.raw {
        Some(raw) => raw,
        None => serde_json::to_vec(&reply.body).expect("serialize JSON"),
    };
    Ok(builder
        .body(Full::new(Bytes::from(bytes)))
        .expect("valid response"))
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------
// State and behaviour
// ---------------------------------------------------------------------------

struct App {
    id: u64,
    key: jsonwebtoken::DecodingKey,
}

/// What an installation token was asked for.
struct TokenScope {
    repositories: Option<Vec<String>>,
    permissions: serde_json::Map<String, Value>,
}

struct State {
    owner: String,
    repo: String,
    base_url: String,
    port: u16,
    token: Option<String>,
    app: Option<App>,
    installation_tokens: Vec<String>,
    /// What each installation token was asked for: its repositories (`None`: every
    /// repository of the installation) and permissions.
    token_scopes: BTreeMap<String, TokenScope>,
    pulls: Vec<PullRequest>,
    issues: Vec<Issue>,
    comments: Vec<Comment>,
    reviews: Vec<Review>,
    faults: Vec<Fault>,
    requests: Vec<RecordedRequest>,
    violations: Vec<String>,
    unknown_properties: Vec<String>,
    strict_bodies: bool,
    mutation_times: Vec<Instant>,
    counter: u64,
    git_dir: Option<std::path::PathBuf>,
    check_runs: Vec<CheckRun>,
    up_to_date_required: bool,
}

struct Reply {
    status: u16,
    body: Value,
    /// Sent instead of `body` when set (a job's log is text, not JSON).
    raw: Option<Vec<u8>>,
    headers: Vec<(String, String)>,
    drop_connection: bool,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body,
            raw: None,
            headers: Vec::new(),
            drop_connection: false,
        }
    }

    fn text(status: u16, text: &str) -> Reply {
        Reply {
            raw: Some(text.as_bytes().to_vec()),
            ..Reply::json(status, Value::Null)
        }
        .header("content-type", "text/plain; charset=utf-8")
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Reply {
        self.headers.retain(|(n, _)| n != name);
        self.headers.push((name.to_string(), value.into()));
        self
    }

    fn error(status: u16, message: &str, documentation_url: &str) -> Reply {
        let mut body = json!({"message": message, "documentation_url": documentation_url});
        if status >= 400 {
            body["status"] = json!(status.to_string());
        }
        Reply::json(status, body)
    }

    fn not_found(documentation_url: &str) -> Reply {
        Reply::error(404, "Not Found", documentation_url)
    }

    fn validation_failed(errors: Value, documentation_url: &str) -> Reply {
        Reply::json(
            422,
            json!({
                "message": "Validation Failed",
                "errors": errors,
                "documentation_url": documentation_url,
                "status": "422",
            }),
        )
    }
}

/// Everything `State::dispatch` needs to know about one request.
struct Call<'a> {
    op: &'a Operation,
    path_params: BTreeMap<String, String>,
    query: BTreeMap<String, String>,
    body: Value,
    now: u64,
    /// Set by [`FaultKind::HideOpenPulls`].
    hide_open_pulls: bool,
}

impl State {
    fn new(owner: &str, repo: &str, base_url: String, port: u16) -> State {
        State {
            owner: owner.to_string(),
            repo: repo.to_string(),
            base_url,
            port,
            token: None,
            app: None,
            installation_tokens: Vec::new(),
            token_scopes: BTreeMap::new(),
            pulls: Vec::new(),
            issues: Vec::new(),
            comments: Vec::new(),
            reviews: Vec::new(),
            faults: Vec::new(),
            requests: Vec::new(),
            violations: Vec::new(),
            unknown_properties: Vec::new(),
            strict_bodies: false,
            mutation_times: Vec::new(),
            counter: 0,
            git_dir: None,
            check_runs: Vec::new(),
            up_to_date_required: false,
        }
    }

    fn accepts_token(&self, token: &str) -> bool {
        self.token.as_deref() == Some(token) || self.installation_tokens.iter().any(|t| t == token)
    }

    fn handle(&mut self, parts: &hyper::http::request::Parts, raw_body: &[u8]) -> Reply {
        let at = Instant::now();
        let now = now_secs();
        self.counter += 1;
        let request_id = format!(
            "F4KE:{:04X}:{:06X}:{:07X}:{:08X}",
            self.port,
            self.counter,
            self.counter * 7919,
            now & 0xFFFF_FFFF
        );
        let method = parts.method.as_str().to_uppercase();
        if method == "POST" || method == "PATCH" {
            self.mutation_times.push(at);
        }
        let path = parts.uri.path().to_string();
        let raw_query = parts.uri.query().map(str::to_string);
        let query_pairs = parse_query(raw_query.as_deref().unwrap_or(""));
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in &parts.headers {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_string())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let body_value = if raw_body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(raw_body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw_body).into_owned()))
        };

        let mut operation_id = None;
        let mut reply = if let Some(id) = path.strip_prefix(LOG_STORE) {
            self.serve_log(id, &headers)
        } else {
            self.route(
                &method,
                &path,
                &query_pairs,
                &headers,
                raw_body,
                &body_value,
                now,
                &request_id,
                &mut operation_id,
            )
        };

        let mut response_headers = vec![
            (
                "content-type".to_string(),
                "application/json; charset=utf-8".to_string(),
            ),
            ("x-ratelimit-limit".into(), RATE_LIMIT.to_string()),
            (
                "x-ratelimit-remaining".into(),
                RATE_LIMIT.saturating_sub(self.counter).to_string(),
            ),
            ("x-ratelimit-reset".into(), (now + 3600).to_string()),
            ("x-ratelimit-used".into(), self.counter.to_string()),
            ("x-ratelimit-resource".into(), "core".into()),
            ("x-github-request-id".into(), request_id),
            ("x-github-api-version-selected".into(), "2022-11-28".into()),
        ];
        for (name, value) in std::mem::take(&mut reply.headers) {
            response_headers.retain(|(n, _)| *n != name);
            response_headers.push((name, value));
        }
        reply.headers = response_headers;

        self.requests.push(RecordedRequest {
            method,
            path,
            query: query_pairs.into_iter().collect(),
            raw_query,
            headers,
            body: body_value,
            operation_id,
            status: (!reply.drop_connection).then_some(reply.status),
            at,
        });
        reply
    }

    /// An API request: matched against the spec, authorized, answered.
    #[allow(clippy::too_many_arguments)]
    fn route(
        &mut self,
        method: &str,
        path: &str,
        query_pairs: &[(String, String)],
        headers: &BTreeMap<String, String>,
        raw_body: &[u8],
        body_value: &Value,
        now: u64,
        request_id: &str,
        operation_id: &mut Option<String>,
    ) -> Reply {
        match spec().route(method, path) {
            Err(violation) => {
                self.violations.push(violation.clone());
                violation_reply(std::slice::from_ref(&violation))
            }
            Ok((op, path_params)) => {
                *operation_id = Some(op.id.clone());
                let check = spec().check_request(
                    op,
                    &path_params,
                    query_pairs,
                    headers.get("content-type").map(String::as_str),
                    raw_body,
                );
                let label = |p: String| format!("{method} {path} ({}): {p}", op.id);
                let mut problems: Vec<String> = check.violations.into_iter().map(label).collect();
                let unknown: Vec<String> =
                    check.unknown_properties.into_iter().map(label).collect();
                if self.strict_bodies {
                    problems.extend(unknown);
                } else {
                    self.unknown_properties.extend(unknown);
                }
                let reply = if problems.is_empty() {
                    let mut call = Call {
                        op,
                        path_params,
                        query: query_pairs.iter().cloned().collect(),
                        body: body_value.clone(),
                        now,
                        hide_open_pulls: false,
                    };
                    self.authorize_and_dispatch(method, path, headers, &mut call, request_id)
                } else {
                    self.violations.extend(problems.iter().cloned());
                    violation_reply(&problems)
                };
                for problem in spec().check_response(op, reply.status, &reply.body) {
                    self.violations.push(format!(
                        "fake GitHub bug: {} response {} to {method} {path} does not match the spec: {problem}",
                        op.id, reply.status
                    ));
                }
                reply
            }
        }
    }

    /// A job's log, as GitHub's log storage serves it at the address the logs API
    /// redirects to: plain text, no token wanted (one sent is a violation: fanout
    /// must not hand its token to another host).
    fn serve_log(&mut self, id: &str, headers: &BTreeMap<String, String>) -> Reply {
        if headers.contains_key("authorization") {
            self.violations.push(format!(
                "GET {LOG_STORE}{id}: the log storage was sent an Authorization header"
            ));
        }
        let log = id
            .parse::<u64>()
            .ok()
            .and_then(|id| self.check_runs.iter().find(|c| c.id == id))
            .and_then(|c| c.log.clone());
        match log {
            Some(text) => Reply::text(200, &text),
            None => Reply::text(404, "no such log"),
        }
    }

    fn authorize_and_dispatch(
        &mut self,
        method: &str,
        path: &str,
        headers: &BTreeMap<String, String>,
        call: &mut Call<'_>,
        request_id: &str,
    ) -> Reply {
        let authorization = headers.get("authorization").map(String::as_str);
        let needs_jwt = matches!(
            call.op.id.as_str(),
            "apps/get-repo-installation" | "apps/create-installation-access-token"
        );
        let auth = if needs_jwt {
            self.check_jwt(authorization, call.now)
        } else {
            self.check_token(authorization)
        };
        if let Err(message) = auth {
            return Reply::error(401, &message, DOCS_REST);
        }
        if let (Some(owner), Some(repo)) =
            (call.path_params.get("owner"), call.path_params.get("repo"))
            && (!owner.eq_ignore_ascii_case(&self.owner) || !repo.eq_ignore_ascii_case(&self.repo))
        {
            return Reply::not_found(DOCS_REST);
        }
        if !needs_jwt && let Some(reply) = self.check_scope(authorization, method, call) {
            return reply;
        }

        let mut drop_connection = false;
        let draft = call.body.get("draft") == Some(&Value::Bool(true));
        let op_id = call.op.id.as_str();
        let fault = self.faults.iter().position(|f| {
            f.times > 0
                && (f.method.is_empty() || f.method.eq_ignore_ascii_case(method))
                && path.contains(&f.path_contains)
                && match f.kind {
                    FaultKind::DraftNotSupported => op_id == "pulls/create" && draft,
                    FaultKind::HideOpenPulls => op_id == "pulls/list",
                    _ => true,
                }
        });
        if let Some(index) = fault {
            let kind = self.faults[index].kind.clone();
            self.faults[index].times -= 1;
            if self.faults[index].times == 0 {
                self.faults.remove(index);
            }
            match kind {
                FaultKind::DropAfterProcessing => drop_connection = true,
                FaultKind::HideOpenPulls => call.hide_open_pulls = true,
                _ => {
                    if let Some(reply) = fault_reply(&kind, call.now, request_id) {
                        return reply;
                    }
                }
            }
        }

        let mut reply = self.dispatch(call);
        reply.drop_connection = drop_connection;
        reply
    }

    /// An installation token used beyond what it was asked for: a repository it was
    /// not asked for (404, as GitHub answers), or a write its permissions do not
    /// allow (403 "Resource not accessible by integration"). Writing an issue needs
    /// `issues: write`; a comment or label on a pull request, `pull_requests: write`
    /// too.
    fn check_scope(
        &self,
        authorization: Option<&str>,
        method: &str,
        call: &Call<'_>,
    ) -> Option<Reply> {
        let token = authorization?.split_once(' ')?.1.trim();
        let scope = self.token_scopes.get(token)?;
        if let Some(repos) = &scope.repositories
            && let Some(repo) = call.path_params.get("repo")
            && !repos.iter().any(|r| r.eq_ignore_ascii_case(repo))
        {
            return Some(Reply::not_found(DOCS_REST));
        }
        if method.eq_ignore_ascii_case("GET") {
            return None;
        }
        let op = call.op.id.as_str();
        let on_pull = call
            .path_params
            .get("issue_number")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| self.find_pull(n).is_some());
        let needed = match op {
            _ if op.starts_with("pulls/") => "pull_requests",
            "issues/create" => "issues",
            _ if op.starts_with("issues/") && on_pull => "pull_requests",
            _ if op.starts_with("issues/") => "issues",
            _ => return None,
        };
        let allowed = scope.permissions.get(needed).and_then(Value::as_str) == Some("write")
            || needed == "pull_requests"
                && on_pull
                && scope.permissions.get("issues").and_then(Value::as_str) == Some("write");
        (!allowed).then(|| {
            Reply::error(
                403,
                "Resource not accessible by integration",
                "https://docs.github.com/rest/overview/permissions-required-for-github-apps",
            )
        })
    }

    fn check_token(&self, authorization: Option<&str>) -> Result<(), String> {
        let Some(authorization) = authorization else {
            return Err("Requires authentication".into());
        };
        let token = authorization.split_once(' ').and_then(|(scheme, token)| {
            (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
                .then_some(token.trim())
        });
        match token {
            Some(token) if self.accepts_token(token) => Ok(()),
            _ => Err("Bad credentials".into()),
        }
    }

    fn check_jwt(&self, authorization: Option<&str>, now: u64) -> Result<(), String> {
        let Some(authorization) = authorization else {
            return Err(
                "You must authenticate with a JSON web token (JWT) to access this endpoint".into(),
            );
        };
        let Some(token) = authorization
            .split_once(' ')
            .and_then(|(scheme, token)| scheme.eq_ignore_ascii_case("bearer").then_some(token))
        else {
            return Err(
                "A JSON web token could not be decoded (use `Authorization: Bearer <JWT>`)".into(),
            );
        };
        let Some(app) = &self.app else {
            return Err("Integration not found (the fake has no GitHub App; call set_app)".into());
        };
        let header = jsonwebtoken::decode_header(token.trim())
            .map_err(|e| format!("A JSON web token could not be decoded ({e})"))?;
        if header.alg != jsonwebtoken::Algorithm::RS256 {
            return Err(format!(
                "A JSON web token could not be decoded (alg must be RS256, got {:?})",
                header.alg
            ));
        }
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims = HashSet::new();
        let data = jsonwebtoken::decode::<Value>(token.trim(), &app.key, &validation)
            .map_err(|e| format!("A JSON web token could not be decoded ({e})"))?;
        let claims = data.claims;
        let iss_matches = match &claims["iss"] {
            Value::Number(n) => n.as_u64() == Some(app.id),
            Value::String(s) => s == &app.id.to_string(),
            _ => false,
        };
        if !iss_matches {
            return Err(format!(
                "'Issuer' claim ('iss') must be the app id {} (got {})",
                app.id, claims["iss"]
            ));
        }
        let Some(iat) = claims["iat"].as_u64() else {
            return Err("'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued".into());
        };
        let Some(exp) = claims["exp"].as_u64() else {
            return Err("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires".into());
        };
        if iat > now + JWT_LEEWAY_SECS {
            return Err(
                "'Issued at' claim ('iat') must be an Integer representing a time in the past"
                    .into(),
            );
        }
        if exp + JWT_LEEWAY_SECS <= now {
            return Err("'Expiration time' claim ('exp') is in the past".into());
        }
        if exp > now + JWT_MAX_LIFETIME_SECS {
            return Err("'Expiration time' claim ('exp') is too far in the future".into());
        }
        if exp <= iat {
            return Err("'Expiration time' claim ('exp') must be after 'Issued at' ('iat')".into());
        }
        Ok(())
    }

    fn dispatch(&mut self, call: &Call<'_>) -> Reply {
        let number = |name: &str| -> u64 {
            call.path_params
                .get(name)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        match call.op.id.as_str() {
            "repos/get" => Reply::json(200, self.full_repository_json()),
            "pulls/list" => self.list_pulls(call),
            "pulls/create" => self.create_pull(call),
            "pulls/get" => match self.find_pull(number("pull_number")) {
                Some(pr) => Reply::json(200, self.pull_json(pr, true)),
                None => {
                    Reply::not_found("https://docs.github.com/rest/pulls/pulls#get-a-pull-request")
                }
            },
            "pulls/update" => self.update_pull(number("pull_number"), call),
            "issues/add-labels" => self.add_labels(number("issue_number"), call),
            "pulls/request-reviewers" => self.request_reviewers(number("pull_number"), call),
            "pulls/create-review" => self.create_review(number("pull_number"), call),
            "issues/create-comment" => self.create_comment(number("issue_number"), call),
            "issues/list-for-repo" => self.list_issues(call),
            "issues/create" => self.create_issue(call),
            "issues/update" => self.update_issue(number("issue_number"), call),
            "issues/get" => match self
                .issues
                .iter()
                .find(|i| i.number == number("issue_number"))
            {
                Some(issue) => Reply::json(200, self.issue_json(issue)),
                None => Reply::not_found("https://docs.github.com/rest/issues/issues#get-an-issue"),
            },
            "checks/list-for-ref" => self.list_check_runs(call),
            "actions/download-job-logs-for-workflow-run" => self.job_logs(number("job_id")),
            "apps/get-repo-installation" => Reply::json(200, self.installation_json()),
            "apps/create-installation-access-token" => {
                self.create_token(number("installation_id"), call)
            }
            other => Reply::error(
                501,
                &format!("the fake does not implement {other}"),
                DOCS_REST,
            ),
        }
    }

    /// `git --git-dir <the repository behind the fake> ARGS`: its output when it
    /// succeeded, `None` otherwise (or without a repository).
    fn git(&self, args: &[&str]) -> Option<String> {
        let dir = self.git_dir.as_ref()?;
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "GitHub")
            .env("GIT_AUTHOR_EMAIL", "noreply@github.com")
            .env("GIT_COMMITTER_NAME", "GitHub")
            .env("GIT_COMMITTER_EMAIL", "noreply@github.com")
            .output()
            .expect("fake GitHub: run git");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The tip of `branch` in the repository behind the fake.
    fn tip(&self, branch: &str) -> Option<String> {
        self.git(&[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
    }

    /// Whether an open pull request merges cleanly into its base (`None`: unknown,
    /// as GitHub says while it computes it, or without a repository).
    fn mergeable(&self, pr: &PullRequest) -> Option<bool> {
        if pr.state != "open" {
            return None;
        }
        let (head, base) = (self.tip(&pr.head_ref)?, self.tip(&pr.base_ref)?);
        let dir = self.git_dir.as_ref()?;
        let status = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(dir)
            .args(["merge-tree", "--write-tree", &base, &head])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("fake GitHub: run git merge-tree")
            .status;
        Some(status.success())
    }

    /// Whether `pr`'s head holds its base's tip.
    fn up_to_date(&self, pr: &PullRequest) -> bool {
        let (Some(head), Some(base)) = (self.tip(&pr.head_ref), self.tip(&pr.base_ref)) else {
            return true;
        };
        self.git(&["merge-base", "--is-ancestor", &base, &head])
            .is_some()
    }

    /// Merge pull request `pr` in the repository behind the fake, as GitHub's merge
    /// button does (a merge commit on the base branch).
    fn merge_in_git(&self, pr: &PullRequest) {
        let (Some(head), Some(base)) = (self.tip(&pr.head_ref), self.tip(&pr.base_ref)) else {
            return;
        };
        let tree = self
            .git(&["merge-tree", "--write-tree", &base, &head])
            .unwrap_or_else(|| panic!("fake GitHub: #{} does not merge cleanly", pr.number));
        let tree = tree.lines().next().unwrap_or_default().to_owned();
        let message = format!("Merge pull request #{} from {}", pr.number, pr.head_ref);
        let commit = self
            .git(&[
                "commit-tree",
                &tree,
                "-p",
                &base,
                "-p",
                &head,
                "-m",
                &message,
            ])
            .expect("fake GitHub: commit the merge");
        self.git(&[
            "update-ref",
            &format!("refs/heads/{}", pr.base_ref),
            &commit,
        ])
        .expect("fake GitHub: move the base branch");
    }

    fn list_check_runs(&self, call: &Call<'_>) -> Reply {
        let asked = call.path_params.get("ref").cloned().unwrap_or_default();
        let sha = if asked.len() == 40 && asked.bytes().all(|b| b.is_ascii_hexdigit()) {
            asked
        } else {
            self.tip(&asked).unwrap_or(asked)
        };
        let runs: Vec<Value> = self
            .check_runs
            .iter()
            .filter(|c| c.head_sha == sha)
            .map(|c| self.check_run_json(c))
            .collect();
        Reply::json(200, json!({"total_count": runs.len(), "check_runs": runs}))
    }

    fn check_run_json(&self, c: &CheckRun) -> Value {
        let mut v = spec().examples["check-run-paginated"]["value"]["check_runs"][0].clone();
        rewrite_strings(&mut v, &[("https://api.github.com", &self.base_url)]);
        let html = format!("https://github.com/{}/{}", self.owner, self.repo);
        let api = self.api_repo_url();
        v["id"] = json!(c.id);
        v["node_id"] = json!(format!("CR_fake{}", c.id));
        v["head_sha"] = json!(c.head_sha);
        v["name"] = json!(c.name);
        v["status"] = json!(c.status);
        v["conclusion"] = json!(c.conclusion);
        v["external_id"] = json!(c.id.to_string());
        v["url"] = json!(format!("{api}/check-runs/{}", c.id));
        v["html_url"] = json!(format!("{html}/runs/{}", c.id));
        v["details_url"] = json!(format!("{html}/actions/runs/1/job/{}", c.id));
        v["check_suite"] = json!({"id": 77});
        v["pull_requests"] = json!([]);
        v["output"] = json!({
            "title": c.title, "summary": c.summary, "text": c.text,
            "annotations_count": 0,
            "annotations_url": format!("{api}/check-runs/{}/annotations", c.id),
        });
        v["app"]["slug"] = json!(c.app_slug);
        v["app"]["name"] = json!(if c.app_slug == "github-actions" {
            "GitHub Actions"
        } else {
            "Octocat App"
        });
        v
    }

    /// The logs API: a redirect to the job's log in the log storage ([`LOG_STORE`]).
    fn job_logs(&self, job_id: u64) -> Reply {
        match self
            .check_runs
            .iter()
            .find(|c| c.id == job_id && c.log.is_some())
        {
            Some(c) => Reply::json(302, Value::Null)
                .header("location", format!("{}{LOG_STORE}{}", self.base_url, c.id)),
            None => Reply::not_found(
                "https://docs.github.com/rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run",
            ),
        }
    }

    fn find_pull(&self, number: u64) -> Option<&PullRequest> {
        self.pulls.iter().find(|pr| pr.number == number)
    }

    /// `owner:branch` or `branch` (same-repo head).
    fn split_head(&self, head: &str) -> (String, String) {
        match head.split_once(':') {
            Some((owner, branch)) => (owner.to_string(), branch.to_string()),
            None => (self.owner.clone(), head.to_string()),
        }
    }

    fn open_duplicate(&self, head_owner: &str, head_ref: &str, base: &str, except: u64) -> bool {
        self.pulls.iter().any(|pr| {
            pr.number != except
                && pr.state == "open"
                && pr.head_owner.eq_ignore_ascii_case(head_owner)
                && pr.head_ref == head_ref
                && pr.base_ref == base
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_pull(
        &mut self,
        head_owner: String,
        head_ref: String,
        base: &str,
        title: &str,
        body: Option<String>,
        draft: bool,
        maintainer_can_modify: bool,
        now: u64,
    ) -> u64 {
        let number = self.next_number();
        let head_sha = fake_sha(&format!("{head_owner}:{head_ref}#{number}"));
        self.pulls.push(PullRequest {
            number,
            state: "open".into(),
            html_url: format!(
                "https://github.com/{}/{}/pull/{number}",
                self.owner, self.repo
            ),
            head_owner,
            head_ref,
            head_sha,
            base_ref: base.to_string(),
            title: title.to_string(),
            body,
            draft,
            maintainer_can_modify,
            labels: Vec::new(),
            requested_reviewers: Vec::new(),
            requested_teams: Vec::new(),
            created_at: now,
            updated_at: now,
            closed_at: None,
            merged: false,
        });
        number
    }

    /// Issues and pull requests share one sequence of numbers.
    fn next_number(&self) -> u64 {
        let pulls = self.pulls.iter().map(|pr| pr.number);
        let issues = self.issues.iter().map(|i| i.number);
        pulls.chain(issues).max().unwrap_or(0) + 1
    }

    fn list_pulls(&self, call: &Call<'_>) -> Reply {
        let state = call.query.get("state").map_or("open", String::as_str);
        // Like GitHub, a `head` without the `owner:` prefix is ignored.
        let head = call.query.get("head").and_then(|h| h.split_once(':'));
        let base = call.query.get("base");
        let mut matching: Vec<&PullRequest> = self
            .pulls
            .iter()
            .filter(|pr| state == "all" || pr.state == state)
            .filter(|pr| !(call.hide_open_pulls && pr.state == "open"))
            .filter(|pr| {
                head.is_none_or(|(owner, branch)| {
                    pr.head_owner.eq_ignore_ascii_case(owner) && pr.head_ref == branch
                })
            })
            .filter(|pr| base.is_none_or(|b| &pr.base_ref == b))
            .collect();
        let sort = call.query.get("sort").map_or("created", String::as_str);
        match sort {
            "updated" => matching.sort_by_key(|pr| (pr.updated_at, pr.number)),
            _ => matching.sort_by_key(|pr| (pr.created_at, pr.number)),
        }
        let default_direction = if sort == "created" { "desc" } else { "asc" };
        if call
            .query
            .get("direction")
            .map_or(default_direction, String::as_str)
            == "desc"
        {
            matching.reverse();
        }
        let per_page = call
            .query
            .get("per_page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(30)
            .clamp(1, 100);
        let page = call
            .query
            .get("page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        let items: Vec<Value> = matching
            .iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .map(|pr| self.pull_json(pr, false))
            .collect();
        let mut reply = Reply::json(200, Value::Array(items));
        let last = matching.len().div_ceil(per_page).max(1);
        if page < last {
            let mut query: BTreeMap<String, String> = call.query.clone();
            let mut link = |p: usize| {
                query.insert("page".into(), p.to_string());
                let qs: Vec<String> = query
                    .iter()
                    .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
                    .collect();
                format!(
                    "<{}/repos/{}/{}/pulls?{}>",
                    self.base_url,
                    self.owner,
                    self.repo,
                    qs.join("&")
                )
            };
            let header = format!(
                "{}; rel=\"next\", {}; rel=\"last\"",
                link(page + 1),
                link(last)
            );
            reply = reply.header("link", header);
        }
        reply
    }

    fn create_pull(&mut self, call: &Call<'_>) -> Reply {
        let body = &call.body;
        let head = body["head"].as_str().unwrap_or_default();
        let base = body["base"].as_str().unwrap_or_default().to_string();
        let Some(title) = body["title"].as_str() else {
            let errors = if body.get("issue").is_some() {
                json!([{"resource": "PullRequest", "code": "custom",
                        "message": "the fake GitHub does not support converting issues"}])
            } else {
                json!([{"resource": "PullRequest", "code": "missing_field", "field": "title"}])
            };
            return Reply::validation_failed(errors, DOCS_CREATE_PR);
        };
        let (head_owner, head_ref) = self.split_head(head);
        if head_ref.is_empty() {
            return Reply::validation_failed(
                json!([{"resource": "PullRequest", "code": "invalid", "field": "head"}]),
                DOCS_CREATE_PR,
            );
        }
        if base.is_empty() {
            return Reply::validation_failed(
                json!([{"resource": "PullRequest", "code": "invalid", "field": "base"}]),
                DOCS_CREATE_PR,
            );
        }
        if head_owner.eq_ignore_ascii_case(&self.owner) && head_ref == base {
            return Reply::validation_failed(
                json!([{"resource": "PullRequest", "code": "custom",
                        "message": format!("No commits between {base} and {head_ref}")}]),
                DOCS_CREATE_PR,
            );
        }
        if self.open_duplicate(&head_owner, &head_ref, &base, 0) {
            return Reply::validation_failed(
                json!([{"resource": "PullRequest", "code": "custom",
                        "message": format!("A pull request already exists for {head_owner}:{head_ref}.")}]),
                DOCS_CREATE_PR,
            );
        }
        let number = self.insert_pull(
            head_owner,
            head_ref,
            &base,
            title,
            body["body"].as_str().map(str::to_string),
            body["draft"].as_bool().unwrap_or(false),
            body["maintainer_can_modify"].as_bool().unwrap_or(true),
            call.now,
        );
        let pr = self.find_pull(number).expect("just inserted");
        let location = format!(
            "{}/repos/{}/{}/pulls/{number}",
            self.base_url, self.owner, self.repo
        );
        Reply::json(201, self.pull_json(pr, true)).header("location", location)
    }

    fn update_pull(&mut self, number: u64, call: &Call<'_>) -> Reply {
        let Some(index) = self.pulls.iter().position(|pr| pr.number == number) else {
            return Reply::not_found(DOCS_UPDATE_PR);
        };
        let body = &call.body;
        let current = self.pulls[index].clone();
        let new_base = body["base"]
            .as_str()
            .map_or(current.base_ref.clone(), str::to_string);
        let new_state = body["state"]
            .as_str()
            .map_or(current.state.clone(), str::to_string);
        if new_state == "open"
            && self.open_duplicate(&current.head_owner, &current.head_ref, &new_base, number)
        {
            return Reply::validation_failed(
                json!([{"resource": "PullRequest", "code": "custom",
                        "message": format!("A pull request already exists for {}:{}.",
                                           current.head_owner, current.head_ref)}]),
                DOCS_UPDATE_PR,
            );
        }
        let pr = &mut self.pulls[index];
        if let Some(title) = body["title"].as_str() {
            pr.title = title.to_string();
        }
        if let Some(text) = body["body"].as_str() {
            pr.body = Some(text.to_string());
        }
        if let Some(flag) = body["maintainer_can_modify"].as_bool() {
            pr.maintainer_can_modify = flag;
        }
        pr.base_ref = new_base;
        if new_state != pr.state {
            pr.closed_at = (new_state == "closed").then_some(call.now);
            pr.state = new_state;
        }
        pr.updated_at = call.now;
        let pr = self.pulls[index].clone();
        Reply::json(200, self.pull_json(&pr, true))
    }

    fn add_labels(&mut self, number: u64, call: &Call<'_>) -> Reply {
        let Some(index) = self.pulls.iter().position(|pr| pr.number == number) else {
            return Reply::not_found(
                "https://docs.github.com/rest/issues/labels#add-labels-to-an-issue",
            );
        };
        let names: Vec<String> = call.body["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| match l {
                Value::String(name) => Some(name.clone()),
                other => other["name"].as_str().map(str::to_string),
            })
            .collect();
        let pr = &mut self.pulls[index];
        for name in names {
            if !pr.labels.iter().any(|l| l.eq_ignore_ascii_case(&name)) {
                pr.labels.push(name);
            }
        }
        pr.updated_at = call.now;
        let labels = pr.labels.clone();
        Reply::json(
            200,
            Value::Array(labels.iter().map(|l| self.label_json(l)).collect()),
        )
    }

    fn request_reviewers(&mut self, number: u64, call: &Call<'_>) -> Reply {
        let Some(index) = self.pulls.iter().position(|pr| pr.number == number) else {
            return Reply::not_found(
                "https://docs.github.com/rest/pulls/review-requests#request-reviewers-for-a-pull-request",
            );
        };
        let strings = |key: &str| -> Vec<String> {
            call.body[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        let (reviewers, teams) = (strings("reviewers"), strings("team_reviewers"));
        let pr = &mut self.pulls[index];
        for login in reviewers {
            if !pr
                .requested_reviewers
                .iter()
                .any(|r| r.eq_ignore_ascii_case(&login))
            {
                pr.requested_reviewers.push(login);
            }
        }
        for slug in teams {
            if !pr
                .requested_teams
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&slug))
            {
                pr.requested_teams.push(slug);
            }
        }
        pr.updated_at = call.now;
        let pr = self.pulls[index].clone();
        Reply::json(201, self.pull_json(&pr, false))
    }

    fn create_comment(&mut self, number: u64, call: &Call<'_>) -> Reply {
        let exists =
            self.find_pull(number).is_some() || self.issues.iter().any(|i| i.number == number);
        if !exists {
            return Reply::not_found(
                "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
            );
        }
        let body = call.body["body"].as_str().unwrap_or_default().to_string();
        self.comments.push(Comment {
            number,
            body: body.clone(),
        });
        let id = self.comments.len() as u64;
        let mut v = spec().examples["issue-comment"]["value"].clone();
        rewrite_strings(&mut v, &[("https://api.github.com", &self.base_url)]);
        let api = self.api_repo_url();
        v["id"] = json!(id);
        v["node_id"] = json!(format!("IC_fake{id}"));
        v["body"] = json!(body);
        v["url"] = json!(format!("{api}/issues/comments/{id}"));
        v["issue_url"] = json!(format!("{api}/issues/{number}"));
        v["html_url"] = json!(format!(
            "https://github.com/{}/{}/issues/{number}#issuecomment-{id}",
            self.owner, self.repo
        ));
        v["user"] = self.user_json(&self.owner);
        v["created_at"] = json!(rfc3339(call.now));
        v["updated_at"] = json!(rfc3339(call.now));
        Reply::json(201, v)
    }

    fn create_review(&mut self, number: u64, call: &Call<'_>) -> Reply {
        if self.find_pull(number).is_none() {
            return Reply::not_found(
                "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
            );
        }
        let body = call.body["body"].as_str().unwrap_or_default().to_string();
        let event = call.body["event"].as_str().unwrap_or_default().to_string();
        if matches!(event.as_str(), "COMMENT" | "REQUEST_CHANGES") && body.is_empty() {
            return Reply::validation_failed(
                json!([{"resource": "PullRequestReview", "code": "missing_field", "field": "body"}]),
                "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
            );
        }
        self.reviews.push(Review {
            pull_number: number,
            body: body.clone(),
            event: event.clone(),
        });
        let id = self.reviews.len() as u64;
        let mut v = spec().examples["pull-request-review"]["value"].clone();
        rewrite_strings(&mut v, &[("https://api.github.com", &self.base_url)]);
        let api = self.api_repo_url();
        let html = format!(
            "https://github.com/{}/{}/pull/{number}",
            self.owner, self.repo
        );
        v["id"] = json!(id);
        v["node_id"] = json!(format!("PRR_fake{id}"));
        v["body"] = json!(body);
        v["user"] = self.user_json(&self.owner);
        v["state"] = json!(match event.as_str() {
            "APPROVE" => "APPROVED",
            "REQUEST_CHANGES" => "CHANGES_REQUESTED",
            "COMMENT" => "COMMENTED",
            _ => "PENDING",
        });
        v["html_url"] = json!(format!("{html}#pullrequestreview-{id}"));
        v["pull_request_url"] = json!(format!("{api}/pulls/{number}"));
        v["_links"] = json!({"html": {"href": format!("{html}#pullrequestreview-{id}")},
                             "pull_request": {"href": format!("{api}/pulls/{number}")}});
        v["submitted_at"] = json!(rfc3339(call.now));
        Reply::json(200, v)
    }

    fn issue_json(&self, issue: &Issue) -> Value {
        let mut v = spec().examples["issue"]["value"].clone();
        rewrite_strings(&mut v, &[("https://api.github.com", &self.base_url)]);
        let api = self.api_repo_url();
        let n = issue.number;
        v["id"] = json!(2_000_000 + n);
        v["node_id"] = json!(format!("I_fake{n}"));
        v["url"] = json!(format!("{api}/issues/{n}"));
        v["repository_url"] = json!(api.clone());
        v["labels_url"] = json!(format!("{api}/issues/{n}/labels{{/name}}"));
        v["comments_url"] = json!(format!("{api}/issues/{n}/comments"));
        v["events_url"] = json!(format!("{api}/issues/{n}/events"));
        v["html_url"] = json!(format!(
            "https://github.com/{}/{}/issues/{n}",
            self.owner, self.repo
        ));
        v["number"] = json!(n);
        v["state"] = json!(issue.state);
        v["state_reason"] = Value::Null;
        v["title"] = json!(issue.title);
        v["body"] = json!(issue.body);
        v["user"] = self.user_json(&self.owner);
        v["labels"] = Value::Array(issue.labels.iter().map(|l| self.label_json(l)).collect());
        v["assignee"] = Value::Null;
        v["assignees"] = json!([]);
        v["milestone"] = Value::Null;
        v["locked"] = json!(false);
        v["active_lock_reason"] = Value::Null;
        v["comments"] = json!(self.comments.iter().filter(|c| c.number == n).count());
        v["closed_at"] = Value::Null;
        v["closed_by"] = Value::Null;
        v["created_at"] = json!(rfc3339(issue.created_at));
        v["updated_at"] = json!(rfc3339(issue.updated_at));
        if let Some(object) = v.as_object_mut() {
            object.remove("pull_request");
        }
        v
    }

    fn list_issues(&self, call: &Call<'_>) -> Reply {
        let state = call.query.get("state").map_or("open", String::as_str);
        let labels: Vec<&str> = call
            .query
            .get("labels")
            .map(|l| l.split(',').filter(|x| !x.is_empty()).collect())
            .unwrap_or_default();
        let mut matching: Vec<&Issue> = self
            .issues
            .iter()
            .filter(|i| state == "all" || i.state == state)
            .filter(|i| {
                labels
                    .iter()
                    .all(|l| i.labels.iter().any(|have| have.eq_ignore_ascii_case(l)))
            })
            .collect();
        matching.sort_by_key(|i| std::cmp::Reverse(i.number));
        let per_page = call
            .query
            .get("per_page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(30)
            .clamp(1, 100);
        let items: Vec<Value> = matching
            .iter()
            .take(per_page)
            .map(|i| self.issue_json(i))
            .collect();
        Reply::json(200, Value::Array(items))
    }

    fn create_issue(&mut self, call: &Call<'_>) -> Reply {
        let Some(title) = call.body["title"].as_str() else {
            return Reply::validation_failed(
                json!([{"resource": "Issue", "code": "missing_field", "field": "title"}]),
                "https://docs.github.com/rest/issues/issues#create-an-issue",
            );
        };
        let labels: Vec<String> = call.body["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(str::to_string))
            .collect();
        let issue = Issue {
            number: self.next_number(),
            state: "open".into(),
            title: title.to_string(),
            body: call.body["body"].as_str().map(str::to_string),
            labels,
            created_at: call.now,
            updated_at: call.now,
        };
        self.issues.push(issue.clone());
        Reply::json(201, self.issue_json(&issue))
    }

    fn update_issue(&mut self, number: u64, call: &Call<'_>) -> Reply {
        let Some(issue) = self.issues.iter_mut().find(|i| i.number == number) else {
            return Reply::not_found("https://docs.github.com/rest/issues/issues#update-an-issue");
        };
        if let Some(title) = call.body["title"].as_str() {
            issue.title = title.to_string();
        }
        if let Some(body) = call.body["body"].as_str() {
            issue.body = Some(body.to_string());
        }
        if let Some(state) = call.body["state"].as_str() {
            issue.state = state.to_string();
        }
        issue.updated_at = call.now;
        let issue = issue.clone();
        Reply::json(200, self.issue_json(&issue))
    }

    fn create_token(&mut self, installation_id: u64, call: &Call<'_>) -> Reply {
        if installation_id != INSTALLATION_ID {
            return Reply::not_found(
                "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app",
            );
        }
        let serial = self.installation_tokens.len() as u64 + 1;
        let token = format!(
            "ghs_{}",
            &fake_sha(&format!("token#{serial}#{}", self.port))[..36]
        );
        self.installation_tokens.push(token.clone());
        let permissions = match call.body.get("permissions") {
            Some(p @ Value::Object(_)) => p.clone(),
            _ => json!({"contents": "write", "issues": "write", "metadata": "read",
                        "pull_requests": "write"}),
        };
        let selection = if call.body.get("repositories").is_some()
            || call.body.get("repository_ids").is_some()
        {
            "selected"
        } else {
            "all"
        };
        let repositories = call
            .body
            .get("repositories")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|r| r.as_str().map(str::to_owned))
                    .collect()
            });
        self.token_scopes.insert(
            token.clone(),
            TokenScope {
                repositories,
                permissions: permissions.as_object().cloned().unwrap_or_default(),
            },
        );
        Reply::json(
            201,
            json!({
                "token": token,
                "expires_at": rfc3339(call.now + 3600),
                "permissions": permissions,
                "repository_selection": selection,
            }),
        )
    }

    // ---- JSON rendering, from the spec's own examples ----

    fn api_repo_url(&self) -> String {
        format!("{}/repos/{}/{}", self.base_url, self.owner, self.repo)
    }

    fn user_json(&self, login: &str) -> Value {
        let mut user = spec().examples["pull-request"]["value"]["user"].clone();
        rewrite_strings(&mut user, &[("https://api.github.com", &self.base_url)]);
        rewrite_strings(&mut user, &[("octocat", login)]);
        user["login"] = json!(login);
        user["id"] = json!(stable_id(login));
        user["type"] = json!("User");
        user
    }

    fn repository_json(&self, owner: &str, template: &Value) -> Value {
        let mut repo = template.clone();
        let full_name = format!("{owner}/{}", self.repo);
        rewrite_strings(
            &mut repo,
            &[
                ("https://api.github.com", &self.base_url),
                ("octocat/Hello-World", &full_name),
            ],
        );
        repo["name"] = json!(self.repo);
        repo["full_name"] = json!(full_name);
        repo["owner"] = self.user_json(owner);
        repo["default_branch"] = json!("main");
        repo["id"] = json!(stable_id(&full_name));
        repo["private"] = json!(false);
        repo
    }

    fn full_repository_json(&self) -> Value {
        let template = &spec().examples["full-repository-default-response"]["value"];
        let mut repo = self.repository_json(&self.owner, template);
        repo["description"] = json!("Repository served by the fake GitHub");
        // The spec's own example omits the required `language` at the top level
        // and in `source` (it is nullable, so fill in null).
        for nested in [None, Some("source"), Some("parent")] {
            let target = match nested {
                None => &mut repo,
                Some(key) => &mut repo[key],
            };
            if let Some(object) = target.as_object_mut() {
                object.entry("language").or_insert(Value::Null);
            }
        }
        repo
    }

    fn label_json(&self, name: &str) -> Value {
        let mut label = spec().examples["label-items"]["value"][0].clone();
        label["id"] = json!(stable_id(name));
        label["node_id"] = json!(format!("LA_fake{}", stable_id(name)));
        label["url"] = json!(format!(
            "{}/labels/{}",
            self.api_repo_url(),
            percent_encode(name)
        ));
        label["name"] = json!(name);
        // `pull-request-simple` requires a string here (no `nullable`).
        label["description"] = json!("");
        label["color"] = json!("ededed");
        label["default"] = json!(false);
        label
    }

    fn team_json(&self, slug: &str) -> Value {
        let mut team = spec().examples["pull-request"]["value"]["requested_teams"][0].clone();
        rewrite_strings(&mut team, &[("https://api.github.com", &self.base_url)]);
        rewrite_strings(&mut team, &[("justice-league", slug)]);
        let id = stable_id(slug);
        team["id"] = json!(id);
        team["slug"] = json!(slug);
        team["name"] = json!(slug);
        team["url"] = json!(format!("{}/teams/{id}", self.base_url));
        team["members_url"] = json!(format!("{}/teams/{id}/members{{/member}}", self.base_url));
        team["repositories_url"] = json!(format!("{}/teams/{id}/repos", self.base_url));
        // The spec's own `pull-request` and `pull-request-simple-items` examples
        // lack this required field.
        team["type"] = json!("organization");
        // Required (nullable) by `team`, which `pull-request-simple` uses.
        team["parent"] = Value::Null;
        team
    }

    fn branch_json(&self, owner: &str, branch: &str, sha: &str, template: &Value) -> Value {
        json!({
            "label": format!("{owner}:{branch}"),
            "ref": branch,
            "sha": sha,
            "user": self.user_json(owner),
            "repo": self.repository_json(owner, &template["repo"]),
        })
    }

    fn pull_json(&self, pr: &PullRequest, full: bool) -> Value {
        let mut v = if full {
            spec().examples["pull-request"]["value"].clone()
        } else {
            spec().examples["pull-request-simple-items"]["value"][0].clone()
        };
        let api = self.api_repo_url();
        let html = format!("https://github.com/{}/{}", self.owner, self.repo);
        let n = pr.number;
        let base_sha = self
            .tip(&pr.base_ref)
            .unwrap_or_else(|| fake_sha(&format!("{}#base", pr.base_ref)));
        let head_sha = self
            .tip(&pr.head_ref)
            .unwrap_or_else(|| pr.head_sha.clone());
        let head = self.branch_json(&pr.head_owner, &pr.head_ref, &head_sha, &v["head"]);
        let base = self.branch_json(&self.owner, &pr.base_ref, &base_sha, &v["base"]);
        let set = |v: &mut Value, key: &str, value: Value| {
            v[key] = value;
        };
        set(&mut v, "url", json!(format!("{api}/pulls/{n}")));
        set(&mut v, "id", json!(1_000_000 + n));
        set(&mut v, "node_id", json!(format!("PR_fake{n}")));
        set(&mut v, "html_url", json!(pr.html_url));
        set(&mut v, "diff_url", json!(format!("{html}/pull/{n}.diff")));
        set(&mut v, "patch_url", json!(format!("{html}/pull/{n}.patch")));
        set(&mut v, "issue_url", json!(format!("{api}/issues/{n}")));
        set(
            &mut v,
            "commits_url",
            json!(format!("{api}/pulls/{n}/commits")),
        );
        set(
            &mut v,
            "review_comments_url",
            json!(format!("{api}/pulls/{n}/comments")),
        );
        set(
            &mut v,
            "review_comment_url",
            json!(format!("{api}/pulls/comments{{/number}}")),
        );
        set(
            &mut v,
            "comments_url",
            json!(format!("{api}/issues/{n}/comments")),
        );
        set(
            &mut v,
            "statuses_url",
            json!(format!("{api}/statuses/{}", pr.head_sha)),
        );
        set(&mut v, "number", json!(n));
        set(&mut v, "state", json!(pr.state));
        set(&mut v, "locked", json!(false));
        set(&mut v, "active_lock_reason", Value::Null);
        set(&mut v, "title", json!(pr.title));
        set(&mut v, "body", json!(pr.body));
        set(&mut v, "user", self.user_json(&self.owner));
        set(
            &mut v,
            "labels",
            Value::Array(pr.labels.iter().map(|l| self.label_json(l)).collect()),
        );
        set(&mut v, "milestone", Value::Null);
        set(&mut v, "assignee", Value::Null);
        set(&mut v, "assignees", json!([]));
        set(
            &mut v,
            "requested_reviewers",
            Value::Array(
                pr.requested_reviewers
                    .iter()
                    .map(|r| self.user_json(r))
                    .collect(),
            ),
        );
        set(
            &mut v,
            "requested_teams",
            Value::Array(
                pr.requested_teams
                    .iter()
                    .map(|t| self.team_json(t))
                    .collect(),
            ),
        );
        set(&mut v, "created_at", json!(rfc3339(pr.created_at)));
        set(&mut v, "updated_at", json!(rfc3339(pr.updated_at)));
        set(&mut v, "closed_at", json!(pr.closed_at.map(rfc3339)));
        set(
            &mut v,
            "merged_at",
            json!(pr.merged.then(|| rfc3339(pr.closed_at.unwrap_or(0)))),
        );
        set(&mut v, "merge_commit_sha", Value::Null);
        set(&mut v, "head", head);
        set(&mut v, "base", base);
        set(
            &mut v,
            "_links",
            json!({
                "self": {"href": format!("{api}/pulls/{n}")},
                "html": {"href": pr.html_url},
                "issue": {"href": format!("{api}/issues/{n}")},
                "comments": {"href": format!("{api}/issues/{n}/comments")},
                "review_comments": {"href": format!("{api}/pulls/{n}/comments")},
                "review_comment": {"href": format!("{api}/pulls/comments{{/number}}")},
                "commits": {"href": format!("{api}/pulls/{n}/commits")},
                "statuses": {"href": format!("{api}/statuses/{}", pr.head_sha)},
            }),
        );
        set(&mut v, "author_association", json!("OWNER"));
        set(&mut v, "auto_merge", Value::Null);
        set(&mut v, "draft", json!(pr.draft));
        if full {
            set(&mut v, "merged", json!(pr.merged));
            let mergeable = self.mergeable(pr);
            set(&mut v, "mergeable", json!(mergeable));
            set(&mut v, "rebaseable", json!(mergeable));
            let state = match mergeable {
                Some(true) if self.up_to_date_required && !self.up_to_date(pr) => "behind",
                Some(true) => "clean",
                Some(false) => "dirty",
                None => "unknown",
            };
            set(&mut v, "mergeable_state", json!(state));
            set(&mut v, "merged_by", Value::Null);
            set(&mut v, "comments", json!(0));
            set(&mut v, "review_comments", json!(0));
            set(
                &mut v,
                "maintainer_can_modify",
                json!(pr.maintainer_can_modify),
            );
            set(&mut v, "commits", json!(1));
            set(&mut v, "additions", json!(1));
            set(&mut v, "deletions", json!(0));
            set(&mut v, "changed_files", json!(1));
        }
        v
    }

    fn installation_json(&self) -> Value {
        let mut installation = spec().examples["installation"]["value"].clone();
        rewrite_strings(
            &mut installation,
            &[("https://api.github.com", &self.base_url)],
        );
        let app_id = self.app.as_ref().map_or(1, |a| a.id);
        installation["id"] = json!(INSTALLATION_ID);
        installation["app_id"] = json!(app_id);
        installation["app_slug"] = json!("fanout-test-app");
        installation["account"] = self.user_json(&self.owner);
        installation["target_id"] = json!(stable_id(&self.owner));
        installation["target_type"] = json!("User");
        installation["repository_selection"] = json!("selected");
        installation["access_tokens_url"] = json!(format!(
            "{}/app/installations/{INSTALLATION_ID}/access_tokens",
            self.base_url
        ));
        installation["html_url"] = json!(format!(
            "https://github.com/settings/installations/{INSTALLATION_ID}"
        ));
        installation["permissions"] = json!({
            "contents": "write", "issues": "write", "metadata": "read", "pull_requests": "write"
        });
        installation
    }
}

/// The reply for an injected fault; `None` for the kinds that let the
/// operation run ([`FaultKind::DropAfterProcessing`], [`FaultKind::HideOpenPulls`]).
fn fault_reply(kind: &FaultKind, now: u64, request_id: &str) -> Option<Reply> {
    let reply = match kind {
        FaultKind::Status(status) => {
            let message = hyper::StatusCode::from_u16(*status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Server Error");
            Reply::error(*status, message, DOCS_REST)
        }
        FaultKind::SecondaryRateLimit { retry_after_secs } => Reply::error(
            403,
            &format!(
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID {request_id}."
            ),
            DOCS_SECONDARY_RATE_LIMIT,
        )
        .header("retry-after", retry_after_secs.to_string()),
        FaultKind::PrimaryRateLimit { reset_in_secs } => Reply::error(
            403,
            &format!(
                "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID {request_id}."
            ),
            DOCS_PRIMARY_RATE_LIMIT,
        )
        .header("x-ratelimit-remaining", "0")
        .header("x-ratelimit-used", RATE_LIMIT.to_string())
        .header("x-ratelimit-reset", (now + reset_in_secs).to_string()),
        FaultKind::TooManyRequests { retry_after_secs } => Reply::error(
            429,
            &format!(
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID {request_id}."
            ),
            DOCS_SECONDARY_RATE_LIMIT,
        )
        .header("retry-after", retry_after_secs.to_string()),
        FaultKind::DropAfterProcessing | FaultKind::HideOpenPulls => return None,
        FaultKind::DraftNotSupported => Reply::validation_failed(
            json!([{"resource": "PullRequest", "code": "custom",
                    "message": "Draft pull requests are not supported in this repository."}]),
            DOCS_CREATE_PR,
        ),
        FaultKind::ActionsCannotCreatePr => Reply::error(
            403,
            "GitHub Actions is not permitted to create or approve pull requests.",
            DOCS_CREATE_PR,
        ),
    };
    Some(reply)
}

fn violation_reply(violations: &[String]) -> Reply {
    let errors: Vec<Value> = violations
        .iter()
        .map(|v| json!({"resource": "FakeGitHub", "code": "invalid", "message": v}))
        .collect();
    Reply::json(
        422,
        json!({
            "message": format!(
                "Validation Failed: request does not match GitHub's OpenAPI description: {}",
                violations.join("; ")
            ),
            "errors": errors,
            "documentation_url": DOCS_REST,
            "status": "422",
        }),
    )
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds.
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn fnv1a(seed: u64, text: &str) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64 ^ seed;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A deterministic 40-hex-digit "commit sha" for `seed`.
fn fake_sha(seed: &str) -> String {
    (0..3)
        .map(|i| format!("{:016x}", fnv1a(i, seed)))
        .collect::<String>()[..40]
        .to_string()
}

fn stable_id(text: &str) -> u64 {
    fnv1a(7, text) % 1_000_000_000 + 1
}

fn rewrite_strings(value: &mut Value, replacements: &[(&str, &str)]) {
    match value {
        Value::String(s) => {
            for (from, to) in replacements {
                if s.contains(from) {
                    *s = s.replace(from, to);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| rewrite_strings(v, replacements)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| rewrite_strings(v, replacements)),
        _ => {}
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
