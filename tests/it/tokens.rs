//! Tokens out of reach (issue #11): fanout takes every credential out of its
//! environment at start (the bytes of `/proc/<pid>/environ` overwritten), keeps a
//! token in memory only while a command needs it, and no process it starts — agent,
//! setup command, check, its own git — gets one. A repository whose git config holds a
//! credential every agent could read is refused before anything runs.

use crate::common;
use crate::fake_github;

use std::path::Path;

use common::*;

const TOKEN: &str = "ghs_tokenstestAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const GH_TOKEN: &str = "gho_tokenstestBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";
const OIDC: &str = "ghp_tokenstestCCCCCCCCCCCCCCCCCCCCCCCCCCCCC";

/// Looks for anything shaped like a GitHub token in fanout's environment and command
/// line (`/proc/<fanout>/…`), in fanout's memory when asked (`mem`), and in its own
/// environment; writes each find (and what it could not read) to argv[1].
const SCAN_PY: &str = r#"import os, re, sys
out, fanout, mem = sys.argv[1], str(os.getppid()), sys.argv[2] == "mem"
pat = re.compile(rb"gh[pousr]_tokenstest[A-Za-z0-9]+")
found, notes = [], []
def scan(where, data):
    for m in set(pat.findall(data)):
        found.append("FOUND %s: %s" % (where, m.decode()))
for f in ("environ", "cmdline"):
    try:
        with open("/proc/%s/%s" % (fanout, f), "rb") as fh:
            scan(f, fh.read())
    except OSError as e:
        notes.append("%s: %s" % (f, e))
if mem:
    try:
        with open("/proc/%s/maps" % fanout) as maps, open("/proc/%s/mem" % fanout, "rb") as m:
            for line in maps:
                span, perms = line.split()[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if "r" not in perms or hi - lo > 256 << 20:
                    continue
                try:
                    m.seek(lo)
                    scan("mem", m.read(hi - lo))
                except (OSError, ValueError, OverflowError):
                    pass
    except OSError as e:
        notes.append("mem: %s" % e)
scan("own environment", b"\n".join(k.encode() + b"=" + v.encode() for k, v in os.environ.items()))
with open(out, "w") as f:
    f.write("\n".join(found + notes) + "\n")
with open("scanned.txt", "w") as f:
    f.write("scanned\n")
"#;

/// A repository with a bare origin, the scanner, and a config whose agent scans
/// (`mem`: also fanout's memory), whose setup command and check dump their
/// environments.
fn arena(mem: bool) -> (TestEnv, std::path::PathBuf) {
    let t = TestEnv::new();
    t.bare_origin();
    let root = t.root().to_owned();
    std::fs::write(root.join("scan.py"), SCAN_PY).unwrap();
    // (what they write goes to a directory the sandbox lets them write)
    let cfg = t.config(&format!(
        "parallel_runs:\n  agent: scan\nworktree_dir: '{wt}'\nagents:\n  scan:\n    command: [python3, '{root}/scan.py', '{shared}/loot.txt', '{mem}']\n    writable: ['{shared}']\nsetup:\n  - env > '{shared}/setup-env.txt'\nchecks:\n  - name: env\n    run: env > '{shared}/check-env.txt'\n",
        wt = t.worktrees.display(),
        root = root.display(),
        shared = t.shared().display(),
        mem = if mem { "mem" } else { "no" },
    ));
    (t, cfg)
}

/// fanout with every kind of credential in its environment.
fn with_tokens(t: &TestEnv, args: &[&str]) -> std::process::Command {
    let mut c = t.fanout(args);
    c.env("GITHUB_TOKEN", TOKEN)
        .env("GH_TOKEN", GH_TOKEN)
        .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", OIDC)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.https://github.com/.extraheader")
        .env(
            "GIT_CONFIG_VALUE_0",
            format!("AUTHORIZATION: bearer {TOKEN}"),
        );
    c
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_no_token(what: &str, text: &str) {
    for t in [TOKEN, GH_TOKEN, OIDC, "tokenstest"] {
        assert!(!text.contains(t), "{what} holds a token:\n{text}");
    }
}

#[test]
fn nothing_fanout_starts_sees_a_token_nor_finds_one_in_fanout() {
    let (t, cfg) = arena(true);
    let cfg = cfg.display().to_string();
    // The user's clean filter for what the agent writes: fanout's harvest (a process
    // of its own) runs it through git when it commits the agent's leftovers.
    let global = t.root().join("gitconfig");
    let dump = format!("env > '{}/clean-env.txt'; cat", t.shared().display());
    std::fs::write(
        &global,
        format!("[filter \"dump\"]\n\tclean = sh -c \"{dump}\"\n\tsmudge = cat\n"),
    )
    .unwrap();
    t.write(".gitattributes", "scanned.txt filter=dump\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "a clean filter"]);
    let out = with_tokens(&t, &["--config", &cfg, "run", "--json", "-w", "1", "look"])
        .env("GIT_CONFIG_GLOBAL", &global)
        .env("SSH_AUTH_SOCK", "/tmp/tokenstest-ssh-agent.sock")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let r = &report["results"][0];
    assert_eq!(r["status"], "success", "{r:#}");
    // The agent scanned fanout's environ, cmdline and memory: not run with --publish,
    // fanout no longer holds any token while agents run.
    let loot = read(&t.shared().join("loot.txt"));
    assert_no_token("what the agent found", &loot);
    // (As root it read them; as another user it is denied: fanout is non-dumpable.)
    for f in ["setup-env.txt", "check-env.txt"] {
        let env = read(&t.shared().join(f));
        assert_no_token(f, &env);
        assert!(env.contains("FANOUT_WORKER_ID=1"), "{env}");
    }
    // Nor the harvest's git (neither the token nor the user's ssh agent).
    let env = read(&t.shared().join("clean-env.txt"));
    assert_no_token("the clean filter fanout's harvest ran", &env);
    assert!(env.contains("PATH="), "{env}");
}

#[test]
fn run_publish_holds_the_token_yet_its_environment_shows_none() {
    let (t, cfg) = arena(false);
    let cfg = cfg.display().to_string();
    let gh = fake_github::FakeGitHub::start("octo", "demo");
    gh.set_token(TOKEN);
    let url = gh.url();
    let out = with_tokens(
        &t,
        &[
            "--config",
            &cfg,
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
            "look",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(gh.pulls().len(), 1, "{stderr}");
    let loot = read(&t.shared().join("loot.txt"));
    assert_no_token("what the agent found", &loot);
    for f in ["setup-env.txt", "check-env.txt"] {
        assert_no_token(f, &read(&t.shared().join(f)));
    }
}

#[test]
fn a_credential_in_the_repository_config_is_refused_before_anything_runs() {
    let (t, cfg) = arena(false);
    let cfg = cfg.display().to_string();
    // What actions/checkout leaves with `persist-credentials: true`.
    t.git(&[
        "config",
        "http.https://github.com/.extraheader",
        "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==",
    ]);
    // `fanout <before> --config <cfg> run -w 1 look` is refused (exit 2), naming `key`.
    let refused = |before: &[&str], key: &str| {
        let args = [before, &["--config", &cfg, "run", "-w", "1", "look"]].concat();
        let out = with_tokens(&t, &args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(key), "{err}");
        err
    };
    let branches = t.branches();
    let err = refused(&[], "http.https://github.com/.extraheader");
    assert!(err.contains("persist-credentials: false"), "{err}");
    assert!(t.runs().is_empty(), "a run was started");
    assert_eq!(t.branches(), branches);
    assert!(!t.shared().join("loot.txt").exists(), "the agent ran");

    // Started in a subdirectory of the checkout, fanout lists the configuration from
    // there: git finds the same repository, and its credential.
    let sub = t.repo.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let sub = sub.display().to_string();
    refused(&["-C", &sub], "http.https://github.com/.extraheader");
    assert!(t.runs().is_empty(), "a run was started");

    // A URL with a password is refused the same way; without either, the run goes on.
    t.git(&[
        "config",
        "--unset-all",
        "http.https://github.com/.extraheader",
    ]);
    t.git(&[
        "config",
        "remote.mirror.url",
        "https://x-access-token:ghs_inurl@example.invalid/o/r.git",
    ]);
    refused(&[], "remote.mirror.url");
    t.git(&["remote", "remove", "mirror"]);
    let out = with_tokens(&t, &["--config", &cfg, "run", "-w", "1", "look"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
