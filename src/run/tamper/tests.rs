use std::path::Path;
use std::process::Command;

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with `main`, a branch `feature`, an untracked file, and a run
/// directory; the snapshot of run `r1` (namespace `fanout/r1/`).
fn setup() -> (tempfile::TempDir, std::path::PathBuf, Snapshot) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    git(&repo, &["branch", "feature"]);
    std::fs::write(repo.join("notes.txt"), "mine\n").unwrap();
    let run_dir = repo.join(".git/fanout/runs/r1");
    std::fs::create_dir_all(&run_dir).unwrap();
    let wt = tmp.path().join("wt");
    let s = Snapshot::take(&repo, "r1", "fanout/r1/", &wt, &run_dir).unwrap();
    (tmp, repo, s)
}

fn result(id: u32) -> crate::model::WorkerResult {
    let branch = format!("fanout/r1/w{id}");
    crate::model::WorkerResult::new(id, &branch, "t", "fake", crate::model::Status::Success)
}

fn named(changes: &[Change]) -> String {
    changes.iter().map(|c| format!("{c}\n")).collect()
}

#[test]
fn an_untouched_repository_has_no_change_and_the_runs_own_refs_are_free() {
    let (_t, repo, s) = setup();
    git(&repo, &["branch", "fanout/r1/w1-x"]);
    git(
        &repo,
        &["update-ref", "refs/remotes/origin/fanout/r1/w1-x", "HEAD"],
    );
    assert_eq!(s.check(CheckAt::Worker).unwrap(), Vec::new());
    // the snapshot survives a round trip through its file
    s.save(&s.run_dir).unwrap();
    assert_eq!(Snapshot::load(&s.run_dir).unwrap(), s);
}

#[test]
fn moved_deleted_and_created_refs_are_named_with_their_commits_and_restored() {
    let (_t, repo, s) = setup();
    let main = git(&repo, &["rev-parse", "main"]).trim().to_owned();
    std::fs::write(repo.join("b.txt"), "b\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    git(&repo, &["commit", "-q", "-m", "agent"]);
    let agent = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    git(&repo, &["branch", "-D", "feature"]);
    git(&repo, &["branch", "planted"]);
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(
        said.contains(&format!(
            "refs/heads/main moved to {agent} (restored to {main}; kept as fanout/r1/kept/heads/main-{})",
            &agent[..12]
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "refs/heads/feature deleted (was {main}; restored)"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "refs/heads/planted created at {agent} (removed; kept as fanout/r1/kept/heads/planted-{})",
            &agent[..12]
        )),
        "{said}"
    );
    assert_eq!(git(&repo, &["rev-parse", "main"]).trim(), main);
    assert_eq!(git(&repo, &["rev-parse", "feature"]).trim(), main);
    assert!(!git(&repo, &["branch"]).contains(" planted"));
    // nothing is lost: what main and the new branch pointed at stays reachable, in the
    // run's namespace (never compared, never published)
    for kept in ["fanout/r1/kept/heads/main", "fanout/r1/kept/heads/planted"] {
        let kept = format!("{kept}-{}", &agent[..12]);
        assert_eq!(git(&repo, &["rev-parse", &kept]).trim(), agent);
    }
    let again = named(&s.check(CheckAt::Worker).unwrap());
    assert!(!again.contains("refs/"), "{again}");
    // the checkout's index moved with main: reported, not reverted
    assert!(said.contains("the checkout's index changed"), "{said}");
}

#[test]
fn a_ref_moved_twice_keeps_both_commits_aside() {
    let (_t, repo, s) = setup();
    let mut agents = Vec::new();
    for name in ["b.txt", "c.txt"] {
        std::fs::write(repo.join(name), "x\n").unwrap();
        git(&repo, &["add", name]);
        git(&repo, &["commit", "-q", "-m", name]);
        agents.push(git(&repo, &["rev-parse", "HEAD"]).trim().to_owned());
        let said = named(&s.check(CheckAt::Worker).unwrap());
        assert!(said.contains("refs/heads/main moved to"), "{said}");
    }
    // the second move does not overwrite what the first one kept
    for a in &agents {
        let kept = format!("fanout/r1/kept/heads/main-{}", &a[..12]);
        assert_eq!(git(&repo, &["rev-parse", &kept]).trim(), a);
    }
}

#[test]
fn a_refs_commit_is_kept_though_its_names_were_taken_and_a_missing_one_needs_none() {
    let (_t, repo, s) = setup();
    std::fs::write(repo.join("b.txt"), "b\n").unwrap();
    git(&repo, &["add", "b.txt"]);
    git(&repo, &["commit", "-q", "-m", "mine"]);
    let mine = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    // The names the commit would be kept under are taken, at another commit: it is
    // kept under one named by the time too, and main is restored.
    for id in [&mine[..12], mine.as_str()] {
        let name = format!("refs/heads/fanout/r1/kept/heads/main-{id}");
        git(&repo, &["update-ref", &name, "HEAD~1"]);
    }
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(
        said.contains(&format!("refs/heads/main moved to {mine} (restored to")),
        "{said}"
    );
    let kept = git(
        &repo,
        &["for-each-ref", "--points-at", &mine, "--format=%(refname)"],
    );
    assert!(kept.contains(&format!("kept/heads/main-{mine}-")), "{kept}");
    // A ref moved to an object the repository does not have (a commit only in a
    // worker's own object store) is restored: nothing of the repository is lost.
    let missing = "1".repeat(40);
    std::fs::write(repo.join(".git/refs/heads/main"), format!("{missing}\n")).unwrap();
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(
        said.contains(&format!("refs/heads/main moved to {missing} (restored")),
        "{said}"
    );
}

#[test]
fn config_keys_are_named_and_restored_keeping_the_planted_bytes() {
    let (_t, repo, s) = setup();
    let before = std::fs::read(repo.join(".git/config")).unwrap();
    git(&repo, &["config", "core.fsmonitor", "/tmp/evil"]);
    git(&repo, &["config", "remote.origin.url", "http://evil/"]);
    let changes = s.check(CheckAt::Worker).unwrap();
    let said = named(&changes);
    assert!(
        said.contains(
            ".git/config core.fsmonitor, remote.origin.url set (restored; what was there is kept in"
        ),
        "{said}"
    );
    assert_eq!(std::fs::read(repo.join(".git/config")).unwrap(), before);
    let kept = std::fs::read_dir(s.run_dir.join("tamper"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert!(
        std::fs::read_to_string(kept.path())
            .unwrap()
            .contains("/tmp/evil")
    );
}

#[test]
fn hooks_and_info_files_are_restored_and_planted_ones_removed() {
    let (_t, repo, s) = setup();
    let hook = repo.join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nevil\n").unwrap();
    let attrs = repo.join(".git/info/attributes");
    std::fs::write(&attrs, "* filter=evil\n").unwrap();
    let exclude = repo.join(".git/info/exclude");
    let was = std::fs::read(&exclude).unwrap();
    std::fs::write(&exclude, "changed\n").unwrap();
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(said.contains("hooks/pre-commit added (restored"), "{said}");
    assert!(said.contains(".git/info/attributes added"), "{said}");
    assert!(
        said.contains(".git/info/exclude changed (restored"),
        "{said}"
    );
    assert!(!hook.exists() && !attrs.exists());
    assert_eq!(std::fs::read(&exclude).unwrap(), was);
}

#[test]
fn checkout_changes_are_reported_never_reverted() {
    let (_t, repo, s) = setup();
    std::fs::write(repo.join("notes.txt"), "pwned\n").unwrap();
    std::fs::write(repo.join("a.txt"), "pwned\n").unwrap();
    std::fs::write(repo.join("planted.txt"), "x\n").unwrap();
    let said = named(&s.check(CheckAt::Worker).unwrap());
    for p in ["notes.txt", "a.txt", "planted.txt"] {
        assert!(said.contains(&format!("{p} in the checkout")), "{said}");
    }
    assert!(said.contains("not reverted"), "{said}");
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "pwned\n"
    );
    git(&repo, &["add", "a.txt"]);
    assert!(named(&s.check(CheckAt::Report).unwrap()).contains("the checkout's index"));
}

#[test]
fn fanouts_own_submodule_entries_are_benign_and_go_at_the_end() {
    let (_t, repo, s) = setup();
    std::fs::write(
        repo.join(".gitmodules"),
        "[submodule \"vendor/lib\"]\n\tpath = vendor/lib\n\turl = ../lib\n",
    )
    .unwrap();
    let s = Snapshot::take(&repo, "r1", "fanout/r1/", &s.worktree_root, &s.run_dir).unwrap();
    let before = std::fs::read(repo.join(".git/config")).unwrap();
    git(&repo, &["config", "submodule.vendor/lib.url", "/abs/lib"]);
    git(&repo, &["config", "submodule.vendor/lib.active", "true"]);
    let during = s.check(CheckAt::Worker).unwrap();
    assert!(during.iter().all(|c| c.benign), "{}", named(&during));
    assert_ne!(std::fs::read(repo.join(".git/config")).unwrap(), before);
    git(&repo, &["config", "submodule.vendor/lib.update", "!evil"]);
    let said = named(&s.check(CheckAt::Report).unwrap());
    assert!(said.contains("submodule.vendor/lib.update set"), "{said}");
    s.check(CheckAt::End).unwrap();
    assert_eq!(std::fs::read(repo.join(".git/config")).unwrap(), before);
}

#[test]
fn symlinks_planted_in_the_run_directory_are_removed() {
    let (_t, repo, s) = setup();
    std::fs::create_dir_all(s.run_dir.join("logs")).unwrap();
    std::os::unix::fs::symlink(repo.join("notes.txt"), s.run_dir.join("results.tmp42")).unwrap();
    std::os::unix::fs::symlink(repo.join("notes.txt"), s.run_dir.join("logs/w2.log")).unwrap();
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(
        said.contains("results.tmp42 in the run directory planted: a symlink (removed)"),
        "{said}"
    );
    assert!(said.contains("logs/w2.log in the run directory"), "{said}");
    assert!(!s.run_dir.join("results.tmp42").exists());
}

#[test]
fn parallel_workers_share_the_blame_and_the_reason_says_so() {
    let (_t, repo, s) = setup();
    let g = guard::Guard::new(s, false);
    let mut r1 = result(1);
    let mut r2 = result(2);
    let mut r3 = result(3);
    g.started(1);
    g.started(2);
    git(&repo, &["branch", "-D", "feature"]);
    g.finished(1, &mut r1);
    g.started(3);
    g.finished(2, &mut r2);
    g.finished(3, &mut r3);
    for r in [&r1, &r2] {
        assert_eq!(r.status, crate::model::Status::Failed);
        let reason = r.reason.as_deref().unwrap();
        assert!(reason.contains("refs/heads/feature deleted"), "{reason}");
        assert!(
            reason.contains("workers #1, #2 ran unsandboxed"),
            "{reason}"
        );
    }
    // worker 3 started after the change was found and restored
    assert_ne!(r3.status, crate::model::Status::Failed, "{:?}", r3.reason);
}

#[test]
fn in_a_sandboxed_run_the_users_own_changes_blame_no_worker_and_are_kept() {
    let (_t, repo, s) = setup();
    std::fs::write(
        repo.join(".gitmodules"),
        "[submodule \"vendor/lib\"]\n\tpath = vendor/lib\n\turl = ../lib\n",
    )
    .unwrap();
    let s = Snapshot::take(&repo, "r1", "fanout/r1/", &s.worktree_root, &s.run_dir).unwrap();
    let g = guard::Guard::new(s, true);
    let mut r1 = result(1);
    g.started(1);
    // The user, while the run goes on: a commit on main, a new branch, an edit.
    std::fs::write(repo.join("a.txt"), "edited\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "mine"]);
    let mine = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["branch", "mine"]);
    std::fs::write(repo.join("notes.txt"), "more of mine\n").unwrap();
    // fanout's own setup: its submodule entries.
    git(&repo, &["config", "submodule.vendor/lib.url", "/abs/lib"]);
    g.finished(1, &mut r1);
    assert_eq!(r1.status, crate::model::Status::Success, "{:?}", r1.reason);
    let said = named(&g.end());
    for what in [
        "refs/heads/main moved",
        "refs/heads/mine created",
        "notes.txt in the checkout",
    ] {
        assert!(said.contains(what), "{what}: {said}");
    }
    assert!(
        said.contains("(not restored)") && !said.contains("(restored"),
        "{said}"
    );
    assert_eq!(git(&repo, &["rev-parse", "main"]), mine);
    assert_eq!(git(&repo, &["rev-parse", "mine"]), mine);
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "more of mine\n"
    );
    // fanout's own entries are still undone
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert!(!config.contains("/abs/lib"), "{config}");
}

#[tokio::test(flavor = "current_thread")]
async fn workers_wait_for_the_snapshot_and_a_failed_one_lets_none_start() {
    let (_t, repo, s) = setup();
    let g = std::sync::Arc::new(guard::Guard::pending(false));
    let waiting = tokio::spawn({
        let g = std::sync::Arc::clone(&g);
        async move { g.ready().await }
    });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        !waiting.is_finished(),
        "the gate opened before the snapshot"
    );
    // A worker that ended before the snapshot (its worktree failed) ran nothing:
    // there is nothing to check, and nothing to blame it for.
    let mut r1 = result(1);
    g.started(1);
    g.finished(1, &mut r1);
    assert_eq!(r1.status, crate::model::Status::Success);
    g.taken(Ok(s.clone()));
    assert_eq!(waiting.await.unwrap(), Ok(()));
    // Only the first hand-over counts; the guard checks against it.
    g.taken(Err("late".into()));
    assert_eq!(g.failed(), None);
    git(&repo, &["branch", "-D", "feature"]);
    let said = named(&g.end());
    assert!(said.contains("refs/heads/feature deleted"), "{said}");

    let failed = guard::Guard::pending(false);
    failed.taken(Err("the index is unreadable".into()));
    assert_eq!(
        failed.ready().await,
        Err("the index is unreadable".to_owned())
    );
    assert!(failed.snapshot().is_none());
    assert!(failed.end().is_empty());
}

#[test]
fn fanouts_worktrees_are_no_users_head_and_big_files_are_hashed_in_pieces() {
    let (t, repo, s) = setup();
    // The worktree root through a symlink: git records a worktree's real path.
    let real = t.path().join("real-wt");
    std::fs::create_dir(&real).unwrap();
    let root = t.path().join("wt-link");
    std::os::unix::fs::symlink(&real, &root).unwrap();
    let old_run = root.join("r0/w1");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            old_run.to_str().unwrap(),
        ],
    );
    // One of this run's, being made: named as the run's, its path elsewhere.
    let admin = repo.join(".git/worktrees/fanout-r1-w1");
    std::fs::create_dir_all(&admin).unwrap();
    let elsewhere = t.path().join("elsewhere/.git");
    std::fs::write(admin.join("gitdir"), format!("{}\n", elsewhere.display())).unwrap();
    std::fs::write(admin.join("commondir"), "../..\n").unwrap();
    std::fs::write(
        admin.join("HEAD"),
        "0000000000000000000000000000000000000000\n",
    )
    .unwrap();
    // The user's own linked worktree is guarded.
    let mine = t.path().join("mine");
    git(
        &repo,
        &["worktree", "add", "-q", "--detach", mine.to_str().unwrap()],
    );
    let big = vec![7u8; (KEEP_BYTES + 1) as usize];
    std::fs::write(repo.join("big.bin"), &big).unwrap();
    let s = Snapshot::take(&repo, "r1", "fanout/r1/", &root, &s.run_dir).unwrap();
    let heads: Vec<&String> = s.heads.keys().collect();
    assert_eq!(
        heads,
        [&mine.display().to_string(), &repo.display().to_string()],
        "{heads:?}"
    );
    assert_eq!(s.checkout["big.bin"], crate::util::sha256_hex(&big));
}

#[test]
fn a_planted_commondir_or_alternates_is_found_and_put_aside_but_not_for_an_older_snapshot() {
    let (t, repo, s) = setup();
    let evil = t.path().join("evil.git");
    git(t.path(), &["init", "-q", "--bare", "evil.git"]);
    let common = repo.join(".git");
    std::fs::write(common.join("commondir"), format!("{}\n", evil.display())).unwrap();
    std::fs::write(
        common.join("objects/info/alternates"),
        format!("{}\n", evil.join("objects").display()),
    )
    .unwrap();
    let said = named(&s.check(CheckAt::Worker).unwrap());
    assert!(said.contains(".git/commondir added (restored"), "{said}");
    assert!(
        said.contains(".git/objects/info/alternates added (restored"),
        "{said}"
    );
    assert!(!common.join("commondir").exists() && !common.join("objects/info/alternates").exists());
    // A snapshot from before these were guarded (as a resumed older run has) leaves a
    // store the user named (`git clone --reference`) as it is.
    let older = Snapshot {
        repo_pointers: false,
        ..s.clone()
    };
    std::fs::write(
        common.join("objects/info/alternates"),
        "/elsewhere/objects\n",
    )
    .unwrap();
    assert_eq!(older.check(CheckAt::Worker).unwrap(), Vec::new());
    assert!(common.join("objects/info/alternates").exists());
}
