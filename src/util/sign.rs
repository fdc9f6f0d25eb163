//! Signed run records: fanout signs what it writes in a run directory and reads back
//! (`results.json`, `journal.json`, `plan.json`, `snapshot.json`, per-worker records,
//! process-group records) with an HMAC-SHA256 whose key is kept outside every
//! repository ([`key_dir`]: `$XDG_STATE_HOME/fanout/record.key`, else
//! `~/.local/state/fanout/record.key`; 32 random bytes, created exclusively, mode 0600
//! in a 0700 directory, refused when another user could read it or it is not the
//! user's). The signature of `FILE` is `FILE.sig` (hex), over a version tag, the file's
//! name and its bytes, so a record cannot pass for another kind of record.
//!
//! [`key_dir`] is what the sandbox must keep agents from reading.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Version tag of the signed bytes.
const TAG: &[u8] = b"fanout-record-v1\0";

/// The directory holding the record key (what the sandbox denies agents).
pub fn key_dir() -> PathBuf {
    let state = super::user_dir("XDG_STATE_HOME", ".local/state");
    state
        .unwrap_or_else(|| PathBuf::from("/nonexistent"))
        .join("fanout")
}

fn refuse(path: &Path, why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{}: {why}; fanout refuses a signing key others could read or write (remove it, fanout makes a new one)",
            path.display()
        ),
    )
}

/// The key directory, made 0700 when missing; refused when not the user's or open to others.
fn checked_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(refuse(dir, "not a directory"));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(refuse(dir, "owned by another user"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(dir, "other users may read or write it"));
    }
    Ok(())
}

/// Read the key in `dir`, or make it (exclusively) when there is none.
fn load_key(dir: &Path) -> std::io::Result<Vec<u8>> {
    let path = dir.join("record.key");
    checked_dir(dir)?;
    let nofollow = nix::fcntl::OFlag::O_NOFOLLOW.bits();
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nofollow)
        .open(&path)
    {
        Ok(mut f) => {
            let mut key = vec![0u8; 32];
            getrandom::getrandom(&mut key).map_err(std::io::Error::other)?;
            f.write_all(&key)?;
            f.sync_all()?;
            return Ok(key);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow)
        .open(&path)?;
    let meta = f.metadata()?;
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(refuse(&path, "owned by another user"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(&path, "other users may read or write it"));
    }
    let mut key = Vec::new();
    f.read_to_end(&mut key)?;
    if key.len() != 32 {
        return Err(refuse(&path, "not a fanout record key (32 bytes)"));
    }
    Ok(key)
}

/// The key, read once per process (unit tests use a fixed key: they never touch the
/// user's).
fn key() -> std::io::Result<&'static [u8]> {
    if cfg!(test) {
        return Ok(&[0x5a; 32]);
    }
    static KEY: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    KEY.get_or_init(|| load_key(&key_dir()).map_err(|e| e.to_string()))
        .as_deref()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.clone()))
}

fn mac(key: &[u8], name: &str, bytes: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key");
    m.update(TAG);
    m.update(name.as_bytes());
    m.update(b"\0");
    m.update(bytes);
    m
}

/// The signature file of `path`.
pub fn sig_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".sig");
    PathBuf::from(s)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Write `bytes` to `path` (atomically) and its signature beside it.
pub fn write_signed(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    stream_signed(key()?, path, |w| w.write_all(bytes))
}

/// [`write_signed`] of what `fill` writes, streamed: the record is signed as it is
/// written and never held whole in memory (a record that grows with the run, such as
/// the journal, costs a buffer, not its size).
pub fn write_signed_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    stream_signed(key()?, path, fill)
}

fn stream_signed(
    key: &[u8],
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut m = mac(key, &name_of(path), b"");
    super::write_atomic_with(path, |w| fill(&mut Signing { to: w, mac: &mut m }))?;
    let sig = hex::encode(m.finalize().into_bytes());
    super::write_atomic(&sig_path(path), format!("{sig}\n").as_bytes())
}

/// A writer that signs what it passes on.
struct Signing<'a> {
    to: &'a mut dyn Write,
    mac: &'a mut Hmac<Sha256>,
}

impl Write for Signing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.to.write(buf)?;
        self.mac.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.to.flush()
    }
}

/// Why a record was refused.
#[derive(Debug)]
pub enum RecordError {
    /// It cannot be read (missing, among others).
    Io(PathBuf, std::io::Error),
    /// It does not carry fanout's signature.
    Forged(PathBuf, &'static str),
}

impl RecordError {
    /// Whether the record is simply absent.
    pub fn is_missing(&self) -> bool {
        matches!(self, RecordError::Io(_, e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            RecordError::Forged(p, why) => write!(
                f,
                "{}: {why}: fanout did not write it (or it was changed since); refusing it",
                p.display()
            ),
        }
    }
}

/// Read `path` (never through a symlink) and check its signature.
pub fn read_signed(path: &Path) -> Result<Vec<u8>, RecordError> {
    let k = key().map_err(|e| RecordError::Io(path.to_owned(), e))?;
    read_signed_with(k, path)
}

fn read_signed_with(key: &[u8], path: &Path) -> Result<Vec<u8>, RecordError> {
    let io = |e| RecordError::Io(path.to_owned(), e);
    let read = |p: &Path| -> std::io::Result<Vec<u8>> {
        use nix::fcntl::OFlag;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
            .open(p)?;
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        let mut v = Vec::new();
        f.take(super::RECORD_LIMIT + 1).read_to_end(&mut v)?;
        if v.len() as u64 > super::RECORD_LIMIT {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "larger than fanout reads of a record",
            ));
        }
        Ok(v)
    };
    let bytes = read(path).map_err(io)?;
    let sig = match read(&sig_path(path)) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RecordError::Forged(path.to_owned(), "no signature"));
        }
        Err(e) => return Err(io(e)),
    };
    let sig = String::from_utf8_lossy(&sig);
    let sig: Option<Vec<u8>> = (0..sig.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(sig.trim().get(i..i + 2)?, 16).ok())
        .collect();
    match sig {
        Some(s) if mac(key, &name_of(path), &bytes).verify_slice(&s).is_ok() => Ok(bytes),
        _ => Err(RecordError::Forged(
            path.to_owned(),
            "its signature does not match",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_signed(p: &Path, b: &[u8]) -> std::io::Result<()> {
        stream_signed(&[7; 32], p, |w| w.write_all(b))
    }

    fn read_signed(p: &Path) -> Result<Vec<u8>, RecordError> {
        read_signed_with(&[7; 32], p)
    }

    #[test]
    fn the_key_is_made_private_once_and_refused_when_others_can_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state/fanout");
        let key = load_key(&dir).unwrap();
        assert_eq!(key.len(), 32);
        assert_eq!(load_key(&dir).unwrap(), key, "made once, then read");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("record.key")), 0o600);
        let perms = |m| std::fs::Permissions::from_mode(m);
        std::fs::set_permissions(dir.join("record.key"), perms(0o644)).unwrap();
        let e = load_key(&dir).unwrap_err().to_string();
        assert!(
            e.contains("record.key: other users may read or write it"),
            "{e}"
        );
        std::fs::set_permissions(dir.join("record.key"), perms(0o600)).unwrap();
        std::fs::set_permissions(&dir, perms(0o755)).unwrap();
        assert!(load_key(&dir).is_err());
        // a symlink planted as the key is not followed
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::set_permissions(&other, perms(0o700)).unwrap();
        std::os::unix::fs::symlink(dir.join("record.key"), other.join("record.key")).unwrap();
        assert!(load_key(&other).is_err());
    }

    #[test]
    fn a_record_streamed_in_pieces_is_signed_as_its_whole_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("journal.json");
        let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        // The signature of the whole bytes at once, as reading checks it.
        let whole = format!(
            "{}\n",
            hex::encode(mac(&[7; 32], "journal.json", &big).finalize().into_bytes())
        );
        stream_signed(&[7; 32], &p, |w| {
            for piece in big.chunks(777) {
                w.write_all(piece)?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(read_signed(&p).unwrap(), big);
        assert_eq!(
            std::fs::read_to_string(sig_path(&p)).unwrap(),
            whole,
            "same signature"
        );
        // A write that fails leaves no record and no temporary file.
        let failed = dir.path().join("results.json");
        let e = stream_signed(&[7; 32], &failed, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("serializer failed"))
        });
        assert!(e.is_err());
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["journal.json", "journal.json.sig"]);
    }

    #[test]
    fn signed_records_verify_and_changed_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("results.json");
        write_signed(&p, b"{\"a\":1}").unwrap();
        assert_eq!(read_signed(&p).unwrap(), b"{\"a\":1}");
        std::fs::write(&p, b"{\"a\":2}").unwrap();
        let e = read_signed(&p).unwrap_err().to_string();
        assert!(
            e.contains("results.json: its signature does not match"),
            "{e}"
        );
        // the same bytes under another name are another record
        let q = dir.path().join("journal.json");
        write_signed(&p, b"x").unwrap();
        std::fs::copy(&p, &q).unwrap();
        std::fs::copy(sig_path(&p), sig_path(&q)).unwrap();
        assert!(read_signed(&q).is_err());
        std::fs::remove_file(sig_path(&p)).unwrap();
        assert!(
            read_signed(&p)
                .unwrap_err()
                .to_string()
                .contains("no signature")
        );
        assert!(
            read_signed(&dir.path().join("none"))
                .unwrap_err()
                .is_missing()
        );
        // another key: nothing verifies
        write_signed(&p, b"x").unwrap();
        assert!(read_signed_with(&[8; 32], &p).is_err());
    }
}
