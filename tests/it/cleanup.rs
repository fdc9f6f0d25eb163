//! `fanout cleanup --keep N` and `--older-than AGE` sweep old runs and only those.

use crate::common;

use common::*;

#[test]
fn keep_and_older_than_sweep_only_old_runs() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg = cfg.to_str().unwrap();
    for id in ["run-a", "run-b", "run-c"] {
        t.run_ok(&[
            "--config", cfg, "run", "-q", "-w", "1", "--run-id", id, "-t", "x",
        ]);
    }
    t.git(&["branch", "fanout-notes"]);
    let fanout_branches = |t: &TestEnv| -> Vec<String> {
        t.branches()
            .into_iter()
            .filter(|b| b.starts_with("fanout/"))
            .collect()
    };
    assert_eq!(fanout_branches(&t).len(), 3);

    // A bare number is not an age (it once meant seconds and swept every run): an
    // error that names the flag, and nothing is removed.
    let out = t
        .fanout(&["cleanup", "--older-than", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--older-than")
            && err.contains("\"10\" has no unit; write one, e.g. 10s, 10m, 10h or 10d"),
        "{err}"
    );
    assert_eq!((t.runs().len(), fanout_branches(&t).len()), (3, 3));

    // Nothing is a day old (humantime's syntax: `1d`, `1h30m`, `2days`).
    let out = t.run_ok(&["cleanup", "--older-than", "1d"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));
    let out = t.run_ok(&["cleanup", "--older-than", "1h30m"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));
    assert_eq!(t.runs().len(), 3);

    // Keep the two newest: run-a goes, with its worktree and branch.
    let out = t.run_ok(&["cleanup", "--keep", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("run run-a: removed 1 worktree, 1 branch"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("run-b") && !stdout.contains("run-c"),
        "{stdout}"
    );
    let branches = fanout_branches(&t);
    assert_eq!(branches.len(), 2);
    assert!(
        branches.iter().all(|b| !b.contains("/run-a/")),
        "{branches:?}"
    );
    assert!(t.branches().contains(&"fanout-notes".to_owned()));

    // Everything older than 0 seconds, keeping the newest.
    t.run_ok(&["cleanup", "--older-than", "0s", "--keep", "1"]);
    let branches = fanout_branches(&t);
    assert_eq!(branches.len(), 1);
    assert!(branches[0].contains("/run-c/"), "{branches:?}");

    // Flags that make no sense together are usage errors.
    let out = t
        .fanout(&["cleanup", "--all", "--keep", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = t
        .fanout(&["cleanup", "--older-than", "6 hourz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--older-than"));
}

/// A worktree whose admin directory was re-pointed elsewhere (its `gitdir` names
/// another directory): cleanup puts it back as fanout made it and says so, leaves that
/// other directory alone, and removes the worktree and `.git/worktrees/<name>`, which
/// are fanout's (issue #28).
#[test]
fn cleanup_removes_a_tampered_worktrees_admin_directory() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&[
        "--config", cfg, "run", "-q", "-w", "1", "--run-id", "run-t", "-t", "x",
    ]);
    let admin = t.repo.join(".git/worktrees/fanout-run-t-w1");
    assert!(admin.is_dir());
    let elsewhere = t.root().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep.txt"), "mine").unwrap();
    std::fs::write(
        admin.join("gitdir"),
        format!("{}\n", elsewhere.join(".git").display()),
    )
    .unwrap();
    // The re-pointed file is said and put back; the worktree and its admin directory go.
    let out = t
        .fanout(&["cleanup", "--run", "run-t", "--force"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("gitdir (restored)"), "{said}");
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(!admin.exists(), "the admin directory is left behind");
    assert!(t.git(&["worktree", "list"]).lines().count() == 1, "{said}");
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("keep.txt")).unwrap(),
        "mine"
    );
}

/// A worktree locked (`git worktree lock`, or a `locked` file an agent planted in its
/// admin directory, which the sandbox leaves writable) is kept by cleanup, which says
/// why, and stays a worktree git knows: once unlocked, the next cleanup removes it.
#[test]
fn a_locked_worktree_is_kept_until_unlocked() {
    let t = TestEnv::new();
    let (admin, wt) = one_worker_run(&t, "run-l");
    std::fs::write(admin.join("locked"), "planted\n").unwrap();
    let (code, said) = cleanup(&t, "run-l");
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("locked"), "{said}");
    assert!(admin.is_dir(), "{said}");
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 2, "{said}");
    t.git(&["worktree", "unlock", wt.to_str().unwrap()]);
    let (code, said) = cleanup(&t, "run-l");
    assert_eq!(code, Some(0), "{said}");
    assert!(!admin.exists(), "{said}");
    assert_eq!(t.git(&["worktree", "list"]).lines().count(), 1, "{said}");
}

/// A cleanup cut short after git removed a worktree's administrative directory (its
/// first step) leaves the worktree directory, its `.git` naming the directory that is
/// gone: the next cleanup still knows it as fanout's, keeps it while it holds the
/// user's edit, and removes it once that is committed elsewhere.
#[test]
fn a_worktree_whose_admin_directory_is_gone_is_still_cleaned_up() {
    let t = TestEnv::new();
    let (admin, wt) = one_worker_run(&t, "run-o");
    std::fs::remove_dir_all(&admin).unwrap();
    let readme = std::fs::read(wt.join("README.md")).unwrap();
    std::fs::write(wt.join("README.md"), "the user's edit\n").unwrap();
    let (code, said) = cleanup(&t, "run-o");
    assert_ne!(code, Some(0), "{said}");
    assert!(said.contains("uncommitted work (README.md)"), "{said}");
    assert!(wt.join("README.md").exists(), "{said}");
    std::fs::write(wt.join("README.md"), readme).unwrap();
    let (code, said) = cleanup(&t, "run-o");
    assert_eq!(code, Some(0), "{said}");
    assert!(!wt.exists(), "{said}");
}

/// A one-worker run `id` of the fake agent: its worktree's admin directory and path.
fn one_worker_run(t: &TestEnv, id: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let cfg = t.fake_config(&[], "");
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&[
        "--config", cfg, "run", "-q", "-w", "1", "--run-id", id, "-t", "x",
    ]);
    let wt = t
        .git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .find(|p| p.contains(id))
        .map(std::path::PathBuf::from)
        .unwrap();
    (t.repo.join(format!(".git/worktrees/fanout-{id}-w1")), wt)
}

/// `fanout cleanup --run id`: its exit code and all it said.
fn cleanup(t: &TestEnv, id: &str) -> (Option<i32>, String) {
    let out = t.fanout(&["cleanup", "--run", id]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said.into_owned())
}
