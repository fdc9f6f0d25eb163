//! What one confined process may write.

use std::path::PathBuf;

/// What one confined process may do besides reading and executing anything outside
/// [`Policy::hide`]: write (create, remove, rename, truncate…) beneath
/// [`Policy::write`], and open for writing the files in [`Policy::write_files`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The Landlock ABI to use; 0: no Landlock (the child only drops a root fanout's capabilities).
    pub abi: u8,
    /// Directories (or files) with every write right beneath them.
    pub write: Vec<PathBuf>,
    /// Files that may be opened for writing (and truncated), nothing more: `/dev/null`.
    pub write_files: Vec<PathBuf>,
    /// Directories nothing beneath may be read or executed (their entries may still be
    /// listed): fanout's record key ([`crate::util::sign::key_dir`]).
    pub hide: Vec<PathBuf>,
}
