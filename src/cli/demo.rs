//! `fanout demo`: make a throwaway repository, run three workers of the bundled fake
//! agent in it, and show the result. Everything it makes stays under one directory.

use std::path::{Path, PathBuf};

use git2::{Repository, Signature};

use clap::Args;

use super::common::CliError;
use crate::plan::settings::{PlanFlags, Settings};
use crate::repo::UserRepo;
use crate::report::progress::Style;

/// `fanout demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Where to make the demo repository (default: a new temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// No live progress bars.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Entry point of `fanout demo`.
pub fn demo(args: &DemoArgs) -> Result<i32, CliError> {
    let root = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("fanout-demo-{}", crate::plan::new_run_id())),
    };
    let repo_dir = root.join("repo");
    if repo_dir.exists() {
        return Err(CliError::Usage(format!(
            "--dir {}: already holds a demo (remove it or pick another directory)",
            root.display()
        )));
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Fatal(format!("cannot find the fanout executable: {e}")))?;
    make_repo(&repo_dir, &exe)
        .map_err(|e| CliError::Fatal(format!("making the demo repository: {e}")))?;
    println!("fanout demo: repository {}", repo_dir.display());

    let repo = UserRepo::discover(&repo_dir)?;
    let config_path = repo_dir.join("fanout.yml");
    let file = crate::plan::settings::load_config(&config_path)?;
    let settings = Settings::resolve(&file, &config_path, &PlanFlags::default())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let base = repo.resolve_base(&settings.base)?;
    let plan = crate::plan::assign::build(&settings, base, &crate::plan::new_run_id());
    let style = Style::detect(args.quiet);
    let opts = super::run::ExecOptions::from_settings(&settings);
    let report = super::run::execute_plan(&repo, &opts, plan, style)?;
    print!("\n{}", crate::report::table::table(&report.results));
    println!(
        "\nresults:   {}\nsummary:   {}\nbranches:  git -C {} branch --list 'fanout/*'\ninspect:   fanout -C {} status\nclean up:  fanout -C {} cleanup --all",
        repo.run_dir(&report.run_id).join("results.json").display(),
        repo.run_dir(&report.run_id).join("summary.md").display(),
        repo_dir.display(),
        repo_dir.display(),
        repo_dir.display(),
    );
    Ok(report.exit_code)
}

fn make_repo(dir: &Path, exe: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir.join("src")).map_err(|e| e.to_string())?;
    let config = format!(
        "# fanout demo: three tasks, three workers of the bundled fake agent.\n\
parallel_runs:\n  workers: 3\n  agent: fake\n  max_steps: 10\n  timeout_per_worker: 60\n\
tasks:\n  - Write a haiku about parallel worktrees\n  - Summarise the README in one sentence\n  - List three ideas for the next release\n\
models: [model-a, model-b]\n\
worktree_dir: ../worktrees\n\
agents:\n  fake:\n    command: [{exe}, fake-agent, --sleep, \"1.5\", \"{{task}}\"]\n",
        exe = yaml_quote(&exe.display().to_string())
    );
    let files: [(&str, String); 3] = [
        (
            "README.md",
            "# demo\n\nA throwaway repository made by `fanout demo`.\n".into(),
        ),
        ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n".into()),
        ("fanout.yml", config),
    ];
    for (name, body) in &files {
        std::fs::write(dir.join(name), body).map_err(|e| e.to_string())?;
    }
    let repo = Repository::init(dir).map_err(|e| e.to_string())?;
    let mut index = repo.index().map_err(|e| e.to_string())?;
    for (name, _) in &files {
        index.add_path(Path::new(name)).map_err(|e| e.to_string())?;
    }
    index.write().map_err(|e| e.to_string())?;
    let tree = repo
        .find_tree(index.write_tree().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let sig = Signature::now("fanout demo", "demo@fanout.invalid").map_err(|e| e.to_string())?;
    repo.commit(Some("HEAD"), &sig, &sig, "demo: initial commit", &tree, &[])
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn yaml_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The directory a demo was made in, for tests.
pub fn demo_repo(root: &Path) -> PathBuf {
    root.join("repo")
}
