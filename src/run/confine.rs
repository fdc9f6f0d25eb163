//! A worker's confinement: its private directory, the variables that send its git's
//! objects to its worktree's quarantine, and — when the run is sandboxed — the
//! policy its agent, setup commands and checks run under ([`crate::sandbox::Policy`]).
//!
//! The private directory (`$TMPDIR/fanout-<uid>/<run key>-w<id>`, mode 0700) holds
//! `tmp/` (`TMPDIR`, `TMP`, `TEMP`), `run/` (`XDG_RUNTIME_DIR`), `$FANOUT_RESULT`, and
//! whatever the agent's adapter seeds there (a private copy of its CLI's
//! configuration); it is removed when the worker is done, and what a killed fanout left
//! when the run is resumed or cleaned up ([`remove_leftovers`]). Confined, a worker may
//! write only: its worktree; the worktree's administrative directory
//! (`.git/worktrees/<name>`: its `HEAD`, index, logs and object quarantine — nothing
//! else of the shared `.git`, no ref, no config, no hook); its private directory;
//! `/dev/null`; and its agent's `writable:` paths. It reads and executes anything but
//! the hidden paths: the user's credentials ([`crate::sandbox::hidden::credentials`]),
//! fanout's record key, and `hidden:`. A `writable:` path that holds the git
//! directory or the home directory, lies in the git directory, or holds or lies in a
//! hidden path is refused here too (the settings refuse it first, at its line), before
//! anything is made for it. It makes no Unix, raw or netlink socket (the socket
//! filter). Its network is open ([`crate::sandbox::Policy::network`] is `None`)
//! unless the run pins it to the gateway ([`pinned`]: TCP only to its gateway door and
//! its own port block, no UDP).
//! Unconfined (on Linux), its processes still drop the capabilities of a root fanout
//! between fork and exec, and nothing more.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sandbox::hidden::{self, Guarded};
use crate::sandbox::{NetPolicy, Policy, Restrictions};

use super::setup::ports::PortLease;

/// The network of a worker pinned to the gateway: TCP `connect` only to its door
/// (`door`, the gateway's port for it) and its port block (`ports:`, so that a server
/// it starts stays reachable to it), `bind` only its port block, no UDP.
pub fn pinned(door: u16, ports: Option<&PortLease>) -> NetPolicy {
    NetPolicy::pinned(door, ports.map(|l| l.first..=l.last).into_iter().flatten())
}

/// One worker's confinement (see the module docs).
#[derive(Debug)]
pub struct Confinement {
    /// The private directory.
    pub private: PathBuf,
    /// `$FANOUT_RESULT`, in the private directory.
    pub result_file: PathBuf,
    /// What each process does before it executes: the sandbox, or (ABI 0, when the
    /// run is not sandboxed) only dropping a root fanout's capabilities; `None` off
    /// Linux.
    pub policy: Option<Policy>,
    /// The policy made ready once ([`crate::sandbox::prepare`]: the Landlock ruleset
    /// with every rule), which every process of the worker applies.
    pub prepared: Option<Restrictions>,
    /// Variables every process of the worker gets.
    env: Vec<(OsString, OsString)>,
}

/// Where a worker's confinement applies.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The worker.
    pub worker_id: u32,
    /// Its worktree.
    pub worktree: &'a Path,
    /// The worktree's administrative directory.
    pub admin: &'a Path,
    /// The repository's common git directory.
    pub common: &'a Path,
}

impl Confinement {
    /// Make the private directory; with `abi`, the policy (making the agent's missing
    /// `writable` paths as directories, once all are checked; `~/` is the home
    /// directory) hiding the credentials and `hidden`, and limited to `network` (see
    /// [`pinned`]) when given.
    pub fn new(
        at: Place<'_>,
        (writable, hidden): (&[String], &[String]),
        abi: Option<u8>,
        network: Option<NetPolicy>,
    ) -> std::io::Result<Self> {
        let private = private_dir(at.common, at.run_id, at.worker_id)?;
        let made = Self::fill(at, &private, (writable, hidden), (abi, network));
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&private);
        }
        made
    }

    fn fill(
        at: Place<'_>,
        private: &Path,
        grants: (&[String], &[String]),
        (abi, network): (Option<u8>, Option<NetPolicy>),
    ) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let (tmp, run) = (private.join("tmp"), private.join("run"));
        for d in [&tmp, &run] {
            std::fs::DirBuilder::new().mode(0o700).create(d)?;
        }
        let quarantine = super::worktree::quarantine(at.admin);
        std::fs::create_dir_all(&quarantine)?;
        let env: Vec<(OsString, OsString)> = [
            ("TMPDIR", tmp.as_os_str()),
            ("TMP", tmp.as_os_str()),
            ("TEMP", tmp.as_os_str()),
            ("XDG_RUNTIME_DIR", run.as_os_str()),
            ("GIT_OBJECT_DIRECTORY", quarantine.as_os_str()),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                at.common.join("objects").as_os_str(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.to_owned()))
        .collect();
        let policy = match abi {
            // Unconfined, on Linux each process still drops the capabilities of a root
            // fanout (root could read fanout's memory, its token included).
            None if cfg!(target_os = "linux") => Some(Policy::default()),
            None => None,
            Some(abi) => {
                let (write, hide) = grants_of(at, private, grants)?;
                Some(Policy {
                    abi,
                    write,
                    write_files: vec!["/dev/null".into()],
                    hide,
                    network,
                })
            }
        };
        let prepared = match &policy {
            Some(p) => Some(
                crate::sandbox::prepare(p)
                    .map_err(|e| std::io::Error::other(format!("sandbox: {e}")))?,
            ),
            None => None,
        };
        Ok(Confinement {
            result_file: private.join("result.json"),
            private: private.to_owned(),
            policy,
            prepared,
            env,
        })
    }

    /// Give every process of the worker `vars` too (over a variable of the same name).
    pub fn add_env(&mut self, vars: Vec<(OsString, OsString)>) {
        self.env.retain(|(k, _)| !vars.iter().any(|(n, _)| n == k));
        self.env.extend(vars);
    }

    /// The variables every process of the worker gets (on top of its environment).
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The Landlock ABI, when confined.
    pub fn abi(&self) -> Option<u8> {
        self.policy.as_ref().map(|p| p.abi).filter(|a| *a > 0)
    }

    /// Remove the private directory.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.private);
    }
}

/// What a confined worker may write (its worktree, admin directory, private directory
/// and `writable` paths, each checked, then made when missing) and the paths hidden
/// from it that exist (credentials, the record key, `hidden`).
fn grants_of(
    at: Place<'_>,
    private: &Path,
    (writable, hidden): (&[String], &[String]),
) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let refuse = |key: &str, entry: &str, why: String| {
        std::io::Error::other(format!("{key}: {entry}: {why}"))
    };
    let mut hide = hidden::credentials();
    for h in hidden {
        hide.push(hidden::expand(h).map_err(|e| refuse("hidden", h, e))?);
    }
    let guard = Guarded::new(None, at.common, &hide);
    let mut paths = Vec::new();
    for w in writable {
        let path = hidden::expand(w).map_err(|e| refuse("writable", w, e))?;
        guard
            .writable(&path)
            .map_err(|e| refuse("writable", w, e))?;
        paths.push(path);
    }
    let mut write = vec![
        at.worktree.to_owned(),
        at.admin.to_owned(),
        private.to_owned(),
    ];
    for path in paths {
        if !hidden::exists(&path) {
            std::fs::create_dir_all(&path)
                .map_err(|e| refuse("writable", &path.display().to_string(), e.to_string()))?;
        }
        write.push(path);
    }
    hide.retain(|h| hidden::exists(h));
    Ok((write, hide))
}

/// Worker `worker_id`'s private directory, fresh: `<user dir>/<key>-w<id>`
/// ([`crate::util::user_temp_dir`], only this user's), the key naming run `run_id` of
/// the repository whose git directory is `common` ([`run_key`]). What an earlier
/// attempt left there (its fanout was killed) is removed first.
fn private_dir(common: &Path, run_id: &str, worker_id: u32) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let root = crate::util::user_temp_dir();
    crate::util::own_dir(&root)?;
    let dir = root.join(format!("{}-w{worker_id}", run_key(common, run_id)));
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Remove the private directories fanout's earlier attempts at run `run_id` of the
/// repository at `common` left (a killed fanout removes none): for `resume` and
/// `cleanup`, once nothing of the run still runs.
pub fn remove_leftovers(common: &Path, run_id: &str) {
    let root = crate::util::user_temp_dir();
    let prefix = format!("{}-w", run_key(common, run_id));
    for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A short name for run `run_id` of the repository at `common` (its git directory,
/// however it is spelled): run ids such as `nightly` repeat across repositories.
fn run_key(common: &Path, run_id: &str) -> String {
    use sha2::Digest;
    let common = std::fs::canonicalize(common).unwrap_or_else(|_| common.to_owned());
    let mut h = sha2::Sha256::new();
    h.update(common.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(run_id.as_bytes());
    hex::encode(&h.finalize()[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three directories for a worker: worktree, admin directory, common git dir.
    fn place_in(d: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (wt, admin, common) = (d.join("wt"), d.join("git/worktrees/w"), d.join("git"));
        for p in [&wt, &admin, &common] {
            std::fs::create_dir_all(p).unwrap();
        }
        (wt, admin, common)
    }

    #[test]
    fn a_writable_path_holding_a_hidden_path_or_the_git_dir_is_refused_before_anything_is_made() {
        let d = tempfile::tempdir().unwrap();
        let (wt, admin, common) = place_in(d.path());
        let at = Place {
            run_id: "r1",
            worker_id: 1,
            worktree: &wt,
            admin: &admin,
            common: &common,
        };
        let secret = d.path().join("state/secret");
        std::fs::create_dir_all(&secret).unwrap();
        let hidden = [secret.display().to_string()];
        let made = d.path().join("made-first");
        for (bad, says) in [
            (d.path().join("state"), "holds"),
            (secret.join("inner"), "is inside"),
            (common.join("hooks"), "git directory"),
            (d.path().to_owned(), "git directory"),
        ] {
            let writable = [made.display().to_string(), bad.display().to_string()];
            let err = Confinement::new(at, (&writable, &hidden), Some(5), None)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("writable: {}: it ", bad.display())) && err.contains(says),
                "{}: {err}",
                bad.display()
            );
            assert!(!made.exists(), "nothing is made when one path is refused");
        }
        let beside = d.path().join("state/other");
        let c = Confinement::new(
            at,
            (&[beside.display().to_string()], &hidden),
            Some(5),
            None,
        )
        .unwrap();
        let p = c.policy.as_ref().unwrap();
        assert!(p.write.contains(&beside) && beside.is_dir());
        assert!(p.hide.contains(&secret), "{:?}", p.hide);
        c.remove();
    }

    #[test]
    fn a_confinement_writes_where_it_says_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let (wt, admin, common) = place_in(d.path());
        let cache = d.path().join("cache/deep");
        let at = Place {
            run_id: "r1",
            worker_id: 2,
            worktree: &wt,
            admin: &admin,
            common: &common,
        };
        let c = Confinement::new(at, (&[cache.display().to_string()], &[]), Some(5), None).unwrap();
        assert!(cache.is_dir(), "a missing writable path is made");
        let p = c.policy.as_ref().unwrap();
        assert_eq!(
            p.write,
            [wt.clone(), admin.clone(), c.private.clone(), cache]
        );
        assert_eq!(c.abi(), Some(5));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&c.private).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        let env: std::collections::BTreeMap<_, _> = c.env().iter().cloned().collect();
        assert_eq!(
            env[&OsString::from("GIT_OBJECT_DIRECTORY")],
            admin.join("objects")
        );
        assert!(admin.join("objects").is_dir());
        assert_eq!(env[&OsString::from("TMPDIR")], c.private.join("tmp"));
        c.remove();
        assert!(!c.private.exists());
        let open = Confinement::new(at, (&[], &[]), None, None).unwrap();
        assert_eq!(open.abi(), None);
        assert_eq!(
            open.policy.as_ref().map(|p| (p.abi, p.write.len())),
            Some((0, 0))
        );
        assert!(Confinement::new(at, (&["/proc/nope/x".into()], &[]), Some(5), None).is_err());
        open.remove();
    }

    #[test]
    fn a_pinned_worker_reaches_its_door_and_its_port_block() {
        let d = tempfile::tempdir().unwrap();
        let (wt, admin, common) = place_in(d.path());
        let at = Place {
            run_id: "r1",
            worker_id: 3,
            worktree: &wt,
            admin: &admin,
            common: &common,
        };
        let lease = crate::run::setup::ports::PortAllocator::new(d.path().join("ports"), 30000, 3)
            .claim()
            .unwrap();
        let net = pinned(41000, Some(&lease));
        assert_eq!(net.connect_ports, [41000, 30000, 30001, 30002]);
        assert_eq!(net.bind_ports, [30000, 30001, 30002]);
        assert_eq!(pinned(41000, None).connect_ports, [41000]);
        let c = Confinement::new(at, (&[], &[]), Some(5), Some(net.clone())).unwrap();
        assert_eq!(c.policy.as_ref().unwrap().network, Some(net));
        c.remove();
    }
}
