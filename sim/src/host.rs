//! How a rehearsal runs Claimcheck in this process without depending on the server crate:
//! the binary hands in a [`Host`] that starts `claimcheck serve` from its own command line,
//! so a rehearsal configures Claimcheck exactly as an operator would.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use tokio::sync::oneshot;

use crate::SimError;

/// What [`Host::serve`] returns: the started instance, or why it did not start.
pub type ServeFuture = Pin<Box<dyn Future<Output = Result<Instance, SimError>> + Send>>;

/// The binary that carries the rehearsals.
pub trait Host: Send + Sync {
    /// Starts Claimcheck in this process as `claimcheck serve ARGS…` would (flags only: the
    /// rehearsal passes every setting it relies on).
    fn serve(&self, args: Vec<String>) -> ServeFuture;

    /// Completes when the process is asked to stop (Ctrl-C, SIGTERM). Handlers are installed
    /// when this is called.
    fn stop_signal(&self) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// A Claimcheck serving in this process until [`Instance::stop`].
pub struct Instance {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), SimError>>,
}

impl Instance {
    /// Runs `serve` (which must return once `stopped` completes) on its own task.
    pub fn spawn<F>(addr: SocketAddr, serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> Self
    where
        F: Future<Output = Result<(), SimError>> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(stopped));
        Instance { addr, stop, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Asks the instance to finish its requests in flight and waits until it has.
    pub async fn stop(self) -> Result<(), SimError> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| SimError::Failed(format!("the server task: {e}")))?
    }
}
