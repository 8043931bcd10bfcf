//! Operators handling alerts from the dashboard, as form posts to the real server on both
//! backends: an acknowledgement stops the reminders (not the resolution), a snooze silences
//! everything until it ends and then the reminders resume, an admin's resolution closes the
//! alert with a note and a condition still holding opens a new one at the next check; two
//! operators at once do one thing; viewers and strangers are refused; a refused note comes
//! back to its form. The checks run at times the tests choose (`check(.., now)`).

use std::sync::Arc;
use std::time::Duration;

use app::flash::Flash;
use claimcheck_core::alert::{AlertCondition, MessageKind};
use claimcheck_core::alert_check::{AlertPolicy, AlertThresholds, Queued, check};
use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;

use crate::alerts::sinks::ChatHook;
use crate::alerts::{
    PUBLIC_URL, channels, english, fail_claim, mark_processed, paid_session, quick_retries,
};
use crate::helpers::{Backend, TestApp, flash, on_both_backends, spawn_app_with};
use claimcheck_server::alerts::{Channels, deliver_due};

const MIN: i64 = 60_000;

/// A server whose own checks are off (the tests choose the time of each), with a chat
/// webhook for its messages, and one failed claim whose alert is open.
struct Desk {
    app: TestApp,
    hook: ChatHook,
    channels: Arc<Channels>,
    policy: AlertPolicy,
    /// When the alert opened.
    t0: i64,
    alert: i64,
}

impl Desk {
    async fn open(backend: Backend) -> Desk {
        let hook = ChatHook::start().await;
        let url = hook.url();
        let app = spawn_app_with(backend, |c| {
            c.alerts.channels = channels(None, Some(url), Duration::from_secs(5));
            c.dashboard.public_url = Some(PUBLIC_URL.parse().unwrap());
        })
        .await;
        let channels = Arc::new(channels(None, Some(hook.url()), Duration::from_secs(5)));
        let policy = AlertPolicy {
            thresholds: AlertThresholds::default(),
            repeat: Some(Duration::from_secs(30 * 60)),
            channels: channels.configured(),
            dashboard_url: PUBLIC_URL.into(),
            wording: english(),
        };
        assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
        fail_claim(&app, "evt_alert0001").await;
        let t0 = now_ms();
        assert_eq!(
            check(&app.store, &policy, t0).await.unwrap(),
            [queued(MessageKind::Opened)]
        );
        let alert = app.db.count("SELECT MAX(id) FROM alerts").await;
        Desk {
            app,
            hook,
            channels,
            policy,
            t0,
            alert,
        }
    }

    async fn check(&self, at: i64) -> Vec<Queued> {
        check(&self.app.store, &self.policy, at).await.unwrap()
    }

    /// Posts `form` to the alert's `action` as `client`.
    async fn post(
        &self,
        client: &reqwest::Client,
        alert: i64,
        action: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        client
            .post(
                self.app
                    .url(&format!("/dashboard/actions/alerts/{alert}/{action}")),
            )
            .form(form)
            .send()
            .await
            .unwrap()
    }

    /// The Alerts page as `client` reads it, without the renderer's `<!>` markers between
    /// pieces of text.
    async fn page(&self, client: &reqwest::Client) -> String {
        let page = client.get(self.app.url("/alerts")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        page.text().await.unwrap().replace("<!>", "")
    }

    /// `kind:status` of every message queued, oldest first.
    async fn messages(&self) -> Vec<String> {
        self.app
            .db
            .texts("SELECT kind || ':' || status FROM alert_deliveries ORDER BY id")
            .await
    }

    /// `actor action target reason outcome` of every audit entry about alerts.
    async fn audited(&self) -> Vec<String> {
        self.app
            .db
            .texts(
                "SELECT actor || ' ' || action || ' ' || target || ' [' || reason || '] ' || outcome \
                 FROM audit_log WHERE action LIKE 'alert_%' ORDER BY id",
            )
            .await
    }
}

fn queued(kind: MessageKind) -> Queued {
    Queued {
        condition: AlertCondition::FailedClaims,
        kind,
    }
}

/// The notice (or error) a form post's redirect to the Alerts page carries.
fn outcome(response: &reqwest::Response) -> Flash {
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/alerts");
    flash(response).expect("a notice")
}

fn notice(response: &reqwest::Response) -> String {
    match outcome(response) {
        Flash::Notice(text) => text,
        Flash::Error(text) => panic!("refused: {text}"),
        Flash::Form(form) => panic!("refused: {}", form.summary),
    }
}

fn error(response: &reqwest::Response) -> String {
    match outcome(response) {
        Flash::Error(text) => text,
        Flash::Form(form) => form.summary,
        Flash::Notice(text) => panic!("done: {text}"),
    }
}

async fn acknowledging_stops_the_reminders_not_the_resolution(backend: Backend) {
    let desk = Desk::open(backend).await;
    let sam = desk.app.sign_in_as("sam", Role::Support).await;
    let done = desk
        .post(
            &sam,
            desk.alert,
            "acknowledge",
            &[("seen", "0"), ("note", "  Looking into the metadata.  ")],
        )
        .await;
    assert_eq!(
        notice(&done),
        "Acknowledged: Claims failed. No reminders while it stays open."
    );
    assert_eq!(
        desk.app
            .db
            .texts("SELECT handling || ' ' || handled_by || ' ' || handling_note FROM alerts")
            .await,
        ["acknowledged sam Looking into the metadata."]
    );
    assert_eq!(
        desk.audited().await,
        [format!(
            "dashboard:sam alert_acknowledge alert:{} [Looking into the metadata.] acknowledged (failed_claims)",
            desk.alert
        )]
    );
    // The opening nobody sent yet is old news; past the repeat interval, and long after,
    // nothing is sent while it stays acknowledged.
    for later in [31 * MIN, 90 * MIN, 24 * 60 * MIN] {
        assert_eq!(desk.check(desk.t0 + later).await, [], "{later}");
    }
    assert_eq!(desk.messages().await, ["opened:superseded"]);

    // Everyone sees who is on it; a viewer gets no button.
    let vic = desk.app.sign_in_as("vic", Role::Viewer).await;
    let page = desk.page(&vic).await;
    assert!(page.contains(r#"data-handling="acknowledged""#), "{page}");
    assert!(page.contains("By sam at "), "{page}");
    assert!(page.contains("Note: Looking into the metadata."), "{page}");
    assert!(!page.contains(r#"data-testid="take-alert""#), "{page}");
    assert!(!page.contains(r#"data-testid="resolve-alert""#), "{page}");
    // Support may not acknowledge twice, and is not offered it; an admin may resolve.
    let page = desk.page(&sam).await;
    assert!(page.contains(r#"data-testid="take-alert""#), "{page}");
    assert!(!page.contains(">Acknowledge<"), "{page}");
    assert!(!page.contains(r#"data-testid="resolve-alert""#), "{page}");
    let ada = desk.app.sign_in_as("ada", Role::Admin).await;
    assert!(
        desk.page(&ada)
            .await
            .contains(r#"data-testid="resolve-alert""#)
    );

    // The condition clears: resolved by itself, and that message does go out.
    mark_processed(&desk.app, "evt_alert0001").await;
    assert_eq!(
        desk.check(desk.t0 + 25 * 60 * MIN).await,
        [queued(MessageKind::Resolved)]
    );
    // It comes back: a new alert, nobody on it.
    assert_eq!(desk.app.deliver(&paid_session(2)).await.status(), 200);
    fail_claim(&desk.app, "evt_alert0002").await;
    assert_eq!(
        desk.check(desk.t0 + 26 * 60 * MIN).await,
        [queued(MessageKind::Opened)]
    );
    assert_eq!(
        desk.app
            .db
            .texts("SELECT COALESCE(handling, 'open') FROM alerts WHERE resolved_at IS NULL")
            .await,
        ["open"]
    );
}

async fn a_snooze_silences_the_alert_until_it_ends_then_reminders_resume(backend: Backend) {
    let desk = Desk::open(backend).await;
    let sam = desk.app.sign_in_as("sam", Role::Support).await;
    let done = desk
        .post(
            &sam,
            desk.alert,
            "snooze",
            &[("seen", "0"), ("note", ""), ("length", "1h")],
        )
        .await;
    let text = notice(&done);
    assert!(text.starts_with("Snoozed until "), "{text}");
    assert!(
        text.ends_with(": Claims failed. No messages until then."),
        "{text}"
    );
    let until = desk.app.db.count("SELECT snoozed_until FROM alerts").await;
    let asked = now_ms();
    assert!(
        until > desk.t0 + 60 * MIN - 1000 && until <= asked + 60 * MIN,
        "{until}"
    );
    assert!(
        desk.page(&sam).await.contains("Snoozed until "),
        "the page says until when"
    );

    // Due for a reminder at +30 min, but snoozed: nothing, up to the last moment.
    assert_eq!(desk.check(desk.t0 + 31 * MIN).await, []);
    assert_eq!(desk.check(until - 1).await, []);
    assert_eq!(desk.messages().await, ["opened:superseded"]);
    // The snooze is over and the claim still failed: the reminder at once, then not again
    // before the interval.
    assert_eq!(desk.check(until).await, [queued(MessageKind::Reminder)]);
    assert_eq!(desk.check(until + MIN).await, []);
    assert_eq!(
        desk.check(until + 30 * MIN).await,
        [queued(MessageKind::Reminder)]
    );
    let sent = deliver_due(
        &desk.app.store,
        &desk.channels,
        &quick_retries(),
        until + 30 * MIN,
    )
    .await
    .unwrap();
    assert_eq!(sent.sent(), 1);
    assert!(desk.hook.texts()[0].starts_with("*[Claimcheck] Still open: Claims failed (1)*"));

    // Snoozed again for a day, it clears meanwhile: resolved without a word.
    let seen = desk
        .app
        .db
        .count("SELECT handling_version FROM alerts")
        .await
        .to_string();
    let again = desk
        .post(
            &sam,
            desk.alert,
            "snooze",
            &[("seen", &seen), ("length", "1d")],
        )
        .await;
    notice(&again);
    mark_processed(&desk.app, "evt_alert0001").await;
    let pending = desk.messages().await;
    assert_eq!(desk.check(until + 31 * MIN).await, []);
    assert_eq!(
        desk.app
            .db
            .count("SELECT COUNT(*) FROM alerts WHERE resolved_at IS NOT NULL")
            .await,
        1
    );
    assert_eq!(desk.messages().await, pending, "nothing queued");
    assert_eq!(
        desk.audited().await.len(),
        2,
        "two snoozes audited: {:?}",
        desk.audited().await
    );
}

async fn an_admin_resolves_with_a_note_and_a_condition_still_holding_opens_a_new_alert(
    backend: Backend,
) {
    let desk = Desk::open(backend).await;
    let ada = desk.app.sign_in_as("ada", Role::Admin).await;
    let done = desk
        .post(
            &ada,
            desk.alert,
            "resolve",
            &[("note", "Bad metadata from the old shop; ticket 4711.")],
        )
        .await;
    assert_eq!(
        notice(&done),
        "Resolved: Claims failed. If the condition still holds at the next check, a new alert \
         opens."
    );
    assert_eq!(
        desk.app
            .db
            .texts(
                "SELECT resolved_by || ' ' || resolution_note FROM alerts \
                 WHERE resolved_at IS NOT NULL"
            )
            .await,
        ["ada Bad metadata from the old shop; ticket 4711."]
    );
    assert_eq!(
        desk.audited().await,
        [format!(
            "dashboard:ada alert_resolve alert:{} [Bad metadata from the old shop; ticket 4711.] \
             resolved (failed_claims)",
            desk.alert
        )]
    );
    // The resolution goes out, saying who and why, in place of the opening still waiting.
    assert_eq!(
        desk.messages().await,
        ["opened:superseded", "resolved:pending"]
    );
    let sent = deliver_due(&desk.app.store, &desk.channels, &quick_retries(), now_ms())
        .await
        .unwrap();
    assert_eq!(sent.sent(), 1);
    let text = &desk.hook.texts()[0];
    assert!(
        text.contains("*[Claimcheck] Resolved: Claims failed*"),
        "{text}"
    );
    assert!(
        text.contains("ada resolved it by hand at ")
            && text.contains("): Bad metadata from the old shop; ticket 4711."),
        "{text}"
    );
    assert!(text.contains("a new alert opens"), "{text}");

    // The claim is still failed: the next check opens a new alert.
    assert_eq!(
        desk.check(desk.t0 + MIN).await,
        [queued(MessageKind::Opened)]
    );
    assert_eq!(desk.app.db.count("SELECT COUNT(*) FROM alerts").await, 2);
    let page = desk.page(&ada).await;
    assert!(
        page.contains("Resolved by ada: Bad metadata from the old shop; ticket 4711."),
        "{page}"
    );
    // The old one cannot be resolved again: the admin is told who did.
    let again = desk
        .post(&ada, desk.alert, "resolve", &[("note", "again")])
        .await;
    let text = error(&again);
    assert!(
        text.starts_with("Nothing done: ada resolved “Claims failed” at "),
        "{text}"
    );
    let missing = desk
        .post(&ada, 999_999, "resolve", &[("note", "which one?")])
        .await;
    assert_eq!(error(&missing), "There is no alert 999999.");
}

async fn two_operators_at_once_do_one_thing_and_the_other_is_told(backend: Backend) {
    let desk = Desk::open(backend).await;
    let sam = desk.app.sign_in_as("sam", Role::Support).await;
    let sue = desk.app.sign_in_as("sue", Role::Support).await;
    // Both saw it open (version 0), both acknowledge at the same moment.
    let form = [("seen", "0"), ("note", "")];
    let (first, second) = tokio::join!(
        desk.post(&sam, desk.alert, "acknowledge", &form),
        desk.post(&sue, desk.alert, "acknowledge", &form),
    );
    let outcomes = [outcome(&first), outcome(&second)];
    let done: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, Flash::Notice(_)))
        .collect();
    assert_eq!(done.len(), 1, "{outcomes:?}");
    let winner = desk.app.db.texts("SELECT handled_by FROM alerts").await[0].clone();
    let told = outcomes
        .iter()
        .find_map(|o| match o {
            Flash::Error(text) => Some(text.clone()),
            Flash::Form(form) => Some(form.summary.clone()),
            Flash::Notice(_) => None,
        })
        .unwrap();
    assert!(
        told.starts_with(&format!(
            "Nothing done: {winner} acknowledged “Claims failed” at "
        )),
        "{told}"
    );
    assert_eq!(desk.audited().await.len(), 1);
    assert_eq!(
        desk.app
            .db
            .count("SELECT handling_version FROM alerts")
            .await,
        1
    );

    // Both on the acknowledged alert (version 1): one snoozes it, the other's snooze for a
    // day finds it changed.
    let (first, second) = tokio::join!(
        desk.post(
            &sam,
            desk.alert,
            "snooze",
            &[("seen", "1"), ("length", "1h")]
        ),
        desk.post(
            &sue,
            desk.alert,
            "snooze",
            &[("seen", "1"), ("length", "1d")]
        ),
    );
    let outcomes = [outcome(&first), outcome(&second)];
    let told: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            Flash::Error(text) => Some(text.clone()),
            Flash::Form(form) => Some(form.summary.clone()),
            Flash::Notice(_) => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{outcomes:?}");
    assert!(
        told[0].contains("snoozed “Claims failed” until "),
        "{told:?}"
    );
    assert_eq!(desk.audited().await.len(), 2);
    // A form that says nothing of what it saw acts on nothing.
    let blind = desk.post(&sam, desk.alert, "acknowledge", &[]).await;
    assert!(error(&blind).starts_with("Nothing done: "));
    assert_eq!(desk.audited().await.len(), 2);
}

async fn viewers_and_strangers_are_refused_and_support_may_not_resolve(backend: Backend) {
    let desk = Desk::open(backend).await;
    let vic = desk.app.sign_in_as("vic", Role::Viewer).await;
    let sam = desk.app.sign_in_as("sam", Role::Support).await;
    let stranger = TestApp::browser();
    let take = [("seen", "0"), ("note", "mine"), ("length", "1h")];
    let note = [("note", "closing it")];
    for action in ["acknowledge", "snooze", "resolve"] {
        let form: &[(&str, &str)] = if action == "resolve" { &note } else { &take };
        let refused = desk.post(&vic, desk.alert, action, form).await;
        assert_eq!(refused.status(), 403, "{action}");
        let text = refused.text().await.unwrap();
        assert!(text.contains("viewer"), "{text}");
        assert_eq!(
            desk.post(&stranger, desk.alert, action, form)
                .await
                .status(),
            401,
            "{action}"
        );
    }
    assert_eq!(
        desk.post(&sam, desk.alert, "resolve", &note).await.status(),
        403
    );
    assert_eq!(
        desk.app
            .db
            .count("SELECT COUNT(*) FROM alerts WHERE handling IS NULL AND resolved_at IS NULL")
            .await,
        1,
        "untouched"
    );
    assert_eq!(desk.audited().await, Vec::<String>::new());
}

async fn a_note_that_is_empty_or_too_long_is_refused_and_given_back(backend: Backend) {
    let desk = Desk::open(backend).await;
    let ada = desk.app.sign_in_as("ada", Role::Admin).await;
    let empty = desk
        .post(&ada, desk.alert, "resolve", &[("note", "   ")])
        .await;
    assert_eq!(
        error(&empty),
        "Say why it can be closed; nothing was changed."
    );
    let long = format!(
        "Checked with the bank on Monday. {}",
        "The payout was matched by hand. ".repeat(31)
    );
    assert_eq!(long.trim().chars().count(), 1024);
    let refused = desk
        .post(&ada, desk.alert, "resolve", &[("note", &long)])
        .await;
    assert_eq!(
        error(&refused),
        "The note has 1,024 characters, at most 1,000 are kept; nothing was changed. Shorten it \
         below."
    );
    assert_eq!(
        desk.app
            .db
            .count("SELECT COUNT(*) FROM alerts WHERE resolved_at IS NULL")
            .await,
        1
    );
    // The next page view gives the words back in the resolution's form, open; only once.
    let page = desk.page(&ada).await;
    assert!(page.contains(long.trim_end()), "the note is kept: {page}");
    let question = page
        .split("<details")
        .find(|part| part.contains(r#"data-testid="resolve-alert""#))
        .unwrap();
    let tag = &question[..question.find('>').unwrap()];
    assert!(tag.contains(" open"), "{tag}");
    let again = desk.page(&ada).await;
    assert!(!again.contains("Checked with the bank on Monday."));
    let question = again
        .split("<details")
        .find(|part| part.contains(r#"data-testid="resolve-alert""#))
        .unwrap();
    let tag = &question[..question.find('>').unwrap()];
    assert!(!tag.contains(" open"), "closed until asked: {tag}");

    // In German, with the Swiss thousands separator.
    let de = ada
        .post(
            desk.app
                .url(&format!("/dashboard/actions/alerts/{}/resolve", desk.alert)),
        )
        .header("accept-language", "de-CH")
        .form(&[("note", long.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(
        error(&de),
        "Die Notiz hat 1’024 Zeichen, höchstens 1’000 werden festgehalten; nichts wurde \
         geändert. Kürzen Sie sie unten."
    );

    // Support's optional note is bounded too, and given back to its own form.
    let sam = desk.app.sign_in_as("sam", Role::Support).await;
    let ack = desk
        .post(
            &sam,
            desk.alert,
            "acknowledge",
            &[("seen", "0"), ("note", &long)],
        )
        .await;
    assert!(error(&ack).starts_with("The note has 1,024 characters"));
    let page = desk.page(&sam).await;
    assert!(page.contains(long.trim_end()), "the note is kept: {page}");
    assert_eq!(
        desk.app
            .db
            .count("SELECT COUNT(*) FROM alerts WHERE handling IS NULL")
            .await,
        1
    );
    assert_eq!(desk.audited().await, Vec::<String>::new());
}

on_both_backends!(
    backend => acknowledging_stops_the_reminders_not_the_resolution,
    a_snooze_silences_the_alert_until_it_ends_then_reminders_resume,
    an_admin_resolves_with_a_note_and_a_condition_still_holding_opens_a_new_alert,
    two_operators_at_once_do_one_thing_and_the_other_is_told,
    viewers_and_strangers_are_refused_and_support_may_not_resolve,
    a_note_that_is_empty_or_too_long_is_refused_and_given_back
);
