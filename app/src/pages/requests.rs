//! Outgoing Stripe requests by status: the indeterminate ones first (the alert about them
//! links here), each with its Idempotency-Key, order and Stripe's answer. The table is the
//! order page's too.

use claimcheck_core::outgoing::{RequestStatus, is_subscription_operation};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{KeyRow, RequestsPage as Page, list_requests};
use crate::components::Loaded;
use crate::i18n::*;

/// An outgoing request's status in the reader's words.
pub fn request_status_name(i18n: I18nContext<Locale>, status: RequestStatus) -> String {
    match status {
        RequestStatus::Pending => t_string!(i18n, orders.request_pending),
        RequestStatus::Indeterminate => t_string!(i18n, orders.request_indeterminate),
        RequestStatus::Succeeded => t_string!(i18n, orders.request_succeeded),
        RequestStatus::Failed => t_string!(i18n, orders.request_failed),
    }
    .to_string()
}

#[component]
pub fn RequestsPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let status = move || {
        query
            .read()
            .get("status")
            .and_then(|s| s.parse::<RequestStatus>().ok())
            .unwrap_or(RequestStatus::Indeterminate)
    };
    let requests = Resource::new(status, |status| list_requests(status.as_str().to_owned()));
    view! {
        <Title text=t_string!(i18n, requests.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, requests.heading)}</h1>
            <nav class="tabs" aria-label=move || t_string!(i18n, requests.tabs_label)>
                {RequestStatus::ALL
                    .iter()
                    .map(|s| {
                        let href = format!("/requests?status={s}");
                        let current = move || (status() == *s).then_some("page");
                        view! {
                            <a href=href aria-current=current data-status=s.as_str()>
                                {request_status_name(i18n, *s)}
                            </a>
                        }
                    })
                    .collect_view()}
            </nav>
            <Loaded resource=requests view=|page: Page| view! { <RequestList page/> }/>
        </section>
    }
}

#[component]
fn RequestList(page: Page) -> impl IntoView {
    let i18n = use_i18n();
    let intro = match page.status {
        RequestStatus::Indeterminate => t_string!(i18n, requests.intro_indeterminate),
        RequestStatus::Pending => t_string!(i18n, requests.intro_pending),
        RequestStatus::Failed => t_string!(i18n, requests.intro_failed),
        RequestStatus::Succeeded => t_string!(i18n, requests.intro_succeeded),
    };
    if page.rows.is_empty() {
        let status = request_status_name(i18n, page.status);
        return view! {
            <p class="muted">{intro}</p>
            <p class="empty" data-testid="no-requests">{t!(i18n, requests.none, status)}</p>
        }
        .into_any();
    }
    let (shown, total) = (page.rows.len(), page.total);
    view! {
        <p class="muted">{intro}</p>
        <p data-testid="request-count">{t_string!(i18n, requests.count, shown, total).to_string()}</p>
        <RequestTable rows=page.rows with_order=true/>
    }
    .into_any()
}

/// Requests with their key, status, Stripe's answer and when it came; with `with_order`, the
/// order each belongs to (linked) and its operation.
#[component]
pub fn RequestTable(rows: Vec<KeyRow>, with_order: bool) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, requests.table)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, orders.col_key)}</th>
                        {with_order
                            .then(|| {
                                view! {
                                    <th scope="col">{t!(i18n, requests.col_order)}</th>
                                    <th scope="col">{t!(i18n, requests.col_operation)}</th>
                                }
                            })}
                        <th scope="col">{t!(i18n, orders.col_status)}</th>
                        <th scope="col">{t!(i18n, orders.col_http)}</th>
                        <th scope="col">{t!(i18n, orders.col_attempts)}</th>
                        <th scope="col">{t!(i18n, orders.col_object)}</th>
                        <th scope="col">{t!(i18n, orders.col_error)}</th>
                        <th scope="col">{t!(i18n, orders.col_updated)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|r| {
                            let order = with_order
                                .then(|| {
                                    // A subscription's request names its reference (its page
                                    // shows the ask until Stripe tells of the subscription).
                                    let href = if is_subscription_operation(&r.operation) {
                                        crate::links::subscription(&r.order_id)
                                    } else {
                                        crate::links::order(&r.order_id)
                                    };
                                    view! {
                                        <td class="mono"><a href=href>{r.order_id.clone()}</a></td>
                                        <td>{r.operation.clone()}</td>
                                    }
                                });
                            let key = r.idempotency_key;
                            let shown = key.clone();
                            view! {
                                <tr data-key=key>
                                    <td class="mono">{shown}</td>
                                    {order}
                                    <td data-status=r.status.as_str()>{request_status_name(i18n, r.status)}</td>
                                    <td>{r.http_status.map(|s| s.to_string()).unwrap_or("-".into())}</td>
                                    <td>{r.attempts}</td>
                                    <td class="mono">{r.object_id.unwrap_or_default()}</td>
                                    <td class="error-text">{r.error.unwrap_or_default()}</td>
                                    <td>{r.at}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}
