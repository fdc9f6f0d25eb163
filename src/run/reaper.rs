//! fanout as the reaper of whatever its workers leave running. A worker's process
//! group is stopped when its agent exits ([`super::process`]), but a process can leave
//! its group: a daemon that forks twice and calls `setsid`. fanout makes itself a
//! child subreaper ([`adopt_orphans`], `PR_SET_CHILD_SUBREAPER`), so such a process is
//! re-parented to fanout rather than to init, and [`sweep`] kills and reaps every
//! child fanout still has once its workers are done — before the run reports,
//! publishes or exits — so no daemon an agent started outlives the run (or rewrites
//! its records after it).

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::util::procfs;

/// Become the reaper of every orphan among this process's descendants (Linux; a no-op
/// elsewhere).
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// How long [`sweep`] waits for killed processes to be gone.
const SWEEP_WAIT: Duration = Duration::from_secs(5);

/// Kill (SIGKILL) and reap every child of this process, round after round until none
/// is left (a dying child's own children are re-parented here); returns how many were
/// still running (children that had already exited are only reaped). Only for when
/// fanout has no child of its own left running.
pub fn sweep() -> usize {
    let me = nix::unistd::getpid().as_raw();
    let until = Instant::now() + SWEEP_WAIT;
    let mut seen = std::collections::BTreeSet::new();
    let mut running = 0;
    loop {
        // Most runs leave nothing: then there is no child at all, and no need to read
        // every process's record.
        if !has_children() {
            break;
        }
        let children = descendants(me, &procfs::processes());
        if children.is_empty() {
            break;
        }
        for (pid, state) in &children {
            let pid = Pid::from_raw(*pid);
            if seen.insert(pid) && *state != 'Z' {
                running += 1;
                let _ = kill(pid, Signal::SIGKILL);
            }
            let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
        }
        if Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    running
}

/// Whether this process has any child, running or exited (`waitid` with `WNOWAIT`:
/// nothing is reaped, so no waiter elsewhere in fanout loses its child's status).
fn has_children() -> bool {
    use nix::sys::wait::{Id, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    !matches!(waitid(Id::All, flags), Err(nix::errno::Errno::ECHILD))
}

/// Every process beneath `root` in `all` (one reading of `/proc`), each with its state
/// (`Z`: exited, not reaped), however deep: a chain of processes each leaving its
/// group is killed in one round, not a level a round.
fn descendants(root: i32, all: &[(i32, procfs::Stat)]) -> Vec<(i32, char)> {
    let mut below: std::collections::HashMap<i32, Vec<(i32, char)>> = Default::default();
    for (pid, s) in all {
        below.entry(s.ppid).or_default().push((*pid, s.state));
    }
    let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::from([root]));
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &(pid, state) in below.get(&p).map_or(&[][..], Vec::as_slice) {
            if seen.insert(pid) {
                out.push((pid, state));
                todo.push(pid);
            }
        }
    }
    out
}

/// The live processes of a worker's tree ([`super::supervisor`] `supervisor` leads
/// its group and is the subreaper of everything beneath it): the members of its group
/// and everything beneath it, less itself; exited ones (zombies) do not count. Empty
/// without `/proc`.
pub fn tree_of(supervisor: i32) -> Vec<i32> {
    let all = procfs::processes();
    let mut tree: Vec<i32> = descendants(supervisor, &all)
        .into_iter()
        .filter(|&(_, state)| state != 'Z')
        .map(|(pid, _)| pid)
        .collect();
    for (pid, s) in &all {
        if *pid != supervisor && s.pgrp == supervisor && !s.zombie() && !tree.contains(pid) {
            tree.push(*pid);
        }
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_beneath_is_found_however_deep() {
        let stat = |ppid, pgrp| procfs::Stat {
            state: 'S',
            ppid,
            pgrp,
            start: 0,
        };
        // 10 ← 11 ← 12 ← … ← 809: a chain 800 deep, each in a group of its own; 5 and
        // 6 are someone else's.
        let mut all: Vec<(i32, procfs::Stat)> = (11..810).map(|p| (p, stat(p - 1, p))).collect();
        all.extend([(5, stat(1, 5)), (6, stat(5, 5)), (10, stat(1, 10))]);
        let mut found: Vec<i32> = descendants(10, &all).into_iter().map(|(p, _)| p).collect();
        found.sort_unstable();
        assert_eq!(found, (11..810).collect::<Vec<_>>());
    }

    #[test]
    fn a_child_is_seen_until_it_is_reaped_and_seeing_it_reaps_nothing() {
        // Other tests of this binary may have children of their own: only what this
        // child changes is asserted.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        assert!(has_children());
        // Let it exit: still a child (a zombie) until reaped, and `has_children`
        // must not have reaped it, so its status is still there to collect.
        std::thread::sleep(Duration::from_millis(50));
        assert!(has_children());
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
}
