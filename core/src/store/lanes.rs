//! Group commit: the writes of concurrent requests gathered into one transaction, so one
//! commit (one fsync) makes many of them durable. Webhook deliveries ([`BatchWriter`]) and
//! credit requests ([`super::CreditWriter`]) go through lanes.
//!
//! Each lane is a task that takes the first waiting write, everything else already queued
//! behind it (up to `max_batch`), applies them in one transaction and answers each caller.
//! When idle a write goes through alone, so batching adds no latency. Writes are routed to
//! lanes by their conflict key, so two lanes never contend for the same rows. If a batch
//! fails, its writes are retried one by one: each caller gets its own answer and one bad
//! write cannot fail its neighbours.

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::{Backend, Store, WriteOp, WriteResult};
use crate::error::StoreError;

/// Queued writes a lane holds before callers wait to enqueue (back-pressure).
const LANE_QUEUE: usize = 1024;

/// Writes that can be applied together in one transaction.
pub(super) trait Batch: Send + Sync + 'static {
    type Write: Send + Sync + 'static;
    type Done: Send + 'static;
    /// What the writes are, for the log.
    const WHAT: &'static str;

    /// Writes that may conflict share this key, so they share a lane.
    fn conflict_key(write: &Self::Write) -> &str;

    /// Applies `writes` in one transaction: one result each, in order, or the error that
    /// rolled them all back.
    fn apply<'a>(
        &'a self,
        writes: &'a [&'a Self::Write],
    ) -> impl Future<Output = Result<Vec<Self::Done>, StoreError>> + Send + 'a;
}

type Queued<B> = (
    <B as Batch>::Write,
    oneshot::Sender<Result<<B as Batch>::Done, StoreError>>,
);

pub(super) struct Lanes<B: Batch> {
    lanes: Vec<mpsc::Sender<Queued<B>>>,
}

impl<B: Batch> Clone for Lanes<B> {
    fn clone(&self) -> Self {
        Lanes {
            lanes: self.lanes.clone(),
        }
    }
}

impl<B: Batch> std::fmt::Debug for Lanes<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes")
            .field("what", &B::WHAT)
            .field("lanes", &self.lanes.len())
            .finish()
    }
}

impl<B: Batch> Lanes<B> {
    /// Starts the lanes on the current Tokio runtime: one on SQLite (it has one writer
    /// anyway), `postgres_lanes` on PostgreSQL. They stop when the last clone is dropped.
    pub(super) fn start(
        batch: B,
        backend: Backend,
        postgres_lanes: usize,
        max_batch: usize,
    ) -> Lanes<B> {
        let count = match backend {
            Backend::Sqlite => 1,
            Backend::Postgres => postgres_lanes.max(1),
        };
        let batch = Arc::new(batch);
        let lanes = (0..count)
            .map(|_| {
                let (sender, receiver) = mpsc::channel(LANE_QUEUE);
                tokio::spawn(run_lane(Arc::clone(&batch), receiver, max_batch.max(1)));
                sender
            })
            .collect();
        Lanes { lanes }
    }

    /// Makes `write` durable, together with whatever else is waiting in its lane.
    pub(super) async fn write(&self, write: B::Write) -> Result<B::Done, StoreError> {
        let mut hasher = DefaultHasher::new();
        B::conflict_key(&write).hash(&mut hasher);
        let lane = (hasher.finish() % self.lanes.len() as u64) as usize;
        let (reply, answer) = oneshot::channel();
        self.lanes[lane]
            .send((write, reply))
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        answer.await.map_err(|_| StoreError::WriterStopped)?
    }
}

async fn run_lane<B: Batch>(batch: Arc<B>, mut queue: mpsc::Receiver<Queued<B>>, max_batch: usize) {
    let mut waiting = Vec::with_capacity(max_batch);
    while queue.recv_many(&mut waiting, max_batch).await > 0 {
        let writes: Vec<&B::Write> = waiting.iter().map(|(write, _)| write).collect();
        let applied = batch.apply(&writes).await;
        drop(writes);
        match applied {
            Ok(results) => {
                for ((_, reply), result) in waiting.drain(..).zip(results) {
                    let _ = reply.send(Ok(result));
                }
            }
            Err(error) if waiting.len() == 1 => {
                if let Some((_, reply)) = waiting.pop() {
                    let _ = reply.send(Err(error));
                }
            }
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    writes = waiting.len(),
                    "a batch of {} failed; retrying them one by one",
                    B::WHAT
                );
                for (write, reply) in waiting.drain(..) {
                    let result = batch
                        .apply(&[&write])
                        .await
                        .and_then(|mut results| results.pop().ok_or(StoreError::WriterStopped));
                    let _ = reply.send(result);
                }
            }
        }
    }
}

/// The webhook's writes: claims and recorded deliveries.
struct Deliveries {
    store: Store,
}

impl Batch for Deliveries {
    type Write = WriteOp;
    type Done = WriteResult;
    const WHAT: &'static str = "webhook writes";

    fn conflict_key(write: &WriteOp) -> &str {
        write.conflict_key()
    }

    async fn apply<'a>(
        &'a self,
        writes: &'a [&'a WriteOp],
    ) -> Result<Vec<WriteResult>, StoreError> {
        let applied = self.store.claims().apply_writes(writes).await;
        self.store
            .write_health()
            .observe(&applied, crate::clock::now_ms());
        applied
    }
}

/// The webhook's group-committing writer.
#[derive(Debug, Clone)]
pub struct BatchWriter {
    lanes: Lanes<Deliveries>,
}

impl BatchWriter {
    /// Starts the lanes on the current Tokio runtime: one on SQLite, `postgres_lanes` on
    /// PostgreSQL, each committing up to `max_batch` writes at once.
    pub fn start(store: Store, postgres_lanes: usize, max_batch: usize) -> BatchWriter {
        let backend = store.backend();
        BatchWriter {
            lanes: Lanes::start(Deliveries { store }, backend, postgres_lanes, max_batch),
        }
    }

    /// Makes `op` durable, together with whatever else is waiting.
    pub async fn write(&self, op: WriteOp) -> Result<WriteResult, StoreError> {
        self.lanes.write(op).await
    }
}
