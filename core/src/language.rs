//! The languages the dashboard and the alerts speak, and how one is chosen from what a
//! browser asks for. Vocabulary: the browser bundle compiles it too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The cookie that remembers the language picked in a browser (before sign-in too).
pub const COOKIE: &str = "claimcheck_lang";

/// A language of the dashboard, with the conventions for numbers that go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Language {
    #[default]
    #[serde(rename = "en")]
    English,
    /// German as written in Switzerland: `ss` for `ß`, `’` between thousands.
    #[serde(rename = "de-CH")]
    SwissGerman,
}

impl Language {
    pub const ALL: [Language; 2] = [Language::English, Language::SwissGerman];

    /// The BCP 47 tag (`en`, `de-CH`), as in `<html lang>` and `Accept-Language`.
    pub fn tag(self) -> &'static str {
        match self {
            Language::English => "en",
            Language::SwissGerman => "de-CH",
        }
    }

    /// The language's own name for itself, for the switch in the header.
    pub fn name(self) -> &'static str {
        match self {
            Language::English => "English",
            Language::SwissGerman => "Deutsch",
        }
    }

    /// What the thousands of a number are set apart with.
    pub fn thousands_separator(self) -> char {
        match self {
            Language::English => ',',
            Language::SwissGerman => '’',
        }
    }

    /// A whole number as people read it in this language: `4’920` in Swiss German,
    /// `4,920` in English.
    pub fn number(self, n: i64) -> String {
        let sign = if n < 0 { "-" } else { "" };
        let digits = group_thousands(&n.unsigned_abs().to_string(), self.thousands_separator());
        format!("{sign}{digits}")
    }

    /// The best language for an `Accept-Language` header: the first listed (by weight, then
    /// order) whose primary tag is one of ours; every German (`de`, `de-DE`, `de-AT`) gets
    /// Swiss German, every English English. `None` if the browser asks for neither.
    pub fn negotiate(accept_language: &str) -> Option<Language> {
        let mut ranges: Vec<(f32, usize, Language)> = accept_language
            .split(',')
            .enumerate()
            .filter_map(|(position, item)| {
                let mut parts = item.split(';');
                let range = parts.next()?.trim();
                let weight = parts
                    .filter_map(|p| p.trim().strip_prefix("q="))
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                let language = Language::of_tag(range)?;
                (weight > 0.0).then_some((weight, position, language))
            })
            .collect();
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranges.first().map(|(_, _, language)| *language)
    }

    /// The language a request is answered in: the signed-in operator's choice, else the one
    /// last picked in this browser (the [`COOKIE`]), else the best of its `Accept-Language`,
    /// else `default` (`CLAIMCHECK_LANGUAGE`).
    pub fn choose(
        chosen: Option<Language>,
        cookie: Option<&str>,
        accept_language: Option<&str>,
        default: Language,
    ) -> Language {
        chosen
            .or_else(|| cookie.and_then(|c| c.parse().ok()))
            .or_else(|| accept_language.and_then(Language::negotiate))
            .unwrap_or(default)
    }

    /// Ours for a language tag by its primary subtag (`de-AT` → Swiss German).
    fn of_tag(tag: &str) -> Option<Language> {
        let primary = tag.split(['-', '_']).next()?.trim();
        if primary.eq_ignore_ascii_case("de") {
            Some(Language::SwissGerman)
        } else if primary.eq_ignore_ascii_case("en") {
            Some(Language::English)
        } else {
            None
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tag())
    }
}

impl FromStr for Language {
    type Err = String;

    /// `en`, `de-CH` (or any German or English tag: `de`, `en-GB`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Language::of_tag(s).ok_or_else(|| format!("unknown language '{s}' (en or de-CH)"))
    }
}

/// `digits` (ASCII, no sign) with `separator` between each group of three.
pub fn group_thousands(digits: &str, separator: char) -> String {
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3 * 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(separator);
        }
        grouped.push(digit);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_s_first_language_of_ours_wins() {
        let negotiate = Language::negotiate;
        assert_eq!(negotiate("de-CH"), Some(Language::SwissGerman));
        assert_eq!(
            negotiate("de-DE,de;q=0.9,en;q=0.8"),
            Some(Language::SwissGerman)
        );
        assert_eq!(negotiate("de-AT"), Some(Language::SwissGerman));
        assert_eq!(negotiate("en-US,en;q=0.9"), Some(Language::English));
        assert_eq!(
            negotiate("fr-CH, de;q=0.7, en;q=0.8"),
            Some(Language::English)
        );
        assert_eq!(negotiate("fr-CH, it;q=0.5"), None);
        assert_eq!(negotiate("de;q=0, en"), Some(Language::English));
        assert_eq!(negotiate(""), None);
        assert_eq!(negotiate("*"), None);
    }

    #[test]
    fn the_operator_s_choice_then_the_browser_s() {
        let de = Language::SwissGerman;
        let en = Language::English;
        assert_eq!(Language::choose(Some(de), Some("en"), Some("en"), en), de);
        assert_eq!(Language::choose(None, Some("de-CH"), Some("en"), en), de);
        assert_eq!(Language::choose(None, Some("xx"), Some("de-DE"), en), de);
        assert_eq!(Language::choose(None, None, Some("fr"), de), de);
        assert_eq!(Language::choose(None, None, None, en), en);
    }

    #[test]
    fn tags_read_and_written() {
        assert_eq!("de-CH".parse::<Language>(), Ok(Language::SwissGerman));
        assert_eq!("en".parse::<Language>(), Ok(Language::English));
        assert!("fr".parse::<Language>().is_err());
        for language in Language::ALL {
            assert_eq!(language.tag().parse::<Language>(), Ok(language));
            let json = serde_json::to_string(&language).unwrap();
            assert_eq!(json, format!("\"{}\"", language.tag()));
        }
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands("1", '’'), "1");
        assert_eq!(group_thousands("123", '’'), "123");
        assert_eq!(group_thousands("1234", '’'), "1’234");
        assert_eq!(group_thousands("1234567", ','), "1,234,567");
        assert_eq!(Language::SwissGerman.number(4920), "4’920");
        assert_eq!(Language::English.number(-1_234_567), "-1,234,567");
        assert_eq!(Language::English.number(12), "12");
    }
}
