//! The release flow (`dist/release.py`, run step by step by
//! `.github/workflows/release.yml`) against a loopback fake of GitHub's releases
//! (`tests/support/fake_release.rs`, checked against GitHub's OpenAPI description)
//! and a local bare repository for its tags; then the installer (`dist/install.sh`)
//! of the tagged commit against what the flow published.
//!
//! - the steps, and the whole workflow under act: the tagged commit holds
//!   dist/manifest.json with every target's URL and sha256 (of the bytes the release
//!   holds), the release is published only once the tag exists, v0 moves, main is
//!   untouched, and running everything again changes nothing;
//! - a release that failed half-way is finished by a re-run (nothing re-uploaded,
//!   the tag kept), and an existing tag with another manifest is never moved;
//! - v0 follows the newest stable release only;
//! - the installer downloads the asset for this machine from the fake server (its
//!   base URL overridden), checks its sha256 (a tampered asset is refused, nothing
//!   cached) and prints how long the install took (a figure, never an assertion);
//! - `[package.metadata.binstall]` names the same assets.
//!
//! The builds are stand-ins (a wrapper of the binary under test per target): the
//! flow is about what happens to the archives, not about compiling.

use crate::act_support;
use crate::common;
use crate::fake_release;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use common::*;
use fake_release::FakeReleases;
use serde_json::Value;

const TOKEN: &str = "release-token";
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn tag() -> String {
    format!("v{VERSION}")
}

/// The targets of the committed manifest.
fn targets() -> Vec<String> {
    let m: Value = serde_json::from_str(include_str!("../../dist/manifest.json")).unwrap();
    m["targets"].as_object().unwrap().keys().cloned().collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A checkout of fanout (what the release reads) with a bare `origin`, and the fake.
struct Project {
    t: TestEnv,
    remote: PathBuf,
    gh: FakeReleases,
}

impl Project {
    fn new() -> Project {
        let t = TestEnv::new();
        let project = Path::new(env!("CARGO_MANIFEST_DIR"));
        for f in [
            "Cargo.toml",
            "dist/release.py",
            "dist/install.sh",
            "dist/manifest.json",
            ".github/workflows/release.yml",
        ] {
            t.write(f, &std::fs::read_to_string(project.join(f)).unwrap());
        }
        for f in ["dist/release.py", "dist/install.sh"] {
            chmod_x(&t.repo.join(f));
        }
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "fanout, ready to release"]);
        let remote = t.bare_origin();
        let gh = FakeReleases::start("octo", "fanout", TOKEN).with_git(remote.clone());
        Project { t, remote, gh }
    }

    /// `release.py ARGS` in `dir`, as the workflow runs it.
    fn step_in(&self, dir: &Path, args: &[&str]) -> Output {
        let head = self.t.git_in(dir, &["rev-parse", "HEAD"]);
        self.t
            .command("python3", dir)
            .arg("dist/release.py")
            .args(args)
            .env("GITHUB_REPOSITORY", "octo/fanout")
            .env("GITHUB_API_URL", self.gh.api_url())
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_SHA", head.trim())
            .output()
            .unwrap()
    }

    fn step_ok_in(&self, dir: &Path, args: &[&str]) -> String {
        let o = self.step_in(dir, args);
        assert!(o.status.success(), "release.py {args:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    }

    fn step_ok(&self, args: &[&str]) -> String {
        self.step_ok_in(&self.t.repo, args)
    }

    /// Archives of stand-in builds in `<root>/<dir>/` (`build` tells builds apart).
    fn package(&self, dir: &str, build: &str) -> PathBuf {
        let out = self.t.root().join(dir);
        for target in targets() {
            let bin = self.t.root().join(format!("build-{build}-{target}/fanout"));
            std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
            let script = format!("#!/bin/sh\n# {target}, build {build}\nexec '{FANOUT}' \"$@\"\n");
            std::fs::write(&bin, script).unwrap();
            chmod_x(&bin);
            self.step_ok(&[
                "package",
                &target,
                bin.to_str().unwrap(),
                out.to_str().unwrap(),
            ]);
        }
        out
    }

    /// The remote's tags: name -> the commit it points at.
    fn tags(&self) -> Vec<(String, String)> {
        let out = self.t.git_in(
            &self.remote,
            &[
                "for-each-ref",
                "--format=%(refname:short) %(objectname) %(*objectname)",
                "refs/tags",
            ],
        );
        out.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let commit = if f[2].is_empty() { f[1] } else { f[2] };
                (f[0].to_owned(), commit.to_owned())
            })
            .collect()
    }

    fn tag_commit(&self, name: &str) -> Option<String> {
        self.tags()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }

    fn uploads(&self) -> usize {
        self.gh
            .requests()
            .iter()
            .filter(|r| r.operation == "repos/upload-release-asset")
            .count()
    }

    /// A fresh clone of the remote at `rev` (a re-run's checkout).
    fn clone_at(&self, name: &str, rev: &str) -> PathBuf {
        let dir = self.t.root().join(name);
        self.t.git_in(
            self.t.root(),
            &[
                "clone",
                "-q",
                self.remote.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        self.t.git_in(&dir, &["checkout", "-q", rev]);
        dir
    }
}

fn chmod_x(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every step, in the workflow's order, in `dir` with the archives of `assets`.
fn release_all(p: &Project, dir: &Path, assets: &Path) {
    let tag = tag();
    for step in ["draft", "manifest", "tag", "publish", "major"] {
        let mut args = vec![step, tag.as_str()];
        if step == "draft" {
            args.push(assets.to_str().unwrap());
        }
        p.step_ok_in(dir, &args);
    }
}

/// What a release must look like once done: the tag on a commit above `base` that
/// changes dist/manifest.json only, the manifest naming every asset with the sha256
/// of the bytes the release holds, the release published, v0 on the tag.
fn assert_released(p: &Project, base: &str) -> Value {
    let tag = tag();
    let commit = p.tag_commit(&tag).expect("the tag was pushed");
    let t = &p.t;
    assert_eq!(
        t.git_in(&p.remote, &["rev-parse", &format!("{commit}^")])
            .trim(),
        base
    );
    let changed = t.git_in(&p.remote, &["diff", "--name-only", base, &commit]);
    assert_eq!(changed.trim(), "dist/manifest.json");
    let manifest: Value = serde_json::from_str(&t.git_in(
        &p.remote,
        &["show", &format!("{commit}:dist/manifest.json")],
    ))
    .unwrap();
    assert_eq!(manifest["version"], VERSION);
    let releases = p.gh.releases();
    assert_eq!(releases.len(), 1, "{releases:#?}");
    let release = &releases[0];
    assert!(!release.draft && release.tag_name == tag);
    assert_eq!(release.make_latest.as_deref(), Some("true"));
    for target in targets() {
        let name = format!("fanout-{target}.tar.gz");
        let asset = release.assets.iter().find(|a| a.name == name).expect(&name);
        let sum = sha256(&asset.data);
        let entry = &manifest["targets"][&target];
        assert_eq!(
            entry["url"],
            format!("https://github.com/octo/fanout/releases/download/{tag}/{name}")
        );
        assert_eq!(entry["sha256"], sum.as_str(), "{target}");
        let sums = release
            .assets
            .iter()
            .find(|a| a.name == format!("{name}.sha256"))
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&sums.data),
            format!("{sum}  {name}\n")
        );
    }
    assert_eq!(release.assets.len(), 2 * targets().len());
    assert_eq!(
        p.tag_commit("v0").as_deref(),
        Some(commit.as_str()),
        "v0 moved"
    );
    manifest
}

fn sha256(data: &[u8]) -> String {
    use std::io::Write;
    let mut c = std::process::Command::new("sh")
        .args(["-c", "sha256sum 2>/dev/null || shasum -a 256"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(data).unwrap();
    String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned()
}

#[test]
fn the_release_steps_tag_a_commit_holding_its_own_manifest_and_a_rerun_changes_nothing() {
    let p = Project::new();
    let base = p.t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let out = p.step_ok(&["check", VERSION]);
    assert_eq!(
        out,
        format!("version={VERSION}\ntag=v{VERSION}\nmajor=v0\nprerelease=false\n")
    );
    let assets = p.package("out", "1");
    release_all(&p, &p.t.repo, &assets);
    let manifest = assert_released(&p, &base);
    assert_eq!(
        p.t.git_in(&p.remote, &["rev-parse", "main"]).trim(),
        base,
        "main is untouched: its manifest keeps null URLs"
    );

    // Everything again (a re-run of the whole workflow, fresh checkout of main,
    // rebuilt archives): no upload, no new release, no tag moved.
    let (uploads, tags) = (p.uploads(), p.tags());
    let rerun = p.clone_at("rerun", "main");
    release_all(&p, &rerun, &p.package("out-rerun", "2"));
    assert_eq!(p.uploads(), uploads, "a re-run uploaded again");
    assert_eq!(p.tags(), tags);
    assert_eq!(assert_released(&p, &base), manifest);
    p.gh.assert_no_violations();

    install_from_the_release(&p);
}

/// The tagged commit's installer, pointed at the fake server, installs this
/// machine's asset; a tampered asset is refused and leaves nothing cached.
fn install_from_the_release(p: &Project) {
    let checkout = p.clone_at("at-tag", &tag());
    let install = |cache: &str| {
        let started = Instant::now();
        let o =
            p.t.command("bash", &checkout)
                .arg("dist/install.sh")
                .env("FANOUT_INSTALL_BASE_URL", p.gh.download_base(&tag()))
                .env("FANOUT_INSTALL_ALLOW_HTTP", "true")
                .env("RUNNER_TOOL_CACHE", p.t.root().join(cache))
                .env("RUNNER_TEMP", p.t.root())
                .output()
                .unwrap();
        (o, started.elapsed())
    };
    let (o, took) = install("tool-cache");
    assert!(o.status.success(), "install failed: {}", stderr(&o));
    eprintln!("install from the fake release server: {took:.2?} (target: well under 10 s)");
    let bin = String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let target = bin.split('/').rev().nth(1).unwrap().to_owned();
    assert!(targets().contains(&target), "{bin}");
    let version =
        p.t.command(&bin, &checkout)
            .arg("--version")
            .output()
            .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("fanout {VERSION}")
    );
    assert!(
        std::fs::read_to_string(&bin)
            .unwrap()
            .contains(&format!("# {target}, build"))
    );
    assert!(stderr(&o).contains(&format!(
        "releases/download/{}/fanout-{target}.tar.gz",
        tag()
    )));

    p.gh.tamper(
        &tag(),
        &format!("fanout-{target}.tar.gz"),
        b"not the released bytes",
    );
    let (o, _) = install("tool-cache-2");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("checksum mismatch"), "{}", stderr(&o));
    assert!(
        !p.t.root()
            .join("tool-cache-2/fanout")
            .join(VERSION)
            .join(&target)
            .exists()
    );
}

#[test]
fn a_release_that_failed_at_publish_is_finished_by_a_rerun_and_a_tag_is_never_moved() {
    let p = Project::new();
    let base = p.t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let tag = tag();
    let assets = p.package("out", "1");
    for step in ["draft", "manifest", "tag"] {
        let mut args = vec![step, tag.as_str()];
        if step == "draft" {
            args.push(assets.to_str().unwrap());
        }
        p.step_ok(&args);
    }
    // The token cannot publish: the run stops there, the release still a draft.
    p.gh.fail("PATCH", "/releases/", 403, 1);
    let o = p.step_in(&p.t.repo, &["publish", &tag]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("HTTP 403"), "{}", stderr(&o));
    assert!(p.gh.releases()[0].draft);
    assert_eq!(p.tag_commit("v0"), None);
    let first_assets: Vec<Vec<u8>> = p.gh.releases()[0]
        .assets
        .iter()
        .map(|a| a.data.clone())
        .collect();

    // The re-run rebuilds (other bytes), but the draft's archives are kept, so the
    // manifest it computes is the tag's: the tag is accepted, the release published.
    let uploads = p.uploads();
    let rerun = p.clone_at("rerun", "main");
    release_all(&p, &rerun, &p.package("out-rerun", "2"));
    assert_eq!(p.uploads(), uploads);
    let now: Vec<Vec<u8>> = p.gh.releases()[0]
        .assets
        .iter()
        .map(|a| a.data.clone())
        .collect();
    assert_eq!(now, first_assets);
    assert_released(&p, &base);
    p.gh.assert_no_violations();

    // A tag made by hand, on a commit without the manifest: never moved.
    let other = "v0.0.9";
    p.t.git(&["tag", other, &base]);
    p.t.git(&["push", "-q", "origin", other]);
    p.step_ok(&["draft", other, assets.to_str().unwrap()]);
    p.step_ok(&["manifest", other]);
    let o = p.step_in(&p.t.repo, &["tag", other]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("a tag is never moved"),
        "{}",
        stderr(&o)
    );
    assert_eq!(p.tag_commit(other).as_deref(), Some(base.as_str()));
    // Nor is its draft published: the tag does not hold the draft's manifest.
    let o = p.step_in(&p.t.repo, &["publish", other]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("does not hold the manifest"),
        "{}",
        stderr(&o)
    );
    assert!(
        p.gh.releases()
            .iter()
            .any(|r| r.tag_name == other && r.draft)
    );
}

#[test]
fn the_major_tag_follows_the_newest_stable_release_only() {
    let p = Project::new();
    let t = &p.t;
    let commit = |msg: &str| {
        t.git(&["commit", "-q", "--allow-empty", "-m", msg]);
        t.git(&["rev-parse", "HEAD"]).trim().to_owned()
    };
    let tag = |name: &str| {
        t.git(&["tag", name]);
        t.git(&["push", "-q", "origin", name]);
    };
    commit("a");
    tag("v0.1.0");
    let b = commit("b");
    tag("v0.3.0");
    p.step_ok(&["major", "v0.3.0"]);
    assert_eq!(p.tag_commit("v0").as_deref(), Some(b.as_str()));
    // An older patch release (e.g. a backport) does not take v0 back.
    let o = p.step_in(&t.repo, &["major", "v0.1.0"]);
    assert!(
        o.status.success() && stderr(&o).contains("v0.3.0 is newer"),
        "{}",
        stderr(&o)
    );
    assert_eq!(p.tag_commit("v0").as_deref(), Some(b.as_str()));
    commit("c");
    tag("v0.4.0-rc.1");
    p.step_ok(&["major", "v0.4.0-rc.1"]);
    assert_eq!(
        p.tag_commit("v0").as_deref(),
        Some(b.as_str()),
        "moved for a prerelease"
    );
    let d = commit("d");
    tag("v0.4.0");
    p.step_ok(&["major", "v0.4.0"]);
    assert_eq!(p.tag_commit("v0").as_deref(), Some(d.as_str()));
    p.step_ok(&["major", "v0.4.0"]);
    assert_eq!(p.tag_commit("v0").as_deref(), Some(d.as_str()));
    let o = p.step_in(&t.repo, &["major", "v0.5.0"]);
    assert_eq!(o.status.code(), Some(1), "a tag that is not there");
}

#[test]
fn check_refuses_a_version_the_crate_does_not_say() {
    let p = Project::new();
    for (asked, says) in [
        ("9.9.9", "Cargo.toml says"),
        ("0.1", "expected MAJOR.MINOR.PATCH"),
    ] {
        let o = p.step_in(&p.t.repo, &["check", asked]);
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains(says), "{asked}: {}", stderr(&o));
    }
    let o = p.step_in(&p.t.repo, &["package", "sparc-unknown-none", "x", "out"]);
    assert!(
        stderr(&o).contains("not in dist/manifest.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn binstall_metadata_names_the_release_assets() {
    // cargo-binstall renders pkg-url with the crate's repository, version and the
    // target; that must be the URL the release flow writes into the manifest.
    let toml = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,tomllib; print(json.dumps(tomllib.load(open(sys.argv[1],'rb'))))",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ])
        .output()
        .unwrap();
    let cargo: Value = serde_json::from_slice(&toml.stdout).unwrap();
    let package = &cargo["package"];
    let meta = &package["metadata"]["binstall"];
    assert_eq!(meta["pkg-fmt"], "tgz");
    // The release flow's URLs: GITHUB_SERVER_URL/GITHUB_REPOSITORY/releases/download/…
    // (see assert_released), and the crate's repository is that of the release.
    let repo = package["repository"].as_str().unwrap();
    assert_eq!(repo, "https://github.com/fanout-dev/fanout");
    for target in targets() {
        let url = meta["pkg-url"]
            .as_str()
            .unwrap()
            .replace("{ repo }", repo)
            .replace("{ version }", VERSION)
            .replace("{ name }", "fanout")
            .replace("{ target }", &target);
        assert_eq!(
            url,
            format!("{repo}/releases/download/v{VERSION}/fanout-{target}.tar.gz")
        );
    }
    // The archive holds `fanout` at its top level (release.py package).
    assert_eq!(meta["bin-dir"], "{ bin }{ binary-ext }");
}

#[test]
fn the_release_workflow_under_act() {
    let Some(act) = act_support::binary() else {
        return;
    };
    let p = Project::new();
    let t = &p.t;
    // The workflow as committed, remote actions replaced by the stand-ins.
    act_support::install(&t.repo);
    let wf = t.repo.join(".github/workflows/release.yml");
    let text = std::fs::read_to_string(&wf).unwrap();
    std::fs::write(&wf, act_support::substitute(&text)).unwrap();
    t.git(&["add", "-A"]);
    t.git(&["commit", "-q", "-m", "stand-ins for act"]);
    t.git(&["push", "-q", "origin", "main"]);
    let base = t.git(&["rev-parse", "HEAD"]).trim().to_owned();
    // The build jobs' cargo (on PATH through the toolchain stand-ins).
    let toolchain = t.root().join("toolchain");
    act_support::stand_in_cargo(&toolchain, &t.root().join("cargo-builds"), FANOUT);

    let run = |n: u32| {
        let artifacts = t.root().join(format!("artifacts-{n}"));
        std::fs::create_dir_all(&artifacts).unwrap();
        let event = t.root().join("event.json");
        std::fs::write(
            &event,
            format!(r#"{{"inputs": {{"version": "{VERSION}"}}}}"#),
        )
        .unwrap();
        let out = t
            .command(act.to_str().unwrap(), &t.repo)
            .env("ACT_DISABLE_VERSION_CHECK", "1")
            .args([
                "workflow_dispatch",
                "--json",
                "-W",
                ".github/workflows/release.yml",
            ])
            .arg("-e")
            .arg(&event)
            .args([
                "-P",
                "ubuntu-latest=-self-hosted",
                "-P",
                "macos-15=-self-hosted",
            ])
            .args(["-P", "macos-15-intel=-self-hosted", "--no-cache-server"])
            .arg("--action-cache-path")
            .arg(t.root().join("act-cache"))
            .args(["--env", "GITHUB_REPOSITORY=octo/fanout"])
            .arg("--env")
            .arg(format!("GITHUB_API_URL={}", p.gh.api_url()))
            .arg("--env")
            .arg(format!("FANOUT_TEST_ARTIFACTS={}", artifacts.display()))
            .arg("--env")
            .arg(format!("FANOUT_TEST_TOOLCHAIN={}", toolchain.display()))
            .args(["-s", &format!("GITHUB_TOKEN={TOKEN}")])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let log = act_support::ActLog::parse(&out.stdout);
        assert!(
            out.status.success(),
            "act run {n} failed:\n{}\n{}",
            log.raw,
            String::from_utf8_lossy(&out.stderr)
        );
        log
    };
    let log = run(1);
    assert_eq!(log.output("check", "tag"), Some(tag().as_str()));
    let manifest = assert_released(&p, &base);
    let builds = std::fs::read_to_string(t.root().join("cargo-builds")).unwrap();
    assert_eq!(builds.lines().count(), targets().len(), "{builds}");
    assert!(
        builds
            .lines()
            .all(|l| l.contains("--locked --release --target")),
        "{builds}"
    );
    let summary = log.summaries.get("release").cloned().unwrap_or_default();
    assert!(
        summary.contains(
            manifest["targets"][&targets()[0]]["sha256"]
                .as_str()
                .unwrap()
        )
    );

    // Run again: the release is done, so nothing changes.
    let (uploads, tags) = (p.uploads(), p.tags());
    run(2);
    assert_eq!((p.uploads(), p.tags()), (uploads, tags));
    assert_eq!(assert_released(&p, &base), manifest);
    p.gh.assert_no_violations();
}

/// The crate's package holds every test and bench target Cargo.toml names (else
/// `cargo publish` warns once per dropped target), and not the READMEs of the
/// repository's other folders.
#[test]
fn the_package_holds_its_targets_and_one_readme() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = succeeded(
        std::process::Command::new(cargo)
            .args([
                "package",
                "--list",
                "--offline",
                "--locked",
                "--allow-dirty",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR")),
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    let files: Vec<&str> = listed.lines().collect();
    // the test binary, and each `[[bench]]` Cargo.toml names (benches/<name>.rs)
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut targets = vec!["tests/it/main.rs".to_owned()];
    let mut lines = manifest.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "[[bench]]" {
            let name = lines
                .find_map(|l| l.trim().strip_prefix("name = "))
                .unwrap();
            targets.push(format!("benches/{}.rs", name.trim_matches('"')));
        }
    }
    assert!(targets.len() > 1, "no [[bench]] in Cargo.toml");
    for target in &targets {
        assert!(
            files.contains(&target.as_str()),
            "{target} not packaged:\n{listed}"
        );
    }
    assert!(files.contains(&"README.md"), "{listed}");
    for stray in ["bench/README.md", "dist/README.md"] {
        assert!(!files.contains(&stray), "{stray} packaged:\n{listed}");
    }
}
