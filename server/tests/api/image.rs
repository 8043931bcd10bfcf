//! The container image as `./scripts/package --unpack DIR` left it (`CLAIMCHECK_IMAGE_DIR`):
//! containers cannot run on the build machines, so its binary is started from the image's own
//! file system (`chroot`, as the user the image names) with the image's environment, as a
//! container runtime would. Needs root; `./scripts/test` runs these after packaging.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;
use serde_json::Value;

use crate::helpers::{Backend, TestDb, WEBHOOK_SECRET, paid_session};

/// What `scripts/package --unpack` wrote: `rootfs/` and `config.json`.
struct Image {
    dir: PathBuf,
    config: Value,
}

impl Image {
    fn unpacked() -> Image {
        let dir = PathBuf::from(std::env::var("CLAIMCHECK_IMAGE_DIR").expect(
            "CLAIMCHECK_IMAGE_DIR names the folder `./scripts/package --unpack DIR` wrote",
        ));
        let config = std::fs::read(dir.join("config.json")).unwrap();
        Image {
            config: serde_json::from_slice(&config).unwrap(),
            dir,
        }
    }

    fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    fn setting(&self, key: &str) -> &Value {
        &self.config["config"][key]
    }

    /// The image's entry point run with `args` from its file system, as its user, with its
    /// environment and then `settings`.
    fn command(&self, args: &[&str], settings: &[(&str, String)]) -> Command {
        let user = self.setting("User").as_str().unwrap();
        let mut command = Command::new("chroot");
        command
            .arg(format!("--userspec={user}"))
            .arg(self.rootfs())
            .args(
                self.setting("Entrypoint")
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap()),
            )
            .args(args)
            .env_clear()
            .current_dir("/");
        for line in self.setting("Env").as_array().unwrap() {
            let (key, value) = line.as_str().unwrap().split_once('=').unwrap();
            command.env(key, value);
        }
        command.envs(settings.iter().map(|(k, v)| (*k, v)));
        command
    }

    /// `serve` (the image's command) on a free loopback port; the process and its address.
    fn serve(&self, settings: &[(&str, String)]) -> (Running, String) {
        let cmd: Vec<&str> = self
            .setting("Cmd")
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let mut settings = settings.to_vec();
        settings.push(("CLAIMCHECK_BIND", "127.0.0.1:0".to_owned()));
        settings.push(("CLAIMCHECK_LOG_FORMAT", "text".to_owned()));
        settings.push(("CLAIMCHECK_SHUTDOWN_GRACE", "0s".to_owned()));
        let mut child = self
            .command(&cmd, &settings)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let running = Running(child);
        let mut seen = Vec::new();
        let mut lines = BufReader::new(stderr).lines();
        let addr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                let addr = line
                    .split("serving the dashboard at http://")
                    .nth(1)
                    .map(|a| a.trim().to_owned());
                seen.push(line);
                addr
            })
            .unwrap_or_else(|| panic!("the image's binary never listened: {seen:#?}"));
        // The rest of its log is read (and dropped) so that its writes never fail.
        std::thread::spawn(move || lines.for_each(drop));
        (running, addr)
    }
}

/// Kills the process if the test fails before it stops.
struct Running(Child);

impl Running {
    /// SIGTERM, then the exit status (at most 30 s).
    fn stop(mut self) -> std::process::ExitStatus {
        crate::helpers::stop_with_sigterm(&mut self.0)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_ready(client: &reqwest::Client, addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = client
            .get(format!("http://{addr}/readyz"))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if status.as_ref().is_ok_and(|s| *s == 200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz of the image's binary: {status:?} after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
#[ignore = "needs the image unpacked by ./scripts/package (CLAIMCHECK_IMAGE_DIR) and root"]
fn the_image_runs_its_binary_unprivileged_with_a_healthcheck_and_no_shell() {
    use std::os::unix::fs::MetadataExt;

    let image = Image::unpacked();
    assert_eq!(image.setting("User"), "10001:10001");
    assert_eq!(
        image.setting("Healthcheck")["Test"],
        serde_json::json!(["CMD", "/claimcheck", "healthcheck"])
    );
    assert_eq!(
        image.setting("Entrypoint"),
        &serde_json::json!(["/claimcheck"])
    );
    let env = image.setting("Env").to_string();
    assert!(
        env.contains("DATABASE_URL=sqlite:///data/claimcheck.db"),
        "{env}"
    );
    let rootfs = image.rootfs();
    assert!(rootfs.join("claimcheck").is_file());
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file());
    assert!(!rootfs.join("bin/sh").exists(), "a shell in the image");
    let data = std::fs::metadata(rootfs.join("data")).unwrap();
    assert_eq!((data.uid(), data.gid()), (10001, 10001));
}

/// Against PostgreSQL: ready, healthy by its own healthcheck, a signed delivery fulfilled,
/// and a clean stop at SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the image unpacked by ./scripts/package (CLAIMCHECK_IMAGE_DIR) and root"]
async fn the_image_serves_from_its_own_file_system_and_fulfils_a_signed_delivery() {
    let image = Image::unpacked();
    let db = TestDb::create(Backend::Postgres).await;
    let (server, addr) = image.serve(&[
        ("DATABASE_URL", db.url().to_owned()),
        ("STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET.to_owned()),
    ]);
    let client = reqwest::Client::new();
    wait_ready(&client, &addr).await;

    // The image's HEALTHCHECK, run as the runtime would: inside, with the same setting.
    let health = image
        .command(&["healthcheck"], &[("CLAIMCHECK_BIND", addr.clone())])
        .output()
        .unwrap();
    assert!(health.status.success(), "{health:?}");
    assert!(String::from_utf8_lossy(&health.stdout).contains("ready"));

    let body = paid_session("evt_image_1", "cs_image_1", "ord_image_1");
    let signature = SigningSecret::new(WEBHOOK_SECRET)
        .unwrap()
        .sign(now_ms() / 1000, &body);
    let delivered = client
        .post(format!("http://{addr}/webhooks/stripe"))
        .header("stripe-signature", signature)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(delivered.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    while db
        .count(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'ord_image_1' AND kind = 'unlock'",
        )
        .await
        != 1
    {
        assert!(
            Instant::now() < deadline,
            "the order was not credited in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(server.stop().success());

    // Nothing listens any more: the healthcheck says so and fails.
    let health = image
        .command(&["healthcheck"], &[("CLAIMCHECK_BIND", addr)])
        .output()
        .unwrap();
    assert!(!health.status.success());
    assert!(String::from_utf8_lossy(&health.stderr).contains("no answer"));
}

/// With nothing but the image's own settings, the SQLite file goes to the /data volume,
/// which the unprivileged user may write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the image unpacked by ./scripts/package (CLAIMCHECK_IMAGE_DIR) and root"]
async fn the_image_keeps_sqlite_in_its_data_volume() {
    use std::os::unix::fs::MetadataExt;

    let image = Image::unpacked();
    let file = image.rootfs().join("data/claimcheck.db");
    let _ = std::fs::remove_file(&file);
    let (server, addr) = image.serve(&[]);
    wait_ready(&reqwest::Client::new(), &addr).await;
    assert!(server.stop().success());
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), 10001);
}
