// Prepares the dashboard's world through the product's own doors: operators with the CLI,
// Stripe events through the signed webhook, an order through the order API (which calls the
// Stripe simulator), fulfilment with `claims redrive`, and a stale claim made by killing a
// process parked at the `after-lease` failpoint.
import { test as setup, expect } from "@playwright/test";
import { createHmac } from "node:crypto";
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PASSWORD, SEEDED, USERS } from "./support";

const binary = process.env.E2E_BINARY!;
const env = { ...process.env, DATABASE_URL: process.env.E2E_DATABASE_URL!, RUST_LOG: "warn" };

function cli(args: string[], input?: string): string {
  return execFileSync(binary, args, { env, input, encoding: "utf8" });
}

function claimStatus(eventId: string): string {
  return JSON.parse(cli(["claims", "show", eventId, "--json"])).status;
}

function session(order: string, sessionId: string, email: string) {
  return {
    id: `evt_e2e_${order}`,
    object: "event",
    type: "checkout.session.completed",
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    data: {
      object: {
        id: sessionId,
        object: "checkout.session",
        payment_status: "paid",
        amount_total: 4900,
        currency: "chf",
        payment_intent: `pi_${order}`,
        client_reference_id: order,
        customer_email: email,
        metadata: { order_id: order, credits: "40", package: "thesis-40" },
      },
    },
  };
}

setup("seed operators, orders and a stale claim", async ({ request }) => {
  for (const [role, username] of Object.entries(USERS)) {
    cli(["operator", "add", "--username", username, "--role", role], `${PASSWORD}\n`);
  }

  const deliver = async (body: string) => {
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac("sha256", process.env.E2E_WEBHOOK_SECRET!)
      .update(`${t}.${body}`)
      .digest("hex");
    const response = await request.post("/webhooks/stripe", {
      headers: { "stripe-signature": `t=${t},v1=${v1}`, "content-type": "application/json" },
      data: body,
    });
    expect(response.status()).toBe(200);
  };

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
  await deliver(JSON.stringify(session(SEEDED.keyedOrder, order.checkout_session_id, SEEDED.keyedEmail)));
  cli(["claims", "redrive", `evt_e2e_${SEEDED.keyedOrder}`, "--reason", "seed"]);

  // The order the admin refunds.
  await deliver(JSON.stringify(session(SEEDED.refundOrder, "cs_e2e_refund", "refund@example.ch")));
  cli(["claims", "redrive", `evt_e2e_${SEEDED.refundOrder}`, "--reason", "seed"]);

  // A worker takes the stale order's claim, parks after taking the lease and is killed.
  const stale = session(SEEDED.staleOrder, "cs_e2e_stale", "stale@example.ch");
  stale.id = SEEDED.staleEvent;
  await deliver(JSON.stringify(stale));
  const doomed = spawn(binary, ["claims", "redrive", SEEDED.staleEvent, "--reason", "doomed"], {
    env: { ...env, CLAIMCHECK_FAILPOINT: "after-lease", CLAIMCHECK_LEASE_SECS: "1" },
    stdio: "ignore",
  });
  // Leased (running, or stale once its one-second lease is over): the process is parked.
  await expect.poll(() => claimStatus(SEEDED.staleEvent), { timeout: 15_000 }).not.toBe("pending");
  doomed.kill("SIGKILL");
  await expect.poll(() => claimStatus(SEEDED.staleEvent), { timeout: 15_000 }).toBe("stale");
});
