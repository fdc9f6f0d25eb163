//! The command-line edge: parsing (raw flags, clap), dispatch to one thin file per
//! subcommand (flags → library call → printed outcome), and `main`'s exit code.
//! Shared flags, [`common::Context`] and [`common::CliError`] are in [`common`]; no
//! subcommand file imports another.

pub mod aggregate;
pub mod cleanup;
pub mod common;
pub mod demo;
pub mod fake_agent;
pub mod init;
pub mod plan;
pub mod publish;
pub mod resume;
pub mod run;
pub mod sandbox;
pub mod schema;
pub mod status;
pub mod tend;
pub mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::util::out::errln;
use common::{CliError, Context};

/// fanout: fan coding-agent tasks out to parallel git worktrees, fan results back in.
#[derive(Debug, Parser)]
#[command(name = "fanout", version, about, long_about = None)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// Run as if started in DIR.
    #[arg(short = 'C', global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Config file (default: fanout.yml at the repository root, if present).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Exit codes, shown in `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    every worker succeeded
  1    some workers succeeded, some did not
  2    usage or configuration error (nothing was run)
  3    no worker succeeded
  4    fanout itself failed (git, I/O)
  130  interrupted (SIGINT/SIGTERM); results were still written";

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, run and harvest a batch of agent workers in parallel worktrees.
    Run(Box<run::RunArgs>),
    /// Print the plan without running anything (and, for matrix mode, write it out).
    Plan(plan::PlanCommand),
    /// Matrix mode: run one worker of a plan in this checkout, for one Actions job.
    Worker(worker::WorkerArgs),
    /// Matrix mode: collect the workers' results and branches, report, publish.
    Aggregate(aggregate::AggregateArgs),
    /// Push successful branches and open or update one pull request each.
    Publish(publish::PublishCommand),
    /// Before a night: read GitHub (issues as tasks, pull requests to tend) for
    /// `fanout run --tend-file`.
    Tend(Box<tend::TendArgs>),
    /// Print the JSON Schema of fanout.yml.
    #[command(after_help = schema::EXAMPLES)]
    Schema,
    /// Write a workflow template into .github/workflows/ (or check it for drift).
    Init(init::InitArgs),
    /// Remove the worktrees and branches fanout created.
    Cleanup(cleanup::CleanupArgs),
    /// Finish a run cut short (crash, Ctrl-C): run again only the workers that did not finish.
    Resume(resume::ResumeArgs),
    /// List runs, workers, worktrees, their git status and disk use.
    Status(status::StatusArgs),
    /// Which sandbox agents get on this machine (Landlock's ABI; what `auto` and
    /// `required` do here).
    Sandbox(sandbox::SandboxArgs),
    /// Make a throwaway repository and run 3 workers of the bundled fake agent in it.
    Demo(demo::DemoArgs),
    /// The bundled fake agent (for the demo, tests and benchmarks).
    #[command(hide = true)]
    FakeAgent(fake_agent::FakeAgentArgs),
}

/// What `main` calls.
pub fn main() -> ExitCode {
    // A worker's supervisor: it holds no credential (it is started with the agent's
    // environment) and stays readable to resume's checks, so it skips what follows.
    if let Some(command) = crate::run::supervisor::started_as_supervisor(std::env::args_os()) {
        return crate::run::supervisor::main(command);
    }
    // First, while this is the only thread: credentials out of the environment (and
    // out of /proc/<pid>/environ), and the process closed to same-user readers.
    let secrets = crate::secret::Secrets::take_from_env();
    crate::secret::make_undumpable();
    // Under a GitHub Actions runner, nothing fanout prints may issue a workflow command.
    crate::util::out::set_runner_reads_commands(crate::util::in_actions());
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // An error (not --help or --version) opens like fanout's own: `fanout: error: …`.
            if e.use_stderr() {
                let _ = std::io::Write::write_all(&mut std::io::stderr(), b"fanout: ");
            }
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    // Still the only thread: how libgit2 reads objects, the allocator bounded.
    crate::util::runtime::init();
    init_tracing();
    let code = match dispatch(cli, secrets) {
        Ok(code) => code,
        Err(e) => {
            match &e {
                CliError::Usage(msg) | CliError::Fatal(msg) => errln!("fanout: error: {msg}"),
                CliError::Interrupted => {
                    errln!("fanout: interrupted; publishing is idempotent: run it again to finish")
                }
            }
            e.code()
        }
    };
    // Output to a closed pipe was dropped quietly (crate::util::out); a failed write
    // of another kind (a full disk) is fanout's own failure.
    let code = if code == 0 && crate::util::out::failed() {
        crate::exit::FATAL
    } else {
        code
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Log lines go to stderr: fanout's warnings by default (`FANOUT_LOG` sets the
/// filter), without octocrab's own (fanout says what went wrong with each request),
/// coloured only on a terminal.
fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("FANOUT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,octocrab=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(crate::util::out::TracingWriter)
        .try_init();
}

/// Run the command. Only commands that may publish, or run agents (one whose
/// definition says `allow_github_token: true` gets the token), keep `secrets`.
fn dispatch(cli: Cli, secrets: crate::secret::Secrets) -> Result<i32, CliError> {
    let secrets = match &cli.command {
        Command::Run(_)
        | Command::Resume(_)
        | Command::Publish(_)
        | Command::Tend(_)
        | Command::Aggregate(_)
        | Command::Worker(_) => secrets,
        _ => {
            drop(secrets);
            crate::secret::Secrets::default()
        }
    };
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
        Command::Run(args) => run::run(&ctx, &args, secrets),
        Command::Plan(args) => plan::plan(&ctx, &args),
        Command::Worker(args) => worker::worker(&ctx, &args, secrets),
        Command::Aggregate(args) => aggregate::aggregate(&ctx, &args, &secrets),
        Command::Publish(args) => publish::publish_command(&ctx, &args, &secrets),
        Command::Tend(args) => tend::tend(&ctx, &args, &secrets),
        Command::Schema => schema::schema(),
        Command::Init(args) => init::init(&ctx, &args),
        Command::Cleanup(args) => cleanup::cleanup(&ctx, &args),
        Command::Resume(args) => resume::resume(&ctx, &args, secrets),
        Command::Status(args) => status::status(&ctx, &args),
        Command::Demo(args) => demo::demo(&args),
        Command::Sandbox(args) => sandbox::sandbox(&args),
        Command::FakeAgent(args) => Ok(fake_agent::fake_agent(&args)),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// A shell line's words (quotes grouped), up to a redirection.
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word: Option<String> = None;
        let mut quote = None;
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.get_or_insert_with(String::new).push(c),
                (None, '"' | '\'') => {
                    quote = Some(c);
                    word.get_or_insert_with(String::new);
                }
                (None, '>' | '|') => break,
                (None, c) if c.is_whitespace() => out.extend(word.take()),
                (None, c) => word.get_or_insert_with(String::new).push(c),
            }
        }
        out.extend(word);
        out
    }

    #[test]
    fn every_subcommand_ends_its_help_with_examples_that_parse() {
        let cli = Cli::command();
        for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = sub.get_name();
            let help = sub
                .get_after_help()
                .unwrap_or_else(|| panic!("`fanout {name} --help` has no examples"))
                .to_string();
            assert!(help.starts_with("Examples:\n"), "{name}: {help}");
            let examples: Vec<&str> = help
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("fanout "))
                .collect();
            assert!(
                (2..=3).contains(&examples.len()),
                "{name}: {} examples",
                examples.len()
            );
            for ex in examples {
                let args = words(ex);
                assert_eq!(args[1], name, "{ex}");
                if let Err(e) = Cli::try_parse_from(&args) {
                    panic!("`{ex}` does not parse: {e}");
                }
            }
        }
    }
}
