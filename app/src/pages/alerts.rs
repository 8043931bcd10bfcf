//! Alerts: what is wrong now (open alerts, with the page that shows it) and what was, with
//! every message each sent and how its delivery went. The header's badge counts the open ones.

use claimcheck_core::alert::{AlertChannel, AlertCondition, DeliveryStatus, MessageKind};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api::alerts::{AlertHistory, AlertMessageRow, AlertRow, get_alert_badge, get_alerts};
use crate::components::Loaded;
use crate::i18n::*;

/// A condition's heading in the reader's words.
pub(crate) fn condition_title(i18n: I18nContext<Locale>, condition: AlertCondition) -> String {
    names::condition(i18n.get_locale(), condition)
}

/// Why a message went out, in the reader's words.
pub(crate) fn message_kind_name(i18n: I18nContext<Locale>, kind: MessageKind) -> String {
    match kind {
        MessageKind::Opened => t_string!(i18n, alerts.kind_opened).to_string(),
        MessageKind::Reminder => t_string!(i18n, alerts.kind_reminder).to_string(),
        MessageKind::Resolved => t_string!(i18n, alerts.kind_resolved).to_string(),
        MessageKind::Test => t_string!(i18n, alerts.kind_test).to_string(),
    }
}

/// A channel in the reader's words.
pub(crate) fn channel_name(i18n: I18nContext<Locale>, channel: AlertChannel) -> String {
    match channel {
        AlertChannel::Email => t_string!(i18n, alerts.channel_email).to_string(),
        AlertChannel::Webhook => t_string!(i18n, alerts.channel_webhook).to_string(),
    }
}

/// How a message's delivery went, in the reader's words.
pub(crate) fn delivery_status_name(i18n: I18nContext<Locale>, status: DeliveryStatus) -> String {
    match status {
        DeliveryStatus::Pending => t_string!(i18n, alerts.delivery_pending).to_string(),
        DeliveryStatus::Sent => t_string!(i18n, alerts.delivery_sent).to_string(),
        DeliveryStatus::Failed => t_string!(i18n, alerts.delivery_failed).to_string(),
        DeliveryStatus::Superseded => t_string!(i18n, alerts.delivery_superseded).to_string(),
    }
}

#[component]
pub fn AlertsPage() -> impl IntoView {
    let i18n = use_i18n();
    let history = Resource::new(|| (), |_| get_alerts());
    view! {
        <Title text=t_string!(i18n, alerts.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, alerts.title)}</h1>
            <p class="muted">{t!(i18n, alerts.intro)}</p>
            <Loaded resource=history view=history_view/>
        </section>
    }
}

fn history_view(history: AlertHistory) -> impl IntoView {
    let i18n = use_i18n();
    let (open, past): (Vec<AlertRow>, Vec<AlertRow>) =
        history.alerts.into_iter().partition(|a| a.open);
    let open_view = if open.is_empty() {
        view! { <p class="empty" data-testid="no-open-alerts">{t!(i18n, alerts.nothing_wrong)}</p> }
            .into_any()
    } else {
        view! {
            <div class="alert-list">
                {open.into_iter().map(open_alert).collect_view()}
            </div>
        }
        .into_any()
    };
    view! {
        <h2>{t!(i18n, alerts.open)}</h2>
        {open_view}
        <h2>{t!(i18n, alerts.history)}</h2>
        {if past.is_empty() {
            view! { <p class="empty">{t!(i18n, alerts.none_resolved)}</p> }.into_any()
        } else {
            history_table(past).into_any()
        }}
        {(!history.tests.is_empty())
            .then(|| {
                view! {
                    <h2>{t!(i18n, alerts.test_messages)}</h2>
                    <ul class="plain">{history.tests.into_iter().map(message_item).collect_view()}</ul>
                }
            })}
    }
}

fn open_alert(alert: AlertRow) -> impl IntoView {
    let i18n = use_i18n();
    let page = alert.condition.page();
    let samples = (!alert.samples.is_empty()).then(|| {
        let samples = alert.samples.join(", ");
        view! {
            <p class="mono">{t!(i18n, alerts.among_them, samples)}</p>
        }
    });
    let title = condition_title(i18n, alert.condition);
    let count = alert.count;
    let (opened, checked) = (alert.opened_at, alert.checked_at);
    let when = match alert.since {
        Some(since) => {
            t_string!(i18n, alerts.open_since_holding, opened, since, checked).to_string()
        }
        None => t_string!(i18n, alerts.open_since, opened, checked).to_string(),
    };
    view! {
        <article class="card alert-open" data-testid="open-alert" data-condition=alert.condition.as_str()>
            <h3>{t!(i18n, alerts.open_heading, title, count)}</h3>
            <p>{alert.summary}</p>
            {samples}
            <p class="muted">{when}</p>
            <p><A href=page>{t!(i18n, alerts.show_them)}</A></p>
            <ul class="plain">{alert.messages.into_iter().map(message_item).collect_view()}</ul>
        </article>
    }
}

fn history_table(alerts: Vec<AlertRow>) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, alerts.resolved_label)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, alerts.col_alert)}</th>
                        <th scope="col">{t!(i18n, alerts.col_opened)}</th>
                        <th scope="col">{t!(i18n, alerts.col_resolved)}</th>
                        <th scope="col">{t!(i18n, alerts.col_last_seen)}</th>
                        <th scope="col">{t!(i18n, alerts.col_messages)}</th>
                    </tr>
                </thead>
                <tbody>
                    {alerts
                        .into_iter()
                        .map(|a| {
                            view! {
                                <tr data-testid="past-alert">
                                    <td>{condition_title(i18n, a.condition)}</td>
                                    <td>{a.opened_at}</td>
                                    <td>{a.resolved_at}</td>
                                    <td>{a.summary}</td>
                                    <td>
                                        <ul class="plain">
                                            {a.messages.into_iter().map(message_item).collect_view()}
                                        </ul>
                                    </td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

fn message_item(m: AlertMessageRow) -> impl IntoView {
    let i18n = use_i18n();
    let class = format!("delivery delivery-{}", m.status.as_str());
    let kind = message_kind_name(i18n, m.kind);
    let channel = channel_name(i18n, m.channel);
    let status = delivery_status_name(i18n, m.status);
    let when = m.sent_at.unwrap_or(m.queued_at);
    let attempts = m.attempts;
    let when = if attempts > 1 {
        t_string!(i18n, alerts.message_when_attempts, when, attempts).to_string()
    } else {
        t_string!(i18n, alerts.message_when, when).to_string()
    };
    let line = view! {
        {t!(i18n, alerts.message_sent_by, kind, channel)} " " <strong>{status}</strong> " " {when}
    };
    let error = m
        .last_error
        .map(|e| view! { <span class="muted">" — " {e}</span> });
    view! {
        <li class=class>
            {line} {error}
        </li>
    }
}

/// The header's link to the Alerts page, with the number of open alerts when there are any.
/// Read again on every navigation.
#[component]
pub fn AlertBadge() -> impl IntoView {
    let i18n = use_i18n();
    let location = use_location();
    let badge = Resource::new(move || location.pathname.get(), |_| get_alert_badge());
    view! {
        <A href="/alerts">
            {t!(i18n, common.nav_alerts)}
            <Transition fallback=|| ()>
                {move || {
                    badge
                        .get()
                        .and_then(Result::ok)
                        .filter(|b| b.open > 0)
                        .map(|b| {
                            let title = b
                                .conditions
                                .iter()
                                .map(|c| condition_title(i18n, *c))
                                .collect::<Vec<_>>()
                                .join("; ");
                            let label = t_string!(i18n, common.open_alerts, n = b.open).to_string();
                            view! {
                                <span
                                    class="alert-badge"
                                    data-testid="alert-badge"
                                    title=title
                                    aria-label=label
                                >
                                    {b.open}
                                </span>
                            }
                        })
                }}
            </Transition>
        </A>
    }
}
