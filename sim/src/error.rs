//! The rehearsal tools' error: what stops a simulator, a demo or a benchmark.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Arguments or settings that do not fit together.
    #[error("{0}")]
    Config(String),
    /// A step of a rehearsal failed; the text names the step.
    #[error("{0}")]
    Failed(String),
    /// The Claimcheck the host was asked to start did not start or stopped with an error.
    #[error("claimcheck serve")]
    Serve(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("database {url}")]
    Store {
        /// The URL with its password hidden.
        url: String,
        #[source]
        source: claimcheck_core::StoreError,
    },
    #[error("seeding the synthetic history")]
    Seed(#[source] sqlx::Error),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the simulator's HTTP server failed")]
    Http(#[source] std::io::Error),
}
