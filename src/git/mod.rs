//! The one way fanout runs the git CLI: every `git` command fanout starts (submodules
//! in setup, bundles, and any added later) is built by [`Git`], hardened against a
//! repository whose configuration an agent wrote.
//!
//! Agents share the user's `.git` (and, without the sandbox, everything the user can
//! write), so a git command fanout runs after an agent may meet a planted
//! `core.fsmonitor`, hook, clean/smudge filter, textconv, `!command` submodule update,
//! askpass or credential helper, or a worktree `.git` file pointing somewhere else.
//! A command built here runs none of them:
//! - **environment** ([`harden::env`]): fanout's own, less every credential
//!   ([`crate::secret::is_credential`], [`crate::secret::is_model_credential`]), askpass programs and every `GIT_*` variable
//!   but identity, global config, ssh/TLS settings and LFS switches; plus
//!   `GIT_CONFIG_NOSYSTEM=1`, `GIT_TERMINAL_PROMPT=0`, `GIT_NO_REPLACE_OBJECTS=1`, no
//!   editor or pager. Configuration fanout was given in `GIT_CONFIG_COUNT`/`_KEY_n`/
//!   `_VALUE_n` becomes `-c` options, less credentials
//!   ([`crate::secret::git_config_from_env`]);
//! - **fixed options** ([`harden::FIXED`]): `--no-pager -c core.hooksPath=/dev/null -c
//!   core.fsmonitor=false -c credential.helper= -c core.askPass= -c
//!   protocol.ext.allow=never`, no signing, no templates, no auto-maintenance;
//! - **overrides for what the repository names** ([`harden::neutralise`]): before each
//!   command, the configuration git would read is listed (`git config --list
//!   --show-scope`, the config of every submodule repository, `.gitmodules`) and every
//!   filter, textconv, diff and merge driver, config hook, URL-scoped credential helper
//!   or extra header found is overridden; `submodule.<name>.update` is pinned (never a
//!   `!command`); keys git reads first-wins (`remote.<name>.uploadpack`, …) set by the
//!   repository make the command fail instead ([`GitError::Refused`]). A listing made
//!   when nothing had run yet may stand in for the next ones ([`Listed`]).
//!
//! **Trusted configuration**: a caller that must let the user's own drivers run (Git
//! LFS during checkouts) reads them when nothing has run yet — the run's start — into a
//! [`TrustedConfig`] ([`TrustedConfig::capture`]) and passes it with
//! [`Git::trusting`]: those values are passed last as `-c` options, from memory, so
//! they hold whatever an agent wrote to disk since.
//!
//! Limits: a key added to the configuration between the listing and the command
//! (an unsandboxed agent running at the same time) can still count for that one
//! command — it never sees a credential, and the sandbox keeps agents from writing
//! any configuration but their own worktree's. `url.<x>.insteadOf` rewrites are left
//! alone (nothing is sent that an agent could not read).

pub mod harden;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use harden::{Entry, Scope};

/// Why a git command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[from] std::io::Error),
    /// git ran and failed.
    #[error("git {what}: {stderr}")]
    Failed {
        /// The subcommand.
        what: String,
        /// What git printed on stderr (trimmed).
        stderr: String,
    },
    /// The repository's configuration names a program that no option can override.
    #[error("git {what}: {why}")]
    Refused {
        /// The subcommand.
        what: String,
        /// What was found.
        why: String,
    },
}

/// Configuration the caller vouches for (see the module docs): read when nothing had
/// run yet, kept in memory, passed last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedConfig {
    entries: Vec<(String, String)>,
}

impl TrustedConfig {
    /// Nothing trusted.
    #[cfg(test)]
    pub fn new() -> TrustedConfig {
        TrustedConfig::default()
    }

    /// Every entry whose key starts with one of `prefixes` (`filter.lfs.`, any case)
    /// in the configuration git sees in `dir` now. Call it before any agent runs.
    #[cfg(test)]
    pub fn capture(dir: &Path, prefixes: &[&str]) -> Result<TrustedConfig, GitError> {
        Ok(TrustedConfig::from_entries(&list_config(dir)?, prefixes))
    }

    /// Every entry of `entries` (a [`list_config`] made before any agent ran) whose
    /// key starts with one of `prefixes`, any case.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = &'a Entry>,
        prefixes: &[&str],
    ) -> TrustedConfig {
        let wanted = |k: &str| {
            prefixes.iter().any(|p| {
                k.len() >= p.len() && k.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
            })
        };
        TrustedConfig {
            entries: entries
                .into_iter()
                .filter(|e| wanted(&e.key))
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect(),
        }
    }

    /// The trusted `(key, value)` pairs, in order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }
}

/// A configuration listing ([`list_config`]) that the caller hands to later commands
/// in the repository's other worktrees ([`Git::listed`]) instead of having git list it
/// again before each. Only for a listing git would read the same in every worktree
/// ([`Listed::shareable`]), and only while nothing can have changed the files it came
/// from: the caller drops it once any process of its own (an agent, a setup command)
/// has started. The window this leaves — a key written between the listing and the
/// command — is the one every listing leaves (see the module docs).
#[derive(Debug, Clone)]
pub struct Listed(std::sync::Arc<[Entry]>);

impl Listed {
    /// `entries`, when git reads the same configuration in every worktree of the
    /// repository: no conditional include (`includeIf.gitdir:` and `onbranch:` differ
    /// between worktrees; any `includeIf` is counted) and no per-worktree
    /// configuration (`extensions.worktreeConfig`).
    pub fn shareable(entries: &[Entry]) -> Option<Listed> {
        let per_worktree = |e: &Entry| {
            let key = e.key.to_ascii_lowercase();
            key.starts_with("includeif.")
                || (key == "extensions.worktreeconfig" && e.value != "false")
        };
        (!entries.iter().any(per_worktree)).then(|| Listed(entries.into()))
    }
}

/// A git command as it will run: for callers that start it themselves (supervised).
#[derive(Debug, Clone)]
pub struct Invocation {
    /// `git`.
    pub program: &'static str,
    /// Every argument: the hardening options, then the caller's.
    pub args: Vec<OsString>,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory.
    pub dir: PathBuf,
}

impl Invocation {
    /// A `std::process::Command` for it (stdin closed).
    pub fn command(&self) -> Command {
        let mut c = git_command(&self.args, &self.dir, &self.env);
        c.stdin(Stdio::null());
        c
    }
}

/// A hardened git command (see the module docs). Build it, then [`Git::output`] (run
/// and capture) or [`Git::invocation`] (run it yourself).
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    git_dir: Option<PathBuf>,
    work_tree: Option<PathBuf>,
    index_file: Option<PathBuf>,
    args: Vec<OsString>,
    parent_env: Option<Vec<(OsString, OsString)>>,
    trusted: TrustedConfig,
    listed: Option<Listed>,
    own_group: bool,
}

impl Git {
    /// `git` run in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            git_dir: None,
            work_tree: None,
            index_file: None,
            args: Vec::new(),
            parent_env: None,
            trusted: TrustedConfig::default(),
            listed: None,
            own_group: false,
        }
    }

    /// `--git-dir DIR`: name the repository instead of finding it from the directory
    /// (a worktree's `.git` file is the agent's to rewrite).
    pub fn git_dir(mut self, dir: impl Into<PathBuf>) -> Git {
        self.git_dir = Some(dir.into());
        self
    }

    /// `--work-tree DIR`.
    pub fn work_tree(mut self, dir: impl Into<PathBuf>) -> Git {
        self.work_tree = Some(dir.into());
        self
    }

    /// `GIT_INDEX_FILE=FILE`: an index file of fanout's choosing (the environment's
    /// own `GIT_INDEX_FILE` is never passed on).
    pub fn index_file(mut self, file: impl Into<PathBuf>) -> Git {
        self.index_file = Some(file.into());
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Git
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Build the environment from `parent` instead of fanout's own (it is filtered
    /// the same way).
    pub fn parent_env(mut self, parent: impl IntoIterator<Item = (OsString, OsString)>) -> Git {
        self.parent_env = Some(parent.into_iter().collect());
        self
    }

    /// The environment the command gets (see [`harden::env`]).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let parent = match &self.parent_env {
            Some(p) => p.clone(),
            None => std::env::vars_os().collect(),
        };
        let mut env = harden::env(&parent);
        if let Some(f) = &self.index_file {
            env.push(("GIT_INDEX_FILE".into(), f.into()));
        }
        env
    }

    /// Let `trusted` count (see [`TrustedConfig`]).
    pub fn trusting(mut self, trusted: &TrustedConfig) -> Git {
        self.trusted = trusted.clone();
        self
    }

    /// Take the configuration git reads from `listed` instead of listing it (see
    /// [`Listed`]).
    pub fn listed(mut self, listed: Option<&Listed>) -> Git {
        self.listed = listed.cloned();
        self
    }

    /// Start git in a process group of its own: a Ctrl-C at the terminal signals the
    /// foreground group (fanout's) and does not cut this command short.
    pub fn own_process_group(mut self) -> Git {
        self.own_group = true;
        self
    }

    fn what(&self) -> String {
        self.args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// `--no-pager`, where the repository is, the configuration from fanout's
    /// environment, then [`harden::FIXED`].
    fn base_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--no-pager".into()];
        if let Some(d) = &self.git_dir {
            args.extend(["--git-dir".into(), d.into()]);
        }
        if let Some(d) = &self.work_tree {
            args.extend(["--work-tree".into(), d.into()]);
        }
        let parent = match &self.parent_env {
            Some(p) => p.clone(),
            None => std::env::vars_os().collect(),
        };
        let from_env = crate::secret::git_config_from_env(&parent);
        let fixed = harden::FIXED.iter().map(|(k, v)| (*k, *v));
        for (k, v) in from_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(fixed)
        {
            args.extend(["-c".into(), format!("{k}={v}").into()]);
        }
        args
    }

    /// Everything git would read here, with scopes.
    fn list_config(&self, env: &[(OsString, OsString)]) -> Result<Vec<Entry>, GitError> {
        let mut args = self.base_args();
        args.extend(["config", "--list", "--show-scope", "-z"].map(OsString::from));
        let out = self
            .command(&args, &self.dir, env)
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(failed(
                format!("config --list (before {})", self.what()),
                &out,
            ));
        }
        Ok(harden::parse_list(&out.stdout, true, Scope::Repository))
    }

    /// git with `args`, in a process group of its own if asked (the listing of the
    /// configuration as much as the command: a Ctrl-C must cut neither short).
    fn command(&self, args: &[OsString], dir: &Path, env: &[(OsString, OsString)]) -> Command {
        let mut cmd = git_command(args, dir, env);
        if self.own_group {
            use std::os::unix::process::CommandExt;
            // Not `process_group(0)`: posix_spawn resets the child's signal handlers
            // before it leaves fanout's group, so a Ctrl-C in between kills it. Forked,
            // the child keeps fanout's handler until exec, which only wakes fanout.
            // SAFETY: setpgid is async-signal-safe, and nothing else runs.
            unsafe {
                cmd.pre_exec(|| {
                    nix::unistd::setpgid(
                        nix::unistd::Pid::from_raw(0),
                        nix::unistd::Pid::from_raw(0),
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        cmd
    }

    /// The command, ready to run: every option, the environment.
    pub fn invocation(&self) -> Result<Invocation, GitError> {
        let env = self.env();
        let mut entries = match &self.listed {
            Some(l) => l.0.to_vec(),
            None => self.list_config(&env)?,
        };
        let places = Places::find(self);
        for f in &places.submodule_configs {
            entries.extend(read_config_file(f));
        }
        let gitmodules = places
            .gitmodules
            .as_deref()
            .map(read_config_file)
            .unwrap_or_default();
        let overrides =
            harden::neutralise(&entries, &gitmodules, self.trusted.entries()).map_err(|why| {
                GitError::Refused {
                    what: self.what(),
                    why,
                }
            })?;
        let mut args = self.base_args();
        for (k, v) in overrides.iter().chain(self.trusted.entries()) {
            args.extend(["-c".into(), format!("{k}={v}").into()]);
        }
        args.extend(self.args.iter().cloned());
        Ok(Invocation {
            program: "git",
            args,
            env,
            dir: self.dir.clone(),
        })
    }

    /// Run it; its stdout when it succeeds.
    pub fn output(&self) -> Result<String, GitError> {
        self.output_with_input(None)
    }

    /// Run it with `input` on its stdin (else stdin closed); its stdout when it
    /// succeeds.
    pub fn output_with_input(&self, input: Option<&[u8]>) -> Result<String, GitError> {
        let inv = self.invocation()?;
        let out = run(self.command(&inv.args, &inv.dir, &inv.env), input)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(failed(self.what(), &out))
        }
    }
}

/// git `what` failed: what it printed on stderr, else how it ended (a signal, a code).
fn failed(what: String, out: &std::process::Output) -> GitError {
    let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    GitError::Failed {
        what,
        stderr: if said.is_empty() {
            out.status.to_string()
        } else {
            said
        },
    }
}

/// Every configuration entry git sees in `dir` (every scope, includes followed), read
/// by a hardened `git config --list`.
pub fn list_config(dir: &Path) -> Result<Vec<Entry>, GitError> {
    let git = Git::new(dir);
    let env = git.env();
    git.list_config(&env)
}

/// The configuration entries among `entries` (a [`list_config`]) that hold a
/// credential any process of the user can read — an `http.<url>.extraheader` carrying
/// an `Authorization` header (what `actions/checkout` leaves with
/// `persist-credentials: true`), a URL with a password — as `key` names.
pub fn credentials_in(entries: &[Entry]) -> Vec<String> {
    let mut keys: Vec<String> = entries
        .iter()
        .filter(|e| {
            let header = e.key.starts_with("http.")
                && e.key.ends_with(".extraheader")
                && e.value.to_ascii_lowercase().contains("authorization");
            header
                || (!e.key.starts_with("credential.")
                    && crate::secret::is_credential_config(&e.key, &e.value)
                    && !e.key.ends_with(".extraheader"))
        })
        .map(|e| e.key.clone())
        .collect();
    keys.dedup();
    keys
}

/// `git` as `execvp` would find it in `env`'s `PATH` (a relative entry, the empty one
/// included, is relative to `dir`), else
/// the bare name. A path lets the standard library start it with `posix_spawn`, which
/// does not copy fanout's address space as `fork` does: with a bare name and a `PATH`
/// of the child's own, it has to fork.
pub fn locate(env: &[(OsString, OsString)], dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
    let found = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .find_map(|d| {
            let d = if d.is_relative() { dir.join(d) } else { d };
            let candidate = d.join("git");
            let meta = std::fs::metadata(&candidate).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
        });
    found.unwrap_or_else(|| PathBuf::from("git"))
}

/// git (found on `env`'s `PATH`) with `args`, in `dir`, with exactly `env`.
fn git_command(args: &[OsString], dir: &Path, env: &[(OsString, OsString)]) -> Command {
    let mut cmd = Command::new(locate(env, dir));
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// Run `cmd` with `input` on its stdin (else stdin closed), capturing its output.
fn run(mut cmd: Command, input: Option<&[u8]>) -> std::io::Result<std::process::Output> {
    let Some(input) = input else {
        return cmd.stdin(Stdio::null()).output();
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take();
    // Written from another thread: git may answer before it has read everything.
    std::thread::scope(|s| {
        s.spawn(move || {
            use std::io::Write;
            if let Some(pipe) = stdin.as_mut() {
                let _ = pipe.write_all(input);
            }
            drop(stdin);
        });
        child.wait_with_output()
    })
}

/// Configuration git reads besides what `git config --list` shows: the submodule
/// repositories' config files, and `.gitmodules` of the checkout.
struct Places {
    submodule_configs: Vec<PathBuf>,
    gitmodules: Option<PathBuf>,
}

impl Places {
    fn find(git: &Git) -> Places {
        let (git_dir, common, workdir) = match &git.git_dir {
            // Named: its `commondir` file says where the shared directory is, as git
            // reads it (no repository needs opening for that).
            Some(d) => (d.clone(), common_dir_of(d), None),
            None => match git2::Repository::open_ext(
                &git.dir,
                git2::RepositoryOpenFlags::empty(),
                std::iter::empty::<&OsStr>(),
            ) {
                Ok(repo) => (
                    repo.path().to_owned(),
                    repo.commondir().to_owned(),
                    repo.workdir().map(Path::to_owned),
                ),
                Err(_) => {
                    return Places {
                        submodule_configs: Vec::new(),
                        gitmodules: None,
                    };
                }
            },
        };
        let mut submodule_configs = Vec::new();
        let mut roots = vec![git_dir.join("modules")];
        let common = common.join("modules");
        if !roots.contains(&common) {
            roots.push(common);
        }
        for root in roots {
            find_configs(&root, 0, &mut submodule_configs);
        }
        let workdir = git.work_tree.clone().or(workdir);
        Places {
            submodule_configs,
            gitmodules: workdir
                .map(|w| w.join(".gitmodules"))
                .filter(|p| p.is_file()),
        }
    }
}

/// The shared git directory of git directory `dir`: what its `commondir` file names
/// (relative to `dir`), else `dir` itself.
fn common_dir_of(dir: &Path) -> PathBuf {
    match crate::util::read_capped_string(&dir.join("commondir"), 4096) {
        Ok(named) => dir.join(named.trim_end()),
        Err(_) => dir.to_owned(),
    }
}

/// Every `config` file of a git directory under `dir` (submodules nest theirs in
/// `modules/` again). Symlinks are not followed.
fn find_configs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            let sub = e.path();
            let config = sub.join("config");
            if config.is_file() && sub.join("HEAD").exists() {
                out.push(config);
            }
            find_configs(&sub, depth + 1, out);
        }
    }
}

/// A config file's entries (includes followed), as the repository's.
fn read_config_file(path: &Path) -> Vec<Entry> {
    let Ok(cfg) = git2::Config::open(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Ok(mut entries) = cfg.entries(None) {
        while let Some(Ok(e)) = entries.next() {
            if let Ok(key) = e.name() {
                out.push(Entry {
                    scope: Scope::Repository,
                    key: key.to_owned(),
                    value: e.value().unwrap_or("true").to_owned(),
                });
            }
        }
    }
    out
}
