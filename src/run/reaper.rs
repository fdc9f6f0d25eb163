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
        let children = children_of(me);
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

/// Processes whose parent is `parent`, with their state (`Z`: exited, not reaped).
fn children_of(parent: i32) -> Vec<(i32, char)> {
    procfs::processes()
        .into_iter()
        .filter(|(_, s)| s.ppid == parent)
        .map(|(pid, s)| (pid, s.state))
        .collect()
}

/// The live processes of a worker's tree ([`super::supervisor`] `supervisor` leads
/// its group and is the subreaper of everything beneath it): the members of its group
/// and its children, less itself; exited ones (zombies) do not count. Empty without
/// `/proc`.
pub fn tree_of(supervisor: i32) -> Vec<i32> {
    procfs::processes()
        .into_iter()
        .filter(|&(pid, s)| {
            pid != supervisor && !s.zombie() && (s.ppid == supervisor || s.pgrp == supervisor)
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
