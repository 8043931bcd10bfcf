//! Bulk re-drives started from the dashboard run here, in the background of the instance that
//! took the request. Their state lives in the database, so every instance shows their
//! progress; at shutdown each stops between two claims and is left interrupted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use claimcheck_core::Store;
use claimcheck_core::observe::Observer;
use claimcheck_core::ops::Actor;
use claimcheck_core::ops::bulk_redrive::{self, Started};
use claimcheck_core::worker::WorkerConfig;
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Clone)]
pub(crate) struct BulkRuns {
    store: Store,
    worker: Arc<WorkerConfig>,
    observer: Arc<dyn Observer>,
    stop: Arc<watch::Sender<bool>>,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl BulkRuns {
    pub(crate) fn new(store: Store, worker: WorkerConfig, observer: Arc<dyn Observer>) -> BulkRuns {
        BulkRuns {
            store,
            worker: Arc::new(worker),
            observer,
            stop: Arc::new(watch::channel(false).0),
            tasks: Arc::new(Mutex::new(JoinSet::new())),
        }
    }

    /// Runs `started` in the background on behalf of `actor`.
    pub(crate) fn spawn(&self, started: Started, actor: Actor) {
        let store = self.store.clone();
        let worker = Arc::clone(&self.worker);
        let observer = Arc::clone(&self.observer);
        let stopped = self.stop.subscribe();
        let task = async move {
            match bulk_redrive::run(&store, &worker, observer, &started, &actor, stopped).await {
                Ok(batch) => {
                    tracing::debug!(batch_id = %batch.batch_id, state = %batch.state, "bulk re-drive returned")
                }
                Err(error) => tracing::error!(
                    error = &error as &dyn std::error::Error,
                    batch_id = %started.batch_id,
                    "bulk re-drive stopped; its heartbeat lapses and it shows as interrupted"
                ),
            }
        };
        if let Ok(mut tasks) = self.tasks.lock() {
            // Reap the batches that ended, so the set does not grow with every batch.
            while tasks.try_join_next().is_some() {}
            tasks.spawn(task);
        }
    }

    /// Asks every batch to stop before its next claim and waits for them (at most `grace`).
    pub(crate) async fn stop(&self, grace: Duration) {
        let _ = self.stop.send(true);
        let mut tasks = match self.tasks.lock() {
            Ok(mut tasks) => std::mem::take(&mut *tasks),
            Err(_) => return,
        };
        let drained =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                "bulk re-drives still running at shutdown were abandoned; they show as interrupted"
            );
        }
    }
}
