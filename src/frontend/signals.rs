//! SIGINT and SIGTERM, set up the same way for every front end. A handler only sets a flag,
//! which what cannot await looks at (a producer waiting for a reader that stopped reading, the
//! writer's outbox); the front end awaits [`Signals::recv`] to act on it (abort the run, end
//! its loop).

use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a second signal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Second {
    /// The same as the first: the front end decides.
    Notifies,
    /// Ends the process at once, with 130 (SIGINT) or 143 (SIGTERM), whatever it is doing.
    Exits,
}

pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    received: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers; each signal sets `received`.
    pub fn install(received: Arc<AtomicBool>, second: Second) -> std::io::Result<Signals> {
        for (signal, exit_code) in [(SIGINT, 130), (SIGTERM, 143)] {
            if second == Second::Exits {
                // Registered first, so it sees the flag as the previous signal left it: the
                // second signal exits even while the runtime thread is stuck.
                signal_hook::flag::register_conditional_shutdown(
                    signal,
                    exit_code,
                    received.clone(),
                )?;
            }
            signal_hook::flag::register(signal, received.clone())?;
        }
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            received,
        })
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }

    /// Whether any signal has arrived yet.
    pub fn received(&self) -> bool {
        self.received.load(Ordering::Relaxed)
    }
}
