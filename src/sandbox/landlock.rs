//! Linux: the Landlock version query, the ruleset of a [`Policy`] (the `landlock`
//! crate, every right required: a ruleset the kernel cannot enforce in full is an
//! error, never a weaker sandbox), and dropping capabilities (the `caps` crate).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::libc;

use super::policy::Policy;

/// The kernel's Landlock ABI version, or why there is none.
pub(super) fn kernel_abi() -> Result<u8, String> {
    // SAFETY: the documented version query (`attr` NULL, `size` 0,
    // LANDLOCK_CREATE_RULESET_VERSION): nothing is read or written through pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if v >= 1 {
        return Ok(u8::try_from(v).unwrap_or(u8::MAX));
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no Landlock (ENOSYS)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into the kernel but not enabled (EOPNOTSUPP; see the `lsm=` boot parameter)"
                .into()
        }
        _ => format!("Landlock's version query failed: {e}"),
    })
}

/// Drop capabilities, restrict, execute (see [`super::exec`]).
pub(super) fn exec(policy: &Policy, program: &OsStr, args: &[OsString]) -> String {
    use std::os::unix::process::CommandExt;
    if let Err(e) = drop_capabilities() {
        return format!("dropping capabilities: {e}");
    }
    if policy.abi > 0
        && let Err(e) = restrict(policy)
    {
        return format!("Landlock: {e}");
    }
    let e = std::process::Command::new(program).args(args).exec();
    format!("cannot run {}: {e}", program.to_string_lossy())
}

/// Give up every capability when this process has any (root): the bounding set first
/// (so that no later `execve` hands them back), then ambient, inheritable, effective
/// and permitted.
fn drop_capabilities() -> Result<(), String> {
    use caps::CapSet;
    let holds = |set| caps::read(None, set).map_or(true, |c| !c.is_empty());
    let root = nix::unistd::geteuid().is_root();
    if !root && !holds(CapSet::Permitted) && !holds(CapSet::Ambient) {
        return Ok(());
    }
    for set in [
        CapSet::Bounding,
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| format!("{set:?}: {e}"))?;
    }
    Ok(())
}

/// Restrict this process (and what it executes) to `policy`.
fn restrict(policy: &Policy) -> Result<(), String> {
    let abi = ABI::from(i32::from(policy.abi));
    let err = |e: landlock::RulesetError| e.to_string();
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(err)?;
    if policy.abi >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    // Every directory may be listed; files read and executed everywhere but beneath
    // the hidden paths (Landlock only allows: reading is granted on each subtree that
    // holds no hidden path, see `readable`).
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rule(PathBeneath::new(open("/")?, AccessFs::ReadDir))
        .map_err(err)?;
    let read = AccessFs::from_read(abi);
    for p in readable(&policy.hide) {
        let rights = if p.is_dir() {
            read
        } else {
            read & AccessFs::from_file(abi)
        };
        // An entry gone since it was listed has nothing to grant.
        if let Ok(fd) = PathFd::new(&p) {
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(err)?;
        }
    }
    for p in &policy.write {
        let rights = if p.is_dir() {
            all
        } else {
            AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(open(p)?, rights))
            .map_err(err)?;
    }
    let file_write: BitFlags<AccessFs> =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for p in &policy.write_files {
        let rights = AccessFs::from_file(abi) & file_write;
        created = created
            .add_rule(PathBeneath::new(open(p)?, rights))
            .map_err(err)?;
    }
    let status = created.restrict_self().map_err(err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(format!("the ruleset is {:?}", status.ruleset));
    }
    Ok(())
}

/// The paths to grant reading beneath so that everything is readable but what lies
/// beneath `hide`: `/` itself when nothing is hidden; else, walking down from `/`, each
/// entry of a directory on the way to a hidden path that is not on that way (a
/// symbolic link whose target is, or holds, a hidden path is left out: the rule would
/// land on its target).
pub(super) fn readable(hide: &[PathBuf]) -> Vec<PathBuf> {
    let hide: Vec<PathBuf> = hide
        .iter()
        .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.clone()))
        .collect();
    let mut out = Vec::new();
    readable_beneath(Path::new("/"), &hide, &mut out);
    out
}

fn readable_beneath(dir: &Path, hide: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hide.iter().any(|h| h.starts_with(dir) && h != dir) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            let Ok(real) = std::fs::canonicalize(&path) else {
                continue; // a dangling link: nothing to read through it
            };
            if real == path {
                readable_beneath(&path, hide, out);
            } else if !hide
                .iter()
                .any(|h| h.starts_with(&real) || real.starts_with(h))
            {
                out.push(path);
            }
        }
    } else if !hide.iter().any(|h| dir.starts_with(h)) {
        out.push(dir.to_owned());
    }
}

fn open(p: impl AsRef<Path>) -> Result<PathFd, String> {
    PathFd::new(p.as_ref()).map_err(|e| format!("{}: {e}", p.as_ref().display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_the_hidden_directory_stays_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let state = base.join("home/.local/state");
        let hidden = state.join("fanout");
        for d in [&hidden, &state.join("other"), &base.join("home/src")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(hidden.join("record.key"), "k").unwrap();
        std::fs::write(state.join("notes"), "n").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, state.join(name)).unwrap();
        };
        link(&hidden, "to-key");
        link(&hidden.join("record.key"), "to-key-file");
        link(&base.join("home"), "to-an-ancestor");
        link(&base.join("home/src"), "to-src");
        link(&base.join("gone"), "dangling");

        let got = readable(std::slice::from_ref(&hidden));
        for p in [
            state.join("other"),
            state.join("notes"),
            state.join("to-src"),
            base.join("home/src"),
        ] {
            assert!(got.contains(&p), "{} not readable: {got:?}", p.display());
        }
        // the way down is walked, never granted whole; the hidden path and links into
        // it or above it are left out
        for p in [
            PathBuf::from("/"),
            base.clone(),
            state.clone(),
            hidden.clone(),
            state.join("to-key"),
            state.join("to-key-file"),
            state.join("to-an-ancestor"),
            state.join("dangling"),
        ] {
            assert!(!got.contains(&p), "{} granted: {got:?}", p.display());
        }
        assert!(got.iter().all(|p| !p.starts_with(&hidden)), "{got:?}");
        // outside the way down, whole subtrees: `/` has entries of its own
        assert!(got.iter().any(|p| p.parent() == Some(Path::new("/"))));
        assert_eq!(readable(&[]), [PathBuf::from("/")]);
    }
}
