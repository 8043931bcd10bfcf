//! Alerts: what is wrong now (open alerts, with the page that shows it, who is on it and the
//! buttons the reader's role may use) and what was, with every message each sent, how its
//! delivery went and how it was resolved. The header's badge counts the open ones.

use claimcheck_core::alert::{
    AlertChannel, AlertCondition, DeliveryStatus, HandlingAction, MessageKind, SnoozeFor,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_location;

use crate::api::Me;
use crate::api::alerts::{
    AlertHistory, AlertMessageRow, AlertRow, HandlingRow, KeptNote, action_path, get_alert_badge,
    get_alerts,
};
use crate::api::get_me;
use crate::components::{ActionNotices, LoadedWithMe};
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
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, alerts.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, alerts.title)}</h1>
            <p class="muted">{t!(i18n, alerts.intro)}</p>
            <ActionNotices/>
            <LoadedWithMe resource=history me view=history_view/>
        </section>
    }
}

fn history_view(history: AlertHistory, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let role = me.map(|me| me.role);
    let kept = history.kept;
    let (open, past): (Vec<AlertRow>, Vec<AlertRow>) =
        history.alerts.into_iter().partition(|a| a.open);
    let open_view = if open.is_empty() {
        view! { <p class="empty" data-testid="no-open-alerts">{t!(i18n, alerts.nothing_wrong)}</p> }
            .into_any()
    } else {
        view! {
            <div class="alert-list">
                {open
                    .into_iter()
                    .map(|alert| {
                        let kept = kept.clone().filter(|k| k.alert_id == alert.id);
                        open_alert(alert, role, kept)
                    })
                    .collect_view()}
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

fn open_alert(
    alert: AlertRow,
    role: Option<claimcheck_core::auth::Role>,
    kept: Option<KeptNote>,
) -> impl IntoView {
    let i18n = use_i18n();
    let page = alert.page.clone();
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
    let may = |action: HandlingAction| role.is_some_and(|role| action.allowed_for(role));
    let (kept_take, kept_resolve) = match kept {
        Some(k) if k.resolve => (None, Some(k.note)),
        Some(k) => (Some(k.note), None),
        None => (None, None),
    };
    let take = may(HandlingAction::Acknowledge).then(|| {
        take_form(
            alert.id,
            alert.handling_version,
            !matches!(alert.handling, HandlingRow::Acknowledged { .. }),
            kept_take,
        )
    });
    let resolve =
        may(HandlingAction::Resolve).then(|| resolve_form(alert.id, title.clone(), kept_resolve));
    let state = alert.handling.as_str();
    view! {
        <article
            class="card alert-open"
            data-testid="open-alert"
            data-condition=alert.condition.as_str()
            data-handling=state
        >
            <h3>{t!(i18n, alerts.open_heading, title, count)}</h3>
            {handling_line(alert.handling, alert.handling_note)}
            <p>{alert.summary}</p>
            {samples}
            <p class="muted">{when}</p>
            <p><A href=page>{t!(i18n, alerts.show_them)}</A></p>
            {take}
            {resolve}
            <ul class="plain">{alert.messages.into_iter().map(message_item).collect_view()}</ul>
        </article>
    }
}

/// Who is on it, since when or until when, and what they wrote.
fn handling_line(handling: HandlingRow, note: Option<String>) -> impl IntoView {
    let i18n = use_i18n();
    let class = format!("badge handling-{}", handling.as_str());
    let (label, line) = match handling {
        HandlingRow::Open => (
            t_string!(i18n, alerts.state_open).to_string(),
            t_string!(i18n, alerts.state_open_line).to_string(),
        ),
        HandlingRow::Acknowledged { by, at } => (
            t_string!(i18n, alerts.state_acknowledged).to_string(),
            t_string!(i18n, alerts.state_acknowledged_line, by, at).to_string(),
        ),
        HandlingRow::Snoozed { by, until } => (
            t_string!(i18n, alerts.state_snoozed).to_string(),
            t_string!(i18n, alerts.state_snoozed_line, by, until).to_string(),
        ),
        HandlingRow::SnoozeOver { by, until } => (
            t_string!(i18n, alerts.state_open).to_string(),
            t_string!(i18n, alerts.state_snooze_over_line, by, until).to_string(),
        ),
    };
    let note = note.map(|note| {
        view! { <p class="alert-note" data-testid="handling-note">{t!(i18n, alerts.handling_note, note)}</p> }
    });
    view! {
        <p class="alert-state" data-testid="alert-state">
            <span class=class>{label}</span> " " {line}
        </p>
        {note}
    }
}

/// Acknowledge (unless it is already) and snooze: one form, one optional note, a button per
/// action posting where it goes.
fn take_form(id: i64, version: i64, can_acknowledge: bool, kept: Option<String>) -> impl IntoView {
    let i18n = use_i18n();
    let field = format!("note-{id}");
    let acknowledge = can_acknowledge.then(|| {
        view! {
            <button type="submit" class="button">{t!(i18n, alerts.acknowledge)}</button>
        }
    });
    let snooze = SnoozeFor::ALL
        .map(|length| {
            let label = match length {
                SnoozeFor::Hour => t_string!(i18n, alerts.snooze_hour).to_string(),
                SnoozeFor::Day => t_string!(i18n, alerts.snooze_day).to_string(),
            };
            view! {
                <button
                    type="submit"
                    class="button secondary"
                    formaction=action_path(id, "snooze")
                    name="length"
                    value=length.as_str()
                >
                    {label}
                </button>
            }
        })
        .collect_view();
    view! {
        <form method="post" action=action_path(id, "acknowledge") class="stack alert-take" data-testid="take-alert">
            <input type="hidden" name="seen" value=version.to_string()/>
            <label for=field.clone()>{t!(i18n, alerts.take_note)}</label>
            <input id=field name="note" autocomplete="off" value=kept.unwrap_or_default()/>
            <div class="actions">{acknowledge} {snooze}</div>
        </form>
    }
}

/// Resolving closes it for good: the button only opens the question, which asks why and says
/// what happens if the condition still holds. A refused note comes back here, open.
fn resolve_form(id: i64, title: String, kept: Option<String>) -> impl IntoView {
    let i18n = use_i18n();
    let field = format!("resolution-{id}");
    let open = kept.is_some();
    let note = kept.unwrap_or_default();
    view! {
        <details class="confirm" open=open data-testid="resolve-alert">
            <summary class="link-button danger">{t!(i18n, alerts.resolve)}</summary>
            <form method="post" action=action_path(id, "resolve") class="stack">
                <p>{t!(i18n, alerts.resolve_question, title)}</p>
                <label for=field.clone()>{t!(i18n, alerts.resolve_note)}</label>
                <textarea id=field name="note" required rows="3">{note}</textarea>
                <button type="submit" class="button danger">{t!(i18n, alerts.resolve_confirm)}</button>
            </form>
        </details>
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
                        <th scope="col">{t!(i18n, alerts.col_resolution)}</th>
                        <th scope="col">{t!(i18n, alerts.col_last_seen)}</th>
                        <th scope="col">{t!(i18n, alerts.col_messages)}</th>
                    </tr>
                </thead>
                <tbody>
                    {alerts
                        .into_iter()
                        .map(|a| {
                            let resolution = match (a.resolved_by, a.resolution_note) {
                                (Some(by), note) => {
                                    let note = note.unwrap_or_default();
                                    t_string!(i18n, alerts.resolved_by_hand, by, note).to_string()
                                }
                                (None, _) => t_string!(i18n, alerts.resolved_by_itself).to_string(),
                            };
                            view! {
                                <tr data-testid="past-alert" data-condition=a.condition.as_str()>
                                    <td>{condition_title(i18n, a.condition)}</td>
                                    <td>{a.opened_at}</td>
                                    <td>{a.resolved_at}</td>
                                    <td data-testid="resolution">{resolution}</td>
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
                            let label = match b.open {
                                1 => t_string!(i18n, common.open_alerts_one, n = 1).to_string(),
                                n => t_string!(i18n, common.open_alerts, n).to_string(),
                            };
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
