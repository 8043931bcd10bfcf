//! `claimcheck healthcheck`: asks the server on this host whether it is ready, for a
//! container's `HEALTHCHECK` (an image without a shell or curl runs the binary itself).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::config::ServeConfig;
use crate::error::ServerError;

#[derive(Debug, Clone, Args)]
pub struct HealthcheckArgs {
    /// The address `serve` listens on (the same setting): an unspecified address
    /// (0.0.0.0, ::) is asked on loopback.
    #[arg(
        long,
        env = "CLAIMCHECK_BIND",
        value_name = "CLAIMCHECK_BIND",
        default_value_t = ServeConfig::default().bind
    )]
    pub bind: SocketAddr,
    /// How long to wait for the answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 3)]
    pub timeout: u64,
}

/// Where to ask: the bind address, loopback for an unspecified one.
fn target(bind: SocketAddr) -> SocketAddr {
    match bind.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bind.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bind.port()).into(),
        _ => bind,
    }
}

/// GET /readyz: success on 200, else an error that carries the server's reason.
pub async fn run(args: &HealthcheckArgs) -> Result<(), ServerError> {
    let url = format!("http://{}/readyz", target(args.bind));
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let uri: hyper::Uri = url
        .parse()
        .map_err(|_| ServerError::Command(format!("{url} is not a URL")))?;
    let ask = async {
        let response = client.get(uri).await.map_err(|e| {
            ServerError::Command(format!(
                "{url}: no answer ({})",
                crate::telemetry::error_chain(&e)
            ))
        })?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok::<_, ServerError>((status, String::from_utf8_lossy(&body).into_owned()))
    };
    let (status, body) = tokio::time::timeout(Duration::from_secs(args.timeout), ask)
        .await
        .map_err(|_| {
            ServerError::Command(format!("{url}: no answer within {} s", args.timeout))
        })??;
    if status == hyper::StatusCode::OK {
        super::output::print(&format!("ready: {body}"));
        Ok(())
    } else {
        Err(ServerError::Command(format!(
            "{url} answered {status}: {body}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn an_unspecified_bind_is_asked_on_loopback() {
        assert_eq!(
            target("0.0.0.0:3000".parse().unwrap()),
            "127.0.0.1:3000".parse().unwrap()
        );
        assert_eq!(
            target("[::]:80".parse().unwrap()),
            "[::1]:80".parse().unwrap()
        );
        assert_eq!(
            target("10.0.0.5:3000".parse().unwrap()),
            "10.0.0.5:3000".parse().unwrap()
        );
    }
}
