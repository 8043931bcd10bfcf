//! Crash drills: `CLAIMCHECK_FAILPOINT=<name>` parks the process at that point, so a test can
//! kill it there with SIGKILL and prove that a restart recovers. Off unless the variable is
//! set; names: `after-lease` (claim leased, nothing written), `after-ledger` (ledger written
//! inside the fulfilment transaction, claim not yet marked).

use std::sync::OnceLock;

fn armed() -> Option<&'static str> {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            std::env::var("CLAIMCHECK_FAILPOINT")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .as_deref()
}

/// Parks forever if `name` is the armed failpoint; returns at once otherwise.
pub(crate) async fn hit(name: &str) {
    if armed() == Some(name) {
        tracing::error!(
            failpoint = name,
            "failpoint {name} reached: parking until killed"
        );
        std::future::pending::<()>().await;
    }
}
