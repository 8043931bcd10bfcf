// Runs the dashboard tests against the real `claimcheck` binary on a fresh SQLite file, in
// Debian's Chromium (Playwright never downloads a browser here).
import { defineConfig } from "@playwright/test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const port = Number(process.env.E2E_PORT ?? 3210);
const baseURL = `http://127.0.0.1:${port}`;
const root = resolve(__dirname, "..");
const targetDir = process.env.CARGO_TARGET_DIR ?? join(root, "target");
const binary = process.env.CLAIMCHECK_BIN ?? join(targetDir, "debug", "claimcheck");
const dataDir = mkdtempSync(join(tmpdir(), "claimcheck-e2e-"));

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
  webServer: {
    command: `"${binary}" serve`,
    url: `${baseURL}/readyz`,
    reuseExistingServer: false,
    timeout: 60_000,
    stdout: "pipe",
    stderr: "pipe",
    env: {
      DATABASE_URL: `sqlite://${join(dataDir, "claimcheck.db")}`,
      CLAIMCHECK_BIND: `127.0.0.1:${port}`,
      LEPTOS_SITE_ROOT: join(root, "target", "site"),
      RUST_LOG: "info",
    },
  },
});
