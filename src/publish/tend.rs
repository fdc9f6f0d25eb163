//! Before a night's plan: what GitHub says about tonight's tasks ([`NightInputs`]),
//! read — and, for a pull request git can bring up to date or one fanout gives up
//! on, acted on — with the publishing credentials, before any agent runs.
//!
//! - **Issues** (`tasks_from: {issues: {label}}`): each open issue with the label, its
//!   title and body bounded, its rank among the priority labels.
//! - **Tending** (`tend.max_attempts`, stable branches): each of fanout's open pull
//!   requests of tonight's tasks. One that conflicts with its base, or is behind it,
//!   is rebased onto tonight's base when git can (pushed at a tip fanout pushed, its
//!   marker and a comment saying so: its task does not run tonight); otherwise, and
//!   for one whose checks failed, its task runs again with the conflicting paths, or
//!   the failed checks' names, output and the end of their jobs' logs, quoted. A pull
//!   request tended `max_attempts` times that still needs it is labelled
//!   [`STUCK`] with a comment and left to people (its task does not run); taking the
//!   label off starts tending over.
//!
//! Everything read here that people or agents wrote is untrusted: bounded, masked,
//! and quoted by the plan ([`crate::plan::night`]).

use git2::Oid;

use super::github::reads::CheckRun;
use super::github::{GitHub, PullRequest};
use super::push::{Lease, Owner, PushResult};
use super::stable::{self, Marker, STUCK};
use super::target::PushTo;
use crate::plan::night::{IssueTask, NightInputs, Settled, Tend, issue_key, one_line};
use crate::util::short;

/// Read tonight's inputs from GitHub (see the module docs) with the publishing
/// target's credentials, for the tasks `keys`, tonight's base being `base`: the
/// target resolved and checked as publishing does, the pull requests based on the
/// publishing base branch (`--pr-base`, `publish.base`, else the run's).
pub fn gather_night(
    repo: &crate::repo::UserRepo,
    file: &crate::config::ConfigFile,
    flags: &super::report::PublishFlags,
    record: Option<&crate::repo::PushRecord>,
    keys: &[String],
    base: &crate::repo::Base,
    branch_prefix: &str,
) -> Result<NightInputs, crate::exit::Failure> {
    use crate::exit::Failure;
    use secrecy::ExposeSecret;
    let prepared = super::report::PublishContext::new(repo, file, flags, record)?;
    let branch = prepared
        .opts
        .base
        .clone()
        .or_else(|| base.branch.clone())
        .ok_or_else(|| {
            Failure::Usage("tending: the base is not a branch; pass --pr-base BRANCH".into())
        })?;
    let commit: Oid = base
        .commit
        .parse()
        .map_err(|_| Failure::Fatal(format!("the base {} is not a commit", base.commit)))?;
    let issues = file.tasks_from.as_ref().and_then(|t| t.issues.as_ref());
    let settings = TendSettings {
        max_attempts: file.tend.max_attempts(),
        issue_label: issues.map(|i| i.label.clone()),
        priority: issues.map(|i| i.priority.clone()).unwrap_or_default(),
        identity: file.commit_identity(),
        branch_prefix: branch_prefix.to_owned(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Fatal(format!("tokio runtime: {e}")))?;
    runtime.block_on(async {
        let scope = super::github::auth::Scope {
            issues: true,
            ci: true,
        };
        let (github, token) = prepared.api(scope).connect().await?;
        let gather = Gather {
            github: &github,
            repo_dir: &repo.workdir,
            push: &prepared.opts.push,
            token: Some(token.expose_secret()),
            base: NightBase { branch, commit },
            settings,
        };
        let night = gather.night(keys).await;
        match github.stopped() {
            Some(e) => Err(Failure::Fatal(format!(
                "reading GitHub before the night: {e}"
            ))),
            None => Ok(night),
        }
    })
}

/// Most characters of an issue's body kept.
const ISSUE_BODY_LIMIT: usize = 20_000;
/// Most failed checks described.
const MAX_CHECKS: usize = 5;
/// Most lines of a job's log quoted, from its end.
const LOG_LINES: usize = 60;
/// Most characters of one check's description (output and log).
const CHECK_LIMIT: usize = 4_000;

/// How to tend tonight.
#[derive(Debug, Clone)]
pub struct TendSettings {
    /// `tend.max_attempts` (0: no tending).
    pub max_attempts: u32,
    /// `tasks_from.issues.label`.
    pub issue_label: Option<String>,
    /// `tasks_from.issues.priority`.
    pub priority: Vec<String>,
    /// Who commits a rebase.
    pub identity: (String, String),
    /// The branch prefix: fanout's pull requests have their head at `<prefix>/<task>`.
    pub branch_prefix: String,
}

/// Where tonight starts: the base branch and its commit.
#[derive(Debug, Clone)]
pub struct NightBase {
    /// The base branch (pull requests target it).
    pub branch: String,
    /// Its commit tonight.
    pub commit: Oid,
}

/// What the gathering works with.
pub struct Gather<'a> {
    /// The GitHub client.
    pub github: &'a GitHub,
    /// The repository (a rebase is made and pushed from it).
    pub repo_dir: &'a std::path::Path,
    /// Where to push, and fetch from.
    pub push: &'a PushTo,
    /// The token to push with.
    pub token: Option<&'a str>,
    /// Tonight's base.
    pub base: NightBase,
    /// The settings.
    pub settings: TendSettings,
}

impl Gather<'_> {
    /// Read the issues; close the pull requests of issues that stopped their task;
    /// tend the open pull requests of `keys` (tonight's tasks) and of the issues'.
    pub async fn night(&self, keys: &[String]) -> NightInputs {
        let mut night = NightInputs::default();
        let mut issues_read = false;
        if let Some(label) = &self.settings.issue_label {
            match self.issues(label).await {
                Ok(i) => {
                    night.issues = i;
                    issues_read = true;
                }
                Err(e) => night
                    .notes
                    .push(format!("issues labelled `{label}` not read: {e}")),
            }
        }
        let tending = self.settings.max_attempts > 0;
        if !tending && !issues_read {
            return night;
        }
        let mut keys = keys.to_vec();
        keys.extend(night.issues.iter().map(|i| issue_key(i.number)));
        let open = match self.github.list_open_pulls().await {
            Ok(p) => p,
            Err(e) => {
                night
                    .notes
                    .push(format!("open pull requests not read: {e}"));
                return night;
            }
        };
        for p in open {
            let Some(m) = p.body.as_deref().and_then(Marker::parse) else {
                continue;
            };
            if !stable::is_fanouts(&p, &m, &self.settings.branch_prefix) {
                continue;
            }
            match m.issue {
                Some(n) if issues_read && !night.issues.iter().any(|i| i.number == n) => {
                    self.stop(&p, &m, n, &mut night).await;
                }
                _ if tending && keys.contains(&m.task) => self.tend(&p, &m, &mut night).await,
                _ => {}
            }
        }
        night
    }

    /// Issue `n` is not among the open ones with the label: when it is closed or no
    /// longer labelled (read again, to be sure), its task stops — its pull request `p`
    /// is closed with a comment saying why (the marker saying fanout closed it: should
    /// the issue come back, so does a pull request) and its branch deleted.
    async fn stop(&self, p: &PullRequest, m: &Marker, n: u64, night: &mut NightInputs) {
        let label = self.settings.issue_label.as_deref().unwrap_or_default();
        let why = match self.github.issue_state(n).await {
            Ok(s) if !s.open => format!("issue #{n} was closed"),
            Ok(s) if !s.labels.iter().any(|l| l == label) => {
                format!("issue #{n} is no longer labelled `{label}`")
            }
            Ok(_) => return,
            Err(e) => {
                night
                    .notes
                    .push(format!("#{}: issue #{n} not read: {e}", p.number));
                return;
            }
        };
        let text = format!(
            "Closed by fanout: {why}, so its task stops. The branch `{}` is deleted.",
            p.head.branch
        );
        let closed = Marker {
            stale: true,
            ..m.clone()
        };
        let body = stable::with_marker(
            stable::without_marker(p.body.as_deref().unwrap_or_default()),
            &closed,
        );
        let done = match self.github.comment(p.number, &text).await {
            Ok(()) => self.github.close_with_body(p.number, &body).await,
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            night
                .notes
                .push(format!("#{} not closed ({why}): {e}", p.number));
            return;
        }
        let gone = Lease::deletion(&p.head.branch, claimed(m), owner(m));
        let kept = match self.push_lease(gone).await {
            Ok(PushResult::Refused(why)) | Err(why) => format!("; branch kept: {why}"),
            Ok(_) => String::new(),
        };
        night.settled.push(Settled {
            key: m.task.clone(),
            pr: p.number,
            what: format!("closed: {why}{kept}"),
        });
    }

    /// Push one lease from the repository.
    async fn push_lease(&self, lease: Lease) -> Result<PushResult, String> {
        let (dir, push, token) = (
            self.repo_dir.to_owned(),
            self.push.clone(),
            self.token.map(str::to_owned),
        );
        let branch = lease.branch.clone();
        let pushed = tokio::task::spawn_blocking(move || {
            let repo = git2::Repository::open(&dir).map_err(|e| e.message().to_owned())?;
            super::push::push(&repo, &push, token.as_deref(), std::slice::from_ref(&lease))
        })
        .await
        .map_err(|_| "the push failed".to_owned())??;
        Ok(pushed
            .into_values()
            .next()
            .unwrap_or(PushResult::Refused(format!("{branch} not pushed"))))
    }

    /// Open issues with `label`, most recent title and body, ranked by priority.
    async fn issues(&self, label: &str) -> Result<Vec<IssueTask>, super::github::ApiError> {
        let found = self.github.list_labelled_issues(label).await?;
        Ok(found
            .into_iter()
            .map(|i| IssueTask {
                number: i.number,
                title: one_line(&i.title, 300),
                body: i
                    .body
                    .unwrap_or_default()
                    .chars()
                    .take(ISSUE_BODY_LIMIT)
                    .collect(),
                priority: self
                    .settings
                    .priority
                    .iter()
                    .position(|p| i.labels.iter().any(|l| &l.name == p)),
            })
            .collect())
    }

    /// Tend pull request `p` (marked `m`), noting what to do in `night`.
    async fn tend(&self, p: &PullRequest, m: &Marker, night: &mut NightInputs) {
        let stuck = p.labels.iter().any(|l| l.name == STUCK);
        if stuck {
            night.settled.push(Settled {
                key: m.task.clone(),
                pr: p.number,
                what: format!("left to people (labelled `{STUCK}`)"),
            });
            return;
        }
        // A person took the label off: tending starts over.
        let done = if m.left { 0 } else { m.tends };
        let need = match self.need(p).await {
            Ok(Some(n)) => n,
            Ok(None) => return,
            Err(e) => {
                night.notes.push(format!("#{} not tended: {e}", p.number));
                return;
            }
        };
        let max = self.settings.max_attempts;
        if done >= max {
            night
                .settled
                .push(self.give_up(p, m, done, &need.why).await);
            return;
        }
        let mut need = need;
        if need.rebase {
            match self.rebase(p, m, done + 1).await {
                Ok(Rebased::Done(settled)) => {
                    night.settled.push(settled);
                    return;
                }
                Ok(Rebased::Conflict(paths)) if !paths.is_empty() => {
                    let shown: Vec<String> = paths.iter().take(20).map(|f| code(f, 200)).collect();
                    need.why.push_str(&format!(" in {}", shown.join(", ")));
                    need.detail.push_str(&format!(
                        "\nThese files conflict: {}. Make the change again on `{}` as it is now.",
                        shown.join(", "),
                        self.base.branch
                    ));
                }
                Ok(Rebased::Conflict(_)) => {}
                Err(e) => night.notes.push(format!("#{} not rebased: {e}", p.number)),
            }
        }
        night.tend.push(Tend {
            key: m.task.clone(),
            pr: p.number,
            attempt: done + 1,
            max,
            why: need.why,
            detail: need.detail,
        });
    }
}

/// What a rebase came to.
enum Rebased {
    /// Pushed: the pull request is settled tonight.
    Done(Settled),
    /// git could not replay the change (these paths conflict; none: not tried).
    Conflict(Vec<String>),
}

/// What an open pull request needs.
struct Need {
    /// Whether a rebase may do (a conflict, or behind its base).
    rebase: bool,
    /// Why, in a phrase.
    why: String,
    /// What the agent is shown.
    detail: String,
}

impl Gather<'_> {
    /// Whether `p` needs tending, and why: a conflict with its base (or behind it),
    /// else failed checks.
    async fn need(&self, p: &PullRequest) -> Result<Option<Need>, super::github::ApiError> {
        let state = self.github.pull_state(p.number).await?;
        let base = &state.base.branch;
        match (state.mergeable, state.mergeable_state.as_deref()) {
            (Some(false), _) | (_, Some("dirty")) => {
                return Ok(Some(Need {
                    rebase: true,
                    why: format!("it conflicts with `{base}`"),
                    detail: format!(
                        "The change no longer merges into `{base}`: `{base}` moved on since it was made."
                    ),
                }));
            }
            (_, Some("behind")) => {
                return Ok(Some(Need {
                    rebase: true,
                    why: format!("it is behind `{base}`"),
                    detail: format!("The change is behind `{base}`, which moved on."),
                }));
            }
            _ => {}
        }
        let failed: Vec<CheckRun> = self
            .github
            .check_runs(&state.head.sha)
            .await?
            .into_iter()
            .filter(CheckRun::failed)
            .take(MAX_CHECKS)
            .collect();
        if failed.is_empty() {
            return Ok(None);
        }
        let names: Vec<String> = failed.iter().map(|c| code(&c.name, 80)).collect();
        let mut detail = Vec::new();
        for c in &failed {
            detail.push(self.describe(c).await);
        }
        Ok(Some(Need {
            rebase: false,
            why: format!(
                "check{} {} failed",
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
            detail: detail.join("\n\n"),
        }))
    }

    /// A failed check: its name and conclusion, what it said, the end of its job's log.
    async fn describe(&self, c: &CheckRun) -> String {
        let mut text = format!(
            "Check {}: {}",
            code(&c.name, 80),
            c.conclusion.as_deref().unwrap_or("failed")
        );
        for part in [&c.output.title, &c.output.summary, &c.output.text]
            .into_iter()
            .flatten()
        {
            text.push('\n');
            text.push_str(part.trim());
        }
        if c.is_actions_job() {
            match self.github.job_log_tail(c.id).await {
                Ok(Some(log)) => {
                    text.push_str("\nThe end of its job's log:\n");
                    text.push_str(&log_excerpt(&log));
                }
                Ok(None) => {}
                Err(e) => text.push_str(&format!("\n(its job's log could not be read: {e})")),
            }
        }
        let cut: String = text.chars().take(CHECK_LIMIT).collect();
        cut
    }

    /// Label `p` [`STUCK`], say why, mark it left: tending is over for it.
    async fn give_up(&self, p: &PullRequest, m: &Marker, done: u32, why: &str) -> Settled {
        let text = format!(
            "fanout tended this pull request {done} time(s) (`tend.max_attempts`) and it still needs it: {why}. It is left to people now: fanout no longer runs its task. Take the `{STUCK}` label off to let fanout try again."
        );
        let left = Marker {
            left: true,
            ..m.clone()
        };
        let body = stable::with_marker(
            stable::without_marker(p.body.as_deref().unwrap_or_default()),
            &left,
        );
        let mut what = format!("left to people after {done} tends (labelled `{STUCK}`): {why}");
        let labelled = self.github.add_labels(p.number, &[STUCK.to_owned()]).await;
        let commented = self.github.comment(p.number, &text).await;
        let marked = self.github.set_pull_body(p.number, &body).await.map(|_| ());
        if let Some(e) = [labelled, commented, marked]
            .into_iter()
            .find_map(Result::err)
        {
            what.push_str(&format!(" (not all said on GitHub: {e})"));
        }
        Settled {
            key: m.task.clone(),
            pr: p.number,
            what,
        }
    }

    /// Rebase `p` onto tonight's base when git can: fetched, replayed, pushed at a tip
    /// fanout pushed, its marker and a comment saying so. When git cannot (a conflict;
    /// a pull request not on the base branch), the task runs instead.
    async fn rebase(&self, p: &PullRequest, m: &Marker, attempt: u32) -> Result<Rebased, String> {
        if p.base.branch != self.base.branch {
            return Ok(Rebased::Conflict(Vec::new()));
        }
        let (dir, push, token) = (self.repo_dir.to_owned(), self.push.clone(), self.token);
        let token = token.map(str::to_owned);
        let (branch, base, identity) = (
            p.head.branch.clone(),
            self.base.commit,
            self.settings.identity.clone(),
        );
        let old_base: Oid = m.base.parse().map_err(|_| "a bad marker".to_owned())?;
        let made = tokio::task::spawn_blocking(move || {
            let repo = git2::Repository::open(&dir).map_err(|e| e.message().to_owned())?;
            let head = fetch(&repo, &push, token.as_deref(), &branch)?;
            replay(&repo, (old_base, head, base), &branch, &identity)
        })
        .await
        .map_err(|_| "the rebase failed".to_owned())??;
        match made {
            Ok((new, tree)) => self
                .push_rebased(p, m, (new, tree), attempt)
                .await
                .map(Rebased::Done),
            Err(paths) => Ok(Rebased::Conflict(paths)),
        }
    }

    async fn push_rebased(
        &self,
        p: &PullRequest,
        m: &Marker,
        (new, tree): (Oid, Oid),
        attempt: u32,
    ) -> Result<Settled, String> {
        let base = self.base.commit;
        let marker = Marker {
            head: new.to_string(),
            prev: Some(m.head.clone()),
            base: base.to_string(),
            tree: tree.to_string(),
            tends: attempt,
            left: false,
            ..m.clone()
        };
        let body = stable::with_marker(
            stable::without_marker(p.body.as_deref().unwrap_or_default()),
            &marker,
        );
        // The body first: it vouches for the commit about to be pushed.
        self.github
            .set_pull_body(p.number, &body)
            .await
            .map_err(|e| e.to_string())?;
        let lease = Lease {
            branch: p.head.branch.clone(),
            local: new,
            base,
            owner: owner(m),
            claimed: claimed(m),
            delete: false,
        };
        let refused = match self.push_lease(lease).await {
            Ok(PushResult::Refused(why)) | Err(why) => Some(why),
            Ok(_) => None,
        };
        if let Some(why) = refused {
            // Not pushed: the body goes back to what the branch holds.
            let old = p.body.as_deref().unwrap_or_default();
            let _ = self.github.set_pull_body(p.number, old).await;
            return Err(why);
        }
        let onto = format!("`{}` (`{}`)", self.base.branch, short(&base.to_string()));
        let text = format!(
            "Rebased by fanout onto {onto}: this pull request no longer merged into it cleanly, and git could replay its change (tend {attempt} of {}). No agent ran.",
            self.settings.max_attempts
        );
        let _ = self.github.comment(p.number, &text).await;
        Ok(Settled {
            key: m.task.clone(),
            pr: p.number,
            what: format!("rebased onto {onto}"),
        })
    }
}

/// A name from GitHub (a check's, a path) in a code span it cannot close: one line,
/// bounded, masked, its backticks made quotes.
fn code(name: &str, max: usize) -> String {
    format!("`{}`", one_line(name, max).replace('`', "'"))
}

/// The commits a pull request marked `m` says fanout pushed.
fn claimed(m: &Marker) -> Vec<Oid> {
    m.pushed().iter().filter_map(|c| c.parse().ok()).collect()
}

/// Whose branch a marked pull request's is.
fn owner(m: &Marker) -> Owner {
    Owner {
        run_id: m.run.clone(),
        worker: None,
    }
}

/// The last [`LOG_LINES`] meaningful lines of a job's log: Actions' timestamps and
/// group markers dropped.
fn log_excerpt(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(|l| {
            // `2026-01-01T00:00:00.0000000Z message`
            match l.split_once(' ') {
                Some((ts, rest)) if ts.len() > 20 && ts.ends_with('Z') && ts.contains('T') => rest,
                _ => l,
            }
        })
        .filter(|l| {
            !l.trim().is_empty() && !l.starts_with("##[group]") && !l.starts_with("##[endgroup]")
        })
        .collect();
    lines[lines.len().saturating_sub(LOG_LINES)..].join("\n")
}

/// Fetch `branch` from where fanout pushes into a ref of fanout's own; its tip.
fn fetch(
    repo: &git2::Repository,
    from: &PushTo,
    token: Option<&str>,
    branch: &str,
) -> Result<Oid, String> {
    let local = format!("refs/fanout/tend/{branch}");
    let spec = format!("+refs/heads/{branch}:{local}");
    match from {
        PushTo::Ssh(url) => {
            let dir = repo.workdir().unwrap_or_else(|| repo.path()).to_owned();
            crate::git::Git::new(&dir)
                .args(["fetch", "--no-tags", "-q", url, &spec])
                .output()
                .map_err(|e| format!("fetching {branch}: {e}"))?;
        }
        PushTo::Https(url) => {
            super::smart_http::register()?;
            super::smart_http::with_token(url, token, || libgit2_fetch(repo, url, &spec))?;
        }
        PushTo::Local(path) => libgit2_fetch(repo, &path.to_string_lossy(), &spec)?,
    }
    let tip = repo
        .refname_to_id(&local)
        .map_err(|e| format!("fetching {branch}: {}", e.message()))?;
    if let Ok(mut r) = repo.find_reference(&local) {
        let _ = r.delete();
    }
    Ok(tip)
}

fn libgit2_fetch(repo: &git2::Repository, url: &str, spec: &str) -> Result<(), String> {
    let mut remote = repo
        .remote_anonymous(url)
        .map_err(|e| format!("fetch from {url}: {}", e.message()))?;
    if remote.url().ok() != Some(url) {
        return Err(format!(
            "the repository's git configuration rewrites {url}: not fetching"
        ));
    }
    let mut opts = git2::FetchOptions::new();
    opts.download_tags(git2::AutotagOption::None);
    remote
        .fetch(&[spec], Some(&mut opts), None)
        .map_err(|e| format!("fetch from {url}: {}", e.message()))
}

/// Replay `head`'s change (since `old_base`) onto `base`: the new commit and its
/// tree, or the paths that conflict.
fn replay(
    repo: &git2::Repository,
    (old_base, head, base): (Oid, Oid, Oid),
    branch: &str,
    identity: &(String, String),
) -> Result<Result<(Oid, Oid), Vec<String>>, String> {
    let git = |e: git2::Error| format!("rebasing {branch}: {}", e.message());
    let tree = |oid: Oid| repo.find_commit(oid).and_then(|c| c.tree());
    let (ancestor, ours, theirs) = (
        tree(old_base).map_err(git)?,
        tree(base).map_err(git)?,
        tree(head).map_err(git)?,
    );
    let mut index = repo
        .merge_trees(&ancestor, &ours, &theirs, None)
        .map_err(git)?;
    if index.has_conflicts() {
        let mut paths: Vec<String> = index
            .conflicts()
            .map_err(git)?
            .flatten()
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        paths.dedup();
        return Ok(Err(paths));
    }
    let new_tree = index.write_tree_to(repo).map_err(git)?;
    let message = repo
        .find_commit(head)
        .map(|c| String::from_utf8_lossy(c.message_bytes()).into_owned())
        .map_err(git)?;
    let sig = git2::Signature::now(&identity.0, &identity.1).map_err(git)?;
    let parent = repo.find_commit(base).map_err(git)?;
    let t = repo.find_tree(new_tree).map_err(git)?;
    let commit = repo
        .commit(None, &sig, &sig, &message, &t, &[&parent])
        .map_err(git)?;
    Ok(Ok((commit, new_tree)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_log_is_cut_to_its_last_meaningful_lines() {
        let mut log = String::from("2026-01-01T00:00:00.0000000Z ##[group]Run cargo test\n");
        for i in 0..100 {
            log.push_str(&format!("2026-01-01T00:00:01.0000000Z line {i}\n"));
        }
        log.push_str("2026-01-01T00:00:02.0000000Z ##[endgroup]\n\nerror: boom\n");
        let excerpt = log_excerpt(&log);
        let lines: Vec<&str> = excerpt.lines().collect();
        assert_eq!(lines.len(), LOG_LINES);
        assert_eq!(lines.last(), Some(&"error: boom"));
        assert_eq!(lines[0], "line 41");
        assert!(
            !excerpt.contains("##[") && !excerpt.contains("2026-"),
            "{excerpt}"
        );
    }

    #[test]
    fn names_from_github_cannot_close_their_code_span() {
        assert_eq!(code("lint` <b>@everyone", 80), "`lint' <b>@everyone`");
        assert_eq!(code("a\nb", 80), "`a`");
    }
}
