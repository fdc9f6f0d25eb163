//! `fanout demo`: a throwaway repository ([`make_repo`]) and a run of three workers of
//! the bundled fake agent in it ([`run`]). Everything it makes stays under one
//! directory.

use std::path::Path;

use git2::{Repository, Signature};

use crate::exit::Failure;
use crate::plan::settings::{PlanFlags, Settings, parse_config};
use crate::repo::UserRepo;
use crate::report::progress::Style;
use crate::run::attempt::ExecOptions;
use crate::run::results::RunReport;

/// Run the demo repository at `repo_dir`'s own config, as `fanout run` would.
pub fn run(repo_dir: &Path, style: Style) -> Result<(UserRepo, RunReport), Failure> {
    let repo = UserRepo::discover(repo_dir)?;
    let config_path = repo_dir.join("fanout.yml");
    let file = parse_config(&crate::config::read_text(&config_path)?, &config_path)?;
    let settings = Settings::resolve(&file, &config_path, &PlanFlags::default())
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let base = repo.resolve_base(&settings.base)?;
    let plan = crate::plan::assign::build(&settings, base, &crate::plan::new_run_id());
    let opts = ExecOptions::from_settings(&settings);
    let report = super::run::execute_plan(&repo, &opts, plan, style, Default::default())?;
    Ok((repo, report))
}

/// Make the demo repository in `dir`: a README, a source file and a `fanout.yml`
/// whose agent is this executable's bundled fake agent (`exe`), committed.
pub fn make_repo(dir: &Path, exe: &Path) -> Result<(), String> {
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
    let repo = Repository::init(dir).map_err(|e| e.message().to_owned())?;
    let mut index = repo.index().map_err(|e| e.message().to_owned())?;
    for (name, _) in &files {
        index
            .add_path(Path::new(name))
            .map_err(|e| e.message().to_owned())?;
    }
    index.write().map_err(|e| e.message().to_owned())?;
    let tree = repo
        .find_tree(index.write_tree().map_err(|e| e.message().to_owned())?)
        .map_err(|e| e.message().to_owned())?;
    let sig =
        Signature::now("fanout demo", "demo@fanout.invalid").map_err(|e| e.message().to_owned())?;
    repo.commit(Some("HEAD"), &sig, &sig, "demo: initial commit", &tree, &[])
        .map_err(|e| e.message().to_owned())?;
    Ok(())
}

fn yaml_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
