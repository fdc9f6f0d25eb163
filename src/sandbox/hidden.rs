//! What confined agents may not read, and the `writable:` paths that would undo the
//! sandbox.
//!
//! [`credentials`]: the user's credentials, hidden by default — ssh keys and the
//! ssh-agent's socket directory (`$SSH_AUTH_SOCK`'s; the socket alone when that
//! directory is shared, as `/tmp` is), git's credential stores, `gh` and `hub`
//! configuration, `.netrc`, cloud CLIs' credentials (AWS, Google Cloud, Azure), Docker's
//! and Kubernetes' configuration, GnuPG's keys, registry publishing tokens (cargo,
//! PyPI, RubyGems), the model CLIs' logins (Claude Code's `.credentials.json` and
//! `.claude.json`, where older versions keep an API key; Codex's `auth.json`: fanout seeds the worker's private copy of their configuration
//! itself, with the login only where the gateway holds no key for the provider) —
//! each where its tool looks (its variable, `$XDG_CONFIG_HOME`, else
//! under `$HOME`), and fanout's record key. `hidden:` in `fanout.yml` adds paths.
//! Landlock only grants, so a hidden path is hidden by granting reading on everything
//! beside it ([`super::Policy::hide`]).
//!
//! [`Guarded`]: what `writable:` may not name — a path that holds the repository, its
//! git directory or the home directory, that lies inside the git directory, or that
//! holds or lies inside a hidden path — and what `hidden:` may not name (a path that
//! holds the repository: agents read it).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The user's credentials (see the module docs), from this process's environment;
/// paths that do not exist included (see [`exists`]).
pub fn credentials() -> Vec<PathBuf> {
    let mut out = credentials_in(&|k| std::env::var_os(k));
    out.push(crate::util::sign::key_dir());
    out
}

/// [`credentials`] but fanout's key, with `env` for the environment.
fn credentials_in(env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let abs = |k: &str| env(k).map(PathBuf::from).filter(|p| p.is_absolute());
    let mut out: Vec<PathBuf> = Vec::new();
    let home = abs("HOME");
    let mut configs: Vec<PathBuf> = abs("XDG_CONFIG_HOME").into_iter().collect();
    if let Some(home) = &home {
        configs.push(home.join(".config"));
        for p in [
            ".ssh",
            ".git-credentials",
            ".netrc",
            ".aws",
            ".azure",
            ".docker",
            ".kube",
            ".gnupg",
            ".pypirc",
            ".gem/credentials",
            ".cargo/credentials",
            ".cargo/credentials.toml",
            ".claude/.credentials.json",
            ".claude.json",
            ".codex/auth.json",
        ] {
            out.push(home.join(p));
        }
    }
    if let Some(claude) = abs("CLAUDE_CONFIG_DIR") {
        out.push(claude.join(".credentials.json"));
        out.push(claude.join(".claude.json"));
    }
    out.extend(abs("CODEX_HOME").map(|d| d.join("auth.json")));
    for config in &configs {
        for p in ["git/credentials", "gh", "hub", "gcloud"] {
            out.push(config.join(p));
        }
    }
    for k in [
        "GH_CONFIG_DIR",
        "DOCKER_CONFIG",
        "CLOUDSDK_CONFIG",
        "AZURE_CONFIG_DIR",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "GNUPGHOME",
    ] {
        out.extend(abs(k));
    }
    if let Some(cargo) = abs("CARGO_HOME") {
        out.push(cargo.join("credentials"));
        out.push(cargo.join("credentials.toml"));
    }
    if let Some(kube) = env("KUBECONFIG") {
        out.extend(std::env::split_paths(&kube).filter(|p| p.is_absolute()));
    }
    out.extend(abs("SSH_AUTH_SOCK").map(|s| agent_socket_dir(&s, home.as_deref())));
    // A variable naming `/` or the home directory would hide what agents need: such a
    // path is left out (`hidden:` can still name the home directory).
    out.retain(|p| p.parent().is_some() && home.as_ref().is_none_or(|h| !h.starts_with(p)));
    out.sort();
    out.dedup();
    out
}

/// The ssh-agent's socket directory, or the socket alone when that directory is
/// writable by everyone (`/tmp`) or holds the home directory.
fn agent_socket_dir(socket: &Path, home: Option<&Path>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let Some(dir) = socket.parent().filter(|d| d.parent().is_some()) else {
        return socket.to_owned();
    };
    let shared = std::fs::metadata(dir).map_or(true, |m| m.permissions().mode() & 0o002 != 0);
    if shared || home.is_some_and(|h| h.starts_with(dir)) {
        socket.to_owned()
    } else {
        dir.to_owned()
    }
}

/// Whether there is anything at `path` (a dangling link counts): only what exists
/// needs hiding, and a confined process cannot make what is missing.
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// The home directory (`$HOME`, when set and absolute).
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// A `writable:` or `hidden:` entry's form: an absolute path, or one under the home
/// directory (`~/…`), without control characters or `..`.
pub fn check_entry(entry: &str) -> Result<(), String> {
    let ok = (entry.starts_with('/') || entry.starts_with("~/"))
        && !entry.chars().any(char::is_control)
        && !entry.split('/').any(|c| c == "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{entry:?}: expected an absolute path or one under the home directory (`~/.cache/my-agent`), without `..`"
        ))
    }
}

/// A `writable:` or `hidden:` entry as a path: `~/` is the home directory.
pub fn expand(entry: &str) -> Result<PathBuf, String> {
    match entry.strip_prefix("~/") {
        Some(rest) => home()
            .map(|h| h.join(rest))
            .ok_or_else(|| format!("{entry}: HOME is not set")),
        None => Ok(PathBuf::from(entry)),
    }
}

/// `path` with its links resolved as far as it exists (its missing tail appended to
/// the real path of its deepest existing ancestor): what it will be once made.
pub fn real(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return missing.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.components().next_back()) {
            (Some(parent), Some(Component::Normal(c))) => {
                missing.push(c.to_owned());
                at = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// What `writable:` and `hidden:` entries are checked against (see the module docs).
#[derive(Debug, Clone)]
pub struct Guarded {
    /// The repository's checkout, when known.
    pub repo: Option<PathBuf>,
    /// The repository's (common) git directory.
    pub git: PathBuf,
    /// The home directory.
    pub home: Option<PathBuf>,
    /// Every hidden path (credentials, the record key, `hidden:`).
    pub hidden: Vec<PathBuf>,
}

impl Guarded {
    /// Guard `git` (and `repo` when known) with the hidden paths `hidden`; all are
    /// taken as real paths.
    pub fn new(repo: Option<&Path>, git: &Path, hidden: &[PathBuf]) -> Guarded {
        Guarded {
            repo: repo.map(real),
            git: real(git),
            home: home().as_deref().map(real),
            hidden: hidden.iter().map(|h| real(h)).collect(),
        }
    }

    /// Why agents may not write beneath `path`, if they may not.
    pub fn writable(&self, path: &Path) -> Result<(), String> {
        let p = real(path);
        let holds = |what: &Path| what.starts_with(&p);
        if let Some(repo) = self.repo.as_deref().filter(|r| holds(r)) {
            return Err(format!(
                "it holds the repository ({}): agents would change your checkout and its .git",
                repo.display()
            ));
        }
        if holds(&self.git) || p.starts_with(&self.git) {
            return Err(format!(
                "it {} the repository's git directory ({}): agents would plant hooks and configuration, and move branches",
                if holds(&self.git) {
                    "holds"
                } else {
                    "is inside"
                },
                self.git.display()
            ));
        }
        if let Some(home) = self.home.as_deref().filter(|h| holds(h)) {
            return Err(format!(
                "it holds the home directory ({}): agents would change your shell's startup files and every tool's configuration; name the cache or state directory the agent needs",
                home.display()
            ));
        }
        if let Some(h) = self
            .hidden
            .iter()
            .find(|h| h.starts_with(&p) || p.starts_with(h))
        {
            return Err(format!(
                "it {} {}, which the sandbox hides from agents (credentials, fanout's record key, `hidden:`); declare a directory beside it instead",
                if h.starts_with(&p) {
                    "holds"
                } else {
                    "is inside"
                },
                h.display()
            ));
        }
        Ok(())
    }

    /// Why `path` may not be hidden from agents, if it may not.
    pub fn hidden(&self, path: &Path) -> Result<(), String> {
        let p = real(path);
        let held = self
            .repo
            .iter()
            .chain(std::iter::once(&self.git))
            .find(|r| r.starts_with(&p));
        match held {
            Some(r) => Err(format!(
                "it holds the repository ({}), which agents must read",
                r.display()
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_where_each_tool_looks() {
        let d = tempfile::tempdir().unwrap();
        let (tmp, run) = (d.path().join("tmp"), d.path().join("run"));
        for (dir, mode) in [(&tmp, 0o1777), (&run, 0o700)] {
            std::fs::create_dir(dir).unwrap();
            let mut perms = std::fs::metadata(dir).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, mode);
            std::fs::set_permissions(dir, perms).unwrap();
        }
        let vars = |sock: &Path| {
            let sock = sock.to_owned();
            move |k: &str| -> Option<OsString> {
                Some(match k {
                    "HOME" => "/home/u".into(),
                    "XDG_CONFIG_HOME" => "/cfg".into(),
                    "KUBECONFIG" => "/k/one:relative:/k/two".into(),
                    "DOCKER_CONFIG" => "/home/u".into(),
                    "GH_CONFIG_DIR" => "relative/gh".into(),
                    "CODEX_HOME" => "/codex-home".into(),
                    "SSH_AUTH_SOCK" => sock.clone().into(),
                    _ => return None,
                })
            }
        };
        std::fs::create_dir(run.join("keyring")).unwrap();
        let found = credentials_in(&vars(&run.join("keyring/ssh")));
        for p in [
            "/home/u/.ssh",
            "/home/u/.git-credentials",
            "/home/u/.netrc",
            "/home/u/.aws",
            "/home/u/.azure",
            "/home/u/.docker",
            "/home/u/.kube",
            "/home/u/.config/git/credentials",
            "/home/u/.config/gh",
            "/home/u/.claude/.credentials.json",
            "/home/u/.claude.json",
            "/home/u/.codex/auth.json",
            "/codex-home/auth.json",
            "/cfg/gh",
            "/cfg/hub",
            "/cfg/gcloud",
            "/cfg/git/credentials",
            "/k/one",
            "/k/two",
        ] {
            assert!(found.contains(&PathBuf::from(p)), "{p}: {found:?}");
        }
        // the agent's socket directory (mode 0700) is hidden whole
        assert!(found.contains(&run.join("keyring")), "{found:?}");
        // a variable naming the home directory, or a relative path, hides nothing
        assert!(
            !found.iter().any(|p| p == Path::new("/home/u")),
            "{found:?}"
        );
        assert!(found.iter().all(|p| p.is_absolute()), "{found:?}");
        // in a directory everyone writes to, the socket alone
        let found = credentials_in(&vars(&tmp.join("agent.sock")));
        assert!(found.contains(&tmp.join("agent.sock")), "{found:?}");
        assert!(!found.contains(&tmp), "{found:?}");
        assert!(credentials_in(&|_| None).is_empty());
    }

    #[test]
    fn writable_refuses_the_repository_its_git_dir_home_and_hidden_paths() {
        let d = tempfile::tempdir().unwrap();
        let base = real(d.path());
        let repo = base.join("work/src/repo");
        let git = repo.join(".git");
        let key = base.join("home/.local/state/fanout");
        std::fs::create_dir_all(&git).unwrap();
        let mut g = Guarded::new(Some(&repo), &git, std::slice::from_ref(&key));
        g.home = Some(base.join("home"));
        for (path, says) in [
            (repo.clone(), "holds the repository"),
            (base.join("work"), "holds the repository"),
            (PathBuf::from("/"), "holds the repository"),
            (
                git.join("hooks"),
                "is inside the repository's git directory",
            ),
            (base.join("home"), "holds the home directory"),
            (base.join("home/.local/state"), "holds"),
            (key.join("deeper/missing"), "is inside"),
        ] {
            let e = g.writable(&path).unwrap_err();
            assert!(e.contains(says), "{}: {e}", path.display());
        }
        for ok in [
            base.join("home/.cache/tool"),
            base.join("home/.local/state/other"),
            repo.join("../sibling"),
        ] {
            assert_eq!(g.writable(&ok), Ok(()), "{}", ok.display());
        }
        // a link to the repository is the repository
        let link = base.join("link");
        std::os::unix::fs::symlink(&repo, &link).unwrap();
        assert!(g.writable(&link).is_err());
        assert!(g.writable(&link.join(".git/hooks")).is_err());
        assert!(g.hidden(&base.join("work/src")).is_err());
        assert_eq!(g.hidden(&base.join("home/.secrets")), Ok(()));
    }

    #[test]
    fn entries_are_absolute_or_under_home() {
        for ok in ["/abs", "~/x/y"] {
            assert_eq!(check_entry(ok), Ok(()), "{ok}");
        }
        for bad in ["rel", "~x", "/a/../b", "/a\nb", ""] {
            assert!(check_entry(bad).is_err(), "{bad:?}");
        }
    }
}
