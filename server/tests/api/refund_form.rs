//! The dashboard's refund form: an amount is required and checked before anything is sent
//! to Stripe, a form that is not right comes back to the refund page with the errors in
//! money and the input kept, amounts are in CHF in the audit log, and the preview says what
//! the refund then does to the ledger.

use app::flash::{Flash, KeptForm};
use claimcheck_core::auth::Role;
use claimcheck_core::money::{MoneyFacts, RefundPreview};
use serde_json::Value;

use crate::helpers::{Backend, TestApp, on_both_backends};
use crate::outgoing::{Shop, performed, shop};

on_both_backends!(
    backend =>
    an_amount_that_is_empty_unreadable_or_zero_is_refused_and_nothing_is_sent,
    too_much_comes_back_to_the_refund_page_in_chf_with_the_reason_kept,
    a_missing_or_over_long_reason_comes_back_with_the_amount_kept,
    a_half_refund_is_audited_in_chf,
    a_support_operators_forged_refund_is_refused,
    the_preview_is_what_the_refund_does_to_the_ledger,
);

const ORDER: &str = "ord_form";
const FORM_PAGE: &str = "/orders/ord_form/refund";

/// A paid order of CHF 49.00 for 40 credits, and an admin signed in.
async fn paid(backend: Backend) -> (Shop, reqwest::Client) {
    let shop = shop(backend).await;
    shop.paid_order(ORDER).await;
    let admin = shop.app.sign_in_as("ada", Role::Admin).await;
    (shop, admin)
}

async fn post_refund(
    app: &TestApp,
    client: &reqwest::Client,
    amount: &str,
    reason: &str,
) -> reqwest::Response {
    client
        .post(app.url("/dashboard/actions/refund"))
        .form(&[("order_id", ORDER), ("amount", amount), ("reason", reason)])
        .send()
        .await
        .unwrap()
}

/// The form a post was sent back with: it lands on the refund page, not the order's.
fn sent_back(response: &reqwest::Response) -> KeptForm {
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], FORM_PAGE);
    match crate::helpers::flash(response) {
        Some(Flash::Form(form)) => form,
        other => panic!("not sent back to the form: {other:?}"),
    }
}

/// A page as the browser gets it, without the seams Leptos marks between text pieces.
async fn html(app: &TestApp, client: &reqwest::Client, path: &str) -> String {
    let response = client.get(app.url(path)).send().await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap().replace("<!>", "")
}

async fn nothing_happened(shop: &Shop) {
    assert!(performed(&shop.log().await, "/v1/refunds").is_empty());
    assert_eq!(shop.credits(ORDER).await, 40);
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'refund'")
            .await,
        0
    );
}

async fn an_amount_that_is_empty_unreadable_or_zero_is_refused_and_nothing_is_sent(
    backend: Backend,
) {
    let (shop, admin) = paid(backend).await;
    let cases = [
        ("", "Enter the amount to refund, up to CHF 49.00."),
        ("  ", "Enter the amount to refund, up to CHF 49.00."),
        (
            "zwanzig",
            "'zwanzig' is not an amount: write it like 24.50.",
        ),
        ("EUR 10", "'EUR 10' is not an amount: write it like 24.50."),
        ("0.00", "Enter an amount above CHF 0.00."),
    ];
    for (amount, error) in cases {
        let response = post_refund(&shop.app, &admin, amount, "customer asked").await;
        let form = sent_back(&response);
        assert_eq!(form.error("amount"), Some(error), "{amount:?}");
        assert_eq!(form.error("reason"), None);
        assert_eq!(form.value("amount"), Some(amount));
        assert_eq!(form.value("reason"), Some("customer asked"));
    }
    nothing_happened(&shop).await;
}

async fn too_much_comes_back_to_the_refund_page_in_chf_with_the_reason_kept(backend: Backend) {
    let (shop, admin) = paid(backend).await;
    let reason = "Kundin bat um «alles» & mehr";
    let response = post_refund(&shop.app, &admin, "60", reason).await;
    let form = sent_back(&response);
    let error = "CHF 60.00 is more than the CHF 49.00 still refundable.";
    assert_eq!(form.error("amount"), Some(error));
    nothing_happened(&shop).await;

    // The refund page shows it next to the field, with the amount and the reason kept, and
    // the summary at the top; shown once, it is forgotten.
    let page = html(&shop.app, &admin, FORM_PAGE).await;
    assert!(
        page.contains(&format!(
            r#"<p id="amount-error" class="field-error">{error}</p>"#
        )),
        "{page}"
    );
    assert!(page.contains(r#"value="60""#), "{page}");
    assert!(
        page.contains("Kundin bat um «alles» &amp; mehr</textarea>"),
        "{page}"
    );
    assert!(page.contains(r#"aria-invalid="true""#), "{page}");
    assert!(
        page.contains("Nothing was refunded: correct the form below."),
        "{page}"
    );
    let again = html(&shop.app, &admin, FORM_PAGE).await;
    assert!(!again.contains(error), "{again}");

    // In German, the same in the reader's words and money.
    let response = admin
        .post(shop.app.url("/dashboard/actions/refund"))
        .header("accept-language", "de-CH")
        .form(&[
            ("order_id", ORDER),
            ("amount", "1’000.–"),
            ("reason", reason),
        ])
        .send()
        .await
        .unwrap();
    let form = sent_back(&response);
    assert_eq!(
        form.error("amount"),
        Some("CHF 1’000.00 ist mehr als die noch erstattbaren CHF 49.00.")
    );
    assert_eq!(form.value("reason"), Some(reason));
    nothing_happened(&shop).await;
}

async fn a_missing_or_over_long_reason_comes_back_with_the_amount_kept(backend: Backend) {
    let (shop, admin) = paid(backend).await;
    let response = post_refund(&shop.app, &admin, "24.50", "   ").await;
    let form = sent_back(&response);
    assert_eq!(form.error("reason"), Some("Say why you refund it."));
    assert_eq!(form.error("amount"), None);
    assert_eq!(form.value("amount"), Some("24.50"));

    let long = "x".repeat(1001);
    let response = post_refund(&shop.app, &admin, "", &long).await;
    let form = sent_back(&response);
    assert_eq!(
        form.error("reason"),
        Some("A reason has at most 1000 characters.")
    );
    // Both fields are wrong: both are said at once.
    assert_eq!(
        form.error("amount"),
        Some("Enter the amount to refund, up to CHF 49.00.")
    );
    assert_eq!(form.value("reason"), Some(long.as_str()));

    // What was typed comes back as text, whatever it holds.
    let typed = "</textarea><h1>forged</h1>";
    sent_back(&post_refund(&shop.app, &admin, "", typed).await);
    let page = html(&shop.app, &admin, FORM_PAGE).await;
    assert!(!page.contains("<h1>forged"), "{page}");
    assert!(
        page.contains("&lt;/textarea&gt;&lt;h1&gt;forged&lt;/h1&gt;</textarea>"),
        "{page}"
    );
    nothing_happened(&shop).await;
}

async fn a_half_refund_is_audited_in_chf(backend: Backend) {
    let (shop, admin) = paid(backend).await;
    let response = post_refund(&shop.app, &admin, "24,50", "half the runs unused").await;
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/orders/ord_form");
    match crate::helpers::flash(&response) {
        Some(Flash::Notice(text)) => {
            assert!(text.starts_with("Refunded CHF 24.50 (re_"), "{text}")
        }
        other => panic!("{other:?}"),
    }
    let outcomes = shop
        .app
        .db
        .texts("SELECT outcome FROM audit_log WHERE action = 'refund' ORDER BY id")
        .await;
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(
        outcomes[0], "refund:ord_form:2450: requested CHF 24.50",
        "the key keeps minor units, the words are money"
    );
    assert!(
        outcomes[1].starts_with("refund:ord_form:2450: refunded CHF 24.50 (re_"),
        "{outcomes:?}"
    );
    // The audit page reads the same.
    let audit = html(&shop.app, &admin, "/audit").await;
    assert!(audit.contains("requested CHF 24.50"), "{audit}");
}

async fn a_support_operators_forged_refund_is_refused(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order(ORDER).await;
    let support = shop.app.sign_in_as("sam", Role::Support).await;
    let forged = post_refund(&shop.app, &support, "49.00", "forged").await;
    assert_eq!(forged.status(), 403);
    assert!(crate::helpers::flash(&forged).is_none());
    // Their refund page has no form to send.
    let page = html(&shop.app, &support, FORM_PAGE).await;
    assert!(!page.contains("/dashboard/actions/refund"), "{page}");
    assert!(page.contains("Refunds need the admin role"), "{page}");
    nothing_happened(&shop).await;
}

async fn the_preview_is_what_the_refund_does_to_the_ledger(backend: Backend) {
    let (shop, admin) = paid(backend).await;
    // What the page previews from, as the browser reads it.
    let response = shop
        .app
        .call(&admin, "refund_draft", &[("order_id", ORDER)])
        .await;
    assert_eq!(response.status(), 200);
    let draft: Value = response.json().await.unwrap();
    assert_eq!(draft["refundable"], 4900);
    assert_eq!(draft["balance"], 40);
    let facts: MoneyFacts = serde_json::from_value(draft["facts"].clone()).unwrap();
    let preview = facts.preview_refund(2450, 40).unwrap();
    assert_eq!(
        preview,
        RefundPreview {
            revoked: 20,
            balance_before: 40,
            balance_after: 20
        }
    );
    // "Half" is a link that comes back with the amount filled in and the preview rendered.
    let page = html(&shop.app, &admin, FORM_PAGE).await;
    assert!(
        page.contains(r#"href="/orders/ord_form/refund?amount=24.50""#),
        "{page}"
    );
    let half = html(&shop.app, &admin, &format!("{FORM_PAGE}?amount=24.50")).await;
    assert!(half.contains(r#"value="24.50""#), "{half}");
    assert!(half.contains("−20 credits, balance 40 → 20"), "{half}");
    assert!(half.contains("Refund CHF 24.50 — confirm"), "{half}");
    // A link can ask for a number, not put words in the form.
    let forged = html(
        &shop.app,
        &admin,
        &format!("{FORM_PAGE}?amount=refund%20all"),
    )
    .await;
    assert!(!forged.contains("refund all"), "{forged}");

    let response = post_refund(&shop.app, &admin, "24.50", "half the runs unused").await;
    assert_eq!(response.headers()["location"], "/orders/ord_form");
    let revokes = shop
        .app
        .db
        .texts("SELECT CAST(delta AS TEXT) FROM credit_ledger WHERE order_id = 'ord_form' AND kind = 'revoke'")
        .await;
    assert_eq!(revokes, [format!("-{}", preview.revoked)]);
    assert_eq!(shop.credits(ORDER).await, 40 - preview.revoked);
    let customer: Value = shop
        .app
        .call(&admin, "customer", &[("who", "anna@example.ch")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(customer["balance"], preview.balance_after);
}
