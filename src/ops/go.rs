//! The one choreography of `fanout run`, `resume` and `worker` ([`go`]): hand the
//! GitHub token to the agents allowed it, record the repository's push remotes, drop
//! every secret before any agent starts, check publishing before the first worker,
//! run the attempt ([`super::run`], [`super::matrix`]), then integrate and publish
//! ([`super::run::After::run`]). The command-line files turn flags into a [`Request`]
//! and print the [`Outcome`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use secrecy::SecretString;

use crate::config::ConfigFile;
use crate::exit::Failure;
use crate::plan::Plan;
use crate::plan::settings::Settings;
use crate::publish::ready::AsReady;
use crate::publish::report::PublishFlags;
use crate::repo::{PushRecord, UserRepo};
use crate::report::progress::Style;
use crate::run::attempt::{ExecOptions, push_record};
use crate::run::results::RunReport;
use crate::secret::Secrets;
use crate::store::resumable::Resumable;
use crate::util::out::errln;

use super::matrix::WorkerJob;
use super::run::{After, Published, execute_plan, execute_plan_as_ready, run_attempt};

/// What to run.
pub enum Job<'a> {
    Fresh {
        /// The settings the plan was made from.
        settings: &'a Settings,
        plan: Plan,
        /// Publish each worker as soon as it has finished (with [`Request::publish`]).
        as_ready: bool,
    },
    /// The rest of a run cut short ([`crate::store::resumable::prepare`]).
    Resume(Box<Resumable>),
    /// One worker of a matrix plan.
    Worker {
        plan: Plan,
        /// The worker (its `agent_tokens` are filled here).
        job: WorkerJob,
    },
}

/// One run, resume or matrix worker, and what to do after it.
pub struct Request<'a> {
    pub repo: &'a UserRepo,
    /// The config file, read once.
    pub file: &'a ConfigFile,
    pub job: Job<'a>,
    /// Publish afterwards, with these flags.
    pub publish: Option<PublishFlags>,
    /// Also build the integration branch.
    pub integrate: bool,
    pub style: Style,
    /// The secrets fanout was started with: dropped before any agent starts.
    pub secrets: Secrets,
}

/// What a request did.
pub struct Outcome {
    pub code: i32,
    /// The run's directory; a matrix worker's artifact directory.
    pub dir: PathBuf,
    /// The run's report (fresh or resumed); none for a matrix worker (its result is in
    /// its artifact).
    pub report: Option<Box<RunReport>>,
}

/// Run `req` (see the module's documentation for the order of things).
pub fn go(req: Request<'_>) -> Result<Outcome, Failure> {
    let Request {
        repo,
        file,
        job,
        publish,
        integrate,
        style,
        secrets,
    } = req;
    let after = After {
        repo,
        file,
        publish: publish.as_ref(),
        integrate,
    };
    match job {
        Job::Fresh {
            settings,
            plan,
            as_ready,
        } => fresh(&after, style, settings, (plan, as_ready), secrets),
        Job::Resume(ready) => resume(&after, style, *ready, secrets),
        Job::Worker { plan, mut job } => {
            job.agent_tokens = agent_tokens(&plan, &secrets);
            // Nothing else needs them: gone before the agent starts.
            drop(secrets);
            let (dir, code) = super::matrix::worker(repo, file, &plan, &job)?;
            Ok(Outcome {
                code,
                dir,
                report: None,
            })
        }
    }
}

/// Integrate and publish the finished run `report`; its outcome.
fn finish(
    after: &After<'_>,
    mut report: RunReport,
    run_dir: PathBuf,
    record: Option<&PushRecord>,
    published: &Published,
) -> Result<Outcome, Failure> {
    let code = after.run(
        &mut report,
        record,
        &run_dir.join("results.json"),
        published,
    )?;
    Ok(Outcome {
        code,
        dir: run_dir,
        report: Some(Box::new(report)),
    })
}

/// A fresh run: the push remotes are recorded as the run starts.
fn fresh(
    after: &After<'_>,
    style: Style,
    settings: &Settings,
    (plan, as_ready): (Plan, bool),
    secrets: Secrets,
) -> Result<Outcome, Failure> {
    let repo = after.repo;
    let mut opts = ExecOptions::from_settings(settings);
    opts.agent_tokens = agent_tokens(&plan, &secrets);
    let record = push_record(repo, settings.publish_remote.clone());
    // Nothing else needs them: gone before any agent starts.
    drop(secrets);
    after.check(Some(&record))?;
    opts.push_record = Some(record.clone());
    let (report, published) = match after.publish {
        Some(flags) if as_ready => {
            let ready = AsReady::new(repo, after.file, flags, Some(&record), &plan)?;
            execute_plan_as_ready(repo, &opts, plan, style, ready)?
        }
        _ => (
            execute_plan(repo, &opts, plan, style, BTreeMap::new())?,
            Default::default(),
        ),
    };
    let run_dir = repo.run_dir(&report.run_id);
    finish(after, report, run_dir, Some(&record), &published)
}

/// A resumed run: the push remotes are those its journal recorded when it started.
fn resume(
    after: &After<'_>,
    style: Style,
    mut ready: Resumable,
    secrets: Secrets,
) -> Result<Outcome, Failure> {
    ready.attempt.agent_tokens = agent_tokens(&ready.plan, &secrets);
    // Nothing else needs them: gone before any agent starts.
    drop(secrets);
    let record = crate::run::journal::Journal::load(&ready.run_dir)
        .ok()
        .and_then(|j| j.push);
    after.check(record.as_ref())?;
    let identity = after.file.commit_identity();
    let report = run_attempt(after.repo, &identity, ready.plan, style, ready.attempt)?;
    finish(
        after,
        report,
        ready.run_dir,
        record.as_ref(),
        &Default::default(),
    )
}

/// `GITHUB_TOKEN` and `GH_TOKEN` for the agents of `plan` whose definition says
/// `allow_github_token: true` (said on stderr; the executor hands them to those
/// agents only); none otherwise — nothing else fanout starts ever gets them.
fn agent_tokens(plan: &Plan, secrets: &Secrets) -> Vec<(String, SecretString)> {
    let allowed: Vec<&str> = plan
        .agents_used()
        .into_iter()
        .filter(|a| a.allow_github_token)
        .map(|a| a.name.as_str())
        .collect();
    if allowed.is_empty() {
        return Vec::new();
    }
    let tokens: Vec<(String, SecretString)> = ["GITHUB_TOKEN", "GH_TOKEN"]
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), secrets.get(k)?.clone())))
        .collect();
    if !tokens.is_empty() {
        errln!(
            "fanout: warning: agent {:?} gets the GitHub token (allow_github_token: true): it can do whatever the token allows",
            allowed.join(", ")
        );
    }
    tokens
}
