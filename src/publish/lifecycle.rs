//! The life of a task's pull request across runs (`branch: stable`), after
//! create-pull-request's model: each run force-pushes the task's one branch and
//! updates its one open pull request; a run whose worker changed nothing closes it and
//! deletes the branch (`close_stale`); a pull request a human closed without merging is
//! not opened again unless the task's prompt changed (or `--reopen`) — one fanout
//! closed itself as stale is its own closure, and a later change opens a new one; after
//! a merge the next run starts fresh. Each worker's outcome is `created`, `updated`,
//! `closed`, `unchanged` (left as it was), `queued`, `skipped` or `failed`.
//!
//! A night is published in phases: each task's pull requests are looked up and its
//! action decided ([`decide`]); with `publish.max_open`, creations beyond the room
//! left by fanout's open pull requests are queued, in the plan's order; each pull
//! request's base is chosen — a dependent task's is its dependency's branch while the
//! dependency's pull request stays open, else the base branch ([`super::stack`]) — and
//! pull requests whose base must change are retargeted before any branch is deleted
//! (GitHub closes a pull request whose base branch goes); the actions are done; the
//! stacks' sections are written; a tended task's pull request counts its tend.
//!
//! What is fanout's is decided by the marker of [`super::stable`], never by a name.

use std::collections::BTreeMap;

use git2::Oid;

use super::github::{GitHub, PullRequest};
use super::preview::{NO_TOKEN, Preview, PullDecision};
use super::pulls::{self, Inputs, PublishOptions, outcome};
use super::push::{Lease, PushResult, WouldPush};
use super::stable::{self, LABEL, Marker};
use super::stack::{self, Member};
use crate::model::{Operation, PublishOutcome, WorkerResult};
use crate::run::results::RunReport;
use crate::util::out::errln;
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
                (m.task == key && p.is_from_this_repository()).then_some((p, m))
            })
            .collect();
        Known { pulls }
    }

    fn open(&self) -> Option<&(PullRequest, Marker)> {
        self.pulls.iter().find(|(p, _)| p.state == "open")
    }

    /// The last pull request, when a person closed it without merging (not fanout as
    /// stale) and none is open.
    fn closed_by_a_person(&self) -> Option<&PullRequest> {
        if self.open().is_some() {
            return None;
        }
        let (p, m) = self.pulls.first()?;
        (p.merged_at.is_none() && !m.stale).then_some(p)
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
    /// A change that waits for room (`publish.max_open`), and why.
    Queue(String),
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
            match (known.closed_by_a_person(), known.pulls.first()) {
                (Some(p), Some((_, m))) if m.prompt == prompt && !reopen => Action::Skip(format!(
                    "#{} was closed without merging; not opened again (the task's prompt is unchanged; --reopen opens it)",
                    p.number
                )),
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
    /// The plan's task.
    task: &'a crate::plan::Task,
    key: String,
    branch: String,
    tonight: Tonight,
}

/// One task, looked up and decided.
struct Step<'a> {
    t: Task<'a>,
    known: Known,
    action: Action,
}

/// fanout's open pull requests (any task's), found by their markers; or why they
/// could not be listed.
type Survey = Result<Vec<(PullRequest, Marker)>, String>;

/// Publish `report` to stable branches: one worker per task's branch (the one to
/// publish, else one that found nothing to change), each task's pull request created,
/// updated, left, closed, queued or kept closed, in the phases of the module docs.
pub async fn publish(p: Inputs<'_>, github: &GitHub) -> BTreeMap<u32, PublishOutcome> {
    let mut out = BTreeMap::new();
    let (base, tasks) = match tasks(p, &mut out) {
        Ok(t) => t,
        Err(why) => {
            for r in &p.report.results {
                out.insert(r.worker_id, outcome(Operation::Failed, Some(why.clone())));
            }
            return out;
        }
    };
    let ctx = Ctx::new(p, base, github);
    let Planned {
        steps,
        survey,
        bases,
    } = ctx.plan(tasks, &mut out).await;
    ctx.retarget(&survey, &steps, &bases).await;
    let mut done: Vec<(Step<'_>, PublishOutcome)> = Vec::new();
    for step in steps {
        let mut o = ctx.act(&step, &bases).await;
        o.branch = Some(step.t.branch.clone());
        done.push((step, o));
    }
    ctx.link_stacks(&mut done, &bases).await;
    ctx.count_tends(&mut done).await;
    for (step, o) in done {
        out.insert(step.t.r.worker_id, o);
    }
    out
}

/// What [`publish`] would do, without writing anything ([`super::preview`]): the same
/// tasks, looked up and decided in the same phases, each step's action said instead
/// of done. Without `github` (no token), what GitHub's state decides is undecided.
pub async fn dry_run(p: Inputs<'_>, github: Option<&GitHub>) -> Vec<Preview> {
    let mut out = BTreeMap::new();
    let (base, tasks) = match tasks(p, &mut out) {
        Ok(t) => t,
        Err(why) => {
            return p
                .report
                .results
                .iter()
                .map(|r| Preview::skipped(r, &why))
                .collect();
        }
    };
    let mut previews = Vec::new();
    match github {
        None => {
            for t in &tasks {
                previews.push(undecided(t, p).await);
            }
        }
        Some(github) => {
            let ctx = Ctx::new(p, base, github);
            let planned = ctx.plan(tasks, &mut out).await;
            for step in &planned.steps {
                previews.push(ctx.preview(step, &planned.bases).await);
            }
            let retargets = ctx.retargets(&planned.survey, &planned.steps, &planned.bases);
            say_retargets(&mut previews, &planned.steps, retargets);
        }
    }
    for (id, o) in out {
        if let Some(r) = p.report.result(id) {
            previews.push(Preview::skipped(r, o.reason.as_deref().unwrap_or_default()));
        }
    }
    previews.sort_by_key(|p| p.worker_id);
    previews
}

/// Each retarget said on the preview of its pull request's task; one of a task not
/// tonight's, on the preview of the task whose branch it was based on (else the
/// first).
fn say_retargets(previews: &mut [Preview], steps: &[Step<'_>], retargets: Vec<Retarget>) {
    for r in retargets {
        let step = steps
            .iter()
            .find(|s| s.t.key == r.task)
            .or_else(|| steps.iter().find(|s| s.t.branch == r.from));
        let at = step.and_then(|s| previews.iter().position(|p| p.worker_id == s.t.r.worker_id));
        if let Some(p) = previews.get_mut(at.unwrap_or(0)) {
            p.also.push(format!(
                "retarget #{} onto {} (was {}), before any branch is deleted",
                r.number, r.to, r.from
            ));
        }
    }
}

/// A task's preview without a token: its push decided, its pull request not.
async fn undecided(t: &Task<'_>, p: Inputs<'_>) -> Preview {
    let id = t.r.worker_id;
    let pv = match &t.tonight {
        Tonight::Nothing(why) => return Preview::nothing(id, &t.branch, None, why),
        Tonight::Unchanged => Preview::nothing(id, &t.branch, None, "no change against the base"),
        Tonight::Changed { lease, .. } => {
            Preview::pushing(id, lease, Some(&look_one(p, lease.clone()).await))
        }
    };
    pv.with_pull(NO_TOKEN.into(), PullDecision::Undecided)
}

/// What pushing one lease would do.
async fn look_one(p: Inputs<'_>, lease: Lease) -> Result<WouldPush, String> {
    let branch = lease.branch.clone();
    let mut m = pulls::look_all(p, &[(0, lease)]).await?;
    m.remove(&branch)
        .ok_or_else(|| "the remote's branches were not read".to_owned())
}

/// The base branch and the worker speaking for each stable branch, in the plan's
/// order; every other worker's outcome goes into `out`. Or why there are none.
fn tasks<'a>(
    p: Inputs<'a>,
    out: &mut BTreeMap<u32, PublishOutcome>,
) -> Result<(String, Vec<Task<'a>>), String> {
    let base = pulls::base_of(p.report, p.opts)
        .ok_or_else(|| "the run's base is not a branch; pass --base BRANCH".to_owned())?;
    let (report, opts) = (p.report, p.opts);
    let ids = stable::branches(&report.plan)?;
    let repo = git2::Repository::open(p.repo_dir).map_err(|e| e.message().to_owned())?;
    let mut chosen: BTreeMap<String, Task<'a>> = BTreeMap::new();
    for r in &report.results {
        let (Some((key, branch)), Some(w)) = (
            ids.get(&r.worker_id).cloned(),
            report.plan.worker(r.worker_id),
        ) else {
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
            task: &w.task,
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
    let mut tasks: Vec<Task<'a>> = chosen.into_values().collect();
    tasks.sort_by_key(|t| t.r.worker_id);
    Ok((base, tasks))
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

/// With `max_open`, creations beyond the room left by fanout's open pull requests
/// (after tonight's closes) wait, in the plan's order. When fanout's pull requests
/// cannot be counted, every creation waits: the cap is never passed.
fn queue(steps: &mut [Step<'_>], survey: &Survey, max_open: Option<u32>) {
    let Some(max) = max_open else { return };
    let closing = steps
        .iter()
        .filter(|s| matches!(s.action, Action::Close(..)))
        .count();
    let mut open = match survey {
        Ok(prs) => prs.len().saturating_sub(closing),
        Err(why) => {
            for s in steps.iter_mut().filter(|s| s.action == Action::Create) {
                s.action = Action::Queue(format!(
                    "queued: fanout's open pull requests could not be counted ({why}), and publish.max_open is {max}"
                ));
            }
            return;
        }
    };
    for s in steps.iter_mut().filter(|s| s.action == Action::Create) {
        if open < max as usize {
            open += 1;
        } else {
            s.action = Action::Queue(format!(
                "queued: {open} of fanout's pull requests are open (publish.max_open: {max}); this change is published when one is merged or closed"
            ));
        }
    }
}

/// Where each pull request is based tonight.
struct Bases {
    /// By task key: its dependency's branch, or the base branch.
    by_key: BTreeMap<String, String>,
    /// The branches whose pull request is open after tonight.
    open_after: Vec<String>,
    /// By task key: what its stack section notes (a dependency closed unmerged).
    notes: BTreeMap<String, Vec<String>>,
    /// (dependent's key, dependency's key) of tonight's tasks.
    edges: Vec<(String, String)>,
}

impl Bases {
    /// A dependent task is based on its first dependency whose pull request is open
    /// after tonight; every other task on the base branch.
    fn of(steps: &[Step<'_>], survey: &Survey, base: &str) -> Bases {
        let stays_open = |s: &Step<'_>| match &s.action {
            Action::Create | Action::Update(..) | Action::Leave(_) => true,
            Action::Skip(_) => s.known.open().is_some(),
            Action::Close(..) | Action::Queue(_) => false,
        };
        let closing: Vec<&str> = steps
            .iter()
            .filter(|s| !stays_open(s))
            .map(|s| s.t.branch.as_str())
            .collect();
        let mut open_after: Vec<String> = steps
            .iter()
            .filter(|s| stays_open(s))
            .map(|s| s.t.branch.clone())
            .collect();
        for (p, _) in survey.iter().flatten() {
            if !closing.contains(&p.head.branch.as_str()) && !open_after.contains(&p.head.branch) {
                open_after.push(p.head.branch.clone());
            }
        }
        let mut b = Bases {
            by_key: BTreeMap::new(),
            open_after,
            notes: BTreeMap::new(),
            edges: Vec::new(),
        };
        for s in steps {
            b.base_of(s, steps, base);
        }
        b
    }

    fn base_of(&mut self, s: &Step<'_>, steps: &[Step<'_>], base: &str) {
        let mut chosen = base.to_owned();
        for dep in &s.t.task.depends_on {
            let key = crate::plan::assign::slug(dep, 48);
            let Some(d) = steps.iter().find(|x| x.t.key == key) else {
                continue;
            };
            self.edges.push((s.t.key.clone(), key.clone()));
            if self.open_after.contains(&d.t.branch) {
                if chosen == base {
                    chosen = d.t.branch.clone();
                }
            } else if let Some(p) = d.known.closed_by_a_person() {
                self.notes.entry(s.t.key.clone()).or_default().push(format!(
                    "It depends on `{}`, whose pull request #{} was closed without merging: that change is in this pull request too.",
                    crate::report::summary::md_escape(&key),
                    p.number
                ));
            }
        }
        self.by_key.insert(s.t.key.clone(), chosen);
    }

    /// Where `key`'s pull request goes (the base branch for a task not tonight's).
    fn base_for<'b>(&'b self, key: &str, default: &'b str) -> &'b str {
        self.by_key.get(key).map_or(default, String::as_str)
    }
}

/// Tonight's tasks looked up and decided: everything publishing knows before its
/// first write.
struct Planned<'a> {
    steps: Vec<Step<'a>>,
    survey: Survey,
    bases: Bases,
}

/// What every task's publishing shares.
struct Ctx<'a> {
    p: Inputs<'a>,
    base: String,
    github: &'a GitHub,
    /// The bodies fanout wrote tonight, by pull request.
    bodies: std::cell::RefCell<BTreeMap<u64, String>>,
}

impl<'a> Ctx<'a> {
    fn new(p: Inputs<'a>, base: String, github: &'a GitHub) -> Self {
        let bodies = Default::default();
        Ctx {
            p,
            base,
            github,
            bodies,
        }
    }

    /// fanout's open pull requests, by their markers.
    async fn survey(&self) -> Survey {
        let all = self
            .github
            .list_open_pulls()
            .await
            .map_err(|e| e.to_string())?;
        let prefix = stable::prefix(&self.p.report.plan).unwrap_or_default();
        Ok(all
            .into_iter()
            .filter_map(|p| {
                let m = Marker::parse(p.body.as_deref()?)?;
                stable::is_fanouts(&p, &m, &prefix).then_some((p, m))
            })
            .collect())
    }

    /// Survey fanout's open pull requests, look up and decide each task, queue what
    /// `max_open` holds back and choose each pull request's base; the outcome of each
    /// task whose pull requests cannot be listed goes into `out`.
    async fn plan<'t>(
        &self,
        tasks: Vec<Task<'t>>,
        out: &mut BTreeMap<u32, PublishOutcome>,
    ) -> Planned<'t> {
        let survey = self.survey().await;
        let mut steps = Vec::new();
        for t in tasks {
            match self.look_up(t).await {
                Ok(step) => steps.push(step),
                Err((id, o)) => {
                    out.insert(id, o);
                }
            }
        }
        queue(&mut steps, &survey, self.p.opts.max_open);
        let bases = Bases::of(&steps, &survey, &self.base);
        Planned {
            steps,
            survey,
            bases,
        }
    }

    /// What [`Ctx::act`] would do with a step, said instead of done.
    async fn preview(&self, step: &Step<'_>, bases: &Bases) -> Preview {
        let (t, known) = (&step.t, &step.known);
        let base = Preview::nothing(t.r.worker_id, &t.branch, None, "");
        let pull = match (&step.action, &t.tonight) {
            (Action::Create, Tonight::Changed { .. }) => PullDecision::Open,
            (Action::Update(n, _), Tonight::Changed { .. }) => PullDecision::Update(*n),
            _ => PullDecision::None,
        };
        let (pull_request, lease) = match (&step.action, &t.tonight) {
            (Action::Skip(why), _) => match merged(t, known) {
                Some((n, gone)) => (
                    format!("none: {why}; #{n} was merged: its branch would be deleted"),
                    Some(gone),
                ),
                None => (format!("none: {why}"), None),
            },
            (Action::Queue(why), tonight) => {
                return Preview {
                    push: "no push: a queued change is pushed when it is published".into(),
                    commit: match tonight {
                        Tonight::Changed { lease, .. } => Some(lease.local.to_string()),
                        _ => None,
                    },
                    ..base.with_pull(why.clone(), PullDecision::Queued)
                };
            }
            (Action::Leave(n), _) => (format!("leave #{n}: it already holds this change"), None),
            (Action::Close(n, m), _) => (
                format!("close #{n} and delete its branch: nothing to change tonight"),
                Some(deletion(t, known, m)),
            ),
            (Action::Create, Tonight::Changed { lease, .. }) => (
                format!("open into {}", bases.base_for(&t.key, &self.base)),
                Some(lease.clone()),
            ),
            (Action::Update(n, _), Tonight::Changed { lease, .. }) => {
                (format!("update #{n}"), Some(lease.clone()))
            }
            _ => ("none: nothing to publish".to_owned(), None),
        };
        let Some(lease) = lease else {
            return Preview {
                push: "no push".into(),
                ..base.with_pull(pull_request, pull)
            };
        };
        let claimed = Lease {
            claimed: known.claimed(),
            ..lease
        };
        let would = look_one(self.p, claimed.clone()).await;
        let pv = Preview::pushing(t.r.worker_id, &claimed, Some(&would));
        self.preview_text(step, pv.with_pull(pull_request, pull))
    }

    /// A preview with the labels, title and body of a pull request opened or updated.
    fn preview_text(&self, step: &Step<'_>, p: Preview) -> Preview {
        let t = &step.t;
        let prompt = stable::prompt_hash(&t.r.task);
        let (prev, section) = match &step.action {
            Action::Update(n, m) => {
                let open = step.known.pulls.iter().find(|(p, _)| p.number == *n);
                let section = open.and_then(|(p, _)| p.body.as_deref().and_then(stack::section_of));
                (Some(m.head.clone()), section)
            }
            Action::Create => (None, None),
            _ => return p,
        };
        let Tonight::Changed { lease, tree } = &t.tonight else {
            return p;
        };
        match self.render(t, (lease, *tree), &prompt, prev, section) {
            Ok((title, body, _)) => Preview {
                labels: self.labelled().labels,
                ..p
            }
            .with_text(&title, &body),
            Err(e) => p.with_pull(format!("none: {e}"), PullDecision::None),
        }
    }

    /// Look up the task's pull requests and decide; an outcome when they cannot be
    /// listed.
    async fn look_up<'t>(&self, t: Task<'t>) -> Result<Step<'t>, (u32, PublishOutcome)> {
        // Looked up even when tonight has nothing to publish: its open pull request,
        // if any, is still waiting for review.
        let known = match self.github.list_pulls(&t.branch).await {
            Ok(p) => Known::from_pulls(p, &t.key),
            Err(e) => {
                let o = match &t.tonight {
                    Tonight::Nothing(why) => outcome(Operation::Skipped, Some(why.clone())),
                    _ => outcome(Operation::Failed, Some(e.to_string())),
                };
                return Err((t.r.worker_id, o));
            }
        };
        let prompt = stable::prompt_hash(&t.r.task);
        let action = decide(
            &t.tonight,
            &known,
            &prompt,
            self.p.opts.close_stale,
            self.p.opts.reopen,
        );
        Ok(Step { t, known, action })
    }

    /// Retarget each open pull request whose base must change tonight — a task's to
    /// its new base; one on the branch of a pull request that is no longer open to the
    /// base branch — before any branch is deleted.
    async fn retarget(&self, survey: &Survey, steps: &[Step<'_>], bases: &Bases) {
        for r in self.retargets(survey, steps, bases) {
            match self.github.retarget(r.number, &r.to).await {
                Ok(_) => errln!(
                    "fanout: #{} now based on {} (was {})",
                    r.number,
                    r.to,
                    r.from
                ),
                Err(e) => errln!(
                    "fanout: warning: #{} could not be based on {}: {e}",
                    r.number,
                    r.to
                ),
            }
        }
    }

    /// The open pull requests whose base must change tonight ([`Ctx::retarget`]).
    fn retargets(&self, survey: &Survey, steps: &[Step<'_>], bases: &Bases) -> Vec<Retarget> {
        let mut out = Vec::new();
        for (p, m) in survey.iter().flatten() {
            let want = match steps.iter().find(|s| s.t.key == m.task) {
                Some(s) if matches!(s.action, Action::Close(..)) => continue,
                Some(_) => bases.base_for(&m.task, &self.base).to_owned(),
                None if p.base.branch != self.base
                    && !bases.open_after.contains(&p.base.branch)
                    && stable::is_stable_branch(&self.p.report.plan, &p.base.branch) =>
                {
                    self.base.clone()
                }
                None => continue,
            };
            if p.base.branch != want {
                out.push(Retarget {
                    number: p.number,
                    task: m.task.clone(),
                    from: p.base.branch.clone(),
                    to: want,
                });
            }
        }
        out
    }

    /// Do a step's action.
    async fn act(&self, step: &Step<'_>, bases: &Bases) -> PublishOutcome {
        let (t, known) = (&step.t, &step.known);
        let claimed = known.claimed();
        let prompt = stable::prompt_hash(&t.r.task);
        match (&step.action, &t.tonight) {
            (Action::Skip(why), _) => self.skip(t, known, why).await,
            (Action::Queue(why), _) => outcome(Operation::Queued, Some(why.clone())),
            (Action::Close(n, m), _) => match known.pulls.iter().find(|(p, _)| p.number == *n) {
                Some((pr, _)) => self.close(t, pr, m, deletion(t, known, m)).await,
                None => outcome(Operation::Failed, Some("the pull request vanished".into())),
            },
            (Action::Leave(n), _) => self.leave(known, *n),
            (Action::Create, Tonight::Changed { lease, tree }) => {
                let base = bases.base_for(&t.key, &self.base);
                self.create(t, (lease, *tree), &prompt, base, claimed).await
            }
            (Action::Update(n, m), Tonight::Changed { lease, tree }) => {
                let Some((pr, _)) = known.pulls.iter().find(|(p, _)| p.number == *n) else {
                    return outcome(Operation::Failed, Some("the pull request vanished".into()));
                };
                self.update(t, (lease, *tree), &prompt, (pr, m), claimed)
                    .await
            }
            _ => outcome(Operation::Failed, Some("nothing to publish".into())),
        }
    }

    /// Nothing published tonight: its open pull request, still open, is still
    /// waiting for review; after a merge, the branch goes.
    async fn skip(&self, t: &Task<'_>, known: &Known, why: &str) -> PublishOutcome {
        let why = match self.after_merge(t, known).await {
            Some(note) => format!("{why}; {note}"),
            None => why.to_owned(),
        };
        let open = known.open().map(|(p, _)| p);
        PublishOutcome {
            number: open.map(|p| p.number),
            url: open.map(|p| p.html_url.clone()),
            ..outcome(Operation::Skipped, Some(why))
        }
    }

    /// When the task's last pull request was merged, its branch is deleted (at a tip
    /// fanout pushed); the next change starts fresh. Returns a note.
    async fn after_merge(&self, t: &Task<'_>, known: &Known) -> Option<String> {
        let (n, gone) = merged(t, known)?;
        Some(match self.push(gone).await {
            PushResult::Pushed => format!("#{n} was merged: branch {} deleted", t.branch),
            PushResult::UpToDate => format!("#{n} was merged"),
            PushResult::Refused(why) => format!("#{n} was merged; branch kept: {why}"),
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

    /// The title, body and marker of tonight's change (`prev`: the commit fanout
    /// pushed before; `section`: the stack section known so far).
    fn render(
        &self,
        t: &Task<'_>,
        (lease, tree): (&Lease, Oid),
        prompt: &str,
        prev: Option<String>,
        section: Option<&str>,
    ) -> Result<(String, String, Marker), String> {
        let title = t.task.issue.as_ref().map(|i| i.title.as_str());
        let (title, body) = self.p.templates.render_titled(
            t.r,
            &self.p.report.results,
            (&self.p.report.run_id, self.p.opts.run_url.as_deref()),
            title,
        )?;
        let marker = Marker {
            prev,
            prompt: prompt.to_owned(),
            run: self.p.report.run_id.clone(),
            files: t.r.files_modified.clone(),
            issue: t.task.issue.as_ref().map(|i| i.number),
            tends: t.task.tend.as_ref().map_or(0, |x| x.attempt),
            ..Marker::new(
                &t.key,
                lease.local.to_string(),
                lease.base.to_string(),
                tree.to_string(),
            )
        };
        Ok((title, compose(&body, section, t.task, &marker), marker))
    }

    /// Push one lease (a branch, or its deletion).
    async fn push(&self, lease: Lease) -> PushResult {
        let branch = lease.branch.clone();
        match pulls::push_all(self.p, &[(0, lease)]).await {
            Ok(mut m) => m
                .remove(&branch)
                .unwrap_or(PushResult::Refused("not pushed".into())),
            Err(why) => PushResult::Refused(why),
        }
    }

    async fn create(
        &self,
        t: &Task<'_>,
        (lease, tree): (&Lease, Oid),
        prompt: &str,
        base: &str,
        claimed: Vec<Oid>,
    ) -> PublishOutcome {
        let (title, body, _) = match self.render(t, (lease, tree), prompt, None, None) {
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
        let mut o = pulls::open_or_update(&t.branch, base, &title, &body, self.github, &opts).await;
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
        o.reason = join_notes(o.reason.take(), tend_note(t));
        if let Some(n) = o.number {
            self.bodies.borrow_mut().insert(n, body);
        }
        o
    }

    /// The publish options with fanout's [`LABEL`] first among the labels: every
    /// pull request of a stable branch carries it (put back on one that lost it).
    fn labelled(&self) -> pulls::PublishOptions {
        let mut opts = self.p.opts.clone();
        if !opts.labels.iter().any(|l| l == LABEL) {
            opts.labels.insert(0, LABEL.to_owned());
        }
        opts
    }

    async fn update(
        &self,
        t: &Task<'_>,
        change: (&Lease, Oid),
        prompt: &str,
        (open, last): (&PullRequest, &Marker),
        claimed: Vec<Oid>,
    ) -> PublishOutcome {
        let number = open.number;
        let section = open.body.as_deref().and_then(stack::section_of);
        let (title, body, marker) =
            match self.render(t, change, prompt, Some(last.head.clone()), section) {
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
        self.bodies.borrow_mut().insert(number, body);
        let pushed = Lease {
            claimed,
            ..change.0.clone()
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
        let mut text = changed_since(last, &marker);
        if let Some(x) = &t.task.tend {
            text.push_str(&format!(
                "\n\nRun again by fanout because {} (tend {} of {}).",
                x.why, x.attempt, x.max
            ));
        }
        if let Err(e) = self.github.comment(number, &text).await {
            notes.push(format!("comment not posted: {e}"));
        }
        let opts = self.labelled();
        let op = pulls::extras(self.github, &pr, Operation::Updated, &opts, &mut notes).await;
        notes.extend(tend_note(t));
        PublishOutcome {
            number: Some(number),
            url: Some(pr.html_url),
            reason: (!notes.is_empty()).then(|| notes.join("; ")),
            pushed_commit: Some(change.0.local.to_string()),
            ..outcome(op, None)
        }
    }

    async fn close(
        &self,
        t: &Task<'_>,
        open: &PullRequest,
        last: &Marker,
        gone: Lease,
    ) -> PublishOutcome {
        let number = open.number;
        let failed = |why: String| PublishOutcome {
            number: Some(number),
            ..outcome(Operation::Failed, Some(why))
        };
        let text = format!(
            "Closed by fanout: run `{}` found nothing to change for this task against the base `{}`, so this change is no longer needed. The branch `{}` is deleted.",
            self.p.report.run_id,
            short(&self.p.report.plan.base.commit),
            t.branch
        );
        if let Err(e) = self.github.comment(number, &text).await {
            return failed(e.to_string());
        }
        // The marker says fanout closed it: a later change opens a new one.
        let closed = Marker {
            stale: true,
            ..last.clone()
        };
        let body = open.body.as_deref().unwrap_or_default();
        let body = stable::with_marker(stable::without_marker(body), &closed);
        let pr = self.github.close_with_body(number, &body).await;
        let pr = match pr {
            Ok(pr) => pr,
            Err(e) => return failed(e.to_string()),
        };
        let gone = self.push(gone).await;
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

    /// The body of open pull request `number` as fanout last wrote or read it.
    fn body_of(&self, number: u64, known: &Known) -> Option<String> {
        if let Some(b) = self.bodies.borrow().get(&number) {
            return Some(b.clone());
        }
        known
            .pulls
            .iter()
            .find(|(p, _)| p.number == number)
            .and_then(|(p, _)| p.body.clone())
    }

    /// Replace open pull request `number`'s body, noted for the phases after.
    async fn rewrite(&self, number: u64, body: &str) -> Result<(), String> {
        self.github
            .set_pull_body(number, body)
            .await
            .map_err(|e| e.to_string())?;
        self.bodies.borrow_mut().insert(number, body.to_owned());
        Ok(())
    }

    /// Write each stack's section at the top of its pull requests' bodies (and take
    /// it out of those no longer stacked), where it differs from what they say.
    async fn link_stacks(&self, done: &mut [(Step<'_>, PublishOutcome)], bases: &Bases) {
        let members: Vec<Member> = done
            .iter()
            .filter_map(|(s, o)| {
                let number = open_number(o)?;
                Some(Member {
                    key: s.t.key.clone(),
                    branch: s.t.branch.clone(),
                    number: Some(number),
                    base: bases.base_for(&s.t.key, &self.base).to_owned(),
                })
            })
            .collect();
        let stacks = stack::stacks(&members, &bases.edges);
        for (s, o) in done.iter_mut() {
            let Some(number) = open_number(o) else {
                continue;
            };
            let mine = stacks.iter().find(|st| st.iter().any(|m| m.key == s.t.key));
            let notes = bases.notes.get(&s.t.key).cloned().unwrap_or_default();
            let section = stack::section(mine.map_or(&[][..], Vec::as_slice), &s.t.key, &notes);
            let Some(body) = self.body_of(number, &s.known) else {
                continue;
            };
            let want = stack::with_section(&body, section.as_deref());
            if want.trim() == body.trim() {
                continue;
            }
            if let Err(e) = self.rewrite(number, &want).await {
                o.reason = join_notes(o.reason.take(), Some(format!("stack not linked: {e}")));
            }
        }
    }

    /// A tended task whose pull request was not rewritten tonight (the same change
    /// again, or its worker failed) still counts the tend: its marker says so, and a
    /// comment says how it went, so that tending ends after `tend.max_attempts`.
    async fn count_tends(&self, done: &mut [(Step<'_>, PublishOutcome)]) {
        for (s, o) in done.iter_mut() {
            let Some(tend) = &s.t.task.tend else { continue };
            if matches!(o.operation, Operation::Created | Operation::Updated) {
                continue;
            }
            let Some(number) = open_number(o) else {
                continue;
            };
            let Some(body) = self.body_of(number, &s.known) else {
                continue;
            };
            let Some(m) = Marker::parse(&body).filter(|m| m.tends < tend.attempt) else {
                continue;
            };
            let counted = Marker {
                tends: tend.attempt,
                ..m
            };
            let how = match o.operation {
                Operation::Unchanged => "tonight's run made the same change again".to_owned(),
                _ => format!(
                    "tonight's run published nothing ({})",
                    o.reason.as_deref().unwrap_or("no reason given")
                ),
            };
            let text = format!(
                "Run again by fanout because {} (tend {} of {}): {how}.",
                tend.why, tend.attempt, tend.max
            );
            let new = stable::with_marker(stable::without_marker(&body), &counted);
            let done = match self.rewrite(number, &new).await {
                Ok(()) => self
                    .github
                    .comment(number, &text)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            let note = match done {
                Ok(()) => tend_note(&s.t),
                Err(e) => Some(format!("the tend was not counted: {e}")),
            };
            o.reason = join_notes(o.reason.take(), note);
        }
    }
}

/// A pull request whose base changes tonight: `number`, task `task`'s, from one
/// branch to another.
struct Retarget {
    number: u64,
    task: String,
    from: String,
    to: String,
}

/// The deletion of a task's branch at a tip fanout pushed (any its marked pull
/// requests claim), on behalf of the run that marker `m` names.
fn deletion(t: &Task<'_>, known: &Known, m: &Marker) -> Lease {
    let owner = super::push::Owner {
        run_id: m.run.clone(),
        worker: Some(t.r.worker_id),
    };
    Lease::deletion(&t.branch, known.claimed(), owner)
}

/// When the task's last pull request was merged: its number and the deletion of
/// its branch (the next change starts fresh).
fn merged(t: &Task<'_>, known: &Known) -> Option<(u64, Lease)> {
    let (p, m) = known.pulls.first()?;
    p.merged_at.as_ref()?;
    Some((p.number, deletion(t, known, m)))
}

/// The number of the pull request `o` leaves open, if it leaves one.
fn open_number(o: &PublishOutcome) -> Option<u64> {
    match o.operation {
        Operation::Created
        | Operation::Updated
        | Operation::Unchanged
        | Operation::Skipped
        | Operation::Failed => o.number,
        _ => None,
    }
}

/// A pull request's body: the stack section on top, the rendered body, `Fixes #N`
/// for an issue's task, the marker last.
fn compose(body: &str, section: Option<&str>, task: &crate::plan::Task, marker: &Marker) -> String {
    let mut text = stack::with_section(body, section);
    if let Some(issue) = &task.issue {
        text.push_str(&format!("\n\nFixes #{}", issue.number));
    }
    stable::with_marker(&text, marker)
}

/// What the outcome says of a tended task.
fn tend_note(t: &Task<'_>) -> Option<String> {
    t.task
        .tend
        .as_ref()
        .map(|x| format!("tend {} of {}: {}", x.attempt, x.max, x.why))
}

fn join_notes(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
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
    use crate::publish::github::{BranchRef, Label, RepoRef};
    use crate::publish::push::Owner;

    fn oid(c: char) -> Oid {
        c.to_string().repeat(40).parse().unwrap()
    }

    fn marker(tree: char, prompt: &str) -> Marker {
        Marker {
            prompt: prompt.into(),
            run: "r1".into(),
            ..Marker::new(
                "docs",
                "1".repeat(40),
                "b".repeat(40),
                tree.to_string().repeat(40),
            )
        }
    }

    fn pull(number: u64, state: &str, merged: bool, m: &Marker, label: bool) -> PullRequest {
        let r = |b: &str| BranchRef {
            branch: b.into(),
            sha: "0".repeat(40),
            repo: Some(RepoRef { id: 7 }),
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
            mergeable: None,
            mergeable_state: None,
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
