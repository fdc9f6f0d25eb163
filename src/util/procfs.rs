//! The one reader of Linux's `/proc` (proc(5)): a process's `stat` fields (state,
//! parent, group, start time), its command name, the environment it was started with,
//! the process table, and the boot id. Everything here reads what is there now: a
//! process may exit (or a pid be reused) between two reads, so callers compare start
//! times. Without `/proc` (macOS) every read finds nothing.

use std::path::Path;

/// What fanout reads of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state (`R`, `S`, … ; `Z`: exited, not yet reaped).
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group id.
    pub pgrp: i32,
    /// The start time (clock ticks since boot): the same pid later is another process.
    pub start: u64,
}

impl Stat {
    /// Whether the process has exited (a zombie, not yet reaped).
    pub fn zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// Whether this system has `/proc` to read.
pub fn available() -> bool {
    Path::new("/proc/self/stat").exists()
}

/// `/proc/<pid>/stat`: fields 3 to 5 and 22, read after the command name in
/// parentheses (which may itself hold spaces and parentheses).
pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// [`stat`] of the text of a `stat` file.
fn parse_stat(text: &str) -> Option<Stat> {
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every process now, exited ones not yet reaped included, with its [`Stat`].
pub fn processes() -> Vec<(i32, Stat)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// The command name of `pid` (`/proc/<pid>/comm`), `?` when it cannot be read.
pub fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_else(|_| "?".into())
}

/// The environment a process was started with (`/proc/<pid>/environ`, which no other
/// process can rewrite): `NAME=value` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environ(Vec<u8>);

impl Environ {
    /// Whether `entry` (`NAME=value`, exactly) is among them.
    pub fn has(&self, entry: &[u8]) -> bool {
        self.0.split(|&b| b == 0).any(|v| v == entry)
    }
}

/// The environment `pid` was started with; `None` when it cannot be read (another
/// user's process, or one gone). A process that is exiting or in the middle of an
/// `exec` reads for a moment as having none.
pub fn environ(pid: i32) -> Option<Environ> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .ok()
        .map(Environ)
}

/// Who process `pid` is, beyond its pid: `<start time> <boot id>` (another process
/// that gets the pid later, in this boot or another, has another).
pub fn identity(pid: i32) -> Option<String> {
    Some(format!("{} {}", stat(pid)?.start, boot_id()?))
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let line = "42 (a) b (c) S 7 41 40 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.ppid, s.pgrp, s.start), ('S', 7, 41, 12345));
        assert!(!s.zombie());
        assert_eq!(parse_stat("42 (x) Z 7"), None);
    }

    #[test]
    fn this_process_is_read() {
        let me = std::process::id() as i32;
        let s = stat(me).unwrap();
        assert_eq!(s.ppid, nix::unistd::getppid().as_raw());
        assert!(
            processes()
                .iter()
                .any(|&(p, t)| p == me && t.start == s.start)
        );
        assert!(!comm(me).is_empty());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let entry = [b"PATH=", path.as_encoded_bytes()].concat();
        assert!(environ(me).unwrap().has(&entry));
        assert!(!environ(me).unwrap().has(b"PATH"));
        assert_eq!(stat(-5), None);
    }
}
