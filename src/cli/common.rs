//! What the subcommands share: the plan-shaping and publishing flags (raw, from
//! clap; nothing here is trusted yet: [`crate::plan::settings`] validates), the global
//! options ([`Context`]: where fanout started, the repository, the config file), and
//! [`CliError`], a command's failure with the exit code it maps to. No subcommand file
//! imports another; they all may import this one.

use std::path::{Path, PathBuf};

use clap::Args;
use secrecy::SecretString;

use crate::config::{ConfigFile, IncludeStatus};
use crate::plan::Plan;
use crate::plan::settings::{PlanFlags, Settings};
use crate::publish::report::PublishFlags;
use crate::repo::UserRepo;
use crate::secret::Secrets;
use crate::util::out::errln;

/// Flags that shape the plan (shared by `run` and `plan`).
#[derive(Debug, Args, Clone, Default)]
pub struct PlanArgs {
    /// The task (more with --task).
    #[arg(value_name = "TASK")]
    pub task: Option<String>,

    /// A task; repeat for more. Replaces the config file's tasks.
    #[arg(long = "task", short = 't', value_name = "TASK")]
    pub tasks: Vec<String>,

    /// Tasks from a file (`-`: standard input): a YAML list, as `tasks:` holds them, or
    /// one task a line. Replaces the config file's tasks.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["task", "tasks"])]
    pub tasks_file: Option<PathBuf>,

    /// What `fanout tend` read of GitHub before tonight (tasks from issues, pull
    /// requests to tend): tonight's plan takes it in.
    #[arg(long, value_name = "FILE")]
    pub tend_file: Option<PathBuf>,

    /// Number of workers, 1–10; with more tasks than workers, the number running at once.
    #[arg(long, short = 'w', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    pub workers: Option<u32>,

    /// Models, comma-separated, handed to workers in order ("a,b" or "a, b").
    #[arg(long, value_name = "A,B,…")]
    pub models: Vec<String>,

    /// Agent: a built-in CLI (`claude`, `codex`, `aider`), a name under `agents:` in
    /// the config, `architect`, or an architect agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,

    /// Most agent steps per worker.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,

    /// Most USD per worker.
    #[arg(long, value_name = "USD")]
    pub budget_per_worker: Option<f64>,

    /// Wall-clock limit per worker (`10m`, `1h30m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub timeout_per_worker: Option<f64>,

    /// Stop a worker whose agent printed nothing for this long (`90s`, `5m`).
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub inactivity_timeout: Option<f64>,

    /// Most USD for the whole run: no new worker starts once known costs reach it.
    #[arg(long, value_name = "USD")]
    pub budget_total: Option<f64>,

    /// One winner per task among workers that share it (`select: best`).
    #[arg(long)]
    pub select_best: bool,

    /// When the run exits non-zero: any-failure (default), all-failed, never.
    /// `unchanged` and findings are never failures.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub fail_on: Option<crate::config::FailOn>,

    /// Commit or branch the workers start from (default HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,

    /// Run every task on every model.
    #[arg(long)]
    pub cross: bool,

    /// Directory for worktrees (default: outside the checkout, per user).
    #[arg(long, value_name = "DIR")]
    pub worktree_dir: Option<PathBuf>,

    /// Prefix of the branches fanout creates (default `fanout`).
    #[arg(long, value_name = "PREFIX")]
    pub branch_prefix: Option<String>,

    /// Use this run id instead of a fresh one (letters, digits, '-', '_').
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,

    /// Confine agents, setup commands and checks (Landlock): auto (where the kernel
    /// has it), required (refuse to run without it), off. Default: `sandbox:`, else auto.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<crate::sandbox::Mode>,

    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The plan-shaping flags as library settings input.
    pub fn flags(&self) -> PlanFlags {
        PlanFlags {
            tasks: self.task.iter().chain(self.tasks.iter()).cloned().collect(),
            workers: self.workers,
            models: self.models.clone(),
            agent: self.agent.clone(),
            max_steps: self.max_steps,
            budget_per_worker: self.budget_per_worker,
            timeout_per_worker: self.timeout_per_worker,
            inactivity_timeout: self.inactivity_timeout,
            budget_total: self.budget_total,
            select_best: self.select_best,
            fail_on: self.fail_on,
            base: self.base.clone(),
            cross: self.cross,
            worktree_dir: self.worktree_dir.clone(),
            branch_prefix: self.branch_prefix.clone(),
            allow_empty: false,
            sandbox: self.sandbox,
            tasks_file: None,
            night: None,
        }
    }
}

/// Publishing flags (shared by `publish` and `run --publish`).
#[derive(Debug, Args, Clone, Default)]
pub struct PublishArgs {
    /// Also publish workers with this status (only `partial`).
    #[arg(long, value_enum, value_name = "STATUS")]
    pub include: Vec<IncludeStatus>,
    /// A label for every pull request (repeatable).
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Open pull requests as drafts.
    #[arg(long)]
    pub draft: bool,
    /// A user asked to review (repeatable).
    #[arg(long = "reviewer", value_name = "LOGIN")]
    pub reviewers: Vec<String>,
    /// A team asked to review (repeatable).
    #[arg(long = "team-reviewer", value_name = "SLUG")]
    pub team_reviewers: Vec<String>,
    /// Base branch of the pull requests (default: the run's base branch).
    #[arg(long, value_name = "BRANCH")]
    pub pr_base: Option<String>,
    /// Remote to push to (default `origin`).
    #[arg(long, value_name = "NAME|URL")]
    pub remote: Option<String>,
    /// Repository `owner/name` (default: `$GITHUB_REPOSITORY`, else the remote's URL).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// API base URL (default: `$GITHUB_API_URL`, else https://api.github.com).
    #[arg(long, value_name = "URL")]
    pub api_url: Option<String>,
    /// Deprecated: any process on the machine can read a command line; set
    /// `$GITHUB_TOKEN` (or `$GH_TOKEN`) instead.
    #[arg(long, value_name = "TOKEN", hide = true)]
    pub token: Option<String>,
    /// GitHub App id (default: `$FANOUT_APP_ID`); with a private key, used instead of a token.
    #[arg(long, value_name = "ID")]
    pub app_id: Option<u64>,
    /// GitHub App private key file (default: the PEM in `$FANOUT_APP_PRIVATE_KEY`).
    #[arg(long, value_name = "FILE")]
    pub app_private_key: Option<PathBuf>,
    /// Least milliseconds between two API mutations (default 1000).
    #[arg(long, value_name = "MS")]
    pub pace_ms: Option<u64>,
    /// Least wait after a rate-limit answer without timing headers (default 60s).
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub rate_limit_wait: Option<f64>,
    /// Longest single wait before a retry (default 15m).
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub max_wait: Option<f64>,
    /// Most attempts per API request (default 6).
    #[arg(long, value_name = "N")]
    pub max_attempts: Option<u32>,
    /// Longest the whole of publishing may take, retries and waits included (default
    /// 15m); past it fanout stops with exit 4, and running it again continues.
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub publish_timeout: Option<f64>,
    /// Longest one API request may go unanswered before it is retried (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = seconds)]
    pub request_timeout: Option<f64>,
    /// First wait after a 5xx or a dropped connection (default 1s).
    #[arg(long, value_name = "DURATION", value_parser = seconds, hide = true)]
    pub server_error_backoff: Option<f64>,
    /// `stable`: one branch and pull request per task across runs; `per-run`: new ones
    /// every run (default: `stable` in a scheduled workflow, else `per-run`).
    #[arg(long, value_enum, value_name = "MODE")]
    pub branch: Option<crate::config::BranchMode>,
    /// Stable branches: open a pull request again although a human closed the last one.
    #[arg(long)]
    pub reopen: bool,
    /// `issue`: keep one rolling digest issue comparing each run with the one before.
    #[arg(long, value_enum, value_name = "MODE")]
    pub digest: Option<crate::config::DigestMode>,
    /// Print what publishing would do — per worker the push, and the pull request it
    /// would open, update, leave or close — and do none of it (GitHub is only read,
    /// and only with a token).
    #[arg(long)]
    pub dry_run: bool,
}

impl PublishArgs {
    /// The publishing flags as library input, with the credentials fanout was started
    /// with (`--token`, deprecated, wins, with a warning).
    pub fn flags(&self, secrets: &Secrets) -> PublishFlags {
        let token = match &self.token {
            Some(t) => {
                errln!(
                    "fanout: warning: --token is deprecated: every process on this machine can read a command line (/proc/<pid>/cmdline); set GITHUB_TOKEN instead"
                );
                Some(SecretString::from(t.trim().to_owned()))
            }
            None => secrets.github_token(),
        };
        PublishFlags {
            include: self.include.clone(),
            labels: self.labels.clone(),
            draft: self.draft,
            reviewers: self.reviewers.clone(),
            team_reviewers: self.team_reviewers.clone(),
            pr_base: self.pr_base.clone(),
            remote: self.remote.clone(),
            repo: self.repo.clone(),
            api_url: self.api_url.clone(),
            token,
            app_id: self.app_id,
            app_private_key: self.app_private_key.clone(),
            app_private_key_pem: secrets.get("FANOUT_APP_PRIVATE_KEY").cloned(),
            pace_ms: self.pace_ms,
            rate_limit_wait: self.rate_limit_wait,
            max_wait: self.max_wait,
            max_attempts: self.max_attempts,
            publish_timeout: self.publish_timeout,
            request_timeout: self.request_timeout,
            server_error_backoff: self.server_error_backoff,
            branch: self.branch,
            reopen: self.reopen,
            digest: self.digest,
            dry_run: self.dry_run,
        }
    }
}

/// `--dry-run` previews publishing: with `run`, `resume` and `aggregate` it needs
/// `--publish`.
pub fn dry_run_needs_publish(args: &PublishArgs, publish: bool) -> Result<(), CliError> {
    if args.dry_run && !publish {
        return Err(CliError::Usage(
            "--dry-run previews publishing: add --publish (`fanout publish --dry-run` previews a finished run)".into(),
        ));
    }
    Ok(())
}

/// A duration flag in seconds: humantime's syntax (`10m`, `1h30m`), a bare number
/// being seconds ([`crate::util::duration`], the parser `fanout.yml` uses too).
pub fn seconds(text: &str) -> Result<f64, String> {
    use crate::util::duration::{Bare, parse};
    parse(text, Bare::Seconds).map(|d| d.as_secs_f64())
}

/// A command's failure, with the exit code it maps to: the library's
/// [`crate::exit::Failure`] (bad files and repositories convert into it where their
/// errors are defined).
pub type CliError = crate::exit::Failure;

/// Global options.
#[derive(Debug, Clone)]
pub struct Context {
    /// Where fanout was started (or `-C`).
    pub cwd: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
}

impl Context {
    /// `path` as given on the command line: relative to where fanout was started.
    pub fn path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.cwd.join(path)
        }
    }

    /// The plan file given with `--plan`, refused unless its SHA-256 is `sha256` when given (the
    /// plan job's `plan-sha256` output: a later job's artifact may have been replaced).
    pub fn plan_file_checked(&self, path: &Path, sha256: Option<&str>) -> Result<Plan, CliError> {
        let path = self.path(path);
        let shown = path.display();
        let bytes = crate::util::read_capped(&path, crate::util::RECORD_LIMIT)
            .map_err(|e| CliError::Usage(format!("--plan {shown}: {e}")))?;
        if let Some(want) = sha256 {
            let got = crate::util::sha256_hex(&bytes);
            if !got.eq_ignore_ascii_case(want.trim()) {
                return Err(CliError::Usage(format!(
                    "--plan {shown}: its sha256 is {got}, not {want} (--plan-sha256): the plan \
                     is not the one the plan job wrote; refusing it"
                )));
            }
        }
        Plan::parse(&bytes).map_err(|e| CliError::Usage(format!("--plan {shown}: {e}")))
    }

    /// The repository fanout works on.
    pub fn repo(&self) -> Result<UserRepo, CliError> {
        Ok(UserRepo::discover(&self.cwd)?)
    }

    /// Load the config: `--config` (must exist) or `fanout.yml` at the repo root.
    pub fn load_config(&self, repo: &UserRepo) -> Result<(ConfigFile, PathBuf), CliError> {
        let given = self.config.as_deref();
        let (path, text) = crate::config::read_file(given, &self.cwd, &repo.workdir)?;
        let file = match text {
            Some(t) => crate::plan::settings::parse_config_for(&t, &path, repo)?,
            None => ConfigFile::default(),
        };
        Ok((file, path))
    }

    /// Validated settings from `file` (read from `path`) and `args` (`--tasks-file`
    /// read here), with `night`, what GitHub said before tonight.
    pub fn resolve(
        &self,
        file: &ConfigFile,
        path: &Path,
        args: &PlanArgs,
        allow_empty: bool,
        night: Option<crate::plan::night::NightInputs>,
    ) -> Result<Settings, CliError> {
        let mut flags = args.flags();
        flags.allow_empty = allow_empty;
        flags.night = night;
        flags.tasks_file = match &args.tasks_file {
            Some(p) => Some(self.tasks_file(p)?),
            None => None,
        };
        Settings::resolve(file, path, &flags).map_err(|e| CliError::Usage(e.to_string()))
    }

    /// A tasks file's name and text (`-`: standard input), at most the size of a
    /// config file.
    fn tasks_file(&self, p: &Path) -> Result<(String, String), CliError> {
        let bad = |e: std::io::Error| CliError::Usage(format!("--tasks-file {}: {e}", p.display()));
        if p == Path::new("-") {
            use std::io::Read;
            let mut text = String::new();
            std::io::stdin()
                .take(crate::util::CONFIG_LIMIT + 1)
                .read_to_string(&mut text)
                .map_err(bad)?;
            if text.len() as u64 > crate::util::CONFIG_LIMIT {
                return Err(CliError::Usage(format!(
                    "--tasks-file -: more than {} bytes on standard input",
                    crate::util::CONFIG_LIMIT
                )));
            }
            return Ok(("<stdin>".to_owned(), text));
        }
        let text = crate::util::read_capped_string(&self.path(p), crate::util::CONFIG_LIMIT)
            .map_err(bad)?;
        Ok((p.display().to_string(), text))
    }
}

/// Validate a `--run-id`, or make one.
pub fn run_id(given: Option<&str>) -> Result<String, CliError> {
    match given {
        Some(id) if crate::plan::is_valid_run_id(id) => Ok(id.to_owned()),
        Some(id) => Err(CliError::Usage(format!(
            "--run-id {id:?}: use letters, digits, '-' and '_' (at most 64)"
        ))),
        None => Ok(crate::plan::new_run_id()),
    }
}
