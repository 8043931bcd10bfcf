//! Group commit: the writes of concurrent deliveries gathered into one transaction, so one
//! commit (one fsync) makes many claims durable.
//!
//! Each lane is a task that takes the first waiting write, everything else already queued
//! behind it (up to `max_batch`), applies them in one transaction and answers each caller.
//! When idle a write goes through alone, so batching adds no latency. Writes are routed to
//! lanes by [`WriteOp::conflict_key`], so two lanes never contend for the same rows. If a
//! batch fails, its writes are retried one by one: each caller gets its own answer and one
//! bad write cannot fail its neighbours.

use std::hash::{DefaultHasher, Hash, Hasher};

use tokio::sync::{mpsc, oneshot};

use super::{Backend, Store, WriteOp, WriteResult};
use crate::error::StoreError;

type Reply = oneshot::Sender<Result<WriteResult, StoreError>>;

/// Queued writes a lane holds before callers wait to enqueue (back-pressure).
const LANE_QUEUE: usize = 1024;

#[derive(Debug, Clone)]
pub struct BatchWriter {
    lanes: Vec<mpsc::Sender<(WriteOp, Reply)>>,
}

impl BatchWriter {
    /// Starts the lanes on the current Tokio runtime: one on SQLite (it has one writer
    /// anyway), `postgres_lanes` on PostgreSQL. They stop when the last clone is dropped.
    pub fn start(store: Store, postgres_lanes: usize, max_batch: usize) -> BatchWriter {
        let count = match store.backend() {
            Backend::Sqlite => 1,
            Backend::Postgres => postgres_lanes.max(1),
        };
        let lanes = (0..count)
            .map(|_| {
                let (sender, receiver) = mpsc::channel(LANE_QUEUE);
                tokio::spawn(run_lane(store.clone(), receiver, max_batch.max(1)));
                sender
            })
            .collect();
        BatchWriter { lanes }
    }

    /// Makes `op` durable, together with whatever else is waiting.
    pub async fn write(&self, op: WriteOp) -> Result<WriteResult, StoreError> {
        let mut hasher = DefaultHasher::new();
        op.conflict_key().hash(&mut hasher);
        let lane = (hasher.finish() % self.lanes.len() as u64) as usize;
        let (reply, answer) = oneshot::channel();
        self.lanes[lane]
            .send((op, reply))
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

async fn run_lane(store: Store, mut queue: mpsc::Receiver<(WriteOp, Reply)>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    while queue.recv_many(&mut batch, max_batch).await > 0 {
        let ops: Vec<&WriteOp> = batch.iter().map(|(op, _)| op).collect();
        let applied = store.claims().apply_writes(&ops).await;
        store
            .write_health()
            .observe(&applied, crate::clock::now_ms());
        match applied {
            Ok(results) => {
                for ((_, reply), result) in batch.drain(..).zip(results) {
                    let _ = reply.send(Ok(result));
                }
            }
            Err(error) if batch.len() == 1 => {
                if let Some((_, reply)) = batch.pop() {
                    let _ = reply.send(Err(error));
                }
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    writes = batch.len(),
                    "a batch of webhook writes failed; retrying them one by one"
                );
                for (op, reply) in batch.drain(..) {
                    let result = store
                        .claims()
                        .apply_writes(&[&op])
                        .await
                        .and_then(|mut results| results.pop().ok_or(StoreError::WriterStopped));
                    store
                        .write_health()
                        .observe(&result, crate::clock::now_ms());
                    let _ = reply.send(result);
                }
            }
        }
    }
}
