//! Which server a URL points to, so that credentials go to the origin they were given for.

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
pub(super) fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin(a), origin(b)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

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
