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
    let current: BTreeMap<String, Oid> = {
        let conn = remote.connect_auth(Direction::Push, Some(callbacks(token)), None)?;
        conn.list()?
            .iter()
            .filter(|h| h.name().starts_with("refs/heads/"))
            .map(|h| (h.name().to_owned(), h.oid()))
            .collect()
    };

    let mut to_push: BTreeMap<String, (Oid, Option<Oid>)> = BTreeMap::new();
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
    if to_push.is_empty() {
        return Ok(results);
    }

    let refspecs: Vec<String> = to_push
        .keys()
        .map(|name| format!("+{name}:{name}"))
        .collect();
    let rejected = std::cell::RefCell::new(BTreeMap::<String, String>::new());
    let lease_broken = std::cell::RefCell::new(None::<String>);
    {
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
        let pushed = remote.push(&refspecs, Some(&mut opts));
        if let Err(e) = pushed {
            let why = match lease_broken.borrow().as_deref() {
                Some(name) => {
                    format!("{name} changed on the remote while pushing; not overwritten")
                }
                None => format!("push failed: {}", e.message()),
            };
            for name in to_push.keys() {
                let branch = name.trim_start_matches("refs/heads/").to_owned();
                results.insert(branch, PushResult::Refused(why.clone()));
            }
            return Ok(results);
        }
    }
    let rejected = rejected.into_inner();
    for name in to_push.keys() {
        let branch = name.trim_start_matches("refs/heads/").to_owned();
        let r = match rejected.get(name) {
            Some(msg) => PushResult::Refused(format!("the remote rejected it: {msg}")),
            None => PushResult::Pushed,
        };
        results.insert(branch, r);
    }
    Ok(results)
}
