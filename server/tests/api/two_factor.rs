//! Two-factor sign-in: enrolment with a first code and recovery codes shown once, sign-in
//! with a code, a replayed code refused, a recovery code used once, the policy that makes
//! admins (or everyone) enrol first, and the CLI reset for a lost phone.

use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;
use claimcheck_core::two_factor::{TotpSecret, TwoFactorPolicy};

use crate::helpers::{Backend, PASSWORD, TestApp, on_both_backends, spawn_app_with};

on_both_backends!(
    an_operator_enrols_and_signs_in_with_a_code_never_the_same_code_twice,
    a_recovery_code_signs_in_once,
);

fn location(response: &reqwest::Response) -> String {
    crate::helpers::landing(response)
}

async fn secret_of(app: &TestApp, username: &str) -> TotpSecret {
    let secret = app
        .db
        .texts(&format!(
            "SELECT totp_secret FROM operators WHERE username = '{username}'"
        ))
        .await
        .pop()
        .unwrap();
    TotpSecret::from_base32(secret)
}

/// Enrols `username` (signed in as `client`): begin, confirm with the current code; returns
/// the recovery codes the page showed.
/// Enrols `username`: its recovery codes, and the time (unix seconds) of the code that
/// confirmed the enrolment.
async fn enrol(app: &TestApp, client: &reqwest::Client, username: &str) -> (Vec<String>, i64) {
    let begun = client
        .post(app.url("/dashboard/actions/2fa/begin"))
        .send()
        .await
        .unwrap();
    assert_eq!(location(&begun), "/account/2fa");
    let page = account_page(app, client).await;
    let secret = secret_of(app, username).await;
    assert!(
        page.contains(secret.as_base32()),
        "the key is shown to type in"
    );
    assert!(page.contains("<svg"), "and the QR code");
    let wrong = client
        .post(app.url("/dashboard/actions/2fa/confirm"))
        .form(&[("code", "000000")])
        .send()
        .await
        .unwrap();
    assert!(location(&wrong).contains("error="), "{}", location(&wrong));
    let confirmed_at = now_ms() / 1000;
    let code = secret.code_at(confirmed_at).unwrap();
    let confirmed = client
        .post(app.url("/dashboard/actions/2fa/confirm"))
        .form(&[("code", code.as_str())])
        .send()
        .await
        .unwrap();
    assert!(
        location(&confirmed).contains("notice="),
        "{}",
        location(&confirmed)
    );
    let page = account_page(app, client).await;
    let codes = recovery_codes_in(&page);
    assert_eq!(codes.len(), 10, "{page}");
    // Shown once.
    let again = account_page(app, client).await;
    assert!(recovery_codes_in(&again).is_empty());
    (codes, confirmed_at)
}

/// The enrolment page as `client` sees it.
async fn account_page(app: &TestApp, client: &reqwest::Client) -> String {
    let response = client.get(app.url("/account/2fa")).send().await.unwrap();
    response.text().await.unwrap()
}

/// `xxxxx-xxxxx` codes in a page.
fn recovery_codes_in(html: &str) -> Vec<String> {
    html.split(['<', '>'])
        .filter(|t| {
            t.len() == 11
                && t.as_bytes()[5] == b'-'
                && t.chars()
                    .enumerate()
                    .all(|(i, c)| i == 5 || matches!(c, 'a'..='z' | '2'..='7'))
        })
        .map(str::to_owned)
        .collect()
}

/// Signs in with the password; returns the client and where it was sent.
async fn password_step(app: &TestApp, username: &str) -> (reqwest::Client, String) {
    let client = TestApp::browser();
    let response = client
        .post(app.url("/login"))
        .form(&[
            ("username", username),
            ("password", PASSWORD),
            ("next", "/events"),
        ])
        .send()
        .await
        .unwrap();
    let to = location(&response);
    (client, to)
}

async fn code_step(app: &TestApp, client: &reqwest::Client, code: &str) -> String {
    let response = client
        .post(app.url("/login/2fa"))
        .form(&[("code", code), ("next", "/events")])
        .send()
        .await
        .unwrap();
    location(&response)
}

async fn an_operator_enrols_and_signs_in_with_a_code_never_the_same_code_twice(app: TestApp) {
    let anna = app.sign_in_as("anna", Role::Support).await;
    let (_, confirmed_at) = enrol(&app, &anna, "anna").await;
    let audit = app
        .db
        .count("SELECT COUNT(*) FROM audit_log WHERE action = 'two_factor_enrol'")
        .await;
    assert_eq!(audit, 1);

    // The password alone is not a sign-in any more.
    let (client, to) = password_step(&app, "anna").await;
    assert!(to.starts_with("/login/2fa"), "{to}");
    assert_eq!(app.call(&client, "me", &[]).await.status(), 401);
    let events = client.get(app.url("/events")).send().await.unwrap();
    assert_eq!(events.status(), 303, "no page before the code");

    // The code that confirmed the enrolment was used: it is refused now, the next one works.
    // (The code of the enrolment's time, not of now: the clock may have crossed into the
    // next 30-second step since.)
    let secret = secret_of(&app, "anna").await;
    let used = secret.code_at(confirmed_at).unwrap();
    assert!(code_step(&app, &client, &used).await.contains("error="));
    let next = secret.code_at(confirmed_at + 30).unwrap();
    assert_eq!(code_step(&app, &client, &next).await, "/events");
    assert_eq!(app.call(&client, "me", &[]).await.status(), 200);

    // Replayed in another browser right after: refused.
    let (thief, _) = password_step(&app, "anna").await;
    assert!(code_step(&app, &thief, &next).await.contains("error="));
    assert_eq!(app.call(&thief, "me", &[]).await.status(), 401);

    // The code step without the password step signs nobody in.
    let stranger = TestApp::browser();
    let to = code_step(&app, &stranger, &secret.code_at(confirmed_at + 30).unwrap()).await;
    assert!(to.starts_with("/login"), "{to}");
    assert_eq!(app.call(&stranger, "me", &[]).await.status(), 401);
}

async fn a_recovery_code_signs_in_once(app: TestApp) {
    let anna = app.sign_in_as("anna", Role::Viewer).await;
    let (codes, _) = enrol(&app, &anna, "anna").await;
    let (client, _) = password_step(&app, "anna").await;
    assert_eq!(
        code_step(&app, &client, &codes[3].to_uppercase()).await,
        "/events"
    );
    assert_eq!(app.call(&client, "me", &[]).await.status(), 200);
    let (again, _) = password_step(&app, "anna").await;
    assert!(code_step(&app, &again, &codes[3]).await.contains("error="));
    assert_eq!(
        app.store
            .operators()
            .recovery_codes_left("anna")
            .await
            .unwrap(),
        9,
        "one used"
    );
}

/// With `CLAIMCHECK_REQUIRE_2FA=admin` an admin without a second factor can only set it up;
/// a support operator is not asked. A lost phone is reset from the command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_must_enrol_first_and_a_lost_phone_is_reset_from_the_cli() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.dashboard.require_two_factor = TwoFactorPolicy::Admin;
    })
    .await;
    app.add_operator("ada", Role::Admin).await;
    let (ada, to) = password_step(&app, "ada").await;
    assert_eq!(to, "/account/2fa");
    let events = ada.get(app.url("/events")).send().await.unwrap();
    assert_eq!(location(&events), "/account/2fa");
    assert_eq!(app.call(&ada, "overview", &[]).await.status(), 403);
    assert_eq!(app.call(&ada, "two_factor", &[]).await.status(), 200);
    let page = ada.get(app.url("/account/2fa")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("must sign in with a second factor")
    );
    enrol(&app, &ada, "ada").await;
    let events = ada.get(app.url("/events")).send().await.unwrap();
    assert_eq!(events.status(), 200);

    let sam = app.sign_in_as("sam", Role::Support).await;
    assert_eq!(
        sam.get(app.url("/events")).send().await.unwrap().status(),
        200
    );

    // Ada's phone is lost: an admin resets it; her sessions end; the password signs her in
    // again, straight to the set-up (the policy still applies).
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["operator", "reset-2fa", "ada"])
        .env("DATABASE_URL", app.db.url())
        .env("USER", "root-admin")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(app.call(&ada, "me", &[]).await.status(), 401);
    assert_eq!(
        app.store
            .operators()
            .recovery_codes_left("ada")
            .await
            .unwrap(),
        0
    );
    let (_, to) = password_step(&app, "ada").await;
    assert_eq!(to, "/account/2fa");
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM audit_log \
                 WHERE action = 'operator_reset_2fa' AND actor = 'cli:root-admin'"
            )
            .await,
        1
    );
}

/// Whoever knows the password gets five codes, not five per password: rounds of "right
/// password, four wrong codes" are throttled at the sixth code, from any address, even the
/// right code then; a complete sign-in later starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_factor_is_throttled_after_five_wrong_codes_whatever_the_passwords_between() {
    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    let anna = app.sign_in_as("anna", Role::Support).await;
    enrol(&app, &anna, "anna").await;
    let mut wrong = 0;
    let mut throttled = None;
    'rounds: for _ in 0..3 {
        let (client, to) = password_step(&app, "anna").await;
        assert!(to.starts_with("/login/2fa"), "{to}");
        for _ in 0..4 {
            let answer = code_step(&app, &client, "000000").await;
            if answer.contains("Too") {
                throttled = Some(client);
                break 'rounds;
            }
            wrong += 1;
        }
    }
    assert_eq!(wrong, 5, "five wrong codes, then the throttle");
    let client = throttled.unwrap();
    let secret = secret_of(&app, "anna").await;
    let right = secret.code_at(now_ms() / 1000 + 30).unwrap();
    assert!(code_step(&app, &client, &right).await.contains("Too"));
    assert_eq!(app.call(&client, "me", &[]).await.status(), 401);
}
