# Shared by scripts/run and scripts/test: installs what a fresh machine lacks, skips what is
# there. Sourced, not run.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Builds live outside the clone so that every clone on this machine shares them.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/claimcheck/target}"
export PATH="$HOME/.cargo/bin:$ROOT/node_modules/.bin:$PATH"

# The versions that build together (see README, "Building").
WASM_BINDGEN_VERSION=0.2.129
CARGO_LEPTOS_VERSION=0.3.10

# Each step's name and seconds, for the table `step_times` prints at the end of a run.
STEP_TIMES="$(mktemp)"
STEP_NAME=""
STEP_START=0
RUN_START="$(date +%s)"

end_step() {
  if [ -n "$STEP_NAME" ]; then
    printf '%s\t%s\n' "$(( $(date +%s) - STEP_START ))" "$STEP_NAME" >> "$STEP_TIMES"
  fi
  STEP_NAME=""
}

step() {
  end_step
  STEP_NAME="$*"
  STEP_START="$(date +%s)"
  printf '\n==> %s\n' "$*"
}

# The time each step took, in the order they ran (a failed run's last step included).
step_times() {
  end_step
  printf '\n%8s  %s\n' "seconds" "step"
  while IFS="$(printf '\t')" read -r seconds name; do
    printf '%8s  %s\n' "$seconds" "$name"
  done < "$STEP_TIMES"
  printf '%8s  %s\n' "$(( $(date +%s) - RUN_START ))" "in all"
  rm -f "$STEP_TIMES"
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

ensure_build_tools() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    step "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
  if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
    step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 2 minutes, once)"
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --locked --force
  fi
  if ! cargo leptos --version 2>/dev/null | grep -q "$CARGO_LEPTOS_VERSION"; then
    step "installing cargo-leptos $CARGO_LEPTOS_VERSION (about 14 minutes, once)"
    cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked --force
  fi
  if [ ! -x "$ROOT/node_modules/.bin/wasm-opt" ]; then
    step "installing wasm-opt (npm binaryen)"
    (cd "$ROOT" && npm ci --no-audit --no-fund)
  fi
}

ensure_test_tools() {
  if [ ! -x /usr/bin/chromium ]; then
    step "installing Debian's Chromium for the browser tests"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
  fi
  if [ ! -d "$ROOT/end2end/node_modules/@playwright/test" ] || [ ! -d "$ROOT/end2end/node_modules/@axe-core/playwright" ]; then
    step "installing Playwright (no browser download)"
    (cd "$ROOT/end2end" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
  fi
}

# The release binary, carrying its dashboard: the front end first (wasm-opt -Oz, minified
# JS), then the server, which embeds and compresses what the first step wrote
# (server/build.rs). One `cargo leptos build --release` would build both at once, and the
# server could embed half-written files.
build_release() {
  step "release build: the dashboard (cargo leptos build --release --frontend-only)"
  cargo leptos build --release --frontend-only
  step "release build: the binary, carrying the dashboard (--server-only)"
  CLAIMCHECK_EMBED_SITE=target/site cargo leptos build --release --server-only
  ls -l target/site/pkg "$CARGO_TARGET_DIR/release/claimcheck"
}

# The tests create and drop their own databases on this server.
ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    return
  fi
  if ! command -v pg_ctlcluster >/dev/null; then
    step "installing PostgreSQL"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
  fi
  step "starting PostgreSQL"
  local version
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 60); do
    pg_isready -q -h 127.0.0.1 -p 5432 && return
    sleep 0.5
  done
  echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
  exit 1
}
