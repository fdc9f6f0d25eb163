//! The run's blocking work (worktree checkouts, port claims, file copies, harvests)
//! on tokio's blocking threads, counted while it is in flight. Once the executor is
//! done, the runtime is let go ([`let_go`]): with no such work in flight, without
//! waiting for its threads to wind down (they exit beside the run's last checks);
//! else dropped, which waits for that work — nothing a worker started may still be
//! running when the run's last tamper check looks.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Work in flight.
struct Counter(AtomicUsize);

/// The run's.
static RUN: Counter = Counter(AtomicUsize::new(0));

/// Counts one piece of work from its spawn until it ends (or is dropped unrun).
struct InFlight(&'static Counter);

impl InFlight {
    fn new(counter: &'static Counter) -> InFlight {
        counter.0.fetch_add(1, Ordering::SeqCst);
        InFlight(counter)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
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
    if counter.0.load(Ordering::SeqCst) == 0 {
        runtime.shutdown_background();
    } else {
        drop(runtime);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST: Counter = Counter(AtomicUsize::new(0));

    fn count() -> usize {
        TEST.0.load(Ordering::SeqCst)
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
