//! Copying what git leaves out of a worktree: files of the user's checkout that git
//! ignores or does not track (`.env`, local config), chosen by `copy:` globs and the
//! lines of `.worktreeinclude`, copied into a new worktree with their relative paths
//! and permissions.
//! The patterns follow `.gitignore`'s syntax exactly ([`crate::util::glob`], the
//! `ignore` crate's matcher).
//!
//! Only regular files are copied (no symlinks), never anything under `.git`, inside a
//! nested repository, or in fanout's own worktrees, and never over a file the
//! worktree already has (one the base commit tracks).

use std::path::{Path, PathBuf};

use crate::util::glob::{Enter, Patterns};

/// Files of the checkout at `root` that `patterns` select and git does not track,
/// relative, sorted. `skip` is a directory never entered (fanout's worktrees, when
/// they live inside the checkout).
pub fn select(
    repo: &git2::Repository,
    root: &Path,
    patterns: &Patterns,
    skip: Option<&Path>,
) -> std::io::Result<Vec<String>> {
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let index = repo.index().map_err(std::io::Error::other)?;
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<String>, bool)> = vec![(root.to_owned(), Vec::new(), false)];
    while let Some((dir, rel, all)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let path = entry.path();
            let mut child = rel.clone();
            child.push(name.clone());
            let rel_s = child.join("/");
            if kind.is_dir() {
                if name == ".git"
                    || skip.is_some_and(|s| s == path)
                    || std::fs::symlink_metadata(path.join(".git")).is_ok()
                {
                    continue;
                }
                let comps: Vec<&str> = child.iter().map(String::as_str).collect();
                let enter = if all {
                    Enter::All
                } else {
                    patterns.may_contain(&comps, &mut || {
                        repo.is_path_ignored(Path::new(&format!("{rel_s}/")))
                            .unwrap_or(false)
                    })
                };
                if enter != Enter::No {
                    stack.push((path, child, enter == Enter::All));
                }
            } else if kind.is_file()
                && patterns.matches(&rel_s)
                && index.get_path(Path::new(&rel_s), 0).is_none()
            {
                out.push(rel_s);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Copy `files` (relative) from `from` into `to`, keeping permissions. A file the
/// destination already has, or whose directory there is not a plain directory, is
/// left alone. Returns the files copied.
pub fn copy_into(from: &Path, to: &Path, files: &[String]) -> Result<Vec<String>, String> {
    let mut copied = Vec::new();
    'files: for rel in files {
        let dest = to.join(rel);
        if std::fs::symlink_metadata(&dest).is_ok() {
            continue;
        }
        // Never write through a symlink the worktree has (it could point anywhere).
        let mut at = to.to_owned();
        let parts: Vec<&str> = rel.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => continue 'files,
                Err(_) => break,
            }
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("copying {rel}: {e}"))?;
        }
        std::fs::copy(from.join(rel), &dest).map_err(|e| format!("copying {rel}: {e}"))?;
        copied.push(rel.clone());
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::glob::Patterns;

    #[test]
    fn selects_untracked_and_ignored_files_only_and_copies_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let repo = git2::Repository::init(&root).unwrap();
        let w = |rel: &str, body: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w(".gitignore", ".env\nnode_modules/\n");
        w("tracked.env.txt", "tracked\n");
        w(".env", "SECRET=1\n");
        w("api/.env", "API=1\n");
        w("node_modules/pkg/.env", "no\n");
        w("local/notes.txt", "untracked\n");
        w("nested/.git", "gitdir: elsewhere\n");
        w("nested/.env", "no\n");
        w("wt/run/w1/.env", "no\n");
        std::os::unix::fs::symlink("/etc/hostname", root.join("link.env")).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(".gitignore")).unwrap();
        index.add_path(Path::new("tracked.env.txt")).unwrap();
        index.write().unwrap();
        let p = Patterns::new(
            &["local/".into(), "*.env.txt".into(), "*.env".into()],
            Some(".env\n"),
        )
        .unwrap();
        let files = select(&repo, &root, &p, Some(&root.join("wt"))).unwrap();
        assert_eq!(files, [".env", "api/.env", "local/notes.txt"]);

        let dest = dir.path().join("dest");
        std::fs::create_dir_all(dest.join("api")).unwrap();
        std::fs::write(dest.join("api/.env"), "already here\n").unwrap();
        std::os::unix::fs::symlink("/tmp", dest.join("local")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join(".env"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let copied = copy_into(&root, &dest, &files).unwrap();
        assert_eq!(copied, [".env"]);
        assert_eq!(std::fs::read(dest.join(".env")).unwrap(), b"SECRET=1\n");
        let mode = std::fs::metadata(dest.join(".env"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read(dest.join("api/.env")).unwrap(),
            b"already here\n"
        );
    }
}
