//! The last meaningful lines of a worker's log, quoted in the reason of a worker that
//! did not succeed, so a human can act on it ("exit code 1" says little; the agent's
//! "unknown model" or API error says what to do). Bounded and masked: the log is the
//! agent's output, and may hold anything. For a sandboxed worker, the path a
//! "Permission denied" line names ([`denied_path`]), so its reason can say which
//! write the sandbox stopped and what allows it.

use std::path::Path;

/// How much of the log's end is read.
const READ_BYTES: u64 = 64 * 1024;
/// Lines quoted.
const LINES: usize = 3;
/// Characters kept of each line.
const LINE_CHARS: usize = 160;

/// The last [`LINES`] meaningful lines of the log at `path` — with a letter or digit
/// (not blank, not a fence or a rule), not JSON (a streaming agent's events), without
/// terminal escapes, not fanout's own `fanout: ` notes — each cut at [`LINE_CHARS`],
/// credentials masked, joined by ` ⏎ `; lines `reason` already holds are left out.
/// `None` when there are none.
pub fn log_excerpt(path: &Path, reason: &str) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let bytes = crate::util::tail_of(&mut f, READ_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let mut picked: Vec<String> = text
        .lines()
        .map(clean)
        // A line says something when it has a letter or digit and is not JSON.
        .filter(|l| l.chars().any(char::is_alphanumeric))
        .filter(|l| !l.starts_with('{') && !l.starts_with('['))
        // fanout's own notes in the log (setup steps) are not the agent's.
        .filter(|l| !l.starts_with("fanout: "))
        .filter(|l| !reason.contains(l.as_str()))
        .collect();
    picked.dedup();
    let picked = &picked[picked.len().saturating_sub(LINES)..];
    (!picked.is_empty()).then(|| picked.join(" ⏎ "))
}

/// What the log at `path` says was denied: on the first line saying `Permission
/// denied` (what a write the sandbox refuses fails with, `EACCES`) that names an
/// absolute path outside `worktree`, the path nearest those words — the first after
/// them (`Permission denied: '/x'`), else the last before (`cannot create /x:
/// Permission denied`); `Some(None)` when such lines name no path; `None` when no
/// line says it.
pub fn denied_path(path: &Path, worktree: Option<&Path>) -> Option<Option<String>> {
    let mut f = std::fs::File::open(path).ok()?;
    let bytes = crate::util::tail_of(&mut f, READ_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let denied: Vec<String> = text
        .lines()
        .filter(|l| l.contains("Permission denied"))
        .map(clean)
        .collect();
    if denied.is_empty() {
        return None;
    }
    let outside = |p: &str| worktree.is_none_or(|w| !Path::new(p).starts_with(w));
    let paths = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | '(' | ')'))
            .map(|w| w.trim_end_matches([':', '.']))
            .filter(|w| w.starts_with('/') && w.len() > 1 && outside(w))
            .map(str::to_owned)
            .collect()
    };
    Some(denied.iter().find_map(|l| {
        let (before, after) = l.split_once("Permission denied")?;
        let mut after = paths(after);
        match after.is_empty() {
            false => Some(after.swap_remove(0)),
            true => paths(before).pop(),
        }
    }))
}

/// One line without escape sequences or control characters, trimmed, cut, masked.
fn clean(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ … final byte in @–~.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        if !c.is_control() {
            out.push(c);
        }
    }
    let trimmed = out.trim();
    let cut: String = if trimmed.chars().count() > LINE_CHARS {
        let head: String = trimmed.chars().take(LINE_CHARS - 1).collect();
        format!("{head}…")
    } else {
        trimmed.to_owned()
    };
    crate::secret::mask_tokens(&cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_denied_is_the_one_nearest_the_words() {
        let dir = tempfile::tempdir().unwrap();
        let denied = |log: &str| {
            let p = dir.path().join("log");
            std::fs::write(&p, log).unwrap();
            denied_path(&p, Some(Path::new("/w/t"))).map(|p| p.unwrap_or_default())
        };
        let d = |s: &str| Some(s.to_owned());
        assert_eq!(
            denied("/a/agent.sh: 2: cannot create /x/out.txt: Permission denied\n"),
            d("/x/out.txt")
        );
        assert_eq!(
            denied("touch: cannot touch '/x/y': Permission denied\n"),
            d("/x/y")
        );
        assert_eq!(
            denied("PermissionError: [Errno 13] Permission denied: '/x/z.txt'\n"),
            d("/x/z.txt")
        );
        // In the worktree it is no sandbox's doing; no line says it: nothing.
        assert_eq!(denied("cannot create /w/t/a: Permission denied\n"), d(""));
        assert_eq!(denied("all good\n"), None);
    }

    #[test]
    fn the_last_meaningful_lines_bounded_and_masked() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w1.log");
        let noise = "x".repeat(300);
        std::fs::write(
            &log,
            format!(
                "starting\n{{\"type\":\"event\"}}\n```\n---\n\n\u{1b}[31merror:\u{1b}[0m model `gpt-9` not found\nkey ghp_abcdefghijklmnop1234 rejected\n{noise}\n   \nexit code 1\n"
            ),
        )
        .unwrap();
        let got = log_excerpt(&log, "exit code 1").unwrap();
        let want = format!(
            "error: model `gpt-9` not found ⏎ key *** rejected ⏎ {}…",
            "x".repeat(159)
        );
        assert_eq!(got, want);
        assert_eq!(log_excerpt(&dir.path().join("none.log"), ""), None);
        std::fs::write(&log, "\n{\"a\":1}\n").unwrap();
        assert_eq!(log_excerpt(&log, ""), None);
    }
}
