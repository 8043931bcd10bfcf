//! systemd's notify protocol, for `Type=notify` units: `READY=1` once the schema is current
//! and the listener bound, `STOPPING=1` at the signal, and `WATCHDOG=1` at half the interval
//! while the unit sets `WatchdogSec`. Without `NOTIFY_SOCKET` (not under systemd) nothing is
//! sent.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio::sync::watch;

fn notify(states: &[NotifyState<'_>]) {
    if let Err(error) = sd_notify::notify(false, states) {
        tracing::warn!(%error, "cannot notify systemd");
    }
}

/// Migrated and listening.
pub fn ready() {
    notify(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// The signal came: requests are answered for the grace period, then the process stops.
pub fn stopping() {
    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// The watchdog interval systemd asked this process for: `WATCHDOG_USEC`, unless
/// `WATCHDOG_PID` names another process (as libsystemd reads them; the crate's own check
/// also wants `WATCHDOG_PID` set, which systemd does not promise).
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Tells the watchdog this process lives, at half the interval systemd asked for, until
/// `stopped`; returns at once when no watchdog is set.
pub async fn feed_watchdog(mut stopped: watch::Receiver<bool>) {
    let Some(interval) = watchdog_interval() else {
        return;
    };
    let every = interval / 2;
    tracing::info!(
        every_ms = every.as_millis() as u64,
        "feeding systemd's watchdog"
    );
    loop {
        notify(&[NotifyState::Watchdog]);
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stopped.wait_for(|stopped| *stopped) => return,
        }
    }
}
