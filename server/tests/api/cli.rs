//! The `claimcheck` binary itself: settings, errors, migrate, graceful shutdown.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn claimcheck() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claimcheck"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("CLAIMCHECK_BIND")
        .env("RUST_LOG", "info");
    command
}

#[test]
fn a_wrong_bind_address_names_the_setting() {
    let output = claimcheck()
        .arg("serve")
        .env("CLAIMCHECK_BIND", "localhost-3000")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CLAIMCHECK_BIND"), "{stderr}");
    assert!(stderr.contains("localhost-3000"), "{stderr}");
}

#[test]
fn an_unsupported_database_url_names_the_setting_and_the_choices() {
    let output = claimcheck()
        .arg("migrate")
        .env("DATABASE_URL", "mysql://root@localhost/shop")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
    assert!(
        stderr.contains("unsupported database URL scheme 'mysql'"),
        "{stderr}"
    );
}

#[test]
fn migrate_creates_the_sqlite_file_and_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nested/data/claimcheck.db");
    let status = claimcheck()
        .arg("migrate")
        .env("DATABASE_URL", format!("sqlite://{}", file.display()))
        .status()
        .unwrap();
    assert!(status.success());
    assert!(file.exists());
}

#[test]
fn an_unreachable_database_is_a_clear_error_not_a_panic() {
    let output = claimcheck()
        .arg("migrate")
        // Port 9 (discard) has no PostgreSQL behind it.
        .env(
            "DATABASE_URL",
            "postgres://claimcheck:hunter2@127.0.0.1:9/claims",
        )
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot connect to the database"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "the password leaked: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `claimcheck serve` on a fresh SQLite file with this shutdown grace: the process, its
/// address, and the rest of its log.
fn serve_with_grace(
    dir: &tempfile::TempDir,
    grace: &str,
) -> (
    KillOnDrop,
    String,
    impl Iterator<Item = String> + Send + use<>,
) {
    serve_with(dir, &[("CLAIMCHECK_SHUTDOWN_GRACE", grace)])
}

/// `claimcheck serve` on the SQLite file in `dir` with these settings.
fn serve_with(
    dir: &tempfile::TempDir,
    settings: &[(&str, &str)],
) -> (
    KillOnDrop,
    String,
    impl Iterator<Item = String> + Send + use<>,
) {
    let mut server = KillOnDrop(
        claimcheck()
            .arg("serve")
            .env(
                "DATABASE_URL",
                format!("sqlite://{}/c.db", dir.path().display()),
            )
            .env("CLAIMCHECK_BIND", "127.0.0.1:0")
            .envs(settings.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(server.0.stderr.take().unwrap())
        .lines()
        .map(|l| l.unwrap());
    // Wait for the line that says the server listens.
    let listening = lines
        .by_ref()
        .find(|l| l.contains("serving the dashboard at"))
        .expect("the server never said it was listening");
    let addr = listening
        .rsplit("http://")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    (server, addr, lines)
}

/// The status of `GET path` on `addr`, or `None` when nothing answers.
fn status_of(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

fn sigterm(server: &KillOnDrop) {
    let kill = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// Waits (at most 2 s) for `/readyz` to answer 503, as it does at once after SIGTERM.
fn readyz_turns_away(addr: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while status_of(addr, "/readyz") != Some(503) {
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz never said 503"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the process to exit, at most `within`.
fn exit_within(server: &mut KillOnDrop, within: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit in {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A rolling restart's stop: at SIGTERM `/readyz` answers 503 at once so the balancer takes
/// the instance out, requests are still answered for the grace period, then the process
/// takes no connection and exits 0 (well within the 30 s a stop may take).
#[test]
fn sigterm_turns_readyz_away_answers_through_the_grace_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, lines) = serve_with_grace(&dir, "5s");
    assert_eq!(status_of(&addr, "/readyz"), Some(200));
    sigterm(&server);
    let signalled = std::time::Instant::now();
    readyz_turns_away(&addr);
    // Still answering, for the balancer's sake.
    assert_eq!(status_of(&addr, "/healthz"), Some(200));
    let status = exit_within(&mut server, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= Duration::from_secs(5),
        "stopped before the grace period was over"
    );
    assert_eq!(status_of(&addr, "/healthz"), None);
    let rest: Vec<String> = lines.collect();
    assert!(rest.iter().any(|l| l.contains("stopped")), "{rest:?}");
}

/// A second SIGTERM during the grace period stops at once, and says it did not finish.
#[test]
fn a_second_sigterm_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, lines) = serve_with_grace(&dir, "20s");
    sigterm(&server);
    readyz_turns_away(&addr);
    sigterm(&server);
    // Far sooner than the 20 s grace.
    let status = exit_within(&mut server, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{status:?}");
    let rest: Vec<String> = lines.collect();
    assert!(
        rest.iter().any(|l| l.contains("a second signal")),
        "{rest:?}"
    );
}

/// Migrations as their own deploy step: `migrate --status` lists what is applied and what
/// is pending; `serve` with `CLAIMCHECK_MIGRATE=off` refuses a database that lacks one and
/// names it, and starts once `migrate` ran, also beside a newer version's migration.
#[test]
fn migrations_can_be_listed_and_left_to_their_own_step() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/c.db", dir.path().display());
    let status = |json: bool| {
        let mut command = claimcheck();
        command
            .args(["migrate", "--status"])
            .env("DATABASE_URL", &url);
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let before = status(false);
    assert!(before.contains("0001"), "{before}");
    assert!(before.contains("0 applied"), "{before}");
    assert!(!before.contains("applied 2"), "{before}");

    let refused = claimcheck()
        .arg("serve")
        .env("DATABASE_URL", &url)
        .env("CLAIMCHECK_MIGRATE", "off")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("CLAIMCHECK_MIGRATE=off"), "{stderr}");
    assert!(stderr.contains("0001 claims"), "{stderr}");
    assert!(stderr.contains("claimcheck migrate"), "{stderr}");

    let migrated = claimcheck()
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .status()
        .unwrap();
    assert!(migrated.success());
    let after = status(false);
    assert!(after.contains(" 0 pending"), "{after}");
    assert!(!after.contains("pending\n0"), "{after}");
    let rows: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.iter().any(|r| r["version"] == 28));
    assert!(
        rows.iter()
            .all(|r| r["applied_on"].is_string() && r["known"] == true)
    );

    // A newer version migrated the database further: this one still serves beside it.
    record_a_newer_migration(&url);
    let listed = status(false);
    assert!(listed.contains("by a newer version"), "{listed}");
    let (_server, addr, _lines) = serve_with(&dir, &[("CLAIMCHECK_MIGRATE", "off")]);
    assert_eq!(status_of(&addr, "/readyz"), Some(200));
}

/// Records migration 9999 as applied, as a newer version would.
fn record_a_newer_migration(url: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, installed_on, success, \
             checksum, execution_time) VALUES (9999, 'a newer version', CURRENT_TIMESTAMP, 1, \
             x'00', 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    });
}

/// Under systemd (`Type=notify`): READY once migrated and listening, the watchdog fed while
/// `WatchdogSec` is set, STOPPING at SIGTERM; observed on a `NOTIFY_SOCKET` of our own.
#[test]
fn systemd_hears_ready_the_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let socket_path = socket_path.display().to_string();
    let (mut server, addr, _lines) = serve_with(
        &dir,
        &[
            ("NOTIFY_SOCKET", socket_path.as_str()),
            // 400 ms: fed every 200 ms.
            ("WATCHDOG_USEC", "400000"),
            ("CLAIMCHECK_SHUTDOWN_GRACE", "0s"),
        ],
    );
    let mut heard = Vec::new();
    let hear_until = |wanted: &str, heard: &mut Vec<String>| {
        let mut buffer = [0u8; 512];
        while !heard
            .iter()
            .any(|m: &String| m.lines().any(|l| l == wanted))
        {
            let n = socket
                .recv(&mut buffer)
                .unwrap_or_else(|e| panic!("no {wanted} after {heard:?}: {e}"));
            heard.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
    };
    hear_until("READY=1", &mut heard);
    assert_eq!(status_of(&addr, "/readyz"), Some(200));
    hear_until("WATCHDOG=1", &mut heard);
    sigterm(&server);
    hear_until("STOPPING=1", &mut heard);
    let status = exit_within(&mut server, Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    // READY came before anything else.
    assert!(heard[0].lines().any(|l| l == "READY=1"), "{heard:?}");
}

/// The example environment file names every setting `serve` reads.
#[test]
fn the_example_environment_names_every_setting() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/claimcheck.env.example"
    ))
    .unwrap();
    let help = claimcheck().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let settings: Vec<&str> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .collect();
    assert!(settings.len() > 40, "{help}");
    let missing: Vec<&&str> = settings
        .iter()
        .filter(|setting| !example.contains(&format!("{setting}=")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in claimcheck.env.example: {missing:?}"
    );
}

/// `claimcheck healthcheck` (the container image's HEALTHCHECK) asks the server at
/// CLAIMCHECK_BIND: 0 while it is ready, 1 with the reason once it stops, 1 with "no answer"
/// when nothing listens.
#[test]
fn healthcheck_follows_readyz() {
    let dir = tempfile::tempdir().unwrap();
    // A grace long enough that the check while stopping comes within it on a busy machine.
    let (mut server, addr, _log) = serve_with_grace(&dir, "8s");
    let healthcheck = || {
        claimcheck()
            .arg("healthcheck")
            .env("CLAIMCHECK_BIND", &addr)
            .output()
            .unwrap()
    };
    let ready = healthcheck();
    assert!(ready.status.success(), "{ready:?}");
    assert!(String::from_utf8_lossy(&ready.stdout).contains("\"ready\""));
    sigterm(&server);
    readyz_turns_away(&addr);
    let stopping = healthcheck();
    assert_eq!(stopping.status.code(), Some(1), "{stopping:?}");
    let said = String::from_utf8_lossy(&stopping.stderr);
    assert!(
        said.contains("503") && said.contains("shutting down"),
        "{said}"
    );
    assert!(exit_within(&mut server, Duration::from_secs(30)).success());
    let gone = healthcheck();
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no answer"));
}

/// The deploy files set only settings `serve` reads (a misspelt one would be ignored without
/// a word), their instances leave migrations to the migrate step, and their health checks run
/// a command the binary has.
#[test]
fn the_deploy_files_use_real_settings_and_commands() {
    let help = claimcheck().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    // A secret's value is hidden: `[env: NAME]`; the others show it: `[env: NAME=…]`.
    let is_setting = |name: &str| {
        help.contains(&format!("[env: {name}=")) || help.contains(&format!("[env: {name}]"))
    };
    let packaging = concat!(env!("CARGO_MANIFEST_DIR"), "/../packaging/");
    for file in ["compose.yaml", "coolify/claimcheck.yaml", "Containerfile"] {
        let text = std::fs::read_to_string(format!("{packaging}{file}")).unwrap();
        let keys: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .flat_map(|line| line.split([' ', '-', '\\']))
            .filter_map(|word| word.split([':', '=']).next())
            .filter(|key| {
                ["CLAIMCHECK_", "STRIPE_", "DATABASE_", "LEPTOS_"]
                    .iter()
                    .any(|p| key.starts_with(p))
            })
            .collect();
        assert!(!keys.is_empty(), "{file} sets no setting");
        for key in keys {
            // The image to run is the deploy's choice, not a setting of the binary.
            assert!(
                key == "CLAIMCHECK_IMAGE" || is_setting(key),
                "{file} sets {key}, which `claimcheck serve` does not read"
            );
        }
        if file != "Containerfile" {
            assert!(text.contains("healthcheck"), "{file} has no health check");
        }
    }
    let compose = std::fs::read_to_string(format!("{packaging}compose.yaml")).unwrap();
    assert!(compose.contains("CLAIMCHECK_MIGRATE: \"off\""));
    assert!(compose.contains("command: [\"migrate\"]"));
    assert!(compose.contains("condition: service_completed_successfully"));
    let containerfile = std::fs::read_to_string(format!("{packaging}Containerfile")).unwrap();
    assert!(containerfile.contains("CMD [\"/claimcheck\", \"healthcheck\"]"));
    assert!(
        claimcheck()
            .args(["healthcheck", "--help"])
            .output()
            .unwrap()
            .status
            .success()
    );
}

/// A grace that would leave no time for the requests in flight is refused.
#[test]
fn a_shutdown_grace_past_twenty_seconds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = claimcheck()
        .arg("serve")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/c.db", dir.path().display()),
        )
        .env("CLAIMCHECK_SHUTDOWN_GRACE", "25s")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CLAIMCHECK_SHUTDOWN_GRACE"), "{stderr}");
}

#[test]
fn a_wrong_log_format_names_the_setting_and_the_choices() {
    let output = claimcheck()
        .arg("migrate")
        .env("CLAIMCHECK_LOG_FORMAT", "xml")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CLAIMCHECK_LOG_FORMAT"), "{stderr}");
    assert!(stderr.contains("'xml'"), "{stderr}");
    assert!(stderr.contains("text, json"), "{stderr}");
}

/// One HTTP/1.1 exchange over a fresh connection; the whole answer, headers first.
fn exchange(addr: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The request span's fields of a JSON log line, wherever the line puts them.
fn request_id_of(line: &serde_json::Value) -> Option<&str> {
    std::iter::once(&line["span"])
        .chain(line["spans"].as_array().into_iter().flatten())
        .find_map(|span| span["request_id"].as_str())
}

#[test]
fn json_logs_are_one_object_a_line_and_carry_the_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = KillOnDrop(
        claimcheck()
            .arg("serve")
            .env(
                "DATABASE_URL",
                format!("sqlite://{}/c.db", dir.path().display()),
            )
            .env("CLAIMCHECK_BIND", "127.0.0.1:0")
            .env("CLAIMCHECK_LOG_FORMAT", "json")
            .env("STRIPE_WEBHOOK_SECRET", "whsec_logs_0123456789abcdef")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stderr = server.0.stderr.take().unwrap();
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let mut next_line = || {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .expect("no further log line");
        let json: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("not one JSON object: {line}: {error}"));
        seen.push(line);
        json
    };
    let listening = loop {
        let line = next_line();
        if let Some(message) = line["message"].as_str()
            && message.contains("serving the dashboard at")
        {
            break message.to_owned();
        }
    };
    let addr = listening
        .rsplit("http://")
        .next()
        .unwrap()
        .trim()
        .to_owned();

    // A request that succeeds is not logged at `info`; one refused is, with its id.
    let ok = exchange(
        &addr,
        "GET /healthz HTTP/1.1\r\nhost: claimcheck\r\nx-request-id: logs-ok-1\r\n\
         connection: close\r\n\r\n",
    );
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains("x-request-id: logs-ok-1\r\n"), "{ok}");
    let refused = exchange(
        &addr,
        "POST /webhooks/stripe HTTP/1.1\r\nhost: claimcheck\r\nx-request-id: logs-forged-2\r\n\
         stripe-signature: t=1,v1=00\r\ncontent-type: application/json\r\n\
         content-length: 2\r\nconnection: close\r\n\r\n{}",
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(
        refused.contains("x-request-id: logs-forged-2\r\n"),
        "{refused}"
    );
    let line = loop {
        let line = next_line();
        if request_id_of(&line) == Some("logs-forged-2") {
            break line;
        }
    };
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(line["outcome"], "bad_signature", "{line}");
    assert!(
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains("delivery refused")),
        "{line}"
    );
    assert!(
        !seen.iter().any(|l| l.contains("logs-ok-1")),
        "a successful request was logged at info: {seen:#?}"
    );
}

/// Kills the child if the test fails before it exits on its own.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(feature = "rehearsal")]
#[test]
fn bench_ingest_reports_throughput_latency_and_outcomes() {
    let output = claimcheck()
        .args(["bench-ingest", "--requests", "40", "--concurrency", "4"])
        .args(["--workload", "storm", "--events", "5"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Without --workers it runs what `serve` runs, and says so before the figures.
    assert!(
        stdout.starts_with("configuration: claimcheck serve on sqlite, default configuration (2 workers); 40 deliveries, 4 in flight"),
        "{stdout}"
    );
    assert!(stdout.contains("40 deliveries in"), "{stdout}");
    assert!(stdout.contains("p99"), "{stdout}");
    assert!(
        stdout.contains("fulfilment: 5 claims processed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ms after the last delivery was answered"),
        "{stdout}"
    );
    assert!(
        stdout.contains("200 claimed=5, 200 duplicate_event=35"),
        "{stdout}"
    );

    let output = claimcheck()
        .args(["bench-ingest", "--requests", "10", "--workers", "0"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("ingestion only (--workers 0)"), "{stdout}");
    assert!(!stdout.contains("fulfilment:"), "{stdout}");
}

#[cfg(feature = "rehearsal")]
#[test]
fn bench_spend_times_spends_beside_deliveries_and_checks_the_ledger() {
    let output = claimcheck()
        .args([
            "bench-spend",
            "--requests",
            "60",
            "--concurrency",
            "8",
            "--customers",
            "3",
        ])
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("bench-ingest sqlite: 60 in") && stdout.contains("200 claimed=60"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bench-spend sqlite: 60 in") && stdout.contains("201=60"),
        "{stdout}"
    );
    assert!(
        stdout.contains("spends per second / deliveries per second:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("− 60 spent = ") && stdout.contains("every spend once"),
        "{stdout}"
    );
}

#[cfg(feature = "rehearsal")]
#[test]
fn bench_dashboard_seeds_and_times_every_page() {
    let output = claimcheck()
        .args(["bench-dashboard", "--claims", "3000", "--requests", "3"])
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("seeded 3000 claims and orders"), "{stdout}");
    // One subscription for every twentieth claim, so the subscription pages show some.
    assert!(stdout.contains("; 150 subscriptions)"), "{stdout}");
    for page in [
        "events list",
        "a page deep in the history",
        "failed only",
        "events, search by email",
        "orders, search by email",
        "subscriptions list",
        "subscriptions, past due",
        "subscriptions, one plan",
        "subscription page",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.contains(page))
            .unwrap_or_else(|| panic!("{page} missing: {stdout}"));
        assert!(line.contains("p95"), "{line}");
    }
}

#[test]
fn a_zero_or_negative_signature_tolerance_is_refused_at_start() {
    for value in ["0", "-5"] {
        let output = claimcheck()
            .arg("serve")
            .env("CLAIMCHECK_WEBHOOK_TOLERANCE_SECS", value)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("CLAIMCHECK_WEBHOOK_TOLERANCE_SECS"),
            "{stderr}"
        );
    }
}

#[test]
fn help_never_prints_the_signing_secret() {
    let output = claimcheck()
        .args(["serve", "--help"])
        .env("STRIPE_WEBHOOK_SECRET", "whsec_do_not_print")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("STRIPE_WEBHOOK_SECRET"), "{stdout}");
    assert!(!stdout.contains("whsec_do_not_print"), "{stdout}");
    // The defaults shown are the configuration's, written as one would type them.
    for default in [
        "[default: sqlite://data/claimcheck.db]",
        "[default: 127.0.0.1:3000]",
        "[default: 15m]",
        "[default: 3d]",
        "[default: 30s]",
        "[default: 1h]",
        "[default: 24h]",
        "[default: 300]",
        "[default: 20000]",
        "[default: test]",
        "[default: off]",
        "[default: en]",
    ] {
        assert!(stdout.contains(default), "{default} in {stdout}");
    }
}

/// A production build (the default features) has no rehearsal tools; a build with
/// `rehearsal` lists them.
#[test]
fn the_rehearsal_tools_are_there_only_with_their_feature() {
    let output = claimcheck().arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    let listed = [
        "demo",
        "stripe-sim",
        "simulate",
        "bench-ingest",
        "bench-dashboard",
    ]
    .into_iter()
    .filter(|command| help.lines().any(|l| l.trim_start().starts_with(command)))
    .count();
    if cfg!(feature = "rehearsal") {
        assert_eq!(listed, 5, "{help}");
    } else {
        assert_eq!(listed, 0, "{help}");
        let output = claimcheck().arg("demo").output().unwrap();
        assert_eq!(output.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("unrecognized subcommand"),
            "{output:?}"
        );
    }
}

/// In a production build (no `failpoints` feature) `CLAIMCHECK_FAILPOINT` means nothing: a
/// stray one cannot park the workers, and the claim is fulfilled.
#[cfg(not(feature = "failpoints"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_failpoint_cannot_park_a_production_server() {
    use crate::helpers::{Backend, TestDb};
    use crate::process::{Launch, Server};

    let db = TestDb::create(Backend::Sqlite).await;
    let server = Server::launch(
        &db,
        Launch {
            env: vec![("CLAIMCHECK_FAILPOINT", "after-lease".into())],
            ..Launch::default()
        },
    );
    server.deliver("checkout.session.completed.paid").await;
    crate::crash::wait_until(
        &db,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        1,
    )
    .await;
}
