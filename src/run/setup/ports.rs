//! Port blocks: each live worker holds `block` consecutive ports (`base + block × k`
//! onwards) that no other live worker on this machine holds — in this fanout process
//! or any other.
//!
//! A port is held by an exclusive lock (`flock`, through [`File::try_lock`]) on
//! `<dir>/<port>.lock`, kept open for the worker's whole life and released when the
//! worker finishes. The kernel drops a lock when its process dies, however it dies, so
//! the claim of a dead fanout is stale by construction: the next allocation simply
//! locks the file again (it holds the last owner's pid, for people only). Every port of
//! a block is locked, not only the first, so fanouts configured with different bases
//! or block sizes still never hand out the same port. Lock files are opened
//! close-on-exec: agents and the processes they leave behind never inherit a claim.
//!
//! The lock files stay when their claim ends (one per port ever handed out, empty but
//! for a pid): claiming a block then opens files that exist, where making and removing
//! ten files per worker cost more than the rest of the claim on a busy `/tmp` (ext4
//! looks for a free inode among the recently deleted ones).
//!
//! This only coordinates fanout workers: it does not check that nothing else on the
//! machine listens on the ports.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Hands out port blocks, claimed through lock files in one directory.
#[derive(Debug, Clone)]
pub struct PortAllocator {
    dir: PathBuf,
    base: u16,
    block: u16,
}

/// A claimed block: `first..=last`, held until dropped.
#[derive(Debug)]
pub struct PortLease {
    /// First port of the block (`FANOUT_PORT`).
    pub first: u16,
    /// Last port of the block.
    pub last: u16,
    /// The locked files: closing them (dropping the lease) releases the block.
    _held: Vec<File>,
}

impl PortAllocator {
    /// Blocks of `block` ports from `base`, claimed in `dir`.
    pub fn new(dir: PathBuf, base: u16, block: u16) -> PortAllocator {
        PortAllocator {
            dir,
            base,
            block: block.max(1),
        }
    }

    /// The machine-wide lock directory of this user: `$XDG_RUNTIME_DIR/fanout/ports`,
    /// else `<temp dir>/fanout-<uid>/ports`.
    pub fn default_dir() -> PathBuf {
        match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
            Some(d) if d.is_absolute() => d.join("fanout").join("ports"),
            _ => crate::util::user_temp_dir().join("ports"),
        }
    }

    /// Claim the lowest free block.
    pub fn claim(&self) -> std::io::Result<PortLease> {
        crate::util::own_dir(&self.dir)?;
        let mut first = u32::from(self.base);
        let block = u32::from(self.block);
        while first + block - 1 <= u32::from(u16::MAX) {
            if let Some(lease) = self.try_block(first as u16)? {
                return Ok(lease);
            }
            first += block;
        }
        Err(std::io::Error::other(format!(
            "no free block of {} ports from {}: all are held by live workers (locks in {})",
            self.block,
            self.base,
            self.dir.display()
        )))
    }

    /// Lock every port of the block starting at `first`, or none.
    fn try_block(&self, first: u16) -> std::io::Result<Option<PortLease>> {
        let last = first + (self.block - 1);
        let mut held = Vec::with_capacity(usize::from(self.block));
        for port in first..=last {
            match lock_port(&self.dir, port)? {
                Some(h) => held.push(h),
                // Dropping the partial lease releases what was taken.
                None => return Ok(None),
            }
        }
        Ok(Some(PortLease {
            first,
            last,
            _held: held,
        }))
    }
}

/// Lock `<dir>/<port>.lock`; `None` when a live process holds it.
fn lock_port(dir: &Path, port: u16) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(format!("{port}.lock"));
    loop {
        // Never through a link (what it names is someone else's file): a symbolic
        // link, or a hard link to a file elsewhere, is taken away and the lock file
        // made again.
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path);
        let file = match opened {
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                std::fs::remove_file(&path)?;
                continue;
            }
            opened => opened?,
        };
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() != 1 {
            std::fs::remove_file(&path)?;
            continue;
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(e),
        }
        // Someone may have removed the file between our open and our lock (a person, or
        // an older fanout, which removed its lock files): the lock must be on the file
        // the path names now.
        let same = match (file.metadata(), std::fs::metadata(&path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if !same {
            continue;
        }
        // The holder's pid over the last one's, padded to one width: the file never
        // needs truncating (which would make ext4 flush it to disk when it is closed).
        file.write_all_at(format!("{:<10}\n", std::process::id()).as_bytes(), 0)?;
        return Ok(Some(file));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_allocators_never_share_a_block_and_release_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = PortAllocator::new(dir.path().join("ports"), 30000, 10);
        let b = PortAllocator::new(dir.path().join("ports"), 30000, 10);
        let one = a.claim().unwrap();
        let two = b.claim().unwrap();
        let three = a.claim().unwrap();
        assert_eq!((one.first, one.last), (30000, 30009));
        assert_eq!((two.first, two.last), (30010, 30019));
        assert_eq!((three.first, three.last), (30020, 30029));
        // A lock file names its holder.
        let pid = std::fs::read_to_string(dir.path().join("ports/30015.lock")).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        drop(two);
        // Its files stay, unlocked: the next claim takes the block again.
        assert!(dir.path().join("ports/30015.lock").exists());
        assert_eq!(b.claim().unwrap().first, 30010);
    }

    #[test]
    fn different_grids_still_never_share_a_port() {
        let dir = tempfile::tempdir().unwrap();
        let a = PortAllocator::new(dir.path().to_owned(), 31000, 10);
        let b = PortAllocator::new(dir.path().to_owned(), 31005, 4);
        let held = a.claim().unwrap();
        let other = b.claim().unwrap();
        assert_eq!((held.first, held.last), (31000, 31009));
        assert_eq!((other.first, other.last), (31013, 31016));
    }

    #[test]
    fn a_dead_processs_claim_is_reclaimed() {
        let dir = tempfile::tempdir().unwrap();
        // A process that claimed 32000–32009 and died: its files remain, its locks
        // went with it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        for port in 32000..32010 {
            std::fs::write(dir.path().join(format!("{port}.lock")), format!("{dead}\n")).unwrap();
        }
        let a = PortAllocator::new(dir.path().to_owned(), 32000, 10);
        let lease = a.claim().unwrap();
        assert_eq!(lease.first, 32000);
        let owner = std::fs::read_to_string(dir.path().join("32003.lock")).unwrap();
        assert_eq!(owner.trim(), std::process::id().to_string());
    }

    #[test]
    fn a_lock_file_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let ports = dir.path().join("ports");
        std::fs::create_dir(&ports).unwrap();
        let theirs = dir.path().join("theirs");
        let linked = dir.path().join("linked");
        std::fs::write(&theirs, "keep me\n").unwrap();
        std::fs::write(&linked, "keep me too\n").unwrap();
        std::os::unix::fs::symlink(&theirs, ports.join("33000.lock")).unwrap();
        std::fs::hard_link(&linked, ports.join("33001.lock")).unwrap();
        let lease = PortAllocator::new(ports.clone(), 33000, 2).claim().unwrap();
        assert_eq!((lease.first, lease.last), (33000, 33001));
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "keep me\n");
        assert_eq!(std::fs::read_to_string(&linked).unwrap(), "keep me too\n");
        for port in [33000, 33001] {
            let meta = std::fs::symlink_metadata(ports.join(format!("{port}.lock"))).unwrap();
            assert!(meta.is_file() && meta.nlink() == 1, "{port}");
        }
    }

    #[test]
    fn the_last_block_ends_at_65535_and_then_none_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let a = PortAllocator::new(dir.path().to_owned(), 65530, 3);
        let x = a.claim().unwrap();
        let y = a.claim().unwrap();
        assert_eq!((x.first, y.last), (65530, 65535));
        let e = a.claim().unwrap_err().to_string();
        assert!(e.contains("no free block of 3 ports from 65530"), "{e}");
    }
}
