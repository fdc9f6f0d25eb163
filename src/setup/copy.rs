//! Copying what git leaves out of a worktree: files of the user's checkout that git
//! ignores or does not track (`.env`, local config), chosen by `copy:` globs and the
//! lines of `.worktreeinclude`, copied into a new worktree with their relative paths
//! and permissions.
//!
//! # Glob syntax (a subset of `.gitignore`'s)
//!
//! * `#` starts a comment line; blank lines are skipped; `!` before a pattern takes
//!   matching files back out (the last matching pattern decides).
//! * `*` and `?` match within one path component, `**` matches any number of
//!   components.
//! * A pattern without `/` (other than a trailing one) matches a name at any depth;
//!   with one, or with a leading `/`, it is taken from the repository root.
//! * A pattern that matches a directory copies everything under it; a trailing `/`
//!   matches directories only.
//! * Bare names and patterns starting with `**` do not look inside directories git
//!   ignores (`node_modules/`, `target/`): name the directory to reach into it
//!   (`build/**/*.env`, or `build/` for all of it).
//!
//! Only regular files are copied (no symlinks), never anything under `.git`, inside a
//! nested repository, or in fanout's own worktrees, and never over a file the
//! worktree already has (one the base commit tracks).

use std::path::{Path, PathBuf};

/// The file of extra patterns at the repository root.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// One parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// `!pattern`: matching files are taken out again.
    negate: bool,
    /// Matches directories only (trailing `/`).
    dir_only: bool,
    /// Components; unanchored patterns start with `**`.
    comps: Vec<String>,
}

impl Pattern {
    /// Whether the pattern names its first directory literally (it does not start
    /// with `**`): only such patterns look inside ignored directories.
    fn explicit(&self) -> bool {
        self.comps.first().is_some_and(|c| c != "**")
    }
}

/// Parse one pattern line: `Ok(None)` for blank and comment lines.
pub fn parse(line: &str) -> Result<Option<Pattern>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let (negate, body) = match line.strip_prefix('!') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, line),
    };
    let anchored_root = body.starts_with('/');
    let body = body.trim_start_matches('/');
    let dir_only = body.ends_with('/');
    let body = body.trim_end_matches('/');
    if body.is_empty() {
        return Err(format!("`{line}` names no file"));
    }
    if body.contains('\\') {
        return Err(format!("`{line}`: use `/` to separate directories"));
    }
    let mut comps: Vec<String> = Vec::new();
    for c in body.split('/') {
        match c {
            "" | "." => continue,
            ".." => return Err(format!("`{line}`: `..` would leave the repository")),
            ".git" => return Err(format!("`{line}`: nothing under .git is copied")),
            "**" if comps.last().is_some_and(|l| l == "**") => continue,
            _ => comps.push(c.to_owned()),
        }
    }
    if comps.is_empty() {
        return Err(format!("`{line}` names no file"));
    }
    if !anchored_root && !body.contains('/') && comps[0] != "**" {
        comps.insert(0, "**".to_owned());
    }
    Ok(Some(Pattern {
        negate,
        dir_only,
        comps,
    }))
}

/// Check one `copy:` glob (for the config file).
pub fn check(glob: &str) -> Result<(), String> {
    match parse(glob)? {
        Some(_) => Ok(()),
        None => Err(format!("`{glob}` is blank or a comment, not a glob")),
    }
}

/// An ordered set of patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patterns {
    list: Vec<Pattern>,
}

impl Patterns {
    /// From `copy:` globs (already checked by the config) and the text of
    /// `.worktreeinclude`, if there is one. Errors name the file and line.
    pub fn new(globs: &[String], include: Option<&str>) -> Result<Patterns, String> {
        let mut list = Vec::new();
        for g in globs {
            if let Some(p) = parse(g).map_err(|e| format!("copy: {e}"))? {
                list.push(p);
            }
        }
        if let Some(text) = include {
            for (i, line) in text.lines().enumerate() {
                if let Some(p) =
                    parse(line).map_err(|e| format!("{INCLUDE_FILE}:{}: {e}", i + 1))?
                {
                    list.push(p);
                }
            }
        }
        Ok(Patterns { list })
    }

    /// No pattern at all.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Is the file at `rel` (`/`-separated, relative to the root) selected?
    pub fn matches(&self, rel: &str) -> bool {
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        let mut selected = false;
        for p in &self.list {
            let hit = (!p.dir_only && match_comps(&p.comps, &comps))
                || (1..comps.len()).any(|k| match_comps(&p.comps, &comps[..k]));
            if hit {
                selected = !p.negate;
            }
        }
        selected
    }

    /// Should the walk enter the directory `rel`? `ignored` says whether git ignores
    /// it, asked lazily (only when the answer matters).
    fn may_contain(&self, rel: &[&str], ignored: &mut dyn FnMut() -> bool) -> Enter {
        let positive = || self.list.iter().filter(|p| !p.negate);
        if positive().any(|p| match_comps(&p.comps, rel)) {
            return Enter::All;
        }
        if positive().any(|p| p.explicit() && prefix_possible(&p.comps, rel)) {
            return Enter::Some;
        }
        if positive().any(|p| prefix_possible(&p.comps, rel)) && !ignored() {
            return Enter::Some;
        }
        Enter::No
    }
}

/// What the walk does with a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enter {
    /// Skip it.
    No,
    /// Look inside.
    Some,
    /// A pattern matches the directory itself: look at everything inside.
    All,
}

/// Do the pattern components match the path components exactly?
fn match_comps(p: &[String], t: &[&str]) -> bool {
    match p.split_first() {
        None => t.is_empty(),
        Some((first, rest)) if first == "**" => (0..=t.len()).any(|k| match_comps(rest, &t[k..])),
        Some((first, rest)) => {
            !t.is_empty() && crate::harvest::glob(first, t[0]) && match_comps(rest, &t[1..])
        }
    }
}

/// Could the pattern match something strictly under the directory `d`?
fn prefix_possible(p: &[String], d: &[&str]) -> bool {
    match (p.split_first(), d.split_first()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((first, _)), _) if first == "**" => true,
        (Some((first, rest)), Some((dir, under))) => {
            crate::harvest::glob(first, dir) && prefix_possible(rest, under)
        }
    }
}

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

    fn set(lines: &[&str]) -> Patterns {
        let text = lines.join("\n");
        Patterns::new(&[], Some(&text)).unwrap()
    }

    #[test]
    fn globs_follow_gitignore_rules() {
        let p = set(&[
            "# local files",
            "",
            ".env",
            "/config/*.local.yml",
            "fixtures/big/",
            "**/secrets/*.key",
            "data/**/*.csv",
            "!data/skip/**",
            "cache",
        ]);
        // a bare name matches at any depth
        assert!(p.matches(".env"));
        assert!(p.matches("services/api/.env"));
        assert!(!p.matches(".env.example"));
        // a slash anchors to the root
        assert!(p.matches("config/db.local.yml"));
        assert!(!p.matches("sub/config/db.local.yml"));
        assert!(!p.matches("config/deep/db.local.yml"));
        // a directory pattern takes everything under it, not a file of that name
        assert!(p.matches("fixtures/big/a/b.bin"));
        assert!(!p.matches("fixtures/big"));
        assert!(p.matches("cache"));
        assert!(p.matches("x/cache/entry"));
        // ** spans components, including none
        assert!(p.matches("secrets/a.key"));
        assert!(p.matches("a/b/secrets/a.key"));
        assert!(p.matches("data/x.csv"));
        assert!(p.matches("data/2024/01/x.csv"));
        // the last matching pattern decides
        assert!(!p.matches("data/skip/x.csv"));
        assert!(!p.matches("src/main.rs"));
    }

    #[test]
    fn bad_globs_are_refused_with_their_line() {
        assert!(
            check("../outside")
                .unwrap_err()
                .contains("leave the repository")
        );
        assert!(check("a/../../b").is_err());
        assert!(check(".git/config").unwrap_err().contains(".git"));
        assert!(check("/").is_err());
        assert!(check("# note").is_err());
        assert!(check("dir\\file").is_err());
        assert!(check("./.env").is_ok());
        let e = Patterns::new(&[], Some(".env\n\n../x\n")).unwrap_err();
        assert_eq!(
            e,
            ".worktreeinclude:3: `../x`: `..` would leave the repository"
        );
    }

    #[test]
    fn ignored_directories_are_entered_only_when_named() {
        let p = set(&[".env", "build/**/*.pem", "vendor"]);
        let mut yes = || true;
        let mut no = || false;
        assert_eq!(p.may_contain(&["node_modules"], &mut yes), Enter::No);
        assert_eq!(p.may_contain(&["services"], &mut no), Enter::Some);
        assert_eq!(p.may_contain(&["build"], &mut yes), Enter::Some);
        assert_eq!(p.may_contain(&["build", "x"], &mut yes), Enter::Some);
        assert_eq!(p.may_contain(&["vendor"], &mut yes), Enter::All);
        let anchored = set(&["/config/local.yml"]);
        assert_eq!(anchored.may_contain(&["src"], &mut no), Enter::No);
        assert_eq!(anchored.may_contain(&["config"], &mut yes), Enter::Some);
    }

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
