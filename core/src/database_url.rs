//! The `DATABASE_URL` setting, parsed once: which backend, and where.

use std::fmt;
use std::str::FromStr;

/// The two storage backends Claimcheck runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A database URL whose scheme names a supported backend.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    backend: Backend,
    url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseUrlError {
    #[error("the database URL is empty")]
    Empty,
    #[error(
        "unsupported database URL scheme '{0}': use sqlite://PATH (or sqlite::memory:) or postgres://USER@HOST/DB"
    )]
    UnsupportedScheme(String),
    #[error("the database URL has no scheme: use sqlite://PATH or postgres://USER@HOST/DB")]
    NoScheme,
}

impl DatabaseUrl {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL as given, credentials included: for connecting only, never for logs.
    pub fn expose(&self) -> &str {
        &self.url
    }
}

impl FromStr for DatabaseUrl {
    type Err = DatabaseUrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let url = s.trim();
        if url.is_empty() {
            return Err(DatabaseUrlError::Empty);
        }
        let (scheme, _) = url.split_once(':').ok_or(DatabaseUrlError::NoScheme)?;
        let backend = match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => Backend::Sqlite,
            "postgres" | "postgresql" => Backend::Postgres,
            other => return Err(DatabaseUrlError::UnsupportedScheme(other.to_owned())),
        };
        Ok(DatabaseUrl {
            backend,
            url: url.to_owned(),
        })
    }
}

/// Shows the URL with any password replaced, so it can go into logs and errors.
impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((scheme, rest)) = self.url.split_once("://") else {
            return f.write_str(&self.url);
        };
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                let hidden = if userinfo.contains(':') { ":***" } else { "" };
                write!(f, "{scheme}://{user}{hidden}@{host}{path}")
            }
            None => f.write_str(&self.url),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatabaseUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_told_apart_by_scheme() {
        let sqlite: DatabaseUrl = "sqlite://data/claimcheck.db".parse().unwrap();
        assert_eq!(sqlite.backend(), Backend::Sqlite);
        let memory: DatabaseUrl = "sqlite::memory:".parse().unwrap();
        assert_eq!(memory.backend(), Backend::Sqlite);
        let pg: DatabaseUrl = "postgresql://u@localhost/db".parse().unwrap();
        assert_eq!(pg.backend(), Backend::Postgres);
    }

    #[test]
    fn unsupported_urls_are_refused_with_a_reason() {
        assert_eq!(
            "mysql://root@localhost/x".parse::<DatabaseUrl>(),
            Err(DatabaseUrlError::UnsupportedScheme("mysql".into()))
        );
        assert_eq!(
            "data/claimcheck.db".parse::<DatabaseUrl>(),
            Err(DatabaseUrlError::NoScheme)
        );
        assert_eq!("  ".parse::<DatabaseUrl>(), Err(DatabaseUrlError::Empty));
    }

    #[test]
    fn display_hides_the_password() {
        let url: DatabaseUrl = "postgres://app:s3cret@db.internal:5432/claims"
            .parse()
            .unwrap();
        assert_eq!(
            url.to_string(),
            "postgres://app:***@db.internal:5432/claims"
        );
        assert!(!format!("{url:?}").contains("s3cret"));
        let no_password: DatabaseUrl = "postgres://app@db/claims".parse().unwrap();
        assert_eq!(no_password.to_string(), "postgres://app@db/claims");
    }
}
