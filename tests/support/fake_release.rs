//! A loopback fake of GitHub's releases, for the release flow (`dist/release.py`,
//! `.github/workflows/release.yml`) and the installer (`dist/install.sh`):
//!
//! - the REST operations the flow uses (list, create, get, update a release; list,
//!   upload, get, delete an asset), each request matched against GitHub's OpenAPI
//!   description (`tests/openapi/github-releases.json`, see `tests/common/openapi.rs`)
//!   and each JSON response the fake sends checked against it too;
//! - the upload endpoint a release's `upload_url` names;
//! - the public download URL `/{owner}/{repo}/releases/download/{tag}/{name}`, for
//!   published releases only (a draft's assets are not public), as on github.com.
//!
//! The URLs are laid out as on GitHub Enterprise Server, all on one loopback port:
//! the API under `/api/v3`, uploads under `/api/uploads`, the web and downloads at
//! the root.
//!
//! As on GitHub, asset bytes are served through a redirect to a storage URL that
//! refuses a request carrying an `Authorization` header (a client must drop its token
//! when it follows the redirect), `get-release-by-tag` does not see drafts, and
//! publishing a draft whose tag does not exist makes the tag (on the draft's
//! `target_commitish`, in the bare repository given with [`FakeReleases::with_git`]):
//! the fake records that as a violation, since the flow must tag first.
//!
//! Anything off the spec, an unknown route, or a bad token is a violation, answered
//! with an error status; tests end with [`FakeReleases::assert_no_violations`]. The
//! server has its own thread and runtime and only binds 127.0.0.1.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

// The fake GitHub's copy of the module (loaded once in the test binary).
use crate::fake_github::openapi::{Spec, parse_query};

const SPEC_JSON: &str = include_str!("../openapi/github-releases.json");
const DOCS: &str = "https://docs.github.com/rest/releases";

fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| Spec::load(SPEC_JSON, "tests/openapi/github-releases.json"))
}

/// A release as the fake holds it.
#[derive(Clone, Debug)]
pub struct Release {
    pub id: u64,
    pub tag_name: String,
    pub target_commitish: String,
    pub name: String,
    pub draft: bool,
    pub prerelease: bool,
    /// `make_latest` of the request that published it.
    pub make_latest: Option<String>,
    pub assets: Vec<Asset>,
}

#[derive(Clone, Debug)]
pub struct Asset {
    pub id: u64,
    pub name: String,
    pub content_type: String,
    pub data: Vec<u8>,
}

/// One request the fake answered.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The operationId, or `download`/`storage` for the non-API routes.
    pub operation: String,
}

/// Handle to a running fake; the server stops when it is dropped.
pub struct FakeReleases {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeReleases {
    /// A fake for `owner/repo` whose API accepts `token` only.
    pub fn start(owner: &str, repo: &str, token: &str) -> FakeReleases {
        let _ = spec();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("fake releases: bind");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let state = Arc::new(Mutex::new(State {
            owner: owner.to_owned(),
            repo: repo.to_owned(),
            token: token.to_owned(),
            base: format!("http://{addr}"),
            git: None,
            releases: Vec::new(),
            next_id: 1,
            faults: Vec::new(),
            requests: Vec::new(),
            violations: Vec::new(),
        }));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server_state = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("fake releases: runtime");
            runtime.block_on(serve(listener, server_state, rx));
        });
        FakeReleases {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The bare repository the flow pushes its tags to (see the module docs).
    pub fn with_git(self, bare: PathBuf) -> FakeReleases {
        self.lock().git = Some(bare);
        self
    }

    /// `http://127.0.0.1:<port>`: the web (GITHUB_SERVER_URL) and download base.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The API base (GITHUB_API_URL).
    pub fn api_url(&self) -> String {
        format!("http://{}/api/v3", self.addr)
    }

    /// Where `install.sh` finds the assets of `tag` (its FANOUT_INSTALL_BASE_URL).
    pub fn download_base(&self, tag: &str) -> String {
        let s = self.lock();
        format!("{}/{}/{}/releases/download/{tag}", s.base, s.owner, s.repo)
    }

    pub fn releases(&self) -> Vec<Release> {
        self.lock().releases.clone()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    pub fn assert_no_violations(&self) {
        let v = self.violations();
        assert!(
            v.is_empty(),
            "fake releases saw violations:\n{}",
            v.join("\n")
        );
    }

    /// The next `times` requests of `method` whose path contains `path_contains`
    /// are answered with `status` and a GitHub-style error.
    pub fn fail(&self, method: &str, path_contains: &str, status: u16, times: u32) {
        self.lock()
            .faults
            .push((method.to_owned(), path_contains.to_owned(), status, times));
    }

    /// Replaces the bytes of a published asset (a tampered release, for the installer).
    pub fn tamper(&self, tag: &str, name: &str, data: &[u8]) {
        let mut s = self.lock();
        let release = s
            .releases
            .iter_mut()
            .find(|r| r.tag_name == tag)
            .expect("release");
        let asset = release
            .assets
            .iter_mut()
            .find(|a| a.name == name)
            .expect("asset");
        asset.data = data.to_vec();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for FakeReleases {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
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
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let reply = lock(&state).handle(&parts, &body);
    let mut builder = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    Ok(builder
        .body(Full::new(Bytes::from(reply.body)))
        .expect("response"))
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The JSON body, for the response check.
    json: Value,
}

impl Reply {
    fn json(status: u16, value: Value) -> Reply {
        Reply {
            status,
            headers: vec![(
                "content-type".into(),
                "application/json; charset=utf-8".into(),
            )],
            body: serde_json::to_vec(&value).expect("JSON"),
            json: value,
        }
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"message": message, "documentation_url": DOCS, "status": status.to_string()}),
        )
    }

    fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            json: Value::Null,
        }
    }

    fn redirect(location: String) -> Reply {
        let mut reply = Reply::empty(302);
        reply.headers.push(("location".into(), location));
        reply
    }

    fn bytes(data: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/octet-stream".into())],
            body: data,
            json: Value::Null,
        }
    }
}

/// One API request, routed.
struct Call<'a> {
    op: &'a str,
    params: BTreeMap<String, String>,
    query: BTreeMap<String, String>,
    headers: &'a hyper::HeaderMap,
    body: &'a [u8],
}

struct State {
    owner: String,
    repo: String,
    token: String,
    base: String,
    git: Option<PathBuf>,
    releases: Vec<Release>,
    next_id: u64,
    faults: Vec<(String, String, u16, u32)>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
}

impl State {
    fn handle(&mut self, parts: &hyper::http::request::Parts, body: &[u8]) -> Reply {
        let method = parts.method.as_str().to_owned();
        let path = parts.uri.path().to_owned();
        let (operation, reply) = if let Some(reply) = self.public_route(&method, &path, parts) {
            reply
        } else if let Some(reply) = self.fault(&method, &path) {
            ("fault".to_owned(), reply)
        } else if let Some(api_path) = path.strip_prefix("/api/v3") {
            self.api(&method, api_path, parts, body, false)
        } else if let Some(api_path) = path.strip_prefix("/api/uploads") {
            self.api(&method, api_path, parts, body, true)
        } else {
            let violation = format!("{method} {path}: not an API, upload or download URL");
            self.violations.push(violation.clone());
            ("unknown".to_owned(), Reply::error(404, &violation))
        };
        self.requests.push(Recorded {
            method,
            path,
            status: reply.status,
            operation,
        });
        reply
    }

    /// Downloads and storage: not part of the REST API.
    fn public_route(
        &mut self,
        method: &str,
        path: &str,
        parts: &hyper::http::request::Parts,
    ) -> Option<(String, Reply)> {
        if let Some(id) = path.strip_prefix("/_storage/") {
            if parts.headers.contains_key("authorization") {
                // As GitHub's asset storage: the signed URL is the only credential.
                return Some((
                    "storage".into(),
                    Reply::error(400, "Only one auth mechanism allowed"),
                ));
            }
            let data = id
                .parse()
                .ok()
                .and_then(|id| self.asset(id))
                .map(|a| a.data.clone());
            return Some((
                "storage".into(),
                data.map_or(Reply::error(404, "Not Found"), Reply::bytes),
            ));
        }
        let prefix = format!("/{}/{}/releases/download/", self.owner, self.repo);
        let rest = path.strip_prefix(&prefix)?;
        let (tag, name) = rest.split_once('/')?;
        let found = self
            .releases
            .iter()
            .filter(|r| !r.draft && r.tag_name == tag)
            .flat_map(|r| &r.assets)
            .find(|a| a.name == name)
            .map(|a| a.id);
        let reply = match (method, found) {
            ("GET" | "HEAD", Some(id)) => Reply::redirect(self.storage_url(id)),
            _ => Reply::error(404, "Not Found"),
        };
        Some(("download".into(), reply))
    }

    fn fault(&mut self, method: &str, path: &str) -> Option<Reply> {
        let i = self
            .faults
            .iter()
            .position(|(m, p, _, n)| m == method && path.contains(p.as_str()) && *n > 0)?;
        let fault = &mut self.faults[i];
        fault.3 -= 1;
        Some(Reply::error(
            fault.2,
            "Resource not accessible by integration (injected)",
        ))
    }

    fn api(
        &mut self,
        method: &str,
        path: &str,
        parts: &hyper::http::request::Parts,
        body: &[u8],
        uploads: bool,
    ) -> (String, Reply) {
        let (op, params) = match spec().route(method, path) {
            Ok(found) => found,
            Err(violation) => {
                self.violations.push(violation.clone());
                return ("unknown".into(), Reply::error(404, &violation));
            }
        };
        if uploads != (op.id == "repos/upload-release-asset") {
            let violation = format!("{method} {path}: {} on the wrong host", op.id);
            self.violations.push(violation.clone());
            return (op.id.clone(), Reply::error(404, &violation));
        }
        let query = parse_query(parts.uri.query().unwrap_or(""));
        let content_type = parts
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        let check = spec().check_request(op, &params, &query, content_type, body);
        // Strict: a body property GitHub does not define is a client bug here.
        let mut problems = check.violations;
        problems.extend(check.unknown_properties);
        if !self.authorized(parts) {
            problems.push("no valid `Authorization: Bearer <token>`".into());
        }
        if !problems.is_empty() {
            for p in &problems {
                self.violations
                    .push(format!("{method} {path} ({}): {p}", op.id));
            }
            return (op.id.clone(), Reply::error(422, &problems.join("; ")));
        }
        let call = Call {
            op: &op.id,
            params,
            query: query.into_iter().collect(),
            headers: &parts.headers,
            body,
        };
        let reply = self.dispatch(&call);
        for problem in spec().check_response(op, reply.status, &reply.json) {
            self.violations.push(format!(
                "fake releases bug: {} response {}: {problem}",
                op.id, reply.status
            ));
        }
        (op.id.clone(), reply)
    }

    fn authorized(&self, parts: &hyper::http::request::Parts) -> bool {
        let header = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        header.is_some_and(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("token "))
                .is_some_and(|t| t == self.token)
        })
    }

    fn dispatch(&mut self, call: &Call<'_>) -> Reply {
        let id = |name: &str| call.params.get(name).and_then(|v| v.parse::<u64>().ok());
        match call.op {
            "repos/list-releases" => {
                let all: Vec<Value> = self
                    .releases
                    .iter()
                    .rev()
                    .map(|r| self.release_json(r))
                    .collect();
                Reply::json(200, Value::Array(page(all, &call.query)))
            }
            "repos/create-release" => self.create(call),
            "repos/get-release" => {
                self.with_release(id("release_id"), |s, r| Reply::json(200, s.release_json(r)))
            }
            "repos/get-release-by-tag" => {
                let tag = call.params.get("tag").cloned().unwrap_or_default();
                let found = self
                    .releases
                    .iter()
                    .position(|r| !r.draft && r.tag_name == tag);
                self.with_release(found.map(|i| self.releases[i].id), |s, r| {
                    Reply::json(200, s.release_json(r))
                })
            }
            "repos/update-release" => self.update(id("release_id"), call),
            "repos/list-release-assets" => self.with_release(id("release_id"), |s, r| {
                let all = r.assets.iter().map(|a| s.asset_json(r, a)).collect();
                Reply::json(200, Value::Array(page(all, &call.query)))
            }),
            "repos/upload-release-asset" => self.upload(id("release_id"), call),
            "repos/get-release-asset" => self.get_asset(id("asset_id"), call),
            "repos/delete-release-asset" => {
                let asset = id("asset_id");
                let before: usize = self.releases.iter().map(|r| r.assets.len()).sum();
                for r in &mut self.releases {
                    r.assets.retain(|a| Some(a.id) != asset);
                }
                let after: usize = self.releases.iter().map(|r| r.assets.len()).sum();
                if before == after {
                    Reply::error(404, "Not Found")
                } else {
                    Reply::empty(204)
                }
            }
            other => Reply::error(404, &format!("{other} is not implemented by the fake")),
        }
    }

    fn with_release(
        &mut self,
        id: Option<u64>,
        f: impl FnOnce(&mut State, &Release) -> Reply,
    ) -> Reply {
        match self.releases.iter().find(|r| Some(r.id) == id).cloned() {
            Some(release) => f(self, &release),
            None => Reply::error(404, "Not Found"),
        }
    }

    fn create(&mut self, call: &Call<'_>) -> Reply {
        let body: Value = serde_json::from_slice(call.body).unwrap_or_default();
        let tag = body["tag_name"].as_str().unwrap_or_default().to_owned();
        if self.releases.iter().any(|r| r.tag_name == tag) {
            return Reply::json(
                422,
                json!({"message": "Validation Failed", "documentation_url": DOCS, "status": "422",
                       "errors": [{"resource": "Release", "code": "already_exists", "field": "tag_name"}]}),
            );
        }
        let release = Release {
            id: self.id(),
            name: body["name"].as_str().unwrap_or(&tag).to_owned(),
            target_commitish: body["target_commitish"]
                .as_str()
                .unwrap_or("main")
                .to_owned(),
            draft: body["draft"].as_bool().unwrap_or(false),
            prerelease: body["prerelease"].as_bool().unwrap_or(false),
            make_latest: None,
            tag_name: tag,
            assets: Vec::new(),
        };
        if !release.draft {
            self.publishing(&release);
        }
        let reply = Reply::json(201, self.release_json(&release));
        self.releases.push(release);
        reply
    }

    fn update(&mut self, id: Option<u64>, call: &Call<'_>) -> Reply {
        let body: Value = serde_json::from_slice(call.body).unwrap_or_default();
        let Some(i) = self.releases.iter().position(|r| Some(r.id) == id) else {
            return Reply::error(404, "Not Found");
        };
        let mut release = self.releases[i].clone();
        if let Some(tag) = body["tag_name"].as_str() {
            release.tag_name = tag.to_owned();
        }
        if let Some(p) = body["prerelease"].as_bool() {
            release.prerelease = p;
        }
        let publishing = release.draft && body["draft"] == json!(false);
        if publishing {
            release.draft = false;
            release.make_latest = body["make_latest"].as_str().map(str::to_owned);
            self.publishing(&release);
        }
        self.releases[i] = release.clone();
        Reply::json(200, self.release_json(&release))
    }

    /// What GitHub does on publishing: tag `target_commitish` when the tag is missing.
    fn publishing(&mut self, release: &Release) {
        let Some(git) = &self.git else { return };
        let tag = format!("refs/tags/{}", release.tag_name);
        let has = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(git)
            .args(["rev-parse", "--verify", "--quiet", &tag])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has {
            self.violations.push(format!(
                "published {} before its tag existed: GitHub tagged {} (a commit without the manifest)",
                release.tag_name, release.target_commitish
            ));
            let _ = std::process::Command::new("git")
                .arg("--git-dir")
                .arg(git)
                .args(["update-ref", &tag, &release.target_commitish])
                .status();
        }
    }

    fn upload(&mut self, id: Option<u64>, call: &Call<'_>) -> Reply {
        let name = call.query.get("name").cloned().unwrap_or_default();
        let content_type = call
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let asset_id = self.id();
        let Some(release) = self.releases.iter_mut().find(|r| Some(r.id) == id) else {
            return Reply::error(404, "Not Found");
        };
        if release.assets.iter().any(|a| a.name == name) {
            return Reply::json(
                422,
                json!({"message": "Validation Failed", "documentation_url": DOCS, "status": "422",
                       "errors": [{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}]}),
            );
        }
        let asset = Asset {
            id: asset_id,
            name,
            content_type,
            data: call.body.to_vec(),
        };
        release.assets.push(asset.clone());
        let release = release.clone();
        Reply::json(201, self.asset_json(&release, &asset))
    }

    fn get_asset(&mut self, id: Option<u64>, call: &Call<'_>) -> Reply {
        let found = self.releases.iter().find_map(|r| {
            r.assets
                .iter()
                .find(|a| Some(a.id) == id)
                .map(|a| (r.clone(), a.clone()))
        });
        let Some((release, asset)) = found else {
            return Reply::error(404, "Not Found");
        };
        let accept = call
            .headers
            .get("accept")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if accept.contains("application/octet-stream") {
            Reply::redirect(self.storage_url(asset.id))
        } else {
            Reply::json(200, self.asset_json(&release, &asset))
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn asset(&self, id: u64) -> Option<&Asset> {
        self.releases
            .iter()
            .flat_map(|r| &r.assets)
            .find(|a| a.id == id)
    }

    fn storage_url(&self, id: u64) -> String {
        format!("{}/_storage/{id}?signature=fake", self.base)
    }

    fn api_repo(&self) -> String {
        format!("{}/api/v3/repos/{}/{}", self.base, self.owner, self.repo)
    }

    /// A draft's assets live under `untagged-<id>`, as on GitHub.
    fn download_tag(release: &Release) -> String {
        if release.draft {
            format!("untagged-{:020x}", release.id)
        } else {
            release.tag_name.clone()
        }
    }

    fn release_json(&self, r: &Release) -> Value {
        let mut v = spec().examples["release"]["value"].clone();
        let api = self.api_repo();
        let web = format!("{}/{}/{}", self.base, self.owner, self.repo);
        let assets: Vec<Value> = r.assets.iter().map(|a| self.asset_json(r, a)).collect();
        let fields = json!({
            "id": r.id,
            "node_id": format!("RE_fake{}", r.id),
            "url": format!("{api}/releases/{}", r.id),
            "html_url": format!("{web}/releases/tag/{}", Self::download_tag(r)),
            "assets_url": format!("{api}/releases/{}/assets", r.id),
            "upload_url": format!(
                "{}/api/uploads/repos/{}/{}/releases/{}/assets{{?name,label}}",
                self.base, self.owner, self.repo, r.id
            ),
            "tarball_url": format!("{api}/tarball/{}", r.tag_name),
            "zipball_url": format!("{api}/zipball/{}", r.tag_name),
            "tag_name": r.tag_name,
            "target_commitish": r.target_commitish,
            "name": r.name,
            "body": "",
            "draft": r.draft,
            "prerelease": r.prerelease,
            "created_at": "2026-01-01T00:00:00Z",
            "published_at": if r.draft { Value::Null } else { json!("2026-01-01T00:00:00Z") },
            "assets": assets,
        });
        for (k, val) in fields.as_object().expect("object") {
            v[k] = val.clone();
        }
        v
    }

    fn asset_json(&self, r: &Release, a: &Asset) -> Value {
        let mut v = spec().examples["release-asset"]["value"].clone();
        let fields = json!({
            "id": a.id,
            "node_id": format!("RA_fake{}", a.id),
            "name": a.name,
            "label": Value::Null,
            "content_type": a.content_type,
            "size": a.data.len(),
            "digest": format!("sha256:{}", sha256_hex(&a.data)),
            "state": "uploaded",
            "download_count": 0,
            "url": format!("{}/releases/assets/{}", self.api_repo(), a.id),
            "browser_download_url": format!(
                "{}/{}/{}/releases/download/{}/{}",
                self.base, self.owner, self.repo, Self::download_tag(r), a.name
            ),
        });
        for (k, val) in fields.as_object().expect("object") {
            v[k] = val.clone();
        }
        v
    }
}

/// `per_page`/`page` as GitHub reads them (default 30 per page).
fn page(all: Vec<Value>, query: &BTreeMap<String, String>) -> Vec<Value> {
    let per_page: usize = query
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let page: usize = query.get("page").and_then(|v| v.parse().ok()).unwrap_or(1);
    all.into_iter()
        .skip(per_page * (page.max(1) - 1))
        .take(per_page)
        .collect()
}

fn sha256_hex(data: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sha256sum 2>/dev/null || shasum -a 256"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(data)
        .expect("write");
    let out = child.wait_with_output().expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}
