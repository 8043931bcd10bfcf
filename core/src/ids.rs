//! Identifiers parsed once at the edge, so the rest of the engine cannot mix them up.

use std::fmt;

/// Why a string is not a usable identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty")]
    Empty { kind: &'static str },
    #[error("{kind} is longer than 255 characters")]
    TooLong { kind: &'static str },
    #[error("{kind} contains whitespace, control or invisible formatting characters")]
    BadCharacters { kind: &'static str },
}

fn check(kind: &'static str, value: &str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if value.len() > 255 {
        return Err(IdError::TooLong { kind });
    }
    if crate::text::has_hidden_characters(value, false) {
        return Err(IdError::BadCharacters { kind });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: impl Into<String>) -> Result<$name, IdError> {
                let value = value.into();
                check($kind, &value)?;
                Ok($name(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s)
            }
        }
    };
}

id_type!(
    /// The shop's own reference of a subscription it asked for (`POST /api/subscriptions`),
    /// carried in the subscription's metadata (`subscription_ref`).
    SubscriptionRef,
    "the subscription reference"
);
id_type!(
    /// A Stripe Event id (`evt_…`).
    EventId,
    "the event id"
);
id_type!(
    /// The shop's order id (a session's `metadata.order_id` or `client_reference_id`).
    OrderId,
    "the order id"
);
id_type!(
    /// The id of the object an event is about (`data.object.id`: `cs_…`, `ch_…`, …).
    ObjectId,
    "the object id"
);
id_type!(
    /// A bulk re-drive batch (`bulk_…`).
    BatchId,
    "the batch id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_empty_long_and_spaced_values() {
        assert!(EventId::parse("evt_1").is_ok());
        assert_eq!(
            EventId::parse(""),
            Err(IdError::Empty {
                kind: "the event id"
            })
        );
        assert!(matches!(
            EventId::parse("x".repeat(256)),
            Err(IdError::TooLong { .. })
        ));
        assert!(matches!(
            ObjectId::parse("cs 1"),
            Err(IdError::BadCharacters { .. })
        ));
        // A right-to-left override makes "ord_1\u{202E}fdp.exe" read as "ord_1exe.pdf".
        assert!(matches!(
            OrderId::parse("ord_1\u{202E}fdp.exe"),
            Err(IdError::BadCharacters { .. })
        ));
        assert!(OrderId::parse("ord_zürich_1").is_ok());
    }
}
