//! Wall-clock time in the one unit the database stores: unix epoch milliseconds.

/// Milliseconds since the unix epoch, UTC.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
