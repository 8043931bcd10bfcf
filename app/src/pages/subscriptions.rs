//! Subscriptions: the list (by status, plan, unpaid renewals) and one subscription with the
//! credits each period got from the invoices that paid it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{
    AskedRow, GrantRow, SUBSCRIPTION_STATUSES, SubscriptionDetail, SubscriptionRow,
    get_subscription, list_subscriptions,
};
use crate::components::Loaded;
use crate::i18n::*;
use crate::pages::requests::RequestTable;

/// Stripe's status of a subscription in the reader's words; one Stripe adds later as Stripe
/// wrote it.
pub fn subscription_status_name(i18n: I18nContext<Locale>, status: Option<&str>) -> String {
    match status {
        Some("active") => t_string!(i18n, subscriptions.status_active).to_string(),
        Some("past_due") => t_string!(i18n, subscriptions.status_past_due).to_string(),
        Some("unpaid") => t_string!(i18n, subscriptions.status_unpaid).to_string(),
        Some("canceled") => t_string!(i18n, subscriptions.status_canceled).to_string(),
        Some("trialing") => t_string!(i18n, subscriptions.status_trialing).to_string(),
        Some("incomplete") => t_string!(i18n, subscriptions.status_incomplete).to_string(),
        Some("incomplete_expired") => {
            t_string!(i18n, subscriptions.status_incomplete_expired).to_string()
        }
        Some("paused") => t_string!(i18n, subscriptions.status_paused).to_string(),
        Some(other) => other.to_owned(),
        None => t_string!(i18n, subscriptions.status_unknown).to_string(),
    }
}

#[component]
pub fn SubscriptionsPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let field = move |name: &'static str| move || query.read().get(name).unwrap_or_default();
    let list = Resource::new(
        move || {
            let q = query.read();
            (
                q.get("status").unwrap_or_default(),
                q.get("plan").unwrap_or_default(),
                q.get("past_due").is_some_and(|v| !v.is_empty()),
            )
        },
        |(status, plan, past_due)| list_subscriptions(status, plan, past_due),
    );
    view! {
        <Title text=t_string!(i18n, subscriptions.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, subscriptions.heading)}</h1>
            <p class="muted">{t!(i18n, subscriptions.intro)}</p>
            <form
                method="get"
                action="/subscriptions"
                class="filters"
                aria-label=move || t_string!(i18n, subscriptions.filters)
            >
                <label>
                    {t!(i18n, subscriptions.status)}
                    <select name="status">
                        <option value="" selected=move || field("status")().is_empty()>
                            {t!(i18n, subscriptions.any_status)}
                        </option>
                        {SUBSCRIPTION_STATUSES
                            .map(|s| {
                                let selected = move || field("status")() == s;
                                view! {
                                    <option value=s selected=selected>
                                        {subscription_status_name(i18n, Some(s))}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    {t!(i18n, subscriptions.plan)}
                    <input name="plan" value=field("plan") placeholder="thesis-monthly"/>
                </label>
                <label class="check">
                    <input
                        type="checkbox"
                        name="past_due"
                        value="1"
                        checked=move || !field("past_due")().is_empty()
                    />
                    {t!(i18n, subscriptions.past_due)}
                </label>
                <button type="submit" class="button">{t!(i18n, subscriptions.apply)}</button>
            </form>
            <Loaded resource=list view=|rows| view! { <SubscriptionTable rows/> }/>
        </section>
    }
}

#[component]
fn SubscriptionTable(rows: Vec<SubscriptionRow>) -> impl IntoView {
    let i18n = use_i18n();
    if rows.is_empty() {
        return view! { <p class="empty" data-testid="no-subscriptions">{t!(i18n, subscriptions.none)}</p> }
            .into_any();
    }
    let n = rows.len();
    view! {
        <p data-testid="subscription-count">{t_string!(i18n, subscriptions.count, n).to_string()}</p>
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, subscriptions.heading) data-testid="subscriptions-list">
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, subscriptions.col_subscription)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_ref)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_customer)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_plan)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_status)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_period_end)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_unpaid)}</th>
                        <th scope="col" class="num">{t!(i18n, subscriptions.col_granted)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|s| {
                            let href = crate::links::subscription(&s.subscription_id);
                            let scheduled = s.scheduled_plan.clone().map(|plan| {
                                let at = s.scheduled_at.clone().unwrap_or_default();
                                let text = t_string!(i18n, subscriptions.scheduled_short, plan, at)
                                    .to_string();
                                view! { " " <span class="muted" data-testid="scheduled-change">{text}</span> }
                            });
                            let unplanned = s.unplanned_price.clone().map(|price| {
                                let text = t_string!(i18n, subscriptions.unplanned_short, price)
                                    .to_string();
                                view! { " " <span class="error-text" data-testid="unplanned-renewal">{text}</span> }
                            });
                            let customer = s.customer.clone().map(|c| {
                                let href = crate::links::customer(&c);
                                view! { <a href=href>{c}</a> }
                            });
                            view! {
                                <tr data-subscription=s.subscription_id.clone()>
                                    <td class="mono"><a href=href>{s.subscription_id.clone()}</a></td>
                                    <td class="mono">{s.subscription_ref.unwrap_or_default()}</td>
                                    <td>{customer}</td>
                                    <td>
                                        {s.plan.unwrap_or_default()}
                                        {scheduled}
                                        {unplanned}
                                    </td>
                                    <td data-status=s.status.clone().unwrap_or_default()>
                                        {subscription_status_name(i18n, s.status.as_deref())}
                                    </td>
                                    <td>{s.period_end.unwrap_or_default()}</td>
                                    <td class="mono">{s.unpaid_invoice.unwrap_or_default()}</td>
                                    <td class="num">{s.credits_granted}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

#[component]
pub fn SubscriptionPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let detail = Resource::new(id, get_subscription);
    let title = t_string!(
        i18n,
        subscriptions.detail_title,
        id = params.read_untracked().get("id").unwrap_or_default()
    )
    .to_string();
    view! {
        <Title text=title/>
        <section class="page">
            <p><a href="/subscriptions">{t!(i18n, subscriptions.back)}</a></p>
            <Loaded resource=detail view=|detail| view! { <SubscriptionView detail/> }/>
        </section>
    }
}

#[component]
fn SubscriptionView(detail: SubscriptionDetail) -> impl IntoView {
    let i18n = use_i18n();
    let SubscriptionDetail {
        subscription,
        asked,
        grants,
        requests,
    } = detail;
    let heading = subscription
        .as_ref()
        .map(|s| s.subscription_id.clone())
        .or_else(|| asked.as_ref().map(|a| a.subscription_ref.clone()))
        .unwrap_or_default();
    let requests = if requests.is_empty() {
        view! { <p class="empty">{t!(i18n, orders.no_requests)}</p> }.into_any()
    } else {
        view! { <RequestTable rows=requests with_order=false/> }.into_any()
    };
    view! {
        <h1 class="mono">{heading}</h1>
        {match subscription {
            Some(s) => view! {
                <SubscriptionFacts s/>
                <h2>{t!(i18n, subscriptions.grants)}</h2>
                <p class="muted">{t!(i18n, subscriptions.grants_intro)}</p>
                <GrantTable grants/>
            }
            .into_any(),
            None => view! {
                <p class="notice" data-testid="subscription-awaiting">
                    {t!(i18n, subscriptions.awaiting_intro)}
                </p>
            }
            .into_any(),
        }}
        {asked.map(|asked| view! { <AskedFacts asked/> })}
        <h2>{t!(i18n, orders.keys_heading)}</h2>
        {requests}
    }
}

/// What Stripe's Billing events told of a subscription.
#[component]
fn SubscriptionFacts(s: SubscriptionRow) -> impl IntoView {
    let i18n = use_i18n();
    let status = subscription_status_name(i18n, s.status.as_deref());
    let cancels = s
        .cancel_at_period_end
        .then(|| view! { " · " {t!(i18n, subscriptions.cancels)} });
    let unpaid = match (s.unpaid_invoice.clone(), s.unpaid_since.clone()) {
        (Some(invoice), since) => {
            let since = since.unwrap_or_default();
            t_string!(i18n, subscriptions.unpaid_since, invoice, since).to_string()
        }
        (None, _) => t_string!(i18n, subscriptions.paid_up).to_string(),
    };
    let customer = s.customer.clone().map(|c| {
        let href = crate::links::customer(&c);
        view! { <a href=href>{c}</a> }
    });
    let scheduled = s.scheduled_plan.clone().map(|plan| {
        let at = s.scheduled_at.clone().unwrap_or_default();
        let text = t_string!(i18n, subscriptions.scheduled, plan, at).to_string();
        view! {
            <dt>{t!(i18n, subscriptions.col_scheduled)}</dt>
            <dd data-testid="subscription-scheduled">{text}</dd>
        }
    });
    let unplanned = s.unplanned_price.clone().map(|price| {
        let at = s.unplanned_at.clone().unwrap_or_default();
        let text = t_string!(i18n, subscriptions.unplanned, price, at).to_string();
        view! {
            <dt>{t!(i18n, subscriptions.col_renewal)}</dt>
            <dd class="error-text" data-testid="subscription-unplanned">{text}</dd>
        }
    });
    view! {
        <dl class="facts" data-testid="subscription-facts">
            <dt>{t!(i18n, subscriptions.col_ref)}</dt>
            <dd class="mono">{s.subscription_ref.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, subscriptions.col_customer)}</dt>
            <dd>{customer}</dd>
            <dt>{t!(i18n, subscriptions.col_plan)}</dt>
            <dd data-testid="subscription-plan">{s.plan.clone().unwrap_or_else(|| "-".into())}</dd>
            {scheduled}
            {unplanned}
            <dt>{t!(i18n, subscriptions.col_status)}</dt>
            <dd data-testid="subscription-status">{status}{cancels}</dd>
            <dt>{t!(i18n, subscriptions.col_period_end)}</dt>
            <dd>{s.period_end.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, subscriptions.col_unpaid)}</dt>
            <dd data-testid="subscription-unpaid">{unpaid}</dd>
            <dt>{t!(i18n, subscriptions.col_granted)}</dt>
            <dd data-testid="subscription-granted">{s.credits_granted}</dd>
            <dt>{t!(i18n, subscriptions.updated)}</dt>
            <dd>{s.updated_at.clone()}</dd>
        </dl>
    }
}

/// What the shop asked for through the order API, and the Checkout Session it opened.
#[component]
fn AskedFacts(asked: AskedRow) -> impl IntoView {
    let i18n = use_i18n();
    let href = crate::links::customer(&asked.customer);
    let interval = match asked.interval.as_str() {
        "day" => t_string!(i18n, subscriptions.interval_day).to_string(),
        "week" => t_string!(i18n, subscriptions.interval_week).to_string(),
        "month" => t_string!(i18n, subscriptions.interval_month).to_string(),
        "year" => t_string!(i18n, subscriptions.interval_year).to_string(),
        other => other.to_owned(),
    };
    let price = t_string!(
        i18n,
        subscriptions.price_per,
        price = asked.price.clone(),
        interval,
        credits = asked.credits
    )
    .to_string();
    let session = match (asked.checkout_session_id.clone(), asked.checkout_expired) {
        (None, _) => t_string!(i18n, subscriptions.no_session).to_string(),
        (Some(id), true) => t_string!(i18n, subscriptions.session_expired, id).to_string(),
        (Some(id), false) => id,
    };
    let link = asked
        .checkout_url
        .clone()
        .filter(|_| !asked.checkout_expired)
        .map(|url| {
            let href = url.clone();
            view! {
                <dt>{t!(i18n, subscriptions.checkout_link)}</dt>
                <dd class="mono"><a href=href rel="noreferrer">{url}</a></dd>
            }
        });
    view! {
        <h2>{t!(i18n, subscriptions.asked_heading)}</h2>
        <dl class="facts" data-testid="subscription-asked">
            <dt>{t!(i18n, subscriptions.col_ref)}</dt>
            <dd class="mono">{asked.subscription_ref.clone()}</dd>
            <dt>{t!(i18n, subscriptions.col_customer)}</dt>
            <dd><a href=href>{asked.customer.clone()}</a></dd>
            <dt>{t!(i18n, subscriptions.col_plan)}</dt>
            <dd>{asked.plan.clone()}" · "{price}</dd>
            <dt>{t!(i18n, subscriptions.checkout_session)}</dt>
            <dd class="mono" data-testid="subscription-session">{session}</dd>
            {link}
            <dt>{t!(i18n, subscriptions.checkout_expires)}</dt>
            <dd>{asked.checkout_expires_at.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, subscriptions.asked_at)}</dt>
            <dd>{asked.asked_at.clone()}</dd>
        </dl>
    }
}

#[component]
fn GrantTable(grants: Vec<GrantRow>) -> impl IntoView {
    let i18n = use_i18n();
    if grants.is_empty() {
        return view! { <p class="empty">{t!(i18n, subscriptions.no_grants)}</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, subscriptions.grants) data-testid="subscription-grants">
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, subscriptions.col_from)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_to)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_step)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_plan)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_invoice)}</th>
                        <th scope="col" class="num">{t!(i18n, subscriptions.col_entitled)}</th>
                        <th scope="col" class="num">{t!(i18n, subscriptions.col_credits)}</th>
                        <th scope="col" class="num">{t!(i18n, subscriptions.col_revoked)}</th>
                        <th scope="col">{t!(i18n, subscriptions.col_granted_at)}</th>
                    </tr>
                </thead>
                <tbody>
                    {grants
                        .into_iter()
                        .map(|g| {
                            let step = match g.step.as_str() {
                                "proration" => t_string!(i18n, subscriptions.step_proration).to_string(),
                                _ => t_string!(i18n, subscriptions.step_period).to_string(),
                            };
                            let plan = match &g.from_plan {
                                Some(from) => format!("{from} → {}", g.plan),
                                None => g.plan.clone(),
                            };
                            let href = crate::links::order(&g.invoice_id);
                            let invoice = g.invoice_id.clone();
                            view! {
                                <tr data-invoice=invoice data-step=g.step.clone()>
                                    <td>{g.period_start}</td>
                                    <td>{g.period_end}</td>
                                    <td>{step}</td>
                                    <td>{plan}</td>
                                    <td class="mono"><a href=href>{g.invoice_id}</a></td>
                                    <td class="num">{g.entitled}</td>
                                    <td class="num">{g.credits}</td>
                                    <td class="num">{g.revoked}</td>
                                    <td>{g.granted_at}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}
