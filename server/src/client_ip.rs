//! The client's address: the peer's, unless the peer is a trusted reverse proxy
//! (`CLAIMCHECK_TRUSTED_PROXIES`), then the nearest address in `X-Forwarded-For` (or
//! `Forwarded: for=`) that is not one of the trusted proxies. Headers from any other peer are
//! ignored: anyone can write them.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The networks whose forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// Who is asking: see the module's description.
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let mut chain = forwarded_for(headers);
        if chain.is_empty() {
            chain = x_forwarded_for(headers);
        }
        // Each proxy appends the address it saw: walk back from the nearest.
        match chain.iter().rev().find(|ip| !self.trusts(**ip)) {
            Some(client) => *client,
            None => chain.first().copied().unwrap_or(peer),
        }
    }
}

impl FromStr for TrustedProxies {
    type Err = String;

    /// `10.0.0.0/8, 192.168.1.5, ::1`: networks or single addresses, comma-separated.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|part| {
                part.parse::<IpNet>()
                    .or_else(|_| part.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("'{part}' is not an address or a network like 10.0.0.0/8"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:567`, `[2001:db8::1]:567`, `2001:db8::1`.
fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim().trim_matches('"');
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    text.strip_prefix('[')
        .and_then(|rest| rest.split(']').next())
        .and_then(|inner| inner.parse().ok())
}

/// Every address in every `X-Forwarded-For`, in order; an unreadable entry ends the chain
/// there (what came before it cannot be placed).
fn x_forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    let mut chain = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            return Vec::new();
        };
        for part in text.split(',') {
            match parse_node(part) {
                Some(ip) => chain.push(ip),
                None => chain.clear(),
            }
        }
    }
    chain
}

/// The `for=` addresses of RFC 7239 `Forwarded` headers, in order.
fn forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    let mut chain = Vec::new();
    for value in headers.get_all("forwarded") {
        let Ok(text) = value.to_str() else {
            return Vec::new();
        };
        for element in text.split(',') {
            let node = element.split(';').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                name.trim().eq_ignore_ascii_case("for").then_some(value)
            });
            match node.and_then(parse_node) {
                Some(ip) => chain.push(ip),
                None => chain.clear(),
            }
        }
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let trusted: TrustedProxies = "10.0.0.0/8".parse().unwrap();
        let spoofed = headers(&[("x-forwarded-for", "1.1.1.1"), ("forwarded", "for=2.2.2.2")]);
        assert_eq!(
            trusted.client_ip(ip("203.0.113.5"), &spoofed),
            ip("203.0.113.5")
        );
        let nobody = TrustedProxies::default();
        assert_eq!(nobody.client_ip(ip("10.0.0.1"), &spoofed), ip("10.0.0.1"));
    }

    #[test]
    fn behind_trusted_proxies_the_nearest_untrusted_address_is_the_client() {
        let trusted: TrustedProxies = "10.0.0.0/8, 192.168.1.5".parse().unwrap();
        // The client put a lie first; the proxy appended what it saw.
        let chain = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.1.1")]);
        assert_eq!(
            trusted.client_ip(ip("192.168.1.5"), &chain),
            ip("198.51.100.7")
        );
        let two = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.8:4711"),
        ]);
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &two), ip("198.51.100.8"));
        let rfc = headers(&[(
            "forwarded",
            r#"for="[2001:db8:cafe::17]:4711";proto=https, for=10.3.3.3"#,
        )]);
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &rfc),
            ip("2001:db8:cafe::17")
        );
        // No header: the proxy itself.
        assert_eq!(
            trusted.client_ip(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
        // Garbage after the client's entry: the proxy's own view wins.
        let junk = headers(&[("x-forwarded-for", "198.51.100.9, not-an-ip")]);
        assert_eq!(trusted.client_ip(ip("10.0.0.2"), &junk), ip("10.0.0.2"));
    }

    #[test]
    fn trusted_proxies_are_parsed_or_refused() {
        assert!(
            "10.0.0.0/8,::1, 192.168.0.1"
                .parse::<TrustedProxies>()
                .is_ok()
        );
        assert_eq!("".parse::<TrustedProxies>(), Ok(TrustedProxies::default()));
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
        assert!("proxy.local".parse::<TrustedProxies>().is_err());
    }
}
