//! The listener: accepts connections and serves HTTP/1.1 on each, with the limits that keep
//! one client from holding the server (`axum::serve` has none of them):
//!
//! - a request's headers must arrive within `header_timeout` of the connection opening or of
//!   the previous answer, so a client that sends a header line every few seconds, or opens a
//!   connection and says nothing, is closed;
//! - at most `max_connections` are open at once, fewer if the open-file limit is lower (so
//!   `accept` never runs out of descriptors); at the limit the connection that has been idle
//!   (no request in flight) the longest is closed to make room, and the new one waits until
//!   that connection's descriptor is actually given back; if every one is busy the new one is
//!   refused, each with a log line;
//! - on shutdown, no new connection is taken, idle ones are closed, and requests in flight
//!   finish.
//!
//! HTTP/2 is off (nothing here needs it, and its own limits would be another set to keep).
//! Body deadlines and concurrency limits are per route group (`routes.rs`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tower::ServiceExt;

use crate::config::HttpLimits;

/// Descriptors kept for everything but client connections: the database pool, the SQLite
/// files, outgoing calls to Stripe and the alert channels, logs.
const RESERVED_DESCRIPTORS: u64 = 128;

/// The same warning at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How long a new connection waits for an evicted one to close before it is refused.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `stop` says so, then lets requests in flight finish.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: &HttpLimits,
    mut stop: watch::Receiver<bool>,
) {
    let connections = Arc::new(Connections::new(connection_limit(limits.max_connections)));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let http = Arc::new(http);
    let mut accept_warning = Warning::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stopped| *stopped) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors (EMFILE, ENFILE) or a connection that died in the
                // backlog: make room where possible and carry on.
                if accept_warning.due() {
                    tracing::warn!(%error, open = connections.open(), "cannot accept a connection; closing an idle one to make room");
                }
                connections.close_longest_idle();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Some(ticket) = connections.admit().await else {
            // Every connection is in the middle of a request: this one is refused (closed).
            continue;
        };
        if let Err(error) = tcp.set_nodelay(true) {
            // Pages stream in several small writes: without it each waits for the client's
            // delayed ACK (about 40 ms).
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        tokio::spawn(serve_connection(
            tcp,
            peer,
            router.clone(),
            Arc::clone(&http),
            ticket,
            Arc::clone(&connections),
            stop.clone(),
        ));
    }
    drop(listener);
    connections.drained().await;
}

/// One connection, until the client or the server closes it (or the limit evicts it while
/// idle).
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    http: Arc<http1::Builder>,
    ticket: Ticket,
    connections: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
) {
    let busy = Arc::clone(&ticket.busy);
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        let in_flight = InFlight::enter(&busy);
        request.extensions_mut().insert(ConnectInfo(peer));
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await;
            // The connection counts as busy until the answer's last byte is out.
            response.map(|response| response.map(|body| Body::new(Answer { body, in_flight })))
        }
    });
    let connection = http.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(connection);
    let mut stopping = *stop.borrow();
    if stopping {
        connection.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    // Timeouts, resets and half-sent requests: the client's doing.
                    tracing::debug!(%error, %peer, "connection ended with an error");
                }
                break;
            }
            _ = ticket.evicted.notified() => break,
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
    connections.leave(ticket.id);
}

/// At most `configured`, and fewer if the process may not open that many descriptors.
fn connection_limit(configured: usize) -> usize {
    let Some(files) = open_file_limit() else {
        return configured;
    };
    let room = if files > 2 * RESERVED_DESCRIPTORS {
        files - RESERVED_DESCRIPTORS
    } else {
        files / 2
    };
    let limit = usize::try_from(room).unwrap_or(usize::MAX).max(1);
    if limit < configured {
        tracing::info!(
            open_files = files,
            "at most {limit} connections at once: the open-file limit allows no more \
             (CLAIMCHECK_MAX_CONNECTIONS is {configured})"
        );
        limit
    } else {
        configured
    }
}

/// The soft limit on open files (Linux: `/proc/self/limits`), if it can be read.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The open connections, oldest first, and whether each has a request in flight.
struct Connections {
    max: usize,
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Slot>>,
    left: Notify,
    full: Mutex<Warning>,
}

struct Slot {
    busy: Arc<AtomicUsize>,
    evicted: Arc<Notify>,
    /// Told to close, not closed yet: it still holds its descriptor, so it still counts.
    closing: bool,
}

/// What became of a connection asking for a place.
enum Admission {
    Admitted(Ticket),
    /// At the limit, an idle connection is closing to make room: ask again once it has.
    MakingRoom,
    /// At the limit and every connection is busy.
    Refused,
}

/// A connection's place among the open ones.
struct Ticket {
    id: u64,
    busy: Arc<AtomicUsize>,
    evicted: Arc<Notify>,
}

impl Connections {
    fn new(max: usize) -> Connections {
        Connections {
            max,
            next_id: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
            left: Notify::new(),
            full: Mutex::new(Warning::default()),
        }
    }

    fn open(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Slot>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new connection: free, or made by closing the connection idle longest
    /// and waiting until it has given its descriptor back; `None` if every open one is busy
    /// (or the one closing does not close within [`EVICTION_WAIT`]).
    async fn admit(&self) -> Option<Ticket> {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            match self.try_admit() {
                Admission::Admitted(ticket) => return Some(ticket),
                Admission::Refused => return None,
                Admission::MakingRoom => {
                    tokio::time::timeout(EVICTION_WAIT, left).await.ok()?;
                }
            }
        }
    }

    fn try_admit(&self) -> Admission {
        let mut open = self.lock();
        if open.len() >= self.max {
            // A connection already closing makes the room: one eviction per new connection.
            if open.values().any(|slot| slot.closing) {
                return Admission::MakingRoom;
            }
            let made_room = Self::evict_longest_idle(&mut open);
            let warn = self.full.lock().unwrap_or_else(|e| e.into_inner()).due();
            if warn {
                if made_room {
                    tracing::warn!(
                        max = self.max,
                        "connection limit reached: closing the longest idle connection for each new one (CLAIMCHECK_MAX_CONNECTIONS)"
                    );
                } else {
                    tracing::warn!(
                        max = self.max,
                        "connection limit reached and every connection is busy: new connections are refused (CLAIMCHECK_MAX_CONNECTIONS)"
                    );
                }
            }
            return if made_room {
                Admission::MakingRoom
            } else {
                Admission::Refused
            };
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Slot {
            busy: Arc::new(AtomicUsize::new(0)),
            evicted: Arc::new(Notify::new()),
            closing: false,
        };
        let ticket = Ticket {
            id,
            busy: Arc::clone(&slot.busy),
            evicted: Arc::clone(&slot.evicted),
        };
        open.insert(id, slot);
        Admission::Admitted(ticket)
    }

    fn close_longest_idle(&self) {
        Self::evict_longest_idle(&mut self.lock());
    }

    /// Tells the connection idle longest to close; it keeps its place until it has (`leave`).
    fn evict_longest_idle(open: &mut BTreeMap<u64, Slot>) -> bool {
        let idle = open
            .values_mut()
            .find(|slot| !slot.closing && slot.busy.load(Ordering::Acquire) == 0);
        match idle {
            Some(slot) => {
                slot.closing = true;
                slot.evicted.notify_one();
                true
            }
            None => false,
        }
    }

    fn leave(&self, id: u64) {
        self.lock().remove(&id);
        self.left.notify_waiters();
    }

    /// Completes once every connection has ended.
    async fn drained(&self) {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            if self.lock().is_empty() {
                return;
            }
            left.await;
        }
    }
}

/// A request in flight on its connection (until its answer is sent).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(busy: &Arc<AtomicUsize>) -> InFlight {
        busy.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(busy))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, holding its request in flight until it is sent (or dropped).
struct Answer {
    body: Body,
    in_flight: InFlight,
}

impl http_body::Body for Answer {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let _ = &self.in_flight;
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A warning that is logged at most every [`WARN_EVERY`].
#[derive(Default)]
struct Warning(Option<Instant>);

impl Warning {
    fn due(&mut self) -> bool {
        let due = self.0.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if due {
            self.0 = Some(Instant::now());
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_limit_the_longest_idle_connection_makes_room_once_closed_and_busy_ones_stay() {
        let connections = Arc::new(Connections::new(2));
        let first = connections.admit().await.unwrap();
        let second = connections.admit().await.unwrap();
        let _busy = InFlight::enter(&first.busy);
        // The first is busy: the second (idle) is told to close, and the third waits until
        // it has, so the open connections never exceed the limit.
        let third = tokio::spawn({
            let connections = Arc::clone(&connections);
            async move { connections.admit().await }
        });
        second.evicted.notified().await;
        assert_eq!(connections.open(), 2);
        assert!(!third.is_finished());
        connections.leave(second.id);
        let third = third.await.unwrap().unwrap();
        assert_eq!(connections.open(), 2);
        let _also_busy = InFlight::enter(&third.busy);
        // Both busy now: a fourth is refused.
        assert!(connections.admit().await.is_none());
        connections.leave(first.id);
        assert!(connections.admit().await.is_some());
    }

    #[test]
    fn the_open_file_limit_is_read() {
        let limit = open_file_limit();
        if cfg!(target_os = "linux") {
            assert!(limit.is_some_and(|n| n > 0), "{limit:?}");
        }
        assert!(connection_limit(1_000_000) < 1_000_000 || limit.is_none());
        assert_eq!(connection_limit(3), 3);
    }
}
