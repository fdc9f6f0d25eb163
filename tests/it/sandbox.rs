//! The agent sandbox (issue #11, part S) with the real binary and real processes:
//! what a confined worker can and cannot write, that an honest worker still commits
//! (its objects reach the shared store through its quarantine, its branch is made at
//! harvest), that harvest never trusts the worktree's `.git` file, that no daemon an
//! agent starts outlives the run, how the Landlock ABI is chosen (`sandbox:` modes,
//! the `FANOUT_LANDLOCK_MAX_ABI` knob, a kernel without Landlock simulated by a
//! seccomp filter), `fanout sandbox`'s report, and that what you do in your own
//! repository while a sandboxed run goes on is kept and blames no worker.
//!
//! Every scenario here needs Landlock (ABI 6 or later for the signal test); the
//! tests say so and fail where the kernel lacks it, rather than passing vacuously.

#![cfg(target_os = "linux")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// A repository with a command agent running `script` (a shell script body) and
/// worktrees under the test's directory; `extra` goes at the end of fanout.yml,
/// `agent_extra` under the agent's definition.
fn setup(t: &TestEnv, script: &str, agent_extra: &str, extra: &str) -> PathBuf {
    let path = t.root().join("agent.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, '{}']\n    result: {{format: exit-code}}\n{agent_extra}{extra}",
        t.worktrees.display(),
        path.display()
    ))
}

fn run(t: &TestEnv, cfg: &Path, args: &[&str]) -> (Output, Value) {
    let out = run_with(t, cfg, args, |_| {});
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}, {:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

fn run_with(t: &TestEnv, cfg: &Path, args: &[&str], tweak: impl FnOnce(&mut Command)) -> Output {
    let mut c = t.fanout(&["--config", cfg.to_str().unwrap(), "run", "--json", "-q"]);
    c.args(args);
    tweak(&mut c);
    c.output().unwrap()
}

fn log(r: &Value) -> String {
    std::fs::read_to_string(r["log_path"].as_str().unwrap_or("/nonexistent")).unwrap_or_default()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The kernel's Landlock ABI (from `fanout sandbox --json`); panics without one, so
/// that these tests never pass on a machine that cannot run them.
fn kernel_abi(t: &TestEnv) -> u64 {
    let out = t.fanout(&["sandbox", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["landlock_abi"]
        .as_u64()
        .unwrap_or_else(|| panic!("these tests need Landlock: {v}"))
}

#[test]
fn a_confined_worker_writes_only_its_worktree_temp_dir_and_writable_paths() {
    let t = TestEnv::new();
    let cache = t.root().join("cache");
    let outside = t.root().join("outside.txt");
    let cfg = setup(
        &t,
        &format!(
            r#"try() {{ what=$1; shift; if "$@" 2>/dev/null; then echo "DID $what"; else echo "DENIED $what"; fi; }}
echo work > mine.txt
try tmp sh -c 'echo x > "$(mktemp)"'
try devnull sh -c 'echo x > /dev/null'
try cache sh -c 'echo x > "{cache}/entry"'
try outside sh -c 'echo x > "{outside}"'
try home sh -c 'echo x > "$HOME/.profile"'
try checkout sh -c 'echo x >> "{repo}/README.md"'
try parent sh -c 'echo x > ../escape.txt'
try refs git update-ref refs/heads/main HEAD
try config git config user.name mallory
try objects sh -c 'echo x > "$(git rev-parse --git-common-dir)/objects/planted"'
try other-admin sh -c 'mkdir -p "$(git rev-parse --git-common-dir)/worktrees/other"'
"#,
            cache = cache.display(),
            outside = outside.display(),
            repo = t.repo.display(),
        ),
        &format!("    writable: ['{}']\n", cache.display()),
        "sandbox: required\n",
    );
    let config_before = std::fs::read(t.repo.join(".git/config")).unwrap();
    let (out, report) = run(&t, &cfg, &["-w", "1", "work"]);
    let r = &report["results"][0];
    let log = log(r);
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{log}");
    for did in ["tmp", "devnull", "cache"] {
        assert!(log.contains(&format!("DID {did}\n")), "{did}:\n{log}");
    }
    for denied in [
        "outside",
        "home",
        "checkout",
        "parent",
        "refs",
        "config",
        "objects",
        "other-admin",
    ] {
        assert!(
            log.contains(&format!("DENIED {denied}\n")),
            "{denied}:\n{log}"
        );
    }
    assert!(!outside.exists());
    assert!(!t.home.join(".profile").exists());
    assert_eq!(
        std::fs::read(t.repo.join(".git/config")).unwrap(),
        config_before
    );
    assert_eq!(r["sandboxed"], true, "{r:#}");
    assert_eq!(r["sandbox_abi"].as_u64(), Some(kernel_abi(&t)), "{r:#}");
    let summary = std::fs::read_to_string(t.run_dir(&t.runs()[0]).join("summary.md")).unwrap();
    assert!(
        summary.contains("Sandbox: every worker ran confined"),
        "{summary}"
    );
}

/// Honest work: commits (amended too), with the sandbox on; the objects reach the
/// shared store, the branch is made at harvest at the agent's own commit, and the
/// worktree is left on it, clean.
#[test]
fn an_honest_worker_commits_through_its_quarantine() {
    let t = TestEnv::new();
    let cfg = setup(
        &t,
        r#"echo "one $FANOUT_WORKER_ID" > "w$FANOUT_WORKER_ID.txt"
git add -A && git commit -q -m "first" || exit 11
echo more >> "w$FANOUT_WORKER_ID.txt" && git commit -q -a -m "second" || exit 12
git commit -q --amend -m "the agent's own commit" || exit 13
git log --oneline -2 >/dev/null && git diff HEAD~1 --stat >/dev/null || exit 14
echo left over > leftover.txt
# staged, never committed: its objects are only in the quarantine (aider does this)
echo staged > staged.txt && mkdir -p sub && : > sub/empty.txt && git add staged.txt sub
git write-tree >/dev/null
"#,
        "",
        "sandbox: required\n",
    );
    let (out, report) = run(&t, &cfg, &["-w", "2", "-t", "a", "-t", "b"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report:#}\n{}",
        text(&out.stderr)
    );
    for r in report["results"].as_array().unwrap() {
        let branch = r["branch"].as_str().unwrap();
        let id = r["worker_id"].as_u64().unwrap();
        assert_eq!(r["committed_by_fanout"], true, "{r:#}");
        assert_eq!(
            t.git(&["log", "--format=%s", &format!("{branch}~1..{branch}")]),
            format!("fanout: {}\n", r["task"].as_str().unwrap()),
        );
        assert_eq!(
            t.git(&["log", "-1", "--format=%s", &format!("{branch}~1")])
                .trim(),
            "the agent's own commit"
        );
        assert_eq!(
            t.git(&["show", &format!("{branch}:w{id}.txt")]),
            format!("one {id}\nmore\n")
        );
        assert_eq!(
            t.git(&["show", &format!("{branch}:staged.txt")]),
            "staged\n"
        );
        assert_eq!(t.git(&["show", &format!("{branch}:sub/empty.txt")]), "");
        assert_eq!(
            t.git(&["show", &format!("{branch}:leftover.txt")]),
            "left over\n"
        );
        // the worktree is on the branch's commit, with nothing left to commit
        let wt = PathBuf::from(r["worktree_path"].as_str().unwrap());
        let head = t.git_in(&wt, &["rev-parse", "HEAD"]);
        assert_eq!(head, t.git(&["rev-parse", branch]));
        assert_eq!(t.git_in(&wt, &["status", "--porcelain"]), "");
    }
    // Every object is in the shared store: with the worktrees (and their quarantines)
    // gone, the branches are whole.
    t.run_ok(&[
        "--config",
        cfg.to_str().unwrap(),
        "cleanup",
        "--all",
        "--keep-branches",
    ]);
    assert!(
        !t.repo
            .join(".git/worktrees")
            .read_dir()
            .unwrap()
            .any(|_| true)
    );
    t.git(&["fsck", "--connectivity-only", "--no-dangling"]);
    for r in report["results"].as_array().unwrap() {
        t.git(&["cat-file", "-e", r["commit"].as_str().unwrap()]);
    }
}

/// The agent names another object store in its own object directory (which it may
/// write: `info/alternates`), and commits a tree that holds a blob only that store has
/// — one it may not read itself, say in a `hidden:` repository. Harvest runs outside
/// the sandbox, and libgit2 follows such a list: harvest imports nothing from an
/// object directory that holds one (or a link), and the worker fails saying why.
#[test]
fn harvest_imports_no_object_from_a_store_the_agent_named() {
    let t = TestEnv::new();
    let other = t.root().join("other");
    std::fs::create_dir_all(&other).unwrap();
    t.git_in(&other, &["init", "-q"]);
    std::fs::write(other.join("secret.txt"), "TOP SECRET 42\n").unwrap();
    let blob = t
        .git_in(&other, &["hash-object", "-w", "secret.txt"])
        .trim()
        .to_owned();
    let objects = other.join(".git/objects");
    let cfg = setup(
        &t,
        &format!(
            r#"echo '{}' > "$GIT_OBJECT_DIRECTORY/info/alternates" || mkdir -p "$GIT_OBJECT_DIRECTORY/info" && echo '{}' > "$GIT_OBJECT_DIRECTORY/info/alternates" || exit 9
tree=$(printf '100644 blob {blob}	leak.txt
' | git mktree --missing) || exit 10
commit=$(git commit-tree "$tree" -p HEAD -m leak) || exit 11
git update-ref --no-deref HEAD "$commit" || exit 12
echo work > work.txt
"#,
            objects.display(),
            objects.display()
        ),
        "",
        "",
    );
    let (_, report) = run(&t, &cfg, &["-t", "leak"]);
    let r = &report["results"][0];
    assert_eq!(r["status"], "failed", "{r:#}");
    assert!(
        r["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("a list of other object stores"),
        "{r:#}"
    );
    let present = t
        .command("git", &t.repo)
        .args(["cat-file", "-e", &blob])
        .status()
        .unwrap();
    assert!(
        !present.success(),
        "the blob was imported into the repository"
    );
}

/// A file changed in the same clock tick as the index was written ("racy" in git's
/// words: same size and times as its entry) is still read, by harvest and by
/// `cleanup`'s look for unsaved work (which finds a deleted file too), though both
/// work on a copy of the worktree's index, and though the agent marked files for git
/// not to look at and forged setup's record of what it copied (which the sandbox
/// cannot keep it from writing: it is in the worktree's git directory). The tick is
/// simulated: the file and the index get the same
/// modification time, and ctime is not compared (`core.trustctime=false`).
#[test]
fn a_change_in_the_index_writes_clock_tick_is_committed_and_kept() {
    let t = TestEnv::new();
    t.git(&["config", "core.trustctime", "false"]);
    let cfg = setup(
        &t,
        r#"git update-index --skip-worktree README.md && git update-index --assume-unchanged src/lib.rs || exit 10
printf '{"copied":["README.md","src/lib.rs"]}' > "$(git rev-parse --git-dir)/fanout-setup.json" || exit 9
printf aaaa > racy.txt && touch -d @1700000000 racy.txt || exit 11
git add racy.txt && git commit -q -m "the agent's own commit" || exit 12
printf bbbb > racy.txt && touch -d @1700000000 racy.txt || exit 13
touch -d @1700000000 "$(git rev-parse --git-path index)" || exit 14
"#,
        "",
        "",
    );
    let (out, report) = run(&t, &cfg, &["-t", "racy"]);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    let r = &report["results"][0];
    let branch = r["branch"].as_str().unwrap();
    assert_eq!(t.git(&["show", &format!("{branch}:racy.txt")]), "bbbb");
    // The same tick after the run: the user's last edit is unsaved work, and so are a
    // file they deleted and one they edited, though the agent marked both for git not
    // to look at, and wrote a setup baseline saying setup copied them.
    let wt = PathBuf::from(r["worktree_path"].as_str().unwrap());
    std::fs::write(wt.join("racy.txt"), "cccc").unwrap();
    std::fs::remove_file(wt.join("src/lib.rs")).unwrap();
    std::fs::write(wt.join("README.md"), "the user's own words\n").unwrap();
    let index = t.git_in(
        &wt,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    );
    for path in [wt.join("racy.txt"), PathBuf::from(index.trim())] {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
            .unwrap();
    }
    let out = t
        .fanout(&["--config", cfg.to_str().unwrap(), "cleanup", "--all"])
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(wt.join("racy.txt").exists(), "{said}");
    assert!(
        said.contains("uncommitted work (README.md, racy.txt, src/lib.rs)"),
        "{said}"
    );
}

/// An agent (sandboxed or not: the worktree is its own) points its worktree's `.git`
/// file at the user's repository and leaves changes: harvest puts the file back and
/// commits them on the worker's branch, never in the user's repository; the worker
/// fails for it (see tests/hostile.rs rewrites_its_worktrees_git_files).
#[test]
fn harvest_never_follows_the_worktree_git_file() {
    for mode in ["required", "off"] {
        let t = TestEnv::new();
        let cfg = setup(
            &t,
            &format!(
                "echo planted > planted.txt\necho 'gitdir: {}/.git' > .git\n",
                t.repo.display()
            ),
            "",
            &format!("sandbox: {mode}\n"),
        );
        let main = t.git(&["rev-parse", "main"]);
        let before = t.snapshot();
        let (_, report) = run(&t, &cfg, &["-w", "1", "plant"]);
        let r = &report["results"][0];
        assert_eq!(r["status"], "failed", "{mode}: {r:#}\n{}", log(r));
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("the worktree's .git (restored)"),
            "{mode}: {reason}"
        );
        assert_eq!(t.git(&["rev-parse", "main"]), main, "{mode}");
        assert_eq!(
            t.snapshot(),
            before,
            "{mode}: the user's checkout or index changed"
        );
        let branch = r["branch"].as_str().unwrap();
        assert_eq!(
            t.git(&["show", &format!("{branch}:planted.txt")]),
            "planted\n"
        );
        assert_eq!(
            r["files_modified"],
            serde_json::json!(["planted.txt"]),
            "{mode}"
        );
    }
}

/// A daemon that forks twice and calls `setsid` leaves the agent's process group;
/// its worker's supervisor (a child subreaper) has it stopped before the harvest.
#[test]
fn no_daemon_outlives_the_run() {
    for mode in ["required", "off"] {
        let t = TestEnv::new();
        let m = marker("daemon");
        let cfg = setup(
            &t,
            &format!(
                r#"echo work > work.txt
python3 -c '
import os, sys, time
if os.fork(): sys.exit(0)
os.setsid()
if os.fork(): os._exit(0)
open("daemon.pid", "w").write(str(os.getpid()))
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2): os.dup2(null, fd)
time.sleep(300)
' {m}
while [ ! -s daemon.pid ]; do sleep 0.05; done
"#
            ),
            "",
            &format!("sandbox: {mode}\n"),
        );
        let (out, report) = run(&t, &cfg, &["-w", "1", "daemonize"]);
        let r = &report["results"][0];
        let wt = PathBuf::from(r["worktree_path"].as_str().unwrap());
        let pid = std::fs::read_to_string(wt.join("daemon.pid")).unwrap();
        assert!(
            processes_with(&m).is_empty(),
            "{mode}: the daemon {pid} outlived the run: {:?}",
            processes_with(&m)
        );
        // Stopped with its worker, before the harvest: nothing left for the run's end.
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("left processes running; fanout stopped them before harvest"),
            "{mode}: {r}"
        );
        assert!(
            !text(&out.stderr).contains("the agents left running"),
            "{mode}"
        );
    }
}

/// From ABI 6 a confined agent cannot signal fanout (nor any process outside its
/// sandbox); `FANOUT_LANDLOCK_MAX_ABI=5` lowers the ABI fanout uses, but the agent's
/// own domain under its supervisor still scopes signals where the kernel can.
#[test]
fn signals_are_scoped_from_abi_6_and_the_knob_lowers_the_abi() {
    let t = TestEnv::new();
    assert!(kernel_abi(&t) >= 6, "this test needs Landlock ABI 6");
    let cfg = setup(
        &t,
        "echo work > work.txt\nif kill -0 \"$(cut -d\" \" -f4 /proc/$PPID/stat)\" 2>/dev/null; then echo SIGNAL-SENT; else echo SIGNAL-DENIED; fi\n",
        "",
        "",
    );
    let (_, report) = run(&t, &cfg, &["-w", "1", "signal"]);
    let r = &report["results"][0];
    assert!(log(r).contains("SIGNAL-DENIED"), "{}", log(r));
    let out = run_with(&t, &cfg, &["-w", "1", "signal"], |c| {
        c.env("FANOUT_LANDLOCK_MAX_ABI", "5");
    });
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report["results"][0];
    // The agent's own domain, nested in its supervisor's, is scoped for signals
    // whenever the kernel can (run/supervisor.rs): the knob does not lower that.
    assert!(log(r).contains("SIGNAL-DENIED"), "{}", log(r));
    assert_eq!(r["sandbox_abi"], 5, "{r:#}");
    assert_eq!(r["sandboxed"], true, "{r:#}");
}

/// `required` needs ABI 3: at ABI 2 it refuses up front (exit 2, nothing made); `auto`
/// confines at ABI 2 and says what is left open; at ABI 1 `auto` runs unconfined and
/// says so, on stderr and in the summary.
#[test]
fn the_abi_decides_required_and_auto() {
    let t = TestEnv::new();
    let cfg = setup(&t, "echo work > work.txt\n", "", "sandbox: required\n");
    let branches = t.branches();
    let out = run_with(&t, &cfg, &["-w", "1", "x"], |c| {
        c.env("FANOUT_LANDLOCK_MAX_ABI", "2");
    });
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sandbox: required, but Landlock ABI 2 is available") && err.contains("ABI 3"),
        "{err}"
    );
    assert!(t.runs().is_empty());
    assert_eq!(t.branches(), branches);
    assert!(!t.worktrees.exists());

    let cfg = setup(&t, "echo work > work.txt\n", "", "sandbox: auto\n");
    for (abi, sandboxed, says) in [
        ("2", true, "may still truncate files outside their worktree"),
        ("1", false, "agents run WITHOUT a sandbox"),
    ] {
        let out = run_with(&t, &cfg, &["-w", "1", "x"], |c| {
            c.env("FANOUT_LANDLOCK_MAX_ABI", abi);
        });
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &report["results"][0];
        assert_eq!(r["status"], "success", "ABI {abi}: {r:#}\n{}", log(r));
        assert_eq!(r["sandboxed"], sandboxed, "ABI {abi}: {r:#}");
        let err = text(&out.stderr);
        assert_eq!(err.matches(says).count(), 1, "ABI {abi}: said once: {err}");
        assert!(report["sandbox_notice"].as_str().unwrap().contains(says));
        let run = report["run_id"].as_str().unwrap();
        let summary = std::fs::read_to_string(t.run_dir(run).join("summary.md")).unwrap();
        assert!(summary.contains(says), "ABI {abi}: {summary}");
    }
}

/// A kernel without Landlock (a seccomp filter makes its system calls fail with
/// ENOSYS): `fanout sandbox` says so; `required` refuses before anything is made;
/// `auto` runs unconfined and says so once.
#[test]
fn without_landlock_required_refuses_and_auto_says_so() {
    let t = TestEnv::new();
    let mut c = t.fanout(&["sandbox"]);
    without_landlock(&mut c);
    let out = c.output().unwrap();
    let said = text(&out.stdout);
    assert!(said.contains("Landlock: unavailable"), "{said}");
    assert!(said.contains("ENOSYS"), "{said}");

    let cfg = setup(&t, "touch \"$HOME/agent-ran\"\n", "", "sandbox: required\n");
    let out = run_with(&t, &cfg, &["-w", "1", "x"], without_landlock);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sandbox: required, but the kernel has no Landlock (ENOSYS)"),
        "{err}"
    );
    assert!(t.runs().is_empty() && !t.worktrees.exists());
    assert!(!t.home.join("agent-ran").exists());

    let cfg = setup(&t, "echo work > work.txt\n", "", "");
    let out = run_with(
        &t,
        &cfg,
        &["-w", "2", "-t", "a", "-t", "b"],
        without_landlock,
    );
    let err = text(&out.stderr);
    assert_eq!(
        err.matches("WITHOUT a sandbox").count(),
        1,
        "said once: {err}"
    );
    assert!(err.contains("the kernel has no Landlock (ENOSYS)"), "{err}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in report["results"].as_array().unwrap() {
        assert_eq!(
            (&r["status"], &r["sandboxed"]),
            (&"success".into(), &false.into()),
            "{r:#}"
        );
    }
}

/// Run `c` with Landlock missing: a seccomp filter (installed in the child before it
/// execs fanout, and inherited by everything fanout starts) makes the three Landlock
/// system calls fail with ENOSYS, as on a kernel built without it.
fn without_landlock(c: &mut Command) {
    use nix::libc;
    use std::os::unix::process::CommandExt;
    fn install() -> std::io::Result<()> {
        // landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: 444–446 on
        // every architecture (system calls added after 5.1 share one number table).
        const FIRST: u32 = 444;
        const LAST: u32 = 446;
        const LD_W_ABS: u16 = 0x20;
        const JGE_K: u16 = 0x35;
        const JGT_K: u16 = 0x25;
        const RET_K: u16 = 0x06;
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        let filter = [
            ins(LD_W_ABS, 0, 0, 0), // A = seccomp_data.nr
            ins(JGE_K, 0, 2, FIRST),
            ins(JGT_K, 1, 0, LAST),
            ins(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
            ins(RET_K, 0, 0, RET_ALLOW),
        ];
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: plain system calls between fork and exec, on data that outlives them.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    // SAFETY: `install` only makes system calls (async-signal-safe).
    unsafe {
        c.pre_exec(install);
    }
}

/// `fanout sandbox --json` reports the kernel's ABI, and what each mode does.
#[test]
fn the_probe_reports_the_abi() {
    let t = TestEnv::new();
    let out = t
        .fanout(&["sandbox", "--json"])
        .env("FANOUT_LANDLOCK_MAX_ABI", "4")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kernel = v["kernel_abi"].as_u64().expect("Landlock");
    assert_eq!(v["landlock_abi"].as_u64(), Some(kernel.min(4)), "{v}");
    assert_eq!(v["auto"]["confined"], kernel >= 2, "{v}");
    assert_eq!(v["required"]["ok"], kernel >= 3, "{v}");
    let _ = Duration::ZERO;
}

/// `plan --sandbox` records the mode in the plan, which matrix workers follow;
/// `worker --sandbox` overrides it.
#[test]
fn the_plan_carries_the_mode_and_a_worker_may_override_it() {
    let t = TestEnv::new();
    let cfg = setup(&t, "echo work > work.txt\n", "", "");
    let cfg = cfg.to_str().unwrap();
    for (run, flag, sandboxed) in [("plan-a", None, true), ("plan-b", Some("off"), false)] {
        let plan = t.root().join(format!("{run}.json"));
        let plan = plan.to_str().unwrap();
        let args = [
            "--config",
            cfg,
            "plan",
            "--sandbox",
            "required",
            "--run-id",
            run,
            "-w",
            "1",
            "--plan-file",
            plan,
            "x",
        ];
        t.run_ok(&args);
        let p: Value = serde_json::from_slice(&std::fs::read(plan).unwrap()).unwrap();
        assert_eq!(p["sandbox"], "required", "{p:#}");
        let out = t.root().join(format!("out-{run}"));
        let mut args = vec![
            "--config",
            cfg,
            "worker",
            "--plan",
            plan,
            "--id",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(flag.iter().flat_map(|f| ["--sandbox", f]));
        t.run_ok(&args);
        let r: Value = serde_json::from_slice(
            &std::fs::read(out.join("fanout-result-1/result.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(r["result"]["sandboxed"], sandboxed, "{run}: {r:#}");
        assert_eq!(r["result"]["status"], "success", "{run}: {r:#}");
    }
}

#[test]
fn your_own_commits_and_branches_during_a_sandboxed_run_are_kept_and_blame_no_worker() {
    let t = TestEnv::new();
    kernel_abi(&t);
    let (started, gate) = (t.shared().join("started"), t.shared().join("go"));
    let script = format!(
        "touch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\necho work > work.txt",
        started.display(),
        gate.display()
    );
    let cfg = setup(
        &t,
        &script,
        &format!("    writable: ['{}']\n", t.shared().display()),
        "",
    );
    let mut c = t.fanout(&["--config", cfg.to_str().unwrap(), "run", "--json", "-q"]);
    let mut child = c
        .args(["-t", "one", "--workers", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(120), || started.exists()),
        "the agent never started"
    );
    // You, while the agent works: a commit on main, a new branch, an edit.
    std::fs::write(t.repo.join("mine.txt"), "mine\n").unwrap();
    t.git(&["add", "mine.txt"]);
    t.git(&["commit", "-q", "-m", "my own work"]);
    let mine = t.git(&["rev-parse", "HEAD"]);
    t.git(&["branch", "my-branch"]);
    std::fs::write(t.repo.join("mine.txt"), "still mine\n").unwrap();
    std::fs::write(&gate, "go").unwrap();
    wait_child(&mut child, Duration::from_secs(180));
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = &report["results"][0];
    assert_eq!(w["status"], "success", "{w}\n{stderr}");
    assert_eq!(w["sandboxed"], true, "{w}");
    assert_eq!(t.git(&["rev-parse", "main"]), mine, "{stderr}");
    assert_eq!(t.git(&["rev-parse", "my-branch"]), mine, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(t.repo.join("mine.txt")).unwrap(),
        "still mine\n"
    );
    assert!(
        stderr.contains("something outside its sandboxed workers changed your repository")
            && stderr.contains("refs/heads/my-branch created")
            && stderr.contains("main moved to")
            && stderr.contains("(not restored)"),
        "{stderr}"
    );
}

/// Issue #28 item 5: a `writable:` path that holds the repository, its `.git`, or the
/// home directory (or lies in `.git`, or holds a hidden credential), and a `hidden:`
/// path that holds the repository, are refused — exit 2, naming the file, line,
/// column and key — before any run directory, branch or worktree is made, and
/// whatever the sandbox mode.
#[test]
fn writable_paths_that_would_undo_the_sandbox_are_refused_at_their_line() {
    let t = TestEnv::new();
    let home = t.home.display().to_string();
    let repo = t.repo.display().to_string();
    let cases = [
        ("writable", repo.clone(), "holds the repository"),
        (
            "writable",
            t.root().display().to_string(),
            "holds the repository",
        ),
        (
            "writable",
            format!("{repo}/.git"),
            "the repository's git directory",
        ),
        (
            "writable",
            format!("{repo}/.git/hooks"),
            "is inside the repository's git directory",
        ),
        ("writable", "~/".to_owned(), "holds the home directory"),
        ("writable", home.clone(), "holds the home directory"),
        (
            "writable",
            "~/.ssh/cache".to_owned(),
            "which the sandbox hides",
        ),
        (
            "writable",
            "~/.config".to_owned(),
            "which the sandbox hides",
        ),
        ("hidden", repo.clone(), "holds the repository"),
        (
            "hidden",
            "relative/path".to_owned(),
            "expected an absolute path",
        ),
    ];
    let branches = t.branches();
    for (key, path, says) in cases {
        for mode in ["required", "off"] {
            let (agent_extra, extra, want_key) = if key == "writable" {
                (
                    format!("    writable: ['~/.cache/ok', '{path}']\n"),
                    String::new(),
                    "agents.sh.writable[1]",
                )
            } else {
                (String::new(), format!("hidden: ['{path}']\n"), "hidden[0]")
            };
            let cfg = setup(
                &t,
                "echo work > work.txt\n",
                &agent_extra,
                &format!("sandbox: {mode}\n{extra}"),
            );
            let line = std::fs::read_to_string(&cfg)
                .unwrap()
                .lines()
                .position(|l| l.contains(&format!("'{path}'")))
                .unwrap()
                + 1;
            let out = run_with(&t, &cfg, &["-w", "1", "x"], |_| {});
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{key} {path} ({mode}): {err}");
            let at = format!("{}:{line}:", cfg.display());
            assert!(
                err.contains(&at)
                    && err.contains(&format!("key `{want_key}`"))
                    && err.contains(says),
                "{key} {path} ({mode}): want {at} `{want_key}` {says:?}: {err}"
            );
            assert!(t.runs().is_empty() && !t.worktrees.exists(), "{err}");
            assert_eq!(t.branches(), branches);
            assert!(!t.home.join(".cache/ok").exists(), "nothing is made");
        }
    }
}

/// `fanout sandbox` finds a daemon's socket (here `$DOCKER_HOST`'s, mode 0666) and
/// says that you connect to it and a confined agent does not; with the sandbox
/// unavailable (`FANOUT_LANDLOCK_MAX_ABI=0`), that agents do. It says what the kernel
/// can enforce of a closed network.
#[test]
fn the_probe_reports_daemon_sockets_and_whether_agents_reach_them() {
    let t = TestEnv::new();
    let abi = kernel_abi(&t);
    let path = t.root().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o666);
    std::fs::set_permissions(&path, perms).unwrap();
    let probe = |max: Option<&str>| {
        let mut c = t.fanout(&["sandbox", "--json"]);
        c.env("DOCKER_HOST", format!("unix://{}", path.display()));
        if let Some(m) = max {
            c.env("FANOUT_LANDLOCK_MAX_ABI", m);
        }
        let out = c.output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v
    };
    let v = probe(None);
    let docker = &v["sockets"][0];
    assert_eq!(docker["name"], "docker", "{v:#}");
    assert_eq!(docker["path"], path.display().to_string(), "{v:#}");
    assert_eq!(docker["mode"], "0666", "{v:#}");
    assert_eq!(docker["you_refused"], Value::Null, "{v:#}");
    assert!(
        docker["agents_refused"]
            .as_str()
            .is_some_and(|e| e.contains("Operation not permitted")),
        "{v:#}"
    );
    assert_eq!(v["network"]["tcp_ports"], abi >= 4, "{v:#}");
    assert_eq!(v["network"]["socket_filter"], true, "{v:#}");
    assert_eq!(v["network"]["auto"]["pinned"], abi >= 4, "{v:#}");
    assert_eq!(v["network"]["required"]["ok"], abi >= 4, "{v:#}");
    // Landlock without network rules: `auto` says so, `required` refuses.
    let low = probe(Some("3"));
    assert_eq!(low["network"]["auto"]["pinned"], false, "{low:#}");
    assert!(
        (low["network"]["auto"]["notice"].as_str()).is_some_and(|n| n.contains("UNCONFINED")),
        "{low:#}"
    );
    assert_eq!(low["network"]["required"]["ok"], false, "{low:#}");
    assert!(
        (low["network"]["required"]["error"].as_str())
            .is_some_and(|e| e.contains("Landlock ABI 3, without network rules")),
        "{low:#}"
    );
    let open = probe(Some("0"));
    assert_eq!(
        open["sockets"][0]["agents_refused"],
        Value::Null,
        "{open:#}"
    );
    assert_eq!(open["network"]["tcp_ports"], false, "{open:#}");

    let mut c = t.fanout(&["sandbox"]);
    c.env("DOCKER_HOST", format!("unix://{}", path.display()));
    let said = text(&c.output().unwrap().stdout);
    let pinned = if abi >= 4 {
        "network: enforce: required → agents pinned to the gateway"
    } else {
        "network: enforce: required → fanout refuses to run (exit 2)"
    };
    assert!(said.contains(pinned), "{said}");
    assert!(
        said.contains(&format!("docker {} (0666", path.display()))
            && said.contains("you connect")
            && said.contains("agents cannot"),
        "{said}"
    );
}

/// The network primitives of the sandbox (for the gateway of issue #31), through the
/// library: a process confined with a `NetPolicy` connects over TCP to an allowed
/// loopback port and not to another, binds only its own port, and makes no UDP
/// socket; confined without one (`network: None`, today's runs), it does all of it.
#[test]
fn a_closed_network_allows_only_the_listed_tcp_ports_and_no_udp() {
    use fanout::sandbox::{NetPolicy, Policy};
    let t = TestEnv::new();
    let abi = kernel_abi(&t);
    assert!(abi >= 4, "this test needs Landlock ABI 4 (network rules)");
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
    // a port free to bind: taken, then let go
    let free = |_| port(&std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let (own, not_own) = (free(0), free(1));
    let script = t.root().join("net.py");
    std::fs::write(&script, NET_PY).unwrap();
    let run = |network: Option<NetPolicy>| {
        let policy = Policy {
            abi: abi as u8,
            write_files: vec!["/dev/null".into()],
            network,
            ..Default::default()
        };
        let prepared = fanout::sandbox::prepare(&policy).unwrap();
        let mut c = t.command("python3", t.root());
        c.arg(&script)
            .args([port(&allowed), port(&other), own, not_own].map(|p| p.to_string()));
        // SAFETY: `apply` makes system calls only (as fanout does between fork and exec).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, move || prepared.apply());
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let closed = run(Some(NetPolicy {
        connect_ports: vec![port(&allowed)],
        bind_ports: vec![own],
        deny_udp: true,
    }));
    for line in [
        "connect allowed: ok",
        "connect other: PermissionError",
        "bind own: ok",
        "bind other: PermissionError",
        "udp send: PermissionError",
        "udp6 send: PermissionError",
        "mptcp: PermissionError",
    ] {
        assert!(closed.contains(line), "{line:?} in:\n{closed}");
    }
    let open = run(None);
    for line in [
        "connect allowed: ok",
        "connect other: ok",
        "bind own: ok",
        "bind other: ok",
        "udp send: ok",
    ] {
        assert!(open.contains(line), "{line:?} in:\n{open}");
    }
    // with UDP allowed, only TCP is limited
    let udp = run(Some(NetPolicy {
        connect_ports: vec![port(&allowed)],
        bind_ports: vec![],
        deny_udp: false,
    }));
    assert!(
        udp.contains("udp send: ok") && udp.contains("connect other: PermissionError"),
        "{udp}"
    );
}

/// `net.py ALLOWED OTHER OWN NOT_OWN`: each attempt and how it ended.
const NET_PY: &str = r#"import socket, sys
allowed, other, own, not_own = map(int, sys.argv[1:5])
def attempt(what, f):
    try:
        f()
        print(what + ": ok")
    except OSError as e:
        print(what + ": " + type(e).__name__ + " " + str(e))
def connect(p):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", p))
    s.close()
def bind(p):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", p))
    s.close()
def udp(family, host):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.sendto(b"data", (host, 9))
def mptcp():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
attempt("connect allowed", lambda: connect(allowed))
attempt("connect other", lambda: connect(other))
attempt("bind own", lambda: bind(own))
attempt("bind other", lambda: bind(not_own))
attempt("udp send", lambda: udp(socket.AF_INET, "127.0.0.1"))
attempt("udp6 send", lambda: udp(socket.AF_INET6, "::1"))
attempt("mptcp", mptcp)
"#;

/// An agent the sandbox stopped does not fail with a bare "Permission denied": its
/// reason names the path denied, the key that allows it (`writable:` under its agent)
/// and `--sandbox off`; the log's line is still quoted after it. Without the
/// sandbox the same write succeeds.
#[test]
fn a_write_the_sandbox_denied_names_the_path_and_what_allows_it() {
    let t = TestEnv::new();
    kernel_abi(&t);
    let outside = t.root().join("outside.txt");
    let cfg = setup(
        &t,
        &format!("echo x > '{}'", outside.display()),
        "",
        "sandbox: required\n",
    );
    let (out, report) = run(&t, &cfg, &["-w", "1", "work"]);
    assert_eq!(out.status.code(), Some(3));
    let o = outside.display();
    assert_eq!(
        report["results"][0]["reason"].as_str().unwrap(),
        format!(
            "exit code 2; the sandbox denied writing {o}: the agent may write only its worktree and the paths of its `writable:` list; add the directory to `writable:` under `agents: sh:` in fanout.yml, or run with `--sandbox off` — log: {}: 2: cannot create {o}: Permission denied",
            t.root().join("agent.sh").display()
        )
    );
    assert!(!outside.exists());
    let (out, report) = run(&t, &cfg, &["-w", "1", "--sandbox", "off", "work"]);
    assert!(outside.exists(), "{report:#} {}", text(&out.stderr));
}

/// A connection the sandbox refused (a pinned worker connecting straight to a port
/// that is neither its door nor its `ports:`) gets the network's advice — the
/// gateway's proxy, `network: allow:`, `ports:` — not the `writable:` one.
#[test]
fn a_connection_the_sandbox_refused_gets_the_networks_advice() {
    let t = TestEnv::new();
    let abi = kernel_abi(&t);
    assert!(abi >= 4, "this test needs Landlock ABI 4 (network rules)");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = setup(
        &t,
        &format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=10)'"
        ),
        "",
        "sandbox: required\nnetwork: {enforce: required}\n",
    );
    let (out, report) = run(&t, &cfg, &["-w", "1", "work"]);
    assert_eq!(out.status.code(), Some(3), "{report:#}");
    let reason = report["results"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("exit code 1; a network connection was denied (\"Permission denied\"), perhaps by the sandbox: a worker reaches the network only through the gateway's proxy")
            && reason.contains("`network: allow:`")
            && reason.contains("`ports:`")
            && !reason.contains("writable:"),
        "{reason}"
    );
    assert!(reason.contains("PermissionError"), "{reason}");
}
