//! What to do after a run: the lines `fanout run` and `fanout demo` print under the
//! table — where the results and summary are, how to list the branches, see the
//! status, publish and clean up — and the log of each worker that did not succeed.
//! The commands name fanout as the user can run it ([`program`]).

use std::ffi::OsStr;
use std::fmt::Write;
use std::path::Path;

use crate::model::Status;
use crate::run::results::RunReport;

/// How to print the commands.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints<'a> {
    /// The repository, when the commands must name it (`git -C DIR`, `fanout -C DIR`).
    pub dir: Option<&'a Path>,
    /// Whether to say how to publish (not after `--publish`, nor in the demo).
    pub publish: bool,
}

/// The lines to print after `report`'s table (its files are in `run_dir`).
pub fn next_steps(report: &RunReport, run_dir: &Path, hints: Hints<'_>) -> String {
    let fanout = program();
    let at = |tool: &str| {
        let tool = if tool == "fanout" { &fanout } else { tool };
        match hints.dir {
            Some(d) => format!("{tool} -C {}", shell_quote(&d.display().to_string())),
            None => tool.to_owned(),
        }
    };
    let id = &report.run_id;
    let mut out = String::new();
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "{:<10} {text}", format!("{label}:"));
    };
    line(
        "results",
        run_dir.join("results.json").display().to_string(),
    );
    line("summary", run_dir.join("summary.md").display().to_string());
    if let Some(ns) = namespace(report) {
        line("branches", format!("{} branch --list '{ns}/*'", at("git")));
    }
    line("status", format!("{} status --run {id}", at("fanout")));
    if hints.publish && report.totals.success > 0 {
        line("publish", format!("{} publish --run {id}", at("fanout")));
    }
    line("clean up", format!("{} cleanup --run {id}", at("fanout")));
    for r in &report.results {
        if r.status == Status::Success {
            continue;
        }
        if let Some(log) = &r.log_path {
            let label = format!("worker {} {}", r.worker_id, r.status.as_str());
            line("log", format!("{} ({label})", log.display()));
        }
    }
    out
}

/// This fanout, as a command the user can type: `fanout` when that is what `PATH`
/// finds, else this executable's path (run through `cargo run`, or from a directory
/// not on `PATH`).
pub fn program() -> String {
    match std::env::current_exe() {
        Ok(exe) => program_for(&exe, std::env::var_os("PATH").as_deref()),
        Err(_) => "fanout".to_owned(),
    }
}

/// [`program`] for the executable `exe` and the search path `path`.
fn program_for(exe: &Path, path: Option<&OsStr>) -> String {
    let found = path.and_then(|p| {
        std::env::split_paths(p)
            .map(|d| d.join("fanout"))
            .find(|c| c.is_file())
    });
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match found {
        Some(f) if same(&f, exe) => "fanout".to_owned(),
        _ => shell_quote(&exe.display().to_string()),
    }
}

/// `s` as one word of a POSIX shell command line: as it is when it holds nothing the
/// shell reads specially, else in single quotes.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-,:=@%".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The run's branch namespace (`fanout/<run-id>`), from its plan.
fn namespace(report: &RunReport) -> Option<&str> {
    let first = report.plan.workers.first()?;
    first.branch.rsplit_once('/').map(|(ns, _)| ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_is_named_as_the_user_can_run_it() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = bin.join("fanout");
        std::fs::write(&exe, "").unwrap();
        // On PATH: its name.
        let path = std::env::join_paths([Path::new("/nonexistent"), &bin]).unwrap();
        assert_eq!(program_for(&exe, Some(&path)), "fanout");
        // Not on PATH (as under `cargo run`): its path.
        let shown = exe.display().to_string();
        assert_eq!(program_for(&exe, Some(OsStr::new("/nonexistent"))), shown);
        assert_eq!(program_for(&exe, None), shown);
        // Another fanout first on PATH: this one's path.
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("fanout"), "").unwrap();
        let path = std::env::join_paths([&other, &bin]).unwrap();
        assert_eq!(program_for(&exe, Some(&path)), shown);
    }

    #[test]
    fn words_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(
            shell_quote("/tmp/a-b/target/debug/fanout"),
            "/tmp/a-b/target/debug/fanout"
        );
        assert_eq!(shell_quote("/my dir/fanout"), "'/my dir/fanout'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
