// Shared by the seed and the specs: who signs in, and the seeded data.
import { expect, type Page } from "@playwright/test";

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
