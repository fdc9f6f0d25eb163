//! Pushing worker branches, with `--force-with-lease` semantics: a branch is only
//! written when the remote's copy is absent, already ours, or exactly what fanout
//! pushed last time. A branch someone else moved is never overwritten. The lease is
//! checked again inside the push itself (libgit2's push negotiation), so a change
//! between the look and the push is caught too.

use std::collections::BTreeMap;

use git2::{Cred, Direction, Oid, PushOptions, RemoteCallbacks, Repository};

/// One branch to push.
#[derive(Debug, Clone)]
pub struct Lease {
    /// Branch name.
    pub branch: String,
    /// The local commit to publish.
    pub local: Oid,
    /// What fanout pushed there before, if anything.
    pub expected: Option<Oid>,
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

fn callbacks(token: Option<&str>) -> RemoteCallbacks<'_> {
    let mut cb = RemoteCallbacks::new();
    if let Some(token) = token {
        let mut tried = false;
        cb.credentials(move |_url, _user, _allowed| {
            // Ask once; a second request means the token was refused.
            if tried {
                return Err(git2::Error::from_str("the token was refused by the remote"));
            }
            tried = true;
            Cred::userpass_plaintext("x-access-token", token)
        });
    }
    cb
}

/// Push `leases` to `remote` (a remote name of `repo`, or a URL/path) in one push.
pub fn push(
    repo: &Repository,
    remote: &str,
    token: Option<&str>,
    leases: &[Lease],
) -> Result<BTreeMap<String, PushResult>, git2::Error> {
    let mut results = BTreeMap::new();
    if leases.is_empty() {
        return Ok(results);
    }
    let mut remote = match repo.find_remote(remote) {
        Ok(r) => r,
        Err(_) => repo.remote_anonymous(remote)?,
    };
    // Look: what does the remote have now?
    let current = remote_heads(&mut remote, token)?;
    let to_push = to_push(leases, &current, &mut results);
    if to_push.is_empty() {
        return Ok(results);
    }
    let outcome = push_leased(&mut remote, token, &to_push);
    for name in to_push.keys() {
        let branch = name.trim_start_matches("refs/heads/").to_owned();
        let r = match &outcome {
            Err(why) => PushResult::Refused(why.clone()),
            Ok(rejected) => match rejected.get(name) {
                Some(msg) => PushResult::Refused(format!("the remote rejected it: {msg}")),
                None => PushResult::Pushed,
            },
        };
        results.insert(branch, r);
    }
    Ok(results)
}

/// The branches the remote has, by ref name.
fn remote_heads(
    remote: &mut git2::Remote<'_>,
    token: Option<&str>,
) -> Result<BTreeMap<String, Oid>, git2::Error> {
    let conn = remote.connect_auth(Direction::Push, Some(callbacks(token)), None)?;
    Ok(conn
        .list()?
        .iter()
        .filter(|h| h.name().starts_with("refs/heads/"))
        .map(|h| (h.name().to_owned(), h.oid()))
        .collect())
}

/// The refs to push, each with its commit and what the remote has now: a branch the
/// remote already has at the commit is up to date, and one it has at a commit fanout
/// did not push is refused (into `results`).
fn to_push(
    leases: &[Lease],
    current: &BTreeMap<String, Oid>,
    results: &mut BTreeMap<String, PushResult>,
) -> BTreeMap<String, (Oid, Option<Oid>)> {
    let mut to_push = BTreeMap::new();
    for lease in leases {
        let name = format!("refs/heads/{}", lease.branch);
        match current.get(&name) {
            Some(oid) if *oid == lease.local => {
                results.insert(lease.branch.clone(), PushResult::UpToDate);
            }
            Some(oid) if Some(*oid) != lease.expected => {
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
    to_push
}

/// Push `to_push` in one push, refusing it whole when a branch moved on the remote
/// since it was looked at. Returns the refs the remote rejected, with its message; an
/// error says why nothing was pushed.
fn push_leased(
    remote: &mut git2::Remote<'_>,
    token: Option<&str>,
    to_push: &BTreeMap<String, (Oid, Option<Oid>)>,
) -> Result<BTreeMap<String, String>, String> {
    let refspecs: Vec<String> = to_push
        .keys()
        .map(|name| format!("+{name}:{name}"))
        .collect();
    let rejected = std::cell::RefCell::new(BTreeMap::<String, String>::new());
    let lease_broken = std::cell::RefCell::new(None::<String>);
    let mut cb = callbacks(token);
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
    if let Err(e) = remote.push(&refspecs, Some(&mut opts)) {
        return Err(match lease_broken.borrow().as_deref() {
            Some(name) => format!("{name} changed on the remote while pushing; not overwritten"),
            None => format!("push failed: {}", e.message()),
        });
    }
    drop(opts);
    Ok(rejected.into_inner())
}
