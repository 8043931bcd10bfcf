//! Generates the dashboard's translations (`locales/<language>/<area>.json`, one file per
//! area of the dashboard) into a module checked at compile time: an unknown key in `t!` does not compile, and a key that
//! one language has and another lacks fails this build (leptos_i18n alone would only warn
//! and show the default language's text).

use std::error::Error;
use std::path::PathBuf;

use leptos_i18n_build::{Config, ParseOptions, TranslationsInfos};
use leptos_i18n_parser::parse_locales::error::Warning;
use leptos_i18n_parser::parse_locales::parse_locales;

/// One file per area, under each language's folder.
const AREAS: &[&str] = &[
    "common",
    "login",
    "overview",
    "events",
    "claims",
    "orders",
    "timeline",
    "refund",
    "customers",
    "subscriptions",
    "requests",
    "search",
    "audit",
    "reconcile",
    "bulk",
    "alerts",
    "operators",
    "account",
    "preferences",
    "messages",
    "notify",
];

fn config() -> Result<Config, Box<dyn Error>> {
    Ok(Config::new("en")?
        .add_locale("de-CH")?
        .add_namespaces(AREAS)?
        .parse_options(ParseOptions::default().interpolate_display(true)))
}

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?).join("i18n");
    let strict = parse_locales(None, config()?)?;
    let differences: Vec<String> = strict
        .diag
        .warnings()
        .iter()
        .filter(|w| matches!(w, Warning::MissingKey { .. } | Warning::SurplusKey { .. }))
        .map(ToString::to_string)
        .collect();
    for difference in &differences {
        println!("cargo::error={difference}");
    }
    let infos = TranslationsInfos::parse(config()?)?;
    infos.emit_diagnostics();
    infos.rerun_if_locales_changed();
    if !differences.is_empty() {
        return Err(format!(
            "{} translation key(s) differ between the locales",
            differences.len()
        )
        .into());
    }
    infos.generate_i18n_module(out)?;
    Ok(())
}
