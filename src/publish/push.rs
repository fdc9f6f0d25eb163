//! Pushing worker branches where [`super::target::push_to`] decided, trusting nothing
//! on disk an agent could have written:
//! - the lease comes from the remote, asked at push time: a branch is written when the
//!   remote has none, when its tip is work after the run's base that the commit pushed
//!   contains (a fast-forward), or when its tip is a commit of this very worker (its
//!   `Fanout-Run:`/`Fanout-Worker:` trailers), or when it is a commit a marked pull
//!   request of this task says fanout pushed (the lease's `claimed` tips, from
//!   [`super::stable`]) — a branch someone else moved is never overwritten, and a
//!   branch is deleted only at a claimed tip; the lease is checked again inside the push itself (libgit2's push
//!   negotiation, git's `--force-with-lease`), so a change between the look and the
//!   push is caught too;
//! - the URL is the one given: libgit2 pushes through an anonymous remote (no
//!   `remote.<name>.*` settings) and the push is refused when the repository's
//!   configuration rewrites that URL (`url.<base>.insteadOf`/`pushInsteadOf`); over
//!   http(s) libgit2 speaks through fanout's own transport ([`super::smart_http`]),
//!   which is given the token for requests to exactly that URL, for this push only;
//! - over ssh, the hardened git CLI ([`crate::git`]) pushes with the user's own ssh
//!   setup, and no token.

use std::collections::BTreeMap;

use git2::{Direction, Oid, PushOptions, RemoteCallbacks, Repository};

use super::target::PushTo;

/// Whose branch it is: the commits fanout made for it carry these trailers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The run.
    pub run_id: String,
    /// The worker; `None` for the run's integration branch.
    pub worker: Option<u32>,
}

impl Owner {
    /// Whether `message` (a commit message) carries this owner's trailers.
    pub fn made(&self, message: &str) -> bool {
        let has = |l: &str| message.lines().any(|m| m.trim_end() == l);
        let second = match self.worker {
            Some(id) => format!("Fanout-Worker: {id}"),
            None => "Fanout-Integration: true".to_owned(),
        };
        has(&format!("Fanout-Run: {}", self.run_id)) && has(&second)
    }
}

/// One branch to push.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    /// Branch name.
    pub branch: String,
    /// The local commit to publish.
    pub local: Oid,
    /// The run's base commit (`local` descends from it).
    pub base: Oid,
    /// Whose branch it is.
    pub owner: Owner,
    /// Remote tips fanout may replace because its marked pull request says it pushed
    /// them (stable branches); empty for per-run branches.
    pub claimed: Vec<Oid>,
    /// Delete the remote branch (only at a claimed tip) instead of pushing `local`.
    pub delete: bool,
}

impl Lease {
    /// Delete `branch` when the remote's tip is one of `claimed`.
    pub fn deletion(branch: &str, claimed: Vec<Oid>, owner: Owner) -> Lease {
        Lease {
            branch: branch.to_owned(),
            local: Oid::ZERO_SHA1,
            base: Oid::ZERO_SHA1,
            owner,
            claimed,
            delete: true,
        }
    }
}

/// What happened to one branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushResult {
    /// The remote now has the local commit.
    Pushed,
    /// The remote already had it.
    UpToDate,
    /// Not pushed, and why.
    Refused(String),
}

/// Push `leases` to `to` in one push; an error says why nothing was pushed.
pub fn push(
    repo: &Repository,
    to: &PushTo,
    token: Option<&str>,
    leases: &[Lease],
) -> Result<BTreeMap<String, PushResult>, String> {
    if leases.is_empty() {
        return Ok(BTreeMap::new());
    }
    match to {
        PushTo::Https(url) => {
            super::smart_http::register()?;
            super::smart_http::with_token(url, token, || with_libgit2(repo, url, leases))
        }
        PushTo::Local(path) => with_libgit2(repo, &path.to_string_lossy(), leases),
        PushTo::Ssh(url) => with_git(repo, url, leases),
    }
}

/// What a push would do to one branch: decided as [`push`] decides, from what the
/// remote has now, without pushing (`publish --dry-run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WouldPush {
    /// Write the branch (delete it, for a deletion), replacing the remote's tip
    /// `from` (`None`: the remote has no such branch).
    Write {
        /// The remote's tip now.
        from: Option<Oid>,
    },
    /// No push: the remote already has it ([`PushResult::UpToDate`]), or it would be
    /// refused ([`PushResult::Refused`]), and why.
    Not(PushResult),
}

/// What pushing `leases` to `to` would do, by branch: the remote's branches are read
/// (a listing, never a write) and each lease decided as [`push`] decides.
pub fn look(
    repo: &Repository,
    to: &PushTo,
    token: Option<&str>,
    leases: &[Lease],
) -> Result<BTreeMap<String, WouldPush>, String> {
    let current = match to {
        PushTo::Https(url) => {
            super::smart_http::register()?;
            super::smart_http::with_token(url, token, || {
                list_libgit2(&mut remote_at(repo, url)?, url)
            })?
        }
        PushTo::Local(path) => {
            let url = path.to_string_lossy();
            list_libgit2(&mut remote_at(repo, &url)?, &url)?
        }
        PushTo::Ssh(url) => {
            let dir = repo.workdir().unwrap_or_else(|| repo.path()).to_owned();
            refuse_rewrites(&dir, url)?;
            list_git(&dir, url)?
        }
    };
    let (results, to_push) = decide(repo, leases, &current);
    let mut out: BTreeMap<String, WouldPush> = results
        .into_iter()
        .map(|(b, r)| (b, WouldPush::Not(r)))
        .collect();
    for (name, (_, seen)) in to_push {
        out.insert(branch_of(&name), WouldPush::Write { from: seen });
    }
    Ok(out)
}

/// A remote's branches: ref name → tip.
type Heads = BTreeMap<String, Oid>;

/// Branches to push: ref name → (the commit, the remote's tip seen before).
type ToPush = BTreeMap<String, (Oid, Option<Oid>)>;

/// Given what the remote has (`current`), what becomes of each lease.
fn decide(
    repo: &Repository,
    leases: &[Lease],
    current: &Heads,
) -> (BTreeMap<String, PushResult>, ToPush) {
    let mut results = BTreeMap::new();
    let mut to_push = ToPush::new();
    for lease in leases {
        let name = format!("refs/heads/{}", lease.branch);
        if lease.delete {
            match current.get(&name) {
                None => {
                    results.insert(lease.branch.clone(), PushResult::UpToDate);
                }
                Some(oid) if lease.claimed.contains(oid) => {
                    to_push.insert(name, (Oid::ZERO_SHA1, Some(*oid)));
                }
                Some(oid) => {
                    results.insert(
                        lease.branch.clone(),
                        PushResult::Refused(format!(
                            "the remote branch is at {}, which fanout did not push; not deleted",
                            &oid.to_string()[..7]
                        )),
                    );
                }
            }
            continue;
        }
        match current.get(&name) {
            Some(oid) if *oid == lease.local => {
                results.insert(lease.branch.clone(), PushResult::UpToDate);
            }
            Some(oid) if !ours(repo, *oid, lease) => {
                results.insert(
                    lease.branch.clone(),
                    PushResult::Refused(format!(
                        "the remote branch is at {}, which fanout did not push; not overwritten",
                        &oid.to_string()[..7]
                    )),
                );
            }
            seen => {
                to_push.insert(name, (lease.local, seen.copied()));
            }
        }
    }
    (results, to_push)
}

/// The remote's tip `tip` may be replaced by the lease's commit: it is a commit of
/// this worker, or work on top of the run's base that the lease's commit contains
/// (a fast-forward; the base itself, or anything not built on it, is someone else's).
fn ours(repo: &Repository, tip: Oid, lease: &Lease) -> bool {
    if lease.claimed.contains(&tip) {
        return true;
    }
    let after_base =
        tip != lease.base && repo.graph_descendant_of(tip, lease.base).unwrap_or(false);
    after_base && repo.graph_descendant_of(lease.local, tip).unwrap_or(false)
        || repo.find_commit(tip).is_ok_and(|c| {
            lease
                .owner
                .made(&String::from_utf8_lossy(c.message_bytes()))
        })
}

/// An anonymous remote at exactly `url`: refused when the repository's configuration
/// would rewrite it (`insteadOf`, `pushInsteadOf`).
fn remote_at<'r>(repo: &'r Repository, url: &str) -> Result<git2::Remote<'r>, String> {
    let remote = repo
        .remote_anonymous(url)
        .map_err(|e| format!("push to {url}: {}", e.message()))?;
    let fetch = remote.url().ok();
    let push = remote.pushurl().ok().flatten();
    if fetch != Some(url) || push.is_some_and(|p| p != url) {
        return Err(format!(
            "the repository's git configuration rewrites {url} (to {}): not pushing; remove the url.<base>.insteadOf / pushInsteadOf entry",
            push.or(fetch).unwrap_or("?")
        ));
    }
    Ok(remote)
}

fn with_libgit2(
    repo: &Repository,
    url: &str,
    leases: &[Lease],
) -> Result<BTreeMap<String, PushResult>, String> {
    let mut remote = remote_at(repo, url)?;
    // Look: what does the remote have now?
    let current = list_libgit2(&mut remote, url)?;
    let (mut results, to_push) = decide(repo, leases, &current);
    if to_push.is_empty() {
        return Ok(results);
    }
    let refspecs: Vec<String> = to_push.iter().map(refspec).collect();
    let rejected = std::cell::RefCell::new(BTreeMap::<String, String>::new());
    let lease_broken = std::cell::RefCell::new(None::<String>);
    let pushed = {
        let mut cb = RemoteCallbacks::new();
        cb.push_negotiation(|updates| {
            for u in updates {
                let Ok(name) = u.dst_refname() else { continue };
                if let Some((_, seen)) = to_push.get(name) {
                    let now = (!u.src().is_zero()).then(|| u.src());
                    if now != *seen {
                        *lease_broken.borrow_mut() = Some(name.to_owned());
                        return Err(git2::Error::from_str(&format!(
                            "{name} changed on the remote while pushing"
                        )));
                    }
                }
            }
            Ok(())
        });
        cb.push_update_reference(|name, status| {
            if let Some(msg) = status {
                rejected
                    .borrow_mut()
                    .insert(name.to_owned(), msg.to_owned());
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(cb);
        remote.push(&refspecs, Some(&mut opts))
    };
    if let Err(e) = pushed {
        let why = match lease_broken.borrow().as_deref() {
            Some(name) => format!("{name} changed on the remote while pushing; not overwritten"),
            None => format!("push failed: {}", e.message()),
        };
        for name in to_push.keys() {
            results.insert(branch_of(name), PushResult::Refused(why.clone()));
        }
        return Ok(results);
    }
    let rejected = rejected.into_inner();
    for name in to_push.keys() {
        let r = match rejected.get(name) {
            Some(msg) => PushResult::Refused(format!("the remote rejected it: {msg}")),
            None => PushResult::Pushed,
        };
        results.insert(branch_of(name), r);
    }
    Ok(results)
}

/// The remote's branches, as a push sees them (`GET info/refs` of `git-receive-pack`
/// over http(s): a read).
fn list_libgit2(remote: &mut git2::Remote<'_>, url: &str) -> Result<Heads, String> {
    let failed = |e: git2::Error| format!("push to {url} failed: {}", e.message());
    let conn = remote
        .connect_auth(Direction::Push, None, None)
        .map_err(failed)?;
    Ok(conn
        .list()
        .map_err(failed)?
        .iter()
        .filter(|h| h.name().starts_with("refs/heads/"))
        .map(|h| (h.name().to_owned(), h.oid()))
        .collect())
}

/// `+<commit>:<ref>`, or `:<ref>` to delete it.
fn refspec((name, (oid, _)): (&String, &(Oid, Option<Oid>))) -> String {
    if oid.is_zero() {
        format!(":{name}")
    } else {
        format!("+{oid}:{name}")
    }
}

fn branch_of(refname: &str) -> String {
    refname.trim_start_matches("refs/heads/").to_owned()
}

/// The user's ssh remote, with the hardened git CLI: `ls-remote` for the lease, then
/// one `push --force-with-lease=<ref>:<seen> +<commit>:<ref>…`.
fn with_git(
    repo: &Repository,
    url: &str,
    leases: &[Lease],
) -> Result<BTreeMap<String, PushResult>, String> {
    let dir = repo.workdir().unwrap_or_else(|| repo.path()).to_owned();
    refuse_rewrites(&dir, url)?;
    let git = || crate::git::Git::new(&dir);
    let current = list_git(&dir, url)?;
    let (mut results, to_push) = decide(repo, leases, &current);
    if to_push.is_empty() {
        return Ok(results);
    }
    let mut args: Vec<String> = vec!["push".into(), "--porcelain".into()];
    for (name, (_, seen)) in &to_push {
        let seen = seen.map(|o| o.to_string()).unwrap_or_default();
        args.push(format!("--force-with-lease={name}:{seen}"));
    }
    args.push(url.to_owned());
    args.extend(to_push.iter().map(refspec));
    let inv = git()
        .args(&args)
        .invocation()
        .map_err(|e| format!("push to {url} failed: {e}"))?;
    let out = inv
        .command()
        .output()
        .map_err(|e| format!("push to {url} failed: {e}"))?;
    let porcelain = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in to_push.keys() {
        results.insert(branch_of(name), porcelain_result(&porcelain, name, &stderr));
    }
    Ok(results)
}

/// The remote's branches, with the hardened git CLI's `ls-remote` (in `dir`).
fn list_git(dir: &std::path::Path, url: &str) -> Result<Heads, String> {
    let listed = crate::git::Git::new(dir)
        .args(["ls-remote", "--heads", url])
        .output()
        .map_err(|e| format!("push to {url} failed: {e}"))?;
    Ok(listed
        .lines()
        .filter_map(|l| {
            let (oid, name) = l.split_once('\t')?;
            Some((name.trim().to_owned(), oid.trim().parse().ok()?))
        })
        .collect())
}

/// What `git push --porcelain` said of `refname`: `<flag>\t<from>:<to>\t<summary>`.
fn porcelain_result(out: &str, refname: &str, stderr: &str) -> PushResult {
    let line = out.lines().find(|l| {
        l.split('\t')
            .nth(1)
            .and_then(|spec| spec.split_once(':'))
            .is_some_and(|(_, to)| to == refname)
    });
    match line.and_then(|l| l.chars().next()) {
        Some(' ' | '+' | '*' | '-') => PushResult::Pushed,
        Some('=') => PushResult::UpToDate,
        Some(_) => {
            let why = line
                .and_then(|l| l.split('\t').nth(2))
                .unwrap_or("rejected");
            if why.contains("stale info") {
                PushResult::Refused(format!(
                    "{refname} changed on the remote while pushing; not overwritten"
                ))
            } else {
                PushResult::Refused(format!("the remote rejected it: {why}"))
            }
        }
        None => PushResult::Refused(format!(
            "push failed: {}",
            stderr.lines().last().unwrap_or("git push printed nothing")
        )),
    }
}

/// Refuse when the configuration git reads in `dir` would rewrite `url` for a push.
fn refuse_rewrites(dir: &std::path::Path, url: &str) -> Result<(), String> {
    let entries = crate::git::list_config(dir).map_err(|e| e.to_string())?;
    let rewrite = entries.iter().find(|e| {
        e.key.starts_with("url.")
            && (e.key.ends_with(".insteadof") || e.key.ends_with(".pushinsteadof"))
            && !e.value.is_empty()
            && url.starts_with(&e.value)
    });
    match rewrite {
        Some(e) => Err(format!(
            "the git configuration rewrites {url} ({} = {}): not pushing; remove that entry",
            e.key, e.value
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_say_whose_commit_it_is() {
        let w = Owner {
            run_id: "r1".into(),
            worker: Some(2),
        };
        assert!(w.made("fanout: x\n\nTask: t\n\nFanout-Run: r1\nFanout-Worker: 2\n"));
        assert!(!w.made("fanout: x\n\nFanout-Run: r1\nFanout-Worker: 3\n"));
        assert!(!w.made("fanout: x\n\nFanout-Run: r2\nFanout-Worker: 2\n"));
        assert!(!w.made("x\n\nTask: a\n  Fanout-Run: r1\n  Fanout-Worker: 2\n"));
        let it = Owner {
            run_id: "r1".into(),
            worker: None,
        };
        assert!(it.made("fanout: integrate\n\nFanout-Run: r1\nFanout-Integration: true\n"));
        assert!(!it.made("fanout: x\n\nFanout-Run: r1\nFanout-Worker: 2\n"));
    }

    #[test]
    fn porcelain_lines_map_onto_results() {
        let out = "To host:o/r.git\n*\tabc:refs/heads/a\t[new branch]\n+\tdef:refs/heads/b\tabc...def (forced update)\n!\t111:refs/heads/c\t[rejected] (stale info)\n=\t222:refs/heads/d\t[up to date]\nDone\n";
        assert_eq!(
            porcelain_result(out, "refs/heads/a", ""),
            PushResult::Pushed
        );
        assert_eq!(
            porcelain_result(out, "refs/heads/b", ""),
            PushResult::Pushed
        );
        assert!(
            matches!(porcelain_result(out, "refs/heads/c", ""), PushResult::Refused(w) if w.contains("changed on the remote"))
        );
        assert_eq!(
            porcelain_result(out, "refs/heads/d", ""),
            PushResult::UpToDate
        );
        assert!(
            matches!(porcelain_result(out, "refs/heads/e", "fatal: no route\n"), PushResult::Refused(w) if w.contains("no route"))
        );
    }
}
