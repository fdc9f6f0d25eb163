//! The life of a task's pull request across runs (`branch: stable`), after
//! create-pull-request's model: each run force-pushes the task's one branch and
//! updates its one open pull request; a run whose worker changed nothing closes it and
//! deletes the branch (`close_stale`); a pull request a human closed without merging is
//! not opened again unless the task's prompt changed (or `--reopen`); after a merge
//! the next run starts fresh. Each worker's outcome is `created`, `updated`,
//! `closed`, `unchanged` (left as it was), `skipped` or `failed`.
//!
//! What is fanout's is decided by the marker of [`super::stable`], never by a name.

use std::collections::BTreeMap;

use git2::Oid;

use super::body::Templates;
use super::github::{GitHub, PullRequest};
use super::pulls::{self, PublishOptions, outcome};
use super::push::{Lease, PushResult};
use super::stable::{self, LABEL, Marker};
use crate::model::{Operation, PublishOutcome, WorkerResult};
use crate::run::results::RunReport;
use crate::util::short;

/// What tonight's worker of a task produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Tonight {
    /// A change to publish.
    Changed {
        /// Where and what to push.
        lease: Lease,
        /// The tree of its commit.
        tree: Oid,
    },
    /// The agent succeeded and nothing needed changing.
    Unchanged,
    /// Nothing to publish (failed, skipped, not selected), and why.
    Nothing(String),
}

/// The marked pull requests of one task's branch, newest first.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Each with its marker.
    pub pulls: Vec<(PullRequest, Marker)>,
}

impl Known {
    /// From every pull request of the branch: those carrying a marker for `key`. The
    /// label is not required: adding it may have failed (a token without `issues:
    /// write`, a transient error), and whoever could forge a marker on a pull request
    /// from the repository's own branch could apply the label too. A recognised pull
    /// request missing the label gets it back when it is updated.
    pub fn from_pulls(pulls: Vec<PullRequest>, key: &str) -> Known {
        let pulls = pulls
            .into_iter()
            .filter_map(|p| {
                let m = Marker::parse(p.body.as_deref()?)?;
                (m.task == key).then_some((p, m))
            })
            .collect();
        Known { pulls }
    }

    fn open(&self) -> Option<&(PullRequest, Marker)> {
        self.pulls.iter().find(|(p, _)| p.state == "open")
    }

    /// Every commit a marked pull request says fanout pushed to the branch.
    pub fn claimed(&self) -> Vec<Oid> {
        self.pulls
            .iter()
            .flat_map(|(_, m)| m.pushed())
            .filter_map(|c| c.parse().ok())
            .collect()
    }
}

/// What to do with a task's pull request tonight.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Push the branch and open a pull request.
    Create,
    /// Push the branch and update the open pull request (its number, its marker).
    Update(u64, Marker),
    /// The open pull request already holds tonight's change.
    Leave(u64),
    /// Close the open pull request and delete the branch.
    Close(u64, Marker),
    /// Nothing is published, and why.
    Skip(String),
}

/// Tonight's action for one task (see the module docs).
pub fn decide(
    tonight: &Tonight,
    known: &Known,
    prompt: &str,
    close_stale: bool,
    reopen: bool,
) -> Action {
    let open = known.open();
    match tonight {
        Tonight::Nothing(why) => Action::Skip(why.clone()),
        Tonight::Unchanged => match open {
            Some((p, m)) if close_stale => Action::Close(p.number, m.clone()),
            Some((p, _)) => Action::Skip(format!(
                "no change against the base; #{} left open (close_stale is off)",
                p.number
            )),
            None => Action::Skip("no change against the base".into()),
        },
        Tonight::Changed { lease, tree } => {
            if let Some((p, m)) = open {
                let same = m.tree == tree.to_string() && m.base == lease.base.to_string();
                return if same {
                    Action::Leave(p.number)
                } else {
                    Action::Update(p.number, m.clone())
                };
            }
            match known.pulls.first() {
                Some((p, m)) if p.merged_at.is_none() && m.prompt == prompt && !reopen => {
                    Action::Skip(format!(
                        "#{} was closed without merging; not opened again (the task's prompt is unchanged; --reopen opens it)",
                        p.number
                    ))
                }
                _ => Action::Create,
            }
        }
    }
}

/// Whether `r` finished with nothing to change (status `unchanged`).
fn no_change(r: &WorkerResult) -> bool {
    r.status.as_str() == "unchanged"
}

/// One task tonight: the worker that speaks for it, its branch and key.
struct Task<'a> {
    r: &'a WorkerResult,
    key: String,
    branch: String,
    tonight: Tonight,
}

/// Publish `report` to stable branches: one worker per task's branch (the one to
/// publish, else one that found nothing to change), each task's pull request created,
/// updated, left, closed or kept closed.
pub async fn publish(
    report: &RunReport,
    repo_dir: &std::path::Path,
    github: &GitHub,
    push_token: Option<&str>,
    templates: &Templates,
    opts: &PublishOptions,
) -> BTreeMap<u32, PublishOutcome> {
    let mut out = BTreeMap::new();
    let base = pulls::base_of(report, opts)
        .ok_or_else(|| "the run's base is not a branch; pass --base BRANCH".to_owned());
    let tasks = match base.and_then(|b| Ok((b, tasks(report, repo_dir, opts, &mut out)?))) {
        Ok(t) => t,
        Err(why) => {
            for r in &report.results {
                out.insert(r.worker_id, outcome(Operation::Failed, Some(why.clone())));
            }
            return out;
        }
    };
    let (base, tasks) = tasks;
    let ctx = Ctx {
        base,
        report,
        repo_dir,
        github,
        push_token,
        templates,
        opts,
    };
    for t in tasks {
        let mut o = ctx.one(&t).await;
        o.branch = Some(t.branch.clone());
        out.insert(t.r.worker_id, o);
    }
    out
}

/// The worker speaking for each stable branch; every other worker's outcome goes into
/// `out`.
fn tasks<'a>(
    report: &'a RunReport,
    repo_dir: &std::path::Path,
    opts: &PublishOptions,
    out: &mut BTreeMap<u32, PublishOutcome>,
) -> Result<Vec<Task<'a>>, String> {
    let ids = stable::branches(&report.plan)?;
    let repo = git2::Repository::open(repo_dir).map_err(|e| e.message().to_owned())?;
    let mut chosen: BTreeMap<String, Task<'a>> = BTreeMap::new();
    for r in &report.results {
        let Some((key, branch)) = ids.get(&r.worker_id).cloned() else {
            out.insert(
                r.worker_id,
                outcome(Operation::Failed, Some("not in the plan".into())),
            );
            continue;
        };
        let tonight = tonight(&repo, report, r, &branch, opts);
        let rank = |t: &Tonight| match t {
            Tonight::Changed { .. } => 0,
            Tonight::Unchanged => 1,
            Tonight::Nothing(_) => 2,
        };
        let task = Task {
            r,
            key,
            branch: branch.clone(),
            tonight,
        };
        let keep = match chosen.get(&branch) {
            Some(c) => rank(&task.tonight) < rank(&c.tonight),
            None => true,
        };
        let loser = if keep {
            chosen.insert(branch.clone(), task)
        } else {
            Some(task)
        };
        if let Some(l) = loser {
            let why = match l.tonight {
                Tonight::Nothing(why) => why,
                _ => format!("another worker of this task publishes to {branch}"),
            };
            out.insert(l.r.worker_id, outcome(Operation::Skipped, Some(why)));
        }
    }
    Ok(chosen.into_values().collect())
}

/// What `r` has to publish tonight on `branch`.
fn tonight(
    repo: &git2::Repository,
    report: &RunReport,
    r: &WorkerResult,
    branch: &str,
    opts: &PublishOptions,
) -> Tonight {
    if no_change(r) {
        return Tonight::Unchanged;
    }
    if let Some(why) = pulls::ineligible(r, opts.include_partial)
        .or_else(|| crate::fanin::select::not_selected(r, &report.results))
    {
        return Tonight::Nothing(why);
    }
    let lease = match pulls::verify(repo, report, r) {
        Ok(l) => l,
        Err(why) => return Tonight::Nothing(format!("not published: {why}")),
    };
    if let Some(why) = pulls::changes_ci(repo, &lease, opts.allow_workflow_changes) {
        return Tonight::Nothing(format!("not published: {why}"));
    }
    let Ok(tree) = repo.find_commit(lease.local).map(|c| c.tree_id()) else {
        return Tonight::Nothing("the commit is not in this repository".into());
    };
    Tonight::Changed {
        lease: Lease {
            branch: branch.to_owned(),
            ..lease
        },
        tree,
    }
}

/// What every task's publishing shares.
struct Ctx<'a> {
    base: String,
    report: &'a RunReport,
    repo_dir: &'a std::path::Path,
    github: &'a GitHub,
    push_token: Option<&'a str>,
    templates: &'a Templates,
    opts: &'a PublishOptions,
}

impl Ctx<'_> {
    /// Look up the task's pull requests, decide, and act.
    async fn one(&self, t: &Task<'_>) -> PublishOutcome {
        if let Tonight::Nothing(why) = &t.tonight {
            return outcome(Operation::Skipped, Some(why.clone()));
        }
        let known = match self.github.list_pulls(&t.branch).await {
            Ok(p) => Known::from_pulls(p, &t.key),
            Err(e) => return outcome(Operation::Failed, Some(e.to_string())),
        };
        let prompt = stable::prompt_hash(&t.r.task);
        let action = decide(
            &t.tonight,
            &known,
            &prompt,
            self.opts.close_stale,
            self.opts.reopen,
        );
        let claimed = known.claimed();
        match (action, &t.tonight) {
            (Action::Skip(why), _) => {
                let why = match self.after_merge(t, &known).await {
                    Some(note) => format!("{why}; {note}"),
                    None => why,
                };
                outcome(Operation::Skipped, Some(why))
            }
            (Action::Close(n, m), _) => self.close(t, n, &m, claimed).await,
            (Action::Leave(n), _) => self.leave(&known, n),
            (Action::Create, Tonight::Changed { lease, tree }) => {
                self.create(t, lease, *tree, &prompt, claimed).await
            }
            (Action::Update(n, m), Tonight::Changed { lease, tree }) => {
                let Some((pr, _)) = known.pulls.iter().find(|(p, _)| p.number == n) else {
                    return outcome(Operation::Failed, Some("the pull request vanished".into()));
                };
                self.update(t, lease, *tree, &prompt, (pr, &m), claimed)
                    .await
            }
            _ => outcome(Operation::Failed, Some("nothing to publish".into())),
        }
    }

    /// When the task's last pull request was merged, its branch is deleted (at a tip
    /// fanout pushed); the next change starts fresh. Returns a note.
    async fn after_merge(&self, t: &Task<'_>, known: &Known) -> Option<String> {
        let (p, m) = known.pulls.first()?;
        p.merged_at.as_ref()?;
        let owner = super::push::Owner {
            run_id: m.run.clone(),
            worker: Some(t.r.worker_id),
        };
        let gone = Lease::deletion(&t.branch, known.claimed(), owner);
        Some(match self.push(gone).await {
            PushResult::Pushed => format!("#{} was merged: branch {} deleted", p.number, t.branch),
            PushResult::UpToDate => format!("#{} was merged", p.number),
            PushResult::Refused(why) => format!("#{} was merged; branch kept: {why}", p.number),
        })
    }

    fn leave(&self, known: &Known, number: u64) -> PublishOutcome {
        let pr = known.pulls.iter().find(|(p, _)| p.number == number);
        PublishOutcome {
            number: Some(number),
            url: pr.map(|(p, _)| p.html_url.clone()),
            ..outcome(
                Operation::Unchanged,
                Some("the open pull request already holds this change".into()),
            )
        }
    }

    /// The marker and body of tonight's change.
    fn render(
        &self,
        t: &Task<'_>,
        lease: &Lease,
        tree: Oid,
        prompt: &str,
        prev: Option<String>,
    ) -> Result<(String, String, Marker), String> {
        let (title, body) = self.templates.render_in(
            t.r,
            &self.report.results,
            &self.report.run_id,
            self.opts.run_url.as_deref(),
        )?;
        let marker = Marker {
            task: t.key.clone(),
            head: lease.local.to_string(),
            prev,
            base: lease.base.to_string(),
            tree: tree.to_string(),
            prompt: prompt.to_owned(),
            run: self.report.run_id.clone(),
            files: t.r.files_modified.clone(),
        };
        Ok((title, stable::with_marker(&body, &marker), marker))
    }

    /// Push one lease (a branch, or its deletion).
    async fn push(&self, lease: Lease) -> PushResult {
        let branch = lease.branch.clone();
        match pulls::push_all(self.repo_dir, self.opts, self.push_token, &[(0, lease)]).await {
            Ok(mut m) => m
                .remove(&branch)
                .unwrap_or(PushResult::Refused("not pushed".into())),
            Err(why) => PushResult::Refused(why),
        }
    }

    async fn create(
        &self,
        t: &Task<'_>,
        lease: &Lease,
        tree: Oid,
        prompt: &str,
        claimed: Vec<Oid>,
    ) -> PublishOutcome {
        let (title, body, _) = match self.render(t, lease, tree, prompt, None) {
            Ok(x) => x,
            Err(e) => return outcome(Operation::Failed, Some(e)),
        };
        let pushed = Lease {
            claimed: claimed.clone(),
            ..lease.clone()
        };
        if let PushResult::Refused(why) = self.push(pushed).await {
            return outcome(Operation::Failed, Some(why));
        }
        let opts = self.labelled();
        let mut o =
            pulls::open_or_update(&t.branch, &self.base, &title, &body, self.github, &opts).await;
        if o.operation == Operation::Failed {
            // Take back the branch just pushed: with no marked pull request, the next
            // run could not tell it from someone else's.
            let back = Lease::deletion(&t.branch, vec![lease.local], lease.owner.clone());
            if let PushResult::Refused(why) = self.push(back).await {
                o.reason = Some(format!(
                    "{}; the branch {} was pushed and could not be deleted: {why}",
                    o.reason.unwrap_or_default(),
                    t.branch
                ));
            }
            return o;
        }
        o.pushed_commit = Some(lease.local.to_string());
        o
    }

    /// The publish options with fanout's [`LABEL`] first among the labels: every
    /// pull request of a stable branch carries it (put back on one that lost it).
    fn labelled(&self) -> pulls::PublishOptions {
        let mut opts = self.opts.clone();
        if !opts.labels.iter().any(|l| l == LABEL) {
            opts.labels.insert(0, LABEL.to_owned());
        }
        opts
    }

    async fn update(
        &self,
        t: &Task<'_>,
        lease: &Lease,
        tree: Oid,
        prompt: &str,
        (open, last): (&PullRequest, &Marker),
        claimed: Vec<Oid>,
    ) -> PublishOutcome {
        let number = open.number;
        let (title, body, marker) =
            match self.render(t, lease, tree, prompt, Some(last.head.clone())) {
                Ok(x) => x,
                Err(e) => return outcome(Operation::Failed, Some(e)),
            };
        let failed = |why: String| PublishOutcome {
            number: Some(number),
            ..outcome(Operation::Failed, Some(why))
        };
        // The body first: it vouches for the commit about to be pushed (and still for
        // the previous one, should the push not happen).
        let pr = match self.github.update_pull(number, &title, &body).await {
            Ok(pr) => pr,
            Err(e) => return failed(e.to_string()),
        };
        let pushed = Lease {
            claimed,
            ..lease.clone()
        };
        if let PushResult::Refused(why) = self.push(pushed).await {
            // Not pushed: the body goes back to what the branch holds.
            let old = open.body.as_deref().unwrap_or_default();
            if let Err(e) = self.github.update_pull(number, &open.title, old).await {
                return failed(format!("{why}; the body could not be restored: {e}"));
            }
            return failed(why);
        }
        let mut notes = Vec::new();
        if let Err(e) = self
            .github
            .comment(number, &changed_since(last, &marker))
            .await
        {
            notes.push(format!("comment not posted: {e}"));
        }
        let opts = self.labelled();
        let op = pulls::extras(self.github, &pr, Operation::Updated, &opts, &mut notes).await;
        PublishOutcome {
            number: Some(number),
            url: Some(pr.html_url),
            reason: (!notes.is_empty()).then(|| notes.join("; ")),
            pushed_commit: Some(lease.local.to_string()),
            ..outcome(op, None)
        }
    }

    async fn close(
        &self,
        t: &Task<'_>,
        number: u64,
        last: &Marker,
        claimed: Vec<Oid>,
    ) -> PublishOutcome {
        let failed = |why: String| PublishOutcome {
            number: Some(number),
            ..outcome(Operation::Failed, Some(why))
        };
        let text = format!(
            "Closed by fanout: run `{}` found nothing to change for this task against the base `{}`, so this change is no longer needed. The branch `{}` is deleted.",
            self.report.run_id,
            short(&self.report.plan.base.commit),
            t.branch
        );
        if let Err(e) = self.github.comment(number, &text).await {
            return failed(e.to_string());
        }
        let pr = match self.github.close_pull(number).await {
            Ok(pr) => pr,
            Err(e) => return failed(e.to_string()),
        };
        let owner = super::push::Owner {
            run_id: last.run.clone(),
            worker: Some(t.r.worker_id),
        };
        let gone = self.push(Lease::deletion(&t.branch, claimed, owner)).await;
        PublishOutcome {
            number: Some(number),
            url: Some(pr.html_url),
            reason: match gone {
                PushResult::Refused(why) => Some(format!("branch kept: {why}")),
                _ => None,
            },
            ..outcome(Operation::Closed, None)
        }
    }
}

/// The comment on an updated pull request: what changed since the last run.
fn changed_since(last: &Marker, now: &Marker) -> String {
    let added: Vec<&String> = now
        .files
        .iter()
        .filter(|f| !last.files.contains(f))
        .collect();
    let dropped: Vec<&String> = last
        .files
        .iter()
        .filter(|f| !now.files.contains(f))
        .collect();
    let list = |v: &[&String]| {
        v.iter()
            .map(|f| format!("`{}`", crate::report::summary::md_escape(f)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = format!(
        "Updated by fanout run `{}` (was `{}` of run `{}`): now `{}` on base `{}`.",
        now.run,
        short(&last.head),
        last.run,
        short(&now.head),
        short(&now.base)
    );
    if last.base != now.base {
        text.push_str(&format!(" The base moved from `{}`.", short(&last.base)));
    }
    if !added.is_empty() {
        text.push_str(&format!("\n\nNewly changed: {}.", list(&added)));
    }
    if !dropped.is_empty() {
        text.push_str(&format!("\n\nNo longer changed: {}.", list(&dropped)));
    }
    if added.is_empty() && dropped.is_empty() {
        text.push_str("\n\nThe same files, changed differently.");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::github::{BranchRef, Label};
    use crate::publish::push::Owner;

    fn oid(c: char) -> Oid {
        c.to_string().repeat(40).parse().unwrap()
    }

    fn marker(tree: char, prompt: &str) -> Marker {
        Marker {
            task: "docs".into(),
            head: "1".repeat(40),
            prev: None,
            base: "b".repeat(40),
            tree: tree.to_string().repeat(40),
            prompt: prompt.into(),
            run: "r1".into(),
            files: vec![],
        }
    }

    fn pull(number: u64, state: &str, merged: bool, m: &Marker, label: bool) -> PullRequest {
        let r = |b: &str| BranchRef {
            branch: b.into(),
            sha: "0".repeat(40),
        };
        PullRequest {
            number,
            html_url: format!("https://github.com/o/r/pull/{number}"),
            title: "t".into(),
            body: Some(stable::with_marker("body", m)),
            draft: None,
            state: state.into(),
            head: r("fanout/docs"),
            base: r("main"),
            labels: if label {
                vec![Label { name: LABEL.into() }]
            } else {
                vec![]
            },
            merged_at: merged.then(|| "2026-01-01T00:00:00Z".into()),
        }
    }

    fn changed(tree: char) -> Tonight {
        Tonight::Changed {
            lease: Lease {
                branch: "fanout/docs".into(),
                local: oid('2'),
                base: oid('b'),
                owner: Owner {
                    run_id: "r2".into(),
                    worker: Some(1),
                },
                claimed: vec![],
                delete: false,
            },
            tree: oid(tree),
        }
    }

    #[test]
    fn the_lifecycle_of_a_tasks_pull_request() {
        let m = marker('d', "p");
        let open = Known::from_pulls(vec![pull(3, "open", false, &m, true)], "docs");
        let none = Known::default();
        let decide = |t: &Tonight, k: &Known, reopen| decide(t, k, "p", true, reopen);
        assert_eq!(decide(&changed('d'), &none, false), Action::Create);
        assert_eq!(decide(&changed('d'), &open, false), Action::Leave(3));
        assert_eq!(
            decide(&changed('e'), &open, false),
            Action::Update(3, m.clone())
        );
        assert_eq!(
            decide(&Tonight::Unchanged, &open, false),
            Action::Close(3, m.clone())
        );
        assert!(matches!(
            super::decide(&Tonight::Unchanged, &open, "p", false, false),
            Action::Skip(_)
        ));
        // Closed by a human: kept closed unless the prompt changed or --reopen.
        let closed = Known::from_pulls(vec![pull(3, "closed", false, &m, true)], "docs");
        assert!(
            matches!(decide(&changed('e'), &closed, false), Action::Skip(w) if w.contains("#3 was closed"))
        );
        assert_eq!(decide(&changed('e'), &closed, true), Action::Create);
        assert_eq!(
            super::decide(&changed('e'), &closed, "q", true, false),
            Action::Create
        );
        // Merged: the next change starts fresh.
        let merged = Known::from_pulls(vec![pull(3, "closed", true, &m, true)], "docs");
        assert_eq!(decide(&changed('e'), &merged, false), Action::Create);
        // Without the label (adding it failed) the marker still says it is fanout's;
        // for another task, it is not.
        let unlabelled = Known::from_pulls(vec![pull(3, "open", false, &m, false)], "docs");
        assert_eq!(unlabelled.pulls.len(), 1);
        assert!(
            Known::from_pulls(vec![pull(3, "open", false, &m, true)], "other")
                .pulls
                .is_empty()
        );
        assert_eq!(open.claimed(), vec![oid('1')]);
    }

    #[test]
    fn the_update_comment_says_what_changed() {
        let mut a = marker('d', "p");
        a.files = vec!["a.md".into(), "b.md".into()];
        let mut b = a.clone();
        b.head = "2".repeat(40);
        b.run = "r2".into();
        b.files = vec!["b.md".into(), "c.md".into()];
        let text = changed_since(&a, &b);
        assert!(text.contains("Newly changed: `c.md`"), "{text}");
        assert!(text.contains("No longer changed: `a.md`"), "{text}");
        assert!(text.contains("run `r2`"), "{text}");
    }
}
