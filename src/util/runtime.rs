//! Process-wide settings made once, at the very start of `main` while fanout has one
//! thread ([`init`]): how libgit2 reads objects, and how glibc's allocator keeps
//! memory; and [`release_memory`], called after each worker.
//!
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
//! - **One malloc arena** (glibc only; `M_ARENA_MAX` = 1 instead of eight per CPU),
//!   and free memory handed back to the kernel after each worker ([`release_memory`],
//!   `malloc_trim`). fanout's live heap stays about 1 MB whatever the number of tasks,
//!   but transient allocations of a megabyte or more (a harvest reading a worktree's
//!   whole index and trees through libgit2) made while the run keeps small results and
//!   events for later leave pages pinned that `malloc_trim` cannot return, and every
//!   extra arena holds such pages of its own.
//!   fanout's threads mostly wait on child processes and files, so they have little
//!   to contend for in one arena. Measured by `bench/memory.sh` (10 workers, 5,000
//!   files): peak RSS about 1–1.5 MB lower than with one arena per CPU at 10, 50 and
//!   200 tasks.
//!
//!   Harvests run in fanout's process, on a blocking thread of the run, at most one
//!   per CPU at a time ([`crate::run::executor::cpu_slots`]); the libgit2 handles
//!   each opens are dropped when it ends, and [`release_memory`] runs after each
//!   worker. Measured and not chosen: jemalloc and mimalloc (higher peaks at 10
//!   tasks), a thread of its own for each harvest and tamper check, a few long-lived
//!   threads for all of them. Turning glibc's per-thread caches off
//!   (`GLIBC_TUNABLES=glibc.malloc.tcache_count=0`, which only the environment a
//!   process starts with can do) halved the growth with the number of tasks.

/// Once, at the start of `main`, before any other thread exists: see the module docs.
/// (libgit2 is built without https: it starts no TLS library; fanout's pushes over
/// http(s) go through its own transport, in `publish`.)
pub fn init() {
    bound_allocator();
    git2::opts::strict_hash_verification(false);
}

/// One malloc arena for every thread (glibc's default is eight per CPU).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn bound_allocator() {
    // SAFETY: mallopt only changes allocator parameters; called before other threads.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1);
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
