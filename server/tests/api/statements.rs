//! The statements the store runs, per backend, kept as a snapshot per release
//! (`migrations/statements/<release>/{sqlite,postgres}.sql`, one statement a line), so that a
//! migration cannot break a query the previous release still runs while both are deployed:
//!
//! - Recording: with `CLAIMCHECK_RECORD_STATEMENTS=DIR`, every statement the store runs
//!   during this test binary's run (sqlx logs the store's at TRACE, `Store::connect`) is
//!   appended to `DIR/<backend>.sql`, once. `./scripts/test` records the whole API suite.
//! - `recorded_statements_are_in_the_snapshot` (run by `./scripts/test` after the suite)
//!   fails on a statement the snapshot of this release does not hold; with
//!   `CLAIMCHECK_STATEMENTS_UPDATE=1` it writes the recorded statements as the snapshot.
//! - `the_previous_release_prepares_against_this_schema` prepares every statement of the
//!   previous release's snapshot against a database this version migrated, on both backends.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use claimcheck_core::{Store, StoreOptions};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

use crate::helpers::{Backend, TestDb};

/// The release whose snapshot this code must match.
const RELEASE: &str = env!("CARGO_PKG_VERSION");
/// The release deployed before this one: its statements must prepare against this schema.
const PREVIOUS: &str = "0.2.0";
/// The last migration the previous release shipped: the ones after it are this release's.
const PREVIOUS_LAST_MIGRATION: u32 = 31;

fn snapshot_dir(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../migrations/statements")
        .join(release)
}

/// One statement on one line: whitespace collapsed, a multi-row VALUES list cut to its
/// first row and an `IN (…)` list of parameters or quoted names to its first item (a batch
/// or a page of any size is the same statement), the parameters then numbered densely.
pub fn normalise(sql: &str) -> String {
    let words: Vec<&str> = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or_default())
        .flat_map(str::split_whitespace)
        .collect();
    let flat = words.join(" ");
    renumber(&cut_lists(&cut_repeated_rows(&flat)))
}

/// `IN ($3, $4, $5)` → `IN ($3)`, `IN (?, ?)` → `IN (?)`, `IN ('a', 'b')` → `IN ('a')`.
fn cut_lists(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("IN (") {
        let start = at + "IN ".len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let len = row_len(rest);
        let inner = &rest[1..len - 1];
        let items: Vec<&str> = inner.split(", ").collect();
        let simple = |item: &str| {
            item == "?"
                || item
                    .strip_prefix('$')
                    .is_some_and(|n| n.parse::<u32>().is_ok())
                || (item.len() > 1
                    && item.starts_with('\'')
                    && item.ends_with('\'')
                    && !item[1..item.len() - 1].contains('\''))
        };
        if items.len() > 1 && items.iter().all(|item| simple(item)) {
            out.push('(');
            out.push_str(items[0]);
            out.push(')');
        } else {
            out.push_str(&rest[..len]);
        }
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

/// The parameters `$n` numbered 1, 2, … in the order of their numbers (what cutting a list
/// left out is closed up).
fn renumber(sql: &str) -> String {
    let numbers = |sql: &str| -> Vec<(usize, usize, u32)> {
        let bytes = sql.as_bytes();
        let mut found = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'$' {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if digits > 0 {
                    let n = sql[i + 1..i + 1 + digits].parse().unwrap();
                    found.push((i, i + 1 + digits, n));
                    i += 1 + digits;
                    continue;
                }
            }
            i += 1;
        }
        found
    };
    let found = numbers(sql);
    let mut used: Vec<u32> = found.iter().map(|(_, _, n)| *n).collect();
    used.sort_unstable();
    used.dedup();
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    for (start, end, n) in found {
        out.push_str(&sql[last..start]);
        let dense = used.binary_search(&n).unwrap() + 1;
        out.push_str(&format!("${dense}"));
        last = end;
    }
    out.push_str(&sql[last..]);
    out
}

/// `VALUES (…), (…), (…)` → `VALUES (…)`: keeps the first parenthesised row after each
/// VALUES and drops the rows that follow it.
fn cut_repeated_rows(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("VALUES (") {
        let start = at + "VALUES ".len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let first = row_len(rest);
        out.push_str(&rest[..first]);
        rest = &rest[first..];
        while let Some(next) = rest.strip_prefix(", (").or_else(|| rest.strip_prefix(",(")) {
            let len = row_len(&rest[rest.len() - next.len() - 1..]);
            rest = &rest[rest.len() - next.len() - 1 + len..];
        }
    }
    out.push_str(rest);
    out
}

/// The length of the parenthesised group `s` starts with.
fn row_len(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// Whether a statement is one the snapshot keeps: the store's queries, not schema changes
/// (the migrations' own), transaction control, the migrator's bookkeeping or a lock alone (the
/// migrator's, a customer's: it reads no table).
pub fn kept(statement: &str) -> bool {
    let first = statement
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    matches!(
        first.as_str(),
        "SELECT" | "INSERT" | "UPDATE" | "DELETE" | "WITH"
    ) && !statement.contains("_sqlx_migrations")
        && !statement.trim_start().starts_with("SELECT pg_advisory")
}

struct Recorder {
    dir: PathBuf,
    seen: Mutex<BTreeSet<(String, String)>>,
}

/// Reads `summary` and `db.statement` of sqlx's statement event.
#[derive(Default)]
struct StatementText {
    summary: String,
    full: String,
}

impl Visit for StatementText {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_owned(),
            "db.statement" => self.full = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for &'static Recorder {
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        metadata.target() == "sqlx::query"
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        // The store's statements only: sqlx logs them at TRACE (anything else's at DEBUG).
        if *event.metadata().level() != tracing::Level::TRACE {
            return;
        }
        let mut text = StatementText::default();
        event.record(&mut text);
        let sql = if text.full.trim().is_empty() {
            text.summary
        } else {
            text.full
        };
        let statement = normalise(&sql);
        if !kept(&statement) {
            return;
        }
        // SQLite runs each connection's statements on a thread of its own.
        let backend = match std::thread::current().name() {
            Some(name) if name.starts_with("sqlx-sqlite-worker") => "sqlite",
            _ => "postgres",
        };
        let mut seen = self.seen.lock().unwrap();
        if seen.insert((backend.to_owned(), statement.clone())) {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(format!("{backend}.sql")))
                .unwrap();
            writeln!(file, "{statement}").unwrap();
        }
    }
}

/// Starts recording when `CLAIMCHECK_RECORD_STATEMENTS` names a folder (once per process).
pub fn record() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let Ok(dir) = std::env::var("CLAIMCHECK_RECORD_STATEMENTS") else {
            return;
        };
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let recorder: &'static Recorder = Box::leak(Box::new(Recorder {
            dir,
            seen: Mutex::new(BTreeSet::new()),
        }));
        let subscriber = tracing_subscriber::registry()
            .with(recorder)
            .with(tracing_subscriber::filter::LevelFilter::TRACE);
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in the API tests");
    });
}

/// The statements of a snapshot or recording (empty when there is none), in today's normal
/// form.
fn read_statements(file: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(normalise)
        .collect()
}

#[test]
#[ignore = "run by ./scripts/test after the API suite recorded its statements"]
fn recorded_statements_are_in_the_snapshot() {
    let recorded = PathBuf::from(
        std::env::var("CLAIMCHECK_RECORD_STATEMENTS")
            .expect("CLAIMCHECK_RECORD_STATEMENTS names the folder the suite recorded into"),
    );
    let snapshot = snapshot_dir(RELEASE);
    let update = std::env::var("CLAIMCHECK_STATEMENTS_UPDATE").is_ok_and(|v| v == "1");
    let mut missing = Vec::new();
    for backend in ["sqlite", "postgres"] {
        let ran = read_statements(&recorded.join(format!("{backend}.sql")));
        assert!(
            ran.len() > 50,
            "{backend}: only {} statements recorded; did the suite run with \
             CLAIMCHECK_RECORD_STATEMENTS?",
            ran.len()
        );
        let file = snapshot.join(format!("{backend}.sql"));
        if update {
            std::fs::create_dir_all(&snapshot).unwrap();
            let mut text: String = ran.iter().map(|s| format!("{s}\n")).collect();
            if text.is_empty() {
                text.push('\n');
            }
            std::fs::write(&file, text).unwrap();
            continue;
        }
        let kept = read_statements(&file);
        missing.extend(
            ran.difference(&kept)
                .map(|statement| format!("{backend}: {statement}")),
        );
    }
    assert!(
        missing.is_empty(),
        "statements the store runs that the snapshot of release {RELEASE} does not hold \
         (migrations/statements/{RELEASE}/): review them, then run ./scripts/test with \
         CLAIMCHECK_STATEMENTS_UPDATE=1 to write the snapshot:\n{}",
        missing.join("\n")
    );
}

/// Prepares each statement of `release`'s snapshot on a fresh database of `backend` that this
/// version migrated (then changed by `damage`, if given); the statements that fail, with the
/// database's reason.
async fn unpreparable(release: &str, backend: Backend) -> (usize, Vec<String>) {
    unpreparable_after(release, backend, None).await
}

async fn unpreparable_after(
    release: &str,
    backend: Backend,
    damage: Option<&str>,
) -> (usize, Vec<String>) {
    use sqlx::Executor;

    let name = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let statements = read_statements(&snapshot_dir(release).join(format!("{name}.sql")));
    let db = TestDb::create(backend).await;
    let store = Store::connect(&db.url().parse().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store.close().await;
    if let Some(damage) = damage {
        db.execute(damage).await;
    }
    let mut failed = Vec::new();
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
            for statement in &statements {
                if let Err(e) = (&pool).prepare(statement.as_str()).await {
                    failed.push(format!("{statement}\n  → {e}"));
                }
            }
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
            for statement in &statements {
                if let Err(e) = prepare_postgres(&pool, statement).await {
                    failed.push(format!("{statement}\n  → {e}"));
                }
            }
            pool.close().await;
        }
    }
    (statements.len(), failed)
}

/// Prepares `statement` on PostgreSQL. The store binds every argument with its type; a bare
/// prepare leaves them to PostgreSQL, which cannot type a parameter only compared with NULL
/// first (`$1 IS NULL OR id < $1`): such a parameter is given the types the store binds
/// (BIGINT, TEXT, BOOLEAN) in turn, and the statement prepares if one of them fits.
async fn prepare_postgres(pool: &sqlx::PgPool, statement: &str) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    use sqlx::postgres::PgTypeInfo;
    use sqlx::postgres::types::Oid;

    const UNTYPED: Oid = Oid(0);
    const CANDIDATES: [Oid; 3] = [Oid(20), Oid(25), Oid(16)];
    let mut types: Vec<Oid> = Vec::new();
    loop {
        let typed: Vec<PgTypeInfo> = types.iter().map(|oid| PgTypeInfo::with_oid(*oid)).collect();
        let error = match pool.prepare_with(statement, &typed).await {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        let untyped = error
            .as_database_error()
            .map(|e| e.message().to_owned())
            .and_then(|m| {
                m.strip_prefix("could not determine data type of parameter $")
                    .and_then(|n| n.parse::<usize>().ok())
            });
        let Some(n) = untyped else {
            return Err(error);
        };
        if types.len() < n {
            types.resize(n, UNTYPED);
        }
        let next = match types[n - 1] {
            UNTYPED => CANDIDATES[0],
            tried => match CANDIDATES.iter().position(|c| *c == tried) {
                Some(i) if i + 1 < CANDIDATES.len() => CANDIDATES[i + 1],
                _ => return Err(error),
            },
        };
        types[n - 1] = next;
    }
}

/// The previous release's statements run unchanged against this release's schema: every
/// migration since is expanding (new tables, nullable or defaulted columns, indexes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_prepares_against_this_schema() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (count, failed) = unpreparable(PREVIOUS, backend).await;
        assert!(
            count > 50,
            "{backend:?}: the snapshot of {PREVIOUS} holds {count} statements"
        );
        assert!(
            failed.is_empty(),
            "{backend:?}: statements of release {PREVIOUS} this schema breaks:\n{}",
            failed.join("\n")
        );
    }
}

/// The check sees a contracting change: after a rename the previous release's statements
/// that name the column no longer prepare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_column_breaks_the_previous_release_and_the_check_says_so() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (_, failed) = unpreparable_after(
            PREVIOUS,
            backend,
            Some("ALTER TABLE webhook_deliveries RENAME COLUMN detail TO details"),
        )
        .await;
        assert!(!failed.is_empty(), "{backend:?}");
        assert!(
            failed.iter().all(|f| f.contains("detail")),
            "{backend:?}: {failed:#?}"
        );
    }
}

/// And this release's own, as a check of the check: each prepares here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_release_prepares_against_its_own_schema() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (count, failed) = unpreparable(RELEASE, backend).await;
        assert!(
            count > 50,
            "{backend:?}: the snapshot of {RELEASE} holds {count} statements"
        );
        assert!(failed.is_empty(), "{backend:?}:\n{}", failed.join("\n"));
    }
}

/// A migration of this release only expands the schema, so that the previous release keeps
/// working beside it: no table or column dropped or renamed, no type changed, no constraint
/// tightened, a new column nullable or defaulted, and on PostgreSQL an index on an existing
/// table built CONCURRENTLY (no lock on its writes). A contracting change waits a release
/// and says so in its first line: `-- contracting: the previous release no longer runs …`.
#[test]
fn migrations_since_the_previous_release_only_expand() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut found = Vec::new();
    let mut read = 0;
    for backend in ["sqlite", "postgres"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(backend))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let version: u32 = name[..4].parse().unwrap();
            read += 1;
            if version <= PREVIOUS_LAST_MIGRATION {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            if text.starts_with("-- contracting:") {
                continue;
            }
            found.extend(
                contracting(&text, backend == "postgres")
                    .into_iter()
                    .map(|why| format!("{backend}/{name}: {why}")),
            );
        }
    }
    // (A release may have no migration of its own: `contracting_changes_are_named` holds
    // the check itself to known cases.)
    assert!(
        read > 2 * PREVIOUS_LAST_MIGRATION as usize - 4,
        "the migrations were read"
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// What in a migration would break the previous release (or block its writes).
fn contracting(sql: &str, postgres: bool) -> Vec<String> {
    let text = normalise(sql).to_ascii_uppercase();
    let statements: Vec<&str> = text
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    // SQLite changes a table's constraints only by rebuilding it under its own name (create
    // the new shape, copy every row, drop the old, rename the new): the previous release
    // finds the same table, and `the_previous_release_prepares_against_this_schema` checks
    // its statements against what the rebuild left.
    let rebuilds: Vec<(String, String)> = if postgres {
        Vec::new()
    } else {
        statements
            .iter()
            .filter_map(|s| s.strip_prefix("ALTER TABLE ")?.split_once(" RENAME TO "))
            .map(|(new, old)| (new.trim().to_owned(), old.trim().to_owned()))
            .filter(|(new, old)| {
                text.contains(&format!("CREATE TABLE {new} "))
                    && statements.iter().any(|s| {
                        s.starts_with(&format!("INSERT INTO {new} "))
                            && s.ends_with(&format!("FROM {old}"))
                    })
                    && statements.contains(&format!("DROP TABLE {old}").as_str())
            })
            .collect()
    };
    let rebuilt = |statement: &str| {
        rebuilds.iter().any(|(new, old)| {
            statement == format!("DROP TABLE {old}")
                || statement == format!("ALTER TABLE {new} RENAME TO {old}")
        })
    };
    let mut found = Vec::new();
    for statement in statements.iter().copied().filter(|s| !rebuilt(s)) {
        let has = |words: &str| statement.contains(words);
        if has("DROP TABLE") || has("DROP COLUMN") {
            found.push(format!(
                "drops what the previous release reads: {statement}"
            ));
        }
        if has(" RENAME ") {
            found.push(format!(
                "renames what the previous release names: {statement}"
            ));
        }
        if has("SET NOT NULL") || (has("ALTER COLUMN") && has(" TYPE ")) {
            found.push(format!(
                "tightens a column the previous release writes: {statement}"
            ));
        }
        if has("ADD COLUMN") && has("NOT NULL") && !has("DEFAULT") {
            found.push(format!(
                "a NOT NULL column without a default, which the previous release's inserts \
                 leave out: {statement}"
            ));
        }
        if postgres && (has("CREATE INDEX") || has("CREATE UNIQUE INDEX")) {
            let table = statement
                .split(" ON ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_default();
            let created_here = text.contains(&format!("CREATE TABLE {table} "))
                || text.contains(&format!("CREATE TABLE IF NOT EXISTS {table} "));
            if !has("CONCURRENTLY") && !created_here {
                found.push(format!(
                    "an index on an existing table built without CONCURRENTLY locks its \
                     writes: {statement}"
                ));
            }
        }
    }
    found
}

#[test]
fn contracting_changes_are_named() {
    assert!(contracting("ALTER TABLE t ADD COLUMN a TEXT;", true).is_empty());
    assert!(
        contracting(
            "ALTER TABLE t ADD COLUMN a BIGINT NOT NULL DEFAULT 0;",
            true
        )
        .is_empty()
    );
    assert!(
        contracting(
            "CREATE TABLE n (a TEXT);\nCREATE INDEX n_a ON n (a);\n-- note\n",
            true
        )
        .is_empty()
    );
    assert!(contracting("CREATE INDEX CONCURRENTLY t_a ON t (a);", true).is_empty());
    for breaking in [
        "ALTER TABLE t DROP COLUMN a;",
        "DROP TABLE t;",
        "ALTER TABLE t RENAME COLUMN a TO b;",
        "ALTER TABLE t ALTER COLUMN a SET NOT NULL;",
        "ALTER TABLE t ALTER COLUMN a TYPE BIGINT;",
        "ALTER TABLE t ADD COLUMN b TEXT NOT NULL;",
        "CREATE INDEX t_a ON t (a);",
    ] {
        assert_eq!(contracting(breaking, true).len(), 1, "{breaking}");
    }
    // SQLite builds an index without a lock of the kind PostgreSQL takes.
    assert!(contracting("CREATE INDEX t_a ON t (a);", false).is_empty());
    // SQLite rebuilds a table to drop a constraint: the same table, all its rows.
    let rebuild = "CREATE TABLE t_v2 (a TEXT);\nINSERT INTO t_v2 (a) SELECT a FROM t;\n\
                   DROP TABLE t;\nALTER TABLE t_v2 RENAME TO t;";
    assert!(contracting(rebuild, false).is_empty());
    // Not on PostgreSQL, which drops a constraint in place; and not a rebuild that keeps
    // no rows, or renames the new table to another name.
    assert_eq!(contracting(rebuild, true).len(), 2);
    assert_eq!(
        contracting(
            "CREATE TABLE t_v2 (a TEXT);\nDROP TABLE t;\nALTER TABLE t_v2 RENAME TO t;",
            false
        )
        .len(),
        2
    );
    assert_eq!(
        contracting(
            "CREATE TABLE t_v2 (a TEXT);\nINSERT INTO t_v2 (a) SELECT a FROM t;\n\
             DROP TABLE t;\nALTER TABLE t_v2 RENAME TO u;",
            false
        )
        .len(),
        2
    );
}

#[test]
fn batches_of_any_size_are_one_statement() {
    assert_eq!(
        normalise(
            "INSERT INTO t (a, b)\n  VALUES ($1, $2), ($3, $4),($5, $6) -- rows\nRETURNING a"
        ),
        "INSERT INTO t (a, b) VALUES ($1, $2) RETURNING a"
    );
    assert_eq!(
        normalise("SELECT f(x) FROM t WHERE a IN (SELECT value FROM json_each(?))"),
        "SELECT f(x) FROM t WHERE a IN (SELECT value FROM json_each(?))"
    );
    assert_eq!(
        normalise("SELECT a FROM t WHERE b = $1 AND c IN ($2, $3, $4) AND d < $5 LIMIT $10"),
        "SELECT a FROM t WHERE b = $1 AND c IN ($2) AND d < $3 LIMIT $4"
    );
    assert_eq!(
        normalise("SELECT a FROM t WHERE c IN ('email', 'chat') AND k IN (?, ?)"),
        "SELECT a FROM t WHERE c IN ('email') AND k IN (?)"
    );
    assert!(!kept("BEGIN IMMEDIATE"));
    assert!(!kept("CREATE INDEX x ON t (a)"));
    assert!(kept("WITH x AS (SELECT 1) SELECT * FROM x"));
    assert!(!kept("SELECT pg_advisory_lock($1)"));
    assert!(!kept(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
    ));
    assert!(kept(
        "WITH locked AS (SELECT COUNT(*) AS n FROM (SELECT pg_advisory_xact_lock(1)) l) \
         SELECT t.token_hash FROM locked LEFT JOIN api_tokens t ON t.token_hash = $1"
    ));
}
