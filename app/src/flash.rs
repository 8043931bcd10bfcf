//! The outcome of a form post, carried to the page it lands on once: in a short-lived cookie
//! the server sets on the redirect and the page clears when it shows it, never in the URL (a
//! link anyone can make cannot put words on the dashboard, and a filter parameter named
//! `error` is only a filter).
//!
//! A form sent back to be corrected travels the same way, with what was typed in it: only
//! the server sets the cookie, answering the operator's own post, so nobody can put words
//! into someone else's form with a link.

use crate::links;

/// The cookie's name.
pub const COOKIE: &str = "claimcheck_flash";

/// How long an unread outcome waits for its page, in seconds.
pub const MAX_AGE: u32 = 120;

/// The most a flash cookie's `name=value` may take: browsers keep a cookie of up to 4,096
/// bytes and drop a larger one whole (and the error in it with it).
pub const MAX_COOKIE_BYTES: usize = 4000;

/// An action's outcome as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flash {
    Notice(String),
    Error(String),
    /// A form sent back to its page: [`KeptForm::summary`] is shown as the error.
    Form(KeptForm),
}

/// A form sent back to its page to be put right: a summary for the top of the page, what is
/// wrong next to each field, and what was typed still in the fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeptForm {
    /// The page whose form it is: the input is given back there and nowhere else.
    pub page: String,
    pub summary: String,
    /// What is wrong, by field name.
    pub errors: Vec<(String, String)>,
    /// What was typed, by field name.
    pub values: Vec<(String, String)>,
}

impl KeptForm {
    /// What is wrong with `field`, if anything.
    pub fn error(&self, field: &str) -> Option<&str> {
        find(&self.errors, field)
    }

    /// What was typed into `field`.
    pub fn value(&self, field: &str) -> Option<&str> {
        find(&self.values, field)
    }

    /// The cookie value (after `f.`); the longest typed values are left out, one by one,
    /// until it fits in [`MAX_COOKIE_BYTES`]: the errors always travel, a long text typed in
    /// another script may have to be typed again.
    fn encode(&self) -> String {
        let mut values = self.values.clone();
        loop {
            let mut pairs = vec![
                format!("p={}", links::encode(&self.page)),
                format!("s={}", links::encode(&self.summary)),
            ];
            let mut field = |prefix: char, (name, text): &(String, String)| {
                pairs.push(format!(
                    "{prefix}{}={}",
                    links::encode(name),
                    links::encode(text)
                ))
            };
            self.errors.iter().for_each(|pair| field('e', pair));
            values.iter().for_each(|pair| field('v', pair));
            let encoded = pairs.join("&");
            // `claimcheck_flash=f.` comes before it.
            if COOKIE.len() + 3 + encoded.len() <= MAX_COOKIE_BYTES || values.is_empty() {
                return encoded;
            }
            if let Some(longest) = (0..values.len()).max_by_key(|&i| values[i].1.len()) {
                values.remove(longest);
            }
        }
    }

    fn decode(text: &str) -> Option<KeptForm> {
        let mut form = KeptForm::default();
        for pair in text.split('&') {
            let (key, value) = pair.split_once('=')?;
            let value = links::decode(value)?;
            let mut chars = key.chars();
            let kind = chars.next()?;
            let name = links::decode(chars.as_str())?;
            match kind {
                'p' => form.page = value,
                's' => form.summary = value,
                'e' => form.errors.push((name, value)),
                'v' => form.values.push((name, value)),
                _ => return None,
            }
        }
        (!form.summary.is_empty()).then_some(form)
    }
}

fn find<'a>(pairs: &'a [(String, String)], field: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(name, _)| name == field)
        .map(|(_, text)| text.as_str())
}

impl Flash {
    /// The `Set-Cookie` value that carries it to the next page.
    pub fn set_cookie(&self) -> String {
        let (kind, value) = match self {
            Flash::Notice(text) => ('n', links::encode(text)),
            Flash::Error(text) => ('e', links::encode(text)),
            Flash::Form(form) => ('f', form.encode()),
        };
        format!("{COOKIE}={kind}.{value}; Path=/; Max-Age={MAX_AGE}; HttpOnly; SameSite=Lax")
    }

    /// The `Set-Cookie` value that forgets it once shown.
    pub fn clear_cookie() -> String {
        format!("{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
    }

    /// The outcome in a request's `Cookie` headers, if one is there and readable.
    pub fn from_cookies<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<Flash> {
        let value = headers
            .into_iter()
            .flat_map(|header| header.split(';'))
            .find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                (name.trim() == COOKIE).then(|| value.trim())
            })?;
        let (kind, text) = value.split_once('.')?;
        if kind == "f" {
            return KeptForm::decode(text).map(Flash::Form);
        }
        let text = links::decode(text)?;
        if text.is_empty() {
            return None;
        }
        match kind {
            "n" => Some(Flash::Notice(text)),
            "e" => Some(Flash::Error(text)),
            _ => None,
        }
    }

    /// The form sent back to `page` in this request's flash, if there is one. (Reading it
    /// does not forget it: the page's notices do that.)
    #[cfg(feature = "ssr")]
    pub fn kept_form(page: &str) -> Option<KeptForm> {
        let parts = leptos::prelude::use_context::<http::request::Parts>()?;
        let cookies = parts.headers.get_all(http::header::COOKIE);
        match Flash::from_cookies(cookies.iter().filter_map(|v| v.to_str().ok()))? {
            Flash::Form(form) if form.page == page => Some(form),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_survives_the_cookie() {
        for flash in [
            Flash::Notice("Re-driven: processed.".into()),
            Flash::Error("«6000» ist kein Betrag; 1 000, à; \"x\"".into()),
        ] {
            let set = flash.set_cookie();
            let pair = set.split(';').next().unwrap().to_owned();
            assert_eq!(
                Flash::from_cookies(["lang=en; ".to_owned() + &pair].iter().map(String::as_str)),
                Some(flash)
            );
        }
        assert_eq!(Flash::from_cookies(["claimcheck_flash=x.abc"]), None);
        assert_eq!(Flash::from_cookies(["claimcheck_flash=n.%ZZ"]), None);
        assert_eq!(Flash::from_cookies(["claimcheck_flash="]), None);
        assert_eq!(Flash::from_cookies(["other=n.hi"]), None);
    }

    fn cookie_pair(flash: &Flash) -> String {
        flash.set_cookie().split(';').next().unwrap().to_owned()
    }

    #[test]
    fn a_form_sent_back_keeps_its_input() {
        let form = KeptForm {
            page: "/orders/ord_1/refund".into(),
            summary: "Nothing was refunded.".into(),
            errors: vec![(
                "amount".into(),
                "CHF 60.00 is more than the CHF 49.00 still refundable.".into(),
            )],
            values: vec![
                ("amount".into(), "60".into()),
                (
                    "reason".into(),
                    "Kunde möchte 60 & mehr = «alles»; a=b".into(),
                ),
            ],
        };
        let flash = Flash::Form(form.clone());
        assert_eq!(
            Flash::from_cookies([cookie_pair(&flash).as_str()]),
            Some(flash)
        );
        assert_eq!(
            form.value("reason"),
            Some("Kunde möchte 60 & mehr = «alles»; a=b")
        );
        assert_eq!(form.error("reason"), None);
    }

    #[test]
    fn a_kept_form_too_large_for_a_cookie_drops_the_longest_input_not_the_error() {
        let long = "好".repeat(1000);
        let form = KeptForm {
            page: "/orders/ord_1/refund".into(),
            summary: "Nothing was refunded.".into(),
            errors: vec![(
                "reason".into(),
                "A reason has at most 1000 characters.".into(),
            )],
            values: vec![("amount".into(), "24.50".into()), ("reason".into(), long)],
        };
        let pair = cookie_pair(&Flash::Form(form.clone()));
        assert!(pair.len() <= MAX_COOKIE_BYTES, "{}", pair.len());
        let Some(Flash::Form(back)) = Flash::from_cookies([pair.as_str()]) else {
            panic!("{pair}");
        };
        assert_eq!(back.errors, form.errors);
        assert_eq!(back.value("amount"), Some("24.50"));
        assert_eq!(back.value("reason"), None);
        // A thousand characters in German fit.
        let german = KeptForm {
            values: vec![("reason".into(), "Rückerstattung für Kundin ".repeat(40))],
            ..form
        };
        let pair = cookie_pair(&Flash::Form(german.clone()));
        assert_eq!(
            Flash::from_cookies([pair.as_str()]),
            Some(Flash::Form(german))
        );
    }
}
