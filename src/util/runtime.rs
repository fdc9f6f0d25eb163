//! Process-wide settings made once, at the very start of `main` while fanout has one
//! thread ([`init`]): how libgit2 starts, how it reads objects, and how glibc's
//! allocator keeps memory. Also what undoes the first of them when it matters:
//! [`load_ca_certificates`] before an https push, and [`release_memory`] after each
//! worker.
//!
//! - **No CA bundle at start.** libgit2's global initialisation sets up OpenSSL and
//!   loads the system's CA bundle (`SSL_CTX_set_default_verify_paths`): about 20 ms of
//!   CPU on every command, most of `fanout plan`, for a network call that most
//!   commands never make. [`init`] lets libgit2 load an empty file instead
//!   (`SSL_CERT_FILE=/dev/null` for the length of its initialisation, then fanout's
//!   environment as it was), and [`load_ca_certificates`] loads the certificates
//!   OpenSSL would have found (the user's `SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
//!   system's) just before libgit2 opens an https connection. The octocrab client
//!   (rustls) is only built by the commands that publish.
//! - **No re-hashing of objects read** (`strict_hash_verification(false)`): libgit2
//!   otherwise computes the SHA-1 of every object it inflates, a fifth of a big
//!   checkout's CPU (git itself does not either when it checks out). The objects come
//!   from the user's own repository; packs and loose objects are still zlib streams
//!   whose Adler-32 checksum zlib verifies as it inflates, so a flipped bit is still
//!   an error: what is given up is the detection of an object whose valid content
//!   does not hash to its name (a forged or swapped object file). Where fanout
//!   takes objects an agent wrote into the user's store, it must compute their names
//!   from their content itself (writing them through the object database does), never
//!   rely on this check; pushed objects are named again by the receiving server.
//! - **A bounded allocator** (glibc only): one malloc arena per CPU at most
//!   (`M_ARENA_MAX`) instead of eight per CPU, and free memory handed back to the
//!   kernel after each worker ([`release_memory`], `malloc_trim`). Measured in
//!   `bench/memory.sh`: without them, fanout's peak RSS grows with the number of tasks
//!   at a fixed concurrency (memory freed in thread arenas is kept, not reused).

use std::sync::Once;

/// Once, at the start of `main`, before any other thread exists (it changes the
/// process environment for a moment): see the module docs.
pub fn init() {
    bound_allocator();
    // The first libgit2 call initialises it.
    without_ca_bundle(|| git2::opts::strict_hash_verification(false));
}

/// Run `first_libgit2_call` with OpenSSL's default CA file pointing at an empty file
/// (see the module docs), then restore the environment.
#[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
fn without_ca_bundle(first_libgit2_call: impl FnOnce()) {
    const VARS: [&str; 2] = ["SSL_CERT_FILE", "SSL_CERT_DIR"];
    let saved: Vec<Option<std::ffi::OsString>> = VARS.iter().map(std::env::var_os).collect();
    // SAFETY: called from `main` before any other thread is started (the contract of
    // `init`); nothing reads the environment concurrently.
    unsafe { std::env::set_var("SSL_CERT_FILE", "/dev/null") };
    // OpenSSL's default verify paths now name an empty file (the certificate
    // directory is only looked into on use).
    first_libgit2_call();
    for (var, value) in VARS.iter().zip(saved) {
        // SAFETY: as above. git2's initialisation may have set both (openssl-probe).
        unsafe {
            match value {
                Some(v) => std::env::set_var(var, v),
                None => std::env::remove_var(var),
            }
        }
    }
}

#[cfg(not(all(unix, not(any(target_os = "macos", target_os = "ios")))))]
fn without_ca_bundle(first_libgit2_call: impl FnOnce()) {
    first_libgit2_call();
}

/// Load the certificates libgit2's https connections verify servers with (the user's
/// `SSL_CERT_FILE`/`SSL_CERT_DIR`, else the system's as `openssl-probe` finds them),
/// once; call it before libgit2 opens an https connection.
pub fn load_ca_certificates() {
    static LOADED: Once = Once::new();
    LOADED.call_once(|| {
        #[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
        {
            let found = openssl_probe::probe();
            // SAFETY: libgit2's option calls are not synchronised with connections in
            // flight; this runs once, before fanout's first https connection.
            unsafe {
                if let Some(file) = found.cert_file {
                    let _ = git2::opts::set_ssl_cert_file(file);
                }
                if let Some(dir) = found.cert_dir {
                    let _ = git2::opts::set_ssl_cert_dir(dir);
                }
            }
        }
    });
}

/// At most one malloc arena per CPU (glibc's default is eight per CPU).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn bound_allocator() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arenas = i32::try_from(cpus).unwrap_or(i32::MAX);
    // SAFETY: mallopt only changes allocator parameters; called before other threads.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn bound_allocator() {}

/// Hand memory the allocator holds free back to the kernel (glibc's `malloc_trim`):
/// call it when a worker is done, so what its checkout and harvest used does not stay
/// counted against the run.
pub fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is thread-safe.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}
