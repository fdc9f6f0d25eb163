//! What a dependent worker is given by the tasks it depends on, besides the branch it
//! starts from: the findings of each findings task among them — in its prompt, where
//! it says `{findings.<task-id>}` ([`crate::plan::findings`]), and as files
//! `<task-id>.md` in the directory `$FANOUT_FINDINGS_DIR` names.
//!
//! The files live in the worker's private directory, outside its worktree: they are
//! never committed on its branch and the tamper check never sees them.
//!
//! Findings come from another agent (in matrix mode, through a job's artifact), so
//! they are read as hostile: bounded again here (credentials masked, control
//! characters dropped, size capped: [`crate::agent::findings::bounded`]) and put in
//! by one pass that never expands what it puts in. A findings task that succeeded
//! without a final message gives `(task <id> reported no findings)`; a dependency
//! that did not succeed skips the dependent before any of this.

use std::path::{Path, PathBuf};

use crate::config::TaskOutput;
use crate::model::WorkerResult;
use crate::plan::findings::{expand, no_findings};
use crate::plan::{Plan, PlannedWorker};

/// The variable naming the directory of the dependencies' findings.
pub const FINDINGS_DIR_VAR: &str = "FANOUT_FINDINGS_DIR";

/// What a dependent worker is given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Given {
    /// Its prompt, placeholders expanded.
    pub prompt: String,
    /// `(task id, findings)` of each findings task it depends on, in `depends_on`
    /// order.
    pub findings: Vec<(String, String)>,
}

impl Given {
    /// From the results its dependencies are taken from (`picked`: the first success
    /// of each task it depends on); which of those tasks give findings, the plan says.
    pub fn from_dependencies(plan: &Plan, w: &PlannedWorker, picked: &[&WorkerResult]) -> Given {
        let gives_findings = |id: &str| {
            plan.workers
                .iter()
                .any(|p| p.task.id.as_deref() == Some(id) && p.task.output == TaskOutput::Findings)
        };
        let findings: Vec<(String, String)> = w
            .task
            .depends_on
            .iter()
            .filter(|id| gives_findings(id))
            .filter_map(|id| {
                let r = picked
                    .iter()
                    .find(|r| r.task_id.as_deref() == Some(id.as_str()))?;
                Some((id.clone(), text_of(id, r)))
            })
            .collect();
        let lookup = |id: &str| {
            findings
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, text)| text.clone())
        };
        Given {
            prompt: w.task.with_context(expand(&w.task.prompt, &lookup)),
            findings,
        }
    }

    /// Write each findings file into `<private>/findings/`; returns the variable to set
    /// (none when no findings task is among the dependencies).
    pub fn write_files(&self, private: &Path) -> std::io::Result<Option<(String, String)>> {
        if self.findings.is_empty() {
            return Ok(None);
        }
        let dir: PathBuf = private.join("findings");
        std::fs::create_dir_all(&dir)?;
        for (id, text) in &self.findings {
            // (an id holds letters, digits, '-', '_', '.': never a path separator)
            crate::util::write_atomic(&dir.join(format!("{id}.md")), text.as_bytes())?;
        }
        Ok(Some((
            FINDINGS_DIR_VAR.to_owned(),
            dir.display().to_string(),
        )))
    }
}

/// The findings of task `id`'s worker `r`, bounded again; the placeholder text when it
/// gave none.
fn text_of(id: &str, r: &WorkerResult) -> String {
    r.findings
        .as_deref()
        .and_then(crate::agent::findings::bounded)
        .unwrap_or_else(|| no_findings(id))
}
