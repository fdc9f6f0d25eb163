//! A hermetic test environment (after jj's `test_environment.rs`): a temp dir with a
//! real git repository, a scratch HOME, git config isolated from the machine's, and
//! helpers to run the real `fanout` binary in it.

pub mod http;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const FANOUT: &str = env!("CARGO_BIN_EXE_fanout");

pub struct TestEnv {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub worktrees: PathBuf,
    pub env: BTreeMap<String, String>,
}

impl TestEnv {
    /// A repository with a few committed files.
    pub fn new() -> TestEnv {
        let tmp = tempfile::Builder::new()
            .prefix("fanout-test-")
            .tempdir()
            .unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let home = root.join("home");
        let worktrees = root.join("worktrees");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let mut env = BTreeMap::new();
        for (k, v) in [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "Test User"),
            ("GIT_AUTHOR_EMAIL", "test@example.invalid"),
            ("GIT_COMMITTER_NAME", "Test User"),
            ("GIT_COMMITTER_EMAIL", "test@example.invalid"),
            ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
            ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
            ("LC_ALL", "C"),
        ] {
            env.insert(k.to_owned(), v.to_owned());
        }
        env.insert("HOME".into(), home.display().to_string());
        env.insert(
            "XDG_DATA_HOME".into(),
            home.join("data").display().to_string(),
        );
        let t = TestEnv {
            tmp,
            repo,
            home,
            worktrees,
            env,
        };
        t.git(&["init", "-q", "-b", "main"]);
        t.write("README.md", "# test repo\n");
        t.write("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n");
        t.write(".gitignore", "target/\n*.tmp\n");
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "initial"]);
        t
    }

    /// A bare repository beside the checkout as its `origin`, with `main` pushed.
    pub fn bare_origin(&self) -> PathBuf {
        let remote = self.root().join("remote.git");
        self.git_in(
            self.root(),
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        self.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
        self.git(&["push", "-q", "origin", "main"]);
        remote
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub fn write(&self, rel: &str, body: &str) {
        let p = self.repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    /// Run git in the repo; panics on failure; returns stdout.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(&self.repo, args)
    }

    pub fn git_in(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.command("git", dir).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A command with the hermetic environment (and no GitHub variables).
    pub fn command(&self, program: &str, dir: &Path) -> Command {
        let mut c = Command::new(program);
        c.current_dir(dir).env_clear();
        c.env("PATH", std::env::var("PATH").unwrap_or_default());
        c.envs(&self.env);
        c
    }

    /// A directory test agents may write besides their worktree (declared `writable:`
    /// by the configs made here, so that they work in the sandbox): traces, logs.
    pub fn shared(&self) -> PathBuf {
        let d = self.root().join("shared");
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Write a config file outside the repository; returns its path.
    pub fn config(&self, yaml: &str) -> PathBuf {
        let p = self.root().join("fanout.yml");
        std::fs::write(&p, yaml).unwrap();
        p
    }

    /// `fanout ARGS` in the repo, with `--worktree-dir` under the temp dir.
    pub fn fanout(&self, args: &[&str]) -> Command {
        let mut c = self.command(FANOUT, &self.repo);
        c.args(args);
        c.stdin(Stdio::null());
        c
    }

    pub fn run_ok(&self, args: &[&str]) -> Output {
        succeeded(&mut self.fanout(args))
    }

    /// The command line that runs the bundled fake agent, as YAML flow items.
    pub fn fake_agent_yaml(extra: &[&str]) -> String {
        let mut items = vec![format!("'{FANOUT}'"), "fake-agent".into()];
        items.extend(extra.iter().map(|s| format!("'{s}'")));
        items.push("'{task}'".into());
        format!("[{}]", items.join(", "))
    }

    /// A config with the fake agent (which may write [`TestEnv::shared`]) and
    /// worktrees under the temp dir.
    pub fn fake_config(&self, agent_args: &[&str], extra_yaml: &str) -> PathBuf {
        self.config(&format!(
            "parallel_runs:\n  agent: fake\nworktree_dir: '{}'\nagents:\n  fake:\n    command: {}\n    writable: ['{}']\n{extra_yaml}",
            self.worktrees.display(),
            Self::fake_agent_yaml(agent_args),
            self.shared().display(),
        ))
    }

    /// Run ids in the repository, oldest first.
    pub fn runs(&self) -> Vec<String> {
        let dir = self.repo.join(".git/fanout/runs");
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn run_dir(&self, id: &str) -> PathBuf {
        self.repo.join(".git/fanout/runs").join(id)
    }

    pub fn results(&self, id: &str) -> serde_json::Value {
        let bytes = std::fs::read(self.run_dir(id).join("results.json")).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    pub fn branches(&self) -> Vec<String> {
        self.git(&["branch", "--format=%(refname:short)"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every file of the checkout (outside .git) with its bytes, plus the index.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.repo.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(&self.repo).unwrap().display().to_string();
                if rel == ".git" {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
        out.insert(
            ".git/index".into(),
            std::fs::read(self.repo.join(".git/index")).unwrap(),
        );
        out.insert(
            "HEAD-ref".into(),
            std::fs::read(self.repo.join(".git/HEAD")).unwrap(),
        );
        out
    }
}

/// Live processes whose command line contains `marker` (via `ps`, so it works on
/// Linux and macOS). Zombies are left out: they are dead, only not yet reaped.
/// Run `cmd` (fanout, as [`TestEnv::fanout`] makes it); its output, asserting it
/// succeeded.
pub fn succeeded(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    let args: Vec<_> = cmd.get_args().collect();
    assert!(
        out.status.success(),
        "fanout {args:?} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn processes_with(marker: &str) -> Vec<(u32, String)> {
    let out = Command::new("ps")
        .args(["-axo", "pid=,stat=,args="])
        .output()
        .expect("ps runs");
    let me = std::process::id();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let pid: u32 = it.next()?.parse().ok()?;
            let stat = it.next()?;
            let args = it.collect::<Vec<_>>().join(" ");
            (pid != me
                && !stat.starts_with('Z')
                && args.contains(marker)
                && !args.starts_with("ps "))
            .then_some((pid, args))
        })
        .collect()
}

/// Poll `cond` every 20 ms until it holds or `limit` passes. This bounds a wait for
/// an event; it is not a timing assertion.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Wait for a child with a bound; kills it and panics when the bound passes.
pub fn wait_child(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("fanout did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A unique marker for finding a test's processes.
pub fn marker(name: &str) -> String {
    format!(
        "fanout-test-marker-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Largest number of intervals open at once, from `start ID T PID`/`end ID T PID` lines.
pub fn max_overlap(trace: &str) -> usize {
    let mut events: Vec<(u128, i32)> = trace
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let kind = it.next()?;
            let _id = it.next()?;
            let t: u128 = it.next()?.parse().ok()?;
            Some((t, if kind == "start" { 1 } else { -1 }))
        })
        .collect();
    // ends before starts at the same instant
    events.sort();
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in events {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

/// Sign `path` as fanout does (`FILE.sig`: HMAC-SHA256 with the record key in `t`'s
/// HOME), as an unsandboxed agent that read the key could: for tests of what holds
/// even then.
pub fn sign_like_fanout(t: &TestEnv, path: &Path) {
    use hmac::Mac;
    let key = std::fs::read(t.home.join(".local/state/fanout/record.key")).unwrap();
    let bytes = std::fs::read(path).unwrap();
    let mut m = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).unwrap();
    m.update(b"fanout-record-v1\0");
    m.update(path.file_name().unwrap().as_encoded_bytes());
    m.update(b"\0");
    m.update(&bytes);
    let sig: String = m
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut sig_path = path.as_os_str().to_owned();
    sig_path.push(".sig");
    std::fs::write(sig_path, format!("{sig}\n")).unwrap();
}

/// The JSON a fanout command printed on stdout (a panic showing both streams when it
/// is not JSON).
/// Each worker's publish operation in a report, in the plan's order (`-` for none).
pub fn publish_ops(report: &serde_json::Value) -> Vec<String> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["publish"]["operation"].as_str().unwrap_or("-").to_owned())
        .collect()
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file under `dir` whose bytes hold `needle`.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            found.extend(files_holding(&p, needle));
        } else if std::fs::read(&p)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(p);
        }
    }
    found
}
