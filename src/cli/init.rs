//! `fanout init`: write one of fanout's workflow templates (`templates/workflows/`,
//! embedded in the binary) into `.github/workflows/`, or with `--check` report how
//! the file there has drifted from the template.
//!
//! The templates are plain workflow files that pass the workflow linters as they are;
//! the only thing rendered is the action reference (`--action`), so a checked-in file
//! stays byte-for-byte comparable with the template it came from. A file that exists
//! and differs is never overwritten without `--force`: it may hold the user's edits.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::common::{CliError, Context};

/// The action reference the templates are written with.
pub const DEFAULT_ACTION: &str = "fanout-dev/fanout@v0";

/// Which workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Plan, one matrix job per worker (read-only), an aggregate job that publishes.
    Matrix,
    /// Every worker on one runner, in its own worktree; publishes.
    Local,
    /// Scheduled maintenance: the config's tasks every night; publishes.
    Nightly,
}

impl Kind {
    /// The template's text.
    pub fn template(self) -> &'static str {
        match self {
            Kind::Matrix => include_str!("../../templates/workflows/matrix.yml"),
            Kind::Local => include_str!("../../templates/workflows/local.yml"),
            Kind::Nightly => include_str!("../../templates/workflows/nightly.yml"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Matrix => "matrix",
            Kind::Local => "local",
            Kind::Nightly => "nightly",
        }
    }
}

/// `fanout init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Which workflow to write.
    #[arg(long, value_enum, default_value = "matrix")]
    pub kind: Kind,
    /// Compare the workflow file with the template instead of writing it: exit 0 when
    /// they match, 1 with a diff when they differ or the file is missing.
    #[arg(long)]
    pub check: bool,
    /// The action the workflow uses (`owner/repo@ref`, or a local `./path`).
    #[arg(long, value_name = "REF", default_value = DEFAULT_ACTION)]
    pub action: String,
    /// Where to write (default `.github/workflows/fanout-<kind>.yml` at the repository root).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Overwrite a file that differs from the template.
    #[arg(long, conflicts_with = "check")]
    pub force: bool,
    /// Print the workflow to standard output instead of writing it.
    #[arg(long, conflicts_with_all = ["check", "output", "force"])]
    pub stdout: bool,
}

/// The workflow text for `kind` using the action `action`.
pub fn render(kind: Kind, action: &str) -> Result<String, String> {
    let ok = !action.is_empty()
        && !action
            .chars()
            .any(|c| c.is_whitespace() || c == '#' || c == '\'' || c == '"')
        && (action.starts_with("./") || action.starts_with("docker://") || action.contains('@'));
    if !ok {
        return Err(format!(
            "--action {action:?}: expected `owner/repo@ref` or a local `./path`"
        ));
    }
    Ok(kind.template().replace(
        &format!("uses: {DEFAULT_ACTION}"),
        &format!("uses: {action}"),
    ))
}

/// A unified diff of `old` → `new`, labelled with `path`.
fn diff(path: &Path, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{} (on disk)", path.display()),
            &format!("{} (template)", path.display()),
        )
        .to_string()
}

/// Entry point of `fanout init`.
pub fn init(ctx: &Context, args: &InitArgs) -> Result<i32, CliError> {
    let text = render(args.kind, &args.action).map_err(CliError::Usage)?;
    if args.stdout {
        print!("{text}");
        return Ok(0);
    }
    let path = match &args.output {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => ctx.cwd.join(p),
        None => ctx
            .repo()?
            .workdir
            .join(".github/workflows")
            .join(format!("fanout-{}.yml", args.kind.name())),
    };
    let existing = match std::fs::read_to_string(&path) {
        Ok(s) => Some(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(CliError::Fatal(format!("{}: {e}", path.display()))),
    };
    let shown = args.output.clone().unwrap_or_else(|| {
        PathBuf::from(format!(".github/workflows/fanout-{}.yml", args.kind.name()))
    });
    if args.check {
        return Ok(match existing {
            Some(old) if old == text => {
                eprintln!(
                    "{}: matches the {} template",
                    shown.display(),
                    args.kind.name()
                );
                0
            }
            Some(old) => {
                print!("{}", diff(&shown, &old, &text));
                eprintln!(
                    "{}: differs from the {} template (run `fanout init --kind {} --force` to reset it)",
                    shown.display(),
                    args.kind.name(),
                    args.kind.name()
                );
                1
            }
            None => {
                eprintln!(
                    "{}: missing (run `fanout init --kind {}` to write it)",
                    shown.display(),
                    args.kind.name()
                );
                1
            }
        });
    }
    match existing {
        Some(old) if old == text => {
            eprintln!("{}: already up to date", shown.display());
            return Ok(0);
        }
        Some(old) if !args.force => {
            print!("{}", diff(&shown, &old, &text));
            return Err(CliError::Usage(format!(
                "{} exists and differs from the {} template (diff above); keep it, or pass --force to overwrite it",
                shown.display(),
                args.kind.name()
            )));
        }
        _ => {}
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::Fatal(format!("{}: {e}", dir.display())))?;
    }
    // Write then rename: an interrupted init never leaves half a workflow.
    let tmp = path.with_extension("yml.fanout-tmp");
    std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CliError::Fatal(format!("{}: {e}", path.display()))
        })?;
    eprintln!("wrote {}", shown.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_uses_the_default_action_and_renders_another() {
        for kind in [Kind::Matrix, Kind::Local, Kind::Nightly] {
            let t = kind.template();
            assert!(
                t.contains(&format!("uses: {DEFAULT_ACTION}")),
                "{kind:?} template does not use {DEFAULT_ACTION}"
            );
            let r = render(kind, "./.fanout-action").unwrap();
            assert!(!r.contains(DEFAULT_ACTION), "{kind:?}");
            assert!(r.contains("uses: ./.fanout-action"), "{kind:?}");
            // Inputs reach the action through `with:`, never interpolated into shell text.
            assert!(!t.contains("run: "), "{kind:?} template runs shell");
        }
    }

    #[test]
    fn bad_action_refs_are_refused() {
        for bad in ["", "owner/repo", "a b@v1", "x@v1 # c"] {
            let e = render(Kind::Local, bad).unwrap_err();
            assert!(e.starts_with("--action"), "{bad}: {e}");
        }
        assert!(render(Kind::Local, "me/fork@main").is_ok());
    }

    #[test]
    fn matrix_template_keeps_write_permissions_in_the_aggregate_job_only() {
        let wf: serde_json::Value = serde_saphyr::from_str(Kind::Matrix.template()).unwrap();
        assert_eq!(wf["permissions"], serde_json::json!({}));
        let jobs = wf["jobs"].as_object().unwrap();
        let names: Vec<&str> = jobs.keys().map(String::as_str).collect();
        // (serde_json's map is sorted)
        assert_eq!(
            names,
            ["aggregate", "plan", "work-1", "work-2", "work-3", "work-4"]
        );
        for (name, job) in jobs {
            let perms = job["permissions"].as_object().unwrap_or_else(|| {
                panic!("job {name} states no permissions");
            });
            let writes: Vec<&String> = perms
                .iter()
                .filter(|(_, v)| *v == "write")
                .map(|(k, _)| k)
                .collect();
            if name == "aggregate" {
                assert_eq!(writes, ["contents", "pull-requests"]);
            } else {
                assert!(writes.is_empty(), "job {name} may write: {writes:?}");
            }
        }
        // Each chunk's job runs only when the chunk is not empty, and aggregate waits for all.
        // Chunks run in order (waves of dependent tasks), each only when not empty.
        assert_eq!(jobs["work-1"]["if"], "needs.plan.outputs.count-1 != '0'");
        for i in 2..=4 {
            assert_eq!(
                jobs[&format!("work-{i}")]["if"],
                format!(
                    "always() && needs.plan.result == 'success' && needs.plan.outputs.count-{i} != '0'"
                )
            );
            assert_eq!(
                jobs[&format!("work-{i}")]["needs"],
                serde_json::json!(["plan", format!("work-{}", i - 1)])
            );
        }
        assert_eq!(jobs["aggregate"]["needs"].as_array().unwrap().len(), 5);
    }
}
