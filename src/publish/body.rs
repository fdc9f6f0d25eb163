//! Pull request title and body, rendered from `templates/pr-title.j2` and
//! `templates/pr-body.md.j2` (minijinja, strict), truncated safely to GitHub's limit.

use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use crate::model::WorkerResult;
use crate::report::summary::{first_line, md_escape, truncate_chars};
use crate::report::table::{format_cost, format_duration};
use crate::util::short;

/// Default title template.
pub const TITLE_TEMPLATE: &str = include_str!("../../templates/pr-title.j2");
/// Default body template.
pub const BODY_TEMPLATE: &str = include_str!("../../templates/pr-body.md.j2");
/// GitHub's limit on a pull request body, in characters.
pub const BODY_LIMIT: usize = 65_536;
/// Longest title fanout makes.
pub const TITLE_LIMIT: usize = 256;

#[derive(Serialize)]
struct CheckVar {
    name: String,
    passed: bool,
    duration: String,
}

#[derive(Serialize)]
struct RunnerUp {
    worker_id: u32,
    model: String,
    status: &'static str,
    score: f64,
    branch: String,
}

/// The hidden marker that identifies a run's worker in a PR body.
pub fn marker(run_id: &str, worker_id: u32) -> String {
    format!("<!-- fanout:run={run_id} worker={worker_id} -->")
}

#[derive(Serialize)]
struct Vars<'a> {
    marker: String,
    task_title: String,
    task_quoted: String,
    task: &'a str,
    status: &'a str,
    agent: &'a str,
    model: Option<&'a str>,
    steps: String,
    cost: String,
    duration: String,
    run_id: &'a str,
    run_url: Option<&'a str>,
    worker_id: u32,
    commit: &'a str,
    reason: Option<String>,
    files: &'a [String],
    branch: &'a str,
    checks: Vec<CheckVar>,
    score: Option<f64>,
    runners_up: Vec<RunnerUp>,
}

/// Templates in use (defaults or the user's).
#[derive(Debug, Clone)]
pub struct Templates {
    title: String,
    body: String,
}

impl Default for Templates {
    fn default() -> Self {
        Templates {
            title: TITLE_TEMPLATE.to_owned(),
            body: BODY_TEMPLATE.to_owned(),
        }
    }
}

impl Templates {
    /// Custom templates; each is checked by rendering a sample.
    pub fn new(title: Option<String>, body: Option<String>) -> Result<Templates, String> {
        let t = Templates {
            title: title.unwrap_or_else(|| TITLE_TEMPLATE.to_owned()),
            body: body.unwrap_or_else(|| BODY_TEMPLATE.to_owned()),
        };
        let sample = WorkerResult {
            commit: Some("0".repeat(40)),
            ..WorkerResult::new(1, "b", "t", "a", crate::model::Status::Success)
        };
        t.render(&sample, "run", None)?;
        Ok(t)
    }

    /// `(title, body)` for a worker.
    pub fn render(
        &self,
        r: &WorkerResult,
        run_id: &str,
        run_url: Option<&str>,
    ) -> Result<(String, String), String> {
        self.render_titled(r, &[], (run_id, run_url), None)
    }

    /// `(title, body)` for a worker of a run whose results are `all` (for the
    /// runners-up of a best-of-N winner); with `title`, the task's title instead of
    /// the first line of its prompt (an issue task's: the issue's title).
    pub fn render_titled(
        &self,
        r: &WorkerResult,
        all: &[WorkerResult],
        (run_id, run_url): (&str, Option<&str>),
        title: Option<&str>,
    ) -> Result<(String, String), String> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_template("title", &self.title)
            .map_err(|e| format!("title template: {e}"))?;
        env.add_template("body", &self.body)
            .map_err(|e| format!("body template: {e}"))?;

        let vars = Vars {
            marker: marker(run_id, r.worker_id),
            task_title: match title {
                Some(t) => first_line(t, 120),
                None => first_line(&title_text(&r.task), 120),
            },
            task_quoted: r
                .task
                .trim()
                .lines()
                .map(|l| format!("> {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            task: &r.task,
            status: r.status.as_str(),
            agent: &r.agent,
            model: r.model.as_deref(),
            steps: r.steps.map_or("–".into(), |s| s.to_string()),
            cost: format_cost(r.cost),
            duration: format_duration(r.duration),
            run_id,
            run_url,
            worker_id: r.worker_id,
            commit: r.commit.as_deref().map(short).unwrap_or("–"),
            reason: r.reason.as_deref().map(md_escape),
            files: &r.files_modified,
            branch: &r.branch,
            checks: r
                .checks
                .iter()
                .map(|c| CheckVar {
                    name: md_escape(&c.name),
                    passed: c.passed,
                    duration: format_duration(c.duration),
                })
                .collect(),
            score: r.selection.as_ref().map(|s| s.score),
            runners_up: crate::fanin::select::runners_up(r, all)
                .into_iter()
                .map(|o| RunnerUp {
                    worker_id: o.worker_id,
                    model: md_escape(o.model.as_deref().unwrap_or("default")),
                    status: o.status.as_str(),
                    score: o.selection.as_ref().map_or(0.0, |s| s.score),
                    branch: md_escape(&o.branch),
                })
                .collect(),
        };
        let title = env
            .get_template("title")
            .and_then(|t| t.render(Serde(&vars)))
            .map_err(|e| format!("title template: {e}"))?;
        let body = env
            .get_template("body")
            .and_then(|t| t.render(Serde(&vars)))
            .map_err(|e| format!("body template: {e}"))?;
        let title = truncate_chars(title.trim(), TITLE_LIMIT);
        Ok((title, truncate_body(body.trim_end())))
    }
}

/// A prompt as a title: each `{findings.<id>}` placeholder (the run put the task's
/// findings there, too long for a title) said in words.
fn title_text(prompt: &str) -> String {
    crate::plan::findings::expand(prompt, &|id| Some(format!("the findings of {id}")))
}

/// Cut `body` to GitHub's limit on a character boundary, saying so.
pub fn truncate_body(body: &str) -> String {
    const NOTE: &str =
        "\n\n_… truncated by fanout: the full details are in the run's results.json._";
    if body.chars().count() <= BODY_LIMIT {
        return body.to_owned();
    }
    let keep = BODY_LIMIT - NOTE.chars().count();
    let cut: String = body.chars().take(keep).collect();
    // Do not leave half a line (a broken table row or code span).
    let cut = match cut.rfind('\n') {
        Some(i) if i > keep / 2 => cut[..i].to_owned(),
        _ => cut,
    };
    format!("{cut}{NOTE}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn result() -> WorkerResult {
        let task = "Fix the login bug\nand add a test";
        WorkerResult {
            model: Some("gpt-4o".into()),
            steps: Some(5),
            cost: Some(0.0321),
            duration: 12.0,
            files_modified: vec!["src/a.rs".into(), "README.md".into()],
            commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
            committed_by_fanout: true,
            exit_code: Some(0),
            ..WorkerResult::new(2, "fanout/r1/w2-fix", task, "build", Status::Success)
        }
    }

    #[test]
    fn title_and_body() {
        let (title, body) = Templates::default()
            .render(
                &result(),
                "r1",
                Some("https://github.com/o/r/actions/runs/9"),
            )
            .unwrap();
        assert_eq!(title, "Fix the login bug [gpt-4o]");
        insta::assert_snapshot!(body, @r"
        <!-- fanout:run=r1 worker=2 -->
        ## Fix the login bug

        > Fix the login bug
        > and add a test

        | | |
        |---|---|
        | Status | success |
        | Agent | `build` |
        | Model | gpt-4o |
        | Steps | 5 |
        | Cost | $0.0321 |
        | Duration | 12.0s |
        | Run | [`r1`](https://github.com/o/r/actions/runs/9), worker 2 |
        | Commit | `0123456` |

        ### Files changed (2)

        - `src/a.rs`
        - `README.md`

        ---
        _Opened by fanout from worker 2 of run `r1`; publishing again updates this pull request._
        ");
    }

    #[test]
    fn huge_bodies_are_cut_on_a_line_and_keep_the_marker() {
        let mut r = result();
        r.files_modified = (0..20_000).map(|i| format!("dir/ünïcode-{i}.rs")).collect();
        let (_, body) = Templates::default().render(&r, "r1", None).unwrap();
        assert!(body.chars().count() <= BODY_LIMIT);
        assert!(body.starts_with("<!-- fanout:run=r1 worker=2 -->"));
        assert!(body.ends_with("results.json._"));
        let before_note = body.rsplit_once("\n\n_…").unwrap().0;
        assert!(
            before_note.ends_with(".rs`"),
            "{}",
            &before_note[before_note.len() - 40..]
        );
    }

    #[test]
    fn a_title_says_findings_placeholders_in_words() {
        let mut r = result();
        r.task = "Fix what {findings.scan} lists\nand more".into();
        let (title, _) = Templates::default().render(&r, "r1", None).unwrap();
        assert_eq!(title, "Fix what the findings of scan lists [gpt-4o]");
    }

    #[test]
    fn custom_templates_are_checked_in_strict_mode() {
        let e = Templates::new(Some("{{ nope }}".into()), None).unwrap_err();
        assert!(e.starts_with("title template:"), "{e}");
        let t = Templates::new(Some("{{ agent }}: {{ task_title }}".into()), None).unwrap();
        assert_eq!(
            t.render(&result(), "r", None).unwrap().0,
            "build: Fix the login bug"
        );
    }
}
