// The support desk's harder days, in Swiss German and in English: why a debit failed, read
// on its order's timeline; a claim that can never succeed, resolved from the claims page
// without re-driving it; an event Stripe never delivered, recovered by a reconcile run and
// found from the alert that run raised.
import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { PASSWORD, USERS, checkoutCompleted, claimStatus, cli, deliver, makeStale, signIn } from "./support";

const LANGUAGES = [
  {
    locale: "de-CH",
    username: "Benutzername",
    password: "Passwort",
    signIn: "Anmelden",
    failed: "Zahlung fehlgeschlagen",
    resolve: "Erledigen…",
    reason: "Begründung (wird im Protokoll festgehalten)",
    resolveConfirm: "Ohne erneute Ausführung erledigen",
    resolved: "Ohne erneute Ausführung erledigt",
    resolvedState: "erledigt",
    reconcileReason: "Begründung (wird im Protokoll festgehalten)",
    reconcileNow: "Jetzt abgleichen",
    recoveredBy: /durch Abgleich nachgeholt · Abgleich Nr\. \d+/,
  },
  {
    locale: "en",
    username: "Username",
    password: "Password",
    signIn: "Sign in",
    failed: "payment failed",
    resolve: "Resolve…",
    reason: "Why (kept in the audit log)",
    resolveConfirm: "Resolve without re-driving",
    resolved: "Resolved without re-driving",
    resolvedState: "resolved",
    reconcileReason: "Why (kept in the audit log)",
    reconcileNow: "Reconcile now",
    recoveredBy: /recovered by reconcile · run #\d+/,
  },
] as const;

type Words = (typeof LANGUAGES)[number];

async function signInAs(page: Page, words: Words, username: string, path = "/") {
  await page.goto(path);
  await page.getByLabel(words.username).fill(username);
  await page.getByLabel(words.password).fill(PASSWORD);
  await page.getByRole("button", { name: words.signIn }).click();
  await expect(page.getByTestId("signed-in-as")).toContainText(username);
}

/** A Checkout Session for a SEPA debit: completed unpaid, then the bank's refusal. */
function sepaEvents(tag: string) {
  const order = `ord_sepa_${tag}`;
  const intent = `pi_sepa_${tag}`;
  const created = Math.floor(Date.now() / 1000);
  const session = {
    id: `cs_sepa_${tag}`,
    object: "checkout.session",
    payment_status: "unpaid",
    amount_total: 4900,
    currency: "chf",
    payment_intent: intent,
    customer_email: `sepa-${tag}@example.ch`,
    metadata: { order_id: order, package: "thesis-40", credits: "40" },
  };
  const event = (id: string, type: string, object: object, at: number) => ({
    id,
    object: "event",
    type,
    created: at,
    livemode: false,
    data: { object },
  });
  return {
    order,
    completed: event(`evt_sepa_${tag}_completed`, "checkout.session.completed", session, created),
    intentFailed: event(
      `evt_sepa_${tag}_pi`,
      "payment_intent.payment_failed",
      {
        id: intent,
        object: "payment_intent",
        last_payment_error: {
          code: "insufficient_funds",
          message: "The customer's account has insufficient funds to cover this payment.",
        },
      },
      created + 1,
    ),
    failed: event(
      `evt_sepa_${tag}_failed`,
      "checkout.session.async_payment_failed",
      session,
      created + 2,
    ),
  };
}

async function failedDebit(request: APIRequestContext, tag: string) {
  const sepa = sepaEvents(tag);
  for (const event of [sepa.completed, sepa.intentFailed, sepa.failed]) {
    await deliver(request, JSON.stringify(event));
  }
  for (const event of [sepa.completed, sepa.failed]) {
    cli(["claims", "redrive", event.id, "--reason", "e2e: fulfil the debit's events"]);
  }
  return sepa.order;
}

/** A session whose credits cannot be read: its one allowed attempt fails, for good. */
async function hopeless(request: APIRequestContext, tag: string) {
  const id = `evt_hopeless_${tag}`;
  await deliver(
    request,
    JSON.stringify({
      id,
      object: "event",
      type: "checkout.session.completed",
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      data: {
        object: {
          id: `cs_hopeless_${tag}`,
          object: "checkout.session",
          payment_status: "paid",
          amount_total: 4900,
          currency: "chf",
          customer_email: `hopeless-${tag}@example.ch`,
          metadata: { order_id: `ord_hopeless_${tag}`, credits: "lots" },
        },
      },
    }),
  );
  try {
    cli(["claims", "redrive", id, "--reason", "e2e: make it fail"], {
      env: { CLAIMCHECK_MAX_ATTEMPTS: "1" },
    });
  } catch {
    // The re-drive reports the failure with exit 1: that is the point.
  }
  expect(claimStatus(id)).toBe("failed");
  return id;
}

/** A paid session Stripe made but never delivered (the simulator has no endpoint to send
 * it to): only a reconcile run can find it. */
async function undelivered(request: APIRequestContext, tag: string): Promise<string> {
  const response = await request.post(`${process.env.E2E_SIM_URL}/_sim/events`, {
    data: {
      type: "checkout.session.completed",
      data: {
        object: {
          id: `cs_undelivered_${tag}`,
          object: "checkout.session",
          payment_status: "paid",
          amount_total: 4900,
          currency: "chf",
          payment_intent: `pi_undelivered_${tag}`,
          customer_email: `undelivered-${tag}@example.ch`,
          metadata: { order_id: `ord_undelivered_${tag}`, credits: "40" },
        },
      },
    },
  });
  expect(response.ok()).toBeTruthy();
  // The simulator names the event, as Stripe does.
  return (await response.json()).id;
}

for (const words of LANGUAGES) {
  const tag = words.locale.toLowerCase().replace("-", "");
  test.describe(`a browser asking for ${words.locale}`, () => {
    test.use({ locale: words.locale });

    test("why a debit failed is read on its order's timeline", async ({ page, request }) => {
      const order = await failedDebit(request, tag);
      await signInAs(page, words, USERS.viewer, `/orders/${order}`);
      await expect(page.getByTestId("order-status")).toHaveText(words.failed);
      await expect(page.getByTestId("order-failure")).toHaveText(
        "The customer's account has insufficient funds to cover this payment. (insufficient_funds)",
      );
      const timeline = page.getByTestId("order-timeline");
      const deliveries = timeline.locator('li[data-kind="delivery"]');
      await expect(deliveries).toHaveCount(3);
      await expect(deliveries.nth(0)).toContainText("checkout.session.completed");
      await expect(deliveries.nth(1)).toContainText("payment_intent.payment_failed");
      await expect(deliveries.nth(1)).toContainText("insufficient funds");
      await expect(deliveries.nth(2)).toContainText("checkout.session.async_payment_failed");
      await expect(timeline.locator('li[data-kind="processed"]')).toHaveCount(2);
      await expect(page.getByTestId("order-in-stripe").getByRole("link").first()).toHaveAttribute(
        "href",
        /^https:\/\/dashboard\.stripe\.com\/test\/payments\/pi_sepa_/,
      );
    });

    test("an admin resolves a hopeless claim without re-driving it", async ({ page, request }) => {
      const event = await hopeless(request, tag);
      await signInAs(page, words, USERS.admin, "/claims?status=failed");
      await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
      const row = page.locator(`tr[data-event="${event}"]`);
      await expect(row).toContainText(`hopeless-${tag}@example.ch`);
      await expect(row).toContainText("CHF");
      // It asks first, and why.
      await row.locator("summary", { hasText: words.resolve }).click();
      await row.getByLabel(words.reason).fill("test order from the shop's staging site");
      await row.getByRole("button", { name: words.resolveConfirm }).click();
      await expect(page.getByRole("status")).toContainText(words.resolved);
      await expect(page.locator(`tr[data-event="${event}"]`)).toHaveCount(0);
      expect(claimStatus(event)).toBe("resolved");
      // On the resolved tab, with who and why.
      await page.goto("/claims?status=resolved");
      const resolved = page.locator(`tr[data-event="${event}"]`);
      await expect(resolved.locator('[data-state="resolved"]')).toHaveText(words.resolvedState);
      await expect(resolved).toContainText("test order from the shop's staging site");
    });

    test("an event Stripe never delivered is recovered and found from its alert", async ({ page, request }) => {
      const event = await undelivered(request, tag);
      await signInAs(page, words, USERS.admin, "/reconcile");
      await page.getByLabel(words.reconcileReason).fill("e2e: Stripe stopped delivering");
      await page.getByRole("button", { name: words.reconcileNow }).click();
      // The run's outcome lands on the overview.
      await expect(page.getByRole("status")).toBeVisible();
      await expect.poll(() => claimStatus(event), { timeout: 10_000 }).toBe("pending");
      // The next alert check (every second here) raises the reconcile alert, whose link is
      // exactly the events that run recovered.
      // (An earlier run's alert may still be showing until the check refreshes it.)
      const link = page.locator('[data-testid="open-alert"][data-condition="reconcile_findings"] a[href^="/events?run="]');
      await expect(async () => {
        await page.goto("/alerts");
        await link.click({ timeout: 1_000 });
        await expect(page).toHaveURL(/\/events\?run=\d+/);
        await expect(page.locator(`tr[data-event="${event}"]`)).toBeVisible({ timeout: 1_000 });
      }).toPass({ timeout: 20_000 });
      await expect(page.getByTestId("run-filter")).toBeVisible();
      await page.locator(`tr[data-event="${event}"]`).getByRole("link", { name: event }).click();
      await expect(page.getByTestId("claim-source")).toHaveAttribute("data-source", "reconcile");
      await expect(page.getByTestId("claim-source")).toContainText(words.recoveredBy);
    });
  });
}

test("the claims page keeps itself current while it is open", async ({ page, request }) => {
  const tag = `live${Date.now()}`;
  await signIn(page, USERS.support, "/claims?status=stale");
  await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
  // A mark on this very page: still there afterwards, the page was never loaded again.
  await page.evaluate(() => ((window as unknown as { mark: string }).mark = "kept"));
  const stale = checkoutCompleted(`ord_${tag}`, `cs_${tag}`, `${tag}@example.ch`);
  await deliver(request, JSON.stringify(stale));
  await makeStale(stale.id);
  await expect(page.locator(`tr[data-event="${stale.id}"]`)).toBeVisible({ timeout: 30_000 });
  expect(await page.evaluate(() => (window as unknown as { mark?: string }).mark)).toBe("kept");
});
