//! A full disk heals without a restart. The database lives on a small file system of its own
//! (a tmpfs; for PostgreSQL a tablespace on one) that deliveries fill up: deliveries are then
//! answered 503 (nothing is acknowledged that is not durable), `/readyz` says why, and once
//! space is freed deliveries are answered 200 again within seconds and every acknowledged
//! order is credited exactly once. Mounting needs root, as the CI machine has.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use claimcheck_core::alert::AlertCondition;
use claimcheck_core::alert_check::{AlertPolicy, AlertThresholds, check};
use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;
use serde_json::Value;

use crate::helpers::{TestDb, WEBHOOK_SECRET, paid_session, test_config};

/// A tmpfs of `megabytes` mounted on a fresh folder under /tmp, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(megabytes: u32, owner: Option<&str>) -> SmallDisk {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let at = PathBuf::from(format!(
            "/tmp/claimcheck-small-disk-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&at).unwrap();
        let mut options = format!("size={megabytes}m,mode=0755");
        if let Some(user) = owner {
            let id = |flag: &str| {
                let out = Command::new("id").args([flag, user]).output().unwrap();
                String::from_utf8(out.stdout).unwrap().trim().to_owned()
            };
            options = format!("{options},uid={},gid={},mode=0700", id("-u"), id("-g"));
        }
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(&at)
            .status()
            .unwrap();
        assert!(
            mounted.success(),
            "mounting a small tmpfs needs root (CI runs as root): mount -t tmpfs -o {options} tmpfs {}",
            at.display()
        );
        SmallDisk { at }
    }

    fn path(&self) -> &Path {
        &self.at
    }

    /// Writes a filler file until the file system is full.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.at.join("filler")).unwrap();
        let block = vec![0u8; 64 * 1024];
        while filler.write_all(&block).is_ok() {}
        let _ = filler.write_all(&block[..4096]);
        let _ = filler.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(self.at.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        let _ = std::fs::remove_dir(&self.at);
    }
}

/// Delivers order `n`'s payment, signed now; the answer's status (0: no answer).
async fn deliver(client: &reqwest::Client, url: &str, n: usize) -> u16 {
    let body = paid_session(
        &format!("evt_full_{n}"),
        &format!("cs_full_{n}"),
        &format!("ord_full_{n}"),
    );
    let signature = SigningSecret::new(WEBHOOK_SECRET)
        .unwrap()
        .sign(now_ms() / 1000, &body);
    client
        .post(url)
        .header("stripe-signature", signature)
        .body(body)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn heals(db: &TestDb, disk: &SmallDisk) {
    let mut config = test_config(db.url());
    config.workers = 2;
    let app = claimcheck_server::Application::build(config).await.unwrap();
    let store = app.store().clone();
    let addr = app.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/webhooks/stripe");
    let mut acknowledged = Vec::new();
    let mut n = 0;
    for _ in 0..20 {
        assert_eq!(deliver(&client, &url, n).await, 200);
        acknowledged.push(n);
        n += 1;
    }

    // The disk fills up under traffic: deliveries are refused once nothing more fits.
    disk.fill();
    let mut refused_in_a_row = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while refused_in_a_row < 10 {
        assert!(
            Instant::now() < deadline,
            "deliveries never found the disk full"
        );
        match deliver(&client, &url, n).await {
            200 => {
                acknowledged.push(n);
                refused_in_a_row = 0;
            }
            503 => refused_in_a_row += 1,
            other => panic!("delivery {n} answered {other}"),
        }
        n += 1;
    }
    let ready = client
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let reason: Value = ready.json().await.unwrap();
    assert!(
        reason["reason"].as_str().unwrap().contains("disk is full"),
        "{reason}"
    );
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("claimcheck_database_writable 0\n"),
        "{metrics}"
    );

    // Space comes back: within 10 s deliveries are answered 200 and every acknowledged claim
    // is fulfilled, without a restart.
    disk.free();
    let freed = Instant::now();
    loop {
        let status = deliver(&client, &url, n).await;
        if status == 200 {
            acknowledged.push(n);
            break;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "deliveries still answered {status} 10 s after space came back"
        );
        n += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let everything = acknowledged.len() as i64;
    loop {
        let credited = db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await;
        if credited == everything {
            break;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "{credited} of {everything} acknowledged orders credited 10 s after space came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for n in &acknowledged {
        assert_eq!(
            db.count(&format!(
                "SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'ord_full_{n}' AND kind = 'unlock'"
            ))
            .await,
            1,
            "ord_full_{n}"
        );
    }
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
            .await,
        0
    );
    // Ready again once no write was refused for a moment (a full disk on PostgreSQL takes
    // the writes that fit in a page it has while it refuses others).
    loop {
        let ready = client
            .get(format!("http://{addr}/readyz"))
            .send()
            .await
            .unwrap();
        if ready.status() == 200 {
            break;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "/readyz still answered {} 10 s after space came back",
            ready.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The operators are told: the alert opens once writes go through again.
    let policy = AlertPolicy {
        thresholds: AlertThresholds::default(),
        repeat: None,
        channels: Vec::new(),
        dashboard_url: "http://claimcheck.test".into(),
        wording: Arc::new(app::i18n::AlertWords::messages_in(
            claimcheck_core::language::Language::English,
        )),
    };
    let queued = check(&store, &policy, now_ms()).await.unwrap();
    assert!(
        queued
            .iter()
            .any(|q| q.condition == AlertCondition::StorageFull),
        "{queued:?}"
    );
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_heals_without_a_restart_sqlite() {
    let disk = SmallDisk::mount(6, None);
    let db = TestDb::Sqlite {
        url: format!("sqlite://{}/claimcheck.db", disk.path().display()),
        _dir: tempfile::tempdir().unwrap(),
    };
    heals(&db, &disk).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_heals_without_a_restart_postgres() {
    let disk = SmallDisk::mount(48, Some("postgres"));
    let space = format!(
        "claimcheck_small_{}",
        disk.path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .rsplit('-')
            .take(2)
            .collect::<Vec<_>>()
            .join("_")
    );
    let db = TestDb::create_in_tablespace(&space, disk.path()).await;
    heals(&db, &disk).await;
    let name = db.postgres_name().to_owned();
    drop(db);
    TestDb::drop_tablespace(&space, &name).await;
}
