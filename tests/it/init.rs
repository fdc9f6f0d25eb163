//! `fanout init`: writes a workflow template, reports drift with `--check` (what of the
//! template the file lacks; the user's additions are no drift), and never overwrites a
//! file that differs without `--force`; the first run after it does not warn about the
//! files it wrote.

use crate::common;

use common::*;

#[test]
fn init_writes_checks_and_refuses_to_clobber_edits() {
    let t = TestEnv::new();
    let wf = t.repo.join(".github/workflows/fanout-local.yml");

    // --check on a missing file: exit 1, says how to fix it.
    let out = t
        .fanout(&["init", "--kind", "local", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing (run `fanout init --kind local`")
    );

    t.run_ok(&["init", "--kind", "local"]);
    let written = std::fs::read_to_string(&wf).unwrap();
    assert!(written.contains("uses: fanout-dev/fanout@v0"));
    assert!(written.starts_with("# fanout: run a batch"));
    t.run_ok(&["init", "--kind", "local", "--check"]);
    // The user's checkout gets that file and a fanout.yml, nothing else.
    assert_eq!(
        t.git(&["status", "--porcelain", "--untracked-files=all"]),
        "?? .github/workflows/fanout-local.yml\n?? fanout.yml\n"
    );

    // The user's additions are theirs: the install step the template asks for, another
    // input, a comment. --check accepts them, and init leaves the file alone.
    let added = written
        .replace(
            "      - name: Install Claude Code\n",
            "      - name: Install our tools\n        run: npm ci\n      - name: Install Claude Code\n",
        )
        .replace("          publish: true\n", "          publish: true\n          timeout: 30m # ours\n");
    assert_ne!(added, written);
    std::fs::write(&wf, &added).unwrap();
    t.run_ok(&["init", "--kind", "local", "--check"]);
    t.run_ok(&["init", "--kind", "local"]);
    assert_eq!(std::fs::read_to_string(&wf).unwrap(), added);

    // Changing what the template says is drift: --check names the place and exits 1.
    let edited = added.replace("publish: true", "publish: false");
    assert_ne!(edited, added);
    std::fs::write(&wf, &edited).unwrap();
    let out = t
        .fanout(&["init", "--kind", "local", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let drift = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        drift,
        ".github/workflows/fanout-local.yml: jobs.fanout.steps[fanout].with.publish: false (the template has true)\n"
    );

    // init without --force keeps the edit (exit 2), with --force resets it.
    let out = t.fanout(&["init", "--kind", "local"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --force to overwrite it"));
    assert_eq!(std::fs::read_to_string(&wf).unwrap(), edited);
    t.run_ok(&["init", "--kind", "local", "--force"]);
    assert_eq!(std::fs::read_to_string(&wf).unwrap(), written);

    // Another action reference renders into every `uses:` of the action, and --check
    // compares against that rendering.
    t.run_ok(&[
        "init",
        "--kind",
        "matrix",
        "--action",
        "me/fanout-fork@main",
    ]);
    let m = std::fs::read_to_string(t.repo.join(".github/workflows/fanout-matrix.yml")).unwrap();
    assert_eq!(m.matches("uses: me/fanout-fork@main").count(), 6);
    assert!(!m.contains("fanout-dev/fanout"));
    t.run_ok(&[
        "init",
        "--kind",
        "matrix",
        "--action",
        "me/fanout-fork@main",
        "--check",
    ]);
    let out = t
        .fanout(&["init", "--kind", "matrix", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));

    // A bad reference is a usage error naming the flag, and writes nothing.
    let out = t
        .fanout(&["init", "--kind", "nightly", "--action", "no-ref"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--action \"no-ref\""));
    assert!(!t.repo.join(".github/workflows/fanout-nightly.yml").exists());
}

#[test]
fn the_first_run_after_init_does_not_warn_about_its_files() {
    let t = TestEnv::new();
    t.run_ok(&["init", "--kind", "local"]);
    let cfg = t.fake_config(&[], "");
    let run = || {
        let out = t.run_ok(&["--config", cfg.to_str().unwrap(), "run", "-w", "1", "x"]);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // fanout.yml and the workflow, untracked as init wrote them: not the user's changes.
    let err = run();
    assert!(!err.contains("uncommitted"), "{err}");
    // Once the user edits one of them, it is theirs, and counted.
    t.write("fanout.yml", "# mine\n");
    let err = run();
    assert!(
        err.contains("has 1 uncommitted change; they are not included"),
        "{err}"
    );
}
