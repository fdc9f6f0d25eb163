//! [`Git`] against real repositories whose configuration plants programs: the same
//! commands run by plain git run them (the plants work), through [`Git`] nothing runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// A temporary directory with a hermetic environment, a marker directory, and a
/// program that records each time it runs (and whether it saw a token).
struct Lab {
    dir: tempfile::TempDir,
    env: Vec<(OsString, OsString)>,
}

const TOKEN: &str = "ghs_labtoken0123456789abcdefghijklmnopqrstu";

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut env: Vec<(OsString, OsString)> = [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_NAME", "T"),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
            ("GIT_COMMITTER_NAME", "T"),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
            ("LC_ALL", "C"),
            ("GITHUB_TOKEN", TOKEN),
            // local submodule URLs need the file protocol (the user's own setting)
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "protocol.file.allow"),
            ("GIT_CONFIG_VALUE_0", "always"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        env.push(("PATH".into(), std::env::var_os("PATH").unwrap_or_default()));
        env.push(("HOME".into(), root.join("home").into()));
        std::fs::create_dir_all(root.join("home")).unwrap();
        std::fs::create_dir_all(root.join("markers")).unwrap();
        let plant = root.join("plant.sh");
        std::fs::write(
            &plant,
            format!(
                "#!/bin/sh\nenv > '{}'/\"$1.$$\"\ncase \"$1\" in filter-*|textconv) cat ;; esac\nexit 0\n",
                root.join("markers").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&plant, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        Lab { dir, env }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn plant(&self, what: &str) -> String {
        format!("{} {what}", self.root().join("plant.sh").display())
    }

    /// Plain git, as the user (or an agent) runs it.
    fn plain(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn hardened(&self, dir: &Path) -> Git {
        Git::new(dir).parent_env(self.env.clone())
    }

    /// The planted programs that ran: `(name, saw the token)`.
    fn markers(&self) -> Vec<(String, bool)> {
        let mut v: Vec<(String, bool)> = std::fs::read_dir(self.root().join("markers"))
            .unwrap()
            .flatten()
            .map(|e| {
                let body = std::fs::read_to_string(e.path()).unwrap_or_default();
                let name = e.file_name().to_string_lossy().into_owned();
                (
                    name.split('.').next().unwrap().to_owned(),
                    body.contains(TOKEN),
                )
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn clear_markers(&self) {
        let m = self.root().join("markers");
        std::fs::remove_dir_all(&m).unwrap();
        std::fs::create_dir_all(&m).unwrap();
    }

    /// A repository with a submodule and a file every driver applies to, whose
    /// configuration then gets the plants: fsmonitor, hooks, a filter, a textconv, a
    /// `!command` submodule update, a credential helper, an askpass.
    fn planted_repo(&self) -> PathBuf {
        let root = self.root();
        let lib = root.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        self.plain(&lib, &["init", "-q", "-b", "main"]);
        std::fs::write(lib.join("lib.txt"), "lib\n").unwrap();
        self.plain(&lib, &["add", "-A"]);
        self.plain(&lib, &["commit", "-q", "-m", "lib"]);
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        self.plain(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        std::fs::write(repo.join(".gitattributes"), "a.txt filter=evil diff=evil\n").unwrap();
        self.plain(&repo, &["add", "-A"]);
        self.plain(&repo, &["commit", "-q", "-m", "init"]);
        let lib_s = lib.display().to_string();
        self.plain(&repo, &["submodule", "add", "-q", &lib_s, "vendor/lib"]);
        self.plain(&repo, &["commit", "-q", "-m", "submodule"]);
        self.plain(&repo, &["submodule", "deinit", "-q", "--all"]);
        for (k, v) in [
            ("core.fsmonitor", self.plant("fsmonitor")),
            ("filter.evil.clean", self.plant("filter-clean")),
            ("filter.evil.smudge", self.plant("filter-smudge")),
            ("filter.evil.required", "true".into()),
            ("diff.evil.textconv", self.plant("textconv")),
            (
                "submodule.vendor/lib.update",
                format!("!{}", self.plant("update")),
            ),
            ("submodule.vendor/lib.url", lib_s.clone()),
            (
                "credential.helper",
                format!("!{}", self.plant("credential")),
            ),
            ("core.askPass", self.plant("askpass")),
        ] {
            self.plain(&repo, &["config", k, &v]);
        }
        for hook in [
            "pre-commit",
            "post-commit",
            "post-checkout",
            "reference-transaction",
        ] {
            let p = repo.join(".git/hooks").join(hook);
            std::fs::write(
                &p,
                format!(
                    "#!/bin/sh\n{} \"$@\"\n",
                    self.plant(&format!("hook-{hook}"))
                ),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        repo
    }
}

#[test]
fn planted_programs_run_for_plain_git_and_never_for_fanouts() {
    let lab = Lab::new();
    let repo = lab.planted_repo();

    // Through the hardened helper: submodules, status, add, commit, diff, log -p,
    // checkout, bundle — nothing planted runs.
    let run = |args: &[&str]| {
        lab.hardened(&repo)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    run(&["submodule", "update", "--init", "--recursive"]);
    assert_eq!(
        std::fs::read_to_string(repo.join("vendor/lib/lib.txt")).unwrap(),
        "lib\n"
    );
    std::fs::write(repo.join("a.txt"), "a\nb\n").unwrap();
    run(&["status"]);
    assert!(run(&["diff"]).contains("+b"));
    run(&["add", "a.txt"]);
    run(&["commit", "-q", "-m", "edit"]);
    assert!(run(&["log", "-p", "-1"]).contains("+b"));
    run(&["checkout", "-q", "HEAD~1", "--", "a.txt"]);
    run(&["checkout", "-q", "-b", "other"]);
    let bundle = lab.root().join("b.bundle");
    run(&["bundle", "create", "-q", bundle.to_str().unwrap(), "other"]);
    assert_eq!(
        lab.markers(),
        [],
        "a planted program ran under fanout's git"
    );

    // The same through plain git: the plants are real (each records that it ran, and
    // the token it found).
    std::fs::write(repo.join("a.txt"), "a\nc\n").unwrap();
    lab.plain(&repo, &["status"]);
    lab.plain(&repo, &["add", "a.txt"]);
    lab.plain(&repo, &["commit", "-q", "-m", "plain"]);
    let ran: Vec<String> = lab.markers().into_iter().map(|(n, _)| n).collect();
    for want in [
        "fsmonitor",
        "filter-clean",
        "hook-pre-commit",
        "hook-post-commit",
    ] {
        assert!(ran.iter().any(|n| n == want), "{want} did not run: {ran:?}");
    }
    assert!(
        lab.markers().iter().all(|(_, token)| *token),
        "{:?}",
        lab.markers()
    );
}

#[test]
fn the_submodule_update_command_of_the_config_never_runs() {
    let lab = Lab::new();
    let repo = lab.planted_repo();
    // Plain git runs `!command` updates from .git/config …
    lab.plain(&repo, &["submodule", "update", "--init"]);
    assert!(
        lab.markers().iter().any(|(n, _)| n == "update"),
        "{:?}",
        lab.markers()
    );
    lab.plain(&repo, &["submodule", "deinit", "-q", "-f", "--all"]);
    lab.clear_markers();
    // … fanout's checks the submodule out instead.
    lab.hardened(&repo)
        .args(["submodule", "update", "--init", "--recursive"])
        .output()
        .unwrap();
    assert!(repo.join("vendor/lib/lib.txt").is_file());
    assert_eq!(lab.markers(), []);
}

#[test]
fn a_redirected_worktree_git_file_reads_no_planted_config() {
    // An agent rewrites its worktree's `.git` file to a repository of its own whose
    // config plants fsmonitor; naming the real git directory keeps git off it.
    let lab = Lab::new();
    let root = lab.root();
    let repo = root.join("r");
    std::fs::create_dir_all(&repo).unwrap();
    lab.plain(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("f"), "f\n").unwrap();
    lab.plain(&repo, &["add", "-A"]);
    lab.plain(&repo, &["commit", "-q", "-m", "f"]);
    let wt = root.join("wt");
    lab.plain(&repo, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let fake = wt.join("fake");
    lab.plain(&root, &["init", "-q", fake.to_str().unwrap()]);
    lab.plain(
        &fake,
        &["config", "core.fsmonitor", &lab.plant("fsmonitor")],
    );
    std::fs::write(
        wt.join(".git"),
        format!("gitdir: {}\n", fake.join(".git").display()),
    )
    .unwrap();
    let admin = repo.join(".git/worktrees/wt");
    let status = lab
        .hardened(&wt)
        .git_dir(&admin)
        .work_tree(&wt)
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(status.contains("?? fake/"), "{status}");
    assert_eq!(lab.markers(), []);
}

#[test]
fn first_wins_programs_in_the_repository_config_are_refused() {
    let lab = Lab::new();
    let repo = lab.root().join("r");
    std::fs::create_dir_all(&repo).unwrap();
    lab.plain(&repo, &["init", "-q"]);
    lab.plain(&repo, &["config", "remote.origin.url", "/nowhere"]);
    lab.plain(
        &repo,
        &[
            "config",
            "remote.origin.uploadpack",
            &lab.plant("uploadpack"),
        ],
    );
    let err = lab
        .hardened(&repo)
        .args(["fetch", "origin"])
        .output()
        .unwrap_err();
    assert!(matches!(err, GitError::Refused { .. }), "{err}");
    assert!(
        err.to_string().contains("remote.origin.uploadpack"),
        "{err}"
    );
    assert_eq!(lab.markers(), []);
}

#[test]
fn trusted_config_holds_against_later_edits() {
    let lab = Lab::new();
    let repo = lab.root().join("r");
    std::fs::create_dir_all(&repo).unwrap();
    lab.plain(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".gitattributes"), "*.txt filter=upper\n").unwrap();
    // The user's own filter, as it is at the run's start.
    lab.plain(&repo, &["config", "filter.upper.clean", "tr a-z A-Z"]);
    let trusted = TrustedConfig::capture(&repo, &["filter.upper."]).unwrap();
    assert_eq!(
        trusted.entries(),
        [("filter.upper.clean".to_owned(), "tr a-z A-Z".to_owned())]
    );
    // An agent swaps the program afterwards.
    lab.plain(
        &repo,
        &["config", "filter.upper.clean", &lab.plant("filter-clean")],
    );
    std::fs::write(repo.join("x.txt"), "hello\n").unwrap();
    let git = |t: Option<&TrustedConfig>| {
        let mut g = lab.hardened(&repo);
        if let Some(t) = t {
            g = g.trusting(t);
        }
        g
    };
    git(Some(&trusted)).args(["add", "x.txt"]).output().unwrap();
    let staged = git(None).args(["show", ":x.txt"]).output().unwrap();
    assert_eq!(staged, "HELLO\n", "the trusted filter ran");
    // Untrusted, the filter is off altogether.
    std::fs::write(repo.join("y.txt"), "hello\n").unwrap();
    git(None).args(["add", "y.txt"]).output().unwrap();
    assert_eq!(
        git(None).args(["show", ":y.txt"]).output().unwrap(),
        "hello\n"
    );
    assert_eq!(lab.markers(), []);
}

#[test]
fn the_environment_holds_no_token_and_credentials_in_env_config_are_dropped() {
    let mut lab = Lab::new();
    lab.env.push(("GIT_CONFIG_COUNT".into(), "2".into()));
    lab.env.push((
        "GIT_CONFIG_KEY_1".into(),
        "http.https://github.com/.extraheader".into(),
    ));
    lab.env.push((
        "GIT_CONFIG_VALUE_1".into(),
        format!("AUTHORIZATION: basic {TOKEN}").into(),
    ));
    for name in crate::secret::MODEL_CREDENTIALS {
        lab.env
            .push(((*name).into(), format!("model-secret-{name}").into()));
    }
    let dir = lab.root();
    let inv = lab.hardened(&dir).args(["version"]).invocation().unwrap();
    let all = format!("{:?} {:?}", inv.args, inv.env);
    assert!(!all.contains(TOKEN), "{all}");
    assert!(!all.contains("model-secret-"), "{all}");
    assert!(all.contains("protocol.file.allow=always"), "{all}");
    let out = inv.command().output().unwrap();
    assert!(out.status.success());
}

#[test]
fn a_listing_is_shared_only_when_every_worktree_reads_the_same() {
    use super::harden::{Entry, Scope};
    let e = |key: &str, value: &str| Entry {
        scope: Scope::Repository,
        key: key.into(),
        value: value.into(),
    };
    let plain = [e("core.bare", "false"), e("include.path", "shared.inc")];
    assert!(Listed::shareable(&plain).is_some());
    for per_worktree in [
        e("includeIf.onbranch:main.path", "x.inc"),
        e("includeif.gitdir:/src/.git.path", "x.inc"),
        e("extensions.worktreeconfig", "true"),
        e("extensions.worktreeConfig", "1"),
    ] {
        let mut entries = plain.to_vec();
        entries.push(per_worktree.clone());
        assert!(Listed::shareable(&entries).is_none(), "{per_worktree:?}");
    }
    let mut off = plain.to_vec();
    off.push(e("extensions.worktreeconfig", "false"));
    assert!(Listed::shareable(&off).is_some());
}

#[test]
fn git_is_found_as_execvp_would_find_it() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let (a, b, rel) = (d.path().join("a"), d.path().join("b"), d.path().join("rel"));
    for dir in [&a, &b, &rel] {
        std::fs::create_dir(dir).unwrap();
    }
    // not executable: skipped, as execvp skips it
    std::fs::write(a.join("git"), "").unwrap();
    for dir in [&b, &rel] {
        std::fs::write(dir.join("git"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(dir.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let env = |path: &str| vec![(OsString::from("PATH"), OsString::from(path))];
    let path = format!("{}:{}", a.display(), b.display());
    assert_eq!(locate(&env(&path), d.path()), b.join("git"));
    // a relative entry is relative to the command's directory
    assert_eq!(locate(&env("rel"), d.path()), rel.join("git"));
    // not found, or no PATH: the bare name, for the child to find
    assert_eq!(
        locate(&env(&a.display().to_string()), d.path()),
        PathBuf::from("git")
    );
    assert_eq!(locate(&[], d.path()), PathBuf::from("git"));
}

#[test]
fn a_named_git_directory_finds_the_shared_submodule_configs_through_commondir() {
    let d = tempfile::tempdir().unwrap();
    let common = d.path().join("repo/.git");
    let admin = common.join("worktrees/w1");
    std::fs::create_dir_all(common.join("modules/lib")).unwrap();
    std::fs::create_dir_all(admin.join("modules/own")).unwrap();
    for git_dir in [common.join("modules/lib"), admin.join("modules/own")] {
        std::fs::write(git_dir.join("config"), "[core]\n").unwrap();
        std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }
    std::fs::write(admin.join("commondir"), "../..\n").unwrap();
    let real = |p: &Path| std::fs::canonicalize(p).unwrap();
    let found = |git: Git| {
        let mut got: Vec<PathBuf> = Places::find(&git)
            .submodule_configs
            .iter()
            .map(|p| real(p))
            .collect();
        got.sort();
        got
    };
    let mut want = vec![
        real(&admin.join("modules/own/config")),
        real(&common.join("modules/lib/config")),
    ];
    want.sort();
    assert_eq!(found(Git::new(d.path()).git_dir(&admin)), want);
    // no commondir file: the directory is its own shared directory
    assert_eq!(
        found(Git::new(d.path()).git_dir(&common)),
        [real(&common.join("modules/lib/config"))]
    );
}

#[test]
fn a_command_in_its_own_process_group_lists_the_configuration_there_too() {
    use std::os::unix::fs::PermissionsExt;
    let lab = Lab::new();
    let repo = lab.root().join("repo");
    std::fs::create_dir(&repo).unwrap();
    lab.plain(&repo, &["init", "-q", "-b", "main"]);
    // A `git` first on the PATH that writes down its process group, then runs git.
    let real = locate(&lab.env, &repo);
    let bin = lab.root().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let seen = lab.root().join("groups");
    std::fs::write(
        bin.join("git"),
        format!(
            "#!/bin/sh\ncut -d' ' -f5 /proc/$$/stat >> '{}'\nexec '{}' \"$@\"\n",
            seen.display(),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Lab's PATH is this process's.
    let mut env = lab.env.clone();
    env.retain(|(k, _)| k != "PATH");
    let inherited = std::env::var_os("PATH").unwrap_or_default();
    let path = std::iter::once(bin).chain(std::env::split_paths(&inherited));
    env.push(("PATH".into(), std::env::join_paths(path).unwrap()));
    let out = Git::new(&repo)
        .parent_env(env)
        .own_process_group()
        .args(["rev-parse", "--git-dir"])
        .output()
        .unwrap();
    assert_eq!(out.trim(), ".git");
    let ours = nix::unistd::getpgrp().as_raw().to_string();
    let groups = std::fs::read_to_string(&seen).unwrap();
    let groups: Vec<&str> = groups.lines().collect();
    // `git config --list` first (what git would read), then the command itself.
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(groups.iter().all(|g| *g != ours), "{groups:?} vs {ours}");
}
