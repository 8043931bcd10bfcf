//! Crash drills: a real `claimcheck serve` process killed with SIGKILL at a failpoint, then
//! restarted on the same database. Every paid order ends with exactly one unlock, and no claim
//! stays stuck beyond its lease.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;

use crate::helpers::{Backend, TestDb, WEBHOOK_SECRET, fixture};

/// A `claimcheck serve` child and the lines it logs.
pub(crate) struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub(crate) addr: String,
}

impl Server {
    pub(crate) fn start(db: &TestDb, failpoint: Option<&str>) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_claimcheck"));
        command
            .arg("serve")
            .env("DATABASE_URL", db.url())
            .env("CLAIMCHECK_BIND", "127.0.0.1:0")
            .env("STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .env("CLAIMCHECK_LEASE_SECS", "1")
            .env("RUST_LOG", "info")
            .env_remove("CLAIMCHECK_FAILPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(name) = failpoint {
            command.env("CLAIMCHECK_FAILPOINT", name);
        }
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            lines,
            addr: String::new(),
        };
        let listening = server.wait_for("serving the dashboard at");
        server.addr = listening
            .rsplit("http://")
            .next()
            .unwrap()
            .trim()
            .to_owned();
        server
    }

    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("the server never logged '{needle}'"),
            }
        }
    }

    fn kill(mut self) {
        let status = Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap();
    }

    async fn deliver(&self, name: &str) {
        self.deliver_body(fixture(name)).await;
    }

    async fn deliver_body(&self, body: Vec<u8>) {
        let header = SigningSecret::new(WEBHOOK_SECRET)
            .unwrap()
            .sign(now_ms() / 1000, &body);
        let response = reqwest::Client::new()
            .post(format!("http://{}/webhooks/stripe", self.addr))
            .header("stripe-signature", header)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_until(db: &TestDb, sql: &str, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.count(sql).await != expected {
        assert!(
            Instant::now() < deadline,
            "never reached: {sql} = {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn drill(backend: Backend, failpoint: &str) {
    let db = TestDb::create(backend).await;
    let mut doomed = Server::start(&db, Some(failpoint));
    doomed.deliver("checkout.session.completed.paid").await;
    doomed.wait_for(&format!("failpoint {failpoint} reached"));
    doomed.kill();
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_ledger").await,
        0,
        "uncommitted work survived"
    );

    let survivor = Server::start(&db, None);
    // The twin and a retry arrive while the claim is still stale.
    survivor
        .deliver("checkout.session.completed.paid.twin")
        .await;
    survivor.deliver("checkout.session.completed.paid").await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        1,
    )
    .await;
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'ord_pub_0001' AND kind = 'unlock'"
        )
        .await,
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
            .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_taking_the_lease_sqlite() {
    drill(Backend::Sqlite, "after-lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_taking_the_lease_postgres() {
    drill(Backend::Postgres, "after-lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_ledger_write_sqlite() {
    drill(Backend::Sqlite, "after-ledger").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_ledger_write_postgres() {
    drill(Backend::Postgres, "after-ledger").await;
}

/// Two `claimcheck serve` processes on one PostgreSQL database; every order's deliveries
/// (each event three times, plus a twin) are split across both, concurrently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_a_duplicate_storm_on_postgres() {
    const ORDERS: usize = 25;
    let db = TestDb::create(Backend::Postgres).await;
    let first = Server::start(&db, None);
    let second = Server::start(&db, None);
    let template = String::from_utf8(fixture("checkout.session.completed.paid")).unwrap();
    let event = |i: usize, event_id: &str| {
        template
            .replace("evt_pub0001paid", event_id)
            .replace(
                "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ",
                &format!("cs_storm{i}"),
            )
            .replace("ord_pub_0001", &format!("ord_storm{i}"))
            .replace("pi_pub00013Mxc9vLkdIwHu7ix", &format!("pi_storm{i}"))
            .into_bytes()
    };
    let mut deliveries = Vec::new();
    for i in 0..ORDERS {
        for copy in 0..4 {
            let event_id = if copy == 3 {
                format!("evt_twin{i}")
            } else {
                format!("evt_storm{i}")
            };
            let server = if (i + copy) % 2 == 0 { &first } else { &second };
            deliveries.push(server.deliver_body(event(i, &event_id)));
        }
    }
    futures::future::join_all(deliveries).await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        ORDERS as i64,
    )
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        ORDERS as i64
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        ORDERS as i64
    );
    assert_eq!(
        db.count("SELECT COUNT(DISTINCT order_id) FROM credit_ledger")
            .await,
        ORDERS as i64
    );
    // Every repeat and twin was recognised as a duplicate, whichever instance it reached.
    let duplicates = db
        .count(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE outcome IN ('duplicate_event', 'duplicate_action')",
        )
        .await;
    assert_eq!(duplicates, (ORDERS * 3) as i64);
}
