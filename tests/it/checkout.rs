//! Worktree checkouts (issue #14): git checks out each worker's worktree, running the
//! filter drivers the user configured before the run (Git LFS-style smudge/clean) and
//! none an agent configured after it started; at most one checkout and one harvest per
//! CPU run at a time, and each agent starts as soon as its own worktree is ready. A
//! Ctrl-C does not cut a harvest's filter short.
//!
//! The filter drivers here are tiny shell scripts: `upper` smudges to upper case and
//! cleans back to lower case, so a file shows in which form it was written. The
//! checkout-counting driver records how many checkouts are in flight.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::common::json;
use common::TestEnv;

/// Write an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The user's global git configuration for fanout's runs (see [`run_sh`]).
fn global_config(t: &TestEnv) -> std::path::PathBuf {
    t.root().join("gitconfig")
}

/// A repository whose `*.dat` files go through the `upper` filter driver, configured
/// in the user's global configuration (where `git lfs install` puts `lfs`).
/// `data.dat` is committed in its clean (lower-case) form.
fn upper_repo() -> TestEnv {
    let t = TestEnv::new();
    let dir = t.root().join("filters");
    std::fs::create_dir_all(&dir).unwrap();
    script(&dir.join("smudge"), "tr a-z A-Z\n");
    script(&dir.join("clean"), "tr A-Z a-z\n");
    std::fs::write(
        global_config(&t),
        format!(
            "[filter \"upper\"]\n\tsmudge = {}\n\tclean = {}\n\trequired = true\n",
            dir.join("smudge").display(),
            dir.join("clean").display()
        ),
    )
    .unwrap();
    t.write(".gitattributes", "*.dat filter=upper\n");
    t.write("data.dat", "payload\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "filtered data"]);
    assert_eq!(t.git(&["cat-file", "-p", "HEAD:data.dat"]), "payload\n");
    t
}

/// The user's global filter driver `slow`, whose `side` (`clean` or `smudge`; the
/// other is `cat`) says when it starts, then waits to be let go: the files it
/// touches and waits for, `(started, go)`.
fn held_filter(t: &TestEnv, side: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (started, go) = (t.root().join("filter-started"), t.root().join("go"));
    let held = t.root().join("held-filter.sh");
    script(
        &held,
        &format!(
            "touch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.05; done\ncat\n",
            started.display(),
            go.display()
        ),
    );
    let other = if side == "clean" { "smudge" } else { "clean" };
    std::fs::write(
        global_config(t),
        format!(
            "[filter \"slow\"]\n\t{side} = {}\n\t{other} = cat\n\trequired = true\n",
            held.display()
        ),
    )
    .unwrap();
    (started, go)
}

/// `fanout run` of a `sh -c SCRIPT` agent, one task per `-t`, with the user's global
/// configuration ([`global_config`], when written).
fn run_sh(t: &TestEnv, agent: &str, extra: &[&str]) -> std::process::Output {
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, '{agent}']\n",
        t.worktrees.display()
    ));
    let mut args = vec!["--config", cfg.to_str().unwrap(), "run", "--json"];
    args.extend_from_slice(extra);
    let out = t
        .fanout(&args)
        .env("GIT_CONFIG_GLOBAL", global_config(t))
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some(),
        "fanout was killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_users_filter_drivers_run_in_worktrees_and_harvest_commits_the_clean_form() {
    let t = upper_repo();
    // The agent sees the smudged file, changes it and leaves another one alone.
    t.write("keep.dat", "untouched\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "another"]);
    let out = run_sh(
        &t,
        "cat data.dat > seen.txt && cat keep.dat >> seen.txt && echo more >> data.dat",
        &["-t", "look"],
    );
    let report = json(&out);
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{report:#}");
    let branch = r["branch"].as_str().unwrap();
    assert_eq!(
        t.git(&["show", &format!("{branch}:seen.txt")]),
        "PAYLOAD\nUNTOUCHED\n",
        "the worktree held the smudged files"
    );
    assert_eq!(
        t.git(&["cat-file", "-p", &format!("{branch}:data.dat")]),
        "payload\nmore\n",
        "the changed file was committed through the clean filter"
    );
    assert_eq!(
        r["files_modified"],
        serde_json::json!(["data.dat", "seen.txt"]),
        "an unchanged filtered file is not a change"
    );
}

#[test]
fn a_ctrl_c_during_a_harvest_still_commits_the_agents_work() {
    let t = TestEnv::new();
    let (started, go) = held_filter(&t, "clean");
    t.write(".gitattributes", "*.dat filter=slow\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "slow filter"]);
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'echo work > new.dat']\n",
        t.worktrees.display()
    ));
    // fanout leads its own process group, as a command at a terminal does: Ctrl-C
    // signals that whole group.
    let child = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "--json",
            "-t",
            "x",
        ])
        .env("GIT_CONFIG_GLOBAL", global_config(&t))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let harvesting = common::wait_until(std::time::Duration::from_secs(60), || started.exists());
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    if harvesting {
        nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT).unwrap();
    }
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(harvesting, "{}", String::from_utf8_lossy(&out.stderr));
    // No worker's harvest is cut short — one waits in the filter while others start
    // theirs — and the work of those whose agent ran (the one held in the filter
    // among them; which one that is, the scheduler decides) is committed.
    let report = json(&out);
    let results = report["results"].as_array().unwrap();
    for r in results {
        let reason = r["reason"].as_str().unwrap_or("");
        assert!(!reason.contains("harvest failed"), "{r:#}");
    }
    let harvested: Vec<_> = results
        .iter()
        .filter(|r| r["files_modified"] == serde_json::json!(["new.dat"]))
        .collect();
    assert!(!harvested.is_empty(), "{report:#}");
    for r in harvested {
        let branch = r["branch"].as_str().unwrap();
        assert_eq!(t.git(&["show", &format!("{branch}:new.dat")]), "work\n");
    }
}

#[test]
fn a_filter_an_agent_configures_never_runs_in_a_later_checkout() {
    let t = upper_repo();
    t.write("notes.txt", "plain\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "notes"]);
    let planted = t.root().join("planted-ran");
    let evil = t.root().join("evil.sh");
    script(&evil, &format!("touch '{}'\ncat\n", planted.display()));
    // Worker 1's agent swaps the user's driver's program and adds a driver of its own
    // for the other files (the repository's attributes are the agent's to write too);
    // worker 2 is checked out after it ran (one worker at a time).
    let agent = format!(
        "if [ \"$FANOUT_WORKER_ID\" = 1 ]; then git config filter.upper.smudge {e} && git config filter.evil.smudge {e} && git config filter.evil.required true && echo \"*.txt filter=evil\" > \"$(git rev-parse --git-common-dir)/info/attributes\"; fi; cat data.dat > seen.txt",
        e = evil.display()
    );
    // Unconfined, so that the agent can write the repository's configuration (with
    // the sandbox on it cannot).
    let out = run_sh(
        &t,
        &agent,
        &["--sandbox", "off", "-w", "1", "-t", "one", "-t", "two"],
    );
    let report = json(&out);
    let second = &report["results"][1];
    assert_eq!(second["status"], "success", "{report:#}");
    // The plant was made: the tamper check failed worker 1 for it (and restored the
    // configuration after it; the checkout's own defence matters for a checkout made
    // while another worker's agent runs).
    let first = &report["results"][0];
    assert_eq!(first["status"], "failed", "{report:#}");
    assert!(
        first["reason"]
            .as_str()
            .unwrap_or("")
            .contains("filter.evil"),
        "{report:#}"
    );
    assert!(
        !planted.exists(),
        "a filter configured by an agent ran in fanout's checkout"
    );
    let branch = second["branch"].as_str().unwrap();
    assert_eq!(
        t.git(&["show", &format!("{branch}:seen.txt")]),
        "PAYLOAD\n",
        "the user's own smudge filter (as at the run's start) still ran"
    );
}

/// The first CPU this process may run on.
fn one_cpu() -> nix::sched::CpuSet {
    let mine = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let first = (0..nix::sched::CpuSet::count())
        .find(|&c| mine.is_set(c).unwrap_or(false))
        .unwrap();
    let mut one = nix::sched::CpuSet::new();
    one.set(first).unwrap();
    one
}

/// `probe.cnt` committed through the `count` filter driver, whose lines (`driver`) go
/// in the user's global configuration ([`global_config`]).
fn commit_counted(t: &TestEnv, driver: &str) {
    std::fs::write(global_config(t), format!("[filter \"count\"]\n{driver}")).unwrap();
    t.write(".gitattributes", "*.cnt filter=count\n");
    t.write("probe.cnt", "probe\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "counted"]);
}

/// `fanout run` of tasks a, b, c and d, four at a time, with `cfg` and the user's
/// global configuration ([`global_config`]), fanout pinned to one CPU ([`one_cpu`]).
fn run_on_one_cpu(t: &TestEnv, cfg: &Path) -> std::process::Output {
    let cpu = one_cpu();
    let mut cmd = t.fanout(&[
        "--config",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-w",
        "4",
        "-t",
        "a",
        "-t",
        "b",
        "-t",
        "c",
        "-t",
        "d",
    ]);
    cmd.env("GIT_CONFIG_GLOBAL", global_config(t));
    // SAFETY: sched_setaffinity is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpu)
                .map_err(std::io::Error::from)
        });
    }
    cmd.output().unwrap()
}

#[test]
fn one_checkout_per_cpu_and_each_agent_starts_when_its_own_worktree_is_ready() {
    let t = TestEnv::new();
    // (Agents may write the shared directory: it is declared `writable:`.)
    let trace = t.shared().join("trace");
    for d in ["active", "done"] {
        std::fs::create_dir_all(trace.join(d)).unwrap();
    }
    // The `count` driver runs once per checkout (one filtered file per worktree): it
    // records how many checkouts are in it at once, and every checkout after the
    // first waits (up to a minute) until an agent has started — which only happens
    // if agents start while other worktrees are still being checked out.
    let count = t.root().join("count.sh");
    script(
        &count,
        &format!(
            r#"T='{t}'
touch "$T/active/$$"
ls "$T/active" | wc -l >> "$T/in-flight"
sleep 0.2
if [ -n "$(ls "$T/done")" ]; then
  i=0
  while [ ! -e "$T/agent-started" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
  if [ -e "$T/agent-started" ]; then echo yes >> "$T/waited"; else echo no >> "$T/waited"; fi
fi
cat
rm -f "$T/active/$$"
touch "$T/done/$$"
"#,
            t = trace.display()
        ),
    );
    commit_counted(&t, &format!("\tsmudge = {}\n", count.display()));

    let agent = format!(
        "touch {}/agent-started && echo done > out.txt",
        trace.display()
    );
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, '{agent}']\n    writable: ['{}']\n",
        t.worktrees.display(),
        t.shared().display()
    ));
    // fanout on one CPU: one checkout at a time.
    let report = json(&run_on_one_cpu(&t, &cfg));
    assert_eq!(report["totals"]["success"], 4, "{report:#}");
    let in_flight = std::fs::read_to_string(trace.join("in-flight")).unwrap();
    let seen: Vec<u32> = in_flight
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(seen.len(), 4, "one filtered checkout per worker: {seen:?}");
    assert!(
        seen.iter().all(|n| *n == 1),
        "more than one checkout at a time on one CPU: {seen:?}"
    );
    let waited = std::fs::read_to_string(trace.join("waited")).unwrap();
    assert_eq!(
        waited.lines().collect::<Vec<_>>(),
        ["yes", "yes", "yes"],
        "checkouts after the first saw an agent already started"
    );
}

#[test]
fn one_harvest_per_cpu_at_a_time() {
    let t = TestEnv::new();
    let trace = t.root().join("trace");
    for side in ["smudge", "clean"] {
        std::fs::create_dir_all(trace.join(side)).unwrap();
    }
    // One driver for both sides: every checkout of a `*.cnt` file smudges it, every
    // harvest of a changed one cleans it (slowly: finished workers' harvests would
    // overlap). Each run records how many runs of its side are in flight with it.
    let count = t.root().join("count.sh");
    script(
        &count,
        &format!(
            r#"T='{t}'
touch "$T/$1/$$"
echo "$1 $(ls "$T/$1" | wc -l)" >> "$T/in-flight"
if [ "$1" = clean ]; then sleep 0.5; fi
cat
rm -f "$T/$1/$$"
"#,
            t = trace.display()
        ),
    );
    commit_counted(
        &t,
        &format!(
            "\tsmudge = {c} smudge\n\tclean = {c} clean\n",
            c = count.display()
        ),
    );
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'echo \"$1\" > probe.cnt', sh, '{{task}}']\n",
        t.worktrees.display()
    ));
    // fanout on one CPU: one checkout and one harvest at a time.
    let report = json(&run_on_one_cpu(&t, &cfg));
    assert_eq!(report["totals"]["success"], 4, "{report:#}");
    let in_flight = std::fs::read_to_string(trace.join("in-flight")).unwrap();
    let runs: Vec<(&str, u32)> = in_flight
        .lines()
        .map(|l| {
            let (side, n) = l.split_once(' ').unwrap();
            (side, n.trim().parse().unwrap())
        })
        .collect();
    for side in ["smudge", "clean"] {
        assert!(
            runs.iter().filter(|r| r.0 == side).count() >= 4,
            "a {side} per worker: {runs:?}"
        );
    }
    assert!(
        runs.iter().all(|r| r.1 == 1),
        "more than one checkout or more than one harvest at a time on one CPU: {runs:?}"
    );
}

/// A `git` for fanout's `PATH` that appends each command line it runs to the returned
/// log, then runs the real git: `(directory to put first on PATH, log)`.
fn logging_git(t: &TestEnv) -> (std::path::PathBuf, std::path::PathBuf) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let real = std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .expect("git on PATH");
    let bin = t.root().join("logging-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = t.root().join("git.log");
    script(
        &bin.join("git"),
        &format!(
            "echo \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.display()
        ),
    );
    (bin, log)
}

/// What each logged git command was: `list` (`config --list`), `checkout` (a
/// worktree's checkout: `read-tree --reset -u`) or `other`.
fn logged_kinds(log: &Path) -> Vec<&'static str> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            if l.contains(" config --list ") {
                "list"
            } else if l.contains(" read-tree --reset -u ") {
                "checkout"
            } else {
                "other"
            }
        })
        .collect()
}

#[test]
fn checkouts_list_the_configuration_again_once_a_worker_has_run() {
    let t = TestEnv::new();
    let (bin, log) = logging_git(&t);
    let path = std::env::join_paths(
        std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'echo done > out.txt']\n",
        t.worktrees.display()
    ));
    let run = |extra: &[&str]| {
        let mut args = vec!["--config", cfg.to_str().unwrap(), "run", "--json"];
        args.extend_from_slice(extra);
        let out = t.fanout(&args).env("PATH", &path).output().unwrap();
        let report = json(&out);
        let results = report["results"].as_array().unwrap();
        assert_eq!(results.len(), (extra.len() - 2) / 2, "{report:#}");
        assert!(
            results.iter().all(|r| r["status"] == "success"),
            "{report:#}"
        );
    };
    // One worker: the run's start listing serves its checkout, made before anything ran.
    run(&["-w", "1", "-t", "one"]);
    assert_eq!(logged_kinds(&log), ["list", "checkout"]);
    // One at a time: the second checkout comes after the first worker's agent ran, so
    // the configuration that agent could have changed is listed again first.
    std::fs::remove_file(&log).unwrap();
    run(&["-w", "1", "-t", "one", "-t", "two"]);
    assert_eq!(logged_kinds(&log), ["list", "checkout", "list", "checkout"]);
}

#[test]
fn status_shows_a_worker_whose_worktree_is_being_made_as_checkout() {
    let t = TestEnv::new();
    let (started, go) = held_filter(&t, "smudge");
    t.write(".gitattributes", "*.dat filter=slow\n");
    t.write("data.dat", "payload\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "slow filter"]);
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: sh\nworktree_dir: '{}'\nagents:\n  sh:\n    command: [sh, -c, 'true']\n",
        t.worktrees.display()
    ));
    let cfg = cfg.to_str().unwrap();
    let mut child = t
        .fanout(&["--config", cfg, "run", "-q", "-w", "1", "--run-id", "c"])
        .args(["-t", "one", "-t", "two"])
        .env("GIT_CONFIG_GLOBAL", global_config(&t))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let checking_out = common::wait_until(std::time::Duration::from_secs(60), || started.exists());
    let out = t.run_ok(&["status", "--run", "c", "--json"]);
    let shown = t.run_ok(&["status", "--run", "c"]);
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    std::fs::write(&go, "").unwrap();
    let ended = child.wait().unwrap();
    assert!(checking_out, "the checkout never ran the smudge filter");
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs[0]["state"], "running", "{runs}");
    assert_eq!(runs[0]["workers"][0]["status"], "checkout", "{runs}");
    assert_eq!(runs[0]["workers"][1]["status"], "queued", "{runs}");
    let w1 = shown.lines().find(|l| l.contains("#1")).unwrap_or_default();
    assert!(
        w1.contains("checkout") && w1.contains("checking out"),
        "{shown}"
    );
    assert!(ended.success(), "{ended:?}");
}
