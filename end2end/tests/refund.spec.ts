// An admin refunds half an order from its refund page, in Swiss German and in English:
// "Half" fills the amount, the preview says what it does to the credits before anything is
// sent, the refund asks to be confirmed, and the order's ledger shows what it did. An amount
// too large comes back in the form, in money, with what was typed kept.
import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { PASSWORD, USERS, checkoutCompleted, cli, deliver } from "./support";

/** What each language calls the things the refund touches (app/locales/<language>/). */
const LANGUAGES = [
  {
    locale: "de-CH",
    username: "Benutzername",
    password: "Passwort",
    signIn: "Anmelden",
    refundLink: "Erstatten…",
    amount: "Betrag in CHF",
    half: "Hälfte",
    reason: "Begründung (wird im Protokoll festgehalten)",
    previewHalf: "−20 Credits, Guthaben 40 → 20",
    previewTen: "−8 Credits, Guthaben 40 → 32",
    openConfirm: "Erstatten…",
    confirmHalf: "CHF 24.50 erstatten — bestätigen",
    confirmUnknown: "Den Betrag oben erstatten — bestätigen",
    refunded: "CHF 24.50 zurückerstattet (re_",
    status: "teilweise erstattet",
    twentyOfForty: "20 von 40",
    ledger: "Credit-Journal",
    ledgerRefund: "Rückerstattung von CHF 24.50",
    tooMuch: "CHF 60.00 ist mehr als die noch erstattbaren CHF 49.00.",
    sentBack: "Nichts wurde erstattet: Korrigieren Sie das Formular unten.",
  },
  {
    locale: "en",
    username: "Username",
    password: "Password",
    signIn: "Sign in",
    refundLink: "Refund…",
    amount: "Amount in CHF",
    half: "Half",
    reason: "Why (kept in the audit log)",
    previewHalf: "−20 credits, balance 40 → 20",
    previewTen: "−8 credits, balance 40 → 32",
    openConfirm: "Refund…",
    confirmHalf: "Refund CHF 24.50 — confirm",
    confirmUnknown: "Refund the amount above — confirm",
    refunded: "Refunded CHF 24.50 (re_",
    status: "partially refunded",
    twentyOfForty: "20 of 40",
    ledger: "Credit ledger",
    ledgerRefund: "refund of CHF 24.50",
    tooMuch: "CHF 60.00 is more than the CHF 49.00 still refundable.",
    sentBack: "Nothing was refunded: correct the form below.",
  },
] as const;

type Words = (typeof LANGUAGES)[number];

/** A customer of their own with one order of CHF 49.00 for 40 credits, made as a shop makes
 * it: through the order API (which opens its Checkout Session at the Stripe simulator), paid
 * through the signed webhook, fulfilled with `claims redrive`. */
async function paidOrder(request: APIRequestContext, tag: string) {
  const order = `ord_refund_${tag}`;
  const email = `refund-${tag}@example.ch`;
  const token = JSON.parse(cli(["tokens", "create", "--name", `refund ${tag}`, "--json"])).token;
  const created = await request.post("/api/orders", {
    headers: { authorization: `Bearer ${token}` },
    data: { order_id: order, package: "thesis-40", customer_email: email },
  });
  expect(created.status()).toBe(201);
  const { checkout_session_id } = await created.json();
  const paid = checkoutCompleted(order, checkout_session_id, email);
  await deliver(request, JSON.stringify(paid));
  cli(["claims", "redrive", paid.id, "--reason", "refund spec: fulfil the order"]);
  return order;
}

async function signInAs(page: Page, words: Words, path: string) {
  await page.goto(path);
  await page.getByLabel(words.username).fill(USERS.admin);
  await page.getByLabel(words.password).fill(PASSWORD);
  await page.getByRole("button", { name: words.signIn }).click();
  await expect(page.getByTestId("signed-in-as")).toContainText(USERS.admin);
}

for (const words of LANGUAGES) {
  const tag = words.locale.toLowerCase().replace("-", "");

  test.describe(`refunds in ${words.locale}`, () => {
    test.use({ locale: words.locale });

    test("an admin refunds half an order: the preview first, then a confirmation, then the ledger", async ({ page, request }) => {
      const order = await paidOrder(request, `${tag}_half`);
      await signInAs(page, words, `/orders/${order}`);
      await page.getByRole("link", { name: words.refundLink }).click();
      await expect(page).toHaveURL(new RegExp(`/orders/${order}/refund$`));

      // "Half" fills the amount (in place once hydrated, by a link before) and the preview
      // says what the refund will take before anything is sent.
      await page.getByRole("link", { name: words.half, exact: true }).click();
      await expect(page.getByLabel(words.amount)).toHaveValue("24.50");
      const preview = page.getByTestId("refund-preview");
      await expect(preview).toHaveText(words.previewHalf);
      await page.getByLabel(words.reason).fill("half the runs were unused");

      // Nothing is sent until the confirmation that names the amount.
      const confirm = page.getByRole("button", { name: words.confirmHalf });
      await expect(confirm).toBeHidden();
      await page.locator("summary", { hasText: words.openConfirm }).click();
      await confirm.click();

      await expect(page).toHaveURL(new RegExp(`/orders/${order}$`));
      await expect(page.getByRole("status")).toContainText(words.refunded);
      await expect(page.getByTestId("order-status")).toHaveText(words.status);
      await expect(page.getByTestId("credits-granted")).toHaveText(words.twentyOfForty);
      const ledger = page.getByRole("table", { name: words.ledger });
      await expect(ledger).toContainText(words.ledgerRefund);
      await expect(ledger.getByRole("row").filter({ hasText: `refund:${order}:2450` })).toContainText("-20");
    });

    test("an amount too large comes back in the form, in money, with the input kept", async ({ page, request }) => {
      const order = await paidOrder(request, `${tag}_much`);
      await signInAs(page, words, `/orders/${order}/refund`);
      // Hydrated, the preview follows the typing.
      await expect(page.locator("main")).toHaveAttribute("data-hydrated", "true");
      const amount = page.getByLabel(words.amount);
      await amount.fill("10");
      await expect(page.getByTestId("refund-preview")).toHaveText(words.previewTen);
      await amount.fill("60");
      await expect(page.getByTestId("refund-preview")).toHaveText(words.tooMuch);

      await page.getByLabel(words.reason).fill("customer asked for everything & more");
      await page.locator("summary", { hasText: words.openConfirm }).click();
      await page.getByRole("button", { name: words.confirmUnknown }).click();

      // Back on the refund page, not the order's: the error next to the field, in CHF.
      await expect(page).toHaveURL(new RegExp(`/orders/${order}/refund$`));
      await expect(page.getByRole("alert")).toHaveText(words.sentBack);
      await expect(page.locator("#amount-error")).toHaveText(words.tooMuch);
      await expect(amount).toHaveValue("60");
      await expect(amount).toHaveAttribute("aria-invalid", "true");
      await expect(page.getByLabel(words.reason)).toHaveValue("customer asked for everything & more");

      // Nothing went to Stripe.
      const log = await (await page.request.get(`${process.env.E2E_SIM_URL}/_sim/log`)).json();
      const asked = log.filter((e: { idempotency_key: string | null }) => e.idempotency_key?.startsWith(`refund:${order}:`));
      expect(asked).toHaveLength(0);
    });
  });
}
