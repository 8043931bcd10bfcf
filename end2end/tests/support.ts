// Shared by the seed and the specs: who signs in, the seeded data, and the product's own
// doors for making more of it (the CLI, the signed webhook, a worker killed mid-claim).
import { expect, type APIRequestContext, type Page } from "@playwright/test";
import { createHmac } from "node:crypto";
import { execFileSync, spawn } from "node:child_process";

export const PASSWORD = "e2e password that is long";

export const USERS = {
  viewer: "vic",
  support: "sam",
  admin: "ada",
} as const;

export const SEEDED = {
  /** Paid through its webhook, fulfilled: 40 credits, no outgoing request. */
  paidEvent: "evt_pub0001paid",
  paidOrder: "ord_pub_0001",
  /** Created through the order API (a checkout-session key), paid, fulfilled. */
  keyedOrder: "ord_e2e_keys",
  keyedEmail: "keys@example.ch",
  /** Paid and fulfilled; the admin refunds it. */
  refundOrder: "ord_e2e_refund",
  /** Its worker died after taking the lease: stale, nothing unlocked. */
  staleEvent: "evt_e2e_stale",
  staleOrder: "ord_e2e_stale",
};

/** Signs in through the form and waits for the page asked for. */
export async function signIn(page: Page, username: string, path = "/") {
  await page.goto(path);
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("signed-in-as")).toContainText(username);
}

/** The plans the e2e shop sells, for the server and for `claims redrive` alike. */
export const PLANS = "thesis-monthly=40:3900:chf:month,thesis-pro=100:8900:chf:month";

const cliEnv = () => ({
  ...process.env,
  DATABASE_URL: process.env.E2E_DATABASE_URL!,
  CLAIMCHECK_PLANS: PLANS,
  RUST_LOG: "warn",
});

/** Runs `claimcheck ARGS` against the test database and returns what it printed (its
 * stderr stays out of the report: some runs fail on purpose, and throw). */
export function cli(args: string[], options: { input?: string; env?: Record<string, string> } = {}): string {
  return execFileSync(process.env.E2E_BINARY!, args, {
    env: { ...cliEnv(), ...options.env },
    input: options.input,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  });
}

export function claimStatus(eventId: string): string {
  return JSON.parse(cli(["claims", "show", eventId, "--json"])).status;
}

/** A paid `checkout.session.completed` for `order`, of `amount` (minor units) in CHF, for the
 * `thesis-40` package with 40 credits in its metadata (`credits: null`: the package alone). */
export function checkoutCompleted(
  order: string,
  sessionId: string,
  email: string,
  { amount = 4900, credits = "40" as string | null } = {},
) {
  const metadata: Record<string, string> = { order_id: order, package: "thesis-40" };
  if (credits !== null) metadata.credits = credits;
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
        amount_total: amount,
        currency: "chf",
        payment_intent: `pi_${order}`,
        client_reference_id: order,
        customer_email: email,
        metadata,
      },
    },
  };
}

/** Delivers `body` to the webhook, signed as Stripe signs it; Claimcheck must accept it. */
export async function deliver(request: APIRequestContext, body: string) {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", process.env.E2E_WEBHOOK_SECRET!).update(`${t}.${body}`).digest("hex");
  const response = await request.post("/webhooks/stripe", {
    headers: { "stripe-signature": `t=${t},v1=${v1}`, "content-type": "application/json" },
    data: body,
  });
  expect(response.status()).toBe(200);
}

/** A worker takes the claim of `eventId`, parks after taking the lease and is killed: the
 * claim goes stale with nothing unlocked. */
export async function makeStale(eventId: string) {
  const doomed = spawn(process.env.E2E_BINARY!, ["claims", "redrive", eventId, "--reason", "doomed"], {
    env: { ...cliEnv(), CLAIMCHECK_FAILPOINT: "after-lease", CLAIMCHECK_LEASE_SECS: "1" },
    stdio: "ignore",
  });
  // Leased (running, or stale once its one-second lease is over): the process is parked.
  await expect.poll(() => claimStatus(eventId), { timeout: 15_000 }).not.toBe("pending");
  doomed.kill("SIGKILL");
  await expect.poll(() => claimStatus(eventId), { timeout: 15_000 }).toBe("stale");
}
