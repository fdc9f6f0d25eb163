//! Path patterns, matched against `/`-separated paths relative to a repository root:
//! [`wildcard`] (`*` and `?` within one path component, for `exclude:`) and the
//! globs of `copy:` and `.worktreeinclude` ([`Patterns`]). Checking a glob
//! ([`check`]) needs nothing but its text, so the settings check `copy:` when the file
//! is read, and worktree setup matches files with the same code.
//!
//! # Glob syntax: `.gitignore`'s, exactly
//!
//! `copy:` and `.worktreeinclude` lines are matched by the `ignore` crate's gitignore
//! matcher (ripgrep's), so they follow `man gitignore`: `#` comments, blank lines, `!`
//! to take files back out (the last matching pattern decides), `\` escapes, `*`, `?`,
//! `[a-z]` classes and `**`; a pattern without a slash (other than a trailing one)
//! matches a name at any depth, one with a slash is taken from the repository root;
//! a trailing `/` matches directories only; a directory that matches is copied
//! whole. A file's own patterns are asked first, then its directories' (the matcher's
//! `matched_path_or_any_parents`), so `!*.tmp` after `fixtures/` takes the `.tmp`
//! files back out of the copied directory (git itself never re-includes a file
//! under an excluded directory).
//!
//! Two rules are fanout's own: a pattern may not reach outside the repository (`..`)
//! nor into `.git`; and bare names and patterns starting with `**` do not look inside
//! directories git ignores (`node_modules/`, `target/`): name the directory to reach
//! into it (`build/**/*.env`, or `build/` for all of it).

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The file of extra patterns at the repository root.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// One pattern line, with where it came from.
#[derive(Debug, Clone)]
struct Line {
    /// `copy: `X`` or `.worktreeinclude:3: `X``, for messages.
    shown: String,
    /// `!pattern`: matching files are taken out again.
    negate: bool,
    /// Taken from the root (a slash before its end); else it matches at any depth.
    anchored: bool,
    /// Its path components, without a leading or trailing `/`.
    comps: Vec<String>,
    /// This pattern alone, un-negated: which files it names.
    alone: Gitignore,
}

/// Check a line's text: `Ok(None)` for blank and comment lines, else its
/// components and whether it is negated and anchored.
fn parse(line: &str) -> Result<Option<(bool, bool, Vec<String>)>, String> {
    let text = line.trim_end();
    if text.trim().is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let (negate, body) = match text.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('\\').unwrap_or(text)),
    };
    let inner = body.trim_end_matches('/');
    let anchored = inner.contains('/');
    let mut comps = Vec::new();
    for c in inner.split('/') {
        match c {
            "" | "." => continue,
            ".." => return Err(format!("`{text}`: `..` would leave the repository")),
            ".git" => return Err(format!("`{text}`: nothing under .git is copied")),
            _ => comps.push(c.to_owned()),
        }
    }
    if comps.is_empty() {
        return Err(format!("`{text}` names no file"));
    }
    Ok(Some((negate, anchored, comps)))
}

/// Build a gitignore matcher of `lines` (relative paths, no root to strip).
fn matcher<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Gitignore, String> {
    let mut b = GitignoreBuilder::new(".");
    for line in lines {
        b.add_line(None, line).map_err(|e| e.to_string())?;
    }
    b.build().map_err(|e| e.to_string())
}

/// Check one `copy:` glob (for the config file).
pub fn check(glob: &str) -> Result<(), String> {
    match parse(glob)? {
        Some(_) => matcher([glob]).map(|_| ()),
        None => Err(format!("`{glob}` is blank or a comment, not a glob")),
    }
}

/// An ordered set of patterns.
#[derive(Debug, Clone)]
pub struct Patterns {
    all: Gitignore,
    lines: Vec<Line>,
}

impl Patterns {
    /// From `copy:` globs (already checked by the config) and the text of
    /// `.worktreeinclude`, if there is one. Errors name the file and line.
    pub fn new(globs: &[String], include: Option<&str>) -> Result<Patterns, String> {
        let mut lines = Vec::new();
        let mut texts = Vec::new();
        let mut add = |text: &str, shown: String, at: &str| -> Result<(), String> {
            let Some((negate, anchored, comps)) = parse(text).map_err(|e| format!("{at}{e}"))?
            else {
                return Ok(());
            };
            let positive = if negate { &text[1..] } else { text };
            let alone = matcher([positive]).map_err(|e| format!("{at}{e}"))?;
            lines.push(Line {
                shown,
                negate,
                anchored,
                comps,
                alone,
            });
            texts.push(text.to_owned());
            Ok(())
        };
        for g in globs {
            add(g, format!("copy: `{g}`"), "copy: ")?;
        }
        for (i, line) in include.unwrap_or("").lines().enumerate() {
            let at = format!("{INCLUDE_FILE}:{}: ", i + 1);
            add(line, format!("{at}`{}`", line.trim_end()), &at)?;
        }
        let all = matcher(texts.iter().map(String::as_str))?;
        Ok(Patterns { all, lines })
    }

    /// No pattern at all.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Is the file at `rel` (`/`-separated, relative to the root) selected? Its own
    /// last matching pattern decides, else its nearest directory's.
    pub fn matches(&self, rel: &str) -> bool {
        self.all
            .matched_path_or_any_parents(Path::new(rel), false)
            .is_ignore()
    }

    /// Should the walk enter the directory `rel`? `ignored` says whether git ignores
    /// it, asked lazily (only when the answer matters).
    pub fn may_contain(&self, rel: &[&str], ignored: &mut dyn FnMut() -> bool) -> Enter {
        if self
            .all
            .matched(Path::new(&rel.join("/")), true)
            .is_ignore()
        {
            return Enter::All;
        }
        let positive = || self.lines.iter().filter(|l| !l.negate);
        let reach = |l: &&Line| !l.anchored || could_reach(&l.comps, rel);
        // Only a pattern that names its first directory looks inside ignored ones.
        let named = |l: &&Line| l.anchored && l.comps.first().is_some_and(|c| c != "**");
        if positive().filter(named).any(|l| reach(&l)) {
            return Enter::Some;
        }
        if positive().any(|l| reach(&l)) && !ignored() {
            return Enter::Some;
        }
        Enter::No
    }

    /// The positive patterns that name none of `selected` (files, relative): each as
    /// `copy: `X`` or `.worktreeinclude:N: `X``.
    pub fn unmatched(&self, selected: &[String]) -> Vec<String> {
        self.lines
            .iter()
            .filter(|l| !l.negate)
            .filter(|l| {
                !selected.iter().any(|f| {
                    l.alone
                        .matched_path_or_any_parents(Path::new(f), false)
                        .is_ignore()
                })
            })
            .map(|l| l.shown.clone())
            .collect()
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

/// Could an anchored pattern of components `p` match something strictly under the
/// directory `d`? (Over-inclusive for components with wildcards: it only prunes the
/// walk.)
fn could_reach(p: &[String], d: &[&str]) -> bool {
    match (p.split_first(), d.split_first()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((first, _)), _) if first == "**" => true,
        (Some((first, rest)), Some((dir, under))) => {
            (first.contains(['*', '?', '[', '\\']) || first == dir) && could_reach(rest, under)
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

    /// Whether a walk from the root selects the file `rel` (git ignores nothing).
    fn selects(p: &Patterns, rel: &str) -> bool {
        let comps: Vec<&str> = rel.split('/').collect();
        (1..comps.len()).all(|k| p.may_contain(&comps[..k], &mut || false) != Enter::No)
            && p.matches(rel)
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
            "[ab].env",
            "\\#notes",
            "kept/",
            "!kept/again.txt",
        ]);
        // a bare name matches at any depth
        assert!(selects(&p, ".env"));
        assert!(selects(&p, "services/api/.env"));
        assert!(!selects(&p, ".env.example"));
        // a slash anchors to the root
        assert!(selects(&p, "config/db.local.yml"));
        assert!(!selects(&p, "sub/config/db.local.yml"));
        assert!(!selects(&p, "config/deep/db.local.yml"));
        // a directory pattern takes everything under it, not a file of that name
        assert!(selects(&p, "fixtures/big/a/b.bin"));
        assert!(!selects(&p, "fixtures/big"));
        assert!(selects(&p, "cache"));
        assert!(selects(&p, "x/cache/entry"));
        // ** spans components, including none
        assert!(selects(&p, "secrets/a.key"));
        assert!(selects(&p, "a/b/secrets/a.key"));
        assert!(selects(&p, "data/x.csv"));
        assert!(selects(&p, "data/2024/01/x.csv"));
        // the last matching pattern decides
        assert!(!selects(&p, "data/skip/x.csv"));
        assert!(!selects(&p, "src/main.rs"));
        // character classes and escapes, as git reads them
        assert!(selects(&p, "a.env"));
        assert!(selects(&p, "deep/b.env"));
        assert!(!selects(&p, "c.env"));
        assert!(selects(&p, "#notes"));
        // a file's own pattern comes before its directory's
        assert!(selects(&p, "kept/other.txt"));
        assert!(!selects(&p, "kept/again.txt"));
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
        assert!(check("./.env").is_ok());
        assert!(check("[ab].env").is_ok());
        assert!(check("{a,b").is_err());
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
    fn patterns_that_name_no_selected_file_are_reported() {
        let p = Patterns::new(
            &["[ab].env".into(), "local/".into(), "!x".into()],
            Some("# c\n.env\n*.pem\n"),
        )
        .unwrap();
        let picked = ["a.env".to_owned(), "local/deep/f".to_owned()];
        assert_eq!(
            p.unmatched(&picked),
            [".worktreeinclude:2: `.env`", ".worktreeinclude:3: `*.pem`"]
        );
        assert_eq!(p.unmatched(&[]).len(), 4);
    }
}
