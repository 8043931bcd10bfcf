//! Text that would mislead a reader: Unicode's invisible format characters (bidirectional
//! overrides such as U+202E, zero-width joiners and spaces, the soft hyphen, tags), refused in
//! identifiers so that an order id, a username or an e-mail shown on the dashboard or in the
//! audit log reads as what it is. And the one way durations are written in settings.

/// Unicode's format characters (general category Cf, Unicode 15): they change how the
/// text around them is shown, or are not shown at all.
pub fn is_format(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Whether `text` holds a character that cannot be read for what it is: a control
/// character, whitespace other than a plain space where `spaces` allows it, or a format
/// character.
pub fn has_hidden_characters(text: &str, spaces: bool) -> bool {
    text.chars()
        .any(|c| c.is_control() || is_format(c) || (c.is_whitespace() && !(spaces && c == ' ')))
}

/// [`parse_duration`] in milliseconds, as the engine counts time; `None` for what is not a
/// duration or is longer than it can count.
pub fn duration_ms(text: &str) -> Option<i64> {
    parse_duration(text)
        .ok()
        .and_then(|d| i64::try_from(d.as_millis()).ok())
}

/// `90s`, `15m`, `1h`, `3d`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 90s, 15m, 1h or 3d"))?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => {
            return Err(format!(
                "'{text}' is not a duration like 90s, 15m, 1h or 3d"
            ));
        }
    };
    Ok(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_overrides_zero_widths_and_tags_are_format_characters() {
        for c in [
            '\u{202E}',
            '\u{200B}',
            '\u{200D}',
            '\u{2066}',
            '\u{FEFF}',
            '\u{AD}',
            '\u{E0041}',
        ] {
            assert!(is_format(c), "{:04X}", u32::from(c));
        }
        for c in ['a', 'é', 'а', '-', '_', '@', '€', ' '] {
            assert!(!is_format(c), "{c}");
        }
        assert!(has_hidden_characters("ord_1\u{202E}gpj", false));
        assert!(has_hidden_characters("two words", false));
        assert!(!has_hidden_characters("two words", true));
        assert!(has_hidden_characters("tab\there", true));
        assert!(!has_hidden_characters("Zürich-Örlikon_1", false));
    }
}
