//! Crash drills: `CLAIMCHECK_FAILPOINT=<name>` parks the process at that point, so a test can
//! kill it there with SIGKILL and prove that a restart recovers. Names: `after-lease` (claim
//! leased, nothing written), `after-ledger` (ledger written inside the fulfilment transaction,
//! claim not yet marked). Compiled only with the `failpoints` feature (the rehearsal build
//! asks for it): in production the variable is never read, so a stray one cannot park the
//! workers.

/// Parks forever if `name` is the armed failpoint; returns at once otherwise.
#[cfg(feature = "failpoints")]
pub(crate) async fn hit(name: &str) {
    use std::sync::OnceLock;

    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED
        .get_or_init(|| {
            std::env::var("CLAIMCHECK_FAILPOINT")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .as_deref();
    if armed == Some(name) {
        tracing::error!(
            failpoint = name,
            "failpoint {name} reached: parking until killed"
        );
        std::future::pending::<()>().await;
    }
}

/// Without the `failpoints` feature there is nothing to hit.
#[cfg(not(feature = "failpoints"))]
pub(crate) async fn hit(_name: &str) {}
