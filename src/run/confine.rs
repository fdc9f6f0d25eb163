//! A worker's confinement: its private directory, the variables that send its git's
//! objects to its worktree's quarantine, and — when the run is sandboxed — the
//! policy its agent, setup commands and checks run under ([`crate::sandbox::Policy`]).
//!
//! The private directory (`$TMPDIR/fanout-<run>-w<id>-<random>`, mode 0700) holds
//! `tmp/` (`TMPDIR`, `TMP`, `TEMP`), `run/` (`XDG_RUNTIME_DIR`), `$FANOUT_RESULT`, and
//! whatever the agent's adapter seeds there (a private copy of its CLI's
//! configuration); it is removed when the worker is done. Confined, a worker may
//! write only: its worktree; the worktree's administrative directory
//! (`.git/worktrees/<name>`: its `HEAD`, index, logs and object quarantine — nothing
//! else of the shared `.git`, no ref, no config, no hook); its private directory;
//! `/dev/null`; and its agent's `writable:` paths. It reads and executes anything.
//! Unconfined (on Linux), its processes still drop the capabilities of a root fanout
//! between fork and exec, and nothing more.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sandbox::{Policy, Prepared};

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
    pub prepared: Option<Prepared>,
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
    /// `writable` paths as directories; `~/` is the home directory).
    pub fn new(at: Place<'_>, writable: &[String], abi: Option<u8>) -> std::io::Result<Self> {
        let private = private_dir(at.run_id, at.worker_id)?;
        let made = Self::fill(at, &private, writable, abi);
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&private);
        }
        made
    }

    fn fill(
        at: Place<'_>,
        private: &Path,
        writable: &[String],
        abi: Option<u8>,
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
                let mut write = vec![
                    at.worktree.to_owned(),
                    at.admin.to_owned(),
                    private.to_owned(),
                ];
                let key = crate::util::sign::key_dir();
                for w in writable {
                    write.push(exposes_not(writable_path(w)?, &key)?);
                }
                Some(Policy {
                    abi,
                    write,
                    write_files: vec!["/dev/null".into()],
                    hide: vec![key],
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

/// `path`, unless writing beneath it would reach fanout's record key (`key`, which the
/// sandbox hides from agents): a `writable:` of `~/.local/state` is refused, with why.
fn exposes_not(path: PathBuf, key: &Path) -> std::io::Result<PathBuf> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (p, k) = (real(&path), real(key));
    if k.starts_with(&p) || p.starts_with(&k) {
        return Err(std::io::Error::other(format!(
            "writable: {}: it holds fanout's record key ({}), which agents must not read; \
             declare a directory beside it instead",
            path.display(),
            key.display()
        )));
    }
    Ok(path)
}

/// A `writable:` entry as a path (`~/` is `$HOME`), made as a directory when missing.
fn writable_path(entry: &str) -> std::io::Result<PathBuf> {
    let path = match entry.strip_prefix("~/") {
        Some(rest) => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .ok_or_else(|| {
                    std::io::Error::other(format!("writable: {entry}: HOME is not set"))
                })?;
            PathBuf::from(home).join(rest)
        }
        None => PathBuf::from(entry),
    };
    if std::fs::symlink_metadata(&path).is_err() {
        std::fs::create_dir_all(&path)
            .map_err(|e| std::io::Error::other(format!("writable: {}: {e}", path.display())))?;
    }
    Ok(path)
}

/// A fresh directory only this user can enter, under the system's temporary directory.
fn private_dir(run_id: &str, worker_id: u32) -> std::io::Result<PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let mut last = None;
    for attempt in 0..16u32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        h.write_u32(std::process::id());
        let dir = base.join(format!(
            "fanout-{run_id}-w{worker_id}-{:06x}",
            h.finish() & 0xff_ffff
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no private directory")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_path_holding_the_record_key_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let key = d.path().join("state/fanout");
        std::fs::create_dir_all(&key).unwrap();
        for above in [d.path().join("state"), key.clone(), key.join("inner")] {
            let err = exposes_not(above.clone(), &key).unwrap_err().to_string();
            assert!(err.contains("record key"), "{}: {err}", above.display());
        }
        let beside = d.path().join("state/other");
        assert_eq!(exposes_not(beside.clone(), &key).unwrap(), beside);
    }

    #[test]
    fn a_confinement_writes_where_it_says_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let (wt, admin, common) = (
            d.path().join("wt"),
            d.path().join("admin"),
            d.path().join("git"),
        );
        for p in [&wt, &admin, &common] {
            std::fs::create_dir_all(p).unwrap();
        }
        let cache = d.path().join("cache/deep");
        let at = Place {
            run_id: "r1",
            worker_id: 2,
            worktree: &wt,
            admin: &admin,
            common: &common,
        };
        let c = Confinement::new(at, &[cache.display().to_string()], Some(5)).unwrap();
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
        let open = Confinement::new(at, &[], None).unwrap();
        assert_eq!(open.abi(), None);
        assert_eq!(
            open.policy.as_ref().map(|p| (p.abi, p.write.len())),
            Some((0, 0))
        );
        assert!(Confinement::new(at, &["/proc/nope/x".into()], Some(5)).is_err());
        open.remove();
    }
}
