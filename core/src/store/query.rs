//! One statement, written once, run on whichever backend the store has: its text and its
//! arguments are data ([`Sql`]), and the pool or transaction it runs on picks the backend in
//! one place. Every statement whose SQL both backends share goes through here; where the SQL
//! really differs (row locking, arrays or JSON for a batch, the hot paths with statement
//! traits of their own) the store matches on the backend itself.
//!
//! Rows are decoded by `FromRow` (named structs or tuples) for both backends at once.

use std::borrow::Cow;

use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqliteRow};
use sqlx::{Arguments, Database, Decode, Executor, FromRow, IntoArguments, Postgres, Sqlite, Type};

use super::sqlite::SqliteDb;
use super::{BeginWrite, Pool};

/// A value bound to a statement's parameter (`$1`, `$2`, … in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Arg<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Text(Cow<'a, str>),
    OptText(Option<Cow<'a, str>>),
    Bool(bool),
    /// Many texts in one parameter: an array on PostgreSQL, a JSON array on SQLite; the
    /// statement reads it with [`Pool::in_list`].
    TextList(Vec<Cow<'a, str>>),
}

impl<'a> Arg<'a> {
    /// `values` as one parameter ([`Arg::TextList`]).
    pub(super) fn list<S: AsRef<str>>(values: &'a [S]) -> Arg<'a> {
        Arg::TextList(values.iter().map(|v| Cow::Borrowed(v.as_ref())).collect())
    }
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::Int(value)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(value: Option<i64>) -> Self {
        Arg::OptInt(value)
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(value))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Arg::Text(Cow::Borrowed(value))
    }
}

impl From<String> for Arg<'_> {
    fn from(value: String) -> Self {
        Arg::Text(Cow::Owned(value))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Arg::OptText(value.map(Cow::Borrowed))
    }
}

impl From<Option<String>> for Arg<'_> {
    fn from(value: Option<String>) -> Self {
        Arg::OptText(value.map(Cow::Owned))
    }
}

/// A statement and the arguments of its parameters.
#[derive(Debug, Clone)]
pub(super) struct Sql<'a> {
    text: Cow<'a, str>,
    args: Vec<Arg<'a>>,
}

/// The statement `text`, to [`Sql::bind`] arguments to.
pub(super) fn sql<'a>(text: impl Into<Cow<'a, str>>) -> Sql<'a> {
    Sql {
        text: text.into(),
        args: Vec::new(),
    }
}

impl<'a> Sql<'a> {
    /// The next parameter's value.
    pub(super) fn bind(mut self, value: impl Into<Arg<'a>>) -> Sql<'a> {
        self.args.push(value.into());
        self
    }

    /// The next parameters' values, in order (a statement put together at run time).
    pub(super) fn bind_all(mut self, values: impl IntoIterator<Item = Arg<'a>>) -> Sql<'a> {
        self.args.extend(values);
        self
    }
}

/// How a backend takes the arguments.
pub(super) trait Backend: Database {
    fn arguments<'q>(args: &'q [Arg<'q>]) -> Result<Self::Arguments<'q>, BoxDynError>;
    fn rows_affected(result: &Self::QueryResult) -> u64;
}

impl Backend for Sqlite {
    fn rows_affected(result: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    fn arguments<'q>(args: &'q [Arg<'q>]) -> Result<SqliteArguments<'q>, BoxDynError> {
        let mut out = SqliteArguments::default();
        for arg in args {
            match arg {
                Arg::Int(v) => out.add(*v)?,
                Arg::OptInt(v) => out.add(*v)?,
                Arg::Text(v) => out.add(v.as_ref())?,
                Arg::OptText(v) => out.add(v.as_deref())?,
                Arg::Bool(v) => out.add(*v)?,
                Arg::TextList(v) => out.add(serde_json::to_string(v)?)?,
            }
        }
        Ok(out)
    }
}

impl Backend for Postgres {
    fn rows_affected(result: &sqlx::postgres::PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn arguments<'q>(args: &'q [Arg<'q>]) -> Result<PgArguments, BoxDynError> {
        let mut out = PgArguments::default();
        for arg in args {
            match arg {
                Arg::Int(v) => out.add(*v)?,
                Arg::OptInt(v) => out.add(*v)?,
                Arg::Text(v) => out.add(v.as_ref())?,
                Arg::OptText(v) => out.add(v.as_deref())?,
                Arg::Bool(v) => out.add(*v)?,
                Arg::TextList(v) => out.add(v.iter().map(|c| c.as_ref()).collect::<Vec<&str>>())?,
            }
        }
        Ok(out)
    }
}

/// A row both backends decode: a `#[derive(sqlx::FromRow)]` struct or a tuple.
pub(super) trait Row:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> Row for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{}

/// One value both backends decode (a statement that selects one column).
pub(super) trait Value:
    for<'r> Decode<'r, Sqlite>
    + Type<Sqlite>
    + for<'r> Decode<'r, Postgres>
    + Type<Postgres>
    + Send
    + Unpin
{
}

impl<T> Value for T where
    T: for<'r> Decode<'r, Sqlite>
        + Type<Sqlite>
        + for<'r> Decode<'r, Postgres>
        + Type<Postgres>
        + Send
        + Unpin
{
}

/// What a statement is run for: its rows, or its first row.
enum Fetch {
    All,
    Optional,
}

async fn rows<'e, DB, E, T>(
    executor: E,
    q: &'e Sql<'e>,
    fetch: Fetch,
) -> Result<Vec<T>, sqlx::Error>
where
    DB: Backend,
    E: Executor<'e, Database = DB>,
    T: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    DB::Arguments<'e>: IntoArguments<'e, DB>,
{
    let args = DB::arguments(&q.args).map_err(sqlx::Error::Encode)?;
    let query = sqlx::query_as_with::<DB, T, _>(&q.text, args);
    match fetch {
        Fetch::All => query.fetch_all(executor).await,
        Fetch::Optional => Ok(query.fetch_optional(executor).await?.into_iter().collect()),
    }
}

async fn affected<'e, DB, E>(executor: E, q: &'e Sql<'e>) -> Result<u64, sqlx::Error>
where
    DB: Backend,
    E: Executor<'e, Database = DB>,
    DB::Arguments<'e>: IntoArguments<'e, DB>,
{
    let args = DB::arguments(&q.args).map_err(sqlx::Error::Encode)?;
    let result = sqlx::query_with::<DB, _>(&q.text, args)
        .execute(executor)
        .await?;
    Ok(DB::rows_affected(&result))
}

/// Where a statement runs: the store's pool, or a transaction on it ([`Pool::on`],
/// [`Tx::on`]).
pub(super) enum On<'c> {
    Sqlite(&'c SqliteDb),
    Postgres(&'c PgPool),
    SqliteTx(&'c mut SqliteConnection),
    PostgresTx(&'c mut PgConnection),
}

impl Pool {
    /// Runs statements on the pool (on SQLite, plain SELECTs on the readers, the rest on the
    /// writer).
    pub(super) fn on(&self) -> On<'_> {
        match self {
            Pool::Sqlite(db) => On::Sqlite(db),
            Pool::Postgres(pool) => On::Postgres(pool),
        }
    }

    /// The condition that `column` is one of the texts in parameter `param`
    /// ([`Arg::TextList`]): the one place the two backends read a list differently.
    pub(super) fn in_list(&self, column: &str, param: &str) -> String {
        in_list(matches!(self, Pool::Postgres(_)), column, param)
    }

    /// A transaction that will write (on SQLite, `BEGIN IMMEDIATE` on the one writer).
    pub(super) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Pool::Sqlite(db) => Tx::Sqlite(db.begin_write().await?),
            Pool::Postgres(pool) => Tx::Postgres(pool.begin_write().await?),
        })
    }
}

/// A transaction on whichever backend the store has; dropped without [`Tx::commit`], it rolls
/// back.
pub(super) enum Tx {
    Sqlite(sqlx::Transaction<'static, Sqlite>),
    Postgres(sqlx::Transaction<'static, Postgres>),
}

impl Tx {
    /// Runs statements inside the transaction.
    pub(super) fn on(&mut self) -> On<'_> {
        match self {
            Tx::Sqlite(tx) => On::SqliteTx(tx),
            Tx::Postgres(tx) => On::PostgresTx(tx),
        }
    }

    pub(super) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
    }

    /// [`Pool::in_list`] inside the transaction.
    pub(super) fn in_list(&self, column: &str, param: &str) -> String {
        in_list(matches!(self, Tx::Postgres(_)), column, param)
    }

    /// Rows sent as one parameter, `param`: a JSON array of objects ([`Records`]), read as the
    /// table `alias` with `columns` (name and type, `text` or `bigint`). The one place the two
    /// backends read rows out of JSON differently; a batch writes many rows with one statement.
    pub(super) fn records(&self, param: &str, alias: &str, columns: &[(&str, &str)]) -> String {
        match self {
            Tx::Sqlite(_) => {
                let fields: Vec<String> = columns
                    .iter()
                    .map(|(name, _)| format!("json_extract(value, '$.{name}') AS {name}"))
                    .collect();
                format!(
                    "(SELECT {} FROM json_each({param})) AS {alias}",
                    fields.join(", ")
                )
            }
            Tx::Postgres(_) => {
                let fields: Vec<String> = columns
                    .iter()
                    .map(|(name, kind)| format!("{name} {kind}"))
                    .collect();
                format!(
                    "json_to_recordset({param}::json) AS {alias}({})",
                    fields.join(", ")
                )
            }
        }
    }
}

fn in_list(postgres: bool, column: &str, param: &str) -> String {
    if postgres {
        format!("{column} = ANY({param}::text[])")
    } else {
        format!("{column} IN (SELECT value FROM json_each({param}))")
    }
}

/// Rows for [`Tx::records`]: each an object of its columns' values.
#[derive(Debug, Default)]
pub(super) struct Records(Vec<serde_json::Value>);

impl Records {
    pub(super) fn push(&mut self, row: serde_json::Value) {
        self.0.push(row);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The rows as the one argument of their parameter.
    pub(super) fn arg(self) -> Arg<'static> {
        Arg::Text(Cow::Owned(serde_json::Value::Array(self.0).to_string()))
    }
}

/// Writing statements sent together, in order, each reading its rows from one parameter
/// ([`Tx::records`]), as one statement text with every part's parameter: on PostgreSQL one
/// statement (each part but the last a data-modifying CTE), one round trip for all of them;
/// on SQLite the parts one after another, one hand-over to the connection's thread for all
/// of them. On PostgreSQL every part sees the rows as they were before the statement, so no
/// part may read what another part writes.
pub(super) struct Chain {
    postgres: bool,
    parts: Vec<(String, Records)>,
}

impl Chain {
    pub(super) fn new(tx: &Tx) -> Chain {
        Chain {
            postgres: matches!(tx, Tx::Postgres(_)),
            parts: Vec::new(),
        }
    }

    /// The parameter the next part reads its rows from.
    pub(super) fn param(&self) -> String {
        format!("${}", self.parts.len() + 1)
    }

    /// A part whose rows are in the parameter [`Chain::param`] named before it.
    pub(super) fn push(&mut self, statement: String, rows: Records) {
        self.parts.push((statement, rows));
    }

    pub(super) async fn run(self, tx: &mut Tx) -> Result<(), sqlx::Error> {
        if self.parts.is_empty() {
            return Ok(());
        }
        let last = self.parts.len() - 1;
        let mut text = String::new();
        let mut args = Vec::with_capacity(self.parts.len());
        for (n, (statement, rows)) in self.parts.into_iter().enumerate() {
            text.push_str(&match n {
                0 if self.postgres && last > 0 => format!("WITH w0 AS ({statement})"),
                0 => statement,
                _ if !self.postgres => format!(";\n{statement}"),
                n if n == last => format!(" {statement}"),
                n => format!(", w{n} AS ({statement})"),
            });
            args.push(rows.arg());
        }
        tx.on().execute(sql(text).bind_all(args)).await?;
        Ok(())
    }
}

impl On<'_> {
    async fn fetch<T: Row>(self, q: Sql<'_>, fetch: Fetch) -> Result<Vec<T>, sqlx::Error> {
        match self {
            On::Sqlite(db) => rows::<Sqlite, _, T>(db, &q, fetch).await,
            On::Postgres(pool) => rows::<Postgres, _, T>(pool, &q, fetch).await,
            On::SqliteTx(conn) => rows::<Sqlite, _, T>(conn, &q, fetch).await,
            On::PostgresTx(conn) => rows::<Postgres, _, T>(conn, &q, fetch).await,
        }
    }

    /// Every row the statement returns.
    pub(super) async fn all<T: Row>(self, q: Sql<'_>) -> Result<Vec<T>, sqlx::Error> {
        self.fetch(q, Fetch::All).await
    }

    /// The first row, if any.
    pub(super) async fn optional<T: Row>(self, q: Sql<'_>) -> Result<Option<T>, sqlx::Error> {
        Ok(self.fetch(q, Fetch::Optional).await?.into_iter().next())
    }

    /// The one row (an error if there is none).
    pub(super) async fn one<T: Row>(self, q: Sql<'_>) -> Result<T, sqlx::Error> {
        self.optional(q).await?.ok_or(sqlx::Error::RowNotFound)
    }

    /// The first column of every row.
    pub(super) async fn column<T: Value>(self, q: Sql<'_>) -> Result<Vec<T>, sqlx::Error> {
        let rows: Vec<(T,)> = self.all(q).await?;
        Ok(rows.into_iter().map(|(value,)| value).collect())
    }

    /// The first column of the one row.
    pub(super) async fn value<T: Value>(self, q: Sql<'_>) -> Result<T, sqlx::Error> {
        let (value,): (T,) = self.one(q).await?;
        Ok(value)
    }

    /// The first column of the first row, if any.
    pub(super) async fn optional_value<T: Value>(
        self,
        q: Sql<'_>,
    ) -> Result<Option<T>, sqlx::Error> {
        let row: Option<(T,)> = self.optional(q).await?;
        Ok(row.map(|(value,)| value))
    }

    /// Runs the statement; how many rows it changed.
    pub(super) async fn execute(self, q: Sql<'_>) -> Result<u64, sqlx::Error> {
        match self {
            On::Sqlite(db) => affected::<Sqlite, _>(db, &q).await,
            On::Postgres(pool) => affected::<Postgres, _>(pool, &q).await,
            On::SqliteTx(conn) => affected::<Sqlite, _>(conn, &q).await,
            On::PostgresTx(conn) => affected::<Postgres, _>(conn, &q).await,
        }
    }
}
