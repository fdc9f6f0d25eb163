//! `fanout publish` end to end: real runs, pushes to a local bare repository, and the
//! project's loopback fake GitHub API, which checks every request against GitHub's
//! OpenAPI description.

use crate::common;
use crate::fake_github;

use std::path::PathBuf;
use std::time::Instant;

use common::*;
use fake_github::{FakeGitHub, Fault, FaultKind};

const TOKEN: &str = "test-token-7f3a9c-do-not-leak";

/// `tests/support/git_http.py`: git's smart HTTP behind Basic auth on 127.0.0.1.
struct GitHttp {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl GitHttp {
    fn start(t: &TestEnv) -> GitHttp {
        GitHttp::start_with(t, &[])
    }

    /// Over https, with the certificate chain and key in these PEM files.
    fn start_tls(t: &TestEnv, tls: &TestCa) -> GitHttp {
        GitHttp::start_with(t, &[tls.cert.to_str().unwrap(), tls.key.to_str().unwrap()])
    }

    fn start_with(t: &TestEnv, tls: &[&str]) -> GitHttp {
        use std::io::BufRead;
        let log = t.root().join("git-http-credentials.log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/git_http.py");
        let mut child = t
            .command("python3", t.root())
            .args([script, t.root().to_str().unwrap(), log.to_str().unwrap()])
            .args(tls)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("git_http.py prints its port");
        GitHttp { child, port, log }
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test certificate authority and a server certificate it signed for 127.0.0.1, as
/// PEM files: `ca` (the CA's certificate), `cert` and `key` (the server's), and
/// `other_ca`, a CA that signed nothing here.
struct TestCa {
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl TestCa {
    fn new(dir: &std::path::Path) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let authority = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let cert = params.self_signed(&key).unwrap();
            (cert.pem(), Issuer::new(params, key))
        };
        let (ca_pem, issuer) = authority("fanout test CA");
        let (other_pem, _) = authority("another test CA");
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        TestCa {
            ca: write("ca.pem", ca_pem),
            other_ca: write("other-ca.pem", other_pem),
            cert: write("server.pem", cert.pem()),
            key: write("server-key.pem", key.serialize_pem()),
        }
    }
}

struct Setup {
    t: TestEnv,
    gh: FakeGitHub,
    remote: PathBuf,
    run: String,
    report: serde_json::Value,
}

/// A repo with a bare `origin`, and a finished run whose worker 2 failed.
fn setup(models: &str) -> Setup {
    let t = TestEnv::new();
    let remote = t.bare_origin();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'test \"$FANOUT_MODEL\" != bad && echo \"$FANOUT_MODEL\" > out-$FANOUT_WORKER_ID.txt']\n",
        t.worktrees.display()
    ));
    let n = models.split(',').count().to_string();
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            &n,
            "--models",
            models,
            "Improve the docs",
        ])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = report["run_id"].as_str().unwrap().to_owned();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    Setup {
        t,
        gh,
        remote,
        run,
        report,
    }
}

impl Setup {
    fn publish(&self, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
        self.publish_to(&self.gh.url(), TOKEN, extra)
    }

    /// `fanout publish` against the API at `url`, with `token` in `$GITHUB_TOKEN`.
    fn publish_to(
        &self,
        url: &str,
        token: &str,
        extra: &[&str],
    ) -> (Option<i32>, serde_json::Value, String) {
        self.publish_with_env(url, token, extra, &[])
    }

    /// [`Setup::publish_to`] with `env` added to fanout's environment.
    fn publish_with_env(
        &self,
        url: &str,
        token: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> (Option<i32>, serde_json::Value, String) {
        let mut args = vec![
            "publish",
            "--json",
            "--run",
            &self.run,
            "--repo",
            "octo/demo",
            "--api-url",
            url,
            "--pace-ms",
            "0",
            "--rate-limit-wait",
            "0.2",
            "--server-error-backoff",
            "0.05",
        ];
        args.extend_from_slice(extra);
        let out = self
            .t
            .fanout(&args)
            .env("GITHUB_TOKEN", token)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "publish printed no JSON ({e}):\n{}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (out.status.code(), v, stderr)
    }

    fn remote_branch(&self, branch: &str) -> Option<String> {
        let out = self
            .t
            .command("git", self.t.root())
            .args([
                "--git-dir",
                self.remote.to_str().unwrap(),
                "rev-parse",
                "--verify",
                "-q",
            ])
            .arg(format!("refs/heads/{branch}"))
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn ops(report: &serde_json::Value) -> Vec<String> {
        crate::common::publish_ops(report)
    }
}

/// `--token` still works, with a warning: a command line is readable by every process
/// of the machine.
#[test]
fn a_token_on_the_command_line_is_deprecated() {
    let s = setup("a");
    let url = s.gh.url();
    let out =
        s.t.fanout(&[
            "publish",
            "--json",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "--token",
            TOKEN,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--token is deprecated"), "{stderr}");
    assert!(stderr.contains("GITHUB_TOKEN"), "{stderr}");
    assert_eq!(s.gh.pulls().len(), 1);
}

#[test]
fn one_pr_per_successful_branch_pushed_with_exact_commits() {
    let s = setup("good,bad,fine");
    assert_eq!(s.report["totals"]["success"], 2);
    let (code, report, _) = s.publish(&[
        "--label",
        "fanout",
        "--label",
        "ai",
        "--reviewer",
        "octocat",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(Setup::ops(&report), ["created", "skipped", "created"]);
    assert_eq!(report["results"][1]["publish"]["reason"], "status failed");

    let pulls = s.gh.pulls();
    assert_eq!(pulls.len(), 2);
    for (r, pr) in [&report["results"][0], &report["results"][2]]
        .into_iter()
        .zip(&pulls)
    {
        let branch = r["branch"].as_str().unwrap();
        // the remote holds exactly the worker's commit
        assert_eq!(s.remote_branch(branch).as_deref(), r["commit"].as_str());
        assert_eq!(pr.head_ref, branch);
        assert_eq!(pr.base_ref, "main");
        assert_eq!(pr.labels, ["fanout", "ai"]);
        assert_eq!(pr.requested_reviewers, ["octocat"]);
        assert_eq!(r["publish"]["number"], pr.number);
        assert_eq!(r["publish"]["url"].as_str(), Some(pr.html_url.as_str()));
        let body = pr.body.as_deref().unwrap();
        let id = r["worker_id"].as_u64().unwrap();
        assert!(
            body.starts_with(&format!("<!-- fanout:run={} worker={id} -->", s.run)),
            "{body}"
        );
        assert!(body.contains("> Improve the docs"), "{body}");
        assert!(body.contains(&format!("- `out-{id}.txt`")), "{body}");
        assert!(pr.title.starts_with("Improve the docs ["), "{}", pr.title);
    }
    // nothing for the failed worker
    assert_eq!(
        s.remote_branch(report["results"][1]["branch"].as_str().unwrap()),
        None
    );
    // results.json on disk carries the outcomes too
    let on_disk = s.t.results(&s.run);
    assert_eq!(
        on_disk["results"][0]["publish"],
        report["results"][0]["publish"]
    );
    let md = std::fs::read_to_string(s.t.run_dir(&s.run).join("summary.md")).unwrap();
    assert!(md.contains(&format!("[#{}]", pulls[0].number)), "{md}");
    s.gh.assert_no_violations();
}

#[test]
fn publishing_again_updates_and_never_duplicates() {
    let s = setup("a,b");
    let (_, first, _) = s.publish(&[]);
    assert_eq!(Setup::ops(&first), ["created", "created"]);
    let (code, second, _) = s.publish(&[]);
    assert_eq!(code, Some(0));
    assert_eq!(Setup::ops(&second), ["unchanged", "unchanged"]);
    assert_eq!(s.gh.pulls().len(), 2);
    // a new Actions run of the same results: the body links the new run → updated
    let url = s.gh.url();
    let out =
        s.t.fanout(&[
            "publish",
            "--json",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_REPOSITORY", "octo/demo")
        .env("GITHUB_RUN_ID", "777")
        .output()
        .unwrap();
    let third: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&third), ["updated", "updated"]);
    let pulls = s.gh.pulls();
    assert_eq!(pulls.len(), 2, "no duplicate pull requests");
    assert!(
        pulls[0]
            .body
            .as_deref()
            .unwrap()
            .contains("/octo/demo/actions/runs/777")
    );
    assert_eq!(
        third["results"][0]["publish"]["number"],
        first["results"][0]["publish"]["number"]
    );
    s.gh.assert_no_violations();
}

#[test]
fn a_branch_someone_else_moved_is_not_overwritten() {
    let s = setup("a");
    let branch = s.report["results"][0]["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    // someone pushes their own commit to that branch name first
    s.t.git(&["push", "-q", "origin", &format!("main:refs/heads/{branch}")]);
    let theirs = s.remote_branch(&branch).unwrap();
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(3));
    let p = &report["results"][0]["publish"];
    assert_eq!(p["operation"], "failed");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("which fanout did not push"),
        "{p}"
    );
    assert_eq!(s.remote_branch(&branch), Some(theirs));
    assert!(s.gh.pulls().is_empty());
}

#[test]
fn server_error_then_success_creates_one_pr() {
    let s = setup("a");
    s.gh.inject(Fault::new("POST", "/pulls", FaultKind::Status(500)));
    s.gh.inject(Fault::new("GET", "/pulls", FaultKind::Status(502)));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(Setup::ops(&report), ["created"]);
    assert_eq!(s.gh.pulls().len(), 1);
    assert!(s.gh.pending_faults().is_empty());
    s.gh.assert_no_violations();
}

/// A 5xx is said once, by fanout (which request, which attempt, why), in plain text:
/// octocrab's own `ERROR` lines, with their terminal colour codes, never reach stderr
/// at the default log level.
#[test]
fn a_server_error_is_said_by_fanout_alone_without_colour_codes() {
    let s = setup("a");
    s.gh.inject(Fault::new("GET", "/pulls", FaultKind::Status(502)));
    let (code, report, stderr) = s.publish(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(Setup::ops(&report), ["created"]);
    assert!(
        stderr.contains("attempt 1 of 6 failed (GitHub answered 502"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "colour codes: {stderr:?}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
}

#[test]
fn secondary_rate_limit_is_honoured_from_retry_after() {
    let s = setup("a");
    s.gh.inject(Fault::new(
        "POST",
        "/pulls",
        FaultKind::SecondaryRateLimit {
            retry_after_secs: 1,
        },
    ));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(0), "{report}");
    let creates: Vec<Instant> =
        s.gh.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
            .map(|r| r.at)
            .collect();
    assert_eq!(creates.len(), 2);
    // the retry came after the server's retry-after, not before
    assert!(creates[1].duration_since(creates[0]).as_secs_f64() >= 0.95);
    assert_eq!(s.gh.pulls().len(), 1);
}

#[test]
fn primary_rate_limit_and_429_are_retried() {
    let s = setup("a,b");
    s.gh.inject(Fault::new(
        "GET",
        "/pulls",
        FaultKind::PrimaryRateLimit { reset_in_secs: 0 },
    ));
    s.gh.inject(Fault::new(
        "POST",
        "/pulls",
        FaultKind::TooManyRequests {
            retry_after_secs: 0,
        },
    ));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(Setup::ops(&report), ["created", "created"]);
    assert!(s.gh.pending_faults().is_empty());
}

#[test]
fn connection_dropped_after_a_create_makes_no_duplicate() {
    let s = setup("a");
    s.gh.inject(Fault::new("POST", "/pulls", FaultKind::DropAfterProcessing));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(0), "{report}");
    let p = &report["results"][0]["publish"];
    assert_eq!(p["operation"], "created");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("confirmed after an unclear answer"),
        "{p}"
    );
    assert_eq!(s.gh.pulls().len(), 1, "exactly one pull request");
    let creates =
        s.gh.requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
            .count();
    assert_eq!(creates, 1, "the create was not re-sent");
}

#[test]
fn already_exists_race_updates_the_existing_pr() {
    let s = setup("a");
    let branch = s.report["results"][0]["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    // Another process opened the PR after our lookup: hide it from the first lookup.
    let n =
        s.gh.add_pull(&format!("octo:{branch}"), "main", "opened elsewhere");
    s.gh.inject(Fault::new("GET", "/pulls", FaultKind::HideOpenPulls));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(0), "{report}");
    let p = &report["results"][0]["publish"];
    assert_eq!(p["operation"], "updated");
    assert_eq!(p["number"], n);
    let pulls = s.gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(
        pulls[0].title.starts_with("Improve the docs"),
        "{}",
        pulls[0].title
    );
    s.gh.assert_no_violations();
}

#[test]
fn draft_refused_is_retried_as_ready_for_review() {
    let s = setup("a");
    s.gh.inject(Fault::new("POST", "/pulls", FaultKind::DraftNotSupported));
    let (code, report, _) = s.publish(&["--draft"]);
    assert_eq!(code, Some(0), "{report}");
    let p = &report["results"][0]["publish"];
    assert_eq!(p["operation"], "created");
    assert!(
        p["reason"]
            .as_str()
            .unwrap()
            .contains("draft pull requests are not supported")
    );
    let pulls = s.gh.pulls();
    assert_eq!(pulls.len(), 1);
    assert!(!pulls[0].draft);
}

#[test]
fn actions_not_allowed_to_create_prs_gives_a_compare_link() {
    let s = setup("a");
    s.gh.inject(Fault::new(
        "POST",
        "/pulls",
        FaultKind::ActionsCannotCreatePr,
    ));
    let summary = s.t.root().join("step-summary.md");
    let url = s.gh.url();
    let out =
        s.t.fanout(&[
            "publish",
            "--json",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &report["results"][0]["publish"];
    assert_eq!(p["operation"], "failed");
    let reason = p["reason"].as_str().unwrap();
    assert!(
        reason.contains("Allow GitHub Actions to create and approve pull requests"),
        "{reason}"
    );
    let branch = report["results"][0]["branch"].as_str().unwrap();
    let compare = format!("https://github.com/octo/demo/compare/main...{branch}?expand=1");
    assert_eq!(p["compare_url"], compare.as_str());
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains(&format!("[open by hand]({compare})")), "{md}");
    // the branch was still pushed: nothing is lost
    assert!(s.remote_branch(branch).is_some());
}

/// The API of a loopback port nothing listens on: every connection is refused.
fn refused_api() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Publishing that cannot reach GitHub, or whose token GitHub rejects, is fanout's
/// failure (exit 4, the documented "publishing failed"), not "no worker succeeded"
/// (3): it says why once, stops asking, and results.json keeps what happened.
#[test]
fn an_unreachable_api_or_a_rejected_token_exits_4() {
    let s = setup("a,b");
    let (code, report, stderr) = s.publish_to(&refused_api(), TOKEN, &["--max-attempts", "2"]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("cannot reach GitHub"), "{stderr}");
    assert!(
        stderr.contains("fanout publish"),
        "says how to go on: {stderr}"
    );
    assert_eq!(Setup::ops(&report), ["failed", "failed"]);
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.t.run_dir(&s.run).join("results.json")).unwrap())
            .unwrap();
    assert_eq!(Setup::ops(&on_disk), ["failed", "failed"]);

    let (code, report, stderr) = s.publish_to(&s.gh.url(), "not-the-token", &[]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(
        stderr.contains("401") && stderr.contains("Bad credentials"),
        "{stderr}"
    );
    assert!(
        stderr.contains("GITHUB_TOKEN"),
        "names the token to check: {stderr}"
    );
    assert_eq!(Setup::ops(&report), ["failed", "failed"]);
    let asked = s.gh.requests().len();
    assert_eq!(asked, 1, "stopped asking after the token was rejected");

    s.gh.inject(Fault::new("", "", FaultKind::Status(403)).times(50));
    let (code, _, stderr) = s.publish(&[]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("403"), "{stderr}");
    assert!(s.gh.pulls().is_empty());
}

/// A 403 on an extra (labels here) is that pull request's note, not a rejected token:
/// publishing goes on for the others and exits 0.
#[test]
fn a_403_on_labels_does_not_stop_publishing() {
    let s = setup("a,b");
    s.gh.inject(Fault::new("POST", "/labels", FaultKind::Status(403)));
    let (code, report, stderr) = s.publish(&["--label", "fanout"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(Setup::ops(&report), ["created", "created"]);
    let reason = report["results"][0]["publish"]["reason"].as_str().unwrap();
    assert!(reason.contains("labels not added"), "{reason}");
    assert_eq!(s.gh.pulls()[1].labels, ["fanout"]);
}

/// `run --publish` exits 4 too when GitHub cannot be reached, after printing the run's
/// table: the run's work is done and kept, only publishing failed.
/// `fanout run -q --publish` of an agent that writes a file, the config's `extra`
/// settings after its own, publishing to the API at `api` with the token; `args` after.
fn run_publishing(t: &TestEnv, extra: &str, api: &str, args: &[&str]) -> std::process::Output {
    t.bare_origin();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'echo hi > out-$FANOUT_WORKER_ID.txt']\n{extra}",
        t.worktrees.display()
    ));
    let cfg = cfg.to_str().unwrap();
    let mut all = vec!["--config", cfg, "run", "-q", "--publish"];
    all.extend(["--repo", "octo/demo", "--api-url", api]);
    all.extend_from_slice(args);
    t.fanout(&all).env("GITHUB_TOKEN", TOKEN).output().unwrap()
}

#[test]
fn run_publish_exits_4_when_github_cannot_be_reached() {
    let t = TestEnv::new();
    let api = refused_api();
    let out = run_publishing(
        &t,
        "",
        &api,
        &[
            "-w",
            "1",
            "--max-attempts",
            "2",
            "--server-error-backoff",
            "0.05",
            "Improve the docs",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
    assert!(stderr.contains("cannot reach GitHub"), "{stderr}");
    assert!(
        stdout.contains("results: "),
        "the run's table is still shown: {stdout}"
    );
}

/// A server that accepts connections and never answers cannot hold publishing past
/// its deadline: each request gives up after the request timeout, each retry says
/// which request, which attempt and why, and when the deadline passes publishing
/// stops with exit 4 naming it. (The outer bound only keeps a broken build from
/// hanging the suite; the assertions are on what fanout says and does.)
#[test]
fn a_server_that_never_answers_is_bounded_by_the_publish_deadline() {
    let s = setup("a,b");
    // Listening, never accepting: connections complete and then hear nothing.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}", silent.local_addr().unwrap());
    let url = api.clone();
    let mut child =
        s.t.fanout(&[
            "publish",
            "--json",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "--server-error-backoff",
            "0.05",
            "--request-timeout",
            "1s",
            "--publish-timeout",
            "4s",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_child(&mut child, std::time::Duration::from_secs(120));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("deadline of 4s"), "{stderr}");
    assert!(stderr.contains("--publish-timeout"), "{stderr}");
    assert!(
        stderr.contains("GET /repos/octo/demo/pulls") && stderr.contains("attempt 1 of 6"),
        "each retry says which request and which attempt: {stderr}"
    );
    assert!(stderr.contains("no answer within 1s"), "and why: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&report), ["failed", "failed"]);
    drop(silent);
}

#[test]
fn one_workers_failure_never_stops_the_others() {
    let s = setup("a,b,c");
    s.gh.inject(Fault::new("POST", "/pulls", FaultKind::Status(422)));
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(1));
    assert_eq!(Setup::ops(&report), ["failed", "created", "created"]);
}

#[test]
fn tokens_never_leak_into_reports_or_logs_and_are_masked_in_actions() {
    let s = setup("a");
    let url = s.gh.url();
    let summary = s.t.root().join("step-summary.md");
    let outputs = s.t.root().join("outputs.txt");
    let out =
        s.t.fanout(&[
            "publish",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &outputs)
        .env("FANOUT_LOG", "debug")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Workflow commands go to stderr, with every other line the runner may act on.
    // masked once: the personal token is the token fanout pushes with
    let mask = format!("::add-mask::{TOKEN}");
    assert_eq!(stderr.matches(&mask).count(), 1, "{stderr}");
    let without_masks: String = stderr
        .lines()
        .filter(|l| !l.starts_with("::add-mask::"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!without_masks.contains(TOKEN), "{stderr}");
    assert!(!stdout.contains(TOKEN), "{stdout}");
    let dir = s.t.run_dir(&s.run);
    for f in ["results.json", "summary.md"] {
        assert!(
            !std::fs::read_to_string(dir.join(f))
                .unwrap()
                .contains(TOKEN),
            "{f}"
        );
    }
    assert!(!std::fs::read_to_string(&summary).unwrap().contains(TOKEN));
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    assert!(outputs.starts_with("pull-requests=[{"), "{outputs}");
    assert!(!outputs.contains(TOKEN));
    // and the agents of the run never saw it either (see tests/run.rs)
}

#[test]
fn github_app_jwt_installation_token_then_api_calls() {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let s = setup("a");
    let mut rng = rsa::rand_core::OsRng;
    let key = rsa::RsaPrivateKey::new(&mut rng, 2048).unwrap();
    let private_pem = key.to_pkcs8_pem(LineEnding::LF).unwrap();
    let public_pem = key
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    s.gh.set_app(31337, &public_pem);
    let key_file = s.t.root().join("app.pem");
    std::fs::write(&key_file, private_pem.as_bytes()).unwrap();
    let url = s.gh.url();
    // The push goes over smart HTTP with Basic auth, like GitHub's.
    let git_http = GitHttp::start(&s.t);
    let remote_url = format!("http://127.0.0.1:{}/remote.git", git_http.port);
    let out =
        s.t.fanout(&[
            "publish",
            "--json",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "--app-id",
            "31337",
            "--app-private-key",
            key_file.to_str().unwrap(),
            "--remote",
            &remote_url,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&report), ["created"], "{report}");
    let issued = s.gh.issued_tokens();
    assert_eq!(issued.len(), 1);
    // the installation token authorized the push, and the branch arrived
    let creds = std::fs::read_to_string(&git_http.log).unwrap();
    assert!(!creds.is_empty());
    assert!(
        creds
            .lines()
            .all(|l| l == format!("x-access-token:{}", issued[0])),
        "{creds}"
    );
    let branch = report["results"][0]["branch"].as_str().unwrap();
    assert_eq!(
        s.remote_branch(branch).as_deref(),
        report["results"][0]["commit"].as_str()
    );
    let requests = s.gh.requests();
    let ops: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.operation_id.as_deref())
        .collect();
    assert_eq!(
        &ops[..2],
        [
            "apps/get-repo-installation",
            "apps/create-installation-access-token"
        ]
    );
    for r in requests
        .iter()
        .filter(|r| r.path.starts_with("/repos/octo/demo/pulls"))
    {
        let auth = r.headers.get("authorization").unwrap();
        assert_eq!(auth, &format!("Bearer {}", issued[0]));
    }
    s.gh.assert_no_violations();
    // a wrong key is refused with a clear message
    let other = rsa::RsaPrivateKey::new(&mut rng, 2048).unwrap();
    std::fs::write(
        &key_file,
        other.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
    )
    .unwrap();
    let out =
        s.t.fanout(&[
            "publish",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--app-id",
            "31337",
            "--app-private-key",
            key_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GitHub App 31337: no installation on octo/demo (HTTP 401"),
        "{err}"
    );
}

#[test]
fn missing_credentials_or_repository_are_usage_errors() {
    let s = setup("a");
    let out =
        s.t.fanout(&["publish", "--run", &s.run, "--repo", "octo/demo"])
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("publishing needs a token"));
    let out =
        s.t.fanout(&["publish", "--run", &s.run])
            .env("GITHUB_TOKEN", TOKEN)
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --repo OWNER/NAME"));
}

#[test]
fn run_with_publish_and_partial_workers_included_on_request() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestEnv::new();
    t.bare_origin();
    // an agent that edits a file, and reports partial on model `p`
    let agent = t.root().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\necho \"$FANOUT_MODEL\" > \"out-$FANOUT_WORKER_ID.txt\"\nif [ \"$FANOUT_MODEL\" = p ]; then echo '{\"status\":\"partial\",\"reason\":\"max steps\"}' > \"$FANOUT_RESULT\"; fi\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: a\nworktree_dir: '{}'\nagents:\n  a:\n    command: ['{}']\npublish:\n  labels: [from-config]\n",
        t.worktrees.display(),
        agent.display()
    ));
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let url = gh.url();
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-w",
            "2",
            "--models",
            "s,p",
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "task",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .output()
        .unwrap();
    // one success, one partial: the run exits 1; publish created one PR
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&report), ["created", "skipped"]);
    assert!(
        report["results"][1]["publish"]["reason"]
            .as_str()
            .unwrap()
            .contains("--include partial")
    );
    assert_eq!(gh.pulls().len(), 1);
    assert_eq!(gh.pulls()[0].labels, ["from-config"]);
    // publishing the same run again with partial included adds exactly one PR
    let run = report["run_id"].as_str().unwrap();
    let out = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "publish",
            "--json",
            "--run",
            run,
            "--include",
            "partial",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&again), ["unchanged", "created"]);
    assert_eq!(gh.pulls().len(), 2);
    gh.assert_no_violations();
}

/// Rewrite the run's `results.json` as an agent (or its daemon) could — one that ran
/// without the sandbox and read fanout's record key, so it signs its forgery too
/// (a forgery without the key is refused outright: tests/records.rs).
fn forge(s: &Setup, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = s.t.run_dir(&s.run).join("results.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    sign_like_fanout(&s.t, &path);
}

/// Publish trusts nothing in results.json: a branch that is not the plan's (`main`), a
/// commit that does not descend from the run's base, a commit that does not exist —
/// each is refused, and nothing is pushed.
#[test]
fn forged_results_push_nothing_outside_the_plan() {
    let s = setup("a");
    let mine = s.report["results"][0]["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    let main_before = s.remote_branch("main");
    let orphan = {
        let tree = s.t.git(&["rev-parse", "HEAD^{tree}"]);
        s.t.git(&["commit-tree", tree.trim(), "-m", "unrelated history"])
    };
    let cases = [
        ("is not the plan's branch", "branch", "main"),
        (
            "does not descend from the run's base",
            "commit",
            orphan.trim(),
        ),
        (
            "is not in this repository",
            "commit",
            "1234567890123456789012345678901234567890",
        ),
    ];
    for (why, field, value) in cases {
        forge(&s, |v| {
            v["results"][0]["branch"] = s.report["results"][0]["branch"].clone();
            v["results"][0]["commit"] = mine.as_str().into();
            v["results"][0][field] = value.into();
        });
        let (code, report, stderr) = s.publish(&[]);
        assert_eq!(code, Some(3), "{why}: {stderr}");
        let p = &report["results"][0]["publish"];
        assert_eq!(p["operation"], "failed", "{why}: {p}");
        assert!(p["reason"].as_str().unwrap().contains(why), "{why}: {p}");
        assert_eq!(s.remote_branch("main"), main_before, "{why}");
    }
    let branch = s.report["results"][0]["branch"].as_str().unwrap();
    assert_eq!(s.remote_branch(branch), None);
    assert!(s.gh.pulls().is_empty());
}

/// The lease comes from the remote, not from results.json: a branch someone else
/// moved stays theirs even when results.json claims fanout pushed their commit.
#[test]
fn the_lease_is_asked_from_the_remote() {
    let s = setup("a");
    let (code, _, _) = s.publish(&[]);
    assert_eq!(code, Some(0));
    let branch = s.report["results"][0]["branch"]
        .as_str()
        .unwrap()
        .to_owned();
    // someone replaces the branch with unrelated work of theirs …
    let theirs = {
        let tree = s.t.git(&["rev-parse", "HEAD^{tree}"]);
        s.t.git(&["commit-tree", tree.trim(), "-m", "someone else's"])
    };
    let theirs = theirs.trim().to_owned();
    s.t.git(&[
        "push",
        "-q",
        "-f",
        "origin",
        &format!("{theirs}:refs/heads/{branch}"),
    ]);
    // … and results.json is made to say fanout pushed it
    forge(&s, |v| {
        v["results"][0]["publish"]["pushed_commit"] = theirs.as_str().into()
    });
    let (code, report, _) = s.publish(&[]);
    assert_eq!(code, Some(3));
    let reason = report["results"][0]["publish"]["reason"].as_str().unwrap();
    assert!(reason.contains("which fanout did not push"), "{reason}");
    assert_eq!(s.remote_branch(&branch).as_deref(), Some(theirs.as_str()));
}

/// The push goes where the repository's remote pointed when the run started: an
/// `origin` repointed since (url and pushurl) is not followed, and a URL the config
/// rewrites (`pushInsteadOf`) is not pushed at all.
#[test]
fn the_push_url_is_the_one_recorded_when_the_run_started() {
    let s = setup("a");
    let other = s.t.root().join("other.git");
    s.t.git_in(
        s.t.root(),
        &["init", "-q", "--bare", other.to_str().unwrap()],
    );
    let other_s = other.to_str().unwrap();
    s.t.git(&["remote", "set-url", "origin", other_s]);
    s.t.git(&["config", "remote.origin.pushurl", other_s]);
    let (code, report, stderr) = s.publish(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    let branch = report["results"][0]["branch"].as_str().unwrap();
    assert_eq!(
        s.remote_branch(branch).as_deref(),
        report["results"][0]["commit"].as_str()
    );
    let in_other = s.t.git_in(
        s.t.root(),
        &["--git-dir", other_s, "for-each-ref", "--format=%(refname)"],
    );
    assert_eq!(in_other, "", "pushed to the repointed origin");

    // --remote URL, rewritten by the repository's config: refused, nothing pushed
    let git_http = GitHttp::start(&s.t);
    let trap = format!("http://127.0.0.1:{}/other.git", git_http.port);
    let remote = s.remote.to_str().unwrap().to_owned();
    s.t.git(&["config", &format!("url.{trap}.pushInsteadOf"), &remote]);
    forge(&s, |v| v["results"][0]["publish"] = serde_json::Value::Null);
    s.t.git_in(s.t.root(), &["--git-dir", &remote, "branch", "-D", branch]);
    let (code, report, _) = s.publish(&["--remote", &remote]);
    assert_eq!(code, Some(3));
    let reason = report["results"][0]["publish"]["reason"].as_str().unwrap();
    assert!(reason.contains("rewrites"), "{reason}");
    assert_eq!(s.remote_branch(branch), None);
    let creds = std::fs::read_to_string(&git_http.log).unwrap_or_default();
    assert!(!creds.contains(TOKEN), "{creds}");
    assert_eq!(
        s.t.git_in(
            s.t.root(),
            &["--git-dir", other_s, "for-each-ref", "--format=%(refname)"]
        ),
        ""
    );
}

/// Over https fanout's own client pushes, checking the server's certificate against
/// the CA certificates `SSL_CERT_FILE` names: signed by another CA, it is refused
/// before any request (nothing pushed, no credential sent); signed by that CA, the
/// push goes through with the token.
#[test]
fn pushes_over_https_checking_the_certificate_against_ssl_cert_file() {
    let s = setup("a");
    let tls = TestCa::new(s.t.root());
    let git_http = GitHttp::start_tls(&s.t, &tls);
    let url = format!("https://127.0.0.1:{}/remote.git", git_http.port);
    let publish = |ca: &std::path::Path, log: &str| {
        let ca = ca.to_str().unwrap();
        s.publish_with_env(
            &s.gh.url(),
            TOKEN,
            &["--remote", &url],
            &[("SSL_CERT_FILE", ca), ("FANOUT_LOG", log)],
        )
    };

    let (code, report, stderr) = publish(&tls.other_ca, "warn");
    assert_eq!(code, Some(3), "{report}\n{stderr}");
    let reason = report["results"][0]["publish"]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!(
            "{url}/info/refs?service=git-receive-pack: the server's certificate is not trusted"
        )),
        "{reason}"
    );
    let branch = report["results"][0]["branch"].as_str().unwrap().to_owned();
    assert_eq!(s.remote_branch(&branch), None);
    let creds = std::fs::read_to_string(&git_http.log).unwrap_or_default();
    assert_eq!(
        creds, "",
        "a credential went to a server fanout did not trust"
    );

    let (code, report, stderr) = publish(&tls.ca, "trace");
    assert_eq!(code, Some(0), "{report}\n{stderr}");
    assert_eq!(Setup::ops(&report), ["created"], "{report}");
    assert_eq!(
        s.remote_branch(&branch).as_deref(),
        report["results"][0]["commit"].as_str()
    );
    let creds = std::fs::read_to_string(&git_http.log).unwrap();
    assert!(!creds.is_empty());
    assert!(
        creds
            .lines()
            .all(|l| l == format!("x-access-token:{TOKEN}")),
        "{creds}"
    );
    // Even FANOUT_LOG=trace shows no request as sent (a hex dump of its bytes starts
    // with "GET " or "POST"), so never its Authorization header.
    assert!(
        stderr.contains("hyper_util::client::legacy::connect::http")
            && stderr.contains("connecting to 127.0.0.1"),
        "the HTTP client logged nothing"
    );
    for dumped in ["4745 5420", "504f 5354", TOKEN] {
        assert!(!stderr.contains(dumped), "{dumped} in the log:\n{stderr}");
    }
}

/// An ssh remote (`host:path`) is pushed with the hardened git CLI and the user's ssh
/// setup (here a stand-in ssh that runs git's receive-pack on this machine), with the
/// same lease; no token is involved.
#[test]
fn ssh_remotes_are_pushed_with_the_users_ssh() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestEnv::new();
    let remote = t.bare_origin();
    let ssh = t.root().join("fake-ssh");
    let log = t.root().join("ssh.log");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\n# stand-in for ssh: HOST COMMAND… → run COMMAND here\necho \"$@\" >> '{}'\nshift\nexec sh -c \"$*\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    t.git(&[
        "remote",
        "set-url",
        "origin",
        &format!("fake-host:{}", remote.display()),
    ]);
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'echo hi > out-$FANOUT_WORKER_ID.txt']\n",
        t.worktrees.display()
    ));
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let url = gh.url();
    let cfg_s = cfg.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            cfg_s,
            "run",
            "--json",
            "-w",
            "1",
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ];
        args.extend_from_slice(extra);
        args.push("say hi");
        t.fanout(&args)
            .env("GITHUB_TOKEN", TOKEN)
            .env("GIT_SSH_COMMAND", ssh.to_str().unwrap())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report["results"][0];
    assert_eq!(r["publish"]["operation"], "created", "{r:#}");
    let branch = r["branch"].as_str().unwrap();
    let on_remote = t.git_in(
        t.root(),
        &["--git-dir", remote.to_str().unwrap(), "rev-parse", branch],
    );
    assert_eq!(on_remote.trim(), r["commit"].as_str().unwrap());
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("git-receive-pack"), "{said}");
    assert!(!said.contains(TOKEN), "{said}");
    assert_eq!(gh.pulls().len(), 1);
}

/// A run of a fast worker and a slow one, publishing with `when` (`None`: the config
/// says nothing): the slow agent waits (at most two minutes) for the file `gate` (in
/// the directory agents may use besides their worktree),
/// which the test writes once it has seen what it waits for, and puts that file's
/// text in its change (`slow.txt`). Returns the spawned fanout and its output file
/// (`$GITHUB_OUTPUT`).
fn fast_and_slow(
    t: &TestEnv,
    gh: &FakeGitHub,
    when: Option<&str>,
    gate: &std::path::Path,
) -> (std::process::Child, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    t.bare_origin();
    let agent = t.root().join("agent.sh");
    let gate = gate.display();
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncase \"$FANOUT_TASK\" in\n  slow*)\n    i=0\n    while [ ! -e '{gate}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n    if [ -e '{gate}' ]; then cat '{gate}' > slow.txt; else echo 'nothing seen' > slow.txt; fi ;;\n  *) echo fast > fast.txt ;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    // `when`, then any top-level settings after a line break (`as-ready\nsandbox: off`).
    let when = when.map_or(String::new(), |w| format!("publish:\n  when: {w}\n"));
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: a\n  workers: 2\nworktree_dir: '{}'\nagents:\n  a:\n    command: ['{}']\n    writable: ['{}']\n{when}",
        t.worktrees.display(),
        agent.display(),
        t.shared().display()
    ));
    let outputs = t.root().join("github-output");
    let url = gh.url();
    let child = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-t",
            "fast task",
            "-t",
            "slow task",
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
        ])
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_OUTPUT", &outputs)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, outputs)
}

/// The `pull-requests` output: each pull request's worker id and operation.
fn pull_request_output(outputs: &std::path::Path) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(outputs).unwrap();
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("pull-requests="))
        .expect("a pull-requests output");
    let prs: Vec<serde_json::Value> = serde_json::from_str(line).unwrap();
    prs.iter()
        .map(|p| {
            let id = p["worker_id"].as_u64().unwrap();
            (id, p["operation"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// `publish.when: as-ready`: the fast worker's pull request is opened while the slow
/// worker still runs (its agent waits until the test has seen that pull request on
/// the fake GitHub), and the end-of-run publish neither pushes nor opens it again:
/// the report, `results.json` and the `pull-requests` output say `created` once for
/// each worker.
#[test]
fn as_ready_publishes_a_fast_worker_while_a_slow_one_runs() {
    let t = TestEnv::new();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let gate = t.shared().join("fast-pull-request-seen");
    let (mut child, outputs) = fast_and_slow(&t, &gh, Some("as-ready"), &gate);
    let seen = wait_until(std::time::Duration::from_secs(120), || {
        !gh.pulls().is_empty()
    });
    if !seen {
        let _ = child.kill();
    }
    assert!(seen, "no pull request while the slow worker ran");
    let early = gh.pulls();
    assert_eq!(early.len(), 1, "only the fast worker's: {early:?}");
    std::fs::write(&gate, format!("saw #{}\n", early[0].number)).unwrap();
    let status = wait_child(&mut child, std::time::Duration::from_secs(180));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("worker #1 published as ready: created"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&report), ["created", "created"]);
    let fast = &report["results"][0];
    assert_eq!(fast["task"], "fast task");
    assert_eq!(fast["publish"]["number"], early[0].number);
    assert_eq!(fast["branch"].as_str(), Some(early[0].head_ref.as_str()));
    // The slow worker saw the fast worker's pull request before it finished.
    let slow_branch = report["results"][1]["branch"].as_str().unwrap();
    let said = t.git(&["show", &format!("{slow_branch}:slow.txt")]);
    assert_eq!(said.trim(), format!("saw #{}", early[0].number));
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert_ne!(pulls[0].head_ref, pulls[1].head_ref);
    let requests = gh.requests();
    let creates = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pulls"))
        .count();
    assert_eq!(creates, 2, "each pull request created once");
    // Each branch's pull request is looked up once: the end-of-run publish left the
    // fast worker's alone.
    for pr in &pulls {
        let lookups = requests
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/pulls"))
            .filter(|r| r.query.get("head") == Some(&format!("octo:{}", pr.head_ref)))
            .count();
        assert_eq!(lookups, 1, "{} handled once", pr.head_ref);
    }
    let run = report["run_id"].as_str().unwrap();
    assert_eq!(Setup::ops(&t.results(run)), ["created", "created"]);
    assert_eq!(
        pull_request_output(&outputs),
        [(1, "created".to_owned()), (2, "created".to_owned())]
    );
    gh.assert_no_violations();
}

/// Without `as-ready`, nothing is published while the run goes on: once the fast
/// worker's result is recorded, the fake GitHub still has no pull request while the
/// slow worker runs; both are opened after the run.
#[test]
fn without_as_ready_nothing_is_published_before_the_run_ends() {
    let stderr = nothing_published_before_the_end(None);
    assert!(!stderr.contains("as ready"), "{stderr}");
}

#[test]
fn as_ready_without_the_sandbox_publishes_at_the_end_and_says_why() {
    let stderr = nothing_published_before_the_end(Some("as-ready\nsandbox: off"));
    assert!(
        stderr.contains("publish.when: as-ready needs the sandbox"),
        "{stderr}"
    );
    assert!(!stderr.contains("published as ready"), "{stderr}");
}

/// Run the fast and the slow worker with `when`: the fast one's pull request must not
/// appear while the slow one runs; both are created at the end. Returns stderr.
fn nothing_published_before_the_end(when: Option<&str>) -> String {
    let t = TestEnv::new();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let gate = t.shared().join("fast-worker-done");
    let (mut child, outputs) = fast_and_slow(&t, &gh, when, &gate);
    let recorded = wait_until(std::time::Duration::from_secs(120), || {
        t.runs()
            .iter()
            .any(|run| t.run_dir(run).join("results/w1.json").exists())
    });
    if !recorded {
        let _ = child.kill();
    }
    assert!(recorded, "the fast worker's result was never recorded");
    // Long enough for an as-ready publish of the fast worker to show on the server.
    let published = wait_until(std::time::Duration::from_secs(3), || !gh.pulls().is_empty());
    std::fs::write(&gate, "go\n").unwrap();
    let status = wait_child(&mut child, std::time::Duration::from_secs(180));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!published, "published before the run ended: {stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(Setup::ops(&report), ["created", "created"]);
    assert_eq!(gh.pulls().len(), 2);
    assert_eq!(
        pull_request_output(&outputs),
        [(1, "created".to_owned()), (2, "created".to_owned())]
    );
    gh.assert_no_violations();
    stderr.into_owned()
}

/// A loopback API that accepts connections, counts them and never answers.
fn silent_api() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(conn);
        }
    });
    (url, count)
}

/// `publish.when: as-ready` with GitHub unreachable: once publishing as ready has
/// stopped (GitHub did not answer within the request's attempts), the end of the run
/// does not spend the publish timeout a second time on the same GitHub — it sends
/// nothing more, says so and exits 4; `fanout publish` goes on later.
#[test]
fn as_ready_publishing_that_stopped_is_not_tried_again_at_the_end_of_the_run() {
    let t = TestEnv::new();
    let (api, connections) = silent_api();
    let out = run_publishing(
        &t,
        "publish:\n  when: as-ready\n",
        &api,
        &[
            "-w",
            "2",
            "-t",
            "one",
            "-t",
            "two",
            "--max-attempts",
            "1",
            "--request-timeout",
            "1s",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("publishing as ready stopped"), "{stderr}");
    assert!(
        stderr.contains("not tried again at the end of the run"),
        "{stderr}"
    );
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one request, while the run went on, and none after: {stderr}"
    );
}

impl Setup {
    /// `fanout publish --dry-run` as text, with `token` in `$GITHUB_TOKEN` (none when
    /// empty): (exit code, stdout with the run id and commits named, stderr).
    fn dry_run(&self, token: &str) -> (Option<i32>, String, String) {
        let url = self.gh.url();
        let mut cmd = self.t.fanout(&[
            "publish",
            "--dry-run",
            "--run",
            &self.run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--label",
            "fanout",
        ]);
        cmd.env_remove("GITHUB_TOKEN").env_remove("GH_TOKEN");
        if !token.is_empty() {
            cmd.env("GITHUB_TOKEN", token);
        }
        let out = cmd.output().unwrap();
        let mut text = String::from_utf8_lossy(&out.stdout).replace(&self.run, "RUN");
        for r in self.report["results"].as_array().unwrap() {
            if let Some(c) = r["commit"].as_str() {
                text = text.replace(&c[..7], &format!("<commit {}>", r["worker_id"]));
            }
        }
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), text, stderr)
    }

    /// Every branch of the remote, with its tip.
    fn remote_refs(&self) -> String {
        // (checked: a failing git is an error, never "no refs")
        self.t.git_in(
            self.t.root(),
            &[
                "--git-dir",
                self.remote.to_str().unwrap(),
                "for-each-ref",
                "--format=%(objectname) %(refname)",
            ],
        )
    }
}

/// `publish --dry-run` says per worker what publishing would do — push or no push,
/// and the pull request it would open, update or leave, with its labels, title and
/// first lines — and does none of it: the fake GitHub records no write (only GETs),
/// the remote's branches and results.json stay as they were, and it exits 0. Without
/// a token it decides the pushes and says the pull requests are undecided.
#[test]
fn dry_run_says_what_publishing_would_do_and_writes_nothing() {
    let s = setup("a,bad,b");
    let results = s.t.run_dir(&s.run).join("results.json");
    let before = std::fs::read(&results).unwrap();
    let refs = s.remote_refs();

    let (code, text, stderr) = s.dry_run(TOKEN);
    assert_eq!(code, Some(0), "{stderr}");
    insta::assert_snapshot!(text, @r"
    worker 1  fanout/RUN/w1-improve-the-docs  commit <commit 1>
      push: a new branch on the remote
      pull request: open into main
      labels: fanout
      title: Improve the docs [a]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    worker 2  fanout/RUN/w2-improve-the-docs  commit <commit 2>
      no push: status failed
      pull request: none
    worker 3  fanout/RUN/w3-improve-the-docs  commit <commit 3>
      push: a new branch on the remote
      pull request: open into main
      labels: fanout
      title: Improve the docs [b]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    dry run: nothing was pushed, opened, updated or closed
    ");
    assert_eq!(s.gh.writes_since(0), Vec::<String>::new());
    assert!(!s.gh.requests().is_empty(), "GitHub was read");
    assert_eq!(s.remote_refs(), refs, "nothing pushed");
    assert_eq!(std::fs::read(&results).unwrap(), before);

    // Published for real; then a person retitles #1: it would be updated, #2 left.
    let (code, _, _) = s.publish(&["--label", "fanout"]);
    assert_eq!(code, Some(0));
    s.gh.set_pull_title(1, "Retitled by a person");
    let (asked, refs) = (s.gh.requests().len(), s.remote_refs());
    let before = std::fs::read(&results).unwrap();
    let (code, text, stderr) = s.dry_run(TOKEN);
    assert_eq!(code, Some(0), "{stderr}");
    insta::assert_snapshot!(text, @r"
    worker 1  fanout/RUN/w1-improve-the-docs  commit <commit 1>
      no push: the remote already has this commit
      pull request: update #1
      labels: fanout
      title: Improve the docs [a]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    worker 2  fanout/RUN/w2-improve-the-docs  commit <commit 2>
      no push: status failed
      pull request: none
    worker 3  fanout/RUN/w3-improve-the-docs  commit <commit 3>
      no push: the remote already has this commit
      pull request: leave #2: it already says this
      labels: fanout
      title: Improve the docs [b]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    dry run: nothing was pushed, opened, updated or closed
    ");
    assert_eq!(s.gh.writes_since(asked), Vec::<String>::new());
    assert_eq!(s.remote_refs(), refs, "nothing pushed");
    assert_eq!(std::fs::read(&results).unwrap(), before);
    assert_eq!(s.gh.pulls()[0].title, "Retitled by a person");

    // No token: no request to GitHub at all; the pushes are still decided.
    let asked = s.gh.requests().len();
    let (code, text, stderr) = s.dry_run("");
    assert_eq!(code, Some(0), "{stderr}");
    insta::assert_snapshot!(text, @r"
    worker 1  fanout/RUN/w1-improve-the-docs  commit <commit 1>
      no push: the remote already has this commit
      pull request: undecided: the pull requests on GitHub are read only with a token ($GITHUB_TOKEN or $GH_TOKEN)
      labels: fanout
      title: Improve the docs [a]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    worker 2  fanout/RUN/w2-improve-the-docs  commit <commit 2>
      no push: status failed
      pull request: none
    worker 3  fanout/RUN/w3-improve-the-docs  commit <commit 3>
      no push: the remote already has this commit
      pull request: undecided: the pull requests on GitHub are read only with a token ($GITHUB_TOKEN or $GH_TOKEN)
      labels: fanout
      title: Improve the docs [b]
      body: ## Improve the docs
            > Improve the docs
            | Status | success |
            | Agent | `sh` |
    dry run: nothing was pushed, opened, updated or closed
    ");
    assert_eq!(s.gh.requests().len(), asked);
    s.gh.assert_no_violations();
}

/// Only no credentials at all gives the undecided preview: credentials given and
/// wrong (an app id that is not a number, a key file that cannot be read) are an
/// error naming the variable or flag in a dry run too, before GitHub is asked.
#[test]
fn dry_run_with_bad_credentials_is_an_error() {
    let s = setup("a");
    let url = s.gh.url();
    let dry = |extra: &[&str], app_id: Option<&str>| {
        let mut args = vec![
            "publish",
            "--dry-run",
            "--run",
            &s.run,
            "--repo",
            "octo/demo",
        ];
        args.extend(["--api-url", &url]);
        args.extend(extra);
        let mut cmd = s.t.fanout(&args);
        cmd.env_remove("GITHUB_TOKEN").env_remove("GH_TOKEN");
        cmd.env_remove("FANOUT_APP_ID");
        if let Some(id) = app_id {
            cmd.env("FANOUT_APP_ID", id);
        }
        let out = cmd.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stderr) = dry(&[], Some("not-a-number"));
    assert!(
        !ok && stderr.contains("FANOUT_APP_ID \"not-a-number\""),
        "{stderr}"
    );
    let missing = s.t.root().join("no-such-key.pem");
    let key = missing.to_str().unwrap();
    let (ok, stderr) = dry(&["--app-id", "1", "--app-private-key", key], None);
    assert!(!ok && stderr.contains("--app-private-key"), "{stderr}");
    assert!(s.gh.requests().is_empty(), "GitHub was not asked");
}

/// `run --publish --dry-run` runs, then says what publishing would do instead of
/// doing it; `--dry-run` without `--publish` is a usage error before anything runs.
#[test]
fn run_publish_dry_run_previews_and_publishes_nothing() {
    let t = TestEnv::new();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let out = run_publishing(
        &t,
        "",
        &gh.url(),
        &["-w", "1", "--dry-run", "Improve the docs"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("  push: a new branch on the remote\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  pull request: open into main\n"),
        "{stderr}"
    );
    assert_eq!(gh.writes_since(0), Vec::<String>::new());
    assert!(gh.pulls().is_empty());
    // (checked: the remote is run_publishing's bare origin, and its main is there)
    let remote = t.root().join("remote.git");
    let refs = t.git_in(
        t.root(),
        &[
            "--git-dir",
            remote.to_str().unwrap(),
            "for-each-ref",
            "--format=%(refname)",
        ],
    );
    assert_eq!(refs, "refs/heads/main\n", "nothing pushed");

    let out = t
        .fanout(&["run", "--dry-run", "Improve the docs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "fanout: error: --dry-run previews publishing: add --publish (`fanout publish --dry-run` previews a finished run)\n"
    );
}
