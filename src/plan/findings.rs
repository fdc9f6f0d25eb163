//! Findings passed between tasks, as the plan sees them: the `{findings.<task-id>}`
//! placeholders of a prompt (found here, expanded by the run stage when the dependent
//! starts: [`expand`]), and the checks of a file's tasks that tie findings to
//! dependencies — a placeholder must name a findings task the task depends on;
//! `findings: comment | review` needs `output: findings`; `review_of` names a task
//! whose output is changes (and implies depending on it).
//!
//! A placeholder is exactly `{findings.ID}` with ID a task id (letters, digits, `-`,
//! `_`, `.`); any other brace in a prompt is the prompt's own text. Expansion is one
//! pass over the user's prompt: text put in is never read again, so findings that
//! hold `{findings.x}` or `{task}` stay that text.

use crate::config::error::key;
use crate::config::{ConfigFile, FindingsPost, KeySeg, Problem, TaskEntry, TaskOutput};

const OPEN: &str = "{findings.";

/// What a placeholder becomes when its task succeeded without a final message.
pub fn no_findings(id: &str) -> String {
    format!("(task {id} reported no findings)")
}

/// Whether `c` may be part of a task id.
fn id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The placeholders of `prompt`, in order: each one's byte range and task id.
pub fn placeholders(prompt: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = prompt[from..].find(OPEN).map(|i| from + i) {
        let id_start = at + OPEN.len();
        let id_len = prompt[id_start..]
            .find(|c: char| !id_char(c))
            .unwrap_or(prompt.len() - id_start);
        let end = id_start + id_len;
        if id_len > 0 && prompt[end..].starts_with('}') {
            found.push((at..end + 1, &prompt[id_start..end]));
            from = end + 1;
        } else {
            from = id_start;
        }
    }
    found
}

/// `prompt` with each placeholder replaced by what `lookup` gives for its id (a
/// placeholder it gives nothing for stays as written). One pass: what is put in is
/// never expanded again.
pub fn expand(prompt: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(prompt.len());
    let mut last = 0;
    for (range, id) in placeholders(prompt) {
        out.push_str(&prompt[last..range.start]);
        match lookup(id) {
            Some(text) => out.push_str(&text),
            None => out.push_str(&prompt[range.clone()]),
        }
        last = range.end;
    }
    out.push_str(&prompt[last..]);
    out
}

/// One task of the file, as these checks read it.
struct Entry<'a> {
    id: Option<&'a str>,
    prompt: &'a str,
    depends_on: &'a [String],
    output: TaskOutput,
    findings: Option<FindingsPost>,
    review_of: Option<&'a str>,
    /// Written as a plain string (no id, no dependencies possible).
    plain: bool,
}

fn entries(file: &ConfigFile) -> Vec<Entry<'_>> {
    file.tasks
        .iter()
        .map(|t| match t {
            TaskEntry::Prompt(p) => Entry {
                id: None,
                prompt: p,
                depends_on: &[],
                output: TaskOutput::Changes,
                findings: None,
                review_of: None,
                plain: true,
            },
            TaskEntry::Detailed(d) => Entry {
                id: d.id.as_deref().map(str::trim),
                prompt: &d.prompt,
                depends_on: &d.depends_on,
                output: d.output,
                findings: d.findings,
                review_of: d.review_of.as_deref().map(str::trim),
                plain: false,
            },
        })
        .collect()
}

/// The checks of the file's tasks that tie findings to dependencies (see the module
/// docs); each problem is located at its task's key.
pub fn check_file(file: &ConfigFile) -> Result<(), Problem> {
    let tasks = entries(file);
    for (i, t) in tasks.iter().enumerate() {
        let at = |k: &str| vec![key("tasks"), KeySeg::Index(i), key(k)];
        let prompt_at = if t.plain {
            vec![key("tasks"), KeySeg::Index(i)]
        } else {
            at("prompt")
        };
        for (_, id) in placeholders(t.prompt) {
            check_placeholder(t, id, &tasks)
                .map_err(|e| Problem::at(prompt_at.clone(), e).in_value())?;
        }
        check_posting(t, &tasks).map_err(|(k, e)| Problem::at(at(k), e).in_value())?;
    }
    Ok(())
}

/// The ids of the file's tasks, for messages.
fn known(tasks: &[Entry<'_>]) -> String {
    let ids: Vec<&str> = tasks.iter().filter_map(|t| t.id).collect();
    if ids.is_empty() {
        "none".into()
    } else {
        ids.join(", ")
    }
}

fn check_placeholder(t: &Entry<'_>, id: &str, tasks: &[Entry<'_>]) -> Result<(), String> {
    let Some(dep) = tasks.iter().find(|d| d.id == Some(id)) else {
        return Err(format!(
            "{{findings.{id}}}: no task has id {id:?} (ids: {})",
            known(tasks)
        ));
    };
    if dep.output != TaskOutput::Findings {
        return Err(format!(
            "{{findings.{id}}}: task {id} has `output: changes`; only a task with `output: findings` has findings to pass on"
        ));
    }
    if t.plain {
        return Err(format!(
            "{{findings.{id}}}: a task written as a plain string has no depends_on; write it as {{id: …, prompt: …, depends_on: [{id}]}}"
        ));
    }
    if !t.depends_on.iter().any(|d| d.trim() == id) && t.review_of != Some(id) {
        return Err(format!(
            "{{findings.{id}}}: add {id} to this task's depends_on (findings reach only the tasks that depend on theirs)"
        ));
    }
    Ok(())
}

/// `findings:` and `review_of:`; an error names the key it is about.
fn check_posting(t: &Entry<'_>, tasks: &[Entry<'_>]) -> Result<(), (&'static str, String)> {
    if t.findings.is_some() && t.output != TaskOutput::Findings {
        return Err((
            "findings",
            "posting findings needs `output: findings` on this task".into(),
        ));
    }
    match (t.findings, t.review_of) {
        (Some(FindingsPost::Review), None) => Err((
            "findings",
            "`findings: review` needs `review_of: <task id>`: the task whose pull request this one reviews".into(),
        )),
        (Some(FindingsPost::Review), Some(of)) => check_review_of(t, of, tasks),
        (_, Some(_)) => Err((
            "review_of",
            "`review_of` goes with `findings: review` (this task's findings are posted as a review of that task's pull request)".into(),
        )),
        _ => Ok(()),
    }
}

fn check_review_of(
    t: &Entry<'_>,
    of: &str,
    tasks: &[Entry<'_>],
) -> Result<(), (&'static str, String)> {
    let Some(writer) = tasks.iter().find(|d| d.id == Some(of)) else {
        return Err((
            "review_of",
            format!("no task has id {of:?} (ids: {})", known(tasks)),
        ));
    };
    if t.id == Some(of) {
        return Err(("review_of", format!("task {of:?} cannot review itself")));
    }
    if writer.output != TaskOutput::Changes {
        return Err((
            "review_of",
            format!("task {of} has `output: findings`: it opens no pull request to review"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_exact_and_expansion_is_one_pass() {
        let p = "fix {findings.scan} and {findings.a.b-c_1}; keep {task}, {findings.}, {findings.x y}, {findings.q";
        let ids: Vec<&str> = placeholders(p).into_iter().map(|(_, id)| id).collect();
        assert_eq!(ids, ["scan", "a.b-c_1"]);
        let lookup = |id: &str| match id {
            "scan" => Some("{findings.a.b-c_1} {task} {{x}}".to_owned()),
            _ => None,
        };
        assert_eq!(
            expand(p, &lookup),
            "fix {findings.a.b-c_1} {task} {{x}} and {findings.a.b-c_1}; keep {task}, {findings.}, {findings.x y}, {findings.q"
        );
        assert_eq!(expand("é{findings.scan}é", &lookup).chars().count(), 2 + 31);
        assert_eq!(no_findings("scan"), "(task scan reported no findings)");
    }

    fn problem(yaml: &str) -> String {
        let file: ConfigFile = crate::config::parse(yaml, std::path::Path::new("f.yml")).unwrap();
        let p = check_file(&file).unwrap_err();
        crate::config::ConfigError::at(yaml, std::path::Path::new("f.yml"), p).to_string()
    }

    #[test]
    fn links_between_tasks_are_checked_where_they_are_written() {
        let ok = "tasks:\n  - {id: scan, prompt: s, output: findings, findings: comment}\n  - {id: fix, prompt: 'fix {findings.scan}', depends_on: [scan]}\n  - {id: rev, prompt: 'review {findings.scan}', output: findings, findings: review, review_of: fix, depends_on: [scan]}\n";
        let file: ConfigFile = crate::config::parse(ok, std::path::Path::new("f.yml")).unwrap();
        assert_eq!(check_file(&file), Ok(()));
        for (yaml, want) in [
            (
                "tasks:\n  - {id: scan, prompt: s, output: findings}\n  - {id: fix, prompt: 'fix {findings.scan}'}\n",
                "f.yml:3:23: key `tasks[1].prompt`: {findings.scan}: add scan to this task's depends_on",
            ),
            (
                "tasks:\n  - {id: a, prompt: 'x {findings.nope}'}\n",
                "key `tasks[0].prompt`: {findings.nope}: no task has id \"nope\" (ids: a)",
            ),
            (
                "tasks:\n  - {id: w, prompt: w}\n  - {id: b, prompt: '{findings.w}', depends_on: [w]}\n",
                "{findings.w}: task w has `output: changes`",
            ),
            (
                "tasks:\n  - {id: s, prompt: s, output: findings}\n  - 'use {findings.s}'\n",
                "key `tasks[1]`: {findings.s}: a task written as a plain string has no depends_on",
            ),
            (
                "tasks:\n  - {id: a, prompt: a, findings: comment}\n",
                "f.yml:2:34: key `tasks[0].findings`: posting findings needs `output: findings`",
            ),
            (
                "tasks:\n  - {id: a, prompt: a, output: findings, findings: review}\n",
                "key `tasks[0].findings`: `findings: review` needs `review_of: <task id>`",
            ),
            (
                "tasks:\n  - {id: a, prompt: a, output: findings, review_of: b}\n  - {id: b, prompt: b}\n",
                "key `tasks[0].review_of`: `review_of` goes with `findings: review`",
            ),
            (
                "tasks:\n  - {id: a, prompt: a, output: findings, findings: review, review_of: zz}\n",
                "key `tasks[0].review_of`: no task has id \"zz\" (ids: a)",
            ),
            (
                "tasks:\n  - {id: a, prompt: a, output: findings, findings: review, review_of: b}\n  - {id: b, prompt: b, output: findings}\n",
                "key `tasks[0].review_of`: task b has `output: findings`: it opens no pull request to review",
            ),
        ] {
            let got = problem(yaml);
            assert!(got.contains(want), "{yaml}\n got: {got}\nwant: {want}");
        }
    }
}
