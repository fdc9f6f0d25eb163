//! The test peers fanout's own tests drive (act, the real agent CLIs), got on first
//! use: [`install`] runs the project's install script (`.ci/install-act.sh`,
//! `.ci/install-agents.sh`) once per test process, under a file lock in the peers
//! cache (`${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers`) so that tests and test
//! processes running at once wait for one install instead of racing it. The scripts
//! are idempotent (a stamp per pinned version): with the peers installed, a call
//! costs one bash run. So `cargo test` passes on a fresh machine that can reach the
//! registries (npm, PyPI); when it cannot, the tests that need a peer fail with the
//! script's message and how to fix it — never a silent pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// `${XDG_CACHE_HOME:-$HOME/.cache}/fanout-peers`, where the scripts install.
pub fn cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("fanout-peers")
}

/// Run `.ci/<script>` (once per process; later calls get the first one's outcome):
/// its stdout, or why it failed — its stderr's tail and how to run it by hand.
pub fn install(script: &str) -> Result<String, String> {
    static DONE: OnceLock<Mutex<BTreeMap<String, Result<String, String>>>> = OnceLock::new();
    let done = DONE.get_or_init(Default::default);
    // Held while the script runs: this process's other tests that need it wait.
    let mut done = done
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.entry(script.to_owned())
        .or_insert_with(|| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(".ci")
                .join(script);
            run_locked(&path, &cache())
        })
        .clone()
}

/// Run the script at `path` under `cache`'s install lock (other test processes wait).
fn run_locked(path: &Path, cache: &Path) -> Result<String, String> {
    let script = path.file_name().unwrap_or_default().to_string_lossy();
    let how = format!(
        "run `bash .ci/{script}` to see why (it installs into {}; it needs npm and python3 \
         with the npm registry and PyPI reachable)",
        cache.display()
    );
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot make {}: {e}; {how}", cache.display()))?;
    let lock = std::fs::File::create(cache.join(".install.lock"))
        .map_err(|e| format!("cannot open the install lock in {}: {e}", cache.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}/.install.lock: {e}", cache.display()))?;
    let out = std::process::Command::new("bash")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run bash {}: {e}; {how}", path.display()))?;
    drop(lock);
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        ".ci/{script} failed ({}):\n{}\n{how}",
        out.status,
        tail.join("\n")
    ))
}

#[test]
fn a_failed_install_says_why_and_how_to_get_the_peer() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("install-thing.sh");
    std::fs::write(
        &script,
        "echo progress >&2\necho 'error: could not reach PyPI' >&2\nexit 1\n",
    )
    .unwrap();
    let cache = d.path().join("cache");
    let err = run_locked(&script, &cache).unwrap_err();
    assert!(
        err.starts_with(
            ".ci/install-thing.sh failed (exit status: 1):\nprogress\nerror: could not reach PyPI\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("run `bash .ci/install-thing.sh` to see why"),
        "{err}"
    );
    assert!(cache.join(".install.lock").is_file());
    std::fs::write(&script, "echo /somewhere/bin/thing\n").unwrap();
    assert_eq!(
        run_locked(&script, &cache).unwrap(),
        "/somewhere/bin/thing\n"
    );
}
