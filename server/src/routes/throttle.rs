//! Failed sign-ins, counted per (username, client address) and per client address in a
//! sliding window, in bounded memory. Keyed by the pair, not the username alone, so a
//! stranger's guesses never lock an operator out of their own address. Wrong second-factor
//! codes count per account as well: whoever knows the password gets a handful of codes in the
//! window, however often the password is given again in between, and they are forgotten only
//! by a complete sign-in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Usernames longer than this are refused before they reach the throttle.
pub const MAX_USERNAME: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    UserAt(String, IpAddr),
    Address(IpAddr),
    SecondFactor(String),
}

/// One network: an IPv6 client holds a whole /64, so its addresses count as one. An IPv4
/// client seen on a dual-stack listener (`::ffff:a.b.c.d`) is its IPv4 address, not the /64
/// every such client shares.
fn network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[4..].fill(0);
            IpAddr::V6(segments.into())
        }
    }
}

pub struct LoginThrottle {
    window: Duration,
    per_user_address: usize,
    per_address: usize,
    /// At most this many keys are kept; past it the expired ones go, then the stalest.
    max_keys: usize,
    failures: Mutex<HashMap<Key, VecDeque<Instant>>>,
}

impl LoginThrottle {
    pub fn new(window: Duration, per_user_address: usize, per_address: usize) -> LoginThrottle {
        LoginThrottle {
            window,
            per_user_address,
            per_address,
            max_keys: 10_000,
            failures: Mutex::new(HashMap::new()),
        }
    }

    #[cfg(test)]
    fn with_max_keys(mut self, max_keys: usize) -> LoginThrottle {
        self.max_keys = max_keys;
        self
    }

    fn name(username: &str) -> String {
        username
            .chars()
            .take(MAX_USERNAME)
            .collect::<String>()
            .to_lowercase()
    }

    fn keys(&self, username: &str, ip: IpAddr) -> [(Key, usize); 2] {
        let ip = network(ip);
        [
            (Key::UserAt(Self::name(username), ip), self.per_user_address),
            (Key::Address(ip), self.per_address),
        ]
    }

    fn second_factor_keys(&self, username: &str, ip: IpAddr) -> [(Key, usize); 2] {
        [
            (
                Key::SecondFactor(Self::name(username)),
                self.per_user_address,
            ),
            (Key::Address(network(ip)), self.per_address),
        ]
    }

    /// Counts a password attempt as a failure in advance, unless either key has used up its
    /// failures (then: seconds to wait, nothing counted). One locked step, so concurrent
    /// guesses cannot all pass the check before the first failure is recorded.
    pub fn attempt(&self, username: &str, ip: IpAddr) -> Option<u64> {
        self.count(self.keys(username, ip))
    }

    /// The same for a second-factor code: counted against the account (whatever the
    /// address and however often the password was right in between) and the address.
    pub fn second_factor_attempt(&self, username: &str, ip: IpAddr) -> Option<u64> {
        self.count(self.second_factor_keys(username, ip))
    }

    fn count(&self, keys: [(Key, usize); 2]) -> Option<u64> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait = None;
        for (key, limit) in &keys {
            let Some(times) = failures.get_mut(key) else {
                continue;
            };
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) > self.window)
            {
                times.pop_front();
            }
            if times.len() >= *limit
                && let Some(oldest) = times.front()
            {
                let left = self.window.saturating_sub(now.duration_since(*oldest));
                wait = Some(wait.unwrap_or(0).max(left.as_secs().max(1)));
            }
        }
        if wait.is_none() {
            for (key, _) in keys {
                failures.entry(key).or_default().push_back(now);
            }
            if failures.len() > self.max_keys {
                self.shrink(&mut failures, now);
            }
        }
        wait
    }

    /// Drops the keys with nothing in the window; if that is not enough (many addresses at
    /// once), the ones whose last failure is oldest.
    fn shrink(&self, failures: &mut HashMap<Key, VecDeque<Instant>>, now: Instant) {
        failures.retain(|_, times| {
            times
                .back()
                .is_some_and(|t| now.duration_since(*t) <= self.window)
        });
        let excess = failures.len().saturating_sub(self.max_keys * 9 / 10);
        if excess > 0 {
            let mut by_age: Vec<(Instant, Key)> = failures
                .iter()
                .filter_map(|(k, t)| t.back().map(|last| (*last, k.clone())))
                .collect();
            by_age.sort_by_key(|(last, _)| *last);
            for (_, key) in by_age.into_iter().take(excess) {
                failures.remove(&key);
            }
        }
    }

    /// The password was right: the pair's failures are forgotten and this attempt is taken
    /// off the address's count. The account's wrong codes stay until [`Self::signed_in`].
    pub fn succeeded(&self, username: &str, ip: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let [(pair, _), (address, _)] = self.keys(username, ip);
        failures.remove(&pair);
        if let Some(times) = failures.get_mut(&address) {
            times.pop_back();
        }
    }

    /// The second factor was right too: the sign-in is complete, the account's wrong codes
    /// are forgotten and this code is taken off the address's count.
    pub fn signed_in(&self, username: &str, ip: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let [(account, _), (address, _)] = self.second_factor_keys(username, ip);
        failures.remove(&account);
        if let Some(times) = failures.get_mut(&address) {
            times.pop_back();
        }
    }

    /// How many keys are held (memory stays bounded by `max_keys`).
    #[cfg(test)]
    fn keys_held(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_pair_is_blocked_after_its_limit_and_forgotten_on_success() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 3, 10);
        let here = ip("10.0.0.1");
        for _ in 0..3 {
            assert_eq!(throttle.attempt("anna", here), None);
        }
        assert!(throttle.attempt("Anna", here).is_some());
        assert_eq!(throttle.attempt("ben", here), None, "another user");
        throttle.succeeded("anna", here);
        assert_eq!(throttle.attempt("anna", here), None);
    }

    #[test]
    fn a_strangers_failures_do_not_lock_the_operator_out_of_their_own_address() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 30);
        let stranger = ip("203.0.113.9");
        for _ in 0..5 {
            assert_eq!(throttle.attempt("admin", stranger), None);
        }
        assert!(throttle.attempt("admin", stranger).is_some());
        assert_eq!(throttle.attempt("admin", ip("198.51.100.7")), None);
    }

    #[test]
    fn an_address_trying_many_usernames_is_blocked_and_ipv6_counts_per_network() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 3);
        for name in ["a", "b", "c"] {
            assert_eq!(throttle.attempt(name, ip("2001:db8:1:2::1")), None);
        }
        assert!(
            throttle.attempt("d", ip("2001:db8:1:2::ffff")).is_some(),
            "the same /64"
        );
        assert_eq!(throttle.attempt("d", ip("2001:db8:1:3::1")), None);
    }

    #[test]
    fn wrong_codes_count_per_account_whatever_the_passwords_in_between() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 30);
        let here = ip("198.51.100.7");
        let mut codes = 0;
        // Rounds of "right password, then wrong codes": the password does not reset them.
        'rounds: for _ in 0..3 {
            assert_eq!(throttle.attempt("anna", here), None);
            throttle.succeeded("anna", here);
            for _ in 0..4 {
                if throttle.second_factor_attempt("anna", here).is_some() {
                    break 'rounds;
                }
                codes += 1;
            }
        }
        assert_eq!(codes, 5, "five wrong codes, then the account waits");
        // Another address does not help either.
        assert!(
            throttle
                .second_factor_attempt("Anna", ip("203.0.113.50"))
                .is_some()
        );
        // A complete sign-in forgets them.
        throttle.signed_in("anna", here);
        assert_eq!(throttle.second_factor_attempt("anna", here), None);
    }

    #[test]
    fn ipv4_clients_on_a_dual_stack_listener_are_keyed_by_their_own_address() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 5);
        for _ in 0..5 {
            assert_eq!(throttle.attempt("anna", ip("::ffff:203.0.113.9")), None);
        }
        assert!(throttle.attempt("ben", ip("::ffff:203.0.113.9")).is_some());
        assert!(
            throttle.attempt("ben", ip("203.0.113.9")).is_some(),
            "the same client"
        );
        assert_eq!(throttle.attempt("anna", ip("::ffff:198.51.100.7")), None);
    }

    #[test]
    fn memory_stays_bounded_however_many_addresses_and_names() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 30).with_max_keys(1_000);
        for i in 0..20_000u32 {
            let addr = IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            let name = format!("user{i}-{}", "x".repeat(1_000));
            throttle.attempt(&name, addr);
        }
        assert!(throttle.keys_held() <= 1_000, "{}", throttle.keys_held());
    }
}
