//! The run's blocking work (worktree checkouts, port claims, file copies, harvests)
//! on tokio's blocking threads, counted while it is in flight. Once the executor is
//! done, the runtime is let go ([`let_go`]) as soon as no such work is in flight (it
//! waits for the last to end: nothing a worker started may still be running when the
//! run's last tamper check looks), without waiting for its threads to wind down (they
//! exit beside the run's last checks, as dropping the runtime would wait for).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Work in flight, and a wake-up for when none is left.
struct Counter {
    n: Mutex<usize>,
    none_left: Condvar,
}

impl Counter {
    const fn new() -> Counter {
        Counter {
            n: Mutex::new(0),
            none_left: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, usize> {
        self.n.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Block until no work is in flight.
    fn wait_for_none(&self) {
        let mut n = self.lock();
        while *n > 0 {
            n = self
                .none_left
                .wait(n)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The run's.
static RUN: Counter = Counter::new();

/// Counts one piece of work from its spawn until it ends (or is dropped unrun).
struct InFlight(&'static Counter);

impl InFlight {
    fn new(counter: &'static Counter) -> InFlight {
        *counter.lock() += 1;
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut n = self.0.lock();
        *n -= 1;
        if *n == 0 {
            self.0.none_left.notify_all();
        }
    }
}

/// `tokio::task::spawn_blocking(f)`, counted.
pub fn spawn<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    spawn_counted(&RUN, f)
}

fn spawn_counted<F, R>(counter: &'static Counter, f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let counted = InFlight::new(counter);
    tokio::task::spawn_blocking(move || {
        let _counted = counted;
        f()
    })
}

/// Let `runtime` go after its last `block_on`: see the module docs.
pub fn let_go(runtime: tokio::runtime::Runtime) {
    let_go_counted(&RUN, runtime);
}

fn let_go_counted(counter: &Counter, runtime: tokio::runtime::Runtime) {
    counter.wait_for_none();
    runtime.shutdown_background();
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    static TEST: Counter = Counter::new();

    fn count() -> usize {
        *TEST.lock()
    }

    #[test]
    fn work_counts_until_it_ends_or_is_dropped_unrun() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = runtime.spawn(async move {
            spawn_counted(&TEST, move || {
                let _ = wait.recv();
            })
            .await
            .unwrap();
            let _ = done_tx.send(());
        });
        while count() == 0 {
            std::thread::yield_now();
        }
        assert_eq!(count(), 1, "in flight while it runs");
        go.send(()).unwrap();
        done_rx.recv().unwrap();
        runtime.block_on(h).unwrap();
        assert_eq!(count(), 0, "ended");
        let unrun = InFlight::new(&TEST);
        assert_eq!(count(), 1);
        drop(unrun);
        assert_eq!(count(), 0, "dropped unrun");
        // With work in flight, letting go waits for it.
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&finished);
        let _running = runtime.spawn(async move {
            spawn_counted(&TEST, move || {
                let _ = started_tx.send(());
                let _ = wait.recv();
                flag.store(true, Ordering::SeqCst);
            })
            .await
        });
        started.recv().unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            go.send(()).unwrap();
        });
        let_go_counted(&TEST, runtime);
        assert!(
            finished.load(Ordering::SeqCst),
            "let go before the work ended"
        );
        release.join().unwrap();
    }
}
