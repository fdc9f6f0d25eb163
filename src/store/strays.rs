//! Processes of a run that outlived its fanout: after fanout itself was killed
//! (SIGKILL: it stops nothing), each worker's supervisor ([`crate::run::supervisor`]) lives
//! on, re-parented, and so does everything it adopted — `setsid` and double-forked
//! daemons, in process groups fanout never recorded. `resume` and `cleanup` find them
//! here and stop them before they touch the run's worktrees again.
//!
//! What is provably the run's: every process fanout starts for run `R` (agent, setup
//! command, check, and the supervisor of each) carries `FANOUT_RUN_ID=R` and
//! `FANOUT_WORKTREE=<its worktree>` in the environment it was started with
//! (`/proc/<pid>/environ`, which no other process can rewrite) — both are needed: a
//! run id like `nightly` may name a run of another repository on the same machine,
//! whose worktrees are elsewhere — and so does everything they start that keeps its
//! environment. Those are stopped without asking. A process beneath one of them
//! without the marks is found too (the kernel re-parents an orphan to the nearest
//! subreaper, the supervisor, so a daemon that cleared its environment is still there
//! while its supervisor lives) but is not provably the run's: a tmux server or ssh
//! ControlMaster an agent started may since hold shells the user opened in it, whose
//! environment tmux cleared. Those are unproven: `resume` stops them only when the user
//! agrees, `cleanup` only with `--yes`. A process of another user cannot be read and is
//! never marked. fanout's own process and its ancestors are left out (a `fanout resume`
//! started from such a shell stops no shell of the user's). Linux only: without `/proc`
//! nothing is found.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::util::procfs::{self, Stat};

/// One live process of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    /// Its pid.
    pub pid: i32,
    /// Its start time (clock ticks since boot): the same pid later is another process.
    pub start: u64,
    /// Its command name.
    pub name: String,
}

impl Stray {
    /// Whether `other` is the same process (same pid, same start).
    fn same(&self, other: &Stray) -> bool {
        (self.pid, self.start) == (other.pid, other.start)
    }
}

/// Whether `pid` was started with `run` (`FANOUT_RUN_ID=…`) and one of `worktrees`
/// (`FANOUT_WORKTREE=…`) in its environment.
fn marked(pid: i32, run: &[u8], worktrees: &[Vec<u8>]) -> bool {
    procfs::environ(pid).is_some_and(|env| env.has(run) && worktrees.iter().any(|w| env.has(w)))
}

/// This process and its ancestors.
fn me_and_ancestors(table: &BTreeMap<i32, Stat>) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    let mut pid = std::process::id() as i32;
    while pid > 1 && out.insert(pid) {
        pid = match table.get(&pid) {
            Some(s) => s.ppid,
            None => break,
        };
    }
    out
}

/// What still runs of a run ([`find`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Processes started with the run's marks in their environment: provably the
    /// run's, stopped without asking.
    pub proven: Vec<Stray>,
    /// Processes beneath one of those without the marks: a daemon that cleared its
    /// environment, but just as well a shell the user opened in a tmux server an agent
    /// started. Not provably the run's: stopped only when the user agrees.
    pub unproven: Vec<Stray>,
}

impl Found {
    /// Whether nothing runs.
    pub fn is_empty(&self) -> bool {
        self.proven.is_empty() && self.unproven.is_empty()
    }

    /// Proven and unproven, together.
    pub fn all(&self) -> Vec<Stray> {
        self.proven.iter().chain(&self.unproven).cloned().collect()
    }
}

/// How long a process beneath the run's must stay unmarked to count as unproven
/// ([`find`]), as for a recorded group's members ([`crate::run::groups::unproven`]).
const SETTLE: Duration = Duration::from_millis(300);

/// The live processes of run `run_id`, whose worktrees are `worktrees` (see the module
/// docs), fanout's own and its ancestors left out: those marked as the run's, and the
/// unmarked ones beneath them. A process that is exiting or in the middle of an `exec`
/// reads for a moment as having no environment: one unmarked is looked at again, for
/// up to [`SETTLE`], and counts as unproven only if it is still there, still unmarked,
/// all that time (one that shows its marks meanwhile is proven).
pub fn find(run_id: &str, worktrees: &[&Path]) -> Found {
    let run = format!("FANOUT_RUN_ID={run_id}").into_bytes();
    let worktrees: Vec<Vec<u8>> = worktrees
        .iter()
        .map(|w| [b"FANOUT_WORKTREE=", w.as_os_str().as_bytes()].concat())
        .collect();
    let mut found = scan(&run, &worktrees);
    let until = Instant::now() + SETTLE;
    while !found.unproven.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(25));
        let again = scan(&run, &worktrees);
        found
            .unproven
            .retain(|s| again.unproven.iter().any(|a| a.same(s)));
        for p in again.proven {
            if !found.proven.iter().any(|s| s.same(&p)) {
                found.proven.push(p);
            }
        }
    }
    found
}

/// One look at the process table: the marked processes, and those beneath them that
/// are not.
fn scan(run: &[u8], worktrees: &[Vec<u8>]) -> Found {
    let table: BTreeMap<i32, Stat> = procfs::processes()
        .into_iter()
        .filter(|(_, s)| !s.zombie())
        .collect();
    let mine = me_and_ancestors(&table);
    let proven: BTreeSet<i32> = table
        .keys()
        .copied()
        .filter(|&pid| !mine.contains(&pid) && marked(pid, run, worktrees))
        .collect();
    // Everything beneath those, to a fixed point.
    let mut beneath = proven.clone();
    loop {
        let more: Vec<i32> = table
            .iter()
            .filter(|(pid, s)| beneath.contains(&s.ppid) && !beneath.contains(pid))
            .map(|(pid, _)| *pid)
            .filter(|pid| !mine.contains(pid))
            .collect();
        if more.is_empty() {
            break;
        }
        beneath.extend(more);
    }
    let stray = |pid: i32| Stray {
        pid,
        start: table[&pid].start,
        name: procfs::comm(pid),
    };
    Found {
        proven: proven.iter().map(|&p| stray(p)).collect(),
        unproven: beneath.difference(&proven).map(|&p| stray(p)).collect(),
    }
}

/// [`find`] for run `run_id` with the worktrees its `journal` names.
pub fn of_run(run_id: &str, journal: &crate::run::journal::Journal) -> Found {
    let worktrees: Vec<&Path> = journal
        .entries
        .iter()
        .map(|e| e.worktree_path.as_path())
        .collect();
    find(run_id, &worktrees)
}

/// Whether `s` is still running (not exited, not another process by now).
pub fn alive(s: &Stray) -> bool {
    procfs::stat(s.pid).is_some_and(|t| !t.zombie() && t.start == s.start)
}

/// Send `sig` to each of `strays` still running.
pub fn signal(strays: &[Stray], sig: Signal) {
    for s in strays.iter().filter(|s| alive(s)) {
        let _ = kill(Pid::from_raw(s.pid), sig);
    }
}

/// Stop `strays`: SIGTERM, up to `grace` for them to go, then SIGKILL; returns those
/// still running after that (none, normally).
pub fn stop(strays: &[Stray], grace: Duration) -> Vec<Stray> {
    let wait = |limit: Duration| {
        let until = Instant::now() + limit;
        while strays.iter().any(alive) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    signal(strays, Signal::SIGTERM);
    wait(grace);
    signal(strays, Signal::SIGKILL);
    wait(Duration::from_secs(5));
    strays.iter().filter(|s| alive(s)).cloned().collect()
}

/// `pid N (name)` for each, joined.
pub fn named(strays: &[Stray]) -> String {
    strays
        .iter()
        .map(|s| format!("pid {} ({})", s.pid, s.name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_process_is_proven_and_what_it_left_unmarked_is_not() {
        // A marked shell whose child cleared its environment; an unmarked process.
        // Another run's process, and one of a run of the same id in another repository.
        let run = format!("strays-test-{}", std::process::id());
        let wt = Path::new("/nowhere/strays/w1");
        let mut marked = std::process::Command::new("sh")
            .args(["-c", "env -i sleep 300 & wait"])
            .env("FANOUT_RUN_ID", &run)
            .env("FANOUT_WORKTREE", wt)
            .spawn()
            .unwrap();
        let other = std::process::Command::new("sleep")
            .arg("300")
            .env("FANOUT_RUN_ID", format!("{run}x"))
            .env("FANOUT_WORKTREE", wt)
            .spawn()
            .unwrap();
        let elsewhere = std::process::Command::new("sleep")
            .arg("300")
            .env("FANOUT_RUN_ID", &run)
            .env("FANOUT_WORKTREE", "/elsewhere/strays/w1")
            .spawn()
            .unwrap();
        let shell = marked.id() as i32;
        let until = Instant::now() + Duration::from_secs(10);
        let mut found = find(&run, &[wt]);
        while found.unproven.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            found = find(&run, &[wt]);
        }
        // The shell is the run's; what cleared its environment beneath it is found,
        // but not provably the run's.
        let pids = |v: &[Stray]| v.iter().map(|s| s.pid).collect::<Vec<_>>();
        assert_eq!(pids(&found.proven), [shell], "{found:?}");
        assert_eq!(found.unproven.len(), 1, "{found:?}");
        assert_eq!(found.unproven[0].name, "sleep", "{found:?}");
        for pid in [other.id() as i32, elsewhere.id() as i32] {
            assert!(!pids(&found.all()).contains(&pid), "{found:?}");
        }
        assert!(stop(&found.all(), Duration::from_secs(5)).is_empty());
        marked.wait().unwrap();
        assert!(find(&run, &[wt]).is_empty());
        for mut c in [other, elsewhere] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
