//! The spend rules as a property: any interleaving of unlocks, spends, holds, captures,
//! releases, expiries, refunds, adjustments and replays (keys drawn from a small pool, so
//! keys are repeated with the same request and with others) keeps
//! `balance = unlocked − revoked − spent − expired + adjusted` (the sum of the ledger), never
//! takes a balance below zero through a spend, and never changes the ledger on a replay; and
//! requests gathered into one transaction are answered as they would be one by one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use claimcheck_core::fulfilment::Packages;
use claimcheck_core::spending::{
    Answer, CreditOutcome, CreditRequest, CreditWrite, IdempotencyKey, KeyScope, Keyed,
};
use claimcheck_core::{DatabaseUrl, Store, StoreOptions};
use proptest::prelude::*;

const EMAIL: &str = "prop@example.ch";
const HOUR: i64 = 3_600_000;

#[derive(Debug, Clone)]
enum Op {
    /// An order of `credits` is unlocked; `short` credits last an hour.
    Unlock {
        credits: i64,
        short: bool,
    },
    Spend {
        credits: i64,
        key: u8,
    },
    Hold {
        credits: i64,
        key: u8,
        minutes: i64,
    },
    Capture {
        hold: usize,
        credits: Option<i64>,
        key: u8,
    },
    Release {
        hold: usize,
        key: u8,
    },
    /// A refund takes back `quarters` quarters of an order's credits.
    Refund {
        order: usize,
        quarters: i64,
    },
    Adjust {
        credits: i64,
        key: u8,
    },
    /// Time passes: holds and short lots may expire.
    Wait {
        minutes: i64,
    },
    /// The upkeep runs.
    Upkeep,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1i64..30, any::<bool>()).prop_map(|(credits, short)| Op::Unlock { credits, short }),
        (1i64..25, 0u8..8).prop_map(|(credits, key)| Op::Spend { credits, key }),
        (1i64..25, 0u8..8, 1i64..90).prop_map(|(credits, key, minutes)| Op::Hold {
            credits,
            key,
            minutes
        }),
        (0usize..6, proptest::option::of(1i64..25), 0u8..8)
            .prop_map(|(hold, credits, key)| Op::Capture { hold, credits, key }),
        (0usize..6, 0u8..8).prop_map(|(hold, key)| Op::Release { hold, key }),
        (0usize..6, 1i64..=4).prop_map(|(order, quarters)| Op::Refund { order, quarters }),
        (-20i64..20, 0u8..8)
            .prop_filter("not zero", |(c, _)| *c != 0)
            .prop_map(|(credits, key)| Op::Adjust { credits, key }),
        (1i64..120).prop_map(|minutes| Op::Wait { minutes }),
        Just(Op::Upkeep),
    ]
}

fn answer(outcome: &CreditOutcome) -> Answer {
    Answer {
        status: if outcome.result() == "done" { 201 } else { 409 },
        body: format!("{outcome:?}"),
    }
}

/// The ledger's sums, by kind, read from the tables themselves.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Sums {
    unlocked: i64,
    revoked: i64,
    spent: i64,
    expired: i64,
    adjusted: i64,
    /// What negative adjustments took back.
    taken_back: i64,
}

async fn sums(store_url: &str) -> Sums {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(store_url).await.unwrap();
    let mut sum = async |sql: &str| -> i64 {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(&mut c)
            .await
            .unwrap()
    };
    Sums {
        unlocked: sum("SELECT COALESCE(SUM(delta), 0) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        revoked: -sum("SELECT COALESCE(SUM(delta), 0) FROM credit_ledger WHERE kind = 'revoke'")
            .await,
        spent: -sum("SELECT COALESCE(SUM(delta), 0) FROM credit_movements WHERE kind = 'spend'")
            .await,
        expired: -sum("SELECT COALESCE(SUM(delta), 0) FROM credit_movements WHERE kind = 'expire'")
            .await,
        adjusted: sum("SELECT COALESCE(SUM(delta), 0) FROM credit_movements WHERE kind = 'adjust'")
            .await,
        taken_back: -sum("SELECT COALESCE(SUM(delta), 0) FROM credit_movements \
             WHERE kind = 'adjust' AND delta < 0")
        .await,
    }
}

async fn count(store_url: &str, sql: &str) -> i64 {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(store_url).await.unwrap();
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(&mut c)
        .await
        .unwrap()
}

/// Carries out `op` if it is not a keyed request (an unlock or refund written as fulfilment
/// writes it, time passing, the upkeep); else returns the key and the request.
#[allow(clippy::too_many_arguments)]
async fn outside(
    store: &Store,
    url: &str,
    packages: &Packages,
    i: usize,
    op: &Op,
    now: &mut i64,
    orders: &mut Vec<(String, i64, i64)>,
    holds: &[String],
) -> Option<(u8, CreditRequest)> {
    let exec = |sql: String| async move {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::raw_sql(&sql).execute(&mut c).await.unwrap();
    };
    let now = match op {
        Op::Wait { minutes } => {
            *now += minutes * 60_000;
            return None;
        }
        _ => *now,
    };
    match *op {
        Op::Unlock { credits, short } => {
            let order = format!("ord_{i}");
            let package = if short { "short" } else { "long" };
            exec(format!(
                "INSERT INTO orders (order_id, customer_email, package, credits, status, \
                 payment_status, created_at, updated_at) VALUES ('{order}', '{EMAIL}', \
                 '{package}', {credits}, 'paid', 'paid', {now}, {now}); \
                 INSERT INTO credit_ledger (order_id, kind, delta, customer_email, event_id, \
                 created_at) VALUES ('{order}', 'unlock', {credits}, '{EMAIL}', 'evt_{i}', {now})"
            ))
            .await;
            orders.push((order, credits, 0));
            None
        }
        Op::Refund { order, quarters } => {
            // As the money rules do: never more than the order unlocked, in all.
            if let Some((order, credits, revoked)) = orders.get_mut(order) {
                let take = (*credits * quarters / 4).min(*credits - *revoked);
                *revoked += take;
                exec(format!(
                    "INSERT INTO credit_ledger (order_id, kind, delta, customer_email, \
                     event_id, step, created_at) VALUES ('{order}', 'revoke', {}, '{EMAIL}', \
                     'evt_r{i}', 'r{i}', {now})",
                    -take
                ))
                .await;
            }
            None
        }
        Op::Wait { .. } => None,
        Op::Upkeep => {
            store
                .credits()
                .expire_due(packages, now, 100)
                .await
                .unwrap();
            None
        }
        Op::Spend { credits, key } => Some((
            key,
            CreditRequest::spend(EMAIL, credits, "r", None).unwrap(),
        )),
        Op::Hold {
            credits,
            key,
            minutes,
        } => Some((
            key,
            CreditRequest::hold(EMAIL, credits, "h", None, Some(minutes * 60_000)).unwrap(),
        )),
        Op::Capture { hold, credits, key } => holds
            .get(hold)
            .map(|id| (key, CreditRequest::capture(id, credits).unwrap())),
        Op::Release { hold, key } => holds
            .get(hold)
            .map(|id| (key, CreditRequest::release(id).unwrap())),
        Op::Adjust { credits, key } => Some((
            key,
            CreditRequest::adjust(EMAIL, credits, "prop", "cli:prop", Some(HOUR)).unwrap(),
        )),
    }
}

/// A fresh store on a temporary SQLite file, its URL, and the packages of the runs.
async fn fresh_store(dir: &tempfile::TempDir) -> (Store, String, Packages) {
    let url = format!("sqlite://{}/spend.db", dir.path().display());
    let store = Store::connect(
        &url.parse::<DatabaseUrl>().unwrap(),
        &StoreOptions::default(),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    (
        store,
        url,
        "short=1:100:chf:1h,long=1:100:chf".parse().unwrap(),
    )
}

async fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let (store, url, packages) = fresh_store(&dir).await;
    let mut now: i64 = 1_800_000_000_000;
    let mut orders: Vec<(String, i64, i64)> = Vec::new();
    let mut holds: Vec<String> = Vec::new();
    // What each key was first used for, and the answer it got.
    let mut keys: HashMap<u8, (CreditRequest, Answer)> = HashMap::new();
    let mut spent_by_outcomes = 0;
    for (i, op) in ops.into_iter().enumerate() {
        let request = outside(
            &store,
            &url,
            &packages,
            i,
            &op,
            &mut now,
            &mut orders,
            &holds,
        )
        .await;
        let before = sums(&url).await;
        let ahead = store
            .credits()
            .balance(EMAIL, &packages, now)
            .await
            .unwrap();
        if let Some((key, request)) = request {
            let mut outcome = None;
            let keyed = store
                .credits()
                .apply(
                    KeyScope::Api,
                    &IdempotencyKey::parse(&format!("k{key}")).unwrap(),
                    &request,
                    &packages,
                    now,
                    |o| {
                        outcome = Some(o.clone());
                        answer(o)
                    },
                )
                .await
                .unwrap();
            match (&keyed, keys.get(&key)) {
                (Keyed::Fresh(fresh), None) => {
                    keys.insert(key, (request.clone(), fresh.clone()));
                }
                (Keyed::Replayed(replayed), Some((first, first_answer))) => {
                    assert_eq!(first, &request);
                    assert_eq!(replayed, first_answer);
                }
                (Keyed::KeyReused, Some((first, _))) => assert_ne!(first, &request),
                other => panic!("{other:?} for {request:?}"),
            }
            if !matches!(keyed, Keyed::Fresh(_)) {
                assert_eq!(
                    sums(&url).await,
                    before,
                    "a replay or a reused key moved credits"
                );
            }
            match outcome {
                // Only what was available: never held credits, never below zero.
                Some(CreditOutcome::Spent(spend)) => {
                    assert!(spend.credits <= ahead.available, "{spend:?} {ahead:?}");
                    assert!(spend.balance_after >= 0);
                    spent_by_outcomes += spend.credits;
                }
                Some(CreditOutcome::Captured { spend, hold }) => {
                    assert!(spend.credits <= ahead.available + hold.credits);
                    assert!(spend.balance_after >= 0);
                    spent_by_outcomes += spend.credits;
                }
                Some(CreditOutcome::Held(hold)) => {
                    assert!(hold.credits <= ahead.available);
                    holds.push(hold.hold_id);
                }
                Some(CreditOutcome::Adjusted(adjusted)) if adjusted.credits < 0 => {
                    assert!(-adjusted.credits <= ahead.available);
                    assert!(adjusted.balance_after >= 0);
                }
                Some(CreditOutcome::Insufficient { available, .. }) => {
                    assert_eq!(available, ahead.available);
                }
                _ => {}
            }
        }
        let view = store
            .credits()
            .balance(EMAIL, &packages, now)
            .await
            .unwrap();
        let s = sums(&url).await;
        assert_eq!(
            view.balance,
            s.unlocked - s.revoked - s.spent - s.expired + s.adjusted,
            "{s:?}"
        );
        assert_eq!(
            s.spent, spent_by_outcomes,
            "every spend written was answered"
        );
        assert!(view.available >= 0 && view.available <= view.balance.max(0));
        assert_eq!(view.owed, (-view.balance).max(0));
        // A customer owes only credits they took: a refund or dispute of expired or unspent
        // credits leaves nothing owed.
        assert!(view.owed <= s.spent + s.taken_back, "{view:?} {s:?}");
        assert_eq!(
            view.lots.iter().map(|l| l.remaining).sum::<i64>(),
            view.balance
        );
        assert_eq!(
            count(
                &url,
                "SELECT COUNT(*) FROM credit_lots c WHERE drawn <> \
                 (SELECT COALESCE(SUM(credits), 0) FROM credit_draws d WHERE d.lot_id = c.lot_id)"
            )
            .await,
            0,
            "a lot's drawn is the sum of its draws"
        );
    }
    store.close().await;
}

/// How a keyed request was answered, without the ids each run draws anew: carried out now
/// (its status and what it came to), replayed, or refused for its key.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Fresh(u16, String),
    Replayed(u16, String),
    KeyReused,
    KeyInUse,
    Unauthorized,
}

fn seen(keyed: &Keyed, holds: &mut Vec<String>) -> Seen {
    let what = |answer: &Answer| {
        answer
            .body
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect::<String>()
    };
    match keyed {
        Keyed::Fresh(answer) => {
            if let Some(rest) = answer.body.strip_prefix("Held(HoldView { hold_id: \"") {
                holds.push(rest.split('"').next().unwrap().to_owned());
            }
            Seen::Fresh(answer.status, what(answer))
        }
        Keyed::Replayed(answer) => Seen::Replayed(answer.status, what(answer)),
        Keyed::KeyReused => Seen::KeyReused,
        Keyed::KeyInUse => Seen::KeyInUse,
        Keyed::Unauthorized => Seen::Unauthorized,
    }
}

/// Carries out `waiting` as one of the spend API's lanes would, in one transaction: how each
/// was answered.
async fn batch(
    store: &Store,
    waiting: &[CreditWrite],
    packages: &Packages,
    holds: &mut Vec<String>,
) -> Vec<Seen> {
    let writes: Vec<&CreditWrite> = waiting.iter().collect();
    let applied = store
        .credits()
        .apply_batch(&writes, packages)
        .await
        .unwrap();
    assert_eq!(applied.len(), writes.len());
    applied.iter().map(|a| seen(&a.keyed, holds)).collect()
}

/// Runs `ops` on a fresh store, each keyed request on its own, or (`batched`) with every run
/// of spends, holds and adjustments gathered into one transaction as the spend API's lanes
/// gather them (a capture or release on its own, as they run); how each was answered, the
/// ledger's sums and the balance, available and held credits at the end.
async fn transcript(ops: &[Op], batched: bool) -> (Vec<Seen>, Sums, [i64; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let (store, url, packages) = fresh_store(&dir).await;
    let mut now: i64 = 1_800_000_000_000;
    let (mut orders, mut holds, mut answers) = (Vec::new(), Vec::new(), Vec::new());
    let mut waiting: Vec<CreditWrite> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let gathered =
            batched && matches!(op, Op::Spend { .. } | Op::Hold { .. } | Op::Adjust { .. });
        if !gathered && !waiting.is_empty() {
            answers.extend(batch(&store, &waiting, &packages, &mut holds).await);
            waiting.clear();
        }
        let Some((key, request)) = outside(
            &store,
            &url,
            &packages,
            i,
            op,
            &mut now,
            &mut orders,
            &holds,
        )
        .await
        else {
            continue;
        };
        let key = IdempotencyKey::parse(&format!("k{key}")).unwrap();
        if gathered {
            waiting.push(CreditWrite {
                token_hash: None,
                scope: KeyScope::Api,
                key,
                request,
                now,
                render: answer,
            });
            continue;
        }
        let keyed = store
            .credits()
            .apply(KeyScope::Api, &key, &request, &packages, now, answer)
            .await
            .unwrap();
        answers.push(seen(&keyed, &mut holds));
    }
    answers.extend(batch(&store, &waiting, &packages, &mut holds).await);
    let view = store
        .credits()
        .balance(EMAIL, &packages, now)
        .await
        .unwrap();
    let sums = sums(&url).await;
    store.close().await;
    (answers, sums, [view.balance, view.available, view.held])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// One commit for many requests answers each as it would have been answered alone, in
    /// the same order, and leaves the same ledger: repeated keys in one batch included.
    #[test]
    fn a_batch_answers_as_its_requests_one_by_one(ops in proptest::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let alone = runtime.block_on(transcript(&ops, false));
        let batched = runtime.block_on(transcript(&ops, true));
        prop_assert_eq!(alone, batched);
    }

    #[test]
    fn any_interleaving_keeps_the_ledger_whole(ops in proptest::collection::vec(op(), 1..40)) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(ops));
    }
}

/// A batch reads its callers' tokens with its accounts: a write under an unknown or revoked
/// token moves nothing and claims no key, even when a write with a live token shares its key
/// in the same batch (that one is carried out, as the key's first request).
#[tokio::test]
async fn a_batch_refuses_dead_tokens_and_carries_out_a_live_one_under_the_same_key() {
    use claimcheck_core::token::{NewToken, token_hash};
    let dir = tempfile::tempdir().unwrap();
    let (store, url, packages) = fresh_store(&dir).await;
    let now: i64 = 1_800_000_000_000;
    let (live, revoked) = (NewToken::generate().unwrap(), NewToken::generate().unwrap());
    store.tokens().insert(&live, "shop", now).await.unwrap();
    store.tokens().insert(&revoked, "old", now).await.unwrap();
    assert!(store.tokens().revoke(&revoked.token_id, now).await.unwrap());
    let seed = CreditRequest::adjust(EMAIL, 10, "seed", "cli:test", None).unwrap();
    let key = |k: &str| IdempotencyKey::parse(k).unwrap();
    store
        .credits()
        .apply(KeyScope::Cli, &key("seed"), &seed, &packages, now, answer)
        .await
        .unwrap();
    let spend = |n| CreditRequest::spend(EMAIL, n, "run-1", None).unwrap();
    let write = |token: Option<&NewToken>, k: &str, n: i64| CreditWrite {
        token_hash: token.map(|t| token_hash(&t.token)),
        scope: KeyScope::Api,
        key: key(k),
        request: spend(n),
        now,
        render: answer,
    };
    let unknown = NewToken::generate().unwrap();
    let waiting = [
        write(Some(&unknown), "shared", 4),
        write(Some(&live), "shared", 3),
        write(Some(&revoked), "other", 2),
        write(None, "trusted", 1),
    ];
    let mut holds = Vec::new();
    assert_eq!(
        batch(&store, &waiting, &packages, &mut holds).await,
        [
            Seen::Unauthorized,
            Seen::Fresh(201, "Spent".to_owned()),
            Seen::Unauthorized,
            Seen::Fresh(201, "Spent".to_owned()),
        ]
    );
    let view = store
        .credits()
        .balance(EMAIL, &packages, now)
        .await
        .unwrap();
    assert_eq!(view.balance, 10 - 3 - 1);
    // The refused key was not claimed: it serves a live caller's first request now.
    let again = [
        write(Some(&live), "other", 2),
        write(Some(&live), "shared", 3),
    ];
    assert_eq!(
        batch(&store, &again, &packages, &mut holds).await,
        [
            Seen::Fresh(201, "Spent".to_owned()),
            Seen::Replayed(201, "Spent".to_owned()),
        ]
    );
    assert_eq!(sums(&url).await.spent, 3 + 1 + 2);
    store.close().await;
}
