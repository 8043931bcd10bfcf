// Alerts on the dashboard: a claim that fails opens an alert, which the header counts on
// every page and the Alerts page shows (the server checks every second in these tests).
import { test, expect } from "@playwright/test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { USERS, claimStatus, cli, deliver, signIn } from "./support";

const EVENT = "evt_e2e_alert_fails";

test("a claim that fails shows as an alert in the header and on the Alerts page", async ({
  page,
  request,
}) => {
  // A session whose credits cannot be read: its one allowed attempt fails.
  const fixture = join(__dirname, "..", "..", "fixtures", "stripe", "events");
  const body = readFileSync(join(fixture, "checkout.session.completed.paid.json"), "utf8")
    .replaceAll("evt_pub0001paid", EVENT)
    .replaceAll("cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ", "cs_e2e_alert_fails")
    .replaceAll("ord_pub_0001", "ord_e2e_alert")
    .replaceAll("pi_pub00013Mxc9vLkdIwHu7ix", "pi_e2e_alert")
    .replace('"credits":"40"', '"credits":"lots"');
  await deliver(request, body);

  await signIn(page, USERS.viewer);
  await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
  await expect(page.getByTestId("alert-badge")).toHaveCount(0);

  try {
    cli(["claims", "redrive", EVENT, "--reason", "e2e: make it fail"], {
      env: { CLAIMCHECK_MAX_ATTEMPTS: "1" },
    });
  } catch {
    // The re-drive reports the failure with exit 1: that is the point.
  }
  expect(claimStatus(EVENT)).toBe("failed");

  // The next check opens the alert; the header shows it on whatever page comes next.
  await expect(async () => {
    await page.goto("/events");
    await expect(page.getByTestId("alert-badge")).toHaveText("1", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });

  await page.getByRole("link", { name: /Alerts/ }).click();
  await expect(page).toHaveURL(/\/alerts$/);
  const alert = page.locator('[data-testid="open-alert"][data-condition="failed_claims"]');
  await expect(alert).toBeVisible();
  await expect(alert).toContainText("Claims failed (1)");
  await expect(alert).toContainText(EVENT);
  await expect(alert.getByRole("link", { name: "Show them" })).toHaveAttribute(
    "href",
    "/claims?status=failed",
  );
});
