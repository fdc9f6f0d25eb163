//! Before a night's plan: what GitHub says about tonight's tasks — tasks from
//! labelled issues, fanout's open pull requests to tend or settled — read with the
//! publishing credentials ([`crate::publish::tend`]) and handed to the plan as data
//! ([`crate::plan::night::NightInputs`], through the settings' flags). `fanout tend`
//! writes it to a file for a run without credentials (the action's run step);
//! `fanout run --publish` reads it itself when the config asks for it.

use crate::config::{BranchMode, ConfigFile};
use crate::exit::Failure;
use crate::plan::night::NightInputs;
use crate::plan::settings::Settings;
use crate::publish::report::PublishFlags;
use crate::repo::{PushRecord, UserRepo};

/// Read tonight's inputs for the tasks of `settings` (see the module docs).
pub fn night(
    repo: &UserRepo,
    file: &ConfigFile,
    settings: &Settings,
    flags: &PublishFlags,
    record: Option<&PushRecord>,
) -> Result<NightInputs, Failure> {
    let base = repo.resolve_base(&settings.base)?;
    let keys: Vec<String> = settings.tasks.iter().map(|t| t.key()).collect();
    crate::publish::tend::gather_night(
        repo,
        file,
        flags,
        record,
        &keys,
        &base,
        &settings.branch_prefix,
    )
}

/// Whether a run publishing with `flags` reads GitHub before its plan: issues are
/// tasks (`tasks_from`), or it publishes to stable branches with tending on.
pub fn wanted(file: &ConfigFile, flags: &PublishFlags) -> bool {
    let issues = file.tasks_from.as_ref().is_some_and(|t| t.issues.is_some());
    let stable = match flags.branch.or(file.publish.branch) {
        Some(mode) => mode == BranchMode::Stable,
        None => std::env::var("GITHUB_EVENT_NAME").is_ok_and(|e| e == "schedule"),
    };
    issues || (stable && file.tend.max_attempts() > 0)
}

/// Read a file `fanout tend` wrote.
pub fn read(path: &std::path::Path) -> Result<NightInputs, Failure> {
    let bytes = crate::util::read_capped(path, crate::util::RECORD_LIMIT)
        .map_err(|e| Failure::Usage(format!("--tend-file {}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::Usage(format!(
            "--tend-file {}: not what `fanout tend` writes: {e}",
            path.display()
        ))
    })
}
