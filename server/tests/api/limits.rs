//! What one client may hold of the server: connections that send their headers slowly or
//! nothing at all, bodies that stall, sign-ins by the dozen, scrapers by the dozen. Each limit
//! is tested against the real server, most against a `claimcheck serve` process so that its
//! descriptors and memory are its own.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{Backend, PASSWORD, TestDb, fixture, spawn_app_with};
use crate::process::{Launch, Server};

/// Reads until the server closes the connection (EOF or reset), for at most `within`;
/// returns when it closed, or `None` if it never did.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_all)
        .await
        .ok()
        .map(|()| started.elapsed())
}

/// A connection that sends a header line now and then and never ends its headers, and one
/// that asks once and then says nothing more: both are closed at the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_closed_at_the_header_timeout() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.limits.header_timeout = Duration::from_secs(1);
    })
    .await;
    let mut slow = TcpStream::connect(app.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: claimcheck\r\n")
        .await
        .unwrap();
    let (mut read, mut write) = slow.into_split();
    let dribble = tokio::spawn(async move {
        for i in 0..40 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if write
                .write_all(format!("X-Slow-{i}: yes\r\n").as_bytes())
                .await
                .is_err()
            {
                return i;
            }
        }
        40
    });
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(6), async {
        loop {
            match read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "a connection dribbling headers stayed open");
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(900),
        "closed early: {after:?}"
    );
    assert!(dribble.await.unwrap() < 40);

    // One request, then silence: the keep-alive connection is closed at the same timeout.
    let mut idle = TcpStream::connect(app.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: claimcheck\r\n\r\n")
        .await
        .unwrap();
    let n = idle.read(&mut buffer).await.unwrap();
    assert!(
        String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buffer[..n])
    );
    let after = closed_within(&mut idle, Duration::from_secs(6)).await;
    assert!(
        after.is_some_and(|t| t >= Duration::from_millis(800)),
        "the idle connection: {after:?}"
    );
    // The server itself is fine.
    assert_eq!(app.get_healthz().await.status(), 200);
}

/// 300 connections that send a header line every two seconds against a server allowed only
/// 256 open files: it never runs out of descriptors, closes the longest idle connections to
/// make room, says so in its log, and a delivery from Stripe is answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_is_answered_while_300_slow_connections_are_held() {
    let db = TestDb::create(Backend::Sqlite).await;
    let mut server = Server::launch(
        &db,
        Launch {
            under: vec!["prlimit", "--nofile=256:256"],
            ..Launch::default()
        },
    );
    let addr = server.addr.clone();
    let mut held = Vec::new();
    for _ in 0..300 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: claimcheck\r\n")
            .await
            .unwrap();
        held.push(stream);
    }
    let dribble = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            for stream in &mut held {
                let _ = stream.write_all(b"X-Slow: yes\r\n").await;
            }
        }
    });
    let answered = tokio::time::timeout(
        Duration::from_secs(5),
        server.deliver_body(fixture("checkout.session.completed.paid")),
    )
    .await;
    assert!(answered.is_ok(), "the delivery was not answered within 5 s");
    assert_eq!(
        reqwest::get(format!("http://{addr}/healthz"))
            .await
            .unwrap()
            .status(),
        200
    );
    dribble.abort();
    let log = server.logged(Duration::from_millis(300));
    assert!(
        log.iter().any(|l| l.contains("connection limit reached")),
        "{log:#?}"
    );
    assert!(
        !log.iter().any(|l| l.contains("Too many open files")),
        "{log:#?}"
    );
}

/// 150 senders stall 500 bytes before the end of a 1 MiB webhook body. Those beyond the
/// webhook's concurrency limit are answered 503 at once; the rest are cut off at the body
/// deadline; the memory their bodies took is given back, and deliveries go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_webhook_bodies_are_dropped_at_the_deadline_and_their_memory_returns() {
    const BODY: usize = 1024 * 1024;
    let db = TestDb::create(Backend::Sqlite).await;
    let server = Server::launch(
        &db,
        Launch {
            env: vec![("CLAIMCHECK_BODY_TIMEOUT", "3s".into())],
            ..Launch::default()
        },
    );
    server
        .deliver_body(fixture("checkout.session.completed.paid"))
        .await;
    let (before, _) = server.memory_kib();
    let addr = server.addr.clone();
    let started = Instant::now();
    let senders: Vec<_> = (0..150)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut stream = TcpStream::connect(&addr).await.unwrap();
                let head = format!(
                    "POST /webhooks/stripe HTTP/1.1\r\nHost: claimcheck\r\n\
                     Content-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\n\
                     Content-Length: {BODY}\r\n\r\n"
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&vec![b' '; BODY - 500]).await;
                let mut answer = Vec::new();
                let _ =
                    tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut answer))
                        .await;
                String::from_utf8_lossy(&answer)
                    .split(' ')
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for sender in senders {
        statuses.push(sender.await.unwrap());
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(12),
        "the senders were held {took:?}"
    );
    let cut_off = statuses.iter().filter(|s| *s == "408").count();
    let turned_away = statuses.iter().filter(|s| *s == "503").count();
    assert!(cut_off > 0 && cut_off <= 64, "{statuses:?}");
    assert!(turned_away > 0, "{statuses:?}");
    // The bodies' memory is given back (within 20 MB of where it was).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = server.memory_kib().0;
    while after > before + 20 * 1024 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = server.memory_kib().0;
    }
    assert!(
        after <= before + 20 * 1024,
        "resident memory {before} KiB before, {after} KiB after"
    );
    // And Stripe's deliveries are taken as before.
    server
        .deliver_body_retrying(fixture("checkout.session.completed.free"))
        .await;
}

/// A client on 127.0.0.`n` (Linux answers every 127/8 address on loopback).
fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// 64 wrong passwords at once, from 64 addresses (no throttle stops them): the password
/// hashes queue, one per core, and the server's memory stays within 150 MB; a real sign-in
/// gets through while 64 sign-in forms are held half-sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_by_the_dozen_neither_exhaust_memory_nor_hold_a_real_one_back() {
    let db = TestDb::create(Backend::Sqlite).await;
    let server = Server::launch(&db, Launch::default());
    db.add_operator("admin").await;
    let url = format!("http://{}/login", server.addr);
    let guesses: Vec<_> = (1..=64u8)
        .map(|n| {
            let url = url.clone();
            tokio::spawn(async move {
                client_from(n)
                    .post(url)
                    .form(&[("username", "admin"), ("password", "not the password")])
                    .send()
                    .await
                    .unwrap()
                    .status()
            })
        })
        .collect();
    for guess in guesses {
        assert_eq!(guess.await.unwrap(), 303);
    }
    let (_, peak) = server.memory_kib();
    assert!(peak <= 150 * 1024, "peak resident memory {peak} KiB");

    // 64 sign-in forms that stop halfway, then a real sign-in.
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut stream = TcpStream::connect(&server.addr).await.unwrap();
        stream
            .write_all(
                b"POST /login HTTP/1.1\r\nHost: claimcheck\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\n\
                  username=adm",
            )
            .await
            .unwrap();
        held.push(stream);
    }
    let started = Instant::now();
    let signed_in = client_from(99)
        .post(&url)
        .form(&[("username", "admin"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.headers()["location"], "/");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "a real sign-in waited {took:?} behind half-sent forms"
    );
    drop(held);
}

/// `/metrics`: sixteen scrapers at once cost one read of the database; a token keeps
/// strangers out; a listener of its own takes it off the main one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_read_the_database_once_per_interval_and_can_be_closed_to_strangers() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.metrics.database_every = Duration::from_secs(60);
    })
    .await;
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    let scrapes: Vec<_> = (0..16)
        .map(|_| {
            let client = app.client.clone();
            let url = app.url("/metrics");
            tokio::spawn(async move { client.get(url).send().await.unwrap().text().await.unwrap() })
        })
        .collect();
    for scrape in scrapes {
        let text = scrape.await.unwrap();
        assert!(
            text.contains("claimcheck_claims{state=\"pending\"} 1"),
            "{text}"
        );
    }
    let text = app.get_metrics().await;
    assert!(
        text.contains("claimcheck_metrics_database_reads_total 1\n"),
        "{text}"
    );
    assert!(text.contains("claimcheck_database_writable 1\n"), "{text}");

    let guarded = spawn_app_with(Backend::Sqlite, |config| {
        config.metrics.token = Some("a-long-metrics-token-0123".parse().unwrap());
    })
    .await;
    assert_eq!(guarded.get("/metrics").await.status(), 401);
    let wrong = guarded
        .client
        .get(guarded.url("/metrics"))
        .bearer_auth("a-long-metrics-token-0124")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = guarded
        .client
        .get(guarded.url("/metrics"))
        .bearer_auth("a-long-metrics-token-0123")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert!(
        right
            .text()
            .await
            .unwrap()
            .contains("claimcheck_webhook_deliveries_total")
    );

    let db = TestDb::create(Backend::Sqlite).await;
    let mut config = crate::helpers::test_config(db.url());
    config.metrics.bind = Some("127.0.0.1:0".parse().unwrap());
    let apart = claimcheck_server::Application::build(config).await.unwrap();
    let (main, metrics) = (apart.local_addr(), apart.metrics_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(apart.run_until(async {
        let _ = stopped.await;
    }));
    let on_main = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("http://{main}/metrics"))
        .send()
        .await
        .unwrap();
    assert_ne!(on_main.status(), 200);
    assert!(!on_main.text().await.unwrap().contains("claimcheck_"));
    let on_its_own = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap();
    assert_eq!(on_its_own.status(), 200);
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}
