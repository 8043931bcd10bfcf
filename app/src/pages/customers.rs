//! One customer, found by e-mail or customer id: what is waiting, their orders, their credit
//! history and every event that names them.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{CreditsDetail, CustomerDetail, CustomerLedgerRow, MovementRow, get_customer};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;
use crate::pages::events::ClaimTable;
use crate::pages::orders::{OrderSummary, ledger_kind_name};

#[component]
pub fn CustomerPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let who = move || params.read().get("who").unwrap_or_default();
    let customer = Resource::new(who, get_customer);
    view! {
        <Title text=t_string!(i18n, customers.title).to_string()/>
        <section class="page">
            <ActionNotices/>
            <Loaded resource=customer view=customer_view/>
        </section>
    }
}

fn customer_view(c: CustomerDetail) -> impl IntoView {
    let i18n = use_i18n();
    let customer = c.customer.clone();
    // The order ledger and the other changes (spends, expiries, adjustments), newest first.
    let mut history: Vec<HistoryRow> = c
        .history
        .into_iter()
        .map(HistoryRow::Order)
        .chain(c.movements.into_iter().map(HistoryRow::Movement))
        .collect();
    history.sort_by_key(|row| std::cmp::Reverse(row.at_ms()));
    view! {
        <h1 class="mono" data-testid="customer">{c.customer}</h1>
        <p class="balance">
            {t!(i18n, customers.balance_before)} " "
            <strong data-testid="customer-balance">{crate::i18n::number(i18n.get_locale(), c.balance)}</strong> " "
            {t!(i18n, customers.balance_after)}
        </p>
        {c.credits.map(|credits| view! { <Credits credits customer=customer.clone()/> })}
        <h2>{t!(i18n, customers.waiting)}</h2>
        {if c.waiting.is_empty() {
            view! { <p class="empty" data-testid="nothing-waiting">{t!(i18n, customers.nothing_waiting)}</p> }
                .into_any()
        } else {
            view! {
                <p class="muted">{t!(i18n, customers.waiting_hint)}</p>
                <div data-testid="customer-waiting">
                    <ClaimTable rows=c.waiting/>
                </div>
            }
                .into_any()
        }}
        <h2>{t!(i18n, customers.orders)}</h2>
        {if c.orders.is_empty() {
            view! { <p class="empty">{t!(i18n, customers.no_orders)}</p> }.into_any()
        } else {
            c.orders.into_iter().map(|order| view! { <OrderSummary order/> }).collect_view().into_any()
        }}
        <CustomerSubscriptions subscriptions=c.subscriptions asked=c.asked/>
        <h2>{t!(i18n, customers.history)}</h2>
        {if history.is_empty() {
            view! { <p class="empty">{t!(i18n, customers.no_history)}</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label=move || t_string!(i18n, customers.history) data-testid="customer-history">
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, customers.col_when)}</th>
                                <th scope="col">{t!(i18n, customers.col_order)}</th>
                                <th scope="col">{t!(i18n, customers.col_entry)}</th>
                                <th scope="col">{t!(i18n, customers.col_credits)}</th>
                                <th scope="col">{t!(i18n, customers.col_money)}</th>
                            </tr>
                        </thead>
                        <tbody>
                            {history.into_iter().map(history_row).collect_view()}
                        </tbody>
                    </table>
                </div>
            }
                .into_any()
        }}
        <h2>{t!(i18n, customers.events)}</h2>
        <ClaimTable rows=c.events/>
    }
}

/// The most credits one adjustment may move (the engine's limit of one order).
const MAX_ADJUST: i64 = 1_000_000;

/// One row of a customer's credit history.
enum HistoryRow {
    Order(CustomerLedgerRow),
    Movement(MovementRow),
}

impl HistoryRow {
    fn at_ms(&self) -> i64 {
        match self {
            HistoryRow::Order(row) => row.entry.at_ms,
            HistoryRow::Movement(row) => row.at_ms,
        }
    }
}

fn history_row(row: HistoryRow) -> impl IntoView {
    let i18n = use_i18n();
    match row {
        HistoryRow::Order(row) => {
            let href = crate::links::order(&row.order_id);
            let e = row.entry;
            view! {
                <tr>
                    <td class="nowrap">{e.at}</td>
                    <td class="mono"><a href=href>{row.order_id}</a></td>
                    <td data-kind=e.kind.as_str()>{ledger_kind_name(i18n, e.kind)}</td>
                    <td class="nowrap">{format!("{:+}", e.delta)}</td>
                    <td>{e.money}</td>
                </tr>
            }
            .into_any()
        }
        HistoryRow::Movement(m) => {
            let name = match m.kind.as_str() {
                "spend" => t_string!(i18n, customers.kind_spend).to_string(),
                "capture" => t_string!(i18n, customers.kind_capture).to_string(),
                "expire" => t_string!(i18n, customers.kind_expire).to_string(),
                _ => t_string!(i18n, customers.kind_adjust).to_string(),
            };
            // What it is about: the order of the lot an expiry took, else the spend or
            // adjustment itself.
            let about = match &m.order_id {
                Some(order) if m.kind == "expire" => {
                    let href = crate::links::order(order);
                    view! { <a href=href>{order.clone()}</a> }.into_any()
                }
                _ => view! { <span>{m.movement_id.clone()}</span> }.into_any(),
            };
            let detail = [
                m.reference.clone(),
                m.hold_id.clone(),
                m.reason.clone(),
                m.actor.clone(),
                m.idempotency_key
                    .clone()
                    .map(|k| format!("Idempotency-Key {k}")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" · ");
            view! {
                <tr data-testid="movement" data-movement=m.movement_id.clone()>
                    <td class="nowrap">{m.at}</td>
                    <td class="mono">{about}</td>
                    <td data-kind=m.kind.clone()>{name}</td>
                    <td class="nowrap">{format!("{:+}", m.delta)}</td>
                    <td class="mono">{detail}</td>
                </tr>
            }
            .into_any()
        }
    }
}

/// What a customer has to spend: available, held and owed credits, the lots they come from,
/// and for support the adjustment form.
#[component]
fn Credits(credits: CreditsDetail, customer: String) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale();
    let n = move |v: i64| crate::i18n::number(locale, v);
    let CreditsDetail {
        available,
        held,
        owed,
        expiring,
        lots,
        adjust,
    } = credits;
    view! {
        <dl class="figures" data-testid="customer-credits">
            <div><dt>{t!(i18n, customers.available)}</dt><dd data-testid="credits-available">{n(available)}</dd></div>
            <div><dt>{t!(i18n, customers.held)}</dt><dd data-testid="credits-held">{n(held)}</dd></div>
            <div class:warn={owed > 0}>
                <dt>{t!(i18n, customers.owed)}</dt>
                <dd data-testid="credits-owed">{n(owed)}</dd>
            </div>
        </dl>
        {(owed > 0).then(|| view! { <p class="warn" role="note">{t!(i18n, customers.owed_hint)}</p> })}
        {expiring.map(|(credits, at)| {
            let credits = n(credits);
            view! { <p data-testid="credits-expiring">{t!(i18n, customers.expiring, credits, at)}</p> }
        })}
        <h2>{t!(i18n, customers.lots)}</h2>
        {if lots.is_empty() {
            view! { <p class="empty">{t!(i18n, customers.no_lots)}</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table class="stacked" aria-label=move || t_string!(i18n, customers.lots) data-testid="customer-lots">
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, customers.col_lot)}</th>
                                <th scope="col">{t!(i18n, customers.col_credits)}</th>
                                <th scope="col">{t!(i18n, customers.col_used)}</th>
                                <th scope="col">{t!(i18n, customers.col_left)}</th>
                                <th scope="col">{t!(i18n, customers.col_expires)}</th>
                            </tr>
                        </thead>
                        <tbody>
                            {lots
                                .into_iter()
                                .map(|lot| {
                                    let name = match &lot.order_id {
                                        Some(order) => {
                                            let href = crate::links::order(order);
                                            view! { <a href=href>{order.clone()}</a> }.into_any()
                                        }
                                        None => view! { <span>{lot.lot_id.clone()}</span> }.into_any(),
                                    };
                                    let expires = if lot.expired {
                                        t_string!(i18n, customers.expired).to_string()
                                    } else {
                                        lot.expires.clone().unwrap_or_else(|| t_string!(i18n, customers.never).to_string())
                                    };
                                    view! {
                                        <tr data-lot=lot.lot_id.clone()>
                                            <td class="mono" data-label=move || t_string!(i18n, customers.col_lot)>{name}</td>
                                            <td data-label=move || t_string!(i18n, customers.col_credits)>{n(lot.credits)}</td>
                                            <td data-label=move || t_string!(i18n, customers.col_used)>{n(lot.spent)}</td>
                                            <td data-label=move || t_string!(i18n, customers.col_left) class:warn={lot.remaining < 0}>{n(lot.remaining)}</td>
                                            <td class="nowrap" data-label=move || t_string!(i18n, customers.col_expires)>{expires}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            }
                .into_any()
        }}
        {adjust.map(|form| {
            let limit_hint = match form.limit {
                Some(limit) => t_string!(i18n, customers.adjust_limit, limit).to_string(),
                None => t_string!(i18n, customers.adjust_any).to_string(),
            };
            let bound = form.limit.unwrap_or(MAX_ADJUST);
            view! {
                <details class="adjust" data-testid="adjust">
                    <summary>{t!(i18n, customers.adjust_title)}</summary>
                    <form method="post" action="/dashboard/actions/credits/adjust" class="stack narrow">
                        <input type="hidden" name="customer" value=customer.clone()/>
                        <input type="hidden" name="key" value=form.key/>
                        <label>
                            {t!(i18n, customers.adjust_credits)}
                            <input type="number" name="credits" required step="1" min=-bound max=bound aria-describedby="adjust-limit"/>
                        </label>
                        <small id="adjust-limit" class="muted">{limit_hint}</small>
                        <label>
                            {t!(i18n, customers.adjust_reason)}
                            <input type="text" name="reason" required maxlength="500"/>
                        </label>
                        <label>
                            {t!(i18n, customers.adjust_expires)}
                            <input type="text" name="expires" placeholder="90d" maxlength="10" aria-describedby="adjust-expires"/>
                        </label>
                        <small id="adjust-expires" class="muted">{t!(i18n, customers.adjust_expires_hint)}</small>
                        <label class="check">
                            <input type="checkbox" name="confirm" value="yes" required/>
                            {t!(i18n, customers.adjust_confirm)}
                        </label>
                        <button type="submit">{t!(i18n, customers.adjust_submit)}</button>
                    </form>
                </details>
            }
        })}
    }
}

/// The customer's subscriptions and those asked for but not paid yet; nothing for a customer
/// who never had one.
#[component]
fn CustomerSubscriptions(
    subscriptions: Vec<crate::api::SubscriptionRow>,
    asked: Vec<crate::api::AskedRow>,
) -> impl IntoView {
    let i18n = use_i18n();
    if subscriptions.is_empty() && asked.is_empty() {
        return ().into_any();
    }
    let started = subscriptions.into_iter().map(|s| {
        let href = crate::links::subscription(&s.subscription_id);
        let status =
            crate::pages::subscriptions::subscription_status_name(i18n, s.status.as_deref());
        view! {
            <tr data-subscription=s.subscription_id.clone()>
                <td class="mono"><a href=href>{s.subscription_id.clone()}</a></td>
                <td class="mono">{s.subscription_ref.unwrap_or_default()}</td>
                <td>{s.plan.unwrap_or_default()}</td>
                <td>{status}</td>
                <td>{s.period_end.unwrap_or_default()}</td>
                <td class="num">{s.credits_granted}</td>
            </tr>
        }
    });
    let waiting = asked.into_iter().map(|a| {
        let href = crate::links::subscription(&a.subscription_ref);
        let status = if a.checkout_expired {
            t_string!(i18n, customers.subscription_checkout_expired).to_string()
        } else {
            t_string!(i18n, customers.subscription_awaiting).to_string()
        };
        view! {
            <tr data-subscription=a.subscription_ref.clone()>
                <td class="mono"><a href=href>{a.subscription_ref.clone()}</a></td>
                <td class="mono">{a.subscription_ref.clone()}</td>
                <td>{a.plan}</td>
                <td>{status}</td>
                <td>"-"</td>
                <td class="num">0</td>
            </tr>
        }
    });
    view! {
        <h2>{t!(i18n, customers.subscriptions)}</h2>
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, customers.subscriptions) data-testid="customer-subscriptions">
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, subscriptions.col_subscription)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_ref)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_plan)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_status)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_period_end)}</th>
                        <th scope="col" class="num">{t!(i18n, subscriptions.col_granted)}</th>
                    </tr>
                </thead>
                <tbody>{waiting.collect_view()}{started.collect_view()}</tbody>
            </table>
        </div>
    }
    .into_any()
}
