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
