//! Private, seeded copies of a CLI's configuration directory (Claude Code's, Codex's):
//! the user's settings, instructions and login are copied into the worker's private
//! directory, the CLI is pointed there, and what it (or an agent) writes there is
//! dropped with the worker — a hook or a `notify` program planted there never runs in
//! the user's next session.

use std::path::Path;

/// Largest file copied.
pub(super) const MAX_FILE: u64 = 16 << 20;
/// Deepest directory level copied.
const MAX_DEPTH: usize = 8;

/// Copy `files` and the trees `dirs` (regular files and directories only, following
/// the user's own links) from `from` into `to` (made, mode 0700). What is missing is
/// skipped.
pub(super) fn seed(from: &Path, to: &Path, files: &[&str], dirs: &[&str]) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)?;
    for f in files {
        copy_file(&from.join(f), &to.join(f))?;
    }
    for d in dirs {
        copy_tree(&from.join(d), &to.join(d), 0)?;
    }
    Ok(())
}

/// Copy one file, when it is a regular file (links followed) of sane size.
pub(super) fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::metadata(from) {
        Ok(m) if m.is_file() && m.len() <= MAX_FILE => std::fs::copy(from, to).map(drop),
        _ => Ok(()),
    }
}

fn copy_tree(from: &Path, to: &Path, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH || !std::fs::metadata(from).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if std::fs::metadata(&src).is_ok_and(|m| m.is_dir()) {
            copy_tree(&src, &dst, depth + 1)?;
        } else {
            copy_file(&src, &dst)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_copies_what_is_listed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("from"), d.path().join("to"));
        std::fs::create_dir_all(from.join("agents/deep")).unwrap();
        std::fs::create_dir_all(from.join("projects")).unwrap();
        std::fs::write(from.join("settings.json"), "{}").unwrap();
        std::fs::write(from.join("agents/deep/a.md"), "a").unwrap();
        std::fs::write(from.join("projects/big.jsonl"), "x").unwrap();
        std::os::unix::fs::symlink(from.join("settings.json"), from.join("CLAUDE.md")).unwrap();
        seed(
            &from,
            &to,
            &["settings.json", "CLAUDE.md", "missing"],
            &["agents", "gone"],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(to.join("agents/deep/a.md")).unwrap(),
            "a"
        );
        assert_eq!(std::fs::read_to_string(to.join("CLAUDE.md")).unwrap(), "{}");
        assert!(
            !std::fs::symlink_metadata(to.join("CLAUDE.md"))
                .unwrap()
                .is_symlink()
        );
        assert!(!to.join("projects").exists());
        assert!(!to.join("missing").exists());
    }
}
