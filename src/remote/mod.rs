//! Reading model headers over HTTP: only the header bytes of a model file are downloaded, with
//! `Range` requests (or from the start of a whole-object stream that is dropped once the header
//! is read). Used for Git LFS objects that are not present locally (the LFS batch API,
//! [`batch`]) and for model files named by an http(s) URL ([`url`]).
//!
//! This module knows HTTP and the LFS protocol, not git: the git adapter finds the server and
//! its credentials (the git adapter's LFS server discovery) and hands them over as an [`Endpoint`].

mod batch;
mod cache;
mod header;
mod http;
mod url;

// The face of the remote adapter: what git's LFS reading, the input seam and the command line
// use.
pub(crate) use batch::{Credential, CredentialSource, Endpoint, download_actions};
// Also what the crate's `network` face gives the fuzz targets.
pub(crate) use self::url::{is_url, parse_header, read_url_header};
pub use batch::{LfsObject, ObjectOutcome, parse_batch_response};
pub(crate) use cache::HeaderCache;
pub(crate) use header::{RemoteHeader, read_header};
pub use header::{parse_content_range, status_detail};
pub(crate) use http::{Client, HttpSettings};

use crate::escape::shown;

/// Errors of reading over HTTP. Every message names the URL without its credentials or query
/// string ([`shown_url`]), shown escaped as every name is; no header value (a token) is ever
/// part of a message.
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
pub fn shown_url(url: &str) -> String {
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

/// `scheme://host:port` of an http(s) URL (parsed by the `url` crate: lowercase scheme and
/// host, default ports made explicit), to tell whether two URLs are the same origin:
/// credentials never go to another one. None for anything else.
pub fn origin(url: &str) -> Option<String> {
    let parsed = ::url::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let host = parsed.host_str()?;
    let port = parsed.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", parsed.scheme()))
}

/// Whether `a` and `b` are http(s) URLs of the same origin (scheme, host and port). A
/// credential given for one may be judged only by an answer from the other when this holds.
pub fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin(a), origin(b)), (Some(a), Some(b)) if a == b)
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

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert_eq!(
            origin("https://u:p@Host.example/x").as_deref(),
            Some("https://host.example:443")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/x?y").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_ne!(origin("http://a:1/"), origin("http://a:2/"));
        assert_eq!(origin("ftp://a/"), None);
        assert_eq!(origin("not a url"), None);
    }

    #[test]
    fn same_origin_needs_scheme_host_and_port_to_agree() {
        assert!(same_origin(
            "https://lfs.example/r.git/info/lfs",
            "HTTPS://u:p@LFS.example:443/other?q"
        ));
        assert!(same_origin(
            "http://127.0.0.1:8080/a",
            "http://127.0.0.1:8080/b"
        ));
        assert!(!same_origin(
            "http://127.0.0.1:8080/a",
            "http://127.0.0.1:8081/a"
        ));
        assert!(!same_origin(
            "http://lfs.example/a",
            "https://lfs.example/a"
        ));
        assert!(!same_origin(
            "https://lfs.example/a",
            "https://cdn.lfs.example/a"
        ));
        // A user part that looks like a host does not make the origin.
        assert!(!same_origin(
            "https://lfs.example@evil.example/a",
            "https://lfs.example/a"
        ));
        assert!(!same_origin("ftp://lfs.example/a", "ftp://lfs.example/a"));
        assert!(!same_origin("", ""));
    }
}
