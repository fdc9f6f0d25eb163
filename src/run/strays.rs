//! Processes of a run that outlived its fanout: after fanout itself was killed
//! (SIGKILL: it stops nothing), each worker's supervisor ([`super::supervisor`]) lives
//! on, re-parented, and so does everything it adopted — `setsid` and double-forked
//! daemons, in process groups fanout never recorded. `resume` and `cleanup` find them
//! here and stop them before they touch the run's worktrees again.
//!
//! What is provably the run's: every process fanout starts for run `R` (agent, setup
//! command, check, and the supervisor of each) carries `FANOUT_RUN_ID=R` and
//! `FANOUT_WORKTREE=<its worktree>` in the environment it was started with
//! (`/proc/<pid>/environ`, which no other process can rewrite) — both are needed: a
//! run id like `nightly` may name a run of another repository on the same machine,
//! whose worktrees are elsewhere — and every process beneath one of those is one they
//! started — the kernel
//! re-parents an orphan to the nearest subreaper, the supervisor — so a daemon that
//! cleared its environment is still found while its supervisor lives. A process of
//! another user cannot be read and is never one. fanout's own process and its
//! ancestors are left out (a `fanout resume` started from such a shell stops no
//! shell of the user's). Linux only: without `/proc` nothing is found.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

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

/// One line of `/proc/<pid>/stat`: state, parent, start time.
fn stat(pid: i32) -> Option<(char, i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((
        state,
        fields.get(1)?.parse().ok()?,
        fields.get(19)?.parse().ok()?,
    ))
}

/// Whether `pid` was started with `run` (`FANOUT_RUN_ID=…`) and one of `worktrees`
/// (`FANOUT_WORKTREE=…`) in its environment.
fn marked(pid: i32, run: &[u8], worktrees: &[Vec<u8>]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        vars.contains(&run) && vars.iter().any(|v| worktrees.iter().any(|w| w == v))
    })
}

/// This process and its ancestors.
fn me_and_ancestors(table: &BTreeMap<i32, (char, i32, u64)>) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    let mut pid = std::process::id() as i32;
    while pid > 1 && out.insert(pid) {
        pid = match table.get(&pid) {
            Some(&(_, ppid, _)) => ppid,
            None => break,
        };
    }
    out
}

/// The live processes of run `run_id`, whose worktrees are `worktrees` (see the module
/// docs), fanout's own and its ancestors left out.
pub fn find(run_id: &str, worktrees: &[&Path]) -> Vec<Stray> {
    let run = format!("FANOUT_RUN_ID={run_id}").into_bytes();
    let worktrees: Vec<Vec<u8>> = worktrees
        .iter()
        .map(|w| [b"FANOUT_WORKTREE=", w.as_os_str().as_bytes()].concat())
        .collect();
    let table: BTreeMap<i32, (char, i32, u64)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, (state, _, _))| *state != 'Z')
        .collect();
    let mine = me_and_ancestors(&table);
    let mut run: BTreeSet<i32> = table
        .keys()
        .copied()
        .filter(|&pid| !mine.contains(&pid) && marked(pid, &run, &worktrees))
        .collect();
    // Everything beneath those, to a fixed point.
    loop {
        let more: Vec<i32> = table
            .iter()
            .filter(|(pid, (_, ppid, _))| run.contains(ppid) && !run.contains(pid))
            .map(|(pid, _)| *pid)
            .filter(|pid| !mine.contains(pid))
            .collect();
        if more.is_empty() {
            break;
        }
        run.extend(more);
    }
    run.into_iter()
        .map(|pid| Stray {
            pid,
            start: table[&pid].2,
            name: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_owned())
                .unwrap_or_else(|_| "?".into()),
        })
        .collect()
}

/// [`find`] for run `run_id` with the worktrees its `journal` names.
pub fn of_run(run_id: &str, journal: &super::journal::Journal) -> Vec<Stray> {
    let worktrees: Vec<&Path> = journal
        .entries
        .iter()
        .map(|e| e.worktree_path.as_path())
        .collect();
    find(run_id, &worktrees)
}

/// Whether `s` is still running (not exited, not another process by now).
pub fn alive(s: &Stray) -> bool {
    stat(s.pid).is_some_and(|(state, _, start)| state != 'Z' && start == s.start)
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
    fn a_marked_process_and_what_it_left_are_found_and_stopped() {
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
        while found.len() < 2 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            found = find(&run, &[wt]);
        }
        let pids: Vec<i32> = found.iter().map(|s| s.pid).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(pids.contains(&shell), "{found:?}");
        assert!(!pids.contains(&(other.id() as i32)), "{found:?}");
        assert!(!pids.contains(&(elsewhere.id() as i32)), "{found:?}");
        assert!(found.iter().any(|s| s.name == "sleep"), "{found:?}");
        assert!(stop(&found, Duration::from_secs(5)).is_empty());
        marked.wait().unwrap();
        assert!(find(&run, &[wt]).is_empty());
        for mut c in [other, elsewhere] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
