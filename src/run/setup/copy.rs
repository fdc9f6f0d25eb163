//! Copying what git leaves out of a worktree: files of the user's checkout that git
//! ignores or does not track (`.env`, local config, `node_modules/`), chosen by
//! `copy:` globs and the lines of `.worktreeinclude`, copied into a new worktree with
//! their relative paths, as `cp -a` copies them.
//! The patterns follow `.gitignore`'s syntax exactly ([`crate::util::glob`], the
//! `ignore` crate's matcher).
//!
//! What is copied: regular files with their mode (set-id bits included) and access
//! and modification times; symlinks as symlinks, their target unchanged (a `.bin`
//! link of `node_modules` still points at its package's script; where a write
//! through one may land is the sandbox's to decide, as for any path); directories
//! made with their mode and times. FIFOs, sockets and devices are skipped and said
//! so; hard links become separate files; owners, extended attributes and ACLs are
//! not copied (the copy is the user's, made with the user's umask-free modes).
//!
//! What never is: anything under `.git`, inside a nested repository, or in fanout's
//! own worktrees; a path the checkout's index tracks (the worktree has the base's
//! version); anything where the worktree already has an entry (nothing is
//! overwritten, and nothing is written through a symlink or into a directory the
//! worktree has as anything but a real directory). No symlink is ever followed while
//! copying: every file and directory is opened relative to its parent's descriptor
//! with `O_NOFOLLOW`, so a loop or a link out of the checkout is just a link copied.
//!
//! How: [`select`] walks the checkout (one thread) down to what the patterns pick:
//! single files and symlinks, and directories a pattern matches, copied whole.
//! [`copy_into`] copies them on rayon's global pool, shared by every worker of the
//! run (a thread per CPU, however many workers copy at once): a job per directory,
//! each copying its files with `copy_file_range(2)` — inside the kernel, no data
//! through user space, and on filesystems that share extents (Btrfs, XFS) the
//! kernel clones the file instead (a reflink) — falling back to `read`/`write`
//! where the kernel cannot (across some filesystems).

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::sys::time::TimeSpec;

use crate::util::glob::{Enter, Patterns};

/// What the patterns pick in a checkout.
#[derive(Debug, Default)]
pub struct Selection {
    /// To copy, relative, sorted.
    pub items: Vec<Item>,
    /// Special files (FIFOs, sockets, devices) the patterns pick: never copied.
    pub special: Vec<String>,
    /// Paths the checkout's index tracks under the directories copied whole.
    tracked: HashSet<String>,
    /// fanout's worktrees, relative, when they live inside the checkout.
    skip: Option<String>,
}

/// One thing to copy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    /// Its path, relative to the checkout (`/`-separated).
    pub rel: String,
    /// A directory a pattern matches, copied whole (else a file or a symlink).
    pub whole: bool,
}

/// What [`copy_into`] did.
#[derive(Debug, Default)]
pub struct Copied {
    /// Files and symlinks copied, relative, sorted.
    pub copied: Vec<String>,
    /// Files and symlinks selected but left alone: the worktree has an entry there,
    /// or something other than a directory where their directory would be.
    pub present: Vec<String>,
    /// Entries not copied: special files, and names that are not UTF-8.
    pub skipped: Vec<String>,
}

/// What the patterns pick in the checkout at `root`: files and symlinks git does not
/// track, and directories matched whole (walked by [`copy_into`]). `skip` is a
/// directory never entered (fanout's worktrees, when they live inside the checkout).
pub fn select(
    repo: &git2::Repository,
    root: &Path,
    patterns: &Patterns,
    skip: Option<&Path>,
) -> std::io::Result<Selection> {
    let mut sel = Selection {
        skip: skip
            .and_then(|s| s.strip_prefix(root).ok())
            .and_then(Path::to_str)
            .map(str::to_owned),
        ..Selection::default()
    };
    if patterns.is_empty() {
        return Ok(sel);
    }
    let index = repo.index().map_err(std::io::Error::other)?;
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_owned(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let (Ok(kind), Some(name)) = (entry.file_type(), file_name.to_str()) else {
                continue;
            };
            let path = entry.path();
            let mut child = rel.clone();
            child.push(name.to_owned());
            let rel_s = child.join("/");
            if kind.is_dir() {
                if name == ".git"
                    || skip.is_some_and(|s| s == path)
                    || std::fs::symlink_metadata(path.join(".git")).is_ok()
                {
                    continue;
                }
                let comps: Vec<&str> = child.iter().map(String::as_str).collect();
                let enter = patterns.may_contain(&comps, &mut || {
                    repo.is_path_ignored(Path::new(&format!("{rel_s}/")))
                        .unwrap_or(false)
                });
                match enter {
                    Enter::All => sel.items.push(Item {
                        rel: rel_s,
                        whole: true,
                    }),
                    Enter::Some => stack.push((path, child)),
                    Enter::No => {}
                }
            } else if patterns.matches(&rel_s) && index.get_path(Path::new(&rel_s), 0).is_none() {
                if kind.is_file() || kind.is_symlink() {
                    sel.items.push(Item {
                        rel: rel_s,
                        whole: false,
                    });
                } else {
                    sel.special.push(rel_s);
                }
            }
        }
    }
    sel.items.sort();
    sel.special.sort();
    sel.tracked = tracked_under(&index, &sel.items);
    Ok(sel)
}

/// The paths `index` tracks under the directories of `items` copied whole.
fn tracked_under(index: &git2::Index, items: &[Item]) -> HashSet<String> {
    let mut out = HashSet::new();
    for item in items.iter().filter(|i| i.whole) {
        let prefix = format!("{}/", item.rel);
        let Ok(mut at) = index.find_prefix(prefix.as_str()) else {
            continue;
        };
        while let Some(entry) = index.get(at) {
            match String::from_utf8(entry.path) {
                Ok(path) if path.starts_with(&prefix) => out.insert(path),
                _ => break,
            };
            at += 1;
        }
    }
    out
}

/// Copy what `sel` picked from the checkout `from` into the worktree `to`, on the
/// shared pool ([module docs](self)). `patterns` still decide over each file inside a
/// directory copied whole (a `!` line may take it back out).
pub fn copy_into(
    from: &Path,
    to: &Path,
    sel: &Selection,
    patterns: &Patterns,
) -> Result<Copied, String> {
    let open_root = |p: &Path| {
        nix::fcntl::open(p, dir_flags(), Mode::empty())
            .map(Arc::new)
            .map_err(|e| format!("{}: {}", p.display(), e.desc()))
    };
    let (src_root, dst_root) = (open_root(from)?, open_root(to)?);
    let walk = Walk {
        patterns,
        sel,
        out: Mutex::new(Copied::default()),
        failed: Mutex::new(None),
    };
    rayon::scope(|s| {
        for item in &sel.items {
            if let Err(e) = copy_item(s, &walk, &src_root, &dst_root, item) {
                walk.fail(&item.rel, e);
                break;
            }
        }
    });
    if let Some(why) = walk
        .failed
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        return Err(why);
    }
    let mut out = walk
        .out
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    out.copied.sort();
    out.present.sort();
    out.skipped.extend(sel.special.iter().cloned());
    out.skipped.sort();
    Ok(out)
}

/// The copy in progress: what it decides with, what it found.
struct Walk<'a> {
    patterns: &'a Patterns,
    sel: &'a Selection,
    out: Mutex<Copied>,
    /// The first failure (`copying <path>: <why>`): the rest of the copy stops.
    failed: Mutex<Option<String>>,
}

impl Walk<'_> {
    fn fail(&self, rel: &str, e: Errno) {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed.get_or_insert_with(|| format!("copying {rel}: {}", e.desc()));
    }

    fn failed(&self) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Is the file or symlink `rel`, inside a directory copied whole, selected?
    fn selects(&self, rel: &str) -> bool {
        !self.sel.tracked.contains(rel) && self.patterns.matches(rel)
    }

    fn add(&self, found: Copied) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        out.copied.extend(found.copied);
        out.present.extend(found.present);
        out.skipped.extend(found.skipped);
    }
}

/// What became of one file or symlink.
enum Outcome {
    Copied,
    /// The worktree has an entry there.
    Present,
    /// Not a regular file or a symlink (any longer).
    Special,
    /// Gone from the checkout meanwhile.
    Vanished,
}

/// Copy one selected item: open its directory on both sides (making it in the
/// worktree if need be), then copy the file or symlink, or start on the directory.
fn copy_item<'s>(
    s: &rayon::Scope<'s>,
    walk: &'s Walk<'s>,
    src_root: &Arc<OwnedFd>,
    dst_root: &Arc<OwnedFd>,
    item: &Item,
) -> Result<(), Errno> {
    let (parent, name) = item.rel.rsplit_once('/').unwrap_or(("", &item.rel));
    let name = cstring(name)?;
    let src = open_dirs(src_root, parent, false)?.ok_or(Errno::ENOTDIR)?;
    let Some(dst) = open_dirs(dst_root, parent, true)? else {
        walk.add(Copied {
            present: vec![item.rel.clone()],
            ..Copied::default()
        });
        return Ok(());
    };
    if item.whole {
        let created = make_dir(&dst, &name)?;
        let job = DirJob {
            src_parent: src,
            dst_parent: dst,
            name,
            rel: item.rel.clone(),
            created,
        };
        s.spawn(move |s| copy_dir(s, walk, job));
        return Ok(());
    }
    let mut found = Copied::default();
    let kind = nix::sys::stat::fstatat(&*src, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        .map(|st| file_type(&st))?;
    let outcome = copy_entry(&src, &dst, &name, kind)?;
    note(&mut found, outcome, item.rel.clone());
    walk.add(found);
    Ok(())
}

/// Open the directory `rel` under `root`, one component at a time, never through a
/// symlink; with `make`, make the missing ones. `None`: something other than a
/// directory stands in the way.
fn open_dirs(root: &Arc<OwnedFd>, rel: &str, make: bool) -> Result<Option<Arc<OwnedFd>>, Errno> {
    let mut at = Arc::clone(root);
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        let part = cstring(part)?;
        let opened = match nix::fcntl::openat(&*at, part.as_c_str(), dir_flags(), Mode::empty()) {
            Err(Errno::ENOENT) if make => {
                match nix::sys::stat::mkdirat(
                    &*at,
                    part.as_c_str(),
                    Mode::from_bits_truncate(0o777),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e),
                }
                nix::fcntl::openat(&*at, part.as_c_str(), dir_flags(), Mode::empty())
            }
            other => other,
        };
        at = match opened {
            Ok(fd) => Arc::new(fd),
            Err(Errno::ENOTDIR | Errno::ELOOP) => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    Ok(Some(at))
}

/// A directory to copy whole: its name in its parents, on both sides.
struct DirJob {
    src_parent: Arc<OwnedFd>,
    dst_parent: Arc<OwnedFd>,
    name: CString,
    rel: String,
    /// Made by the copy (it gets the checkout's mode and times; one the worktree
    /// had is left as it is).
    created: bool,
}

/// Copy one directory's entries; its subdirectories become jobs of their own.
fn copy_dir<'s>(s: &rayon::Scope<'s>, walk: &'s Walk<'s>, job: DirJob) {
    if walk.failed() {
        return;
    }
    let rel = job.rel.clone();
    if let Err((at, e)) = copy_dir_entries(s, walk, job) {
        walk.fail(at.as_deref().unwrap_or(&rel), e);
    }
}

/// A failure, and the entry it is about when not the directory itself.
type DirError = (Option<String>, Errno);

fn copy_dir_entries<'s>(
    s: &rayon::Scope<'s>,
    walk: &'s Walk<'s>,
    job: DirJob,
) -> Result<(), DirError> {
    let name = job.name.as_c_str();
    let src = nix::fcntl::openat(&*job.src_parent, name, dir_flags(), Mode::empty())
        .map_err(|e| (None, e))?;
    let dst = match nix::fcntl::openat(&*job.dst_parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => Arc::new(fd),
        // Not a directory in the worktree: nothing is written there.
        Err(Errno::ENOTDIR | Errno::ELOOP) => return Ok(()),
        Err(e) => return Err((None, e)),
    };
    let meta = nix::sys::stat::fstat(&src).map_err(|e| (None, e))?;
    let mut listing = nix::unistd::dup(&src)
        .and_then(nix::dir::Dir::from_fd)
        .map_err(|e| (None, e))?;
    let src = Arc::new(src);
    let mut found = Copied::default();
    for entry in listing.iter() {
        let entry = entry.map_err(|e| (None, e))?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let Ok(text) = name.to_str() else {
            found
                .skipped
                .push(format!("{}/{}", job.rel, name.to_string_lossy()));
            continue;
        };
        let rel = format!("{}/{text}", job.rel);
        let kind = match entry.file_type() {
            Some(t) => t,
            None => nix::sys::stat::fstatat(&*src, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                .map(|st| file_type(&st))
                .map_err(|e| (Some(rel.clone()), e))?,
        };
        let at = |e| (Some(rel.clone()), e);
        match kind {
            nix::dir::Type::Directory => {
                if walk.sel.skip.as_deref() == Some(rel.as_str()) || is_repository(&src, name) {
                    continue;
                }
                let created = make_dir(&dst, name).map_err(at)?;
                let child = DirJob {
                    src_parent: Arc::clone(&src),
                    dst_parent: Arc::clone(&dst),
                    name: name.to_owned(),
                    rel,
                    created,
                };
                s.spawn(move |s| copy_dir(s, walk, child));
            }
            _ if !walk.selects(&rel) => {}
            _ => {
                let outcome = copy_entry(&src, &dst, name, kind).map_err(at)?;
                note(&mut found, outcome, rel);
            }
        }
    }
    if job.created {
        // Last: making its entries changed its times.
        keep_mode_and_times(&dst, &meta).map_err(|e| (None, e))?;
    }
    walk.add(found);
    Ok(())
}

/// Does the directory `name` in `dir` hold a `.git` (a nested repository)?
fn is_repository(dir: &OwnedFd, name: &CStr) -> bool {
    let mut path = name.to_bytes().to_vec();
    path.extend_from_slice(b"/.git");
    nix::sys::stat::fstatat(dir, path.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
}

/// Make the directory `name` in `dir`, writable by its owner until its entries are
/// in (its mode is set last). Whether it was made (false: the worktree has it).
fn make_dir(dir: &OwnedFd, name: &CStr) -> Result<bool, Errno> {
    match nix::sys::stat::mkdirat(dir, name, Mode::S_IRWXU) {
        Ok(()) => Ok(true),
        Err(Errno::EEXIST) => Ok(false),
        Err(e) => Err(e),
    }
}

fn note(found: &mut Copied, outcome: Outcome, rel: String) {
    match outcome {
        Outcome::Copied => found.copied.push(rel),
        Outcome::Present => found.present.push(rel),
        Outcome::Special => found.skipped.push(rel),
        Outcome::Vanished => {}
    }
}

/// Copy the entry `name` of `src` (of type `kind`) into `dst`.
fn copy_entry(
    src: &OwnedFd,
    dst: &OwnedFd,
    name: &CStr,
    kind: nix::dir::Type,
) -> Result<Outcome, Errno> {
    match kind {
        nix::dir::Type::File => copy_file(src, dst, name),
        nix::dir::Type::Symlink => copy_symlink(src, dst, name),
        _ => Ok(Outcome::Special),
    }
}

/// Copy a regular file: its bytes, mode and times. A file that is something else
/// once opened (a FIFO put there meanwhile: `O_NONBLOCK` keeps the open from
/// waiting for a writer) is not copied.
fn copy_file(src_dir: &OwnedFd, dst_dir: &OwnedFd, name: &CStr) -> Result<Outcome, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let src = match nix::fcntl::openat(src_dir, name, flags | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::ENOENT) => return Ok(Outcome::Vanished),
        // A symlink now: copied as one.
        Err(Errno::ELOOP) => return copy_symlink(src_dir, dst_dir, name),
        Err(e) => return Err(e),
    };
    let meta = nix::sys::stat::fstat(&src)?;
    if SFlag::from_bits_truncate(meta.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Ok(Outcome::Special);
    }
    let mode = Mode::from_bits_truncate(meta.st_mode);
    let create = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    let dst = match nix::fcntl::openat(dst_dir, name, create | OFlag::O_CLOEXEC, mode) {
        Ok(fd) => File::from(fd),
        Err(Errno::EEXIST) => return Ok(Outcome::Present),
        Err(e) => return Err(e),
    };
    let copied = copy_bytes(&src, &dst, meta.st_size.max(0).unsigned_abs())
        .and_then(|()| keep_mode_and_times(&dst, &meta));
    if let Err(e) = copied {
        // Nothing half-made is left behind.
        let _ = nix::unistd::unlinkat(dst_dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok(Outcome::Copied)
}

/// Copy `len` bytes with `copy_file_range(2)`, else (where the kernel cannot copy
/// between these files) through user space.
fn copy_bytes(src: &File, dst: &File, len: u64) -> Result<(), Errno> {
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        match nix::fcntl::copy_file_range(src, None, dst, None, chunk) {
            // The file got shorter since it was looked at: what there was is copied.
            Ok(0) => return Ok(()),
            Ok(n) => left = left.saturating_sub(n as u64),
            Err(Errno::EINTR) => {}
            Err(Errno::EXDEV | Errno::EINVAL | Errno::EOPNOTSUPP | Errno::ENOSYS) => {
                return std::io::copy(&mut src.take(left), &mut &*dst)
                    .map(drop)
                    .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(Errno::EIO as i32)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Copy a symlink as a symlink (its target unchanged, never followed), with its times.
fn copy_symlink(src_dir: &OwnedFd, dst_dir: &OwnedFd, name: &CStr) -> Result<Outcome, Errno> {
    let meta = match nix::sys::stat::fstatat(src_dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(meta) => meta,
        Err(Errno::ENOENT) => return Ok(Outcome::Vanished),
        Err(e) => return Err(e),
    };
    let target = match nix::fcntl::readlinkat(src_dir, name) {
        Ok(target) => target,
        Err(Errno::ENOENT) => return Ok(Outcome::Vanished),
        // Not a symlink any longer.
        Err(Errno::EINVAL) => return Ok(Outcome::Special),
        Err(e) => return Err(e),
    };
    match nix::unistd::symlinkat(target.as_os_str(), dst_dir, name) {
        Ok(()) => {}
        Err(Errno::EEXIST) => return Ok(Outcome::Present),
        Err(e) => return Err(e),
    }
    let (atime, mtime) = times(&meta);
    nix::sys::stat::utimensat(
        dst_dir,
        name,
        &atime,
        &mtime,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )?;
    Ok(Outcome::Copied)
}

/// Give the file or directory open as `fd` the mode (the umask narrowed it when it
/// was made) and the times of `meta`.
fn keep_mode_and_times(fd: &impl AsFd, meta: &FileStat) -> Result<(), Errno> {
    nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(meta.st_mode))?;
    let (atime, mtime) = times(meta);
    nix::sys::stat::futimens(fd, &atime, &mtime)
}

fn times(meta: &FileStat) -> (TimeSpec, TimeSpec) {
    (
        TimeSpec::new(meta.st_atime, meta.st_atime_nsec),
        TimeSpec::new(meta.st_mtime, meta.st_mtime_nsec),
    )
}

fn file_type(meta: &FileStat) -> nix::dir::Type {
    use nix::dir::Type;
    match SFlag::from_bits_truncate(meta.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => Type::File,
        SFlag::S_IFLNK => Type::Symlink,
        SFlag::S_IFDIR => Type::Directory,
        SFlag::S_IFIFO => Type::Fifo,
        SFlag::S_IFSOCK => Type::Socket,
        SFlag::S_IFCHR => Type::CharacterDevice,
        _ => Type::BlockDevice,
    }
}

/// Directories are opened for listing, never through a symlink.
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn cstring(name: &str) -> Result<CString, Errno> {
    CString::new(name).map_err(|_| Errno::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::glob::Patterns;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn set_mode(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// An empty checkout at `<dir>/repo`.
    fn checkout(dir: &Path) -> (git2::Repository, PathBuf) {
        let root = dir.join("repo");
        std::fs::create_dir_all(&root).unwrap();
        let repo = git2::Repository::init(&root).unwrap();
        (repo, root)
    }

    fn add(repo: &git2::Repository, tracked: &[&str]) {
        let mut index = repo.index().unwrap();
        for t in tracked {
            index.add_path(Path::new(t)).unwrap();
        }
        index.write().unwrap();
    }

    fn rels(items: &[Item]) -> Vec<(&str, bool)> {
        items.iter().map(|i| (i.rel.as_str(), i.whole)).collect()
    }

    #[test]
    fn selects_untracked_and_ignored_files_and_whole_directories_and_copies_them() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, root) = checkout(dir.path());
        write(&root, ".gitignore", ".env\nnode_modules/\n");
        write(&root, "tracked.env.txt", "tracked\n");
        write(&root, ".env", "SECRET=1\n");
        write(&root, "api/.env", "API=1\n");
        write(&root, "node_modules/pkg/.env", "no\n");
        write(&root, "local/notes.txt", "untracked\n");
        write(&root, "local/tracked.txt", "tracked\n");
        write(&root, "nested/.git", "gitdir: elsewhere\n");
        write(&root, "nested/.env", "no\n");
        write(&root, "wt/run/w1/.env", "no\n");
        symlink("/etc/hostname", root.join("link.env")).unwrap();
        add(
            &repo,
            &[".gitignore", "tracked.env.txt", "local/tracked.txt"],
        );
        let p = Patterns::new(
            &["local/".into(), "*.env.txt".into(), "*.env".into()],
            Some(".env\n"),
        )
        .unwrap();
        let sel = select(&repo, &root, &p, Some(&root.join("wt"))).unwrap();
        assert_eq!(
            rels(&sel.items),
            [
                (".env", false),
                ("api/.env", false),
                ("link.env", false),
                ("local", true)
            ]
        );
        assert_eq!(sel.tracked, HashSet::from(["local/tracked.txt".to_owned()]));

        let dest = dir.path().join("dest");
        std::fs::create_dir_all(dest.join("api")).unwrap();
        std::fs::write(dest.join("api/.env"), "already here\n").unwrap();
        set_mode(&root.join(".env"), 0o600);
        let done = copy_into(&root, &dest, &sel, &p).unwrap();
        assert_eq!(done.copied, [".env", "link.env", "local/notes.txt"]);
        assert_eq!(done.present, ["api/.env"]);
        assert_eq!(std::fs::read(dest.join(".env")).unwrap(), b"SECRET=1\n");
        let mode = std::fs::metadata(dest.join(".env")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read(dest.join("api/.env")).unwrap(),
            b"already here\n"
        );
        // a symlink stays a symlink, its target as it was
        assert_eq!(
            std::fs::read_link(dest.join("link.env")).unwrap(),
            Path::new("/etc/hostname")
        );
        // what the index tracks is not copied, even inside a directory copied whole
        assert!(!dest.join("local/tracked.txt").exists());
    }

    #[test]
    fn never_writes_through_a_symlink_the_worktree_has() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, root) = checkout(dir.path());
        write(&root, "local/notes.txt", "untracked\n");
        write(&root, "cfg/app.env", "A=1\n");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let dest = dir.path().join("dest");
        std::fs::create_dir_all(&dest).unwrap();
        symlink(&outside, dest.join("local")).unwrap();
        symlink(&outside, dest.join("cfg")).unwrap();
        let p = Patterns::new(&["local/".into(), "cfg/*.env".into()], None).unwrap();
        let sel = select(&repo, &root, &p, None).unwrap();
        assert_eq!(rels(&sel.items), [("cfg/app.env", false), ("local", true)]);
        let done = copy_into(&root, &dest, &sel, &p).unwrap();
        assert!(done.copied.is_empty(), "{:?}", done.copied);
        assert_eq!(done.present, ["cfg/app.env"]);
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }
}
