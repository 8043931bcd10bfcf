//! The dashboard's files as the release binary carries them (see `build.rs`): each served
//! in the best encoding the browser accepts (brotli, gzip, or as is), with an ETag; the
//! bundle under content-hashed names that may be cached for good.

use axum::body::Body;
use axum::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// One file of the site, compressed at build time.
#[derive(Debug)]
pub(crate) struct EmbeddedFile {
    /// The URL path it is served under (`/pkg/claimcheck.<hash>.wasm`, `/favicon.svg`).
    pub path: &'static str,
    pub content_type: &'static str,
    /// Named after its content: the same URL never serves anything else.
    pub immutable: bool,
    /// Of the uncompressed bytes, quoted; each encoding gets its own suffix.
    pub etag: &'static str,
    pub raw: &'static [u8],
    pub brotli: Option<&'static [u8]>,
    pub gzip: Option<&'static [u8]>,
}

/// The site a binary carries.
#[derive(Debug)]
pub(crate) struct EmbeddedSite {
    /// The bundle's base name, content hash included (`claimcheck.<hash>`).
    pub output_name: &'static str,
    pub files: &'static [EmbeddedFile],
}

include!(concat!(env!("OUT_DIR"), "/site.rs"));

/// The site this binary carries, if it was built with one.
pub(crate) fn embedded() -> Option<&'static EmbeddedSite> {
    SITE.as_ref()
}

impl EmbeddedSite {
    /// A router with a GET route per file.
    pub(crate) fn router<S: Clone + Send + Sync + 'static>(&'static self) -> axum::Router<S> {
        self.files.iter().fold(axum::Router::new(), |router, file| {
            router.route(
                file.path,
                axum::routing::get(move |headers: HeaderMap| async move { file.respond(&headers) }),
            )
        })
    }
}

/// How a response body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

impl EmbeddedFile {
    fn respond(&self, request: &HeaderMap) -> Response {
        let accepted = |name| accepts(request, name);
        let (encoding, body) = match (self.brotli, self.gzip) {
            (Some(br), _) if accepted("br") => (Encoding::Brotli, br),
            (_, Some(gz)) if accepted("gzip") => (Encoding::Gzip, gz),
            _ => (Encoding::Identity, self.raw),
        };
        let etag = match encoding {
            Encoding::Brotli => format!("{}-br\"", self.etag.trim_end_matches('"')),
            Encoding::Gzip => format!("{}-gz\"", self.etag.trim_end_matches('"')),
            Encoding::Identity => self.etag.to_owned(),
        };
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        headers.insert(
            CACHE_CONTROL,
            HeaderValue::from_static(if self.immutable {
                "public, max-age=31536000, immutable"
            } else {
                // Same name, new content after an upgrade: ask every time (an ETag makes the
                // answer a 304 while nothing changed).
                "no-cache"
            }),
        );
        if self.brotli.is_some() || self.gzip.is_some() {
            headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
        }
        if let Ok(value) = HeaderValue::from_str(&etag) {
            headers.insert(ETAG, value);
        }
        let unchanged = request
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|tag| {
                let tag = tag.trim().trim_start_matches("W/");
                tag == etag || tag == "*"
            });
        if unchanged {
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        match encoding {
            Encoding::Brotli => {
                headers.insert(CONTENT_ENCODING, HeaderValue::from_static("br"));
            }
            Encoding::Gzip => {
                headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            Encoding::Identity => {}
        }
        (headers, Body::from(body)).into_response()
    }
}

/// Whether `Accept-Encoding` takes `name` (listed without `q=0`).
fn accepts(request: &HeaderMap, name: &str) -> bool {
    request
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            coding.eq_ignore_ascii_case(name) && !refused
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    static FILE: EmbeddedFile = EmbeddedFile {
        path: "/pkg/claimcheck.0123.wasm",
        content_type: "application/wasm",
        immutable: true,
        etag: "\"abc\"",
        raw: b"raw bytes",
        brotli: Some(b"br bytes"),
        gzip: Some(b"gz bytes"),
    };

    fn get(headers: &[(&'static str, &'static str)]) -> Response {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(*name, HeaderValue::from_static(value));
        }
        FILE.respond(&map)
    }

    fn header<'r>(response: &'r Response, name: &str) -> &'r str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    async fn body(response: Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn the_best_encoding_the_browser_takes_is_sent() {
        let br = get(&[("accept-encoding", "gzip, deflate, br, zstd")]);
        assert_eq!(header(&br, "content-encoding"), "br");
        assert_eq!(header(&br, "etag"), "\"abc-br\"");
        assert_eq!(header(&br, "vary"), "accept-encoding");
        assert_eq!(header(&br, "content-type"), "application/wasm");
        assert_eq!(
            header(&br, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(body(br).await, b"br bytes");

        let gz = get(&[("accept-encoding", "gzip;q=0.8, br;q=0")]);
        assert_eq!(header(&gz, "content-encoding"), "gzip");
        assert_eq!(body(gz).await, b"gz bytes");

        let plain = get(&[]);
        assert_eq!(header(&plain, "content-encoding"), "");
        assert_eq!(header(&plain, "etag"), "\"abc\"");
        assert_eq!(body(plain).await, b"raw bytes");
    }

    #[tokio::test]
    async fn a_known_etag_is_answered_not_modified() {
        let response = get(&[
            ("accept-encoding", "br"),
            ("if-none-match", "\"other\", W/\"abc-br\""),
        ]);
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert!(body(response).await.is_empty());
        // The tag of another encoding is another representation.
        let response = get(&[("accept-encoding", "gzip"), ("if-none-match", "\"abc-br\"")]);
        assert_eq!(response.status(), StatusCode::OK);
    }
}
