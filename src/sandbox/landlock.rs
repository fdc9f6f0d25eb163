//! Linux: the Landlock version query, the ruleset of a [`Policy`] (the `landlock`
//! crate, every right required: a ruleset the kernel cannot enforce in full is an
//! error, never a weaker sandbox), and dropping capabilities (the `caps` crate).

use std::ffi::{OsStr, OsString};
use std::path::Path;

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
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rule(PathBeneath::new(open("/")?, AccessFs::from_read(abi)))
        .map_err(err)?;
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

fn open(p: impl AsRef<Path>) -> Result<PathFd, String> {
    PathFd::new(p.as_ref()).map_err(|e| format!("{}: {e}", p.as_ref().display()))
}
