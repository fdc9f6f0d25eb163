//! The subcommands, one file each, and the CLI edge: parsing, friendly errors, exit
//! codes. Library errors (thiserror) become one-line diagnostics here.

pub mod aggregate;
pub mod cleanup;
pub mod demo;
pub mod fake_agent;
pub mod init;
pub mod plan;
pub mod publish;
pub mod resume;
pub mod run;
pub mod schema;
pub mod status;
pub mod worker;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, PlanArgs};
use crate::config::{ConfigError, ConfigFile};
use crate::exit;
use crate::repo::UserRepo;
use crate::settings::Settings;

/// A command's failure, with the exit code it maps to.
#[derive(Debug)]
pub enum CliError {
    /// Bad flags, config or arguments: exit 2.
    Usage(String),
    /// fanout's own failure: exit 4.
    Fatal(String),
    /// Stopped by a signal: exit 130.
    Interrupted,
}

impl CliError {
    fn code(&self) -> i32 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::Fatal(_) => exit::FATAL,
            CliError::Interrupted => exit::INTERRUPTED,
        }
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        match e.snippet() {
            Some(s) => CliError::Usage(format!("{e}\n{s}")),
            None => CliError::Usage(e.to_string()),
        }
    }
}

impl From<crate::repo::RepoError> for CliError {
    fn from(e: crate::repo::RepoError) -> Self {
        use crate::repo::RepoError::*;
        match e {
            NotARepo { .. } | Bare(_) | Base { .. } => CliError::Usage(e.to_string()),
            Git(_) => CliError::Fatal(e.to_string()),
        }
    }
}

/// What `main` calls.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    init_tracing();
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            match &e {
                CliError::Usage(msg) | CliError::Fatal(msg) => eprintln!("fanout: error: {msg}"),
                CliError::Interrupted => eprintln!(
                    "fanout: interrupted; publishing is idempotent: run it again to finish"
                ),
            }
            e.code()
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FANOUT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn dispatch(cli: Cli) -> Result<i32, CliError> {
    let cwd = match &cli.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| CliError::Fatal(format!("current directory: {e}")))?,
    };
    let ctx = Context {
        cwd,
        config: cli.config,
    };
    match cli.command {
        Command::Run(args) => run::run(&ctx, &args),
        Command::Plan(args) => plan::plan(&ctx, &args),
        Command::Worker(args) => worker::worker(&ctx, &args),
        Command::Aggregate(args) => aggregate::aggregate(&ctx, &args),
        Command::Publish(args) => publish::publish_command(&ctx, &args),
        Command::Schema => schema::schema(),
        Command::Init(args) => init::init(&ctx, &args),
        Command::Cleanup(args) => cleanup::cleanup(&ctx, &args),
        Command::Resume(args) => resume::resume(&ctx, &args),
        Command::Status(args) => status::status(&ctx, &args),
        Command::Demo(args) => demo::demo(&args),
        Command::FakeAgent(args) => Ok(fake_agent::fake_agent(&args)),
    }
}

/// Global options.
#[derive(Debug, Clone)]
pub struct Context {
    /// Where fanout was started (or `-C`).
    pub cwd: PathBuf,
    /// `--config`.
    pub config: Option<PathBuf>,
}

impl Context {
    /// The repository fanout works on.
    pub fn repo(&self) -> Result<UserRepo, CliError> {
        Ok(UserRepo::discover(&self.cwd)?)
    }

    /// Load the config: `--config` (must exist) or `fanout.yml` at the repo root.
    pub fn load_config(&self, repo: &UserRepo) -> Result<(ConfigFile, PathBuf), CliError> {
        match &self.config {
            Some(p) => {
                let path = if p.is_absolute() {
                    p.clone()
                } else {
                    self.cwd.join(p)
                };
                let shown = p.clone();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| CliError::Usage(format!("--config {}: {e}", p.display())))?;
                Ok((crate::config::parse(&text, &shown)?, shown))
            }
            None => {
                let path = repo.workdir.join("fanout.yml");
                if path.is_file() {
                    Ok((crate::config::load(&path)?, path))
                } else {
                    Ok((ConfigFile::default(), path))
                }
            }
        }
    }

    /// Repo, config and validated settings for a plan.
    pub fn settings(&self, args: &PlanArgs) -> Result<(UserRepo, Settings), CliError> {
        self.settings_with(args, false)
    }

    /// [`Context::settings`], optionally allowing an empty task list.
    pub fn settings_with(
        &self,
        args: &PlanArgs,
        allow_empty: bool,
    ) -> Result<(UserRepo, Settings), CliError> {
        let repo = self.repo()?;
        let (file, path) = self.load_config(&repo)?;
        let mut flags = args.flags();
        flags.allow_empty = allow_empty;
        let settings =
            Settings::resolve(&file, &path, &flags).map_err(|e| CliError::Usage(e.to_string()))?;
        Ok((repo, settings))
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

/// Human size: `12.3 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Run ids present in `runs_dir`, oldest first.
pub fn list_runs(runs_dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(runs_dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| crate::plan::is_valid_run_id(n))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}
