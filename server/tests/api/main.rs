//! Integration tests: the real server on port 0, on a fresh SQLite file or a fresh
//! PostgreSQL database, driven over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod access;
mod adoption;
mod alert_handling;
mod alerts;
mod bulk_redrive;
mod claim_queue;
mod cli;
mod crash;
mod dashboard;
// The rehearsal tools are commands of a build with the `rehearsal` feature only.
#[cfg(feature = "rehearsal")]
mod demo;
mod disk_full;
mod fulfilment;
mod hardening;
mod health;
mod image;
mod language;
mod limits;
mod money;
mod observability;
mod operator_cli;
mod outgoing;
mod process;
mod reconcile;
mod refund_form;
// The drill sends a simulated day (the rehearsal tools).
#[cfg(feature = "rehearsal")]
mod rolling;
mod search;
#[cfg(feature = "rehearsal")]
mod simulate;
mod spends;
mod statements;
mod subscription_orders;
mod subscriptions;
mod support_desk;
mod two_factor;
mod webhook;
