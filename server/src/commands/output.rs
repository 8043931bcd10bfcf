//! How commands answer: a table for people, or JSON with `--json` (field names are a
//! contract for scripts and monitoring: fields may be added, never renamed).

use clap::Args;
use serde::Serialize;

use crate::error::ServerError;

#[derive(Debug, Clone, Args)]
pub struct Output {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Writes the command's result to stdout: it is the output, not a log line.
#[allow(clippy::print_stdout)]
pub(super) fn print(text: &str) {
    println!("{text}");
}

pub(super) fn print_json(value: &impl Serialize) -> Result<(), ServerError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ServerError::Command(format!("cannot write JSON: {e}")))?;
    print(&text);
    Ok(())
}

/// A list as JSON (the items themselves) or as a table of `row`s under `header`.
pub(super) fn print_list<T: Serialize>(
    output: &Output,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<(), ServerError> {
    if output.json {
        return print_json(&items);
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    print(&table(header, &rows));
    Ok(())
}

/// Left-aligned columns, for people.
pub(super) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = vec![line(header.iter().map(|h| (*h).to_owned()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

pub(super) fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "-".to_owned())
}
