// Prepares the dashboard's world through the product's own doors: operators with the CLI,
// Stripe events through the signed webhook, an order through the order API (which calls the
// Stripe simulator), fulfilment with `claims redrive`, and a stale claim made by killing a
// process parked at the `after-lease` failpoint.
import { test as setup, expect } from "@playwright/test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PASSWORD, SEEDED, USERS, checkoutCompleted, cli, deliver as deliverTo, makeStale } from "./support";

setup("seed operators, orders and a stale claim", async ({ request }) => {
  const deliver = (body: string) => deliverTo(request, body);
  for (const [role, username] of Object.entries(USERS)) {
    cli(["operator", "add", "--username", username, "--role", role], { input: `${PASSWORD}\n` });
  }

  // A card payment, fulfilled.
  const fixture = join(__dirname, "..", "..", "fixtures", "stripe", "events");
  await deliver(readFileSync(join(fixture, "checkout.session.completed.paid.json"), "utf8"));
  cli(["claims", "redrive", SEEDED.paidEvent, "--reason", "seed"]);

  // An order created through the order API: its Checkout Session carries a key.
  const token = JSON.parse(cli(["tokens", "create", "--name", "e2e shop", "--json"])).token;
  const created = await request.post("/api/orders", {
    headers: { authorization: `Bearer ${token}` },
    data: { order_id: SEEDED.keyedOrder, package: "thesis-40", customer_email: SEEDED.keyedEmail },
  });
  expect(created.status()).toBe(201);
  const order = await created.json();
  await deliver(JSON.stringify(checkoutCompleted(SEEDED.keyedOrder, order.checkout_session_id, SEEDED.keyedEmail)));
  cli(["claims", "redrive", `evt_e2e_${SEEDED.keyedOrder}`, "--reason", "seed"]);

  // The order the admin refunds.
  await deliver(JSON.stringify(checkoutCompleted(SEEDED.refundOrder, "cs_e2e_refund", "refund@example.ch")));
  cli(["claims", "redrive", `evt_e2e_${SEEDED.refundOrder}`, "--reason", "seed"]);

  // A worker takes the stale order's claim, parks after taking the lease and is killed.
  const stale = checkoutCompleted(SEEDED.staleOrder, "cs_e2e_stale", "stale@example.ch");
  stale.id = SEEDED.staleEvent;
  await deliver(JSON.stringify(stale));
  await makeStale(SEEDED.staleEvent);
});
