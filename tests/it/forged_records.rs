//! Issue #28, items 6 and 7: a run's records are signed, but without the sandbox an
//! agent can read the record key (documented), so it can forge a record and sign it.
//! These tests play that attacker — once fanout is done, with the user's key, they
//! rewrite the records and sign them again — and then run the user's next command:
//! `publish`, `cleanup`, `resume`. Whatever the records say, the token goes to GitHub
//! only, only the run's own branches are pushed or deleted, no process fanout cannot
//! prove it started is stopped without the user's word, and the user's own work
//! (refs, branches, a branch fanout said it kept) is never reset or deleted.

use crate::common;
use crate::fake_github;
use crate::hostile::{Arena, GitHttp, Sandbox, run_id, text};

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use fake_github::FakeGitHub;
use serde_json::Value;

/// Sign `path` again as fanout would, with the user's record key (what an unsandboxed
/// agent can read: `~/.local/state/fanout/record.key`).
fn resign(t: &TestEnv, path: &Path) {
    use hmac::Mac;
    let key = std::fs::read(t.home.join(".local/state/fanout/record.key")).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy();
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    m.update(b"fanout-record-v1\0");
    m.update(name.as_bytes());
    m.update(b"\0");
    m.update(&bytes);
    let sig = hex::encode(m.finalize().into_bytes());
    std::fs::write(format!("{}.sig", path.display()), sig).unwrap();
}

/// Rewrite the JSON record at `path` with `edit`, and sign it again.
fn forge(t: &TestEnv, path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    resign(t, path);
}

fn said(out: &Output) -> String {
    format!(
        "{:?}\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// A finished run of one honest worker (sandbox off); its id.
fn one_run(a: &Arena, cfg: &str) -> String {
    let (out, report) = a.run(cfg, &["-w", "1", "Improve the docs"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    run_id(&report)
}

/// The journal's record of the remotes names the attacker's server as the place to
/// push: the token goes there from no publishing command.
#[test]
fn a_forged_push_record_sends_the_token_to_no_other_host() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup("", "", "");
    let run = one_run(&a, &cfg);
    let evil_root = a.root().join("evil");
    std::fs::create_dir_all(&evil_root).unwrap();
    let evil = GitHttp::start(&a.t, &evil_root);
    let journal = a.t.run_dir(&run).join("journal.json");
    let url = format!("http://127.0.0.1:{}/x.git", evil.port);
    forge(&a.t, &journal, |j| {
        j["push"]["publish_remote"] = Value::String(url.clone());
        j["push"]["remotes"]["origin"] = Value::String(url.clone());
    });
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let out = a.publish(&cfg, &gh, &run, &[]);
    assert!(
        !evil.credentials().contains(&a.token),
        "the token went to a URL a forged record named: {}",
        said(&out)
    );
    assert!(
        text(&out.stderr).contains("never to a host a config file or a run's record names"),
        "{}",
        said(&out)
    );
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
}

/// `results.json` says it is another run's (`release`), whose plan names the user's
/// `release/1.0`: publishing run R pushes nothing of it; nor does a stable publish of a
/// plan whose branch prefix was forged to `release`, which would push `release/1.0`.
#[test]
fn a_forged_plan_pushes_no_branch_outside_the_run() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup("", "", "publish:\n  branch: stable\n");
    let run = one_run(&a, &cfg);
    let results = a.t.run_dir(&run).join("results.json");
    let original = std::fs::read(&results).unwrap();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let before = a.remote_refs();

    forge(&a.t, &results, |r| {
        r["run_id"] = Value::String("release".into())
    });
    let out = a.publish(&cfg, &gh, &run, &[]);
    assert!(
        text(&out.stderr).contains("fanout publishes a run's own branches only"),
        "{}",
        said(&out)
    );

    std::fs::write(&results, &original).unwrap();
    let branch = {
        let v: Value = serde_json::from_slice(&original).unwrap();
        v["results"][0]["branch"].as_str().unwrap().to_owned()
    };
    let forged = branch.replacen("fanout/", "release/", 1);
    a.t.git(&["branch", &forged, &branch]);
    forge(&a.t, &results, |r| {
        for w in r["plan"]["workers"].as_array_mut().unwrap() {
            w["branch"] = Value::String(forged.clone());
            w["task"]["id"] = Value::String("1.0".into());
        }
        r["results"][0]["branch"] = Value::String(forged.clone());
        r["results"][0]["task_id"] = Value::String("1.0".into());
    });
    let out = a.publish(&cfg, &gh, &run, &[]);
    assert!(
        text(&out.stderr)
            .contains("stable branches are published only under the configured prefix"),
        "{}",
        said(&out)
    );
    assert_eq!(a.remote_refs(), before, "{}", said(&out));
    assert!(gh.pulls().is_empty(), "{:?}", gh.pulls());
}

/// The journal and plan name the user's branch `team/topic` and the user's linked
/// worktree (made where the forged worktree root says fanout's would be) as the run's:
/// `cleanup` and `cleanup --force` touch neither.
#[test]
fn a_forged_journal_cleans_up_nothing_of_the_users() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup("", "", "");
    let run = one_run(&a, &cfg);
    let root = a.root().join("user-worktrees");
    let user_wt = root.join(&run).join("w90");
    std::fs::create_dir_all(user_wt.parent().unwrap()).unwrap();
    a.t.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "team/topic",
        user_wt.to_str().unwrap(),
    ]);
    std::fs::write(user_wt.join("draft.txt"), "the user's draft\n").unwrap();
    let topic = a.t.git(&["rev-parse", "team/topic"]).trim().to_owned();
    let run_dir = a.t.run_dir(&run);
    forge(&a.t, &run_dir.join("plan.json"), |p| {
        let mut w = p["workers"][0].clone();
        w["id"] = 90.into();
        w["branch"] = "team/topic".into();
        let workers = p["workers"].as_array_mut().unwrap();
        workers[0]["branch"] = "team/x".into();
        workers.push(w);
    });
    forge(&a.t, &run_dir.join("journal.json"), |j| {
        j["worktree_root"] = root.display().to_string().into();
        j["extra_branches"] = serde_json::json!(["team/topic"]);
        j["entries"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "worker_id": 90, "branch": "team/topic", "base_commit": "",
                "worktree_name": format!("fanout-{run}-w90"),
                "worktree_path": user_wt, "branch_created": true, "worktree_created": true,
            }));
    });
    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec!["cleanup", "--run", &run];
        args.extend_from_slice(extra);
        let out = a.output(&cfg, &args);
        assert_eq!(
            a.t.git(&["rev-parse", "team/topic"]).trim(),
            topic,
            "{extra:?}: {}",
            said(&out)
        );
        assert_eq!(
            std::fs::read_to_string(user_wt.join("draft.txt"))
                .ok()
                .as_deref(),
            Some("the user's draft\n"),
            "{extra:?}: {}",
            said(&out)
        );
        assert!(
            a.t.git(&["worktree", "list"]).contains("w90"),
            "{extra:?}: {}",
            said(&out)
        );
    }
}

/// `cleanup --force` saves a worktree's uncommitted work as a WIP commit and says it
/// keeps that branch: no later `cleanup` deletes it (`--run`, `--keep`, `--all`), each says it keeps it, until `--delete-kept` names it.
#[test]
fn a_branch_cleanup_kept_is_deleted_only_when_named() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup("", "", "");
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let run = run_id(&report);
    let branch = report["results"][0]["branch"].as_str().unwrap().to_owned();
    let wt = PathBuf::from(report["results"][0]["worktree_path"].as_str().unwrap());
    std::fs::write(wt.join("unsaved.txt"), "unsaved work\n").unwrap();
    let out = a.output(&cfg, &["cleanup", "--run", &run, "--force"]);
    assert!(text(&out.stdout).contains("WIP commit"), "{}", said(&out));
    let wip = a.t.git(&["rev-parse", &branch]).trim().to_owned();
    for args in [
        &["cleanup", "--run", &run][..],
        &["cleanup", "--keep", "0"][..],
        &["cleanup", "--all"][..],
    ] {
        let out = a.output(&cfg, args);
        assert_eq!(
            a.t.git(&["rev-parse", &branch]).trim(),
            wip,
            "{args:?}: {}",
            said(&out)
        );
        assert!(
            text(&out.stdout).contains(&format!("--delete-kept {branch}")),
            "{args:?} does not say it keeps the branch: {}",
            said(&out)
        );
    }
    let out = a.output(&cfg, &["cleanup", "--run", &run, "--delete-kept", &branch]);
    assert!(
        !a.t.branches().contains(&branch),
        "--delete-kept {branch}: {}",
        said(&out)
    );
}

/// A one-worker run whose agent, the first time, runs `first` (shell lines) and then
/// kills fanout (SIGKILL to its supervisor's parent): the configuration, what the run
/// said, and the run's id.
fn killed_run(a: &Arena, first: &str) -> (String, Output, String) {
    let cfg = a.setup(
        &format!(
            r#"if [ ! -e "$MARKERS/killed" ]; then
  touch "$MARKERS/killed"
{first}  kill -KILL "$(cut -d" " -f4 /proc/$PPID/stat)"
  sleep 1
fi
"#
        ),
        "",
        "",
    );
    let out = a.output(&cfg, &["run", "--json", "-w", "1", "Improve the docs"]);
    let run = a.t.runs().pop().expect("a run was started");
    (cfg, out, run)
}

/// The agent kills fanout. Afterwards the user commits on `main`, makes a branch, and
/// another run makes its own; then resumes the first run: nothing of that is reset or
/// moved, and resume says what changed since the run started.
#[test]
fn resume_leaves_what_changed_after_a_crash_as_it_is() {
    let a = Arena::new(Sandbox::Off);
    let (cfg, out, run) = killed_run(&a, "");
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    a.t.write("after-crash.txt", "the user's work after the crash\n");
    a.t.git(&["add", "after-crash.txt"]);
    a.t.git(&["commit", "-q", "-m", "the user's commit after the crash"]);
    a.t.git(&["branch", "topic/new"]);
    // Another run (the agent, its attack done, now only works).
    let (out2, _) = a.run(&cfg, &["-w", "1", "Another task"]);
    let refs_before =
        a.t.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    let main = a.t.git(&["rev-parse", "main"]).trim().to_owned();
    let out = a.output(&cfg, &["resume", &run, "--json", "--stop-survivors"]);
    let all = format!("{}\nother run: {}", said(&out), said(&out2));
    assert_eq!(a.t.git(&["rev-parse", "main"]).trim(), main, "{all}");
    let refs_after =
        a.t.git(&["for-each-ref", "--format=%(refname) %(objectname)"]);
    for line in refs_before.lines() {
        assert!(
            refs_after.lines().any(|l| l == line),
            "resume moved or deleted {line}\n{all}"
        );
    }
    assert!(
        text(&out.stderr).contains("refs/heads/main moved")
            && text(&out.stderr).contains("refs/heads/topic/new created"),
        "resume does not say what changed: {all}"
    );
}

/// The agent stages a new file (its object only in the worker's quarantine), then
/// fanout is killed: `resume` saves the worktree's work as a WIP commit whose objects
/// are all in the shared store, read from the file again, not taken from the index.
#[test]
fn resume_saves_a_file_staged_before_a_crash() {
    // Unsandboxed, so that the agent can kill fanout; its git still writes to its
    // quarantine.
    let a = Arena::new(Sandbox::Off);
    let staged = "  echo \"staged work\" > staged.txt && git add staged.txt || exit 11\n";
    let (cfg, out, run) = killed_run(&a, staged);
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    let resumed = a.output(&cfg, &["resume", &run, "--json", "--stop-survivors"]);
    let all = format!("run: {}\nresume: {}", said(&out), said(&resumed));
    assert_eq!(resumed.status.code(), Some(0), "{all}");
    let wip =
        a.t.git(&["for-each-ref", "--format=%(refname)", "refs/heads/fanout"]);
    let wip = wip
        .lines()
        .find(|r| r.contains("-wip"))
        .unwrap_or_else(|| panic!("no WIP branch: {wip}\n{all}"));
    assert_eq!(
        a.t.git(&["show", &format!("{wip}:staged.txt")]),
        "staged work\n"
    );
    a.t.git(&["fsck", "--connectivity-only", "--no-dangling"]);
}

/// After a crash, the journal (re-signed by an unsandboxed agent, which can read the
/// key) names the user's branch as the worker's: resume refuses, and neither deletes
/// that branch nor saves a WIP commit beside it.
#[test]
fn resume_clears_no_branch_a_forged_journal_names() {
    let a = Arena::new(Sandbox::Off);
    let (cfg, out, run) = killed_run(&a, "");
    assert_ne!(out.status.code(), Some(0), "{}", said(&out));
    a.t.git(&["branch", "feature-x"]);
    let before = a.t.git(&["rev-parse", "feature-x"]);
    forge(&a.t, &a.t.run_dir(&run).join("journal.json"), |j| {
        j["entries"][0]["branch"] = "feature-x".into();
        j["entries"][0]["branch_created"] = true.into();
    });
    let resumed = a.output(
        &cfg,
        &["resume", &run, "--json", "--stop-survivors", "--yes"],
    );
    let all = format!("run: {}\nresume: {}", said(&out), said(&resumed));
    assert_ne!(resumed.status.code(), Some(0), "{all}");
    assert!(said(&resumed).contains("not this run's"), "{all}");
    assert_eq!(a.t.git(&["rev-parse", "feature-x"]), before, "{all}");
    let branches = a.t.git(&["branch", "--list", "feature-x*"]);
    assert_eq!(branches.lines().count(), 1, "{branches}\n{all}");
}

/// After a crash, a group record names a process of the user's (its own process
/// group): `resume --stop-survivors` lists it and stops nothing; `--yes` is the
/// user's word.
#[test]
fn resume_stops_no_process_it_cannot_prove_it_started() {
    use std::os::unix::process::CommandExt;
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup(
        r#"if [ ! -e "$MARKERS/killed" ]; then
  touch "$MARKERS/killed"
  kill -KILL "$(cut -d" " -f4 /proc/$PPID/stat)"
fi
"#,
        "",
        "",
    );
    let out = a.output(&cfg, &["run", "--json", "-w", "1", "Improve the docs"]);
    let run = a.t.runs().pop().expect("a run was started");
    let mut users = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let record = a.t.run_dir(&run).join("logs/w1.pgid");
    std::fs::write(&record, format!("{}\nsleep\n", users.id())).unwrap();
    resign(&a.t, &record);
    let resumed = a.output(&cfg, &["resume", &run, "--json", "--stop-survivors"]);
    let all = format!("run: {}\nresume: {}", said(&out), said(&resumed));
    assert!(
        users.try_wait().unwrap().is_none(),
        "resume stopped a process it cannot prove it started\n{all}"
    );
    assert_eq!(resumed.status.code(), Some(2), "{all}");
    assert!(
        text(&resumed.stderr).contains(&format!("pid {} (sleep)", users.id()))
            && text(&resumed.stderr).contains("--yes"),
        "{all}"
    );
    let yes = a.output(
        &cfg,
        &["resume", &run, "--json", "--stop-survivors", "--yes"],
    );
    // Stopped, though not yet reaped (this test is its parent): a zombie is gone.
    assert!(!said(&yes).contains("could not stop"), "{}", said(&yes));
    let status = users.wait().unwrap();
    assert!(status.code().is_none(), "{}", said(&yes));
}
