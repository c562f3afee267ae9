//! Errors of reading over HTTP, and the one way a message shows a URL.

use crate::escape::shown;

/// Errors of reading over HTTP. Every message names the URL without its credentials or query
/// string ([`shown_url`]), shown escaped as every name is; no header value (a token) is ever
/// part of a message.
#[allow(
    missing_docs,
    reason = "each variant\'s #[error] message documents it, with the fields it prints"
)]
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{}: {message}", shown(.url))]
    Transport { url: String, message: String },
    #[error("{}: the server answered HTTP {status}{detail}", shown(.url))]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("{}: {message}", shown(.url))]
    Protocol { url: String, message: String },
    #[error("{0}")]
    Config(String),
}

impl RemoteError {
    /// The HTTP status of a refused request, if that is what this is.
    pub fn status(&self) -> Option<u16> {
        match self {
            RemoteError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    pub(crate) fn protocol(url: &str, message: impl Into<String>) -> RemoteError {
        RemoteError::Protocol {
            url: shown_url(url),
            message: message.into(),
        }
    }
}

/// A URL as messages show it: scheme, host, port and path, without user, password or query
/// (presigned URLs carry their signature there).
pub(crate) fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => return url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_urls_carry_no_secret() {
        assert_eq!(
            shown_url("https://user:tok@host.example/a/b.git/info/lfs?x=1#f"),
            "https://host.example/a/b.git/info/lfs"
        );
        assert_eq!(shown_url("http://h:8080"), "http://h:8080");
    }
}
