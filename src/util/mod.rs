//! Small helpers every stage may use, importing nothing of fanout's: atomic file
//! writes, bounded file reads, whether fanout runs in GitHub Actions ([`in_actions`]), timestamps, short commit ids, human sizes, durations
//! ([`duration`]), path patterns ([`glob`]), output that a closed pipe cannot break
//! ([`out`]), the one HTTP client stack ([`http`]), the one reader of `/proc`
//! ([`procfs`]), and the process-wide settings made at start ([`runtime`]).

pub mod duration;
pub mod glob;
pub mod http;
pub mod out;
pub mod procfs;
pub mod runtime;
pub mod sign;

use std::path::{Path, PathBuf};

/// Whether fanout runs inside GitHub Actions (`GITHUB_ACTIONS=true`, as the runner
/// sets it): the one place every stage asks.
pub fn in_actions() -> bool {
    std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// A per-user directory: `$var` when it is an absolute path (the XDG rule), else
/// `$HOME/<home_default>` when `HOME` is one.
pub fn user_dir(var: &str, home_default: &str) -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os(var).and_then(abs).or_else(|| {
        let home = std::env::var_os("HOME").and_then(abs);
        home.map(|h| h.join(home_default))
    })
}

/// This user's directory for fanout under the system's temporary directory:
/// `<temp dir>/fanout-<uid>` (made by [`own_dir`] where it is used).
pub fn user_temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!("fanout-{}", nix::unistd::getuid()))
}

/// Make the directory `dir` (its parents too; mode 0700) and refuse a link in its
/// place, or one another user owns or may write: nobody else may plant what fanout
/// keeps there.
pub fn own_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let err = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(err)?;
    let meta = std::fs::symlink_metadata(dir).map_err(err)?;
    let me = nix::unistd::getuid().as_raw();
    let wrong = if !meta.is_dir() {
        Some("not a directory".to_owned())
    } else if meta.uid() != me {
        Some(format!(
            "owned by uid {}, not by this user ({me})",
            meta.uid()
        ))
    } else {
        (meta.mode() & 0o022 != 0).then(|| "other users may write it".to_owned())
    };
    match wrong {
        Some(why) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{}: {why}", dir.display()),
        )),
        None => Ok(()),
    }
}

/// Write `bytes` to `path` via a temporary file and a rename. The temporary file has
/// a random name and is created exclusively (`O_EXCL`), so a symlink planted where
/// fanout writes is never followed; the rename replaces whatever is at `path` (a
/// planted symlink included) without following it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `fill` writes, streamed to the file through a buffer:
/// the content is never held whole in memory.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    let mut w = std::io::BufWriter::new(tmp.as_file_mut());
    fill(&mut w)?;
    w.flush()?;
    drop(w);
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Open a log for appending (`truncate`: start it afresh), creating it with mode
/// 0600; never through a symlink (`O_NOFOLLOW`: a planted link is an error).
pub fn open_log(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.create(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .mode(0o600);
    if truncate {
        o.write(true).truncate(true);
    } else {
        o.append(true);
    }
    o.open(path)
}

/// Read at most `max` bytes of the regular file at `path`, never following a symbolic
/// link at its last component nor blocking on a FIFO or device: for files another
/// process (an agent) could have replaced. Anything but a regular file is an error.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    open_untrusted(path)?.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// Copy at most `max` bytes of the regular file at `path` (opened as
/// [`read_regular`] opens it) to `to`, through the kernel (no buffer of the file's
/// size in memory), and give `to` the file's modification time; the number of bytes
/// copied.
pub fn copy_regular(path: &Path, to: &mut std::fs::File, max: u64) -> std::io::Result<u64> {
    use std::io::Read;
    let from = open_untrusted(path)?;
    let modified = from.metadata()?.modified()?;
    let n = std::io::copy(&mut from.take(max), to)?;
    to.set_modified(modified)?;
    Ok(n)
}

/// `path` opened for reading if it is a regular file, never through a symbolic link
/// at its last component, never blocking on a FIFO or device.
fn open_untrusted(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a regular file", path.display()),
        ));
    }
    Ok(f)
}

/// Most bytes read of a run record an agent or a job could have written
/// (`results.json`, `journal.json`, `plan.json`, worker records and artifacts).
pub const RECORD_LIMIT: u64 = 64 << 20;

/// Most bytes read of a configuration file (`fanout.yml`, a PR body template).
pub const CONFIG_LIMIT: u64 = 4 << 20;

/// Open `path` for reading if it is a regular file (never blocking on a FIFO or a
/// device someone put in its place).
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// The whole file at `path`, when it holds at most `limit` bytes; a larger file (or
/// one that is not a regular file) is an error naming the limit, and is never read
/// whole into memory.
pub fn read_capped(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    open_regular(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {}, more than fanout reads of such a file",
                human_bytes(limit)
            ),
        ));
    }
    Ok(buf)
}

/// [`read_capped`], as text.
pub fn read_capped_string(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, limit)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()))
}

/// The first `n` bytes (at most) of the file at `path`; only those are read.
pub fn read_head(path: &Path, n: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    open_regular(path)?.take(n).read_to_end(&mut buf)?;
    Ok(buf)
}

/// The last `n` bytes (at most) of the file at `path`; only those are read.
pub fn read_tail(path: &Path, n: u64) -> std::io::Result<Vec<u8>> {
    tail_of(&mut open_regular(path)?, n)
}

/// The last `n` bytes (at most) of the open file `f`; only those are read.
pub fn tail_of(f: &mut std::fs::File, n: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(n)))?;
    let mut buf = Vec::new();
    f.take(n).read_to_end(&mut buf)?;
    Ok(buf)
}

/// The SHA-256 of `bytes`, in lowercase hex (as `sha256sum` prints it).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// RFC 3339 timestamp of `t`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// First 7 characters of a commit id.
pub fn short(commit: &str) -> &str {
    head(commit, 7)
}

/// The first `n` characters of `s` (never cut inside one: what a record holds may
/// not be the hex it should be).
pub fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// The first `shown` of `items` joined by `sep`, then `…, N more` for the rest: a
/// list a message can hold however long it grows.
pub fn some_of<T: std::fmt::Display>(items: &[T], shown: usize, sep: &str) -> String {
    let mut s = items
        .iter()
        .take(shown)
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(sep);
    if items.len() > shown {
        s.push_str(&format!("{sep}… {} more", items.len() - shown));
    }
    s
}

/// Human size: `12.3 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_dir_makes_a_private_directory_and_refuses_a_link_or_an_open_one() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let made = d.path().join("a/b");
        own_dir(&made).unwrap();
        let mode = std::fs::metadata(&made).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        own_dir(&made).unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&made, &link).unwrap();
        let err = own_dir(&link).unwrap_err().to_string();
        assert!(err.ends_with("not a directory"), "{err}");
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = own_dir(&made).unwrap_err().to_string();
        assert!(err.ends_with("other users may write it"), "{err}");
    }

    #[test]
    fn some_of_names_the_first_and_counts_the_rest() {
        let refs: Vec<String> = (1..=300).map(|i| format!("refs/heads/x{i}")).collect();
        assert_eq!(
            some_of(&refs, 2, "; "),
            "refs/heads/x1; refs/heads/x2; … 298 more"
        );
        assert_eq!(some_of(&refs[..2], 2, ", "), "refs/heads/x1, refs/heads/x2");
        assert_eq!(some_of::<String>(&[], 2, ", "), "");
    }

    #[test]
    fn read_regular_refuses_links_fifos_and_bounds_the_size() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, "0123456789").unwrap();
        assert_eq!(read_regular(&file, 4).unwrap(), b"0123");
        let link = d.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_regular(&link, 100).is_err());
        let fifo = d.path().join("p");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_regular(&fifo, 100).is_err());
        assert!(read_regular(Path::new("/dev/zero"), 100).is_err());
        assert!(read_regular(&d.path().join("missing"), 100).is_err());
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mut to = std::fs::File::create(d.path().join("copy")).unwrap();
        assert_eq!(copy_regular(&file, &mut to, 6).unwrap(), 6);
        assert_eq!(std::fs::read(d.path().join("copy")).unwrap(), b"012345");
        let copied = std::fs::metadata(d.path().join("copy")).unwrap();
        assert_eq!(copied.modified().unwrap(), old);
        for bad in [&link, &fifo, Path::new("/dev/zero")] {
            assert!(
                copy_regular(bad, &mut to, 100).is_err(),
                "{}",
                bad.display()
            );
        }
    }

    #[test]
    fn capped_reads_refuse_large_files_fifos_and_devices() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.json");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_capped(&p, 10).unwrap(), b"0123456789");
        let e = read_capped(&p, 9).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            "larger than 9 B, more than fanout reads of such a file"
        );
        assert_eq!(read_tail(&p, 3).unwrap(), b"789");
        assert_eq!(read_tail(&p, 64).unwrap(), b"0123456789");
        assert_eq!(read_head(&p, 3).unwrap(), b"012");
        // A FIFO in a record's place would block a plain read forever.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(
            read_capped(&fifo, 10).unwrap_err().to_string(),
            "not a regular file"
        );
        assert_eq!(
            read_tail(&fifo, 10).unwrap_err().to_string(),
            "not a regular file"
        );
        let e = read_capped(Path::new("/dev/zero"), 10).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file");
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(read_capped_string(&p, 10).is_err());
    }

    #[test]
    fn heads_never_cut_a_character() {
        assert_eq!(short("0123456789abcdef"), "0123456");
        assert_eq!(short("abc"), "abc");
        // A "commit" from a tampered record (found by fuzz/bundle_header).
        assert_eq!(short("ééééééééé"), "ééééééé");
        assert_eq!(head("aé", 12), "aé");
        assert_eq!(head("", 3), "");
    }
}
