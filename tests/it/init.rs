//! `fanout init`: writes a workflow template, reports drift with `--check`, and never
//! overwrites a file that differs without `--force`.

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

    // A local edit is drift: --check shows a unified diff and exits 1.
    let edited = written.replace("default: \"3\"", "default: \"5\"");
    assert_ne!(edited, written);
    std::fs::write(&wf, &edited).unwrap();
    let out = t
        .fanout(&["init", "--kind", "local", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("-        default: \"5\""), "{diff}");
    assert!(diff.contains("+        default: \"3\""), "{diff}");
    assert!(
        diff.contains("(on disk)") && diff.contains("(template)"),
        "{diff}"
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
