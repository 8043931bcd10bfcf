//! A customer's credits beyond the order ledger: lots, spends, holds, expiries and
//! adjustments (the rules are in [`crate::spending`]).
//!
//! Every request is carried out inside one transaction (the spend API's spends, holds and
//! adjustments share theirs with others in a lane, [`CreditWriter`]: one commit for many):
//! 1. the customer is locked (PostgreSQL: an advisory lock per customer; SQLite: the writer
//!    already is one), so two spends never both read "3 left";
//! 2. its Idempotency-Key is claimed: a second request under the key waits for the first to
//!    commit (PostgreSQL's unique index, SQLite's one writer) and gets its answer;
//! 3. the customer's lots are brought up to date (a lot per unlocked order, expiries due) and
//!    kept in memory ([`Books`]) while the transaction's requests move them;
//! 4. the credits move and the answer is written beside them, so a crash before the commit
//!    leaves neither, and a retry acts once.
//!
//! A batch does each step once for all of its requests: the customers locked, in one
//! statement (PostgreSQL); the callers' API tokens (so a request needs no round trip of its
//! own for its token, and a token revoked before the batch writes nothing) and the keys read
//! with the accounts (lots and holds), in one; then the ledger rows (movements, draws, what
//! each lot gave) and the keys with their answers written, in one ([`Chain`]: data-modifying
//! CTEs on PostgreSQL, one text of four statements on SQLite): a batch of spends costs three
//! statements on PostgreSQL and two on SQLite, however many spends it holds. The ids it makes
//! lead with their instant ([`crate::token::ordered_id`]), so its rows go to the last pages of
//! the id indexes: on SQLite every page a commit dirties is written to the log.
//!
//! Every transaction locks its customers before it claims a key: a lane's batch all of its
//! customers first, in one order; any other request its one customer (a capture or release
//! its hold's). Two transactions then never wait for each other in a circle on customers;
//! only one client reusing keys at the same moment across customers could still make two
//! batches wait on each other's keys, and PostgreSQL ends that after its deadlock timeout
//! (the batch is carried out again one by one). A request
//! under a key taken earlier in the same transaction waits for its commit, then gets its
//! answer (never an answer that could still roll back).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::Credits;
use super::lanes::{Batch, Lanes};
use super::query::{Arg, Chain, Records, Tx, sql};
use super::tokens::LiveToken;
use super::{Backend, Store};
use crate::audit::{Actor, AuditAction, AuditRecord};
use crate::error::StoreError;
use crate::fulfilment::Packages;
use crate::spending::{
    AdjustmentView, Answer, Applied, BalanceView, Cause, CreditOutcome, CreditRequest, CreditWrite,
    Draw, Expiring, HoldStatus, HoldView, IdempotencyKey, KeyScope, Keyed, LedgerCursor,
    LedgerPage, LedgerRow, LotView, SpendView,
};

/// One lot as the customer's figures need it.
#[derive(Debug, Clone)]
struct Lot {
    lot_id: String,
    order_id: Option<String>,
    expires_at: Option<i64>,
    expired: bool,
    created_at: i64,
    /// What the lot holds: an order's ledger, or an adjustment's credits.
    granted: i64,
    /// What spends, negative adjustments and the expiry took from it.
    drawn: i64,
    /// The part of `drawn` the expiry took.
    expired_credits: i64,
}

impl Lot {
    fn remaining(&self) -> i64 {
        self.granted - self.drawn
    }

    fn spendable(&self, now: i64) -> bool {
        !self.expired && self.expires_at.is_none_or(|at| at > now) && self.remaining() > 0
    }
}

type LotRow = (
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
    i64,
);

/// A lot's row and what it holds and gave.
macro_rules! lot_fields {
    () => {
        "c.lot_id, c.order_id, c.expires_at, c.expired_at, c.created_at, \
        CASE WHEN c.order_id IS NULL THEN c.credits ELSE \
            (SELECT CAST(COALESCE(SUM(l.delta), 0) AS BIGINT) FROM credit_ledger l \
             WHERE l.order_id = c.order_id) END, \
        c.drawn, c.expired_credits"
    };
}
const LOT_COLUMNS: &str = concat!("SELECT ", lot_fields!(), " FROM credit_lots c");

/// What a row of [`lots_sql`] is (its tenth column; 0: a lot written).
const LOT_UNWRITTEN: i64 = 1;
const ACTIVE_HOLD: i64 = 2;
const KEY_ROW: i64 = 3;
const TOKEN_ROW: i64 = 4;

/// Customers' lots (the customers a JSON array or text array in `$1`), (flagged, `package`
/// named) a lot as it will be written for each unlocked order of theirs that has none yet,
/// and (flagged) their active holds (the hold's id, expiry and credits in the lot's id,
/// expiry and credits): one statement, each row with its customer last. With `keys`,
/// (flagged) also the committed rows of the keys sent as records in that parameter
/// ([`keys_rows`]: the key, its request's fingerprint, status and answer in the lot's id,
/// order, created and package, its scope in the customer's place). With `tokens`, (flagged)
/// also the live API tokens among the hashes in that parameter
/// ([`super::tokens::live_sql`]: the hash, the token's id and its last use in the lot's id,
/// order and expiry). A batch reads its callers' tokens, its keys and its accounts in one
/// round trip.
fn lots_sql(tx: &Tx, keys: Option<&str>, tokens: Option<&str>) -> String {
    let (lots, orders, holds) = (
        tx.in_list("c.customer_email", "$1"),
        tx.in_list("o.customer_email", "$1"),
        tx.in_list("h.customer_email", "$1"),
    );
    let tokens = tokens.map_or_else(String::new, |param| {
        format!(
            " UNION ALL \
             SELECT t.token_hash, t.token_id, t.last_used_at, NULL, CAST(0 AS BIGINT), \
                 CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), NULL, \
                 CAST({TOKEN_ROW} AS BIGINT), '' \
             FROM ({}) t",
            super::tokens::live_sql(tx, param)
        )
    });
    let keys = if let Some(param) = keys {
        format!(
            " UNION ALL \
             SELECT r.idempotency_key, r.request_hash, NULL, NULL, CAST(r.status AS BIGINT), \
                 CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), r.body, \
                 CAST({KEY_ROW} AS BIGINT), r.scope \
             FROM {}",
            keys_rows(tx, param)
        )
    } else {
        String::new()
    };
    format!(
        "SELECT * FROM ({LOT_COLUMNS_FLAGGED} WHERE {lots} \
         UNION ALL \
         SELECT 'order:' || o.order_id, o.order_id, NULL, NULL, \
             (SELECT MIN(u.created_at) FROM credit_ledger u \
              WHERE u.order_id = o.order_id AND u.kind = 'unlock'), \
             (SELECT CAST(COALESCE(SUM(l.delta), 0) AS BIGINT) FROM credit_ledger l \
              WHERE l.order_id = o.order_id), \
             CAST(0 AS BIGINT), CAST(0 AS BIGINT), o.package, CAST({LOT_UNWRITTEN} AS BIGINT), \
             o.customer_email \
         FROM orders o WHERE {orders} \
           AND EXISTS (SELECT 1 FROM credit_ledger u \
                       WHERE u.order_id = o.order_id AND u.kind = 'unlock') \
           AND NOT EXISTS (SELECT 1 FROM credit_lots c \
                           WHERE c.lot_id = 'order:' || o.order_id) \
         UNION ALL \
         SELECT h.hold_id, NULL, h.expires_at, NULL, h.created_at, h.credits, \
             CAST(0 AS BIGINT), CAST(0 AS BIGINT), NULL, CAST({ACTIVE_HOLD} AS BIGINT), h.customer_email \
         FROM credit_holds h WHERE {holds} AND h.status = 'active'{keys}{tokens}) lots"
    )
}

/// [`LOT_COLUMNS`] and the three columns of a lot not written yet: its package, 1, and
/// (on every row) its customer.
const LOT_COLUMNS_FLAGGED: &str = concat!(
    "SELECT ",
    lot_fields!(),
    ", CAST(NULL AS TEXT), CAST(0 AS BIGINT), c.customer_email FROM credit_lots c"
);

type FlaggedLotRow = (
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
    i64,
    Option<String>,
    i64,
    String,
);

/// The order lots are drawn in: soonest to expire first (credits that never expire last),
/// then the oldest.
fn draw_order(lot: &Lot) -> (bool, Option<i64>, i64, String) {
    (
        lot.expires_at.is_none(),
        lot.expires_at,
        lot.created_at,
        lot.lot_id.clone(),
    )
}

fn lot(row: LotRow) -> Lot {
    let (lot_id, order_id, expires_at, expired_at, created_at, granted, drawn, expired_credits) =
        row;
    Lot {
        lot_id,
        order_id,
        expires_at,
        expired: expired_at.is_some(),
        created_at,
        granted,
        drawn,
        expired_credits,
    }
}

impl Lot {
    fn view(&self, now: i64) -> LotView {
        LotView {
            lot_id: self.lot_id.clone(),
            order_id: self.order_id.clone(),
            credits: self.granted,
            remaining: self.remaining(),
            expires_at: self.expires_at,
            expired: self.expired || self.expires_at.is_some_and(|at| at <= now),
            created_at: self.created_at,
        }
    }
}

const HOLD_COLUMNS: &str = "hold_id, customer_email, credits, reference, metadata, status, \
    captured, spend_id, expires_at, created_at, settled_at";

type HoldRow = (
    String,
    String,
    i64,
    String,
    Option<String>,
    String,
    Option<i64>,
    Option<String>,
    i64,
    i64,
    Option<i64>,
);

/// A customer's credits inside a request's transaction, locked for it.
#[derive(Clone)]
struct Account {
    email: String,
    lots: Vec<Lot>,
    held: i64,
    /// The first instant these figures change by themselves: a lot's or an active hold's
    /// expiry. Past it, the account is read again.
    due: Option<i64>,
    /// Lots this transaction marked expired.
    expired_now: u64,
    /// Holds this transaction found past their expiry and released.
    holds_expired_now: u64,
}

impl Account {
    /// `email`'s credits, locked here, brought up to date inside `tx`: lots written for
    /// orders unlocked since, expiries due applied.
    async fn open(
        tx: &mut Tx,
        email: &str,
        packages: &Packages,
        now: i64,
    ) -> Result<Account, StoreError> {
        lock_customer(tx, email).await?;
        Account::open_all(tx, &[(email, now)], packages, &[], &[])
            .await?
            .0
            .pop()
            .ok_or_else(|| StoreError::Missing("an account just read".to_owned()))
    }

    /// The credits of the customers of `at` (locked already), in their order, each as of its
    /// own instant, the committed rows of `keys` and the live tokens among `tokens`: read
    /// with one statement for all of them.
    async fn open_all(
        tx: &mut Tx,
        at: &[(&str, i64)],
        packages: &Packages,
        keys: &[KeyName<'_>],
        tokens: &[&str],
    ) -> Result<(Vec<Account>, Found), StoreError> {
        let emails: Vec<&str> = at.iter().map(|&(email, _)| email).collect();
        let LotsAndHolds {
            mut lots,
            mut holds,
            found,
        } = read_lots(tx, &emails, packages, keys, tokens).await?;
        let mut accounts = Vec::with_capacity(at.len());
        for &(email, now) in at {
            let lots = lots.remove(email).unwrap_or_default();
            let holds = holds.remove(email).unwrap_or_default();
            accounts.push(Account::assemble(tx, email, lots, &holds, now).await?);
        }
        Ok((accounts, found))
    }

    /// `email`'s account from its lots and active holds (credits, expiry) as read: what is
    /// due by `now` expired.
    async fn assemble(
        tx: &mut Tx,
        email: &str,
        mut lots: Vec<Lot>,
        holds: &[(i64, i64)],
        now: i64,
    ) -> Result<Account, StoreError> {
        lots.sort_by_cached_key(draw_order);
        let holds_expired_now = if holds.iter().any(|&(_, at)| at <= now) {
            tx.on()
                .execute(
                    sql(
                        "UPDATE credit_holds SET status = 'expired', settled_at = $2 \
                         WHERE customer_email = $1 AND status = 'active' AND expires_at <= $2",
                    )
                    .bind(email)
                    .bind(now),
                )
                .await?
        } else {
            0
        };
        let held = holds
            .iter()
            .filter(|&&(_, at)| at > now)
            .map(|&(credits, _)| credits)
            .sum();
        let due = lots
            .iter()
            .filter(|l| !l.expired)
            .filter_map(|l| l.expires_at)
            .chain(holds.iter().map(|&(_, at)| at))
            .filter(|&at| at > now)
            .min();
        let mut expired_now = 0;
        for lot in lots
            .iter_mut()
            .filter(|l| l.expired || l.expires_at.is_some_and(|at| at <= now))
        {
            let mut first = false;
            if !lot.expired {
                let marked = tx
                    .on()
                    .execute(
                        sql("UPDATE credit_lots SET expired_at = $2 \
                             WHERE lot_id = $1 AND expired_at IS NULL")
                        .bind(&lot.lot_id)
                        .bind(now),
                    )
                    .await?;
                lot.expired = true;
                expired_now += marked;
                first = marked == 1;
            }
            // An expired lot keeps only what spends took beyond what it holds (owed, after
            // a refund of spent credits): whatever its ledger did since, expiry takes what is
            // left, or gives back what a later refund or dispute took from expired credits.
            let spent = lot.drawn - lot.expired_credits;
            let kept = (lot.granted - spent).min(0);
            let correction = lot.remaining() - kept;
            if correction != 0 {
                // The expiry itself once per lot; each later correction under its own id.
                let movement_id = if first {
                    format!("expire:{}", lot.lot_id)
                } else {
                    format!("expire:{}:{}", lot.lot_id, new_id("c", now)?)
                };
                let movement = Movement {
                    movement_id,
                    kind: "expire",
                    delta: -correction,
                    lot_id: Some(&lot.lot_id),
                    ..Movement::new(email, now)
                };
                let draw = [Draw {
                    lot_id: lot.lot_id.clone(),
                    credits: correction,
                }];
                movement.write(tx, &draw).await?;
                tx.on()
                    .execute(
                        sql(
                            "UPDATE credit_lots SET expired_credits = expired_credits + $2 \
                             WHERE lot_id = $1",
                        )
                        .bind(&lot.lot_id)
                        .bind(correction),
                    )
                    .await?;
                lot.drawn += correction;
                lot.expired_credits += correction;
            }
        }
        Ok(Account {
            email: email.to_owned(),
            lots,
            held,
            due,
            expired_now,
            holds_expired_now,
        })
    }

    /// Something of the account (a new hold, a new lot) expires at `at`.
    fn falls_due(&mut self, at: i64) {
        self.due = Some(self.due.map_or(at, |due| due.min(at)));
    }

    fn balance(&self) -> i64 {
        self.lots.iter().map(Lot::remaining).sum()
    }

    fn available(&self) -> i64 {
        (self.balance() - self.held).max(0)
    }

    /// The lots `credits` come from, if `available` (what may be taken) covers them and the
    /// balance is above zero; the in-memory lots are drawn down.
    fn draw(&mut self, credits: i64, available: i64, now: i64) -> Option<Vec<Draw>> {
        let spendable: i64 = self
            .lots
            .iter()
            .filter(|l| l.spendable(now))
            .map(Lot::remaining)
            .sum();
        // (`spendable` < `available` is unreachable while available ≤ balance ≤ the spendable
        // lots' sum; refused rather than written short, and the lots left as they were.)
        if self.balance() <= 0 || credits > available || credits > spendable {
            return None;
        }
        let mut left = credits;
        let mut draws = Vec::new();
        for lot in self.lots.iter_mut().filter(|l| l.spendable(now)) {
            if left == 0 {
                break;
            }
            let take = left.min(lot.remaining());
            lot.drawn += take;
            left -= take;
            draws.push(Draw {
                lot_id: lot.lot_id.clone(),
                credits: take,
            });
        }
        Some(draws)
    }

    fn insufficient(&self, available: i64) -> CreditOutcome {
        CreditOutcome::Insufficient {
            balance: self.balance(),
            available,
        }
    }

    fn view(&self, now: i64) -> BalanceView {
        let balance = self.balance();
        let expiring = self
            .lots
            .iter()
            .filter(|l| l.spendable(now) && l.expires_at.is_some())
            .min_by_key(|l| l.expires_at)
            .and_then(|l| {
                l.expires_at.map(|at| Expiring {
                    credits: l.remaining(),
                    at,
                })
            });
        BalanceView {
            customer_email: self.email.clone(),
            balance,
            available: self.available(),
            held: self.held,
            owed: (-balance).max(0),
            expiring,
            lots: self.lots.iter().map(|l| l.view(now)).collect(),
        }
    }
}

/// What [`read_lots`] read: by customer, the keys' rows and the live tokens.
#[derive(Default)]
struct LotsAndHolds {
    lots: HashMap<String, Vec<Lot>>,
    /// The active holds: credits, expiry.
    holds: HashMap<String, Vec<(i64, i64)>>,
    found: Found,
}

/// What a read of accounts found besides them: the committed rows of the keys and the live
/// tokens it was asked for.
#[derive(Default)]
struct Found {
    keys: FirstRequests,
    tokens: Vec<LiveToken>,
}

/// The lots and active holds of `emails`, by customer, writing first the lot of each unlocked
/// order that has none (its expiry counts from the unlock); with the same statement, the
/// committed rows of `keys` and the live tokens among `tokens` (hashes).
async fn read_lots(
    tx: &mut Tx,
    emails: &[&str],
    packages: &Packages,
    keys: &[KeyName<'_>],
    tokens: &[&str],
) -> Result<LotsAndHolds, StoreError> {
    let mut args = vec![Arg::list(emails)];
    let mut param = |arg| {
        args.push(arg);
        format!("${}", args.len())
    };
    let keys_param = (!keys.is_empty()).then(|| param(key_records(keys).arg()));
    let tokens_param = (!tokens.is_empty()).then(|| param(Arg::list(tokens)));
    let statement = lots_sql(tx, keys_param.as_deref(), tokens_param.as_deref());
    let rows: Vec<FlaggedLotRow> = tx.on().all(sql(statement).bind_all(args)).await?;
    let mut read = LotsAndHolds::default();
    for row in rows {
        let (lot_id, order_id, expires_at, expired_at, created_at) =
            (row.0, row.1, row.2, row.3, row.4);
        let (granted, drawn, expired_credits, package, flag, email) =
            (row.5, row.6, row.7, row.8, row.9, row.10);
        let expires_at = match flag {
            KEY_ROW => {
                let first = FirstRequest {
                    fingerprint: order_id.unwrap_or_default(),
                    status: created_at,
                    body: package.unwrap_or_default(),
                };
                read.found.keys.insert((email, lot_id), first);
                continue;
            }
            TOKEN_ROW => {
                read.found.tokens.push(LiveToken {
                    hash: lot_id,
                    token_id: order_id.unwrap_or_default(),
                    last_used_at: expires_at,
                });
                continue;
            }
            ACTIVE_HOLD => {
                let expires_at =
                    expires_at.ok_or_else(|| StoreError::Missing("a hold's expiry".to_owned()))?;
                read.holds
                    .entry(email)
                    .or_default()
                    .push((granted, expires_at));
                continue;
            }
            LOT_UNWRITTEN => {
                let expires_at = packages
                    .lasts_ms(package.as_deref())
                    .map(|ms| created_at.saturating_add(ms));
                let written = tx
                    .on()
                    .execute(
                        sql("INSERT INTO credit_lots \
                             (lot_id, customer_email, order_id, credits, expires_at, created_at) \
                             VALUES ($1, $2, $3, 0, $4, $5) ON CONFLICT DO NOTHING")
                        .bind(lot_id.as_str())
                        .bind(email.as_str())
                        .bind(order_id.as_deref())
                        .bind(expires_at)
                        .bind(created_at),
                    )
                    .await?;
                if written == 0 {
                    // Written since the read, by a request that holds no lock on this customer
                    // (none should): read again rather than count it twice.
                    return Box::pin(read_lots(tx, emails, packages, keys, tokens)).await;
                }
                expires_at
            }
            _ => expires_at,
        };
        read.lots.entry(email).or_default().push(Lot {
            lot_id,
            order_id,
            expires_at,
            expired: expired_at.is_some(),
            created_at,
            granted,
            drawn,
            expired_credits,
        });
    }
    Ok(read)
}

/// One row of `credit_movements`.
struct Movement<'a> {
    movement_id: String,
    email: &'a str,
    kind: &'static str,
    delta: i64,
    reference: Option<&'a str>,
    metadata: Option<String>,
    hold_id: Option<&'a str>,
    lot_id: Option<&'a str>,
    actor: Option<&'a str>,
    reason: Option<&'a str>,
    key: Option<&'a str>,
    now: i64,
}

impl<'a> Movement<'a> {
    fn new(email: &'a str, now: i64) -> Movement<'a> {
        Movement {
            movement_id: String::new(),
            email,
            kind: "spend",
            delta: 0,
            reference: None,
            metadata: None,
            hold_id: None,
            lot_id: None,
            actor: None,
            reason: None,
            key: None,
            now,
        }
    }

    /// Writes the movement and its draws now.
    async fn write(&self, tx: &mut Tx, draws: &[Draw]) -> Result<(), StoreError> {
        let mut ledger = Ledger::default();
        ledger.add(self, draws);
        ledger.write(tx).await
    }
}

/// Movements and their draws to be written together: a lane's batch writes the rows of all of
/// its requests with three statements, sent as one with the batch's answers ([`Chain`]).
#[derive(Default)]
struct Ledger {
    movements: Records,
    draws: Records,
    /// What each lot gave, summed.
    drawn: BTreeMap<String, i64>,
}

impl Ledger {
    fn add(&mut self, movement: &Movement<'_>, draws: &[Draw]) {
        let m = movement;
        self.movements.push(serde_json::json!({
            "n": self.movements.len(), "movement_id": m.movement_id, "customer_email": m.email, "kind": m.kind,
            "delta": m.delta, "reference": m.reference, "metadata": m.metadata,
            "hold_id": m.hold_id, "lot_id": m.lot_id, "actor": m.actor, "reason": m.reason,
            "idempotency_key": m.key, "created_at": m.now,
        }));
        for draw in draws {
            self.draws.push(serde_json::json!({
                "movement_id": m.movement_id, "lot_id": draw.lot_id, "credits": draw.credits,
            }));
            *self.drawn.entry(draw.lot_id.clone()).or_default() += draw.credits;
        }
    }

    /// Writes what was added (in the order it was added) and forgets it.
    async fn write(&mut self, tx: &mut Tx) -> Result<(), StoreError> {
        let mut chain = Chain::new(tx);
        std::mem::take(self).chain(tx, &mut chain);
        chain.run(tx).await?;
        Ok(())
    }

    /// The statements that write what was added (none when nothing was): the movements, in
    /// the order they were added, their draws, and what each lot gave.
    fn chain(self, tx: &Tx, chain: &mut Chain) {
        let Ledger {
            movements,
            draws,
            drawn,
        } = self;
        if movements.is_empty() {
            return;
        }
        let columns = [
            ("n", "bigint"),
            ("movement_id", "text"),
            ("customer_email", "text"),
            ("kind", "text"),
            ("delta", "bigint"),
            ("reference", "text"),
            ("metadata", "text"),
            ("hold_id", "text"),
            ("lot_id", "text"),
            ("actor", "text"),
            ("reason", "text"),
            ("idempotency_key", "text"),
            ("created_at", "bigint"),
        ];
        let names = columns[1..].iter().map(|(name, _)| *name);
        let names = names.collect::<Vec<_>>().join(", ");
        let statement = format!(
            "INSERT INTO credit_movements ({names}) SELECT {names} FROM {} ORDER BY m.n",
            tx.records(&chain.param(), "m", &columns)
        );
        chain.push(statement, movements);
        if draws.is_empty() {
            return;
        }
        let columns = [
            ("movement_id", "text"),
            ("lot_id", "text"),
            ("credits", "bigint"),
        ];
        let statement = format!(
            "INSERT INTO credit_draws (movement_id, lot_id, credits) \
             SELECT movement_id, lot_id, credits FROM {}",
            tx.records(&chain.param(), "d", &columns)
        );
        chain.push(statement, draws);
        let mut lots = Records::default();
        for (lot_id, credits) in drawn {
            lots.push(serde_json::json!({ "lot_id": lot_id, "credits": credits }));
        }
        let statement = format!(
            "UPDATE credit_lots SET drawn = drawn + d.credits FROM {} \
             WHERE credit_lots.lot_id = d.lot_id",
            tx.records(
                &chain.param(),
                "d",
                &[("lot_id", "text"), ("credits", "bigint")]
            )
        );
        chain.push(statement, lots);
    }
}

/// The accounts a transaction has open, each read once and kept up to date in memory as its
/// requests move credits, and the ledger rows they have yet to write. Every customer here is
/// locked by the transaction.
struct Books<'p> {
    packages: &'p Packages,
    accounts: HashMap<String, Account>,
    ledger: Ledger,
}

impl<'p> Books<'p> {
    fn new(packages: &'p Packages) -> Books<'p> {
        Books {
            packages,
            accounts: HashMap::new(),
            ledger: Ledger::default(),
        }
    }

    /// Reads the accounts of the customers of `at` (locked already) at once, each as of its
    /// own instant.
    async fn open(&mut self, tx: &mut Tx, at: &[(&str, i64)]) -> Result<(), StoreError> {
        self.open_reading(tx, at, &[], &[]).await.map(drop)
    }

    /// [`Books::open`], reading with the same statement the committed rows of `keys` and the
    /// live tokens among `tokens`.
    async fn open_reading(
        &mut self,
        tx: &mut Tx,
        at: &[(&str, i64)],
        keys: &[KeyName<'_>],
        tokens: &[&str],
    ) -> Result<Found, StoreError> {
        self.ledger.write(tx).await?;
        let (accounts, found) = Account::open_all(tx, at, self.packages, keys, tokens).await?;
        for account in accounts {
            self.accounts.insert(account.email.clone(), account);
        }
        Ok(found)
    }

    /// `email`'s account (locked already) as of `now`: read again when it was not read yet
    /// or something of it fell due since.
    async fn account(
        &mut self,
        tx: &mut Tx,
        email: &str,
        now: i64,
    ) -> Result<(&mut Account, &mut Ledger), StoreError> {
        let fresh = self
            .accounts
            .get(email)
            .is_some_and(|a| a.due.is_none_or(|due| now < due));
        if !fresh {
            self.open(tx, &[(email, now)]).await?;
        }
        let account = self
            .accounts
            .get_mut(email)
            .ok_or_else(|| StoreError::Missing("an account just read".to_owned()))?;
        Ok((account, &mut self.ledger))
    }
}

/// A new id of a movement, hold or expiry correction made at `now` ([`crate::token::ordered_id`]:
/// a batch's rows go to the last pages of their tables' id indexes).
fn new_id(prefix: &str, now: i64) -> Result<String, StoreError> {
    crate::token::ordered_id(prefix, now).map_err(|e| StoreError::Random(e.to_string()))
}

fn metadata_text(value: Option<&serde_json::Value>) -> Option<String> {
    value.map(serde_json::Value::to_string)
}

fn metadata_value(text: Option<String>) -> Option<serde_json::Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

async fn read_hold(tx: &mut Tx, hold_id: &str) -> Result<Option<HoldRow>, StoreError> {
    Ok(tx
        .on()
        .optional(
            sql(format!(
                "SELECT {HOLD_COLUMNS} FROM credit_holds WHERE hold_id = $1"
            ))
            .bind(hold_id),
        )
        .await?)
}

fn hold_view(row: HoldRow, account: &Account) -> Result<HoldView, StoreError> {
    let (
        hold_id,
        customer_email,
        credits,
        reference,
        metadata,
        status,
        captured,
        spend_id,
        expires_at,
        created_at,
        settled_at,
    ) = row;
    Ok(HoldView {
        hold_id,
        customer_email,
        credits,
        reference,
        metadata: metadata_value(metadata),
        status: HoldStatus::parse(&status).ok_or(StoreError::UnknownValue(status))?,
        captured,
        spend_id,
        expires_at,
        created_at,
        settled_at,
        balance_after: account.balance(),
        available_after: account.available(),
    })
}

impl Credits<'_> {
    /// Carries out `request` under `key` (once: a repeat gets the first answer), and
    /// returns the answer `render` made of what it came to.
    pub async fn apply(
        self,
        scope: KeyScope,
        key: &IdempotencyKey,
        request: &CreditRequest,
        packages: &Packages,
        now: i64,
        render: impl FnOnce(&CreditOutcome) -> Answer + Send,
    ) -> Result<Keyed, StoreError> {
        let mut tx = self.pool.begin().await?;
        // The customer before the key, as a lane's batch takes them: a capture or release
        // locks its hold's customer first (their hold cannot move to another customer).
        let customer = match request {
            CreditRequest::Capture { hold_id, .. } | CreditRequest::Release { hold_id } => {
                read_hold(&mut tx, hold_id).await?.map(|row| row.1)
            }
            _ => request.customer().map(str::to_owned),
        };
        if let Some(email) = &customer {
            lock_customer(&mut tx, email).await?;
        }
        let claim = KeyClaim {
            scope,
            key,
            fingerprint: request.fingerprint(),
            now,
        };
        let claimed = claim_keys(&mut tx, std::slice::from_ref(&claim)).await?;
        if let Some(keyed) = claimed.into_iter().next().flatten() {
            return Ok(keyed);
        }
        let mut books = Books::new(packages);
        let outcome = carry_out(&mut tx, request, key, &mut books, now).await?;
        let answer = render(&outcome);
        write_out(&mut tx, &mut books, &[(&claim, &answer)], KeyRows::Claimed).await?;
        crate::failpoint::hit("credits.before_commit").await;
        tx.commit().await?;
        Ok(Keyed::Fresh(answer))
    }

    /// Carries out `writes` in one transaction (one commit for all of them): each once
    /// under its key, as [`Credits::apply`] would one by one, with a few statements for the
    /// whole batch: the keys read with the customers' accounts (each read once, all of them
    /// together), the ledger rows and the keys with their answers written together. On
    /// PostgreSQL the customers are locked first, in one order for every batch, so two
    /// batches never wait for each other in a circle. A write under a key an earlier write of
    /// the batch took is carried out after the commit, on its own: it gets that write's
    /// answer.
    pub async fn apply_batch(
        self,
        writes: &[&CreditWrite],
        packages: &Packages,
    ) -> Result<Vec<Applied>, StoreError> {
        // A capture or release names no customer to lock first: it runs on its own.
        debug_assert!(writes.iter().all(|w| w.request.customer().is_some()));
        let mut tx = self.pool.begin().await?;
        let mut customers: Vec<&str> = writes.iter().filter_map(|w| w.request.customer()).collect();
        customers.sort_unstable();
        customers.dedup();
        lock_customers(&mut tx, &customers).await?;
        // The callers' API tokens, every key of the batch and the accounts of its customers
        // (each as of their first request here, as one by one would read them), all with one
        // statement. A write whose token is unknown or revoked (as this transaction sees it)
        // moves nothing and claims no key. The keys are written with their answers below
        // (one row version each): should another transaction take one meanwhile, the write
        // fails, and the batch's requests are carried out again one by one, each claiming its
        // key first.
        let mut hashes: Vec<&str> = writes
            .iter()
            .filter_map(|w| w.token_hash.as_deref())
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        let mut seen = HashSet::new();
        let at: Vec<(&str, i64)> = writes
            .iter()
            .filter_map(|w| w.request.customer().map(|email| (email, w.now)))
            .filter(|&(email, _)| seen.insert(email))
            .collect();
        let mut seen = HashSet::new();
        let keys: Vec<KeyName<'_>> = writes
            .iter()
            .map(|w| (w.scope, w.key.as_str()))
            .filter(|&name| seen.insert(name))
            .collect();
        let mut books = Books::new(packages);
        let Found {
            keys: mut earlier,
            tokens,
        } = books.open_reading(&mut tx, &at, &keys, &hashes).await?;
        let now = writes.iter().map(|w| w.now).max().unwrap_or_default();
        let live = super::tokens::live(&mut tx, tokens, now).await?;
        let mut applied: Vec<Option<Applied>> = writes
            .iter()
            .map(|w| {
                let refused = w.token_hash.as_ref().is_some_and(|h| !live.contains(h));
                refused.then_some(Applied {
                    keyed: Keyed::Unauthorized,
                    result: "",
                })
            })
            .collect();
        let admitted: Vec<usize> = (0..writes.len())
            .filter(|&i| applied[i].is_none())
            .collect();
        if admitted.is_empty() {
            tx.commit().await?;
            return Ok(applied.into_iter().flatten().collect());
        }
        // A key's first request in the batch; the others are answered once it committed (a
        // replay, or "reused" for another request).
        let mut taken = HashSet::new();
        let (firsts, later): (Vec<usize>, Vec<usize>) = admitted
            .into_iter()
            .partition(|&i| taken.insert((writes[i].scope, writes[i].key.as_str())));
        let claims: Vec<KeyClaim> = firsts
            .iter()
            .map(|&i| KeyClaim {
                scope: writes[i].scope,
                key: &writes[i].key,
                fingerprint: writes[i].request.fingerprint(),
                now: writes[i].now,
            })
            .collect();
        // What each key's committed request came to; `None`: held by none, carried out here.
        let found: Vec<Option<Keyed>> = claims
            .iter()
            .map(|claim| {
                earlier
                    .remove(&key_id(claim))
                    .map(|first| first.keyed(claim))
            })
            .collect();
        let carried: Vec<usize> = firsts
            .iter()
            .zip(&found)
            .filter(|(_, found)| found.is_none())
            .map(|(&i, _)| i)
            .collect();
        let mut answers = Vec::with_capacity(carried.len());
        for ((&i, claim), found) in firsts.iter().zip(&claims).zip(found) {
            let write = writes[i];
            if let Some(keyed) = found {
                applied[i] = Some(Applied { keyed, result: "" });
                continue;
            }
            let outcome =
                carry_out(&mut tx, &write.request, &write.key, &mut books, write.now).await?;
            let answer = (write.render)(&outcome);
            answers.push((claim, answer.clone()));
            applied[i] = Some(Applied {
                keyed: Keyed::Fresh(answer),
                result: outcome.result(),
            });
        }
        let answers: Vec<(&KeyClaim<'_>, &Answer)> = answers.iter().map(|(c, a)| (*c, a)).collect();
        let mut one_by_one = later;
        match write_out(&mut tx, &mut books, &answers, KeyRows::Unwritten).await {
            Err(StoreError::Query(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                // A key another transaction took after this one read it: nothing here is
                // written (the transaction rolls back), and what was carried out is carried
                // out again one by one, each request claiming its key first (so it waits for
                // that transaction and gets its answer).
                drop(tx);
                one_by_one.extend(carried);
                one_by_one.sort_unstable();
            }
            written => {
                written?;
                crate::failpoint::hit("credits.before_commit").await;
                tx.commit().await?;
            }
        }
        // (Should one of these fail, the lane carries out the batch again one by one: what
        // committed above is then replayed, the same answers.)
        for i in one_by_one {
            let write = writes[i];
            let mut result = "";
            let keyed = self
                .apply(
                    write.scope,
                    &write.key,
                    &write.request,
                    packages,
                    write.now,
                    |outcome| {
                        result = outcome.result();
                        (write.render)(outcome)
                    },
                )
                .await?;
            applied[i] = Some(Applied { keyed, result });
        }
        Ok(applied.into_iter().flatten().collect())
    }

    /// `email`'s credits now (their lots written and expiries applied first).
    pub async fn balance(
        self,
        email: &str,
        packages: &Packages,
        now: i64,
    ) -> Result<BalanceView, StoreError> {
        let mut tx = self.pool.begin().await?;
        let account = Account::open(&mut tx, email, packages, now).await?;
        tx.commit().await?;
        Ok(account.view(now))
    }

    /// Every change of `email`'s balance, newest first, `limit` at a time after `cursor`.
    pub async fn ledger(
        self,
        email: &str,
        cursor: Option<LedgerCursor>,
        limit: i64,
    ) -> Result<LedgerPage, StoreError> {
        const SQL: &str = "\
            SELECT at, src, seq, kind, delta, order_id, movement_id, hold_id, lot_id, reference, \
                actor, reason, event_id, idempotency_key FROM ( \
              SELECT l.created_at AS at, CAST(0 AS BIGINT) AS src, l.id AS seq, l.kind AS kind, \
                  l.delta AS delta, l.order_id AS order_id, CAST(NULL AS TEXT) AS movement_id, \
                  CAST(NULL AS TEXT) AS hold_id, CAST(NULL AS TEXT) AS lot_id, \
                  CAST(NULL AS TEXT) AS reference, CAST(NULL AS TEXT) AS actor, \
                  CAST(NULL AS TEXT) AS reason, l.event_id AS event_id, \
                  l.idempotency_key AS idempotency_key \
              FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id \
              WHERE o.customer_email = $1 \
              UNION ALL \
              SELECT m.created_at, CAST(1 AS BIGINT), m.id, m.kind, m.delta, \
                  (SELECT c.order_id FROM credit_lots c WHERE c.lot_id = m.lot_id), \
                  m.movement_id, m.hold_id, m.lot_id, m.reference, m.actor, m.reason, NULL, \
                  m.idempotency_key \
              FROM credit_movements m WHERE m.customer_email = $1 \
            ) t \
            WHERE at < $2 OR (at = $2 AND (src < $3 OR (src = $3 AND seq < $4))) \
            ORDER BY at DESC, src DESC, seq DESC LIMIT $5";
        type Row = (
            i64,
            i64,
            i64,
            String,
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let email = email.trim().to_lowercase();
        let start = cursor.unwrap_or(LedgerCursor {
            at: i64::MAX,
            source: 0,
            id: 0,
        });
        let rows: Vec<Row> = self
            .pool
            .on()
            .all(
                sql(SQL)
                    .bind(email.as_str())
                    .bind(start.at)
                    .bind(start.source)
                    .bind(start.id)
                    .bind(limit + 1),
            )
            .await?;
        let more = rows.len() > usize::try_from(limit).unwrap_or(0);
        let mut next_cursor = None;
        let mut page = Vec::new();
        for row in rows.into_iter().take(usize::try_from(limit).unwrap_or(0)) {
            let (at, src, seq, kind, delta, order_id, movement_id, hold_id, lot_id, reference) = (
                row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9,
            );
            next_cursor = Some(LedgerCursor {
                at,
                source: src,
                id: seq,
            });
            page.push(LedgerRow {
                cause: Cause::of(&kind, hold_id.as_deref()),
                kind,
                delta,
                order_id,
                movement_id,
                hold_id,
                lot_id,
                reference,
                actor: row.10,
                reason: row.11,
                event_id: row.12,
                idempotency_key: row.13,
                created_at: at,
            });
        }
        Ok(LedgerPage {
            customer_email: email,
            rows: page,
            next_cursor: more.then_some(next_cursor).flatten().map(|c| c.to_string()),
        })
    }

    /// Upkeep: holds past their expiry are released and lots past theirs expire, at most
    /// `batch` of each; several instances may run it at once, each hold and lot changes once.
    /// Returns (holds expired, lots expired).
    pub async fn expire_due(
        self,
        packages: &Packages,
        now: i64,
        batch: i64,
    ) -> Result<(u64, u64), StoreError> {
        // Every change is made by the customer's own transaction, under their lock, as a
        // request makes it: the customers with holds or lots due, each in turn. (A lot not
        // written yet expires when its customer is first read or moved: its expiry counts
        // from the unlock.)
        let due: Vec<String> = self
            .pool
            .on()
            .column(
                sql("SELECT customer_email FROM credit_holds \
                     WHERE status = 'active' AND expires_at <= $1 \
                     UNION SELECT customer_email FROM credit_lots \
                     WHERE expired_at IS NULL AND expires_at <= $1 LIMIT $2")
                .bind(now)
                .bind(batch),
            )
            .await?;
        let (mut holds, mut lots) = (0, 0);
        for email in due {
            let mut tx = self.pool.begin().await?;
            let account = Account::open(&mut tx, &email, packages, now).await?;
            tx.commit().await?;
            holds += account.holds_expired_now;
            lots += account.expired_now;
        }
        Ok((holds, lots))
    }

    /// The lot of `order_id`, once its customer's credits were first read or moved after
    /// the unlock.
    pub async fn lot_of_order(
        self,
        order_id: &str,
        now: i64,
    ) -> Result<Option<LotView>, StoreError> {
        let row: Option<LotRow> = self
            .pool
            .on()
            .optional(
                // An order's lot is `order:<order id>` (the primary key, no scan).
                sql(format!("{LOT_COLUMNS} WHERE c.lot_id = 'order:' || $1")).bind(order_id),
            )
            .await?;
        Ok(row.map(|r| lot(r).view(now)))
    }

    /// The customer a spend, hold or adjustment id, a reference or an Idempotency-Key of
    /// theirs names, for the search box.
    pub async fn customer_of(self, term: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .pool
            .on()
            .optional_value(
                sql("SELECT customer_email FROM credit_movements \
                     WHERE movement_id = $1 OR reference = $1 OR idempotency_key = $1 \
                     UNION ALL SELECT customer_email FROM credit_holds \
                     WHERE hold_id = $1 OR reference = $1 LIMIT 1")
                .bind(term),
            )
            .await?)
    }

    /// Forgets the answers kept under keys older than `before` (unix ms); how many.
    pub async fn prune_keys(self, before: i64) -> Result<u64, StoreError> {
        Ok(self
            .pool
            .on()
            .execute(sql("DELETE FROM credit_requests WHERE created_at < $1").bind(before))
            .await?)
    }
}

/// A request's key, to be claimed.
struct KeyClaim<'a> {
    scope: KeyScope,
    key: &'a IdempotencyKey,
    fingerprint: String,
    now: i64,
}

/// Claims the keys of `claims` (distinct) with one statement; for each, `None` when it was
/// claimed here (its request is to be carried out), else what its key's first request
/// came to (or that it is another request's, or still running). A key another transaction
/// claimed and has not committed yet is waited for (PostgreSQL's unique index, SQLite's one
/// writer).
async fn claim_keys(
    tx: &mut Tx,
    claims: &[KeyClaim<'_>],
) -> Result<Vec<Option<Keyed>>, StoreError> {
    let mut rows = Records::default();
    for claim in claims {
        rows.push(serde_json::json!({
            "scope": claim.scope.as_str(), "idempotency_key": claim.key.as_str(),
            "request_hash": claim.fingerprint, "created_at": claim.now,
        }));
    }
    let statement = format!(
        "INSERT INTO credit_requests \
         (scope, idempotency_key, request_hash, status, body, created_at) \
         SELECT scope, idempotency_key, request_hash, 0, '', created_at FROM {} \
         WHERE true ON CONFLICT DO NOTHING RETURNING scope, idempotency_key",
        tx.records("$1", "k", &KEY_COLUMNS)
    );
    let claimed: Vec<(String, String)> = tx.on().all(sql(statement).bind(rows.arg())).await?;
    let claimed: HashSet<(String, String)> = claimed.into_iter().collect();
    let taken: Vec<&KeyClaim<'_>> = claims
        .iter()
        .filter(|c| !claimed.contains(&key_id(c)))
        .collect();
    let mut earlier = read_keys(tx, &taken).await?;
    claims
        .iter()
        .map(|claim| {
            let id = key_id(claim);
            if claimed.contains(&id) {
                return Ok(None);
            }
            let first = earlier
                .remove(&id)
                .ok_or_else(|| StoreError::Missing("a key's first request".to_owned()))?;
            Ok(Some(first.keyed(claim)))
        })
        .collect()
}

/// A key's row as its first request left it.
struct FirstRequest {
    fingerprint: String,
    status: i64,
    body: String,
}

impl FirstRequest {
    /// What `claim`, another request under the same key, gets.
    fn keyed(self, claim: &KeyClaim<'_>) -> Keyed {
        if self.fingerprint != claim.fingerprint {
            Keyed::KeyReused
        } else if self.status == 0 {
            Keyed::KeyInUse
        } else {
            Keyed::Replayed(Answer {
                status: u16::try_from(self.status).unwrap_or(500),
                body: self.body,
            })
        }
    }
}

/// A key's columns in credit_requests, as the records that carry them name them: the two
/// that name the key, then its request's fingerprint and time.
const KEY_COLUMNS: [(&str, &str); 4] = [
    ("scope", "text"),
    ("idempotency_key", "text"),
    ("request_hash", "text"),
    ("created_at", "bigint"),
];

fn key_id(claim: &KeyClaim<'_>) -> (String, String) {
    (
        claim.scope.as_str().to_owned(),
        claim.key.as_str().to_owned(),
    )
}

/// Keys' first requests as read, by scope and key.
type FirstRequests = HashMap<(String, String), FirstRequest>;

/// A key as its scope and itself name it.
type KeyName<'a> = (KeyScope, &'a str);

/// The rows (`r`) of `credit_requests` under the keys sent as records of [`KEY_COLUMNS`]'
/// first two in `param` (`k`): each found through the table's primary key. On PostgreSQL a
/// plain join may be planned as a hash join over the whole table (the records count as 100
/// rows, and a plan cached while the table was small is kept as it grows: every batch then
/// read every key kept, 30 days of them); a lateral probe of at most one row cannot (its
/// `LIMIT` keeps the planner from flattening it back into a join).
fn keys_rows(tx: &Tx, param: &str) -> String {
    let records = tx.records(param, "k", &KEY_COLUMNS[..2]);
    let matching = "r.scope = k.scope AND r.idempotency_key = k.idempotency_key";
    match tx {
        Tx::Postgres(_) => format!(
            "{records} CROSS JOIN LATERAL \
             (SELECT * FROM credit_requests r WHERE {matching} LIMIT 1) r"
        ),
        Tx::Sqlite(_) => format!("credit_requests r JOIN {records} ON {matching}"),
    }
}

/// `keys` as records of [`KEY_COLUMNS`]' first two.
fn key_records(keys: &[KeyName<'_>]) -> Records {
    let mut records = Records::default();
    for (scope, key) in keys {
        records.push(serde_json::json!({
            "scope": scope.as_str(), "idempotency_key": key,
        }));
    }
    records
}

/// The committed rows of the keys of `claims`, with one statement (none when there is none).
async fn read_keys(tx: &mut Tx, claims: &[&KeyClaim<'_>]) -> Result<FirstRequests, StoreError> {
    if claims.is_empty() {
        return Ok(HashMap::new());
    }
    let names: Vec<KeyName<'_>> = claims.iter().map(|c| (c.scope, c.key.as_str())).collect();
    let keys = key_records(&names);
    let statement = format!(
        "SELECT r.scope, r.idempotency_key, r.request_hash, \
         CAST(r.status AS BIGINT), r.body FROM {}",
        keys_rows(tx, "$1")
    );
    let rows: Vec<(String, String, String, i64, String)> =
        tx.on().all(sql(statement).bind(keys.arg())).await?;
    Ok(rows
        .into_iter()
        .map(|(scope, key, fingerprint, status, body)| {
            let first = FirstRequest {
                fingerprint,
                status,
                body,
            };
            ((scope, key), first)
        })
        .collect())
}

/// How a transaction's answers reach their keys' rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRows {
    /// Claimed first ([`claim_keys`]): each row gets its answer.
    Claimed,
    /// Read first (with the batch's accounts) and held by no committed request: each row is
    /// written now, with its answer, in one row version. A key another transaction took
    /// meanwhile fails the statement (the key's unique index), and with it the transaction.
    Unwritten,
}

/// The statement that keeps the answers of requests carried out under their keys (none when
/// there is none).
fn chain_answers(tx: &Tx, chain: &mut Chain, answers: &[(&KeyClaim<'_>, &Answer)], rows: KeyRows) {
    if answers.is_empty() {
        return;
    }
    let mut records = Records::default();
    for (claim, answer) in answers {
        records.push(serde_json::json!({
            "scope": claim.scope.as_str(), "idempotency_key": claim.key.as_str(),
            "request_hash": claim.fingerprint, "created_at": claim.now,
            "status": answer.status, "body": answer.body,
        }));
    }
    // The key's own columns only where its row is written here.
    let key_columns = match rows {
        KeyRows::Claimed => &KEY_COLUMNS[..2],
        KeyRows::Unwritten => &KEY_COLUMNS[..],
    };
    let mut columns = key_columns.to_vec();
    columns.extend([("status", "bigint"), ("body", "text")]);
    let from = tx.records(&chain.param(), "a", &columns);
    let statement = match rows {
        KeyRows::Claimed => format!(
            "UPDATE credit_requests SET status = a.status, body = a.body FROM {from} \
             WHERE credit_requests.scope = a.scope \
             AND credit_requests.idempotency_key = a.idempotency_key"
        ),
        // In one order for every transaction: two that write the same keys wait for each
        // other in line, never in a circle.
        KeyRows::Unwritten => format!(
            "INSERT INTO credit_requests \
             (scope, idempotency_key, request_hash, status, body, created_at) \
             SELECT scope, idempotency_key, request_hash, status, body, created_at \
             FROM {from} ORDER BY a.scope, a.idempotency_key"
        ),
    };
    chain.push(statement, records);
}

/// Writes the ledger rows of `books` and the answers given: one round trip on PostgreSQL.
async fn write_out(
    tx: &mut Tx,
    books: &mut Books<'_>,
    answers: &[(&KeyClaim<'_>, &Answer)],
    rows: KeyRows,
) -> Result<(), StoreError> {
    let mut chain = Chain::new(tx);
    std::mem::take(&mut books.ledger).chain(tx, &mut chain);
    chain_answers(tx, &mut chain, answers, rows);
    chain.run(tx).await?;
    Ok(())
}

/// Locks `email`'s credits until the transaction ends (PostgreSQL; SQLite's one writer
/// already is the lock).
async fn lock_customer(tx: &mut Tx, email: &str) -> Result<(), StoreError> {
    lock_customers(tx, &[email]).await
}

/// Locks the credits of `emails` until the transaction ends, with one statement, in their
/// order: sorted by every batch, so two batches never wait for each other in a circle
/// (PostgreSQL; SQLite's one writer already is the lock).
async fn lock_customers(tx: &mut Tx, emails: &[&str]) -> Result<(), StoreError> {
    if let Tx::Postgres(_) = tx
        && !emails.is_empty()
    {
        // A function scan yields its rows in the array's order; the count reads every lock.
        const SQL: &str = "SELECT COUNT(l.locked) FROM \
             (SELECT pg_advisory_xact_lock(hashtextextended(c.e, 0)) AS locked \
              FROM unnest($1::text[]) WITH ORDINALITY AS c(e, n)) l";
        tx.on().execute(sql(SQL).bind(Arg::list(emails))).await?;
    }
    Ok(())
}

/// Carries out `request` inside `tx`, on the accounts of `books` (the customer a spend, hold
/// or adjustment names is locked already; a capture or release locks its hold's customer).
/// Its ledger rows are left in `books` to be written.
async fn carry_out(
    tx: &mut Tx,
    request: &CreditRequest,
    key: &IdempotencyKey,
    books: &mut Books<'_>,
    now: i64,
) -> Result<CreditOutcome, StoreError> {
    match request {
        CreditRequest::Spend {
            customer_email,
            credits,
            reference,
            metadata,
        } => {
            let (account, ledger) = books.account(tx, customer_email, now).await?;
            let available = account.available();
            let Some(draws) = account.draw(*credits, available, now) else {
                return Ok(account.insufficient(available));
            };
            let movement = Movement {
                movement_id: new_id("sp", now)?,
                kind: "spend",
                delta: -credits,
                reference: Some(reference),
                metadata: metadata_text(metadata.as_ref()),
                key: Some(key.as_str()),
                ..Movement::new(customer_email, now)
            };
            ledger.add(&movement, &draws);
            Ok(CreditOutcome::Spent(SpendView {
                spend_id: movement.movement_id,
                customer_email: customer_email.clone(),
                credits: *credits,
                reference: Some(reference.clone()),
                metadata: metadata.clone(),
                hold_id: None,
                lots: draws,
                balance_after: account.balance(),
                available_after: account.available(),
                created_at: now,
            }))
        }
        CreditRequest::Hold {
            customer_email,
            credits,
            reference,
            metadata,
            expires_in_ms,
        } => {
            let (account, _) = books.account(tx, customer_email, now).await?;
            let available = account.available();
            if account.balance() <= 0 || *credits > available {
                return Ok(account.insufficient(available));
            }
            let hold_id = new_id("hold", now)?;
            let expires_at = now.saturating_add(*expires_in_ms);
            tx.on()
                .execute(
                    sql(
                        "INSERT INTO credit_holds (hold_id, customer_email, credits, reference, \
                         metadata, status, expires_at, created_at) \
                         VALUES ($1, $2, $3, $4, $5, 'active', $6, $7)",
                    )
                    .bind(hold_id.as_str())
                    .bind(customer_email.as_str())
                    .bind(*credits)
                    .bind(reference.as_str())
                    .bind(metadata_text(metadata.as_ref()))
                    .bind(expires_at)
                    .bind(now),
                )
                .await?;
            account.held += credits;
            account.falls_due(expires_at);
            let row = read_hold(tx, &hold_id).await?.ok_or_else(hold_gone)?;
            Ok(CreditOutcome::Held(hold_view(row, account)?))
        }
        CreditRequest::Capture { hold_id, credits } => {
            let Some(row) = read_hold(tx, hold_id).await? else {
                return Ok(CreditOutcome::NoSuchHold(hold_id.clone()));
            };
            let email = row.1.clone();
            lock_customer(tx, &email).await?;
            let (account, ledger) = books.account(tx, &email, now).await?;
            // Read again under the customer's lock: the answer of a concurrent release or of
            // the expiry stands.
            let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
            let (held, status) = (row.2, row.5.clone());
            if status != HoldStatus::Active.as_str() {
                return Ok(CreditOutcome::HoldSettled(hold_view(row, account)?));
            }
            let take = credits.unwrap_or(held);
            if take > held {
                return Ok(CreditOutcome::OverCapture(hold_view(row, account)?));
            }
            // The hold's own credits are what it may take. Drawn on a copy: a refusal below
            // reports the account's figures as they stand (its available as the balance
            // shows it, this hold still held).
            let available = (account.balance() - (account.held - held)).max(0);
            let mut after = account.clone();
            let Some(draws) = after.draw(take, available, now) else {
                return Ok(account.insufficient(account.available()));
            };
            let spend_id = new_id("sp", now)?;
            // Settled here first, and only if still active: a second guard beside the
            // customer's lock, which the upkeep takes too (a capture racing the upkeep is
            // `a_capture_racing_the_upkeep_settles_the_hold_once_postgres`).
            if !settle_hold(tx, hold_id, "captured", Some((take, &spend_id)), now).await? {
                let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
                return Ok(CreditOutcome::HoldSettled(hold_view(row, account)?));
            }
            let movement = Movement {
                movement_id: spend_id,
                kind: "spend",
                delta: -take,
                reference: Some(&row.3),
                metadata: row.4.clone(),
                hold_id: Some(hold_id),
                key: Some(key.as_str()),
                ..Movement::new(&email, now)
            };
            ledger.add(&movement, &draws);
            *account = after;
            account.held -= held;
            let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
            let hold = hold_view(row, account)?;
            Ok(CreditOutcome::Captured {
                spend: SpendView {
                    spend_id: movement.movement_id,
                    customer_email: email.clone(),
                    credits: take,
                    reference: Some(hold.reference.clone()),
                    metadata: hold.metadata.clone(),
                    hold_id: Some(hold_id.clone()),
                    lots: draws,
                    balance_after: account.balance(),
                    available_after: account.available(),
                    created_at: now,
                },
                hold,
            })
        }
        CreditRequest::Release { hold_id } => {
            let Some(row) = read_hold(tx, hold_id).await? else {
                return Ok(CreditOutcome::NoSuchHold(hold_id.clone()));
            };
            let email = row.1.clone();
            lock_customer(tx, &email).await?;
            let (account, _) = books.account(tx, &email, now).await?;
            let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
            if row.5 != HoldStatus::Active.as_str() {
                return Ok(CreditOutcome::HoldSettled(hold_view(row, account)?));
            }
            if !settle_hold(tx, hold_id, "released", None, now).await? {
                let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
                return Ok(CreditOutcome::HoldSettled(hold_view(row, account)?));
            }
            account.held -= row.2;
            let row = read_hold(tx, hold_id).await?.ok_or_else(hold_gone)?;
            Ok(CreditOutcome::Released(hold_view(row, account)?))
        }
        CreditRequest::Adjust {
            customer_email,
            credits,
            reason,
            actor,
            lasts_ms,
        } => {
            let (account, ledger) = books.account(tx, customer_email, now).await?;
            let adjustment_id = new_id("adj", now)?;
            let mut movement = Movement {
                movement_id: adjustment_id.clone(),
                kind: "adjust",
                delta: *credits,
                actor: Some(actor),
                reason: Some(reason),
                key: Some(key.as_str()),
                ..Movement::new(customer_email, now)
            };
            let (lot_id, draws, expires_at) = if *credits > 0 {
                let lot_id = format!("adjust:{adjustment_id}");
                let expires_at = lasts_ms.map(|ms| now.saturating_add(ms));
                tx.on()
                    .execute(
                        sql("INSERT INTO credit_lots \
                             (lot_id, customer_email, credits, expires_at, created_at) \
                             VALUES ($1, $2, $3, $4, $5)")
                        .bind(lot_id.as_str())
                        .bind(customer_email.as_str())
                        .bind(*credits)
                        .bind(expires_at)
                        .bind(now),
                    )
                    .await?;
                account.lots.push(Lot {
                    lot_id: lot_id.clone(),
                    order_id: None,
                    expires_at,
                    expired: false,
                    created_at: now,
                    granted: *credits,
                    drawn: 0,
                    expired_credits: 0,
                });
                account.lots.sort_by_cached_key(draw_order);
                if let Some(at) = expires_at {
                    account.falls_due(at);
                }
                (Some(lot_id), Vec::new(), expires_at)
            } else {
                // A correction takes back only what is available: the balance never goes
                // below zero but through a refund or dispute.
                let available = account.available();
                let Some(draws) = account.draw(-credits, available, now) else {
                    let outcome = format!("refused: {available} credits available");
                    audit_adjustment(tx, request, &outcome, now).await?;
                    return Ok(account.insufficient(available));
                };
                (None, draws, None)
            };
            movement.lot_id = lot_id.as_deref();
            ledger.add(&movement, &draws);
            let outcome = format!(
                "{credits:+} credits ({adjustment_id}), balance {}",
                account.balance()
            );
            audit_adjustment(tx, request, &outcome, now).await?;
            Ok(CreditOutcome::Adjusted(AdjustmentView {
                adjustment_id,
                customer_email: customer_email.clone(),
                credits: *credits,
                reason: reason.clone(),
                actor: actor.clone(),
                lot_id: lot_id.clone(),
                lots: draws,
                expires_at,
                balance_after: account.balance(),
                available_after: account.available(),
                created_at: now,
            }))
        }
    }
}

/// The audit log's entry for an adjustment, written with it (or with its refusal): who, for
/// which customer, why, and what came of it.
async fn audit_adjustment(
    tx: &mut Tx,
    request: &CreditRequest,
    outcome: &str,
    now: i64,
) -> Result<(), StoreError> {
    let CreditRequest::Adjust {
        customer_email,
        reason,
        actor,
        ..
    } = request
    else {
        return Ok(());
    };
    let actor = Actor::named(actor);
    let record = AuditRecord {
        actor: &actor,
        action: AuditAction::CreditAdjust,
        target: customer_email,
        reason,
        outcome,
    };
    super::audit::insert(tx.on(), &record, None, now).await?;
    Ok(())
}

/// Marks an active hold `status` (with what a capture took and its spend); false when it
/// was no longer active.
async fn settle_hold(
    tx: &mut Tx,
    hold_id: &str,
    status: &str,
    captured: Option<(i64, &str)>,
    now: i64,
) -> Result<bool, StoreError> {
    let changed = tx
        .on()
        .execute(
            sql(
                "UPDATE credit_holds SET status = $2, captured = $3, spend_id = $4, \
                 settled_at = $5 WHERE hold_id = $1 AND status = 'active'",
            )
            .bind(hold_id)
            .bind(status)
            .bind(captured.map(|(credits, _)| credits))
            .bind(captured.map(|(_, spend)| spend))
            .bind(now),
        )
        .await?;
    Ok(changed == 1)
}

/// A hold read inside the transaction that holds its customer's lock cannot vanish.
fn hold_gone() -> StoreError {
    StoreError::Missing("a hold read in this transaction".to_owned())
}

/// How many PostgreSQL transactions carry credit requests side by side, and how many
/// requests one of them may gather. Two measured best (BENCHMARKS.md: a quarter more spends a
/// second than four, one no better than two): a batch's cost is mostly its few statements and
/// its commit, whatever its size, so fewer and larger batches win while two still overlap.
const POSTGRES_CREDIT_LANES: usize = 2;
const MAX_CREDIT_REQUESTS_PER_COMMIT: usize = 64;

/// The spend API's writer: spends, holds and adjustments go through group-committing lanes
/// (one per customer's share of the lanes), so one commit makes many of them durable; a
/// capture or a release, which names only its hold, runs in its own transaction.
#[derive(Debug, Clone)]
pub struct CreditWriter {
    store: Store,
    packages: Arc<Packages>,
    lanes: Lanes<CreditBatch>,
}

struct CreditBatch {
    store: Store,
    packages: Arc<Packages>,
}

impl Batch for CreditBatch {
    type Write = CreditWrite;
    type Done = Applied;
    const WHAT: &'static str = "credit requests";

    fn conflict_key(write: &CreditWrite) -> &str {
        write.request.customer().unwrap_or("")
    }

    async fn apply<'a>(
        &'a self,
        writes: &'a [&'a CreditWrite],
    ) -> Result<Vec<Applied>, StoreError> {
        self.store
            .credits()
            .apply_batch(writes, &self.packages)
            .await
    }
}

impl CreditWriter {
    /// Starts the lanes on the current Tokio runtime: one on SQLite,
    /// `POSTGRES_CREDIT_LANES` on PostgreSQL.
    pub fn start(store: Store, packages: Arc<Packages>) -> CreditWriter {
        let backend: Backend = store.backend();
        let batch = CreditBatch {
            store: store.clone(),
            packages: Arc::clone(&packages),
        };
        CreditWriter {
            store,
            packages,
            lanes: Lanes::start(
                batch,
                backend,
                POSTGRES_CREDIT_LANES,
                MAX_CREDIT_REQUESTS_PER_COMMIT,
            ),
        }
    }

    /// Carries out `write` once under its key; durable when this returns `Ok`.
    pub async fn apply(&self, write: CreditWrite) -> Result<Applied, StoreError> {
        if write.request.customer().is_some() {
            return self.lanes.write(write).await;
        }
        if let Some(hash) = &write.token_hash
            && self
                .store
                .tokens()
                .authenticate(hash, write.now)
                .await?
                .is_none()
        {
            return Ok(Applied {
                keyed: Keyed::Unauthorized,
                result: "",
            });
        }
        let mut result = "";
        let keyed = self
            .store
            .credits()
            .apply(
                write.scope,
                &write.key,
                &write.request,
                &self.packages,
                write.now,
                |outcome| {
                    result = outcome.result();
                    (write.render)(outcome)
                },
            )
            .await?;
        Ok(Applied { keyed, result })
    }
}
