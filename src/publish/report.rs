//! Publishing a run's report end to end (`fanout publish`, and `--publish` after
//! `run`, `resume` and `aggregate`): resolve where to publish (remote, repository,
//! API, credentials — masked in Actions), push and open or update each eligible
//! worker's pull request (and the integration branch's), post findings, keep the
//! digest, record the outcomes in the report, and rewrite `results.json` and
//! `summary.md` with them (plus the Actions step summary and the `pull-requests`
//! output).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::body::Templates;
use super::github::auth::{Credentials, connect};
use super::github::{ApiError, GitHub, RepoSlug, RetryPolicy};
use super::preview::Previews;
use super::target::{self, PushInputs, PushTo};
use super::{Inputs, PublishOptions, counts, dry_run, publish, record as record_outcomes};
use crate::config::{BranchMode, ConfigFile, DigestMode, IncludeStatus};
use crate::exit::{self, Failure};
use crate::model::{Operation, PublishOutcome};
use crate::repo::{PushRecord, UserRepo};
use crate::report::summary::{render_pull_requests, render_summary};
use crate::run::results::RunReport;
use crate::util::out::{command, errln};
use crate::util::{CONFIG_LIMIT, read_capped_string};

/// The publishing flags (`--label`, `--token`, …) as given on the command line, all
/// optional; the config file's `publish:` block fills in the rest.
#[derive(Debug, Clone, Default)]
pub struct PublishFlags {
    /// Also publish workers with this status (only `partial`).
    pub include: Vec<IncludeStatus>,
    /// A label for every pull request.
    pub labels: Vec<String>,
    /// Open pull requests as drafts.
    pub draft: bool,
    /// Users asked to review.
    pub reviewers: Vec<String>,
    /// Teams asked to review.
    pub team_reviewers: Vec<String>,
    /// Base branch of the pull requests.
    pub pr_base: Option<String>,
    /// Remote to push to.
    pub remote: Option<String>,
    /// Repository `owner/name`.
    pub repo: Option<String>,
    /// API base URL.
    pub api_url: Option<String>,
    /// Token (the environment's, taken at start, or `--token`).
    pub token: Option<SecretString>,
    /// GitHub App id.
    pub app_id: Option<u64>,
    /// GitHub App private key file.
    pub app_private_key: Option<PathBuf>,
    /// GitHub App private key (PEM) from `$FANOUT_APP_PRIVATE_KEY`, taken at start.
    pub app_private_key_pem: Option<SecretString>,
    /// Least milliseconds between two API mutations.
    pub pace_ms: Option<u64>,
    /// Least seconds to wait after a rate-limit answer without timing headers.
    pub rate_limit_wait: Option<f64>,
    /// Longest single wait before a retry, in seconds.
    pub max_wait: Option<f64>,
    /// Most attempts per API request.
    pub max_attempts: Option<u32>,
    /// Longest the whole of publishing may take, in seconds.
    pub publish_timeout: Option<f64>,
    /// Longest one request may go unanswered, in seconds.
    pub request_timeout: Option<f64>,
    /// First wait after a 5xx or a dropped connection, in seconds.
    pub server_error_backoff: Option<f64>,
    /// Per-run or stable branches.
    pub branch: Option<crate::config::BranchMode>,
    /// Open a pull request again although a human closed the last one.
    pub reopen: bool,
    /// Keep the morning digest issue.
    pub digest: Option<DigestMode>,
    /// Only say what publishing would do ([`preview_report`]).
    pub dry_run: bool,
}

/// Read a `results.json`, refusing one fanout did not sign (exit 4: a file fanout
/// did not write, or that was changed since, is never published from).
pub fn load_report(path: &Path) -> Result<RunReport, Failure> {
    use crate::util::sign::{RecordError, read_signed};
    let bytes = read_signed(path).map_err(|e| match e {
        RecordError::Io(..) => Failure::Usage(e.to_string()),
        RecordError::Forged(..) => Failure::Fatal(e.to_string()),
    })?;
    RunReport::parse(&bytes).map_err(|e| {
        Failure::Usage(format!(
            "{}: not a fanout results.json: {e}",
            path.display()
        ))
    })
}

/// Publish `report` (read from `results_path`, which is rewritten with the outcomes),
/// pushing where `record` (the repository's remotes when the run started) says.
/// Workers in `early`, published while the run went on (`publish.when: as-ready`,
/// [`super::ready`]), are not pushed or opened again: their outcomes are recorded as
/// they are. Returns the exit code: 0 nothing failed, 1 some failed, 3 all eligible
/// failed, 4 GitHub could not be reached or rejected the credentials (publishing
/// stopped).
pub fn publish_report(
    repo: &UserRepo,
    file: &ConfigFile,
    args: &PublishFlags,
    record: Option<&PushRecord>,
    report: &mut RunReport,
    results_path: &Path,
    early: &BTreeMap<u32, PublishOutcome>,
) -> Result<i32, Failure> {
    let prepared = PublishContext::new(repo, file, args, record)?;
    let gh = prepared.api(super::github::auth::Scope {
        issues: writes_issues(report, &prepared.opts),
        ci: false,
    });
    let done = gh.push_and_open(prepared.inputs(report, &repo.workdir, None), early);
    let ((outcomes, integrated), stopped, digest) = match done {
        Ok(d) => d,
        Err(e) => {
            if !early.is_empty() {
                record_early(report, early, results_path)?;
            }
            return Err(e);
        }
    };
    record_outcomes(report, outcomes);
    if let (Some(it), Some(o)) = (report.integration.as_mut(), integrated.into_values().next()) {
        it.publish = Some(o);
    }
    write_outcomes(report, results_path)?;
    if let Some(digest) = digest {
        say_digest(digest);
    }
    let code = exit_code(report);
    match stopped {
        Some(e) => {
            errln!(
                "fanout: publish failed: {e}; {}",
                next_step(&e, &prepared.target.api)
            );
            Ok(exit::FATAL)
        }
        None => Ok(code),
    }
}

/// What publishing `report` would do (`--dry-run`), worker by worker, the integration
/// branch's last ([`super::dry_run`]), each findings task's post
/// ([`super::findings::preview`]) and the digest issue ([`super::digest::preview`]):
/// nothing is pushed nor written on GitHub, and `results.json` is left as it is.
/// GitHub is read with a token only (a GitHub App's token is not asked for: that
/// request is a write).
pub fn preview_report(
    repo: &UserRepo,
    file: &ConfigFile,
    args: &PublishFlags,
    record: Option<&PushRecord>,
    report: &RunReport,
) -> Result<Previews, Failure> {
    let prepared = PublishContext::new(repo, file, args, record)?;
    let api = prepared.api(super::github::auth::Scope::default());
    let runtime = crate::run::attempt::runtime()?;
    runtime.block_on(async {
        let gh = match &prepared.target.credentials {
            Some(Credentials::Token(_)) => Some(api.connect().await?),
            Some(Credentials::App { .. }) => {
                errln!(
                    "fanout: dry run: a GitHub App's installation token is not asked for (that request is a write); what GitHub's state decides is undecided"
                );
                None
            }
            None => None,
        };
        let token = gh.as_ref().map(|(_, t)| t.expose_secret());
        let github = gh.as_ref().map(|(g, _)| g);
        let p = prepared.inputs(report, &repo.workdir, token);
        let mut workers = dry_run(p, github).await;
        super::findings::preview(report, github, &mut workers).await;
        if let Some(r) = crate::fanin::conflicts::integration_result(report) {
            let it = RunReport {
                results: vec![r],
                ..report.clone()
            };
            workers.extend(dry_run(p.with_report(&it), github).await);
        }
        let digest = match prepared.opts.digest {
            true => Some(super::digest::preview(github, report, &workers).await),
            false => None,
        };
        Ok(Previews { workers, digest })
    })
}

/// Record in `report` the outcomes of the workers published while the run went on,
/// when nothing else is published (the run was stopped, or publishing failed before
/// it began), and rewrite `results.json` and `summary.md` with them.
pub fn record_early(
    report: &mut RunReport,
    early: &BTreeMap<u32, PublishOutcome>,
    results_path: &Path,
) -> Result<(), Failure> {
    record_outcomes(report, early.clone());
    write_outcomes(report, results_path)
}

/// Everything publishing needs before it talks to GitHub: where (checked), how (the
/// flags and the config's `publish:` block merged), the templates and the pacing.
pub(super) struct PublishContext {
    target: Target,
    policy: RetryPolicy,
    pace: Duration,
    pub(super) templates: Templates,
    pub(super) opts: PublishOptions,
    in_actions: bool,
}

impl PublishContext {
    /// Resolve and check it all (the credentials masked in Actions).
    pub(super) fn new(
        repo: &UserRepo,
        file: &ConfigFile,
        args: &PublishFlags,
        record: Option<&PushRecord>,
    ) -> Result<PublishContext, Failure> {
        let in_actions = crate::util::in_actions();
        let target = Target::resolve(args, record, in_actions)?;
        if in_actions && let Some(c) = &target.credentials {
            mask(c);
        }
        let (policy, pace) = pacing(file, args);
        let templates = templates(repo, file)?;
        let opts = options(file, args, &target);
        Ok(PublishContext {
            target,
            policy,
            pace,
            templates,
            opts,
            in_actions,
        })
    }

    /// What one publish of `report` from `repo_dir` reads, pushing with `push_token`.
    pub(super) fn inputs<'a>(
        &'a self,
        report: &'a RunReport,
        repo_dir: &'a Path,
        push_token: Option<&'a str>,
    ) -> Inputs<'a> {
        let (templates, opts) = (&self.templates, &self.opts);
        Inputs {
            report,
            repo_dir,
            push_token,
            templates,
            opts,
        }
    }

    /// Talking to GitHub as prepared; `scope`: what a GitHub App's token is asked for
    /// besides contents and pull requests (issues, checks: only when needed).
    pub(super) fn api(&self, scope: super::github::auth::Scope) -> Api<'_> {
        Api {
            target: &self.target,
            policy: self.policy.clone(),
            pace: self.pace,
            in_actions: self.in_actions,
            scope,
        }
    }
}

/// What to do about the failure that stopped publishing.
fn next_step(e: &ApiError, api: &str) -> String {
    let again = "what was done is in results.json; run `fanout publish` again to continue";
    match e {
        ApiError::Deadline(_) => format!(
            "raise --publish-timeout (publish.timeout) if GitHub is slow, or check --api-url / $GITHUB_API_URL ({api}); {again}"
        ),
        ApiError::Status { .. } | ApiError::Auth(_) => format!(
            "check the token ($GITHUB_TOKEN or $GH_TOKEN, or the GitHub App) and that it may push and open pull requests on the repository (contents: write, pull-requests: write); {again}"
        ),
        _ => format!(
            "check the API URL ({api}: --api-url or $GITHUB_API_URL) and the network; {again}"
        ),
    }
}

/// Check everything publishing needs — credentials, the API and server URLs, the
/// repository, where to push — without publishing: `run --publish` (and `resume` and
/// `aggregate` with `--publish`) call it before anything runs, so a bad flag is an
/// exit 2 with nothing done.
pub fn check_publishing(args: &PublishFlags, record: Option<&PushRecord>) -> Result<(), Failure> {
    let in_actions = crate::util::in_actions();
    Target::resolve(args, record, in_actions).map(|_| ())
}

/// Where to publish: where to push, the GitHub repository and API, and the credentials.
struct Target {
    push: PushTo,
    slug: RepoSlug,
    /// None only in a dry run.
    credentials: Option<Credentials>,
    api: String,
    server_url: String,
    run_url: Option<String>,
}

impl Target {
    /// From the flags, the run's record of its remotes and the Actions environment,
    /// each checked ([`super::target`]).
    fn resolve(
        args: &PublishFlags,
        record: Option<&PushRecord>,
        in_actions: bool,
    ) -> Result<Target, Failure> {
        // A dry run reads GitHub only with credentials, and needs none; but credentials
        // given and wrong (a bad app id, an unreadable key) are an error in a dry run too.
        let credentials = match credentials(args)? {
            None if !args.dry_run => return Err(Failure::Usage(NO_CREDENTIALS.into())),
            c => c,
        };
        let api = target::api_url(args.api_url.as_deref(), env("GITHUB_API_URL").as_deref())
            .map_err(Failure::Usage)?;
        let server_url = target::server_url(env("GITHUB_SERVER_URL").as_deref(), &api)
            .map_err(Failure::Usage)?;
        let slug = target::slug(
            args.repo.as_deref(),
            env("GITHUB_REPOSITORY").as_deref(),
            record,
            args.remote.as_deref(),
        )
        .map_err(Failure::Usage)?;
        let push = target::push_to(PushInputs {
            flag: args.remote.as_deref(),
            record,
            slug: &slug,
            server_url: &server_url,
            in_actions,
        })
        .map_err(Failure::Usage)?;
        let run_url = match (env("GITHUB_REPOSITORY"), env("GITHUB_RUN_ID")) {
            (Some(r), Some(id)) => Some(format!("{server_url}/{r}/actions/runs/{id}")),
            _ => None,
        };
        Ok(Target {
            push,
            slug,
            credentials,
            api,
            server_url,
            run_url,
        })
    }
}

/// An environment variable that is set and not blank.
fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// The API's retry policy and the least time between two mutations.
fn pacing(file: &ConfigFile, args: &PublishFlags) -> (RetryPolicy, Duration) {
    let cfg = &file.publish;
    let secs = |flag: Option<f64>, file: Option<crate::config::Seconds>, default: f64| {
        Duration::from_secs_f64(flag.or(file.map(|s| s.0)).unwrap_or(default).max(0.0))
    };
    let policy = RetryPolicy {
        max_attempts: args.max_attempts.or(cfg.max_attempts).unwrap_or(6).max(1),
        min_rate_limit_wait: secs(args.rate_limit_wait, cfg.rate_limit_wait, 60.0),
        server_error_backoff: secs(args.server_error_backoff, None, 1.0),
        max_wait: secs(args.max_wait, cfg.max_wait, 900.0),
        request_timeout: secs(args.request_timeout, cfg.request_timeout, 30.0),
        total: secs(args.publish_timeout, cfg.timeout, 900.0),
    };
    let pace = match args.pace_ms {
        Some(ms) => Duration::from_millis(ms),
        None => secs(None, cfg.pace, 1.0),
    };
    (policy, pace)
}

/// The pull requests' title and body templates (the config's, else fanout's).
fn templates(repo: &UserRepo, file: &ConfigFile) -> Result<Templates, Failure> {
    let cfg = &file.publish;
    let body_template = match &cfg.body_template {
        _ if cfg.body_template_text.is_some() => cfg.body_template_text.clone(),
        Some(p) => {
            let path = repo.workdir.join(p);
            Some(read_capped_string(&path, CONFIG_LIMIT).map_err(|e| {
                Failure::Usage(format!("publish.body_template {}: {e}", path.display()))
            })?)
        }
        None => None,
    };
    Templates::new(cfg.title.clone(), body_template)
        .map_err(|e| Failure::Usage(format!("publish: {e}")))
}

/// What each pull request gets: the flags and the config's `publish:` block merged.
fn options(file: &ConfigFile, args: &PublishFlags, target: &Target) -> PublishOptions {
    let cfg = &file.publish;
    PublishOptions {
        include_partial: args
            .include
            .iter()
            .chain(cfg.include.iter())
            .any(|s| *s == IncludeStatus::Partial),
        labels: merged(&args.labels, &cfg.labels),
        draft: args.draft || cfg.draft,
        reviewers: merged(&args.reviewers, &cfg.reviewers),
        team_reviewers: merged(&args.team_reviewers, &cfg.team_reviewers),
        base: args.pr_base.clone().or_else(|| cfg.base.clone()),
        push: target.push.clone(),
        run_url: target.run_url.clone(),
        server_url: target.server_url.clone(),
        branch: branch_mode(args.branch.or(cfg.branch)),
        close_stale: cfg.close_stale.unwrap_or(true),
        reopen: args.reopen,
        digest: args.digest.or(cfg.digest) == Some(DigestMode::Issue),
        max_open: cfg.max_open,
        allow_workflow_changes: cfg.allow_workflow_changes,
    }
}

/// For a run's report read back from disk: stable branches (`<prefix>/<task>`, in no
/// run's namespace) are published only under the prefix this repository's
/// configuration names (`branch_prefix:`, else `fanout`), never one a forged plan names
/// (`release/1.0` from the prefix `release`).
pub fn check_stable_prefix(
    file: &ConfigFile,
    args: &PublishFlags,
    report: &RunReport,
) -> Result<(), Failure> {
    if branch_mode(args.branch.or(file.publish.branch)) != BranchMode::Stable {
        return Ok(());
    }
    let configured = file.branch_prefix.as_deref().unwrap_or("fanout");
    match super::stable::prefix(&report.plan) {
        Some(p) if p == configured => Ok(()),
        found => Err(Failure::Fatal(format!(
            "run {}: its branches' prefix {:?} is not this repository's branch_prefix {configured:?}; stable branches are published only under the configured prefix (nothing was pushed)",
            report.run_id,
            found.unwrap_or_default()
        ))),
    }
}

/// The branch mode asked for, else `stable` in a scheduled workflow, else `per-run`.
fn branch_mode(asked: Option<BranchMode>) -> BranchMode {
    asked.unwrap_or_else(|| {
        if env("GITHUB_EVENT_NAME").as_deref() == Some("schedule") {
            BranchMode::Stable
        } else {
            BranchMode::PerRun
        }
    })
}

/// Whether publishing `report` writes issues: the digest, or findings posted as a
/// comment on a tracking issue.
fn writes_issues(report: &RunReport, opts: &PublishOptions) -> bool {
    opts.digest
        || report
            .plan
            .workers
            .iter()
            .any(|w| w.task.findings == Some(crate::config::FindingsPost::Comment))
}

/// Talking to GitHub.
pub(super) struct Api<'a> {
    target: &'a Target,
    policy: RetryPolicy,
    pace: Duration,
    in_actions: bool,
    scope: super::github::auth::Scope,
}

/// Publish outcomes by worker id: the workers', and the integration branch's; the
/// failure that stopped publishing, if one did; and the digest, when kept.
type Outcomes = (
    (BTreeMap<u32, PublishOutcome>, BTreeMap<u32, PublishOutcome>),
    Option<ApiError>,
    Option<DigestDone>,
);

/// The digest (`digest: issue`): tonight's comparison and the issue's number, or why
/// it was not written.
type DigestDone = Result<(String, u64), String>;

/// Say what became of the digest; its comparison goes to the step summary. A digest
/// that could not be written is a warning: the pull requests are what counts.
fn say_digest(digest: DigestDone) {
    match digest {
        Ok((comparison, number)) => {
            errln!("fanout: digest issue #{number} updated");
            if let Some(summary) = env("GITHUB_STEP_SUMMARY") {
                let _ = append(Path::new(&summary), &format!("\n{comparison}"));
            }
        }
        Err(why) => errln!("fanout: warning: the digest issue was not written: {why}"),
    }
}

impl Api<'_> {
    /// A client of the repository's API with a fresh deadline, and the token to push
    /// with (masked in Actions).
    pub(super) async fn connect(&self) -> Result<(GitHub, SecretString), Failure> {
        let t = self.target;
        let credentials = t.credentials.as_ref().ok_or_else(|| {
            Failure::Usage("publishing needs a token ($GITHUB_TOKEN or $GH_TOKEN) or a GitHub App (--app-id and a private key)".into())
        })?;
        let connected = tokio::time::timeout(
            self.policy.total,
            connect(&t.api, &t.slug, credentials, self.scope),
        );
        let (crab, push_token) = connected
            .await
            .map_err(|_| Failure::Fatal("GitHub: no installation token within the publish deadline (--publish-timeout, publish.timeout)".into()))?
            .map_err(|e| Failure::Fatal(format!("GitHub: {e}")))?;
        // A personal token was masked when it was read; an App's installation token is new.
        if self.in_actions && matches!(credentials, Credentials::App { .. }) {
            command!("::add-mask::{}", push_token.expose_secret());
        }
        let gh = GitHub::new(crab, t.slug.clone(), self.policy.clone(), self.pace);
        Ok((gh, push_token))
    }

    /// Connect, then push and open or update each eligible worker's pull request
    /// (except those in `early`, whose outcomes are taken as they are), and the
    /// integration branch's (`--integrate`) like a worker's. A signal stops publishing
    /// (rate-limit waits can be long; it is idempotent, so running it again picks up
    /// where it stopped).
    fn push_and_open(
        &self,
        p: Inputs<'_>,
        early: &BTreeMap<u32, PublishOutcome>,
    ) -> Result<Outcomes, Failure> {
        let (report, opts) = (p.report, p.opts);
        let runtime = crate::run::attempt::runtime()?;
        runtime.block_on(async {
            let (gh, push_token) = self.connect().await?;
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .map_err(|e| Failure::Fatal(format!("signal handler: {e}")))?;
            let integration =
                crate::fanin::conflicts::integration_result(report).map(|r| RunReport {
                    results: vec![r],
                    ..report.clone()
                });
            let pending = RunReport {
                results: report
                    .results
                    .iter()
                    .filter(|r| !early.contains_key(&r.worker_id))
                    .cloned()
                    .collect(),
                ..report.clone()
            };
            let p = Inputs {
                push_token: Some(push_token.expose_secret()),
                ..p
            };
            let all = async {
                let mut workers = publish(p.with_report(&pending), &gh).await;
                workers.extend(early.iter().map(|(id, o)| (*id, o.clone())));
                if gh.stopped().is_none() {
                    super::findings::post(report, &gh, opts, &mut workers).await;
                }
                let integrated = match &integration {
                    Some(it) => publish(p.with_report(it), &gh).await,
                    None => Default::default(),
                };
                let digest = match opts.digest && gh.stopped().is_none() {
                    true => {
                        let mut tonight = report.clone();
                        record_outcomes(&mut tonight, workers.clone());
                        let posted = super::digest::post(&gh, &tonight).await;
                        Some(posted.map_err(|e| e.to_string()))
                    }
                    false => None,
                };
                ((workers, integrated), digest)
            };
            tokio::select! {
                (outcomes, digest) = all => Ok((outcomes, gh.stopped(), digest)),
                _ = tokio::signal::ctrl_c() => Err(Failure::Interrupted),
                _ = term.recv() => Err(Failure::Interrupted),
            }
        })
    }
}

/// Rewrite `results.json` and `summary.md` with what publishing did; in Actions, add
/// the pull requests to the step summary and the `pull-requests` output.
fn write_outcomes(report: &RunReport, results_path: &Path) -> Result<(), Failure> {
    report
        .save_signed(results_path)
        .map_err(|e| Failure::Fatal(format!("{}: {e}", results_path.display())))?;
    if let Some(dir) = results_path.parent() {
        let md = render_summary(report, None);
        let _ = crate::util::write_atomic(&dir.join("summary.md"), md.as_bytes());
    }
    if let Some(summary) = env("GITHUB_STEP_SUMMARY") {
        let section = render_pull_requests(report);
        let _ = append(Path::new(&summary), &section);
    }
    if let Some(out) = env("GITHUB_OUTPUT") {
        let integration = crate::fanin::conflicts::integration_result(report);
        let prs: Vec<serde_json::Value> = report
            .results
            .iter()
            .chain(integration.iter())
            .filter_map(|r| {
                let p = r.publish.as_ref()?;
                let pr_operation = match p.operation {
                    Operation::Created => "created",
                    Operation::Updated => "updated",
                    Operation::Closed => "closed",
                    _ => "none",
                };
                Some(serde_json::json!({
                    "worker_id": r.worker_id, "branch": p.branch.as_ref().unwrap_or(&r.branch),
                    "operation": p.operation,
                    "number": p.number, "url": p.url, "pr_operation": pr_operation,
                }))
            })
            .collect();
        let _ = append(
            Path::new(&out),
            &format!("pull-requests={}\n", serde_json::Value::Array(prs)),
        );
    }
    Ok(())
}

/// Say what publishing did; the exit code under the run's exit policy (`fail_on`):
/// `any-failure` 0 nothing failed, 1 some failed, 3 all eligible failed;
/// `all-failed` 3 when all eligible failed, else 0; `never` 0.
fn exit_code(report: &RunReport) -> i32 {
    let c = counts(report);
    let failed = c.get("failed").copied().unwrap_or(0);
    let eligible: usize = c
        .iter()
        .filter(|(k, _)| **k != "skipped")
        .map(|(_, v)| *v)
        .sum();
    errln!(
        "fanout: publish: {}",
        c.iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    use crate::config::FailOn;
    match report.plan.fail_on {
        _ if failed == 0 => exit::SUCCESS,
        FailOn::Never => exit::SUCCESS,
        FailOn::AnyFailure if failed < eligible => exit::SOME_FAILED,
        FailOn::AllFailed if failed < eligible => exit::SUCCESS,
        FailOn::AnyFailure | FailOn::AllFailed => exit::NONE_SUCCEEDED,
    }
}

fn merged(a: &[String], b: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in a.iter().chain(b) {
        let x = x.trim();
        if !x.is_empty() && !out.iter().any(|y| y == x) {
            out.push(x.to_owned());
        }
    }
    out
}

const NO_CREDENTIALS: &str = "publishing needs a token ($GITHUB_TOKEN or $GH_TOKEN) or a GitHub App (--app-id and a private key)";

/// The credentials the flags and environment give, each checked; None when none is given.
fn credentials(args: &PublishFlags) -> Result<Option<Credentials>, Failure> {
    let app_id =
        match args.app_id {
            Some(id) => Some(id),
            None => match env("FANOUT_APP_ID") {
                Some(v) => Some(v.trim().parse().map_err(|_| {
                    Failure::Usage(format!("FANOUT_APP_ID {v:?}: expected a number"))
                })?),
                None => None,
            },
        };
    if let Some(app_id) = app_id {
        let private_key_pem =
            match &args.app_private_key {
                Some(p) => SecretString::from(std::fs::read_to_string(p).map_err(|e| {
                    Failure::Usage(format!("--app-private-key {}: {e}", p.display()))
                })?),
                None => args.app_private_key_pem.clone().ok_or_else(|| {
                    Failure::Usage(
                    "--app-id needs --app-private-key FILE or the PEM in $FANOUT_APP_PRIVATE_KEY"
                        .into(),
                )
                })?,
            };
        return Ok(Some(Credentials::App {
            app_id,
            private_key_pem,
        }));
    }
    Ok(args.token.clone().map(Credentials::Token))
}

/// `::add-mask::` every secret, so Actions never shows it in logs.
fn mask(c: &Credentials) {
    match c {
        Credentials::Token(t) => command!("::add-mask::{}", t.expose_secret()),
        Credentials::App {
            private_key_pem, ..
        } => {
            for line in private_key_pem.expose_secret().lines() {
                let line = line.trim();
                if !line.is_empty() && !line.starts_with("-----") {
                    command!("::add-mask::{line}");
                }
            }
        }
    }
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}
