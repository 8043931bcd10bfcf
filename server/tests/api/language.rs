//! How the dashboard chooses its reader's words: the browser's `Accept-Language`, the
//! language switch remembered in the browser (the sign-in page too), and an operator's saved
//! language and time zone, which follow them to every device.

use claimcheck_core::auth::Role;

use crate::helpers::{PASSWORD, TestApp, on_both_backends};

on_both_backends!(
    a_browser_is_answered_in_the_language_it_asks_for_or_picked,
    an_operator_keeps_their_language_and_time_zone_on_every_device,
);

fn location(response: &reqwest::Response) -> String {
    crate::helpers::landing(response)
}

async fn page(app: &TestApp, client: &reqwest::Client, path: &str, accept: &str) -> String {
    let response = client
        .get(app.url(path))
        .header("accept-language", accept)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

async fn a_browser_is_answered_in_the_language_it_asks_for_or_picked(app: TestApp) {
    let browser = TestApp::browser();
    let german = page(&app, &browser, "/login", "de-CH,de;q=0.9,en;q=0.8").await;
    assert!(german.contains("Benutzername"), "{german}");
    assert!(german.contains(r#"lang="de-CH""#), "{german}");
    // Neither of ours asked for first: the first of ours it names.
    let english = page(&app, &browser, "/login", "fr-CH, en;q=0.5, de;q=0.1").await;
    assert!(english.contains("Username"), "{english}");

    // The switch in the header, before sign-in: remembered in this browser, over its header.
    let switched = browser
        .post(app.url("/language"))
        .form(&[("language", "de-CH"), ("next", "/login")])
        .send()
        .await
        .unwrap();
    assert_eq!(switched.status(), 303);
    assert_eq!(location(&switched), "/login");
    let cookie = switched.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("claimcheck_lang=de-CH;"), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    let remembered = page(&app, &browser, "/login", "en").await;
    assert!(remembered.contains("Benutzername"), "{remembered}");

    // A language that is not ours is refused in the reader's words; nothing is remembered.
    let refused = browser
        .post(app.url("/language"))
        .form(&[("language", "fr"), ("next", "/login")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.headers().get("set-cookie").is_none());
    let text = refused.text().await.unwrap();
    assert!(text.contains("Unbekannte Sprache «fr»"), "{text}");
    // Somewhere else than this site is not where the switch sends anyone.
    let away = browser
        .post(app.url("/language"))
        .form(&[("language", "en"), ("next", "https://evil.example/")])
        .send()
        .await
        .unwrap();
    assert_eq!(away.status(), 303);
    assert!(location(&away).starts_with('/'), "{}", location(&away));
}

async fn sign_in(app: &TestApp, username: &str) -> reqwest::Client {
    let client = TestApp::browser();
    let response = client
        .post(app.url("/login"))
        .form(&[
            ("username", username),
            ("password", PASSWORD),
            ("next", "/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    client
}

async fn preferences(
    app: &TestApp,
    client: &reqwest::Client,
    language: &str,
    zone: &str,
) -> String {
    let response = client
        .post(app.url("/dashboard/actions/preferences"))
        .form(&[("language", language), ("time_zone", zone)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    location(&response)
}

async fn an_operator_keeps_their_language_and_time_zone_on_every_device(app: TestApp) {
    let laptop = app.sign_in_as("sam", Role::Support).await;
    let saved = preferences(&app, &laptop, "de-CH", "America/New_York").await;
    assert!(saved.starts_with("/account?notice="), "{saved}");
    assert!(saved.contains("Gespeichert"), "{saved}");
    let stored = app
        .db
        .texts("SELECT language || ' ' || time_zone FROM operators WHERE username = 'sam'")
        .await;
    assert_eq!(stored, ["de-CH America/New_York"]);

    // Another device, a browser that asks for English: sam reads German, New York time.
    let phone = sign_in(&app, "sam").await;
    let account = page(&app, &phone, "/account", "en").await;
    assert!(account.contains("Einstellungen"), "{account}");
    let now = account
        .split_once("Jetzt: ")
        .and_then(|(_, rest)| rest.split_once("</p>"))
        .map(|(now, _)| now.replace("<!>", ""))
        .unwrap_or_default();
    assert!(
        now.ends_with(" EST.") || now.ends_with(" EDT."),
        "the time in New York: {now}"
    );

    // A zone that is not in the list is refused; the saved one stays.
    let refused = preferences(&app, &phone, "de-CH", "Mars/Olympus_Mons").await;
    assert!(refused.starts_with("/account?error="), "{refused}");
    let stored = app
        .db
        .texts("SELECT time_zone FROM operators WHERE username = 'sam'")
        .await;
    assert_eq!(stored, ["America/New_York"]);

    // No language of their own: as each browser asks.
    preferences(&app, &phone, "", "Europe/Zurich").await;
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM operators WHERE username = 'sam' AND language IS NULL")
            .await,
        1
    );
    let fresh = sign_in(&app, "sam").await;
    let english = page(&app, &fresh, "/account", "en").await;
    assert!(english.contains("Preferences"), "{english}");
    assert!(!english.contains("Einstellungen"), "{english}");
}
