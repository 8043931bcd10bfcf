// Operators on call handle an alert from the Alerts page, in Swiss German and in English:
// support acknowledges it and snoozes it for an hour, an admin resolves it with a note (and
// since the claim still fails, the next check opens a new one), a viewer sees who is on it
// and no button. The alert is opened through the product's own doors: a delivery whose
// credits only the package table knows, re-driven once from the CLI without that table.
import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "@playwright/test";
import { PASSWORD, USERS, checkoutCompleted, claimStatus, cli, deliver } from "./support";

/** The failing claim of this worker: a worker started again after a failure makes its own. */
let EVENT = "";

/** What each language calls the things the walk touches (app/locales/<language>/alerts.json). */
const LANGUAGES = [
  {
    locale: "de-CH",
    username: "Benutzername",
    password: "Passwort",
    signIn: "Anmelden",
    title: "Claims fehlgeschlagen",
    takeNote: "Notiz (freiwillig, wird im Protokoll festgehalten)",
    acknowledge: "Übernehmen",
    acknowledgedBadge: "Übernommen",
    acknowledged: "Übernommen: Claims fehlgeschlagen. Keine Erinnerungen, solange er offen bleibt.",
    snoozeHour: "1 Stunde stummschalten",
    snoozeDay: "1 Tag stummschalten",
    snoozed: /^Bis .+ stummgeschaltet: Claims fehlgeschlagen\. Bis dahin keine Nachrichten\.$/,
    snoozedLine: /Bis .+ stummgeschaltet von sam; bis dahin keine Nachrichten\./,
    resolve: "Beheben…",
    resolveNote: "Warum kann er geschlossen werden? (wird im Protokoll festgehalten)",
    resolveNow: "Jetzt beheben",
    reopens: "besteht die Bedingung bei der nächsten Prüfung noch, wird ein neuer Alarm ausgelöst",
    resolved:
      "Behoben: Claims fehlgeschlagen. Besteht die Bedingung bei der nächsten Prüfung noch, wird ein neuer Alarm ausgelöst.",
    resolvedBy: "Behoben von ada: ",
    note: "Paket fehlt in der Tabelle, Ticket 4711.",
  },
  {
    locale: "en",
    username: "Username",
    password: "Password",
    signIn: "Sign in",
    title: "Claims failed",
    takeNote: "Note (optional, kept in the audit log)",
    acknowledge: "Acknowledge",
    acknowledgedBadge: "Acknowledged",
    acknowledged: "Acknowledged: Claims failed. No reminders while it stays open.",
    snoozeHour: "Snooze 1 hour",
    snoozeDay: "Snooze 1 day",
    snoozed: /^Snoozed until .+: Claims failed\. No messages until then\.$/,
    snoozedLine: /Snoozed until .+ by sam; no messages until then\./,
    resolve: "Resolve…",
    resolveNote: "Why can it be closed? (kept in the audit log)",
    resolveNow: "Resolve now",
    reopens: "if the condition still holds at the next check, a new alert opens",
    resolved: "Resolved: Claims failed. If the condition still holds at the next check, a new alert opens.",
    resolvedBy: "Resolved by ada: ",
    note: "Package missing from the table, ticket 4712.",
  },
] as const;

type Words = (typeof LANGUAGES)[number];

async function signInAs(page: Page, words: Words, username: string) {
  await page.goto("/alerts");
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByLabel(words.username).fill(username);
  await page.getByLabel(words.password).fill(PASSWORD);
  await page.getByRole("button", { name: words.signIn }).click();
  await expect(page).toHaveURL(/\/alerts$/);
  await expect(page.getByTestId("signed-in-as")).toContainText(username);
}

/** The page passes the WCAG 2.1 AA rules, with the alert's forms as this role sees them. */
async function expectAccessible(page: Page) {
  const results = await new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"])
    .analyze();
  const found = results.violations.map(
    (v) => `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => n.target.join(" ")).join("\n  ")}`,
  );
  expect(found, `${page.url()}`).toEqual([]);
}

/** The open `failed_claims` alert once nobody has acted on it: the server checks every
 * second, and opens a fresh one after an admin resolved the last while the claim fails. */
async function freshAlert(page: Page) {
  const alert = page.locator('[data-testid="open-alert"][data-condition="failed_claims"]');
  await expect(async () => {
    await page.goto("/alerts");
    await expect(alert).toHaveAttribute("data-handling", "open", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  return alert;
}

test.beforeAll(async ({ request }, workerInfo) => {
  // The session names its package but no credits; re-driven by a CLI that does not know the
  // package, its one attempt fails.
  const order = `ord_e2e_alert_handling_${workerInfo.workerIndex}`;
  const body = checkoutCompleted(order, `cs_e2e_alert_handling_${workerInfo.workerIndex}`, "oncall@example.ch", {
    credits: null,
  });
  EVENT = body.id;
  await deliver(request, JSON.stringify(body));
  try {
    cli(["claims", "redrive", EVENT, "--reason", "e2e: make it fail"], {
      env: { CLAIMCHECK_MAX_ATTEMPTS: "1", CLAIMCHECK_PACKAGES: "" },
    });
  } catch {
    // The re-drive reports the failure with exit 1: that is the point.
  }
  expect(claimStatus(EVENT)).toBe("failed");
});

test.afterAll(async () => {
  // The package is known again: the claim is fulfilled and its alert resolves by itself,
  // so no alert of this spec stays open for the next.
  cli(["claims", "redrive", EVENT, "--reason", "e2e: the package is known"], {
    env: { CLAIMCHECK_PACKAGES: "thesis-40=40:4900:chf" },
  });
  expect(claimStatus(EVENT)).toBe("processed");
  await expect
    .poll(
      () =>
        JSON.parse(cli(["alerts", "list", "--json"])).filter(
          (a: { condition: string; open: boolean }) => a.open && a.condition === "failed_claims",
        ).length,
      { timeout: 15_000 },
    )
    .toBe(0);
});

for (const words of LANGUAGES) {
  test.describe(`a browser asking for ${words.locale}`, () => {
    test.use({ locale: words.locale });

    test("support acknowledges the open alert, then snoozes it for an hour", async ({ page }) => {
      await signInAs(page, words, USERS.support);
      const alert = await freshAlert(page);
      await expect(alert.getByTestId("resolve-alert")).toHaveCount(0);

      await alert.getByRole("button", { name: words.acknowledge, exact: true }).click();
      await expect(page.getByRole("status")).toHaveText(words.acknowledged);
      await expect(alert).toHaveAttribute("data-handling", "acknowledged");
      await expect(alert.getByTestId("alert-state")).toContainText(words.acknowledgedBadge);
      await expect(alert.getByTestId("alert-state")).toContainText("sam");
      // Acknowledged once is enough: the button is gone, the snoozes stay.
      await expect(alert.getByRole("button", { name: words.acknowledge, exact: true })).toHaveCount(0);

      await alert.getByLabel(words.takeNote).fill("Looking at the package table.");
      await alert.getByRole("button", { name: words.snoozeHour }).click();
      await expect(page.getByRole("status")).toHaveText(words.snoozed);
      await expect(alert).toHaveAttribute("data-handling", "snoozed");
      await expect(alert.getByTestId("alert-state")).toHaveText(words.snoozedLine);
      await expect(alert.getByTestId("handling-note")).toContainText("Looking at the package table.");
      await expectAccessible(page);
    });

    test("an admin resolves it with a note, and the failing claim opens a new alert", async ({ page }) => {
      await signInAs(page, words, USERS.admin);
      const alert = page.locator('[data-testid="open-alert"][data-condition="failed_claims"]');
      await expect(alert).toBeVisible();
      const question = alert.getByTestId("resolve-alert");
      // Nothing happens on the first click: it only asks, and says what follows.
      await question.locator("summary").click();
      await expect(question).toContainText(words.reopens);
      await expectAccessible(page);
      await question.getByLabel(words.resolveNote).fill(words.note);
      await question.getByRole("button", { name: words.resolveNow }).click();
      await expect(page.getByRole("status")).toHaveText(words.resolved);
      const past = page.getByTestId("past-alert").filter({ hasText: words.note });
      await expect(past.getByTestId("resolution")).toHaveText(`${words.resolvedBy}${words.note}`);

      // The claim still fails: the next check opens a new alert, nobody on it yet.
      await freshAlert(page);
    });

    test("a viewer sees who is on it and no button", async ({ page }) => {
      await signInAs(page, words, USERS.viewer);
      const alert = await freshAlert(page);
      await expect(alert.getByTestId("alert-state")).toBeVisible();
      await expect(alert.getByTestId("take-alert")).toHaveCount(0);
      await expect(alert.getByTestId("resolve-alert")).toHaveCount(0);
      await expect(alert.getByRole("button")).toHaveCount(0);
    });
  });
}
