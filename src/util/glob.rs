//! Path patterns, matched against `/`-separated paths relative to a repository root:
//! [`wildcard`] (`*` and `?` within one path component, for `exclude:`) and the
//! gitignore-like globs of `copy:` and `.worktreeinclude` ([`Patterns`]). Checking a
//! glob ([`check`]) needs nothing but its text, so the settings check `copy:` when
//! the file is read, and worktree setup matches files with the same code.
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
    pub fn may_contain(&self, rel: &[&str], ignored: &mut dyn FnMut() -> bool) -> Enter {
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

/// What a walk does with a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enter {
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
        Some((first, rest)) => !t.is_empty() && wildcard(first, t[0]) && match_comps(rest, &t[1..]),
    }
}

/// Could the pattern match something strictly under the directory `d`?
fn prefix_possible(p: &[String], d: &[&str]) -> bool {
    match (p.split_first(), d.split_first()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((first, _)), _) if first == "**" => true,
        (Some((first, rest)), Some((dir, under))) => {
            wildcard(first, dir) && prefix_possible(rest, under)
        }
    }
}

/// `*` and `?` wildcards over one path component.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
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
}
