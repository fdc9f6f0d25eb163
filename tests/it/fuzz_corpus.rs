//! Replays the fuzzers' inputs on the stable toolchain, through the same entry points
//! the cargo-fuzz targets call (`fanout::fuzzing`): the kept corpus
//! (`fuzz/corpus/<target>/`, minimized with `cargo fuzz cmin`) and every input a
//! fuzzer ever found crashing, hanging or over its memory limit
//! (`fuzz/regressions/<target>/`). No input may panic, hang or allocate without bound:
//! each runs on its own thread, must finish well within [`HANG`], and may not hold
//! more than [`MEMORY`] bytes at once (this test binary counts each thread's
//! allocations: the tests beside it in the binary do not count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fanout::fuzzing::{TARGETS, Target, target};

/// Longer than any input takes by orders of magnitude: reaching it is a hang.
const HANG: Duration = Duration::from_secs(60);
/// Most bytes one input may have allocated at once (the inputs are a few KiB).
const MEMORY: usize = 256 << 20;

/// The system allocator, counting the bytes each thread holds and their peak.
struct Counting;

thread_local! {
    // const-initialised, no destructor: reading them never allocates
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let n = isize::try_from(n).unwrap_or(isize::MAX);
    let _ = HELD.try_with(|h| {
        h.set(h.get().saturating_add(n));
        let _ = PEAK.try_with(|p| p.set(p.get().max(h.get())));
    });
}

fn shrank(n: usize) {
    let n = isize::try_from(n).unwrap_or(isize::MAX);
    let _ = HELD.try_with(|h| h.set(h.get().saturating_sub(n)));
}

// SAFETY: every call is passed to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `dir`, sorted (none when it does not exist).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && p.file_name().is_none_or(|n| n != "README.md"));
    v.sort();
    v
}

/// Run `input` through `t` on its own thread, waiting at most `hang`; `Err` says how
/// it went wrong.
fn replay(t: Target, input: Vec<u8>, hang: Duration) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(t.name.into())
        .spawn(move || {
            let before = HELD.with(Cell::get);
            PEAK.with(|p| p.set(before));
            let outcome = std::panic::catch_unwind(|| (t.run)(&input));
            let peak = PEAK.with(Cell::get).saturating_sub(before);
            let _ = tx.send(outcome.map(|()| peak).map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default()
            }));
        })
        .expect("a thread");
    let peak = match rx.recv_timeout(hang) {
        Ok(Ok(peak)) => usize::try_from(peak).unwrap_or(0),
        Ok(Err(panic)) => return Err(format!("panicked: {panic}")),
        Err(_) => return Err(format!("still running after {hang:?}: a hang")),
    };
    if peak > MEMORY {
        return Err(format!("held {peak} bytes at once (limit {MEMORY})"));
    }
    Ok(())
}

#[test]
fn every_kept_input_runs_cleanly() {
    let mut failures = Vec::new();
    let mut count = 0;
    for t in TARGETS {
        let corpus = inputs(&fuzz_dir().join("corpus").join(t.name));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{} is empty: seed it (see fuzz/README.md)",
            t.name
        );
        let regressions = inputs(&fuzz_dir().join("regressions").join(t.name));
        for path in corpus.iter().chain(&regressions) {
            let bytes = std::fs::read(path).expect("a corpus file");
            count += 1;
            if let Err(e) = replay(*t, bytes, HANG) {
                failures.push(format!("{}: {e}", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count > TARGETS.len());
}

#[test]
fn every_input_directory_names_a_target() {
    // A directory under a name no target has would be replayed by nothing.
    for kind in ["corpus", "regressions"] {
        let Ok(rd) = std::fs::read_dir(fuzz_dir().join(kind)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                assert!(
                    target(&name).is_some(),
                    "fuzz/{kind}/{name}: no such target"
                );
            }
        }
    }
    // And every target is a cargo-fuzz binary.
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    for t in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{}\"", t.name)),
            "fuzz/Cargo.toml has no [[bin]] {}",
            t.name
        );
        assert!(
            fuzz_dir()
                .join("fuzz_targets")
                .join(format!("{}.rs", t.name))
                .is_file()
        );
    }
}

#[test]
fn the_replay_catches_what_it_must() {
    // The replay can fail: a panic, a hang (here with a short stand-in limit) and an
    // allocation over the limit are each reported.
    let boom = Target {
        name: "boom",
        run: |_| panic!("boom"),
    };
    assert_eq!(replay(boom, vec![], HANG).unwrap_err(), "panicked: boom");
    let hang = Target {
        name: "hang",
        run: |_| loop {
            std::thread::sleep(Duration::from_secs(1));
        },
    };
    let e = replay(hang, vec![], Duration::from_millis(200)).unwrap_err();
    assert_eq!(e, "still running after 200ms: a hang");
    let hog = Target {
        name: "hog",
        run: |_| {
            // Reserved, never touched: counted without costing the machine memory.
            // Twice the limit, so what other tests' threads free meanwhile (the
            // counters are the process's) cannot hide it.
            let v: Vec<u8> = Vec::with_capacity(2 * MEMORY);
            std::hint::black_box(&v);
        },
    };
    assert!(replay(hog, vec![], HANG).unwrap_err().starts_with("held "));
    let fine = Target {
        name: "fine",
        run: |d| assert!(d.len() < 10),
    };
    assert_eq!(replay(fine, b"ok".to_vec(), HANG), Ok(()));
}
