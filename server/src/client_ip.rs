//! The client's address: the peer's, unless the peer is a trusted reverse proxy
//! (`CLAIMCHECK_TRUSTED_PROXIES`); then the right-most address in the one header the proxy
//! is configured to set (`CLAIMCHECK_CLIENT_IP_HEADER`) that is not itself a trusted proxy.
//! Exactly one header is read and there is no fallback to another: a proxy that sets
//! `X-Forwarded-For` passes a client's own `Forwarded` through untouched, so reading a second
//! header would let the client pick its address. Every address is canonicalised first, so an
//! IPv4 client on a dual-stack listener (`::ffff:a.b.c.d`) is the IPv4 address it is.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The networks whose forwarding header is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
                    .or_else(|_| {
                        part.parse::<IpAddr>()
                            .map(|ip| IpNet::from(ip.to_canonical()))
                    })
                    .map_err(|_| format!("'{part}' is not an address or a network like 10.0.0.0/8"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }
}

/// The header a trusted proxy sets to name the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientIpHeader {
    /// `X-Forwarded-For: client, proxy1, …` (nginx, HAProxy, Traefik, Caddy, most balancers).
    #[default]
    #[value(name = "x-forwarded-for")]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for=proxy1`.
    #[value(name = "forwarded")]
    Forwarded,
    /// `X-Real-IP: client` (nginx's `proxy_set_header X-Real-IP $remote_addr`).
    #[value(name = "x-real-ip")]
    XRealIp,
}

impl ClientIpHeader {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientIpHeader::XForwardedFor => "x-forwarded-for",
            ClientIpHeader::Forwarded => "forwarded",
            ClientIpHeader::XRealIp => "x-real-ip",
        }
    }

    /// The entries of every occurrence of this header, in the order they were added (`None`
    /// for one that is not an address). A header that is not text is one unreadable entry.
    fn entries(self, headers: &HeaderMap) -> Vec<Option<IpAddr>> {
        let mut entries = Vec::new();
        for value in headers.get_all(self.as_str()) {
            let Ok(text) = value.to_str() else {
                entries.push(None);
                continue;
            };
            for element in text.split(',') {
                let node = match self {
                    ClientIpHeader::XForwardedFor | ClientIpHeader::XRealIp => Some(element),
                    ClientIpHeader::Forwarded => element.split(';').find_map(|pair| {
                        let (name, value) = pair.split_once('=')?;
                        name.trim().eq_ignore_ascii_case("for").then_some(value)
                    }),
                };
                entries.push(node.and_then(parse_node));
            }
        }
        entries
    }
}

impl fmt::Display for ClientIpHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the dashboard tells who is asking: the trusted proxies and the header they set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientAddress {
    pub trusted: TrustedProxies,
    pub header: ClientIpHeader,
}

impl ClientAddress {
    /// Who is asking: see the module's description.
    pub fn of(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusted.trusts(peer) {
            return peer;
        }
        // Each proxy appends the address it saw: walk back from the nearest, past our own
        // proxies, to the first address none of them is. An entry that cannot be read there
        // means the chain cannot be placed: the nearest trusted hop is all that is known.
        let mut nearest = peer;
        for entry in self.header.entries(headers).into_iter().rev() {
            match entry.map(|ip| ip.to_canonical()) {
                Some(ip) if self.trusted.trusts(ip) => nearest = ip,
                Some(ip) => return ip,
                None => return nearest,
            }
        }
        nearest
    }
}

/// An address as proxies write it: `1.2.3.4`, `1.2.3.4:567`, `[2001:db8::1]:567`, `2001:db8::1`,
/// quoted or not.
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

    fn behind(trusted: &str, header: ClientIpHeader) -> ClientAddress {
        ClientAddress {
            trusted: trusted.parse().unwrap(),
            header,
        }
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let spoofed = headers(&[("x-forwarded-for", "1.1.1.1"), ("forwarded", "for=2.2.2.2")]);
        let trusted = behind("10.0.0.0/8", ClientIpHeader::XForwardedFor);
        assert_eq!(trusted.of(ip("203.0.113.5"), &spoofed), ip("203.0.113.5"));
        let nobody = ClientAddress::default();
        assert_eq!(nobody.of(ip("10.0.0.1"), &spoofed), ip("10.0.0.1"));
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_address_is_the_client() {
        let trusted = behind("10.0.0.0/8, 192.168.1.5", ClientIpHeader::XForwardedFor);
        // The client put a lie first; the proxy appended what it saw.
        let chain = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.1.1")]);
        assert_eq!(trusted.of(ip("192.168.1.5"), &chain), ip("198.51.100.7"));
        let two = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.8:4711"),
        ]);
        assert_eq!(trusted.of(ip("10.0.0.2"), &two), ip("198.51.100.8"));
        // No header: the proxy itself.
        assert_eq!(
            trusted.of(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
        // Garbage where the proxy's entry should be: the proxy's own view wins.
        let junk = headers(&[("x-forwarded-for", "198.51.100.9, not-an-ip")]);
        assert_eq!(trusted.of(ip("10.0.0.2"), &junk), ip("10.0.0.2"));
        // Only our own proxies in the chain: the farthest of them asked.
        let inside = headers(&[("x-forwarded-for", "10.9.9.9, 10.1.1.1")]);
        assert_eq!(trusted.of(ip("10.0.0.2"), &inside), ip("10.9.9.9"));
    }

    #[test]
    fn only_the_configured_header_is_read_never_another() {
        // nginx sets X-Forwarded-For and passes the client's own Forwarded through.
        let forged = headers(&[
            ("forwarded", "for=198.51.100.77"),
            ("x-forwarded-for", "203.0.113.9"),
        ]);
        let xff = behind("127.0.0.1", ClientIpHeader::XForwardedFor);
        assert_eq!(xff.of(ip("127.0.0.1"), &forged), ip("203.0.113.9"));
        // A proxy that sets Forwarded: X-Forwarded-For is the client's invention.
        let rfc = behind("10.0.0.0/8", ClientIpHeader::Forwarded);
        let chain = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            (
                "forwarded",
                r#"for="[2001:db8:cafe::17]:4711";proto=https, for=10.3.3.3"#,
            ),
        ]);
        assert_eq!(rfc.of(ip("10.0.0.2"), &chain), ip("2001:db8:cafe::17"));
        // The configured header missing: the proxy, not the other header.
        let only_xff = headers(&[("x-forwarded-for", "6.6.6.6")]);
        assert_eq!(rfc.of(ip("10.0.0.2"), &only_xff), ip("10.0.0.2"));
        let real = behind("127.0.0.1", ClientIpHeader::XRealIp);
        let nginx = headers(&[
            ("x-real-ip", "198.51.100.3"),
            ("x-forwarded-for", "6.6.6.6"),
        ]);
        assert_eq!(real.of(ip("127.0.0.1"), &nginx), ip("198.51.100.3"));
    }

    #[test]
    fn mapped_ipv4_addresses_are_canonicalised_before_trust_and_after() {
        let trusted = behind("127.0.0.1", ClientIpHeader::XForwardedFor);
        let chain = headers(&[("x-forwarded-for", "::ffff:198.51.100.4")]);
        assert_eq!(
            trusted.of(ip("::ffff:127.0.0.1"), &chain),
            ip("198.51.100.4")
        );
        let direct = ClientAddress::default();
        assert_eq!(
            direct.of(ip("::ffff:203.0.113.1"), &HeaderMap::new()),
            ip("203.0.113.1")
        );
        let mapped_proxy = behind("::ffff:10.0.0.1", ClientIpHeader::XForwardedFor);
        assert_eq!(mapped_proxy.of(ip("10.0.0.1"), &chain), ip("198.51.100.4"));
    }

    #[test]
    fn trusted_proxies_and_headers_are_parsed_or_refused() {
        assert!(
            "10.0.0.0/8,::1, 192.168.0.1"
                .parse::<TrustedProxies>()
                .is_ok()
        );
        assert_eq!("".parse::<TrustedProxies>(), Ok(TrustedProxies::default()));
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
        assert!("proxy.local".parse::<TrustedProxies>().is_err());
        use clap::ValueEnum;
        for header in ClientIpHeader::value_variants() {
            assert_eq!(
                <ClientIpHeader as ValueEnum>::from_str(header.as_str(), false),
                Ok(*header)
            );
        }
    }
}
