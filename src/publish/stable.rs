//! Stable task identity across runs (`branch: stable`): a task's key, the one remote
//! branch each task publishes to night after night, and the marker by which fanout
//! recognises its own pull requests (and so its own branches) in later runs.
//!
//! Worktrees keep their per-run local branches (`<prefix>/<run-id>/w<N>-…`); only the
//! branch pushed is stable: `<prefix>/<task-key>`, plus `-<model>` when one task runs
//! on several models. The key is the task's `id`, else a slug of its prompt.
//!
//! # Recognition, and its limits
//!
//! A pull request is fanout's when its body carries a hidden [`Marker`] for that task
//! key (fanout also labels it [`LABEL`], and puts the label back when it is missing,
//! but does not require it: labelling may have failed). The marker records the commit fanout
//! pushed (`head`, and the one before it, `prev`), so a remote branch is overwritten
//! only when its tip is a commit a marked pull request says fanout pushed: a branch of
//! the same name someone else created, or fanout's branch with a commit a human added
//! on top, is never overwritten. Names alone are never trusted. What this does not
//! stop: someone with write access to the repository (who can push branches, write
//! pull request bodies and apply labels) can forge a marker; anyone without it cannot
//! create a branch in the repository at all.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::github::PullRequest;
use crate::plan::{Plan, Task};

/// The label on every pull request fanout opens for a stable branch.
pub const LABEL: &str = "fanout";
/// The label fanout puts on a pull request it stopped tending: left to people.
pub const STUCK: &str = "fanout-stuck";

/// Longest marker fanout reads from a body (anything longer is not fanout's).
const MARKER_LIMIT: usize = 4096;
/// Longest marker fanout reads: more than it writes ([`MARKER_LIMIT`]), since fanout
/// before 2026-11-29 wrote longer ones (50 long paths), still bounded.
const MARKER_READ_LIMIT: usize = 64 << 10;
const MARKER_OPEN: &str = "<!-- fanout:task ";
const MARKER_CLOSE: &str = " -->";

pub use crate::config::BranchMode;

/// A task's key: its `id`, else a slug of its prompt ([`Task::key`]).
pub fn task_key(task: &Task) -> String {
    task.key()
}

/// A short, stable hash of a prompt (FNV-1a, 64 bits, hex): a changed prompt lets
/// fanout open a pull request a human closed.
pub fn prompt_hash(prompt: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in prompt.trim().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The branch prefix of a plan, from its first worker's branch
/// (`<prefix>/<run-id>/w1-…`).
pub fn prefix(plan: &Plan) -> Option<String> {
    let first = plan.workers.first()?;
    let (ns, _) = first.branch.rsplit_once('/')?;
    let prefix = ns.strip_suffix(&format!("/{}", plan.run_id))?;
    (!prefix.is_empty()).then(|| prefix.to_owned())
}

/// Each worker's stable identity: `(task key, branch)` by worker id. Two different
/// tasks with the same key are an error (give them ids).
pub fn branches(plan: &Plan) -> Result<BTreeMap<u32, (String, String)>, String> {
    let prefix = prefix(plan).ok_or("the plan's branches have no prefix")?;
    let mut models: BTreeMap<String, Vec<Option<&str>>> = BTreeMap::new();
    let mut owner: BTreeMap<String, &Task> = BTreeMap::new();
    for w in &plan.workers {
        let key = task_key(&w.task);
        if key.is_empty() {
            return Err(format!(
                "worker {}: the task has no usable key; give it an id",
                w.id
            ));
        }
        match owner.get(&key) {
            Some(t) if t.prompt != w.task.prompt || t.id != w.task.id => {
                return Err(format!(
                    "two tasks share the key {key:?} (so would share a branch); give them distinct ids"
                ));
            }
            _ => {
                owner.insert(key.clone(), &w.task);
            }
        }
        let list = models.entry(key).or_default();
        if !list.contains(&w.model.as_deref()) {
            list.push(w.model.as_deref());
        }
    }
    let mut out = BTreeMap::new();
    for w in &plan.workers {
        let key = task_key(&w.task);
        let branch = if models[&key].len() > 1 {
            let m = crate::plan::assign::slug(w.model_label(), 32);
            format!("{prefix}/{key}-{m}")
        } else {
            format!("{prefix}/{key}")
        };
        out.insert(w.id, (key, branch));
    }
    Ok(out)
}

/// What fanout writes, hidden, at the end of a pull request's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// The task key.
    pub task: String,
    /// The commit fanout pushed last.
    pub head: String,
    /// The commit it pushed before that, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// The base commit `head` was made on.
    pub base: String,
    /// `head`'s tree: the same tree on the same base is the same change.
    pub tree: String,
    /// [`prompt_hash`] of the task's prompt.
    pub prompt: String,
    /// The run that pushed `head`.
    pub run: String,
    /// The files `head` changes (the first 50).
    #[serde(default)]
    pub files: Vec<String>,
    /// fanout closed the pull request itself, because a run found nothing to change
    /// (`close_stale`): not a person's closure, so a later change opens a new one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// The issue the task comes from (`tasks_from: issues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<u64>,
    /// Tends of this pull request so far (re-runs for failed checks or a conflict,
    /// rebases); back to 0 when a night changes it without tending.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tends: u32,
    /// fanout gave up tending it and labelled it [`STUCK`]: should a person take the
    /// label off, tending starts over.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub left: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Marker {
    /// A marker for `task` with nothing else known yet.
    pub fn new(task: &str, head: String, base: String, tree: String) -> Marker {
        Marker {
            task: task.to_owned(),
            head,
            prev: None,
            base,
            tree,
            prompt: String::new(),
            run: String::new(),
            files: Vec::new(),
            stale: false,
            issue: None,
            tends: 0,
            left: false,
        }
    }
}

impl Marker {
    /// The hidden comment: JSON in which `<`, `>` and `&` are escaped, so nothing in
    /// it can end the comment; with as many of the first 50 files as keep it within
    /// what [`Marker::parse`] reads.
    pub fn render(&self) -> String {
        let mut m = self.clone();
        m.files.truncate(50);
        loop {
            let json = serde_json::to_string(&m)
                .expect("serializes")
                .replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026");
            if json.len() <= MARKER_LIMIT || m.files.pop().is_none() {
                return format!("{MARKER_OPEN}{json}{MARKER_CLOSE}");
            }
        }
    }

    /// The marker in `body`, if there is one that parses (bounded: a marker longer
    /// than 64 KiB is not fanout's). The last one wins: fanout appends it.
    /// (A marker written before `stale`, `issue`, `tends` and `left` existed reads as
    /// none of them.)
    pub fn parse(body: &str) -> Option<Marker> {
        let start = body.rfind(MARKER_OPEN)? + MARKER_OPEN.len();
        let rest = &body[start..];
        let end = rest.find(MARKER_CLOSE)?;
        if end > MARKER_READ_LIMIT {
            return None;
        }
        let m: Marker = serde_json::from_str(&rest[..end]).ok()?;
        let hex = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
        let ok = hex(&m.head)
            && m.prev.as_deref().is_none_or(hex)
            && hex(&m.base)
            && hex(&m.tree)
            && m.task.len() <= 64;
        ok.then_some(m)
    }

    /// The commits a pull request with this marker vouches fanout pushed.
    pub fn pushed(&self) -> Vec<String> {
        std::iter::once(self.head.clone())
            .chain(self.prev.clone())
            .collect()
    }
}

/// `body` without fanout's marker (the last one) and what follows it.
pub fn without_marker(body: &str) -> &str {
    match body.rfind(MARKER_OPEN) {
        Some(at) => body[..at].trim_end(),
        None => body,
    }
}

/// Whether `branch` is a stable branch of the plan's prefix (`<prefix>/<key>`, not a
/// run's own `<prefix>/<run-id>/…`).
pub fn is_stable_branch(plan: &Plan, branch: &str) -> bool {
    prefix(plan).is_some_and(|p| stable_under(&p, branch))
}

/// Whether `branch` is a stable branch under `prefix` (`<prefix>/<key>`).
pub fn stable_under(prefix: &str, branch: &str) -> bool {
    branch
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
}

/// Whether `p` (its body's marker `m`) can be fanout's pull request of `m`'s task,
/// its stable branches being under `prefix`: its head is in this repository (not a
/// fork's: anyone may open one, marker and all) on a stable branch whose name is the
/// task's (`<prefix>/<task>`, or `<prefix>/<task>-<model>`). Only the branch of such
/// a pull request is fanout's to push to, rebase or delete.
pub fn is_fanouts(p: &PullRequest, m: &Marker, prefix: &str) -> bool {
    let own = |rest: &str| {
        rest == m.task
            || rest
                .strip_prefix(&m.task)
                .is_some_and(|r| r.starts_with('-'))
    };
    p.is_from_this_repository()
        && stable_under(prefix, &p.head.branch)
        && p.head.branch[prefix.len() + 1..]
            .split('/')
            .next()
            .is_some_and(own)
}

/// `body` with `marker` appended, the body cut so that both fit GitHub's limit.
pub fn with_marker(body: &str, marker: &Marker) -> String {
    let m = marker.render();
    let room = super::body::BODY_LIMIT.saturating_sub(m.chars().count() + 2);
    let body = if body.chars().count() > room {
        let cut: String = body.chars().take(room).collect();
        cut
    } else {
        body.to_owned()
    };
    format!("{}\n\n{m}", body.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker() -> Marker {
        Marker {
            task: "docs".into(),
            head: "a".repeat(40),
            prev: Some("b".repeat(40)),
            base: "c".repeat(40),
            tree: "d".repeat(40),
            prompt: prompt_hash("Improve the docs"),
            run: "r1".into(),
            files: vec!["x-->y<z>.md".into()],
            stale: false,
            issue: Some(4),
            tends: 2,
            left: false,
        }
    }

    #[test]
    fn markers_round_trip_and_cannot_end_the_comment() {
        let m = marker();
        let text = m.render();
        assert_eq!(text.matches("-->").count(), 1, "{text}");
        assert!(text.ends_with(" -->"));
        let body = with_marker("## Title\n\nbody", &m);
        assert_eq!(Marker::parse(&body), Some(m.clone()));
        // A forged or broken marker is no marker.
        assert_eq!(Marker::parse(&body.replace(&"a".repeat(40), "zz")), None);
        assert_eq!(Marker::parse("<!-- fanout:task {\"task\": -->"), None);
        let huge = format!("{MARKER_OPEN}{}{MARKER_CLOSE}", " ".repeat(5000));
        assert_eq!(Marker::parse(&huge), None);
        assert_eq!(m.pushed(), vec!["a".repeat(40), "b".repeat(40)]);
    }

    #[test]
    fn a_long_body_keeps_its_marker() {
        let m = marker();
        let body = with_marker(&"x".repeat(70_000), &m);
        assert!(body.chars().count() <= super::super::body::BODY_LIMIT);
        assert_eq!(Marker::parse(&body), Some(m));
    }

    #[test]
    fn prompt_hashes_differ_with_the_prompt() {
        assert_eq!(prompt_hash("a b"), prompt_hash(" a b\n"));
        assert_ne!(prompt_hash("a b"), prompt_hash("a c"));
    }

    #[test]
    fn only_a_pull_request_of_this_repository_on_the_tasks_stable_branch_is_fanouts() {
        use crate::publish::github::{BranchRef, RepoRef};
        let at = |branch: &str, repo: Option<u64>| BranchRef {
            branch: branch.into(),
            sha: "0".repeat(40),
            repo: repo.map(|id| RepoRef { id }),
        };
        let pull = |head: BranchRef| PullRequest {
            number: 1,
            html_url: String::new(),
            title: String::new(),
            body: None,
            draft: None,
            state: "open".into(),
            head,
            base: at("main", Some(7)),
            labels: vec![],
            merged_at: None,
            mergeable: None,
            mergeable_state: None,
        };
        let m = marker();
        for (branch, repo, fanouts) in [
            ("fanout/docs", Some(7), true),
            ("fanout/docs-gpt-5", Some(7), true),
            ("fanout/docs", Some(8), false),
            ("fanout/docs", None, false),
            ("release", Some(7), false),
            ("fanout/other", Some(7), false),
            ("fanout/docsy", Some(7), false),
            ("fanout/run-1/docs", Some(7), false),
            ("fanoutx/docs", Some(7), false),
        ] {
            let p = pull(at(branch, repo));
            assert_eq!(is_fanouts(&p, &m, "fanout"), fanouts, "{branch} {repo:?}");
        }
    }

    #[test]
    fn a_marker_with_long_paths_is_cut_to_what_parse_reads() {
        let mut m = marker();
        m.files = (0..50)
            .map(|i| {
                format!(
                    "packages/dashboard-frontend/src/components/widgets/charts/w{i}/ChartWidget.tsx"
                )
            })
            .collect();
        let rendered = m.render();
        let back = Marker::parse(&with_marker("body", &m)).expect("fanout reads its own marker");
        assert!(rendered.len() <= MARKER_LIMIT + MARKER_OPEN.len() + MARKER_CLOSE.len());
        assert!(
            !back.files.is_empty() && back.files.len() < 50,
            "{}",
            back.files.len()
        );
        assert_eq!(back.files[..], m.files[..back.files.len()]);
        // One an earlier fanout wrote, every file kept (over 4 KiB), still reads.
        let mut older = m.clone();
        older.files.truncate(50);
        let json = serde_json::to_string(&older).unwrap();
        assert!(json.len() > MARKER_LIMIT);
        let body = format!("body\n\n{MARKER_OPEN}{json}{MARKER_CLOSE}");
        assert_eq!(Marker::parse(&body).map(|b| b.files.len()), Some(50));
    }
}
