// The dashboard for the people who use it: the support walk (sign in, search a customer,
// open an order, re-drive a stale claim) in Swiss German and in English, chosen by the
// browser's language; the same walk by keyboard alone and on a phone's screen; and every
// page checked by axe-core against the WCAG 2.1 AA rules.
import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Locator, type Page } from "@playwright/test";
import { PASSWORD, SEEDED, USERS, checkoutCompleted, cli, deliver, makeStale } from "./support";

const shots = process.env.SCREENSHOTS_DIR;
async function shot(page: Page, name: string) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

/** What each language calls the things the walk touches (app/locales/<language>/). */
const LANGUAGES = [
  {
    locale: "de-CH",
    username: "Benutzername",
    password: "Passwort",
    signIn: "Anmelden",
    search: "Bestellungen, Kunden und Ereignisse suchen",
    nav: "Hauptnavigation",
    menu: "Menü",
    paid: "bezahlt",
    creditsGranted: "Gewährte Credits",
    fortyOfForty: "40 von 40",
    amount: "CHF 1’234.50",
    time: /^\d{2}\.\d{2}\.\d{4} \d{2}:\d{2}:\d{2} CES?T$/,
    age: /^vor \d+ (Sek|Min)\.$/,
    stale: "verwaist",
    processed: "verarbeitet",
    redriveLink: "Erneut ausführen…",
    reason: "Begründung (wird im Protokoll festgehalten)",
    redriveNow: "Jetzt erneut ausführen",
    redriveConfirm: (event: string) => `${event} erneut ausführen — bestätigen`,
    redriven: "Erneut ausgeführt: verarbeitet.",
  },
  {
    locale: "en",
    username: "Username",
    password: "Password",
    signIn: "Sign in",
    search: "Search orders, customers and events",
    nav: "Main",
    menu: "Menu",
    paid: "paid",
    creditsGranted: "Credits granted",
    fortyOfForty: "40 of 40",
    amount: "CHF 1,234.50",
    time: /^\d{1,2} [A-Z][a-z]{2} \d{4}, \d{2}:\d{2}:\d{2} CES?T$/,
    age: /^\d+ (s|min) ago$/,
    stale: "stale",
    processed: "processed",
    redriveLink: "Re-drive…",
    reason: "Why (kept in the audit log)",
    redriveNow: "Re-drive now",
    redriveConfirm: (event: string) => `Re-drive ${event} — confirm`,
    redriven: "Re-driven: processed.",
  },
] as const;

type Words = (typeof LANGUAGES)[number];

/** A customer of their own for one walk: an order of CHF 1234.50 paid and fulfilled, and a
 * second order whose claim a killed worker left stale. */
async function customer(request: import("@playwright/test").APIRequestContext, tag: string) {
  const email = `walk-${tag}@example.ch`;
  const paidOrder = `ord_walk_${tag}_paid`;
  const paid = checkoutCompleted(paidOrder, `cs_walk_${tag}_paid`, email, { amount: 123450 });
  await deliver(request, JSON.stringify(paid));
  cli(["claims", "redrive", paid.id, "--reason", "walk: fulfil the first order"]);
  const stale = checkoutCompleted(`ord_walk_${tag}_stale`, `cs_walk_${tag}_stale`, email);
  await deliver(request, JSON.stringify(stale));
  await makeStale(stale.id);
  return { email, paidOrder, staleEvent: stale.id };
}

async function signInAs(page: Page, words: Words, username: string) {
  await page.goto("/");
  await page.getByLabel(words.username).fill(username);
  await page.getByLabel(words.password).fill(PASSWORD);
  await page.getByRole("button", { name: words.signIn }).click();
  await expect(page.getByTestId("signed-in-as")).toContainText(username);
}

/** No horizontal scrolling of the page itself (a wide table may scroll inside its box). */
async function expectNoSideways(page: Page) {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow, `${page.url()} is wider than the screen`).toBeLessThanOrEqual(0);
}

async function walk(page: Page, request: import("@playwright/test").APIRequestContext, words: Words, tag: string, phone = false) {
  const { email, paidOrder, staleEvent } = await customer(request, tag);
  const check = async (name: string) => {
    if (phone) await expectNoSideways(page);
    await shot(page, `${name}-${words.locale}${phone ? "-phone" : ""}`);
  };
  await signInAs(page, words, USERS.support);

  // Search the customer from the header, by the e-mail as they spell it: their page shows
  // the balance and the payment that is stuck, although it never became an order.
  const box = page.getByRole("searchbox", { name: words.search });
  await box.fill(email.toUpperCase());
  await box.press("Enter");
  await expect(page).toHaveURL(/\/customers\//);
  await expect(page.getByTestId("customer-balance")).toHaveText("40");
  const waiting = page.getByTestId("customer-waiting").locator(`tr[data-event="${staleEvent}"]`);
  await expect(waiting.locator('[data-state="stale"]')).toHaveText(words.stale);
  await check("customer");

  // Open the order: its money the locale's way, next to the credits.
  // (The order's id is also a link in the credit history: take the order's own line.)
  await page.locator(`article[data-order="${paidOrder}"]`).getByRole("link", { name: paidOrder }).click();
  await expect(page.getByTestId("order-status")).toHaveText(words.paid);
  // Stripe's payment status in the reader's words too, not as Stripe spells it.
  await expect(page.getByTestId("order-payment")).toHaveText(words.paid);
  await expect(page.getByText(words.creditsGranted, { exact: true })).toBeVisible();
  await expect(page.getByTestId("credits-granted")).toHaveText(words.fortyOfForty);
  await expect(page.getByTestId("order-paid")).toHaveText(words.amount);
  await expect(page.getByTestId("order-created")).toHaveText(words.time);
  await check("order");

  // The stale claim, from the Claims page, re-driven. On the phone the menu is folded
  // behind its button, and the header leaves the screen to the page.
  if (phone) {
    await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
    const nav = page.getByRole("navigation", { name: words.nav });
    await expect(nav).toBeHidden();
    const header = await page.locator("header.topbar").boundingBox();
    expect(header!.height, "the folded header's height").toBeLessThan(844 / 4);
    const button = page.getByRole("button", { name: words.menu });
    await expect(button).toHaveAttribute("aria-expanded", "false");
    await button.click();
    await expect(button).toHaveAttribute("aria-expanded", "true");
  }
  await page.getByRole("navigation", { name: words.nav }).getByRole("link", { name: "Claims" }).click();
  const row = page.locator(`tr[data-event="${staleEvent}"]`);
  await expect(row.locator("td.age")).toHaveText(words.age);
  await check("claims");

  // The stuck payment by the start of its order id, as the shop's e-mail quoted it: the
  // one claim that names it opens.
  await box.fill(`ord_walk_${tag}_st`);
  await box.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/events/${staleEvent}$`));
  await expect(page.getByTestId("claim-state")).toHaveText(words.stale);
  await check("event");
  await page.getByRole("link", { name: words.redriveLink }).click();
  await page.getByLabel(words.reason).fill("worker died during the walk");
  await check("redrive");
  // Re-driving asks first: the button opens the question, the one under it sends.
  await page.locator("summary", { hasText: words.redriveNow }).click();
  await page.getByRole("button", { name: words.redriveConfirm(staleEvent) }).click();
  await expect(page.getByRole("status")).toHaveText(words.redriven);
  await expect(page.getByTestId("claim-state")).toHaveText(words.processed);
  await check("redriven");

  // The customer now holds both orders' credits.
  await box.fill(email);
  await box.press("Enter");
  await expect(page.getByTestId("customer-balance")).toHaveText("80");
}

for (const words of LANGUAGES) {
  test.describe(`a browser asking for ${words.locale}`, () => {
    test.use({ locale: words.locale });

    test("support signs in, finds a customer, opens the order and re-drives a stale claim", async ({ page, request }) => {
      await walk(page, request, words, words.locale.toLowerCase().replace("-", ""));
    });

    test("the same walk on a 390 px phone screen, without sideways scrolling", async ({ page, request }) => {
      await page.setViewportSize({ width: 390, height: 844 });
      await walk(page, request, words, `${words.locale.toLowerCase().replace("-", "")}phone`, true);
    });
  });
}

/** Presses Tab until `target` has the focus, as a keyboard user would; fails if it never
 * comes in the focus order. The focused control shows a visible ring. */
async function tabTo(page: Page, target: Locator, most = 40) {
  for (let i = 0; i < most; i++) {
    await page.keyboard.press("Tab");
    if (await target.evaluate((el) => el === document.activeElement)) {
      await expect(target).toHaveCSS("outline-style", "solid");
      return;
    }
  }
  throw new Error(`${target} is not reachable with Tab`);
}

test("sign-in and re-drive by keyboard alone, with the result announced", async ({ page, request }) => {
  const words = LANGUAGES[1];
  const stale = checkoutCompleted("ord_walk_keyboard", "cs_walk_keyboard", "keys-only@example.ch");
  await deliver(request, JSON.stringify(stale));
  await makeStale(stale.id);

  await page.goto(`/events/${stale.id}`);
  await expect(page).toHaveURL(/\/login\?next=/);
  await tabTo(page, page.getByLabel(words.username));
  await page.keyboard.type(USERS.support);
  await tabTo(page, page.getByLabel(words.password));
  await page.keyboard.type(PASSWORD);
  await tabTo(page, page.getByRole("button", { name: words.signIn }));
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/events/${stale.id}$`));
  await expect(page.getByTestId("claim-state")).toHaveText(words.stale);

  await tabTo(page, page.getByRole("link", { name: words.redriveLink }));
  await page.keyboard.press("Enter");
  await tabTo(page, page.getByLabel(words.reason));
  await page.keyboard.type("re-driven without a mouse");
  await tabTo(page, page.locator("summary", { hasText: words.redriveNow }));
  await page.keyboard.press("Enter");
  await tabTo(page, page.getByRole("button", { name: words.redriveConfirm(stale.id) }));
  await page.keyboard.press("Enter");
  // A live region: screen readers read the result out.
  const result = page.getByRole("status");
  await expect(result).toHaveText(words.redriven);
  await expect(result).toHaveAttribute("aria-live", /polite|assertive/);
  // The notice takes the focus once the page is live: read first, Tab goes on from it.
  await expect(page.locator("#notices")).toBeFocused();
  await expect(page.getByTestId("claim-state")).toHaveText(words.processed);
});

/** Every page of the dashboard, as an admin sees it (admins see every control). */
const PAGES = [
  "/",
  "/claims?status=stale",
  "/claims?status=failed",
  "/claims?status=resolved",
  "/claims/redrive?status=stale&preview=1",
  "/events",
  "/events?source=reconcile",
  `/events/${SEEDED.paidEvent}`,
  `/events/${SEEDED.paidEvent}/redrive`,
  "/orders",
  `/orders?q=${SEEDED.keyedEmail}`,
  `/customers/${SEEDED.keyedEmail}`,
  `/orders/${SEEDED.keyedOrder}`,
  `/orders/${SEEDED.keyedOrder}/refund`,
  `/search?q=ord_that_never_was`,
  "/search?q=customer.discount.created",
  "/requests?status=indeterminate",
  "/requests?status=succeeded",
  "/audit",
  "/alerts",
  "/reconcile",
  "/operators",
  "/account",
  "/account/2fa",
  "/no/such/page",
];

async function expectAccessible(page: Page) {
  const results = await new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"])
    .analyze();
  const found = results.violations.map(
    (v) => `${v.id} (${v.impact}): ${v.help}\n  ${v.nodes.map((n) => n.target.join(" ")).join("\n  ")}`,
  );
  expect(found, `${page.url()}`).toEqual([]);
}

for (const words of LANGUAGES) {
  test.describe(`axe-core in ${words.locale}`, () => {
    test.use({ locale: words.locale });

    test("every page passes the WCAG 2.1 AA rules with zero violations", async ({ page }) => {
      test.setTimeout(120_000);
      await page.goto("/login");
      await expectAccessible(page);
      await signInAs(page, words, USERS.admin);
      for (const path of PAGES) {
        await page.goto(path);
        await expect(page.locator("main")).toBeAttached();
        await expectAccessible(page);
      }
    });
  });
}
