//! `GET /orders.csv?status=&package=&from=&to=`: the orders the list's filters show, all of
//! them, as CSV, newest first. Written a page of the keyset at a time while it is sent, so
//! a large export never sits in memory; the first page is read before the answer starts, so
//! a database that is away is a 503, not a truncated file.

use std::pin::Pin;
use std::task::{Context, Poll};

use app::api::order_status_filter;
use app::i18n::td_string;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use claimcheck_core::{OrderFilter, OrderLine, Store};
use http_body::Frame;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::AppState;
use super::actions::unavailable;
use super::words::{Reading, Signed, Viewer};

/// Orders read per statement.
const PAGE: i64 = 1000;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/orders.csv", get(export))
}

#[derive(Deserialize)]
pub(super) struct ExportQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    package: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

async fn export(
    State(state): State<AppState>,
    reading: Reading,
    _viewer: Signed<Viewer>,
    Query(query): Query<ExportQuery>,
) -> Response {
    let locale = reading.locale();
    let bad = |text: String| (StatusCode::BAD_REQUEST, text).into_response();
    let Ok(status) = order_status_filter(&query.status) else {
        let status = query.status.clone();
        return bad(td_string!(locale, messages.not_an_order_status, status));
    };
    let day = |text: &str, end: bool| {
        reading
            .0
            .day_bound(text, end)
            .map_err(|_| td_string!(locale, messages.not_a_date, s = text.to_owned()))
    };
    let (from, to) = match (day(&query.from, false), day(&query.to, true)) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(why), _) | (_, Err(why)) => return bad(why),
    };
    let filter = OrderFilter {
        status,
        package: Some(query.package.trim().to_owned()).filter(|p| !p.is_empty()),
        from,
        to,
    };
    let first = match state.store.orders().list(&filter, None, PAGE).await {
        Ok(lines) => lines,
        Err(error) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                unavailable(reading, "orders export", &error),
            )
                .into_response();
        }
    };
    let (sender, receiver) = mpsc::channel(2);
    tokio::spawn(write_pages(state.store.clone(), filter, first, sender));
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"orders.csv\"",
            ),
        ],
        Body::new(ChannelBody(receiver)),
    )
        .into_response()
}

type Chunk = Result<Frame<Bytes>, std::io::Error>;

/// Sends the header, `first`, then every further page until the filter has no more; a
/// failure ends the body with an error, so the client sees an incomplete download.
async fn write_pages(
    store: Store,
    filter: OrderFilter,
    first: Vec<OrderLine>,
    sender: mpsc::Sender<Chunk>,
) {
    let mut text = String::from(
        "order_id,status,package,customer_email,amount_minor,currency,credits,credits_granted,\
         created_at\n",
    );
    let mut page = first;
    loop {
        let full = page.len() as i64 == PAGE;
        let after = page.last().map(|o| (o.created_at, o.order_id.clone()));
        for order in &page {
            csv_line(&mut text, order);
        }
        if sender
            .send(Ok(Frame::data(Bytes::from(std::mem::take(&mut text)))))
            .await
            .is_err()
        {
            return; // The client went away.
        }
        if !full {
            return;
        }
        page = match store.orders().list(&filter, after, PAGE).await {
            Ok(lines) => lines,
            Err(error) => {
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "orders export: storage; the download ends incomplete"
                );
                let _ = sender
                    .send(Err(std::io::Error::other("the database is unavailable")))
                    .await;
                return;
            }
        };
    }
}

fn csv_line(out: &mut String, o: &OrderLine) {
    let created = chrono::DateTime::from_timestamp_millis(o.created_at)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default();
    let fields = [
        o.order_id.clone(),
        o.status.as_str().to_owned(),
        o.package.clone().unwrap_or_default(),
        o.customer_email.clone().unwrap_or_default(),
        o.amount.map(|a| a.to_string()).unwrap_or_default(),
        o.currency.clone().unwrap_or_default(),
        o.credits.to_string(),
        o.credits_granted.to_string(),
        created,
    ];
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        csv_field(out, field);
    }
    out.push('\n');
}

/// What a spreadsheet runs as a formula when a cell starts with it.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Where a spreadsheet may start a cell inside a field: Swiss and German Excel split lines
/// on `;` (and ignore quotes that do not open a cell), and any program starts a row at a
/// line break.
const CELL_BREAKS: [char; 4] = [';', '\n', '\r', '\t'];

/// One field: quoted when it holds a separator, a quote or a line break; text a spreadsheet
/// would run as a formula (`=`, `+`, `-`, `@`, tab, CR first) is led by `'` (OWASP's CSV
/// injection advice), at the field's start and after every `;` or line break in it, where
/// a spreadsheet reading `;` as the separator starts a cell. Numbers are written by us and
/// never start so, except a negative one.
fn csv_field(out: &mut String, field: &str) {
    let numeric = !field.is_empty()
        && field
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit());
    let formula = !numeric && field.starts_with(FORMULA_STARTS);
    let quoted = formula || field.contains([',', '"', '\n', '\r', ';']);
    if quoted {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    let mut cell_starts = false;
    for c in field.chars() {
        if cell_starts && FORMULA_STARTS.contains(&c) {
            out.push('\'');
        }
        cell_starts = CELL_BREAKS.contains(&c);
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    if quoted {
        out.push('"');
    }
}

/// A response body fed by [`write_pages`].
struct ChannelBody(mpsc::Receiver<Chunk>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(text: &str) -> String {
        let mut out = String::new();
        csv_field(&mut out, text);
        out
    }

    #[test]
    fn fields_are_quoted_and_formulas_defused() {
        assert_eq!(field("ord_1"), "ord_1");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(field("@sum"), "\"'@sum\"");
        assert_eq!(field("-40"), "-40");
        assert_eq!(field("-x"), "\"'-x\"");
        assert_eq!(field(""), "");
    }

    /// A spreadsheet that splits on `;` starts a cell after every `;` of a field (quotes
    /// inside a cell do not hold it together): each of those is defused too.
    #[test]
    fn every_cell_a_semicolon_spreadsheet_could_see_is_defused() {
        assert_eq!(field("ord_csv1;=1+1;"), "\"ord_csv1;'=1+1;\"");
        assert_eq!(field("x@a.b;=2*21;"), "\"x@a.b;'=2*21;\"");
        assert_eq!(field("a;;@x"), "\"a;;'@x\"");
        assert_eq!(field("a;-b;+c"), "\"a;'-b;'+c\"");
        assert_eq!(field("line\n=cmd"), "\"line\n'=cmd\"");
        assert_eq!(field("a;b"), "\"a;b\"");
        // What a `;` spreadsheet sees of each: no cell opens with a formula character.
        for text in ["ord_csv1;=1+1;", "x@a.b;=2*21;", "p;\t=x", "q;\r@y"] {
            let written = field(text);
            for cell in written.split([';', '\n', '\r']) {
                let cell = cell.trim_start_matches('"');
                assert!(!cell.starts_with(FORMULA_STARTS), "{text:?}: cell {cell:?}");
            }
        }
    }
}
