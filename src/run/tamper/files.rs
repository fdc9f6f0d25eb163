//! The file side of a tamper check: the shared config (by entry, so the reason names
//! the keys), `commondir` and `objects/info/alternates` (first: opening the repository
//! follows them), hooks and `info/` (restored byte for byte, the replaced bytes kept in
//! the run directory's `tamper/`), the checkout (reported only) and the run directory
//! (planted symlinks and special files removed).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{Change, CheckAt, FileState, POINTERS, Snapshot, from_hex};

/// `section.sub.key=value` for each entry of a git config file (a plain reading of
/// git's syntax: enough to name keys, never used to write one).
fn config_entries(bytes: &[u8]) -> Vec<String> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(bytes).lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let head = rest.split(']').next().unwrap_or_default();
            section = match head.split_once(' ') {
                Some((s, sub)) => format!("{}.{}", s.to_lowercase(), sub.trim().trim_matches('"')),
                None => head.to_lowercase(),
            };
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or((line, "true"));
        out.push(format!(
            "{section}.{}={}",
            k.trim().to_lowercase(),
            v.trim()
        ));
    }
    out.sort();
    out
}

/// Submodule names in the checkout's `.gitmodules`.
fn submodule_names(workdir: &Path) -> BTreeSet<String> {
    let bytes = std::fs::read(workdir.join(".gitmodules")).unwrap_or_default();
    config_entries(&bytes)
        .iter()
        .filter_map(|e| e.strip_prefix("submodule."))
        .filter_map(|e| e.rsplit_once(".path=").map(|(n, _)| n.to_owned()))
        .collect()
}

/// Whether entry `e` is one `git submodule update --init` writes for a known submodule.
fn submodule_init_entry(e: &str, names: &BTreeSet<String>) -> bool {
    let key = e.split('=').next().unwrap_or_default();
    key.strip_prefix("submodule.").is_some_and(|rest| {
        ["url", "active"].iter().any(|k| {
            rest.strip_suffix(&format!(".{k}"))
                .is_some_and(|n| names.contains(n))
        })
    })
}

/// Entries in `a` and not in `b` (as multisets).
fn minus(a: &[String], b: &[String]) -> Vec<String> {
    let mut b = b.to_vec();
    a.iter()
        .filter(|e| match b.iter().position(|x| x == *e) {
            Some(i) => {
                b.remove(i);
                false
            }
            None => true,
        })
        .cloned()
        .collect()
}

fn bytes_of(st: Option<&FileState>) -> Vec<u8> {
    st.and_then(|s| s.hex.as_deref())
        .and_then(from_hex)
        .unwrap_or_default()
}

impl Snapshot {
    /// Path of guarded file `key` (`config`, `hooks/x`, `info/x`).
    fn guarded_path(&self, key: &str) -> PathBuf {
        match key.strip_prefix("hooks/") {
            Some(rest) => self.hooks_dir.join(rest),
            None => self.common_dir.join(key),
        }
    }

    /// How the config changed, by key; `None` when only fanout's own submodule
    /// entries did (benign).
    fn config_how(&self, key: &str, is: Option<&FileState>) -> Option<String> {
        let was = config_entries(&bytes_of(self.files.get(key)));
        let now = match is {
            Some(_) => config_entries(&std::fs::read(self.guarded_path(key)).unwrap_or_default()),
            None => Vec::new(),
        };
        let names = submodule_names(&self.workdir);
        let keys = |v: Vec<String>| -> Vec<String> {
            v.into_iter()
                .filter(|e| !submodule_init_entry(e, &names))
                .map(|e| e.split('=').next().unwrap_or_default().to_owned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let (added, removed) = (keys(minus(&now, &was)), keys(minus(&was, &now)));
        if added.is_empty() && removed.is_empty() && (is.is_some() || !self.files.contains_key(key))
        {
            return None;
        }
        let mut parts = Vec::new();
        if !added.is_empty() {
            parts.push(format!("{} set", added.join(", ")));
        }
        if !removed.is_empty() {
            parts.push(format!("{} removed", removed.join(", ")));
        }
        if parts.is_empty() {
            parts.push("rewritten".into());
        }
        Some(parts.join("; "))
    }

    /// Guarded files (config, hooks, info) that differ; restored unless reporting
    /// (benign config changes only at the end).
    pub(super) fn files_changed(&self, now: &Snapshot, mode: CheckAt, out: &mut Vec<Change>) {
        let keys: BTreeSet<&String> = self.files.keys().chain(now.files.keys()).collect();
        for key in keys {
            if POINTERS.contains(&key.as_str()) {
                // Seen first, by `pointers_changed`.
                continue;
            }
            self.file_changed(key, now.files.get(key), mode, out);
        }
    }

    /// `commondir` and `objects/info/alternates` as they are now against the snapshot,
    /// each restored as `mode` says: before the repository is opened, which follows
    /// them.
    pub(super) fn pointers_changed(&self, mode: CheckAt, out: &mut Vec<Change>) {
        if !self.repo_pointers {
            return;
        }
        for key in POINTERS {
            let now = super::file_state(&self.common_dir.join(key));
            self.file_changed(key, now.as_ref(), mode, out);
        }
    }

    /// Guarded file `key`, `is` now: a change when it differs from the snapshot, put
    /// back as `mode` says.
    fn file_changed(
        &self,
        key: &str,
        is: Option<&FileState>,
        mode: CheckAt,
        out: &mut Vec<Change>,
    ) {
        let was = self.files.get(key);
        if was == is {
            return;
        }
        let config = key == "config" || key == "config.worktree";
        let (how, benign) = match (config, was, is) {
            (true, _, _) => match self.config_how(key, is) {
                Some(h) => (h, false),
                None => ("submodule entries fanout's setup added".into(), true),
            },
            (false, Some(_), Some(_)) => ("changed".into(), false),
            (false, Some(_), None) => ("deleted".into(), false),
            (false, None, _) => ("added".into(), false),
        };
        let restore = match mode {
            CheckAt::Report => false,
            CheckAt::Worker => !benign,
            CheckAt::Outside => benign,
            CheckAt::End | CheckAt::Resume => true,
        };
        let done = match restore {
            false if benign => String::new(),
            false => " (not restored)".into(),
            true => match self.restore_file(key, was) {
                Ok(None) => " (restored)".into(),
                Ok(Some(kept)) => format!(" (restored; what was there is kept in {kept})"),
                Err(e) => format!(" (could not restore: {e})"),
            },
        };
        let what = match key.strip_prefix("hooks/") {
            Some(h) => format!("{}/{h}", self.hooks_dir.display()),
            None => format!(".git/{key}"),
        };
        out.push(Change {
            what,
            how: format!("{how}{done}"),
            benign,
        });
    }

    /// Put guarded file `key` back as it was (`None`: remove it), keeping what is there
    /// now in the run directory's `tamper/`; returns where it was kept.
    fn restore_file(&self, key: &str, was: Option<&FileState>) -> Result<Option<String>, String> {
        let path = self.guarded_path(key);
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let kept = match std::fs::symlink_metadata(&path) {
            Ok(_) => Some(self.keep_aside(&path, key).map_err(err)?),
            Err(_) => None,
        };
        let Some(was) = was else {
            return Ok(kept);
        };
        let bytes = was
            .hex
            .as_deref()
            .and_then(from_hex)
            .ok_or("too large to keep a copy of")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        if was.symlink {
            let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes);
            std::os::unix::fs::symlink(target, &path).map_err(err)?;
        } else {
            crate::util::write_atomic(&path, &bytes).map_err(err)?;
            use std::os::unix::fs::PermissionsExt;
            let perms = std::fs::Permissions::from_mode(was.mode & 0o7777);
            std::fs::set_permissions(&path, perms).map_err(err)?;
        }
        Ok(kept)
    }

    /// Move `path` into the run directory's `tamper/` (nothing is lost); returns where.
    fn keep_aside(&self, path: &Path, key: &str) -> std::io::Result<String> {
        let dir = self.run_dir.join("tamper");
        std::fs::create_dir_all(&dir)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dest = dir.join(format!("{}.{stamp}", key.replace('/', "_")));
        if std::fs::rename(path, &dest).is_err() {
            std::fs::copy(path, &dest)?;
            std::fs::remove_file(path)?;
        }
        Ok(dest.display().to_string())
    }

    /// Files of the checkout whose state differs, and the index; reported only.
    pub(super) fn checkout_changed(&self, now: &Snapshot, out: &mut Vec<Change>) {
        let paths: BTreeSet<&String> = self.checkout.keys().chain(now.checkout.keys()).collect();
        for p in paths {
            let (was, is) = (self.checkout.get(p), now.checkout.get(p));
            if was == is {
                continue;
            }
            let how = match (was, is.map(String::as_str)) {
                (_, Some("deleted")) => "deleted",
                (_, None) => "changed back to its committed state",
                (None, Some(_)) => "modified or added",
                (Some(_), Some(_)) => "changed",
            };
            out.push(Change {
                what: format!("{p} in the checkout"),
                how: format!("{how} (not reverted)"),
                benign: false,
            });
        }
        if self.index != now.index {
            out.push(Change {
                what: "the checkout's index".into(),
                how: "changed: staged changes differ (not reverted)".into(),
                benign: false,
            });
        }
    }

    /// Symlinks and special files planted in the run directory: removed.
    pub(super) fn run_dir_changed(&self, restore: bool, out: &mut Vec<Change>) {
        let mut stack = vec![self.run_dir.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    stack.push(e.path());
                    continue;
                }
                if t.is_file() {
                    continue;
                }
                let rel = e.path();
                let rel = rel.strip_prefix(&self.run_dir).unwrap_or(&rel);
                let kind = if t.is_symlink() {
                    "a symlink"
                } else {
                    "a special file"
                };
                let done = if restore && std::fs::remove_file(e.path()).is_ok() {
                    "removed"
                } else {
                    "not removed"
                };
                out.push(Change {
                    what: format!("{} in the run directory", rel.display()),
                    how: format!("planted: {kind} ({done})"),
                    benign: false,
                });
            }
        }
    }
}
