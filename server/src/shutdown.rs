//! The signal that ends `serve`: Ctrl-C or SIGTERM.

use std::future::Future;

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
        tracing::info!("shutting down: finishing requests in flight");
    }
}
