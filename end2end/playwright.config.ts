// Runs the dashboard tests against the real `claimcheck` binary on a fresh SQLite file, with
// the Stripe API simulator, in Debian's Chromium (Playwright never downloads a browser here).
// The `seed` project prepares operators, orders and a stale claim before the tests run.
import { defineConfig } from "@playwright/test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const port = Number(process.env.E2E_PORT ?? 3210);
const simPort = port + 1;
const baseURL = `http://127.0.0.1:${port}`;
const root = resolve(__dirname, "..");
const targetDir = process.env.CARGO_TARGET_DIR ?? join(root, "target");
// CLAIMCHECK_BIN: a binary that carries its dashboard (the release build, ./scripts/test);
// otherwise the debug build serves the folder cargo-leptos wrote.
const binary = process.env.CLAIMCHECK_BIN ?? join(targetDir, "debug", "claimcheck");
const siteRoot = process.env.CLAIMCHECK_BIN ? {} : { LEPTOS_SITE_ROOT: join(root, "target", "site") };
// The config is loaded again in every test worker: keep the first process's folder.
const dataDir = process.env.E2E_DATA_DIR ?? mkdtempSync(join(tmpdir(), "claimcheck-e2e-"));
process.env.E2E_DATA_DIR = dataDir;

// Shared with the seed (tests/seed.setup.ts) through the environment.
process.env.E2E_BINARY = binary;
process.env.E2E_DATABASE_URL = `sqlite://${join(dataDir, "claimcheck.db")}`;
process.env.E2E_WEBHOOK_SECRET = "whsec_e2e_0123456789abcdef0123456789abcdef";
process.env.E2E_SIM_URL = `http://127.0.0.1:${simPort}`;

export default defineConfig({
  testDir: "./tests",
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: !!process.env.CI,
  retries: 0,
  reporter: [["list"]],
  use: {
    baseURL,
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    },
  },
  projects: [
    { name: "seed", testMatch: /seed\.setup\.ts/ },
    { name: "chromium", testMatch: /.*\.spec\.ts/, dependencies: ["seed"] },
  ],
  webServer: [
    {
      command: `"${binary}" stripe-sim --bind 127.0.0.1:${simPort}`,
      url: `${process.env.E2E_SIM_URL}/_sim/log`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      command: `"${binary}" serve`,
      url: `${baseURL}/readyz`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        DATABASE_URL: process.env.E2E_DATABASE_URL,
        CLAIMCHECK_BIND: `127.0.0.1:${port}`,
        ...siteRoot,
        STRIPE_WEBHOOK_SECRET: process.env.E2E_WEBHOOK_SECRET,
        STRIPE_API_KEY: "sk_test_e2e",
        STRIPE_API_BASE: process.env.E2E_SIM_URL,
        CLAIMCHECK_CHECKOUT_SUCCESS_URL: "https://shop.example/thanks",
        CLAIMCHECK_CHECKOUT_CANCEL_URL: "https://shop.example/cart",
        CLAIMCHECK_PACKAGES: "thesis-40=40:4900:chf",
        CLAIMCHECK_PLANS: "thesis-monthly=40:3900:chf:month,thesis-pro=100:8900:chf:month",
        // Claims wait for the seed (or a support operator) to work them.
        CLAIMCHECK_WORKERS: "0",
        // Reconcile runs are the specs' own ("Reconcile now"): a scheduled one could claim
        // the event a spec leaves undelivered before the spec's run looks for it.
        CLAIMCHECK_RECONCILE_INTERVAL: "0",
        // Alerts are checked every second, so a spec sees one open without waiting 30 s.
        CLAIMCHECK_ALERT_CHECK_INTERVAL: "1s",
        RUST_LOG: "info",
      },
    },
  ],
});
