//! `fanout publish` (and `fanout run --publish`): push each successful worker's branch
//! and open or update its pull request.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use secrecy::{ExposeSecret, SecretString};

use super::common::{CliError, Context, PublishArgs};
use crate::config::{ConfigFile, IncludeStatus};
use crate::model::Operation;
use crate::publish::body::Templates;
use crate::publish::github::{Credentials, GitHub, RepoSlug, RetryPolicy};
use crate::publish::{PublishOptions, counts, publish, record};
use crate::repo::UserRepo;
use crate::run::results::RunReport;
use crate::{exit, report};

/// `fanout publish`.
#[derive(Debug, Args, Clone)]
pub struct PublishCommand {
    /// The run to publish (default: the newest run with results).
    #[arg(long = "run", value_name = "ID", conflicts_with = "results")]
    pub run: Option<String>,
    /// A results.json to publish instead of a run of this repository.
    #[arg(long, value_name = "FILE")]
    pub results: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Publishing flags.
    #[command(flatten)]
    pub publish: PublishArgs,
}

/// Entry point of `fanout publish`.
pub fn publish_command(ctx: &Context, args: &PublishCommand) -> Result<i32, CliError> {
    let repo = ctx.repo()?;
    let (file, _) = ctx.load_config(&repo)?;
    let (mut report, path) = match &args.results {
        Some(p) => {
            let path = if p.is_absolute() {
                p.clone()
            } else {
                ctx.cwd.join(p)
            };
            (load_report(&path)?, path)
        }
        None => {
            let id = match &args.run {
                Some(id) => id.clone(),
                None => super::common::list_runs(&repo.runs_dir())
                    .into_iter()
                    .rev()
                    .find(|id| repo.run_dir(id).join("results.json").is_file())
                    .ok_or_else(|| {
                        CliError::Usage("no finished run in this repository to publish".into())
                    })?,
            };
            let path = repo.run_dir(&id).join("results.json");
            if !path.is_file() {
                return Err(CliError::Usage(format!(
                    "--run {id}: no results.json (see `fanout status`)"
                )));
            }
            (load_report(&path)?, path)
        }
    };
    let code = publish_report(&repo, &file, &args.publish, &mut report, &path)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serializes")
        );
    } else {
        print!("{}", pr_table(&report));
    }
    Ok(code)
}

fn load_report(path: &Path) -> Result<RunReport, CliError> {
    let bytes =
        std::fs::read(path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{}: not a fanout results.json: {e}",
            path.display()
        ))
    })
}

/// Publish `report` (read from `results_path`, which is rewritten with the outcomes).
/// Returns the exit code: 0 nothing failed, 1 some failed, 3 all eligible failed.
pub fn publish_report(
    repo: &UserRepo,
    file: &ConfigFile,
    args: &PublishArgs,
    report: &mut RunReport,
    results_path: &Path,
) -> Result<i32, CliError> {
    let cfg = &file.publish;
    let in_actions = std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true");
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());

    let remote = args
        .remote
        .clone()
        .or_else(|| cfg.remote.clone())
        .unwrap_or_else(|| "origin".into());
    let slug = match args.repo.clone().or_else(|| env("GITHUB_REPOSITORY")) {
        Some(s) => RepoSlug::parse(&s)
            .ok_or_else(|| CliError::Usage(format!("--repo {s:?}: expected OWNER/NAME")))?,
        None => {
            let git = repo.open().map_err(|e| CliError::Fatal(e.to_string()))?;
            let url = git
                .find_remote(&remote)
                .ok()
                .and_then(|r| r.url().ok().map(str::to_owned))
                .unwrap_or_else(|| remote.clone());
            RepoSlug::from_remote_url(&url).ok_or_else(|| {
                CliError::Usage(format!(
                    "cannot tell the GitHub repository from remote {remote:?}: pass --repo OWNER/NAME"
                ))
            })?
        }
    };
    let credentials = credentials(args)?;
    if in_actions {
        mask(&credentials);
    }
    let api = args
        .api_url
        .clone()
        .or_else(|| env("GITHUB_API_URL"))
        .unwrap_or_else(|| "https://api.github.com".into());
    let server_url = env("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into());
    let run_url = match (env("GITHUB_REPOSITORY"), env("GITHUB_RUN_ID")) {
        (Some(r), Some(id)) => Some(format!(
            "{}/{r}/actions/runs/{id}",
            server_url.trim_end_matches('/')
        )),
        _ => None,
    };
    let secs = |flag: Option<f64>, file: Option<crate::config::Seconds>, default: f64| {
        Duration::from_secs_f64(flag.or(file.map(|s| s.0)).unwrap_or(default).max(0.0))
    };
    let policy = RetryPolicy {
        max_attempts: args.max_attempts.or(cfg.max_attempts).unwrap_or(6).max(1),
        min_rate_limit_wait: secs(args.rate_limit_wait, cfg.rate_limit_wait, 60.0),
        server_error_backoff: secs(args.server_error_backoff, None, 1.0),
        max_wait: secs(args.max_wait, cfg.max_wait, 900.0),
    };
    let pace = match args.pace_ms {
        Some(ms) => Duration::from_millis(ms),
        None => secs(None, cfg.pace, 1.0),
    };
    let body_template = match &cfg.body_template {
        Some(p) => {
            let path = repo.workdir.join(p);
            Some(std::fs::read_to_string(&path).map_err(|e| {
                CliError::Usage(format!("publish.body_template {}: {e}", path.display()))
            })?)
        }
        None => None,
    };
    let templates = Templates::new(cfg.title.clone(), body_template)
        .map_err(|e| CliError::Usage(format!("publish: {e}")))?;
    let include_partial = args
        .include
        .iter()
        .chain(cfg.include.iter())
        .any(|s| *s == IncludeStatus::Partial);
    let opts = PublishOptions {
        include_partial,
        labels: merged(&args.labels, &cfg.labels),
        draft: args.draft || cfg.draft,
        reviewers: merged(&args.reviewers, &cfg.reviewers),
        team_reviewers: merged(&args.team_reviewers, &cfg.team_reviewers),
        base: args.pr_base.clone().or_else(|| cfg.base.clone()),
        remote,
        run_url,
        server_url,
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Fatal(format!("tokio runtime: {e}")))?;
    let outcomes = runtime.block_on(async {
        let (crab, push_token) = crate::publish::github::connect(&api, &slug, &credentials)
            .await
            .map_err(|e| CliError::Fatal(format!("GitHub: {e}")))?;
        if in_actions {
            println!("::add-mask::{}", push_token.expose_secret());
        }
        let gh = GitHub::new(crab, slug.clone(), policy, pace);
        // Rate-limit waits can be long: a signal stops publishing (it is idempotent,
        // so running it again picks up where it stopped).
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| CliError::Fatal(format!("signal handler: {e}")))?;
        // The integration branch (--integrate) is published like a worker's branch.
        let integration = crate::fanin::conflicts::integration_result(report).map(|r| RunReport {
            results: vec![r],
            ..report.clone()
        });
        let all = async {
            let workers = publish(
                report,
                &repo.workdir,
                &gh,
                Some(push_token.expose_secret()),
                &templates,
                &opts,
            )
            .await;
            let integrated = match &integration {
                Some(it) => {
                    publish(
                        it,
                        &repo.workdir,
                        &gh,
                        Some(push_token.expose_secret()),
                        &templates,
                        &opts,
                    )
                    .await
                }
                None => Default::default(),
            };
            (workers, integrated)
        };
        tokio::select! {
            outcomes = all => Ok(outcomes),
            _ = tokio::signal::ctrl_c() => Err(CliError::Interrupted),
            _ = term.recv() => Err(CliError::Interrupted),
        }
    })?;
    let (outcomes, integrated) = outcomes;
    record(report, outcomes);
    if let (Some(it), Some(o)) = (report.integration.as_mut(), integrated.into_values().next()) {
        it.publish = Some(o);
    }
    let mut json = serde_json::to_vec_pretty(&*report).expect("serializes");
    json.push(b'\n');
    crate::util::write_atomic(results_path, &json)
        .map_err(|e| CliError::Fatal(format!("{}: {e}", results_path.display())))?;
    if let Some(dir) = results_path.parent() {
        let md = report::summary::render_summary(report, None);
        let _ = crate::util::write_atomic(&dir.join("summary.md"), md.as_bytes());
    }
    if let Some(summary) = env("GITHUB_STEP_SUMMARY") {
        let section = report::summary::render_pull_requests(report);
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
                Some(serde_json::json!({
                    "worker_id": r.worker_id, "branch": r.branch, "operation": p.operation,
                    "number": p.number, "url": p.url,
                }))
            })
            .collect();
        let _ = append(
            Path::new(&out),
            &format!("pull-requests={}\n", serde_json::Value::Array(prs)),
        );
    }
    let c = counts(report);
    let failed = c.get("failed").copied().unwrap_or(0);
    let eligible: usize = c
        .iter()
        .filter(|(k, _)| **k != "skipped")
        .map(|(_, v)| *v)
        .sum();
    eprintln!(
        "fanout: publish: {}",
        c.iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(if failed == 0 {
        exit::SUCCESS
    } else if failed < eligible {
        exit::SOME_FAILED
    } else {
        exit::NONE_SUCCEEDED
    })
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

fn credentials(args: &PublishArgs) -> Result<Credentials, CliError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let app_id =
        match args.app_id {
            Some(id) => Some(id),
            None => match env("FANOUT_APP_ID") {
                Some(v) => Some(v.trim().parse().map_err(|_| {
                    CliError::Usage(format!("FANOUT_APP_ID {v:?}: expected a number"))
                })?),
                None => None,
            },
        };
    if let Some(app_id) = app_id {
        let pem = match &args.app_private_key {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| CliError::Usage(format!("--app-private-key {}: {e}", p.display())))?,
            None => env("FANOUT_APP_PRIVATE_KEY").ok_or_else(|| {
                CliError::Usage(
                    "--app-id needs --app-private-key FILE or the PEM in $FANOUT_APP_PRIVATE_KEY"
                        .into(),
                )
            })?,
        };
        return Ok(Credentials::App {
            app_id,
            private_key_pem: SecretString::from(pem),
        });
    }
    args.token
        .clone()
        .or_else(|| env("GITHUB_TOKEN"))
        .or_else(|| env("GH_TOKEN"))
        .map(|t| Credentials::Token(SecretString::from(t.trim().to_owned())))
        .ok_or_else(|| {
            CliError::Usage(
                "publishing needs a token (--token, $GITHUB_TOKEN, $GH_TOKEN) or a GitHub App (--app-id and a private key)".into(),
            )
        })
}

/// `::add-mask::` every secret, so Actions never shows it in logs.
fn mask(c: &Credentials) {
    match c {
        Credentials::Token(t) => println!("::add-mask::{}", t.expose_secret()),
        Credentials::App {
            private_key_pem, ..
        } => {
            for line in private_key_pem.expose_secret().lines() {
                let line = line.trim();
                if !line.is_empty() && !line.starts_with("-----") {
                    println!("::add-mask::{line}");
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

/// The terminal table of publish operations.
pub fn pr_table(report: &RunReport) -> String {
    let mut out = String::new();
    for r in &report.results {
        let Some(p) = &r.publish else { continue };
        let what = match (p.operation, &p.url) {
            (Operation::Created | Operation::Updated | Operation::Unchanged, Some(url)) => {
                format!("#{} {url}", p.number.unwrap_or_default())
            }
            _ => p.reason.clone().unwrap_or_default(),
        };
        out.push_str(&format!(
            "#{:<3} {:<9} {}  {}\n",
            r.worker_id,
            p.operation.as_str(),
            r.branch,
            what
        ));
        if let Some(link) = &p.compare_url {
            out.push_str(&format!("      open by hand: {link}\n"));
        }
    }
    out
}
