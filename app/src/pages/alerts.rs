//! Alerts: what is wrong now (open alerts, with the page that shows it) and what was, with
//! every message each sent and how its delivery went. The header's badge counts the open ones.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api::alerts::{AlertHistory, AlertMessageRow, AlertRow, get_alert_badge, get_alerts};
use crate::components::Loaded;

#[component]
pub fn AlertsPage() -> impl IntoView {
    let history = Resource::new(|| (), |_| get_alerts());
    view! {
        <Title text="Alerts"/>
        <section class="page">
            <h1>"Alerts"</h1>
            <p class="muted">
                "Checked every few seconds on every instance; each alert sends one message when it "
                "opens, a reminder while it stays open, and one when it resolves."
            </p>
            <Loaded resource=history view=history_view/>
        </section>
    }
}

fn history_view(history: AlertHistory) -> impl IntoView {
    let (open, past): (Vec<AlertRow>, Vec<AlertRow>) =
        history.alerts.into_iter().partition(|a| a.open);
    let open_view = if open.is_empty() {
        view! { <p class="empty" data-testid="no-open-alerts">"Nothing is wrong right now."</p> }
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
        <h2>"Open"</h2>
        {open_view}
        <h2>"History"</h2>
        {if past.is_empty() {
            view! { <p class="empty">"No alert has been resolved yet."</p> }.into_any()
        } else {
            history_table(past).into_any()
        }}
        {(!history.tests.is_empty())
            .then(|| {
                view! {
                    <h2>"Test messages"</h2>
                    <ul class="plain">{history.tests.into_iter().map(message_item).collect_view()}</ul>
                }
            })}
    }
}

fn open_alert(alert: AlertRow) -> impl IntoView {
    let page = alert.condition.page();
    let samples = (!alert.samples.is_empty()).then(|| {
        view! {
            <p class="mono">"Among them: " {alert.samples.join(", ")}</p>
        }
    });
    view! {
        <article class="card alert-open" data-testid="open-alert" data-condition=alert.condition.as_str()>
            <h3>{alert.condition.title()} " (" {alert.count} ")"</h3>
            <p>{alert.summary}</p>
            {samples}
            <p class="muted">
                "Open since " {alert.opened_at}
                {alert.since.map(|s| format!("; the condition holds since {s}"))}
                "; last checked " {alert.checked_at} "."
            </p>
            <p><A href=page>"Show them"</A></p>
            <ul class="plain">{alert.messages.into_iter().map(message_item).collect_view()}</ul>
        </article>
    }
}

fn history_table(alerts: Vec<AlertRow>) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table aria-label="Resolved alerts">
                <thead>
                    <tr>
                        <th scope="col">"Alert"</th>
                        <th scope="col">"Opened"</th>
                        <th scope="col">"Resolved"</th>
                        <th scope="col">"Last seen"</th>
                        <th scope="col">"Messages"</th>
                    </tr>
                </thead>
                <tbody>
                    {alerts
                        .into_iter()
                        .map(|a| {
                            view! {
                                <tr data-testid="past-alert">
                                    <td>{a.condition.title()}</td>
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
    let status = m.status.as_str();
    let class = format!("delivery delivery-{status}");
    let when = m.sent_at.unwrap_or(m.queued_at);
    let attempts = (m.attempts > 1).then(|| format!(", {} attempts", m.attempts));
    let error = m
        .last_error
        .map(|e| view! { <span class="muted">" — " {e}</span> });
    view! {
        <li class=class>
            {m.kind.as_str()} " by " {m.channel.as_str()} ": " <strong>{status}</strong>
            " (" {when} {attempts} ")" {error}
        </li>
    }
}

/// The header's link to the Alerts page, with the number of open alerts when there are any.
/// Read again on every navigation.
#[component]
pub fn AlertBadge() -> impl IntoView {
    let location = use_location();
    let badge = Resource::new(move || location.pathname.get(), |_| get_alert_badge());
    view! {
        <A href="/alerts">
            "Alerts"
            <Transition fallback=|| ()>
                {move || {
                    badge
                        .get()
                        .and_then(Result::ok)
                        .filter(|b| b.open > 0)
                        .map(|b| {
                            view! {
                                <span
                                    class="alert-badge"
                                    data-testid="alert-badge"
                                    title=b.titles.join("; ")
                                    aria-label=format!("{} open alert(s)", b.open)
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
