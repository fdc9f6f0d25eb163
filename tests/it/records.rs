//! Runs on disk (issues #11 and #13): fanout's records are signed and a changed one is
//! refused, naming the file; `status` shows queued workers as queued; `cleanup --all`
//! leaves no empty folder behind; `resume` finds an earlier attempt's agents by the
//! process groups fanout recorded, whatever program they run now.

use crate::common;

use std::process::{Output, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn text(out: &Output) -> String {
    format!(
        "{:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_changed_record_is_refused_naming_the_file_and_the_key_stays_private() {
    let t = TestEnv::new();
    let cfg = t.fake_config(&[], "");
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&[
        "--config", cfg, "run", "-q", "-w", "1", "--run-id", "r1", "-t", "x",
    ]);
    let dir = t.run_dir("r1");
    for f in ["results.json", "journal.json", "plan.json", "snapshot.json"] {
        assert!(dir.join(format!("{f}.sig")).is_file(), "{f} is signed");
    }
    let key = t.home.join(".local/state/fanout/record.key");
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(key.parent().unwrap()), 0o700);

    // results.json rewritten (a space added): publish refuses it, exit 4, naming it.
    let results = dir.join("results.json");
    let mut bytes = std::fs::read(&results).unwrap();
    bytes.push(b' ');
    std::fs::write(&results, &bytes).unwrap();
    let out = t
        .fanout(&[
            "publish",
            "--run",
            "r1",
            "--repo",
            "o/r",
            "--api-url",
            "http://127.0.0.1:9",
        ])
        .env("GITHUB_TOKEN", "ghs_notused0000000000000000000000000000")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: its signature does not match",
            results.display()
        )),
        "{err}"
    );

    // a journal without its signature: cleanup touches nothing of the run.
    std::fs::remove_file(dir.join("journal.json.sig")).unwrap();
    let branches = t.branches();
    let out = t.fanout(&["cleanup", "--run", "r1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("journal.json: no signature"),
        "{}",
        text(&out)
    );
    assert_eq!(t.branches(), branches);

    // A key other users can read is refused.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = t
        .fanout(&[
            "--config", cfg, "run", "-q", "-w", "1", "--run-id", "r2", "-t", "x",
        ])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("other users may read or write it"),
        "{}",
        text(&out)
    );
}

#[test]
fn status_shows_a_worker_waiting_for_a_slot_as_queued() {
    let t = TestEnv::new();
    let hang = t.shared().join("hang");
    std::fs::create_dir_all(&hang).unwrap();
    std::fs::write(hang.join("hang-w1"), "").unwrap();
    let mark = marker("queued");
    let cfg = t.fake_config(
        &["--hang-once", hang.to_str().unwrap(), "--marker", &mark],
        "",
    );
    let mut child = t
        .fanout(&[
            "--config",
            cfg.to_str().unwrap(),
            "run",
            "-q",
            "-w",
            "1",
            "--run-id",
            "q",
        ])
        .args(["-t", "one", "-t", "two"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(60), || !hang
        .join("hang-w1")
        .exists()));
    let out = t.run_ok(&["status", "--run", "q", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = t.run_ok(&["status", "--run", "q"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
    child.wait().unwrap();
    assert_eq!(runs[0]["state"], "running", "{runs}");
    assert_eq!(runs[0]["workers"][0]["status"], "running", "{runs}");
    assert_eq!(runs[0]["workers"][1]["status"], "queued", "{runs}");
    let w2 = shown.lines().find(|l| l.contains("#2")).unwrap_or_default();
    assert!(
        w2.contains("queued") && w2.contains("not started"),
        "{shown}"
    );
    assert!(!w2.contains("(deleted)"), "{shown}");
    assert!(wait_until(Duration::from_secs(10), || processes_with(
        &mark
    )
    .is_empty()));
}

#[test]
fn cleanup_all_leaves_no_empty_worktree_folder() {
    let t = TestEnv::new();
    // worktrees in fanout's default place: <XDG_DATA_HOME>/fanout/worktrees/<repo>-<hash>
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: fake\nagents:\n  fake:\n    command: {}\n",
        TestEnv::fake_agent_yaml(&[])
    ));
    let cfg = cfg.to_str().unwrap();
    t.run_ok(&["--config", cfg, "run", "-q", "-w", "2", "-t", "x"]);
    let root = t.home.join("data/fanout/worktrees");
    let folders = || -> Vec<String> {
        std::fs::read_dir(&root)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(folders().len(), 1, "{:?}", folders());
    assert!(folders()[0].starts_with("repo-"), "{:?}", folders());
    let out = t.run_ok(&["cleanup", "--all"]);
    assert!(text(&out).contains("removed 2 worktrees"), "{}", text(&out));
    assert_eq!(folders(), Vec::<String>::new());
}

#[test]
fn resume_finds_an_agent_that_execd_another_program_by_its_process_group() {
    let t = TestEnv::new();
    let mark = marker("pgid");
    let flag = t.shared().join("ran-once");
    // The agent is `sh`; on its first run it becomes python (no `sh` in its command
    // line any more) and hangs.
    let script = format!(
        "[ -e '{flag}' ] && exit 0; touch '{flag}'; exec python3 -c 'import time; time.sleep(600)' {mark}",
        flag = flag.display()
    );
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: hangs\nworktree_dir: '{}'\nagents:\n  hangs:\n    command: [sh, -c, \"{}\"]\n    writable: ['{}']\n",
        t.worktrees.display(),
        script.replace('"', "\\\""),
        t.shared().display()
    ));
    let cfg = cfg.to_str().unwrap();
    let mut child = t
        .fanout(&[
            "--config", cfg, "run", "-q", "-w", "1", "--run-id", "p", "-t", "x",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // fanout is killed once the agent is python and fanout has signed its record of
    // the agent's group (written right after the spawn: the agent may get there
    // first on a busy machine).
    let signed = t.run_dir("p").join("logs/w1.pgid.sig");
    assert!(wait_until(Duration::from_secs(60), || {
        !processes_with(&mark).is_empty() && signed.exists()
    }));
    child.kill().unwrap();
    child.wait().unwrap();

    let out = t
        .fanout(&["--config", cfg, "resume", "p"])
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("processes of its earlier attempt are still running"),
        "{said}"
    );
    assert!(!processes_with(&mark).is_empty());

    let out = t
        .fanout(&["--config", cfg, "resume", "p", "--stop-survivors", "--json"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(said.contains("fanout: stopping process group"), "{said}");
    assert!(processes_with(&mark).is_empty(), "{said}");
    assert!(said.contains("resuming run p (attempt 2)"), "{said}");
}
