//! Integration tests: the real server on port 0, on a fresh SQLite file or a fresh
//! PostgreSQL database, driven over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod access;
mod alerts;
mod bulk_redrive;
mod cli;
mod crash;
mod dashboard;
// The rehearsal tools are commands of a build with the `rehearsal` feature only.
#[cfg(feature = "rehearsal")]
mod demo;
mod fulfilment;
mod hardening;
mod health;
mod language;
mod money;
mod observability;
mod operator_cli;
mod outgoing;
mod reconcile;
mod search;
#[cfg(feature = "rehearsal")]
mod simulate;
mod two_factor;
mod webhook;
