//! The last meaningful lines of a worker's log, quoted in the reason of a worker that
//! did not succeed, so a human can act on it ("exit code 1" says little; the agent's
//! "unknown model" or API error says what to do). Bounded and masked: the log is the
//! agent's output, and may hold anything. For a sandboxed worker, what a
//! "Permission denied" line says was refused ([`denied`]): the path of a write, or a
//! network connection, so its reason can say what the sandbox stopped and what
//! allows it.

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

/// What a worker whose connection was refused is told.
pub const NETWORK_ADVICE: &str = "a network connection was denied (\"Permission denied\"), perhaps by the sandbox: a worker reaches the network only through the gateway's proxy (HTTPS_PROXY), to the hosts of `network: allow:` in fanout.yml (add the host there, or set `network: open`), and connects directly only to its own `ports:` block (a server it starts)";

/// What a sandboxed worker's log says the sandbox refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// A write: the path nearest the words `Permission denied` on the first such line
    /// naming an absolute path outside the worktree (`None`: no line names one).
    Write(Option<String>),
    /// A network connection (`Permission denied` or `EACCES` on a connect or a
    /// socket): no path, nothing `writable:` could allow.
    Network,
}

/// What the log at `path` says was denied ([`Denial`]), when a line says so: lines
/// saying `Permission denied` (what a write the sandbox refuses fails with, `EACCES`)
/// — a write, unless the line names no absolute path and it or the one before it is
/// about a connection or a socket (a connect Landlock refuses fails with `EACCES`
/// too); a write wins. For a write,
/// the path nearest those words — the first after them (`Permission denied: '/x'`),
/// else the last before (`cannot create /x: Permission denied`).
pub fn denied(path: &Path, worktree: Option<&Path>) -> Option<Denial> {
    let mut f = std::fs::File::open(path).ok()?;
    let bytes = crate::util::tail_of(&mut f, READ_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<String> = text.lines().map(clean).collect();
    let (mut writes, mut network) = (Vec::new(), false);
    for (i, l) in lines.iter().enumerate() {
        let said = l.contains("Permission denied") || l.contains("EACCES");
        if !said {
            continue;
        }
        let before = i.checked_sub(1).map_or("", |b| lines[b].as_str());
        let names_path = l
            .split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`'))
            .any(|w| w.starts_with('/') && w.len() > 1);
        if !names_path && (is_network(l) || is_network(before)) {
            network = true;
        } else if l.contains("Permission denied") {
            writes.push(l.as_str());
        }
    }
    if writes.is_empty() {
        return network.then_some(Denial::Network);
    }
    let outside = |p: &str| worktree.is_none_or(|w| !Path::new(p).starts_with(w));
    let paths = |text: &str| -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ',' | '(' | ')'))
            .map(|w| w.trim_end_matches([':', '.']))
            .filter(|w| w.starts_with('/') && w.len() > 1 && outside(w))
            .map(str::to_owned)
            .collect()
    };
    Some(Denial::Write(writes.iter().find_map(|l| {
        let (before, after) = l.split_once("Permission denied")?;
        let mut after = paths(after);
        match after.is_empty() {
            false => Some(after.swap_remove(0)),
            true => paths(before).pop(),
        }
    })))
}

/// Whether `line` is about a network connection: it names `connect` or a socket
/// (curl's "Failed to connect", Node's `connect EACCES`, a Python traceback's
/// `sock.connect(sa)`, `socket.create_connection`).
fn is_network(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("connect") || l.contains("socket")
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
            match denied(&p, Some(Path::new("/w/t"))) {
                Some(Denial::Write(p)) => Some(p.unwrap_or_default()),
                Some(Denial::Network) => Some("network".to_owned()),
                None => None,
            }
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
        // A refused connection is no write: no path, the network's advice.
        for log in [
            "curl: (7) Failed to connect to 10.0.0.2 port 443 after 0 ms: Permission denied\n",
            "Error: connect EACCES 10.0.0.2:443\n",
            "  File \"/usr/lib/python3/socket.py\", line 1, in create_connection\n    sock.connect(sa)\nPermissionError: [Errno 13] Permission denied\n",
            "socket: Permission denied\n",
        ] {
            assert_eq!(denied(log), d("network"), "{log}");
        }
        // A write beside it wins.
        assert_eq!(
            denied("connect: Permission denied\ncannot create /x/y: Permission denied\n"),
            d("/x/y")
        );
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
