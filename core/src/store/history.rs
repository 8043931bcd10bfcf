//! The overview's pictures: what happened day by day over the last weeks. Credits and money
//! are read from the ledger (each step dated when it was written), the backlog from the
//! samples the alert checks take once an hour. Days are UTC days.

use super::query::sql;
use super::{Alerts, Orders};
use crate::error::StoreError;
use crate::money::LedgerKind;

/// A day in milliseconds.
const DAY_MS: i64 = 86_400_000;
/// An hour in milliseconds.
const HOUR_MS: i64 = 3_600_000;

/// One UTC day of the overview's pictures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DayFigures {
    /// The day's start (unix ms, UTC).
    pub day: i64,
    /// Credits unlocked by payments.
    pub unlocked: i64,
    /// Credits taken back for refunds and disputes (a positive number).
    pub revoked: i64,
    /// Money paid, refunded (net of refunds that failed) and disputed, in the minor unit of
    /// [`History::currency`].
    pub revenue: i64,
    pub refunds: i64,
    pub chargebacks: i64,
    /// The most failed and stale claims a check saw that day; `None` without a sample.
    pub failed: Option<i64>,
    pub stale: Option<i64>,
}

/// The last `days` days, oldest first, and the currency their money is in: the one most was
/// paid in (money in another currency is left out rather than added up with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    pub currency: String,
    pub days: Vec<DayFigures>,
}

/// What each kind of money the ledger records per day and currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoneyKind {
    Revenue,
    Refunds,
    Chargebacks,
}

/// Money per (day index, currency, kind), as read.
pub type MoneyRow = (i64, String, MoneyKind, i64);

/// Payments: the order's amount on the day its credits were unlocked.
const REVENUE: &str = "\
    SELECT l.created_at / 86400000, COALESCE(o.currency, ''), \
           CAST(SUM(COALESCE(o.amount, 0)) AS BIGINT) \
    FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id \
    WHERE l.kind = 'unlock' AND l.created_at >= $1 \
    GROUP BY 1, 2";

/// Refunds: a revoke or restore step carries the order's refunded total after it, so the
/// step's own money is the difference to the step before (negative for a refund that
/// failed). Only orders with a step in the window are read whole.
const REFUNDS: &str = "\
    SELECT created_at / 86400000, currency, CAST(SUM(step) AS BIGINT) FROM ( \
        SELECT l.created_at, COALESCE(o.currency, '') AS currency, \
               l.amount - COALESCE(LAG(l.amount) OVER ( \
                   PARTITION BY l.order_id ORDER BY l.created_at, l.id), 0) AS step \
        FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id \
        WHERE l.kind IN ('revoke', 'restore') AND l.amount IS NOT NULL \
          AND l.order_id IN (SELECT order_id FROM credit_ledger \
                             WHERE kind IN ('revoke', 'restore') AND created_at >= $1) \
    ) steps \
    WHERE created_at >= $1 \
    GROUP BY 1, 2";

/// Chargebacks: the money a dispute holds, on the day it was opened.
const CHARGEBACKS: &str = "\
    SELECT l.created_at / 86400000, COALESCE(o.currency, ''), \
           CAST(SUM(COALESCE(l.amount, 0)) AS BIGINT) \
    FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id \
    WHERE l.kind = 'dispute_hold' AND l.created_at >= $1 \
    GROUP BY 1, 2";

impl Orders<'_> {
    /// Credits per UTC day (its number since the epoch) and ledger kind, since `since`.
    pub async fn credits_by_day(
        self,
        since: i64,
    ) -> Result<Vec<(i64, LedgerKind, i64)>, StoreError> {
        const SQL: &str = "SELECT created_at / 86400000, kind, CAST(SUM(delta) AS BIGINT) \
                           FROM credit_ledger WHERE created_at >= $1 GROUP BY 1, 2";
        let rows: Vec<(i64, String, i64)> = self.pool.on().all(sql(SQL).bind(since)).await?;
        rows.into_iter()
            .map(|(day, kind, sum)| Ok((day, kind.parse().map_err(StoreError::UnknownValue)?, sum)))
            .collect()
    }

    /// Money per UTC day (its number since the epoch), currency and kind, since `since`.
    pub async fn money_by_day(self, since: i64) -> Result<Vec<MoneyRow>, StoreError> {
        let mut rows = Vec::new();
        for (statement, kind) in [
            (REVENUE, MoneyKind::Revenue),
            (REFUNDS, MoneyKind::Refunds),
            (CHARGEBACKS, MoneyKind::Chargebacks),
        ] {
            let read: Vec<(i64, String, i64)> =
                self.pool.on().all(sql(statement).bind(since)).await?;
            rows.extend(
                read.into_iter()
                    .map(|(day, currency, sum)| (day, currency, kind, sum)),
            );
        }
        Ok(rows)
    }
}

impl Alerts<'_> {
    /// Remembers the backlog at `now` for its hour, unless this hour has a sample already
    /// (from this instance or another).
    pub async fn record_backlog(self, now: i64, failed: i64, stale: i64) -> Result<(), StoreError> {
        const SQL: &str = "INSERT INTO backlog_samples (hour, failed, stale) VALUES ($1, $2, $3) \
                           ON CONFLICT (hour) DO NOTHING";
        let hour = now - now.rem_euclid(HOUR_MS);
        self.pool
            .on()
            .execute(sql(SQL).bind(hour).bind(failed).bind(stale))
            .await?;
        Ok(())
    }

    /// The largest failed and stale backlog sampled per UTC day (its number since the
    /// epoch), since `since`.
    pub async fn backlog_by_day(self, since: i64) -> Result<Vec<(i64, i64, i64)>, StoreError> {
        const SQL: &str = "SELECT hour / 86400000, MAX(failed), MAX(stale) FROM backlog_samples \
                           WHERE hour >= $1 GROUP BY 1";
        Ok(self.pool.on().all(sql(SQL).bind(since)).await?)
    }
}

impl History {
    /// The `days` UTC days up to and including `now`'s, from what the store read since the
    /// first of them (see [`History::since`]).
    pub fn assemble(
        now: i64,
        days: usize,
        credits: &[(i64, LedgerKind, i64)],
        money: &[MoneyRow],
        backlog: &[(i64, i64, i64)],
    ) -> History {
        let first = Self::since(now, days) / DAY_MS;
        let mut figures: Vec<DayFigures> = (0..days as i64)
            .map(|i| DayFigures {
                day: (first + i) * DAY_MS,
                ..DayFigures::default()
            })
            .collect();
        let index = |day: i64| usize::try_from(day - first).ok().filter(|i| *i < days);
        for &(day, kind, sum) in credits {
            if let Some(f) = index(day).map(|i| &mut figures[i]) {
                match kind {
                    LedgerKind::Unlock => f.unlocked += sum,
                    LedgerKind::Revoke | LedgerKind::DisputeHold => f.revoked -= sum,
                    // Credits given back (a refund failed, a dispute won) lower what was
                    // taken back that day.
                    LedgerKind::Restore | LedgerKind::DisputeRelease => f.revoked -= sum,
                }
            }
        }
        let currency = main_currency(money);
        for (day, row_currency, kind, sum) in money {
            if *row_currency != currency {
                continue;
            }
            if let Some(f) = index(*day).map(|i| &mut figures[i]) {
                match kind {
                    MoneyKind::Revenue => f.revenue += sum,
                    MoneyKind::Refunds => f.refunds += sum,
                    MoneyKind::Chargebacks => f.chargebacks += sum,
                }
            }
        }
        for &(day, failed, stale) in backlog {
            if let Some(f) = index(day).map(|i| &mut figures[i]) {
                f.failed = Some(failed);
                f.stale = Some(stale);
            }
        }
        History {
            currency,
            days: figures,
        }
    }

    /// The start of the first of the `days` UTC days that end with `now`'s.
    pub fn since(now: i64, days: usize) -> i64 {
        (now.div_euclid(DAY_MS) - (days as i64 - 1)) * DAY_MS
    }
}

/// The currency most was paid in ("chf" when nothing was).
fn main_currency(money: &[MoneyRow]) -> String {
    let mut paid: Vec<(&str, i64)> = Vec::new();
    for (_, currency, kind, sum) in money {
        if *kind != MoneyKind::Revenue || currency.is_empty() {
            continue;
        }
        match paid.iter_mut().find(|(c, _)| c == currency) {
            Some((_, total)) => *total += sum,
            None => paid.push((currency, *sum)),
        }
    }
    paid.into_iter()
        .max_by_key(|(_, total)| *total)
        .map(|(currency, _)| currency.to_owned())
        .unwrap_or_else(|| "chf".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 20_000 * DAY_MS + 5 * HOUR_MS;

    #[test]
    fn days_end_with_today_and_steps_land_on_theirs() {
        let history = History::assemble(
            NOW,
            30,
            &[
                (20_000, LedgerKind::Unlock, 40),
                (20_000, LedgerKind::Revoke, -20),
                (19_999, LedgerKind::DisputeHold, -10),
                (19_999, LedgerKind::DisputeRelease, 10),
                // Before the window: left out.
                (19_900, LedgerKind::Unlock, 99),
            ],
            &[
                (20_000, "chf".into(), MoneyKind::Revenue, 4900),
                (20_000, "chf".into(), MoneyKind::Refunds, 2450),
                (19_999, "chf".into(), MoneyKind::Chargebacks, 1000),
                (20_000, "eur".into(), MoneyKind::Revenue, 100),
            ],
            &[(19_998, 3, 1)],
        );
        assert_eq!(history.currency, "chf");
        assert_eq!(history.days.len(), 30);
        assert_eq!(history.days[0].day, 19_971 * DAY_MS);
        let today = &history.days[29];
        assert_eq!(today.day, 20_000 * DAY_MS);
        assert_eq!((today.unlocked, today.revoked), (40, 20));
        assert_eq!((today.revenue, today.refunds), (4900, 2450));
        let yesterday = &history.days[28];
        assert_eq!((yesterday.revoked, yesterday.chargebacks), (0, 1000));
        assert_eq!(
            (history.days[27].failed, history.days[27].stale),
            (Some(3), Some(1))
        );
        assert_eq!(today.failed, None);
        let total: i64 = history.days.iter().map(|d| d.unlocked).sum();
        assert_eq!(total, 40, "the step before the window is not counted");
    }

    #[test]
    fn the_money_is_in_the_currency_most_was_paid_in() {
        let history = History::assemble(
            NOW,
            2,
            &[],
            &[
                (20_000, "chf".into(), MoneyKind::Revenue, 100),
                (20_000, "eur".into(), MoneyKind::Revenue, 500),
                (20_000, "chf".into(), MoneyKind::Refunds, 100),
            ],
            &[],
        );
        assert_eq!(history.currency, "eur");
        assert_eq!(history.days[1].revenue, 500);
        assert_eq!(history.days[1].refunds, 0, "francs are not added to euros");
        assert_eq!(History::assemble(NOW, 1, &[], &[], &[]).currency, "chf");
    }
}
