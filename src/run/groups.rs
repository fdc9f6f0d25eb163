//! Records of the process groups fanout supervises (`logs/w<N>.pgid`, signed like
//! every run record), and telling whether a recorded group is still alive and still
//! fanout's: `kill(-pgid, 0)` says whether the group exists; on Linux, `/proc` says
//! whether it is the same group — the machine has not rebooted since (boot id), the
//! leader, if alive, is the process fanout started (its start time), and otherwise a
//! live member started no earlier than it (a group id cannot be reused while the
//! group has members). A record fanout did not sign is never acted on.

use std::path::Path;

use nix::sys::signal::killpg;
use nix::unistd::Pid;

use crate::util::procfs;
use crate::util::sign::{RecordError, read_signed, write_signed};

/// One recorded process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRecord {
    /// The group id (its leader's pid).
    pub pgid: i32,
    /// The program fanout started as its leader.
    pub program: String,
    /// The leader's start time (clock ticks since boot, `/proc/<pid>/stat`), on Linux.
    pub start: Option<u64>,
    /// The boot the group was started in (`/proc/sys/kernel/random/boot_id`).
    pub boot: Option<String>,
}

/// Record group `pgid` (its leader runs `program`) at `path`, signed.
pub fn record(path: &Path, pgid: i32, program: &str) -> std::io::Result<()> {
    let start = procfs::stat(pgid).map_or_else(|| "-".into(), |s| s.start.to_string());
    let boot = procfs::boot_id().unwrap_or_else(|| "-".into());
    let program = program.replace('\n', " ");
    write_signed(
        path,
        format!("{pgid}\n{program}\n{start}\n{boot}\n").as_bytes(),
    )
}

/// Read the record at `path`; one fanout did not sign is refused.
pub fn read(path: &Path) -> Result<GroupRecord, RecordError> {
    let bytes = read_signed(path)?;
    parse(&bytes).ok_or_else(|| RecordError::Forged(path.to_owned(), "not a process-group record"))
}

/// A record from its bytes: `<pgid>\n<program>\n[<start>\n<boot>\n]`, with a group id
/// above 1 and a program named.
pub fn parse(bytes: &[u8]) -> Option<GroupRecord> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    let pgid: i32 = lines.next()?.trim().parse().ok().filter(|p| *p > 1)?;
    let program = lines.next()?.trim().to_owned();
    let start = lines.next().and_then(|l| l.trim().parse().ok());
    let boot = lines
        .next()
        .map(str::trim)
        .filter(|b| *b != "-" && !b.is_empty())
        .map(str::to_owned);
    (!program.is_empty()).then_some(GroupRecord {
        pgid,
        program,
        start,
        boot,
    })
}

/// Whether the recorded group is alive and still the one fanout started.
pub fn alive(rec: &GroupRecord) -> bool {
    if killpg(Pid::from_raw(rec.pgid), None).is_err() {
        return false;
    }
    if !procfs::available() {
        // No /proc (macOS): the group exists and the record is fanout's.
        return true;
    }
    if rec.boot.is_some() && rec.boot != procfs::boot_id() {
        return false;
    }
    let Some(start) = rec.start else {
        // No start time to tell it by: alive while any of it is more than a zombie
        // (one its parent has yet to reap is gone, though `killpg` still finds it).
        return !members(rec.pgid).is_empty();
    };
    if let Some(leader) = procfs::stat(rec.pgid) {
        if leader.start != start {
            return false;
        }
        if !leader.zombie() {
            return true;
        }
    }
    members(rec.pgid)
        .iter()
        .any(|&(_, started)| started >= start)
}

/// The live processes of recorded group `rec` that fanout cannot prove it started:
/// every process fanout starts for run `run_id` carries `FANOUT_RUN_ID=<run_id>` in the
/// environment it was started with (`/proc/<pid>/environ`, which no other process can
/// rewrite), so a process without it — or that cannot be read — may be anyone's (a
/// record is signed, but an unsandboxed agent can read the key and forge one naming a
/// process of the user's). Each as `(pid, its command name)`. Without `/proc` nothing is
/// provable: the leader is returned.
///
/// A process that is exiting or in the middle of an `exec` reads for a moment as
/// having no environment (a shell script's forks do this all the time): one unmarked
/// is looked at again, for up to [`SETTLE`], and counts only if it is still there,
/// still unmarked, all that time.
pub fn unproven(rec: &GroupRecord, run_id: &str) -> Vec<(i32, String)> {
    let mark = format!("FANOUT_RUN_ID={run_id}");
    if !procfs::available() {
        return vec![(rec.pgid, rec.program.clone())];
    }
    let unmarked = || -> Vec<(i32, u64)> {
        members(rec.pgid)
            .into_iter()
            .filter(|&(pid, _)| !procfs::environ(pid).is_some_and(|e| e.has(mark.as_bytes())))
            .collect()
    };
    let mut left = unmarked();
    let until = std::time::Instant::now() + SETTLE;
    while !left.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(25));
        let again = unmarked();
        left.retain(|p| again.contains(p));
    }
    left.into_iter()
        .map(|(pid, _)| (pid, procfs::comm(pid)))
        .collect()
}

/// How long a process must stay unmarked to count as one fanout cannot prove it
/// started ([`unproven`]).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(300);

/// Live (not zombie) members of group `pgid`: (pid, start time).
fn members(pgid: i32) -> Vec<(i32, u64)> {
    procfs::processes()
        .into_iter()
        .filter(|(_, s)| s.pgrp == pgid && !s.zombie())
        .map(|(pid, s)| (pid, s.start))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn the_leaders_start_time_and_members_tell_a_live_group() {
        // This test process leads no group of its own; use a child that does.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        let rec = GroupRecord {
            pgid,
            program: "sleep".into(),
            start: procfs::stat(pgid).map(|s| s.start),
            boot: procfs::boot_id(),
        };
        assert!(rec.start.is_some());
        assert!(alive(&rec));
        // a leader started at another time is another process
        let other = GroupRecord {
            start: rec.start.map(|s| s + 1),
            ..rec.clone()
        };
        assert!(!alive(&other));
        let rebooted = GroupRecord {
            boot: Some("another boot".into()),
            ..rec.clone()
        };
        assert!(!alive(&rebooted));
        let unstamped = GroupRecord {
            start: None,
            ..rec.clone()
        };
        assert!(alive(&unstamped));
        child.kill().unwrap();
        // Killed, not yet reaped: a zombie, which `killpg` still finds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !procfs::stat(pgid).is_some_and(|s| s.zombie()) {
            assert!(std::time::Instant::now() < deadline, "no zombie");
            std::thread::yield_now();
        }
        assert!(!alive(&unstamped));
        assert!(!alive(&rec));
        child.wait().unwrap();
        assert!(!alive(&rec));
    }
}
