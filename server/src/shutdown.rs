//! The signal that ends `serve`: Ctrl-C or SIGTERM. The first one stops gracefully (see
//! `Application::run_until`); a second one while that runs stops at once.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// From the first signal to the exit, at most this long: the grace period, then the requests
/// in flight and the workers' claims in hand.
pub const STOP_WITHIN: Duration = Duration::from_secs(30);

/// Whether the process is stopping, and since when (set once, at the first signal).
#[derive(Debug, Clone, Default)]
pub struct Stopping(Arc<OnceLock<Instant>>);

impl Stopping {
    pub fn set(&self) {
        let _ = self.0.set(Instant::now());
    }

    pub fn is_set(&self) -> bool {
        self.0.get().is_some()
    }

    /// When the stop must be over: [`STOP_WITHIN`] after the signal, less `margin`.
    pub fn deadline(&self, margin: Duration) -> tokio::time::Instant {
        let since = self.0.get().copied().unwrap_or_else(Instant::now);
        tokio::time::Instant::from_std(since + STOP_WITHIN.saturating_sub(margin))
    }
}

/// Completes on the first signal, after which a second one ends the process at once (exit
/// status 1: it did not finish what it had in hand).
pub fn first_of_two() -> impl Future<Output = ()> + Send + 'static {
    let first = signal();
    async move {
        first.await;
        let second = signal();
        tokio::spawn(async move {
            second.await;
            tracing::warn!("a second signal: stopping at once, requests in flight are dropped");
            std::process::exit(1);
        });
    }
}

/// Completes on the first Ctrl-C or SIGTERM. The handlers are installed when this is called,
/// not when the future is first polled: a signal that arrives in between (say, right after
/// the server announced itself) still ends the process gracefully.
pub fn signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let listeners = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        )
    };
    async move {
        #[cfg(unix)]
        match listeners {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => {},
                    _ = terminate.recv() => {},
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                tracing::error!(%error, "cannot listen for Ctrl-C or SIGTERM");
                std::future::pending::<()>().await;
            }
        }
        #[cfg(not(unix))]
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    }
}
