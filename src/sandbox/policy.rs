//! What one confined process may write, and how it travels to the exec shim.

use std::ffi::OsString;
use std::path::PathBuf;

/// What one confined process may do besides reading and executing anything outside
/// [`Policy::hide`]: write (create, remove, rename, truncate…) beneath
/// [`Policy::write`], and open for writing the files in [`Policy::write_files`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The Landlock ABI to use; 0: no Landlock (the shim only drops capabilities).
    pub abi: u8,
    /// Directories (or files) with every write right beneath them.
    pub write: Vec<PathBuf>,
    /// Files that may be opened for writing (and truncated), nothing more: `/dev/null`.
    pub write_files: Vec<PathBuf>,
    /// Directories nothing beneath may be read or executed (their entries may still be
    /// listed): fanout's record key ([`crate::util::sign::key_dir`]).
    pub hide: Vec<PathBuf>,
}

impl Policy {
    /// The shim's arguments for this policy (before `--`).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["--abi".into(), self.abi.to_string().into()];
        for p in &self.write {
            v.push("--write".into());
            v.push(p.clone().into_os_string());
        }
        for p in &self.write_files {
            v.push("--write-file".into());
            v.push(p.clone().into_os_string());
        }
        for p in &self.hide {
            v.push("--hide".into());
            v.push(p.clone().into_os_string());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_round_trips_through_its_arguments() {
        let policy = Policy {
            abi: 6,
            write: vec!["/w/t".into(), "/tmp/x y".into()],
            write_files: vec!["/dev/null".into()],
            hide: vec!["/home/u/.local/state/fanout".into()],
        };
        let args = policy.to_args();
        assert_eq!(
            args,
            [
                "--abi",
                "6",
                "--write",
                "/w/t",
                "--write",
                "/tmp/x y",
                "--write-file",
                "/dev/null",
                "--hide",
                "/home/u/.local/state/fanout"
            ]
            .map(OsString::from)
        );
    }
}
