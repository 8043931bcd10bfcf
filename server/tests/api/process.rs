//! A real `claimcheck serve` process for the tests that need one of their own: to kill it
//! (crash drills), to limit its descriptors, to read its log or its memory.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;

use crate::helpers::{TestDb, WEBHOOK_SECRET, fixture};

/// A `claimcheck serve` child and the lines it logs.
pub(crate) struct Server {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub(crate) addr: String,
}

/// How a server is started besides its database: more settings, and a command it runs under
/// (`prlimit --nofile=256`).
#[derive(Default)]
pub(crate) struct Launch<'a> {
    pub(crate) env: Vec<(&'a str, String)>,
    pub(crate) under: Vec<&'a str>,
}

impl Server {
    pub(crate) fn start(db: &TestDb, failpoint: Option<&str>) -> Server {
        let mut launch = Launch::default();
        if let Some(name) = failpoint {
            launch.env.push(("CLAIMCHECK_FAILPOINT", name.to_owned()));
        }
        Server::launch(db, launch)
    }

    pub(crate) fn launch(db: &TestDb, launch: Launch<'_>) -> Server {
        let binary = env!("CARGO_BIN_EXE_claimcheck");
        let mut command = match launch.under.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
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
        for (name, value) in launch.env {
            command.env(name, value);
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

    pub(crate) fn wait_for(&mut self, needle: &str) -> String {
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

    /// Every line logged since the last call, waiting `settle` for the last ones.
    pub(crate) fn logged(&mut self, settle: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(settle) {
            lines.push(line);
        }
        lines
    }

    /// The process's resident memory now and at its peak, in KiB (`/proc/PID/status`).
    pub(crate) fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {status}"))
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// SIGKILL, as a crash would.
    #[cfg(feature = "failpoints")]
    pub(crate) fn kill(mut self) {
        let status = Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap();
    }

    pub(crate) async fn deliver(&self, name: &str) {
        self.deliver_body(fixture(name)).await;
    }

    pub(crate) async fn deliver_body(&self, body: Vec<u8>) {
        let (status, answer) = self.send_delivery(&body).await;
        assert_eq!(status, 200, "the delivery was answered {answer}");
    }

    /// Delivers `body` as Stripe does after a `503` whose claim could not be stored (the
    /// database's writer busy beyond its wait on a loaded machine): again, for up to 20
    /// seconds. Any other answer than `200` fails at once; a `503` for too many deliveries in
    /// flight too, since nothing else is in flight when this is called.
    pub(crate) async fn deliver_body_retrying(&self, body: Vec<u8>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, answer) = self.send_delivery(&body).await;
            if status == 503 && answer.contains("storage_error") && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            assert_eq!(status, 200, "the delivery was answered {answer}");
            return;
        }
    }

    async fn send_delivery(&self, body: &[u8]) -> (reqwest::StatusCode, String) {
        let header = SigningSecret::new(WEBHOOK_SECRET)
            .unwrap()
            .sign(now_ms() / 1000, body);
        let response = reqwest::Client::new()
            .post(format!("http://{}/webhooks/stripe", self.addr))
            .header("stripe-signature", header)
            .body(body.to_vec())
            .send()
            .await
            .unwrap_or_else(|error| panic!("the delivery got no answer: {error:?}"));
        let status = response.status();
        (status, response.text().await.unwrap_or_default())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
