//! Small helpers every stage may use, importing nothing of fanout's: atomic file
//! writes, timestamps, short commit ids, human sizes, durations ([`duration`]), path
//! patterns ([`glob`]) and output that a closed pipe cannot break ([`out`]).

pub mod duration;
pub mod glob;
pub mod out;

use std::path::Path;

/// Write `bytes` to `path` via a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Read at most `max` bytes of the regular file at `path`, never following a symbolic
/// link at its last component nor blocking on a FIFO or device: for files another
/// process (an agent) could have replaced. Anything but a regular file is an error.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
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
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// RFC 3339 timestamp of `t`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// First 7 characters of a commit id.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(7)]
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
    }
}
