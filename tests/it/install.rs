//! `dist/install.sh`, the action's installer, against a local manifest and local
//! release files (no network): the right target is picked, the tool cache is reused
//! only by unpacking its kept archive again once that has the manifest's sha256 (a
//! binary planted there is never handed on), a bad checksum or a plain-http URL is
//! refused and leaves nothing cached, a mirror (FANOUT_INSTALL_BASE_URL) still has its
//! downloads checked, and the build-from-source fallback runs `cargo build --locked
//! --release` (a stand-in cargo records its arguments and produces the binary, so the
//! test needs no 3-minute build).
//! The action's two steps (resolve, then build) are covered too: resolve builds
//! nothing and names the build's cache key, the build step takes the plan job's
//! binary only when its sha256 is the expected one. The manifest is read with
//! python3, and with jq when python3 is not on PATH. Downloads from a loopback
//! release server are in `tests/release.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const INSTALL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dist/install.sh");
const TARGETS: [&str; 4] = [
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let env = Env {
            tmp: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(env.path("release")).unwrap();
        std::fs::create_dir_all(env.path("cache")).unwrap();
        for t in TARGETS {
            env.release(t, &format!("fanout-{t}"));
        }
        env
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `release/fanout-<target>.tar.gz` holding a `fanout` script that prints `label`.
    fn release(&self, target: &str, label: &str) {
        let stage = self.path(&format!("stage-{target}"));
        std::fs::create_dir_all(&stage).unwrap();
        let bin = stage.join("fanout");
        std::fs::write(&bin, format!("#!/bin/sh\necho '{label} 0.1.0'\n")).unwrap();
        chmod_x(&bin);
        let tarball = self.path(&format!("release/fanout-{target}.tar.gz"));
        let st = Command::new("tar")
            .arg("-czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&stage)
            .arg("fanout")
            .status()
            .unwrap();
        assert!(st.success());
    }

    fn sha256(&self, target: &str) -> String {
        let bytes = std::fs::read(self.path(&format!("release/fanout-{target}.tar.gz"))).unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg("sha256sum 2>/dev/null || shasum -a 256")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&bytes)?;
                c.wait_with_output()
            })
            .unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_owned()
    }

    /// A manifest whose asset URLs are made by `url(target)`; `sha` overrides a sum.
    fn manifest(&self, url: impl Fn(&str) -> Option<String>, sha: Option<(&str, &str)>) -> PathBuf {
        let mut targets = serde_json::Map::new();
        for t in TARGETS {
            let sum = match sha {
                Some((target, s)) if target == t => s.to_owned(),
                _ => self.sha256(t),
            };
            targets.insert(
                t.to_owned(),
                serde_json::json!({"url": url(t), "sha256": url(t).map(|_| sum)}),
            );
        }
        let p = self.path("manifest.json");
        std::fs::write(
            &p,
            serde_json::json!({"version": "0.1.0", "targets": targets}).to_string(),
        )
        .unwrap();
        p
    }

    fn file_url(&self, t: &str) -> Option<String> {
        Some(format!(
            "file://{}",
            self.path(&format!("release/fanout-{t}.tar.gz")).display()
        ))
    }

    fn install(&self, vars: &[(&str, &str)]) -> Output {
        self.install_with_path(&std::env::var("PATH").unwrap(), vars)
    }

    /// Runs in the temporary directory (a relative CARGO_TARGET_DIR lands there).
    fn install_with_path(&self, path: &str, vars: &[(&str, &str)]) -> Output {
        let mut c = Command::new("bash");
        c.arg(INSTALL).env_clear().current_dir(self.tmp.path());
        c.env("PATH", path);
        c.env("HOME", self.path("."));
        c.env("RUNNER_TOOL_CACHE", self.path("cache"));
        c.env("RUNNER_TEMP", self.tmp.path());
        c.env("GITHUB_OUTPUT", self.path("gh-output"));
        c.env("GITHUB_PATH", self.path("gh-path"));
        c.env("FANOUT_MANIFEST", self.path("manifest.json"));
        for (k, v) in vars {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The installed binary's path (last stdout line) and what it prints.
fn installed(o: &Output) -> (PathBuf, String) {
    assert!(o.status.success(), "install failed: {}", stderr(o));
    let stdout = String::from_utf8(o.stdout.clone()).unwrap();
    let bin = PathBuf::from(stdout.lines().last().unwrap());
    let out = Command::new(&bin).arg("--version").output().unwrap();
    (
        bin,
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
    )
}

#[test]
fn picks_the_runners_target_and_reuses_the_tool_cache() {
    let env = Env::new();
    env.manifest(|t| env.file_url(t), None);
    for (os, arch, target) in [
        ("Linux", "X64", "x86_64-unknown-linux-musl"),
        ("Linux", "ARM64", "aarch64-unknown-linux-musl"),
        ("macOS", "ARM64", "aarch64-apple-darwin"),
        ("macOS", "X64", "x86_64-apple-darwin"),
    ] {
        let o = env.install(&[("RUNNER_OS", os), ("RUNNER_ARCH", arch)]);
        let (bin, version) = installed(&o);
        assert_eq!(
            bin,
            env.path(&format!("cache/fanout/0.1.0/{target}/fanout"))
        );
        assert_eq!(version, format!("fanout-{target} 0.1.0"), "{os}/{arch}");
        // The release archive stays beside the binary: a later job unpacks it again.
        assert!(
            env.path(&format!("cache/fanout/0.1.0/{target}/fanout.tar.gz"))
                .is_file()
        );
    }
    // Outputs for the action: the binary's directory on PATH, bin= and version=.
    let outputs = std::fs::read_to_string(env.path("gh-output")).unwrap();
    assert!(outputs.contains(&format!(
        "bin={}\nversion=0.1.0\n",
        env.path("cache/fanout/0.1.0/x86_64-apple-darwin/fanout").display()
    )));
    assert_eq!(outputs.matches("bin=").count(), 4, "{outputs}");
    let paths = std::fs::read_to_string(env.path("gh-path")).unwrap();
    assert_eq!(paths.lines().count(), 4);
    assert!(paths.ends_with(&format!(
        "{}\n",
        env.path("cache/fanout/0.1.0/x86_64-apple-darwin").display()
    )));

    // Second run: the release files are gone, the cache answers.
    std::fs::remove_dir_all(env.path("release")).unwrap();
    let o = env.install(&[("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")]);
    let (_, version) = installed(&o);
    assert_eq!(version, "fanout-x86_64-unknown-linux-musl 0.1.0");
    assert!(
        stderr(&o).contains("reusing the tool cache"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn plain_paths_work_and_a_bad_checksum_is_refused_leaving_nothing_cached() {
    let env = Env::new();
    env.manifest(
        |t| {
            Some(
                env.path(&format!("release/fanout-{t}.tar.gz"))
                    .display()
                    .to_string(),
            )
        },
        Some(("x86_64-unknown-linux-musl", &"0".repeat(64))),
    );
    let o = env.install(&[("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let actual = env.sha256("x86_64-unknown-linux-musl");
    assert!(
        err.contains(&format!("expected sha256 {}, got {actual}", "0".repeat(64))),
        "{err}"
    );
    assert!(
        !env.path("cache/fanout")
            .join("0.1.0/x86_64-unknown-linux-musl")
            .exists()
    );
    assert!(
        !env.path("gh-output").exists(),
        "outputs written on failure"
    );
    // The same manifest's other (correct) target installs from a plain path.
    let (_, version) = installed(&env.install(&[("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "ARM64")]));
    assert_eq!(version, "fanout-aarch64-unknown-linux-musl 0.1.0");

    // A URL without a sum is never downloaded unverified.
    let url = env.file_url("x86_64-apple-darwin");
    std::fs::write(
        env.path("manifest.json"),
        serde_json::json!({"version": "0.1.0", "targets": {
            "x86_64-apple-darwin": {"url": url, "sha256": null}}})
        .to_string(),
    )
    .unwrap();
    let o = env.install(&[("RUNNER_OS", "macOS"), ("RUNNER_ARCH", "X64")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no sha256"), "{}", stderr(&o));
    assert!(!env.path("cache/fanout/0.1.0/x86_64-apple-darwin").exists());
}

#[test]
fn plain_http_is_refused_unless_allowed() {
    let env = Env::new();
    // Port 9 on loopback: nothing listens, so an allowed download fails fast.
    env.manifest(
        |t| Some(format!("http://127.0.0.1:9/fanout-{t}.tar.gz")),
        None,
    );
    let o = env.install(&[("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("refusing plain http URL"),
        "{}",
        stderr(&o)
    );
    let o = env.install(&[
        ("RUNNER_OS", "Linux"),
        ("RUNNER_ARCH", "X64"),
        ("FANOUT_INSTALL_ALLOW_HTTP", "true"),
        ("FANOUT_INSTALL_RETRIES", "0"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("download failed"), "{err}");
    // A failed download never falls back to building.
    assert!(!err.contains("building from source"), "{err}");
}

/// A stand-in cargo that records its argv and "builds" a fanout binary.
fn fake_cargo(env: &Env) -> PathBuf {
    let p = env.path("fake-cargo");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nmkdir -p \"$CARGO_TARGET_DIR/release\"\nprintf '#!/bin/sh\\necho built-from-source 0.1.0\\n' > \"$CARGO_TARGET_DIR/release/fanout\"\nchmod +x \"$CARGO_TARGET_DIR/release/fanout\"\n",
            env.path("cargo-args").display()
        ),
    )
    .unwrap();
    chmod_x(&p);
    p
}

#[test]
fn falls_back_to_building_from_source() {
    let env = Env::new();
    let cargo = fake_cargo(&env);
    let src = env.path("src-checkout");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("Cargo.toml"), "[package]\nname = \"fanout\"\n").unwrap();
    let target_dir = env.path("target");
    let vars = |extra: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("FANOUT_CARGO", cargo.display().to_string()),
            ("FANOUT_SOURCE_DIR", src.display().to_string()),
            ("CARGO_TARGET_DIR", target_dir.display().to_string()),
        ];
        v.extend(extra.iter().cloned());
        v
    };
    let run = |v: &[(&'static str, String)]| {
        let v: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
        env.install(&v)
    };

    // No asset for the target (the committed manifest's state before a release).
    env.manifest(|_| None, None);
    let o = run(&vars(&[
        ("RUNNER_OS", "Linux".into()),
        ("RUNNER_ARCH", "X64".into()),
    ]));
    let (bin, version) = installed(&o);
    assert_eq!(version, "built-from-source 0.1.0");
    assert_eq!(bin, target_dir.join("release/fanout"));
    assert!(stderr(&o).contains("no released asset for x86_64-unknown-linux-musl"));
    assert_eq!(
        std::fs::read_to_string(env.path("cargo-args")).unwrap(),
        format!(
            "build\n--locked\n--release\n--manifest-path\n{}/Cargo.toml\n",
            src.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(env.path("gh-output")).unwrap(),
        format!(
            "bin={}\nversion=0.1.0\nsha256={}\n",
            target_dir.join("release/fanout").display(),
            sha256_file(&target_dir.join("release/fanout"))
        )
    );
    assert_eq!(
        std::fs::read_to_string(env.path("gh-path")).unwrap(),
        format!("{}\n", target_dir.join("release").display())
    );

    // An asset exists, but build-from-source is asked for.
    std::fs::remove_file(env.path("cargo-args")).unwrap();
    env.manifest(|t| env.file_url(t), None);
    let o = run(&vars(&[
        ("RUNNER_OS", "Linux".into()),
        ("RUNNER_ARCH", "X64".into()),
        ("FANOUT_BUILD_FROM_SOURCE", "true".into()),
    ]));
    assert_eq!(installed(&o).1, "built-from-source 0.1.0");
    assert!(env.path("cargo-args").is_file());
    assert!(!env.path("cache/fanout").exists(), "nothing downloaded");

    // A target the release does not cover (e.g. Windows) builds too.
    let o = run(&vars(&[
        ("RUNNER_OS", "Windows".into()),
        ("RUNNER_ARCH", "X64".into()),
    ]));
    assert_eq!(installed(&o).1, "built-from-source 0.1.0");

    // A relative CARGO_TARGET_DIR is where cargo puts it: under the current directory
    // (the temporary directory here), not under the source.
    let o = run(&vars(&[
        ("FANOUT_BUILD_FROM_SOURCE", "true".into()),
        ("CARGO_TARGET_DIR", "rel-target".into()),
    ]));
    let (bin, version) = installed(&o);
    assert_eq!(version, "built-from-source 0.1.0");
    assert_eq!(bin, env.path("rel-target/release/fanout"));

    // No cargo at all: said plainly.
    let o = run(&vars(&[
        ("FANOUT_BUILD_FROM_SOURCE", "true".into()),
        (
            "FANOUT_CARGO",
            env.path("no-such-cargo").display().to_string(),
        ),
    ]));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not found"), "{}", stderr(&o));

    // A failing build is an error.
    std::fs::write(&cargo, "#!/bin/sh\nexit 101\n").unwrap();
    let o = run(&vars(&[("FANOUT_BUILD_FROM_SOURCE", "true".into())]));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cargo build failed"));
}

#[test]
fn a_prebuilt_binary_is_used_as_it_is() {
    let env = Env::new();
    let bin = env.path("prebuilt/fanout");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, "#!/bin/sh\necho fanout 9.9.9\n").unwrap();
    chmod_x(&bin);
    // No manifest at all: FANOUT_BINARY needs none.
    let o = env.install(&[("FANOUT_BINARY", bin.to_str().unwrap())]);
    let (path, version) = installed(&o);
    assert_eq!(path, bin);
    assert_eq!(version, "fanout 9.9.9");
    let outputs = std::fs::read_to_string(env.path("gh-output")).unwrap();
    assert_eq!(
        outputs,
        format!(
            "bin={}\nversion=9.9.9\nsha256={}\n",
            bin.display(),
            sha256_file(&bin)
        ),
        "{outputs}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("gh-path")).unwrap(),
        format!("{}\n", env.path("prebuilt").display())
    );
    let o = env.install(&[("FANOUT_BINARY", env.path("missing").to_str().unwrap())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not an executable file"));
    // Another binary than the one expected (the action's binary-sha256) is refused.
    let o = env.install(&[
        ("FANOUT_BINARY", bin.to_str().unwrap()),
        ("FANOUT_BINARY_SHA256", &"ab".repeat(32)),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("refusing it"), "{}", stderr(&o));
}

#[test]
fn the_committed_manifest_matches_the_crate_and_covers_every_target() {
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/manifest.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(m["version"], env!("CARGO_PKG_VERSION"));
    let targets: Vec<&String> = m["targets"].as_object().unwrap().keys().collect();
    let mut want: Vec<&str> = TARGETS.to_vec();
    want.sort();
    assert_eq!(targets, want);
    for (t, v) in m["targets"].as_object().unwrap() {
        // Either not released yet (both null) or a URL with its sum.
        assert_eq!(v["url"].is_null(), v["sha256"].is_null(), "{t}");
    }
}

#[test]
fn a_mirror_base_url_keeps_the_file_name_and_the_checksum() {
    // FANOUT_INSTALL_BASE_URL: the asset comes from elsewhere (a mirror, a test
    // server), under the manifest's file name, and must still have its sha256.
    let env = Env::new();
    env.manifest(
        |t| {
            Some(format!(
                "https://github.com/o/r/releases/download/v0.1.0/fanout-{t}.tar.gz"
            ))
        },
        None,
    );
    let mirror = format!("file://{}", env.path("release").display());
    let linux = [("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "ARM64")];
    let o = env.install(&[linux[0], linux[1], ("FANOUT_INSTALL_BASE_URL", &mirror)]);
    assert_eq!(installed(&o).1, "fanout-aarch64-unknown-linux-musl 0.1.0");
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{mirror}/fanout-aarch64-unknown-linux-musl.tar.gz"
        )),
        "{err}"
    );
    // The mirror serves other bytes: refused, nothing cached.
    env.release("x86_64-unknown-linux-musl", "not the released build");
    let o = env.install(&[
        ("RUNNER_OS", "Linux"),
        ("RUNNER_ARCH", "X64"),
        ("FANOUT_INSTALL_BASE_URL", &mirror),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("checksum mismatch"), "{}", stderr(&o));
    assert!(
        !env.path("cache/fanout/0.1.0/x86_64-unknown-linux-musl")
            .exists()
    );
    // A plain-http mirror is refused like any plain-http URL.
    let o = env.install(&[
        linux[0],
        linux[1],
        ("FANOUT_INSTALL_BASE_URL", "http://127.0.0.1:9/mirror"),
        ("RUNNER_TOOL_CACHE", env.path("cache-2").to_str().unwrap()),
    ]);
    assert!(
        stderr(&o).contains("refusing plain http URL"),
        "{}",
        stderr(&o)
    );
}

/// A source checkout for the build tests: Cargo.toml, Cargo.lock, src/.
fn source_checkout(env: &Env) -> PathBuf {
    let src = env.path("src-checkout");
    std::fs::create_dir_all(src.join("src")).unwrap();
    std::fs::write(src.join("Cargo.toml"), "[package]\nname = \"fanout\"\n").unwrap();
    std::fs::write(src.join("Cargo.lock"), "version = 4\n").unwrap();
    std::fs::write(src.join("src/main.rs"), "fn main() {}\n").unwrap();
    src
}

fn outputs(env: &Env) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(env.path("gh-output")).unwrap_or_default();
    let _ = std::fs::remove_file(env.path("gh-output"));
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn the_resolve_step_builds_nothing_and_keys_the_build_on_version_runner_and_source() {
    let env = Env::new();
    let cargo = fake_cargo(&env);
    let src = source_checkout(&env);
    env.manifest(|_| None, None);
    let resolve = || {
        let o = env.install(&[
            ("RUNNER_OS", "Linux"),
            ("RUNNER_ARCH", "X64"),
            ("FANOUT_INSTALL_STEP", "resolve"),
            ("FANOUT_CARGO", cargo.to_str().unwrap()),
            ("FANOUT_SOURCE_DIR", src.to_str().unwrap()),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut out = outputs(&env);
        // The binary's path is the last stdout line when there is one.
        out.insert(
            "stdout".into(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        );
        out
    };
    let first = resolve();
    assert!(!env.path("cargo-args").exists(), "resolve ran cargo");
    let key = first["build-key"].clone();
    assert!(
        key.starts_with("fanout-source-0.1.0-linux-x86_64-"),
        "{key}"
    );
    assert_eq!(first["build-artifact"], key);
    assert_eq!(first["version"], "0.1.0");
    assert_eq!(
        first["build-dir"],
        format!("{}/fanout-build", env.tmp.path().display())
    );
    assert!(!first.contains_key("bin"));
    assert_eq!(first["stdout"], "", "no binary yet");
    assert_eq!(resolve()["build-key"], key, "the same source, the same key");
    std::fs::write(src.join("Cargo.lock"), "version = 4\n# another lock\n").unwrap();
    let after_lock = resolve()["build-key"].clone();
    assert_ne!(after_lock, key, "Cargo.lock is in the key");
    std::fs::write(src.join("src/main.rs"), "fn main() { }\n").unwrap();
    assert_ne!(
        resolve()["build-key"],
        after_lock,
        "the source is in the key"
    );

    // A released asset: resolve installs it, nothing left to build.
    env.manifest(|t| env.file_url(t), None);
    let out = resolve();
    assert!(!out.contains_key("build-key"), "{out:?}");
    assert!(out["bin"].ends_with("/fanout/0.1.0/x86_64-unknown-linux-musl/fanout"));
}

/// A binary planted where the build step looks (artifact or cache).
const EVIL: &str = "#!/bin/sh\necho evil\n";

#[test]
fn the_build_step_takes_the_plan_jobs_binary_only_with_the_expected_sha256() {
    let env = Env::new();
    let cargo = fake_cargo(&env);
    let src = source_checkout(&env);
    let dir = env.path("fanout-build");
    let build = |mode: &str, sha: &str| {
        env.install(&[
            ("FANOUT_INSTALL_STEP", "build"),
            ("FANOUT_BUILD_DIR", dir.to_str().unwrap()),
            ("FANOUT_BUILD_VERSION", "0.1.0"),
            ("FANOUT_BUILD_ARTIFACT", "fanout-source-key"),
            ("FANOUT_IN_MODE", mode),
            ("FANOUT_BINARY_SHA256", sha),
            ("FANOUT_CARGO", cargo.to_str().unwrap()),
            ("FANOUT_SOURCE_DIR", src.to_str().unwrap()),
            ("CARGO_TARGET_DIR", env.path("target").to_str().unwrap()),
        ])
    };
    // Nothing handed over, nothing cached: the plan job builds, into build-dir/cache.
    let o = build("plan", "");
    let (bin, version) = installed(&o);
    assert_eq!(version, "built-from-source 0.1.0");
    assert_eq!(bin, dir.join("cache/fanout"));
    let out = outputs(&env);
    assert_eq!(out["built"], "true");
    let sha = out["sha256"].clone();
    assert_eq!(sha, sha256_file(&bin));
    std::fs::remove_file(env.path("cargo-args")).unwrap();

    // The cache holds a binary a worker job saved (any job of a run can): the plan
    // job builds anyway and runs its own build, never the cached one.
    std::fs::write(dir.join("cache/fanout"), EVIL).unwrap();
    let o = build("plan", "");
    assert_eq!(installed(&o).1, "built-from-source 0.1.0");
    assert!(
        env.path("cargo-args").exists(),
        "the plan job took the cache"
    );
    assert_eq!(outputs(&env)["sha256"], sha);
    std::fs::remove_file(env.path("cargo-args")).unwrap();

    // A worker job (no write token) with no artifact may take the cached build.
    let o = build("worker", &sha);
    assert_eq!(installed(&o).0, dir.join("cache/fanout"));
    assert!(stderr(&o).contains("the cached build"), "{}", stderr(&o));
    assert!(!env.path("cargo-args").exists(), "built anyway");

    // The aggregate job never does, even with the expected sum: it wants the plan
    // job's artifact and, without it, fails rather than build or take the cache.
    let o = build("aggregate", &sha);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("refusing to run another binary"),
        "{}",
        stderr(&o)
    );
    assert!(!env.path("cargo-args").exists(), "built anyway");

    // A worker job with the artifact (modes lost on the way): taken, no build.
    std::fs::create_dir_all(dir.join("artifact")).unwrap();
    std::fs::copy(dir.join("cache/fanout"), dir.join("artifact/fanout")).unwrap();
    std::fs::set_permissions(
        dir.join("artifact/fanout"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    std::fs::remove_dir_all(dir.join("cache")).unwrap();
    let o = build("worker", &sha);
    assert_eq!(installed(&o).0, dir.join("artifact/fanout"));
    assert!(stderr(&o).contains("the plan job built"), "{}", stderr(&o));
    assert!(!outputs(&env).contains_key("built"));
    assert!(!env.path("cargo-args").exists(), "built anyway");

    // A swapped artifact (another sha256): refused, and no build in its place.
    std::fs::write(dir.join("artifact/fanout"), EVIL).unwrap();
    let o = build("aggregate", &sha);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("refusing to run another binary"), "{err}");
    assert!(!env.path("cargo-args").exists(), "built anyway");

    // An aggregate job given no binary-sha256 does not trust the artifact (any job of
    // the run could have uploaded it): it builds, and says why.
    let o = build("aggregate", "");
    assert_eq!(installed(&o).1, "built-from-source 0.1.0");
    assert!(stderr(&o).contains("no binary-sha256"), "{}", stderr(&o));
    std::fs::remove_file(env.path("cargo-args")).unwrap();
    std::fs::remove_dir_all(dir.join("cache")).unwrap();

    // No plan job binary and no expected sum (a workflow of its own): the job builds,
    // and says why.
    std::fs::remove_dir_all(dir.join("artifact")).unwrap();
    let o = build("worker", "");
    assert_eq!(installed(&o).1, "built-from-source 0.1.0");
    assert!(stderr(&o).contains("::warning"), "{}", stderr(&o));
}

/// The tool cache outlives the job on a self-hosted runner and any job there can write
/// to it (a worker job's agent too). The install step does not know the job's mode, so
/// the plan job, `run` mode, the aggregate job and worker jobs alike reuse it only by
/// unpacking the binary again from the archive kept there, once that archive has the
/// manifest's sha256; anything else there is never handed on to run.
#[test]
fn a_binary_planted_in_the_tool_cache_is_never_handed_on() {
    let env = Env::new();
    env.manifest(|t| env.file_url(t), None);
    let linux = [("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")];
    let cached = env.path("cache/fanout/0.1.0/x86_64-unknown-linux-musl");
    let released = "fanout-x86_64-unknown-linux-musl 0.1.0";
    let (bin, version) = installed(&env.install(&linux));
    assert_eq!(
        (bin.as_path(), version.as_str()),
        (cached.join("fanout").as_path(), released)
    );
    let genuine = sha256_file(&bin);
    let check = |o: &Output| {
        let (bin, version) = installed(o);
        assert_eq!(version, released, "{}", stderr(o));
        assert_eq!(bin, cached.join("fanout"));
        assert_eq!(outputs(&env)["sha256"], genuine);
    };
    let _ = outputs(&env);

    // The binary swapped, the archive left: unpacked again from the archive, with the
    // release unreachable (nothing downloaded).
    std::fs::rename(env.path("release"), env.path("release-away")).unwrap();
    std::fs::write(cached.join("fanout"), EVIL).unwrap();
    let o = env.install(&linux);
    check(&o);
    assert!(
        stderr(&o).contains("reusing the tool cache"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("downloading"), "{}", stderr(&o));

    // The archive swapped too (a planted archive of its own): downloaded again.
    std::fs::write(cached.join("fanout"), EVIL).unwrap();
    std::fs::copy(
        env.path("release-away/fanout-aarch64-unknown-linux-musl.tar.gz"),
        cached.join("fanout.tar.gz"),
    )
    .unwrap();
    std::fs::rename(env.path("release-away"), env.path("release")).unwrap();
    let o = env.install(&linux);
    check(&o);
    let err = stderr(&o);
    assert!(err.contains("not reusing the tool cache"), "{err}");
    assert!(err.contains("downloading file://"), "{err}");

    // A binary with no archive (or an older installer's cache: the binary and a
    // `.complete` marker) and the release unreachable: an error, not that binary.
    std::fs::remove_file(cached.join("fanout.tar.gz")).unwrap();
    std::fs::write(cached.join("fanout"), EVIL).unwrap();
    std::fs::write(cached.join(".complete"), "").unwrap();
    std::fs::rename(env.path("release"), env.path("release-away")).unwrap();
    let o = env.install(&linux);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("download failed"), "{}", stderr(&o));
    assert!(outputs(&env).is_empty(), "a binary was handed on");

    // Nor is that planted cache taken when the manifest has no asset (the action
    // builds), or for a version the manifest does not describe.
    std::fs::rename(env.path("release-away"), env.path("release")).unwrap();
    env.manifest(|_| None, None);
    let src = source_checkout(&env);
    let o = env.install(&[
        linux[0],
        linux[1],
        ("FANOUT_INSTALL_STEP", "resolve"),
        ("FANOUT_SOURCE_DIR", src.to_str().unwrap()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = outputs(&env);
    assert!(
        out.contains_key("build-key") && !out.contains_key("bin"),
        "{out:?}"
    );
    let planted = env.path("cache/fanout/0.0.9/x86_64-unknown-linux-musl");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("fanout"), EVIL).unwrap();
    chmod_x(&planted.join("fanout"));
    std::fs::write(planted.join(".complete"), "").unwrap();
    let o = env.install(&[linux[0], linux[1], ("FANOUT_VERSION", "0.0.9")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("version 0.0.9 asked for"),
        "{}",
        stderr(&o)
    );
    assert!(outputs(&env).is_empty(), "a binary was handed on");
}

fn sha256_file(p: &Path) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("sha256sum \"$1\" 2>/dev/null || shasum -a 256 \"$1\"")
        .arg("sh")
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[test]
fn the_version_defaults_to_the_manifests_and_another_one_is_refused() {
    let env = Env::new();
    env.manifest(|t| env.file_url(t), None);
    let linux = [("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")];
    for asked in ["latest", "v0.1.0", "0.1.0"] {
        let o = env.install(&[linux[0], linux[1], ("FANOUT_VERSION", asked)]);
        let (bin, _) = installed(&o);
        assert_eq!(
            bin,
            env.path("cache/fanout/0.1.0/x86_64-unknown-linux-musl/fanout"),
            "{asked}"
        );
    }
    // A version the manifest does not describe: an error, neither a download nor a
    // build of the action's own (different) source under that name.
    let cargo = fake_cargo(&env);
    let src = env.path("src-checkout");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("Cargo.toml"), "[package]\nname = \"fanout\"\n").unwrap();
    let o = env.install(&[
        linux[0],
        linux[1],
        ("FANOUT_VERSION", "0.0.9"),
        ("FANOUT_CARGO", cargo.to_str().unwrap()),
        ("FANOUT_SOURCE_DIR", src.to_str().unwrap()),
        ("CARGO_TARGET_DIR", env.path("target").to_str().unwrap()),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("version 0.0.9 asked for") && err.contains("describes 0.1.0"),
        "{err}"
    );
    assert!(!env.path("cargo-args").exists(), "built anyway: {err}");
    assert!(!env.path("cache/fanout/0.0.9").exists());
}

/// PATH without python3: a directory of links to every other program on PATH.
fn path_without_python(env: &Env) -> String {
    let dir = env.path("no-python-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for d in std::env::split_paths(&std::env::var_os("PATH").unwrap()) {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let link = dir.join(&name);
            if name.to_string_lossy().starts_with("python") || link.exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), link);
        }
    }
    assert!(
        dir.join("jq").exists(),
        "jq is not installed: the installer's jq path cannot be tested"
    );
    dir.display().to_string()
}

#[test]
fn without_python3_the_manifest_is_read_with_jq() {
    let env = Env::new();
    let path = path_without_python(&env);
    // A manifest with one released target, one explicitly null entry, one absent.
    let m = env.path("manifest.json");
    std::fs::write(
        &m,
        serde_json::json!({
            "version": "0.1.0",
            "targets": {
                "aarch64-apple-darwin": {
                    "url": env.file_url("aarch64-apple-darwin"),
                    "sha256": env.sha256("aarch64-apple-darwin"),
                },
                "x86_64-apple-darwin": null,
            }
        })
        .to_string(),
    )
    .unwrap();
    let o = env.install_with_path(&path, &[("RUNNER_OS", "macOS"), ("RUNNER_ARCH", "ARM64")]);
    let (bin, version) = installed(&o);
    assert_eq!(
        bin,
        env.path("cache/fanout/0.1.0/aarch64-apple-darwin/fanout")
    );
    assert_eq!(version, "fanout-aarch64-apple-darwin 0.1.0");

    // A null or absent target entry means "not released": build from source.
    let cargo = fake_cargo(&env);
    let src = env.path("src-checkout");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("Cargo.toml"), "[package]\nname = \"fanout\"\n").unwrap();
    for (os, arch, target) in [
        ("macOS", "X64", "x86_64-apple-darwin"),
        ("Linux", "X64", "x86_64-unknown-linux-musl"),
    ] {
        for p in [path.as_str(), &std::env::var("PATH").unwrap()] {
            let o = env.install_with_path(
                p,
                &[
                    ("RUNNER_OS", os),
                    ("RUNNER_ARCH", arch),
                    ("FANOUT_CARGO", cargo.to_str().unwrap()),
                    ("FANOUT_SOURCE_DIR", src.to_str().unwrap()),
                    ("CARGO_TARGET_DIR", env.path("target").to_str().unwrap()),
                ],
            );
            assert_eq!(installed(&o).1, "built-from-source 0.1.0");
            assert!(
                stderr(&o).contains(&format!("no released asset for {target}")),
                "{}",
                stderr(&o)
            );
        }
    }
}
