//! The user's repository: finding it, resolving the base commit, noticing a dirty
//! checkout, and where fanout keeps its per-run state (inside the git directory, so
//! the user's checkout never gains a file).

use std::path::{Path, PathBuf};

use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::exit::Failure;

/// Where workers start: the base commit a plan records (see [`UserRepo::resolve_base`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Base {
    /// What the user asked for (`HEAD`, `main`, a sha).
    pub requested: String,
    /// The branch name behind it, when it names one (PRs target it).
    pub branch: Option<String>,
    /// The full commit id.
    pub commit: String,
}

/// Errors about the user's repository.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// Not inside a git repository (or its repository cannot be opened).
    #[error("{path}: {why}")]
    NotARepo {
        /// Where we looked.
        path: PathBuf,
        /// Why, in a sentence ([`not_a_repo`]).
        why: String,
    },
    /// A bare repository has no checkout to start from.
    #[error("{0}: is a bare repository; run fanout inside a checkout")]
    Bare(PathBuf),
    /// The base does not resolve to a commit.
    #[error("--base {base:?}: {why}")]
    Base {
        /// What was asked.
        base: String,
        /// Why, in a sentence ([`not_a_base`]).
        why: String,
    },
    /// Any other git failure (libgit2's message alone: its class and code say
    /// nothing to a user).
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
}

/// Where the user pointed fanout wrongly is a usage error; git failing is fanout's.
impl From<RepoError> for Failure {
    fn from(e: RepoError) -> Self {
        match e {
            RepoError::NotARepo { .. } | RepoError::Bare(_) | RepoError::Base { .. } => {
                Failure::Usage(e.to_string())
            }
            RepoError::Git(_) => Failure::Fatal(e.to_string()),
        }
    }
}

/// Why no repository was found, in a sentence.
fn not_a_repo(e: &git2::Error) -> String {
    match e.code() {
        git2::ErrorCode::NotFound => "not inside a git repository; run fanout in a checkout of your project (`git init` and a first commit make one)".to_owned(),
        _ => format!("its git repository cannot be opened: {}", e.message()),
    }
}

/// Why `requested` is no base commit in `repo`, in a sentence.
fn not_a_base(repo: &Repository, requested: &str, e: &git2::Error) -> String {
    if repo
        .head()
        .is_err_and(|h| h.code() == git2::ErrorCode::UnbornBranch)
    {
        return "the repository has no commit yet; commit first (every worker starts from a commit)".to_owned();
    }
    match e.code() {
        git2::ErrorCode::NotFound => format!(
            "no branch, tag or commit of this repository is called {requested:?} (see `git branch -a`)"
        ),
        git2::ErrorCode::Ambiguous => {
            format!("{requested:?} is the start of more than one commit id; give more of it")
        }
        _ => format!("not a commit: {}", e.message()),
    }
}

/// The user's repository, as fanout sees it.
#[derive(Debug, Clone)]
pub struct UserRepo {
    /// The checkout fanout was started in (a main checkout or a linked worktree).
    pub workdir: PathBuf,
    /// The shared git directory (`.git` of the main checkout).
    pub common_dir: PathBuf,
}

impl UserRepo {
    /// Find the repository containing `dir`.
    pub fn discover(dir: &Path) -> Result<UserRepo, RepoError> {
        let repo = Repository::discover(dir).map_err(|e| RepoError::NotARepo {
            path: dir.to_owned(),
            why: not_a_repo(&e),
        })?;
        let Some(workdir) = repo.workdir() else {
            return Err(RepoError::Bare(repo.path().to_owned()));
        };
        Ok(UserRepo {
            workdir: canonical(workdir),
            common_dir: canonical(repo.commondir()),
        })
    }

    /// Open a fresh handle (git2 handles are not shared across threads).
    pub fn open(&self) -> Result<Repository, git2::Error> {
        Repository::open(&self.workdir)
    }

    /// Resolve `requested` (`HEAD`, a branch, a tag, a sha) to the base commit.
    pub fn resolve_base(&self, requested: &str) -> Result<Base, RepoError> {
        let repo = self.open()?;
        let commit = repo
            .revparse_single(requested)
            .and_then(|o| o.peel_to_commit())
            .map_err(|e| RepoError::Base {
                base: requested.to_owned(),
                why: not_a_base(&repo, requested, &e),
            })?;
        let branch = if requested == "HEAD" {
            repo.head()
                .ok()
                .filter(|h| h.is_branch())
                .and_then(|h| h.shorthand().ok().map(str::to_owned))
        } else if repo.find_branch(requested, git2::BranchType::Local).is_ok() {
            Some(requested.to_owned())
        } else if let Ok(b) = repo.find_branch(requested, git2::BranchType::Remote) {
            // `origin/main` → `main`
            b.name()
                .ok()
                .flatten()
                .and_then(|n| n.split_once('/').map(|(_, rest)| rest.to_owned()))
        } else {
            None
        };
        Ok(Base {
            requested: requested.to_owned(),
            branch,
            commit: commit.id().to_string(),
        })
    }

    /// `<git dir>/fanout/runs`: where run journals, logs and reports live.
    pub fn runs_dir(&self) -> PathBuf {
        self.common_dir.join("fanout").join("runs")
    }

    /// The directory of one run.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir().join(run_id)
    }

    /// `<git dir>/fanout/init.json`: the files `fanout init` wrote, path (relative to
    /// the checkout) → SHA-256 of what it wrote.
    fn init_note(&self) -> PathBuf {
        self.common_dir.join("fanout").join("init.json")
    }

    /// The files `fanout init` wrote ([`Self::note_written_by_init`]), path → SHA-256
    /// of what it wrote; empty when there is no readable note. The note only spares
    /// the user a warning about those files while they are as init wrote them: one an
    /// agent forged would hide changes from that warning, nothing more.
    pub fn written_by_init(&self) -> std::collections::BTreeMap<String, String> {
        crate::util::read_capped(&self.init_note(), crate::util::CONFIG_LIMIT)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Note that `fanout init` wrote `bytes` to `rel` (relative to the checkout).
    pub fn note_written_by_init(&self, rel: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let mut notes = self.written_by_init();
        notes.insert(
            rel.to_string_lossy().into_owned(),
            crate::util::sha256_hex(bytes),
        );
        let path = self.init_note();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let json = serde_json::to_vec_pretty(&notes).expect("a map of strings serializes");
        crate::util::write_atomic(&path, &json)
    }

    /// Where worktrees go unless configured: a per-user data directory outside the
    /// checkout, one folder per repository (`<name>-<hash of its git dir>`).
    pub fn default_worktree_root(&self) -> PathBuf {
        let base = std::env::var_os("FANOUT_WORKTREE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                let data = crate::util::user_dir("XDG_DATA_HOME", ".local/share");
                data.map(|d| d.join("fanout/worktrees"))
            })
            .unwrap_or_else(|| std::env::temp_dir().join("fanout-worktrees"));
        let name = self
            .workdir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "repo".into());
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        base.join(format!(
            "{name}-{:08x}",
            fnv1a(self.common_dir.as_os_str().as_encoded_bytes())
        ))
    }

    /// The worktree root for a run: `configured` (relative to the checkout) or the default.
    pub fn worktree_root(&self, configured: Option<&Path>) -> PathBuf {
        match configured {
            Some(p) if p.is_absolute() => normalize(p),
            Some(p) => normalize(&self.workdir.join(p)),
            None => normalize(&self.default_worktree_root()),
        }
    }
}

/// Resolve `.` and `..` lexically (the path need not exist yet).
pub fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}

/// 32-bit FNV-1a: a stable short hash for directory names.
pub fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The repository's remotes when a run started, and the remote its config's
/// `publish.remote` named then; kept in the run's journal, so that publishing never
/// reads a push URL from a configuration an agent may have changed since.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PushRecord {
    /// Remote name → the URL git would push to (`pushurl`, `insteadOf` applied).
    pub remotes: std::collections::BTreeMap<String, String>,
    /// `publish.remote` of the config, when set (a name or a URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_remote: Option<String>,
}

impl PushRecord {
    /// Read the remotes of `repo` now (call it before any agent runs).
    pub fn read(repo: &git2::Repository, publish_remote: Option<String>) -> PushRecord {
        let mut remotes = std::collections::BTreeMap::new();
        if let Ok(names) = repo.remotes() {
            for name in names.iter().flatten().flatten() {
                if let Ok(r) = repo.find_remote(name)
                    && let Some(url) = r.pushurl().ok().flatten().or(r.url().ok())
                {
                    remotes.insert(name.to_owned(), url.to_owned());
                }
            }
        }
        PushRecord {
            remotes,
            publish_remote,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(
            normalize(Path::new("/a/repo/../worktrees")),
            PathBuf::from("/a/worktrees")
        );
    }

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }
}
