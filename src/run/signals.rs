//! The signal dispatcher: it alone listens for SIGINT, SIGTERM and SIGHUP while a run
//! is going, and turns them into a [`StopLevel`]: the first asks every worker to stop
//! gracefully (and no new worker to start), the second kills them.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::event::{Event, StopLevel};

/// Owns the stop channel; dropping it stops listening.
#[derive(Debug)]
pub struct Dispatcher {
    tx: watch::Sender<StopLevel>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Dispatcher {
    /// Start listening (must run inside a tokio runtime). Events go to `events`.
    pub fn install(events: mpsc::UnboundedSender<Event>) -> std::io::Result<Dispatcher> {
        let (tx, _) = watch::channel(StopLevel::Run);
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        let sender = tx.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
                let next = match *sender.borrow() {
                    StopLevel::Run => StopLevel::Graceful,
                    _ => StopLevel::Kill,
                };
                sender.send_replace(next);
                let _ = events.send(Event::Stopping(next));
            }
        });
        Ok(Dispatcher {
            tx,
            task: Some(task),
        })
    }

    /// A receiver for workers.
    pub fn subscribe(&self) -> watch::Receiver<StopLevel> {
        self.tx.subscribe()
    }

    /// Whether a stop was requested.
    pub fn stopped(&self) -> bool {
        *self.tx.borrow() != StopLevel::Run
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}
