//! Matrix mode's hand-over between jobs: each worker job leaves
//! `fanout-result-<id>/` ([`WorkerArtifact`] in `result.json`, its branch as a git
//! bundle, the agent's log; [`write()`]), and the aggregate job — or a dependent
//! worker's job — verifies and imports it ([`collect`]): only the expected branch,
//! based on the plan's base commit, with what changed recomputed from git rather than
//! taken from the job's word, and a findings task's findings bounded again. A job that
//! left nothing is a failed result, never a silently missing one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::findings::bounded;
use crate::config::TaskOutput;
use crate::model::{Status, WorkerResult};
use crate::plan::{Plan, PlannedWorker};

/// What a worker job hands to the aggregate job (`result.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerArtifact {
    /// Version of this shape.
    pub schema_version: u32,
    /// The plan's run id.
    pub run_id: String,
    /// The plan's base commit.
    pub base_commit: String,
    /// The worker's result.
    pub result: WorkerResult,
    /// Name of the bundle file beside it, when the branch has commits.
    pub bundle: Option<String>,
}

impl WorkerArtifact {
    /// An artifact from its `result.json`'s bytes.
    pub fn parse(bytes: &[u8]) -> Result<WorkerArtifact, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// The directory name of a worker's artifact.
pub fn artifact_dir_name(id: u32) -> String {
    format!("fanout-result-{id}")
}

/// Find `fanout-result-<id>/result.json` under `from` (directly, or one level down,
/// as artifact downloads sometimes nest).
fn find_artifact(from: &Path, id: u32) -> Option<PathBuf> {
    let name = artifact_dir_name(id);
    let direct = from.join(&name).join("result.json");
    if direct.is_file() {
        return Some(direct);
    }
    std::fs::read_dir(from).ok()?.flatten().find_map(|e| {
        let p = e.path().join(&name).join("result.json");
        p.is_file().then_some(p)
    })
}

/// A failed result for worker `w`, whose artifact is missing or refused.
pub fn missing(w: &PlannedWorker, reason: String) -> WorkerResult {
    w.result(Status::Failed, reason.into())
}

/// The commit worker `w`'s bundle under `from` holds for its branch, when it has one.
pub fn bundle_tip(from: &Path, w: &PlannedWorker) -> Option<String> {
    let path = find_artifact(from, w.id)?;
    let artifact: WorkerArtifact = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let name = artifact.bundle.filter(|n| !n.contains('/'))?;
    let header = super::bundle::read_header(&path.with_file_name(name)).ok()?;
    let want = format!("refs/heads/{}", w.branch);
    match header.refs.as_slice() {
        [(sha, n)] if *n == want => Some(sha.clone()),
        _ => None,
    }
}

/// Read worker `w`'s artifact under `from`, verify its bundle and import its branch
/// into the repository at `repo_dir`; a missing or bad artifact is a failed result.
pub fn collect(repo_dir: &Path, plan: &Plan, w: &PlannedWorker, from: &Path) -> WorkerResult {
    let Some(path) = find_artifact(from, w.id) else {
        return missing(
            w,
            "the worker's job left no result (it failed before fanout finished, was cancelled, or its artifact was not uploaded)".into(),
        );
    };
    let artifact = match crate::util::read_capped(&path, crate::util::RECORD_LIMIT)
        .map_err(|e| e.to_string())
        .and_then(|b| WorkerArtifact::parse(&b).map_err(|e| e.to_string()))
    {
        Ok(a) => a,
        Err(e) => return missing(w, format!("unreadable result.json: {e}")),
    };
    let r = &artifact.result;
    if artifact.run_id != plan.run_id
        || artifact.base_commit != plan.base.commit
        || r.worker_id != w.id
        || r.branch != w.branch
    {
        return missing(
            w,
            format!(
                "result.json does not belong to this plan (run {}, worker {}, branch {})",
                artifact.run_id, r.worker_id, r.branch
            ),
        );
    }
    let mut result = r.clone();
    // Who the worker is, what it was asked and where it started are the plan's, never
    // the job's word: they title its pull request, group best-of-N and measure its
    // change. (Only a dependent starts elsewhere than the base; see `import`.)
    result.task = w.task.prompt.clone();
    result.task_id = w.task.id.clone();
    result.agent = w.agent.clone();
    result.model = w.model.clone();
    result.selection = None;
    if w.depends_on.is_empty() {
        result.base_commit = None;
    }
    result.worktree_path = None;
    result.log_path = Some(path.with_file_name("log.txt")).filter(|p| p.is_file());
    result.publish = None;
    // The job's findings, read as any agent's text: bounded again, and only for a
    // findings task.
    result.findings = match w.task.output {
        TaskOutput::Findings => r.findings.as_deref().and_then(bounded),
        TaskOutput::Changes => None,
    };
    let Some(bundle_name) = &artifact.bundle else {
        result.commit = Some(plan.base.commit.clone());
        result.files_modified = Vec::new();
        // A findings task succeeds without a change; any other success needs one.
        if result.status == Status::Success && w.task.output != TaskOutput::Findings {
            result.status = Status::Failed;
            result.reason = Some("no branch bundle: no changes".into());
        }
        return result;
    };
    let bundle = path.with_file_name(bundle_name);
    if bundle_name.contains('/') || !bundle.is_file() {
        return missing(w, format!("bundle {bundle_name:?} is missing"));
    }
    import(repo_dir, plan, w, result, &bundle)
}

/// Verify and import the branch `bundle` of worker `w` (whose job reported `result`):
/// what it changed is measured from git, and the bundle's commit wins over the one
/// reported. A refused bundle is a failed result that keeps the job's figures.
fn import(
    repo_dir: &Path,
    plan: &Plan,
    w: &PlannedWorker,
    mut result: WorkerResult,
    bundle: &Path,
) -> WorkerResult {
    let tip = match super::bundle::import(repo_dir, bundle, &w.branch, &plan.base.commit) {
        Ok(tip) => tip,
        Err(e) => {
            let mut m = missing(w, format!("bundle refused: {e}"));
            m.steps = result.steps;
            m.cost = result.cost;
            m.duration = result.duration;
            return m;
        }
    };
    // A dependent worker's change is measured from where it started (the merge of its
    // dependencies), when that is really its branch's tip (it changed nothing: failed)
    // or an ancestor of it.
    let files = git2::Repository::open(repo_dir).and_then(|repo| {
        let tip_oid: git2::Oid = tip.parse()?;
        let from = match result.base_commit.as_deref().map(str::parse::<git2::Oid>) {
            Some(Ok(b))
                if b == tip_oid || repo.graph_descendant_of(tip_oid, b).unwrap_or(false) =>
            {
                b
            }
            _ => plan.base.commit.parse()?,
        };
        crate::run::harvest::changed_paths(&repo, from, tip_oid)
    });
    match files {
        Ok(files) => {
            if result.commit.as_deref() != Some(tip.as_str()) {
                result.reason = Some(
                    format!(
                        "the bundle's commit {} differs from the reported one; the bundle wins",
                        crate::util::head(&tip, 12)
                    )
                    .into(),
                );
            }
            result.commit = Some(tip);
            result.files_modified = files;
        }
        Err(e) => {
            return missing(w, format!("reading the imported branch: {}", e.message()));
        }
    }
    // A success with no change is `unchanged`, unless the task's output is findings.
    if result.status == Status::Success
        && result.files_modified.is_empty()
        && w.task.output != TaskOutput::Findings
    {
        result.status = Status::Unchanged;
    }
    result
}

/// Write worker `result`'s artifact into `dir`: its branch as `branch.bundle` (when
/// it has commits past the base), the agent's log with every value in `secrets` and
/// every token-shaped word masked ([`masked_copy`]: an artifact is kept for days and
/// the runner masks nothing in it), and `result.json`.
pub fn write(
    repo_dir: &Path,
    plan: &Plan,
    branch: &str,
    result: WorkerResult,
    dir: &Path,
    secrets: &[String],
) -> Result<(), String> {
    let has_commits = result
        .commit
        .as_deref()
        .is_some_and(|c| c != plan.base.commit);
    let bundle = if has_commits {
        let path = dir.join("branch.bundle");
        super::bundle::create(repo_dir, branch, &plan.base.commit, &path)
            .map_err(|e| format!("bundling {branch}: {e}"))?;
        Some("branch.bundle".to_owned())
    } else {
        None
    };
    if let Some(log) = &result.log_path {
        let _ = masked_copy(log, &dir.join("log.txt"), secrets);
    }
    let artifact = WorkerArtifact {
        schema_version: 1,
        run_id: plan.run_id.clone(),
        base_commit: plan.base.commit.clone(),
        result,
        bundle,
    };
    let mut json = serde_json::to_vec_pretty(&artifact).expect("serializes");
    json.push(b'\n');
    std::fs::write(dir.join("result.json"), json).map_err(|e| format!("{}: {e}", dir.display()))
}

/// The values of this process's environment variables whose names say they hold a
/// secret (`…KEY`, `…TOKEN`, `…SECRET`, `…PASSWORD`, `…CREDENTIALS`; the agents' API
/// keys), at least 8 bytes long: what an agent's log must not carry into an artifact.
pub fn secret_values_in_env() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, v)| names_a_secret(k) && v.trim().len() >= 8)
        .map(|(_, v)| v.trim().to_owned())
        .collect()
}

fn names_a_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIALS",
    ]
    .iter()
    .any(|w| upper.ends_with(w))
        || crate::secret::is_credential(name)
}

/// Copy the log at `from` to `to`, line by line, with each of `secrets` (longest
/// first) replaced by `***` and token-shaped words masked
/// ([`crate::secret::mask_tokens`]).
pub fn masked_copy(from: &Path, to: &Path, secrets: &[String]) -> std::io::Result<()> {
    use std::io::{BufRead, Write};
    let mut secrets: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut reader = std::io::BufReader::new(std::fs::File::open(from)?);
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line)? > 0 {
        let mut text = String::from_utf8_lossy(&line).into_owned();
        for s in &secrets {
            if text.contains(s) {
                text = text.replace(s, "***");
            }
        }
        out.write_all(crate::secret::mask_tokens(&text).as_bytes())?;
        line.clear();
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_copied_into_an_artifact_has_its_secrets_masked() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("w1.log"), dir.path().join("log.txt"));
        let key = "sk-ant-api03-abcdefghijklmnop";
        let odd = "hunter2hunter2";
        let mut bytes = format!(
            "using key {key} now\nexport X={odd};\nghs_0123456789abcdefghij leaked\nplain line\n"
        )
        .into_bytes();
        bytes.extend_from_slice(b"\xffbytes\n");
        std::fs::write(&from, bytes).unwrap();
        masked_copy(&from, &to, &[odd.to_owned(), String::new()]).unwrap();
        let got = std::fs::read_to_string(&to).unwrap();
        assert_eq!(
            got,
            "using key *** now\nexport X=***;\n*** leaked\nplain line\n\u{fffd}bytes\n"
        );
        assert!(names_a_secret("ANTHROPIC_API_KEY") && names_a_secret("GITHUB_TOKEN"));
        assert!(names_a_secret("db_password") && !names_a_secret("KEYBOARD"));
    }
}
