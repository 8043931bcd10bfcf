//! Every language has every key, and each key takes the same values in every language. The
//! build refuses a key one language lacks (build.rs); this reads the files as a translator
//! leaves them and says which key of which area is missing, surplus or takes other values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const LANGUAGES: [&str; 2] = ["en", "de-CH"];

fn locales() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("locales")
}

/// The areas (file names without `.json`) of one language.
fn areas(language: &str) -> BTreeSet<String> {
    fs::read_dir(locales().join(language))
        .unwrap_or_else(|e| panic!("locales/{language}: {e}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Key → the values (`{{ name }}`) its text takes.
fn keys(language: &str, area: &str) -> BTreeMap<String, BTreeSet<String>> {
    let path = locales().join(language).join(format!("{area}.json"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    json.into_iter()
        .map(|(key, value)| {
            let text = value
                .as_str()
                .unwrap_or_else(|| panic!("{language}/{area}.json: {key} is not text"));
            assert!(
                !text.trim().is_empty(),
                "{language}/{area}.json: {key} is empty"
            );
            (key, values(text))
        })
        .collect()
}

fn values(text: &str) -> BTreeSet<String> {
    text.split("{{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}"))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
}

#[test]
fn every_locale_has_every_key_with_the_same_values() {
    let reference = areas(LANGUAGES[0]);
    assert!(reference.len() > 10, "{reference:?}");
    let build = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs")).unwrap();
    let mut problems = Vec::new();
    for area in &reference {
        if !build.contains(&format!("\"{area}\"")) {
            problems.push(format!("area {area} is not listed in build.rs"));
        }
    }
    for language in &LANGUAGES[1..] {
        let theirs = areas(language);
        for missing in reference.difference(&theirs) {
            problems.push(format!("{language} has no {missing}.json"));
        }
        for surplus in theirs.difference(&reference) {
            problems.push(format!("{language} has {surplus}.json, which en lacks"));
        }
        for area in reference.intersection(&theirs) {
            let en = keys(LANGUAGES[0], area);
            let other = keys(language, area);
            for (key, values) in &en {
                match other.get(key) {
                    None => problems.push(format!("{language}/{area}.json lacks {key}")),
                    Some(v) if v != values => problems.push(format!(
                        "{language}/{area}.json: {key} takes {v:?}, en takes {values:?}"
                    )),
                    Some(_) => {}
                }
            }
            for key in other.keys().filter(|k| !en.contains_key(*k)) {
                problems.push(format!("{language}/{area}.json has {key}, which en lacks"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn values_are_read_from_the_text() {
    assert_eq!(
        values("{{ granted }} of {{total}} credits"),
        BTreeSet::from(["granted".to_owned(), "total".to_owned()])
    );
    assert!(values("no values").is_empty());
}
