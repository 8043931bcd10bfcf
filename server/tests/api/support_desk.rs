//! The support desk: a customer whose payment is stuck is found by the e-mail they give or
//! by the start of their order id, whatever the claim's state, and lands on a customer page
//! that shows what is waiting; a missing order, event or customer is a 404 every time.

use claimcheck_core::auth::Role;
use claimcheck_core::worker::{Worker, WorkerConfig};
use serde_json::Value;

use crate::helpers::{TestApp, fixture, on_both_backends, paid_session, search_go as go};

on_both_backends!(
    a_stuck_payment_is_found_by_email_and_order_id_prefix,
    a_missing_order_event_or_customer_is_404_every_time,
    each_role_is_shown_only_the_forms_it_may_send,
    the_orders_list_pages_filters_and_exports,
    notices_travel_in_a_flash_never_in_the_url,
    a_failed_debit_tells_why_on_its_orders_timeline,
);

async fn a_stuck_payment_is_found_by_email_and_order_id_prefix(app: TestApp) {
    // Two payments delivered and never fulfilled (no worker runs): no order exists.
    for i in 1..=2 {
        let body = paid_session(
            &format!("evt_desk_{i}"),
            &format!("cs_desk_{i}"),
            &format!("ord_desk_000{i}"),
        );
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM orders").await, 0);
    let support = app.sign_in_as("sam", Role::Support).await;

    // The e-mail in any case opens the customer, whose page shows the waiting claim.
    let page = go(&app, &support, " ORD_DESK_0001@Example.CH ").await;
    assert_eq!(page, "/customers/ord_desk_0001@example.ch");
    let html = support.get(app.url(&page)).send().await.unwrap();
    assert_eq!(html.status(), 200);
    let html = html.text().await.unwrap();
    assert!(html.contains("evt_desk_1"), "the waiting claim is listed");
    assert!(
        !html.contains("evt_desk_2"),
        "another customer's claim is not"
    );
    let customer: Value = app
        .call(&support, "customer", &[("who", "ord_desk_0001@example.ch")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        customer["orders"].as_array().unwrap().len(),
        0,
        "{customer}"
    );
    assert_eq!(
        customer["waiting"][0]["event_id"], "evt_desk_1",
        "{customer}"
    );
    assert_eq!(customer["waiting"][0]["status"], "pending", "{customer}");
    assert_eq!(customer["balance"], 0, "{customer}");

    // The whole order id opens its one claim; a prefix lists both.
    assert_eq!(
        go(&app, &support, "ord_desk_0002").await,
        "/events/evt_desk_2"
    );
    assert_eq!(
        go(&app, &support, "ord_desk_000").await,
        "/search?q=ord_desk_000"
    );
    let found: Value = app
        .call(&support, "search", &[("term", "ord_desk_000")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(found["events"].as_array().unwrap().len(), 2, "{found}");
    // The events list's search reads the same index.
    let events: Value = app
        .call(
            &support,
            "events",
            &[
                ("status", ""),
                ("event_type", ""),
                ("search", "ord_desk_0001@example.ch"),
                ("from", ""),
                ("to", ""),
                ("after", ""),
                ("source", ""),
                ("run", ""),
            ],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(events["rows"][0]["event_id"], "evt_desk_1", "{events}");
    assert_eq!(events["rows"].as_array().unwrap().len(), 1, "{events}");

    // Once fulfilled, the same page shows the order and its credits, nothing waiting.
    let worker = Worker::new(app.store.clone(), "desk", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    let customer: Value = app
        .call(&support, "customer", &[("who", "ord_desk_0001@example.ch")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        customer["waiting"].as_array().unwrap().len(),
        0,
        "{customer}"
    );
    assert_eq!(
        customer["orders"][0]["order_id"], "ord_desk_0001",
        "{customer}"
    );
    assert_eq!(customer["balance"], 40, "{customer}");
    assert_eq!(customer["history"][0]["entry"]["delta"], 40, "{customer}");
}

async fn a_missing_order_event_or_customer_is_404_every_time(app: TestApp) {
    let body = paid_session("evt_desk_here", "cs_desk_here", "ord_desk_here");
    assert_eq!(app.deliver(&body).await.status(), 200);
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    for _ in 0..50 {
        for path in [
            "/orders/ord_nope",
            "/events/evt_doesnotexist",
            "/customers/nobody@example.ch",
            "/orders/ord_nope/refund",
        ] {
            let response = viewer.get(app.url(path)).send().await.unwrap();
            let status = response.status();
            let body = response.text().await.unwrap();
            assert_eq!(status, 404, "{path}: {body}");
        }
    }
    for path in [
        "/events/evt_desk_here",
        "/customers/ord_desk_here@example.ch",
    ] {
        let response = viewer.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
}

async fn each_role_is_shown_only_the_forms_it_may_send(app: TestApp) {
    let body = paid_session("evt_desk_forms", "cs_desk_forms", "ord_desk_forms");
    assert_eq!(app.deliver(&body).await.status(), 200);
    let worker = Worker::new(app.store.clone(), "desk", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    let support = app.sign_in_as("sam", Role::Support).await;
    let admin = app.sign_in_as("ada", Role::Admin).await;
    let html = |client: reqwest::Client, path: &'static str| {
        let url = app.url(path);
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    // (page, what only an admin may send from it)
    let admin_only = [
        ("/orders/ord_desk_forms", "/orders/ord_desk_forms/refund"),
        ("/orders/ord_desk_forms/refund", "/dashboard/actions/refund"),
        ("/operators", "/dashboard/actions/operators\""),
        ("/operators", "/dashboard/actions/operators/access"),
    ];
    for (page, form) in admin_only {
        let seen = html(support.clone(), page).await;
        assert!(!seen.contains(form), "support is shown {form} on {page}");
        let seen = html(admin.clone(), page).await;
        assert!(seen.contains(form), "admin is not shown {form} on {page}");
    }
    // Removing an operator asks first: the button opens a question naming them.
    // (Leptos marks the seams between text pieces with `<!>`.)
    let operators = html(admin.clone(), "/operators").await.replace("<!>", "");
    assert!(
        operators.contains("<details class=\"confirm\">"),
        "{operators}"
    );
    assert!(operators.contains("Yes, remove sam"), "{operators}");
}

async fn the_orders_list_pages_filters_and_exports(app: TestApp) {
    for i in 0..55 {
        let order = format!("ord_list_{i:02}");
        let body = paid_session(
            &format!("evt_list_{i:02}"),
            &format!("cs_list_{i:02}"),
            &order,
        );
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let worker = Worker::new(app.store.clone(), "desk", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    app.db
        .execute(
            "UPDATE orders SET status = 'refunded' WHERE order_id = 'ord_list_07'; \
             UPDATE orders SET package = '=HYPERLINK(\"x\")' WHERE order_id = 'ord_list_08'",
        )
        .await;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let list = |status: &'static str, after: String| {
        let (app, viewer) = (&app, viewer.clone());
        async move {
            let response = app
                .call(
                    &viewer,
                    "orders_list",
                    &[
                        ("status", status),
                        ("package", ""),
                        ("from", ""),
                        ("to", ""),
                        ("after", &after),
                    ],
                )
                .await;
            (
                response.status(),
                response.json::<Value>().await.unwrap_or_default(),
            )
        }
    };
    // Newest first, 50 a page, the next page after the cursor, nothing twice.
    let (status, first) = list("", String::new()).await;
    assert_eq!(status, 200, "{first}");
    let first_rows = first["rows"].as_array().unwrap();
    assert_eq!(first_rows.len(), 50);
    let next = first["next"].as_str().expect("a next page").to_owned();
    let (_, second) = list("", next).await;
    let second_rows = second["rows"].as_array().unwrap();
    assert_eq!(second_rows.len(), 5);
    assert!(second["next"].is_null(), "{second}");
    let mut seen: Vec<&str> = first_rows
        .iter()
        .chain(second_rows)
        .map(|r| r["order_id"].as_str().unwrap())
        .collect();
    let in_order = seen.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 55);
    let newest_first = app
        .db
        .texts("SELECT order_id FROM orders ORDER BY created_at DESC, order_id DESC")
        .await;
    assert_eq!(in_order, newest_first);
    assert_eq!(first_rows[0]["credits_granted"], 40, "{first}");
    // A status narrows it; an unknown one is a 400 in words.
    let (_, refunded) = list("refunded", String::new()).await;
    assert_eq!(refunded["rows"].as_array().unwrap().len(), 1, "{refunded}");
    assert_eq!(refunded["rows"][0]["order_id"], "ord_list_07");
    let (status, _) = list("lost", String::new()).await;
    assert_eq!(status, 400);
    // The page renders the list without a search term.
    let page = viewer.get(app.url("/orders")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("data-testid=\"orders-list\"")
    );

    // The export holds every order the filter shows, whatever the number of pages.
    let csv = viewer.get(app.url("/orders.csv")).send().await.unwrap();
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 56, "a header and 55 orders");
    assert!(lines[0].starts_with("order_id,status,package,customer_email,amount_minor"));
    assert!(
        text.contains("ord_list_08,paid,\"'=HYPERLINK(\"\"x\"\")\","),
        "a formula is defused: {text}"
    );
    let refunded = viewer
        .get(app.url("/orders.csv?status=refunded"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(refunded.lines().count(), 2, "{refunded}");
    let bad = viewer
        .get(app.url("/orders.csv?from=yesterday"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let anonymous = TestApp::browser()
        .get(app.url("/orders.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 303);
}

async fn notices_travel_in_a_flash_never_in_the_url(app: TestApp) {
    let body = paid_session("evt_desk_flash", "cs_desk_flash", "ord_desk_flash");
    assert_eq!(app.deliver(&body).await.status(), 200);
    let support = app.sign_in_as("sam", Role::Support).await;
    // A link anyone can make puts no words on the page, as a notice or as an error.
    for (path, planted) in [
        (
            "/?notice=Your%20account%20is%20locked.%20Call%20us.",
            "Call us",
        ),
        ("/events?error=anything", "notice-error"),
        ("/events/evt_desk_flash?notice=hello", "notice-ok"),
    ] {
        let html = support
            .get(app.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!html.contains(planted), "{path}: {html}");
    }
    // A re-drive lands on the event with its outcome in the flash cookie, not the URL; the
    // page shows it once and forgets it.
    let done = support
        .post(app.url("/dashboard/actions/redrive"))
        .form(&[
            ("event_id", "evt_desk_flash"),
            ("reason", "customer called"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 303);
    let location = done.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, "/events/evt_desk_flash");
    assert!(
        matches!(crate::helpers::flash(&done), Some(app::flash::Flash::Notice(text)) if text.starts_with("Re-driven")),
        "{:?}",
        crate::helpers::flash(&done)
    );
    let page = support.get(app.url(&location)).send().await.unwrap();
    let cleared = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .any(|c| c.to_str().unwrap().starts_with("claimcheck_flash=;"));
    assert!(cleared, "the page forgets the notice it showed");
    let html = page.text().await.unwrap().replace("<!>", "");
    assert!(
        html.contains("notice-ok") && html.contains("Re-driven"),
        "{html}"
    );
    let again = support
        .get(app.url(&location))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!again.contains("notice-ok"), "shown once");
}

async fn a_failed_debit_tells_why_on_its_orders_timeline(app: TestApp) {
    // A SEPA payment: the session completes unpaid, then Stripe reports the debit's failure
    // (the payment intent's telemetry carries the bank's reason; the session's event does
    // not), then the session's async failure.
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.unpaid.3"))
            .await
            .status(),
        200
    );
    let failed_intent = serde_json::to_vec(&serde_json::json!({
        "id": "evt_desk_pifailed",
        "object": "event",
        "created": 1_764_486_390,
        "livemode": false,
        "type": "payment_intent.payment_failed",
        "data": {"object": {
            "id": "pi_pub00033Mxc9vLkdIwHu7ix",
            "object": "payment_intent",
            "last_payment_error": {
                "code": "insufficient_funds",
                "message": "The customer's account has insufficient funds to cover this payment."
            }
        }}
    }))
    .unwrap();
    assert_eq!(app.deliver(&failed_intent).await.status(), 200);
    assert_eq!(
        app.deliver(&fixture("checkout.session.async_payment_failed"))
            .await
            .status(),
        200
    );
    let worker = Worker::new(app.store.clone(), "desk", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    // The card payment of another order: paid at Stripe's time, not at the time written.
    let paid = paid_session("evt_desk_paid", "cs_desk_paid", "ord_desk_paid");
    assert_eq!(app.deliver(&paid).await.status(), 200);
    while !worker.run_once().await.unwrap().is_empty() {}

    let viewer = app.sign_in_as("vic", Role::Viewer).await;
    let order: Value = app
        .call(&viewer, "order", &[("order_id", "ord_pub_0003")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(order["status"], "payment_failed", "{order}");
    let history = &order["history"];
    assert_eq!(
        history["failure"],
        "The customer's account has insufficient funds to cover this payment. (insufficient_funds)",
        "{history}"
    );
    assert_eq!(history["paid_at"], Value::Null, "{history}");
    assert!(
        history["stripe_payment"]
            .as_str()
            .unwrap()
            .starts_with("https://dashboard.stripe.com/test/payments/pi_pub0003"),
        "{history}"
    );
    // Every delivery, in the order it came, then what the claims came to.
    let lines = history["timeline"].as_array().unwrap();
    let delivered: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["what"]["Delivery"]["event_type"].as_str())
        .collect();
    assert_eq!(
        delivered,
        [
            "checkout.session.completed",
            "payment_intent.payment_failed",
            "checkout.session.async_payment_failed"
        ],
        "{history}"
    );
    let processed = lines
        .iter()
        .filter(|l| l["what"].get("Processed").is_some())
        .count();
    assert_eq!(processed, 2, "{history}");
    let at: Vec<i64> = lines.iter().map(|l| l["at_ms"].as_i64().unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "in time order: {at:?}");

    // The page says it in words, in the reader's language.
    let html = viewer
        .get(app.url("/orders/ord_pub_0003"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("data-testid=\"order-failure\""), "{html}");
    assert!(html.contains("insufficient funds"), "{html}");
    assert!(html.contains("data-testid=\"order-timeline\""), "{html}");

    let order: Value = app
        .call(&viewer, "order", &[("order_id", "ord_desk_paid")])
        .await
        .json()
        .await
        .unwrap();
    assert!(
        order["history"]["paid_at"].as_str().is_some(),
        "paid at the event's time: {order}"
    );
    let ledger_lines = order["history"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["what"]["Ledger"]["delta"] == 40)
        .count();
    assert_eq!(ledger_lines, 1, "{order}");
}
