//! Which server a URL points to, so that credentials go to the origin they were given for.

/// `scheme://host:port` of a URL (lowercase scheme and host; default ports made explicit), to
/// tell whether two URLs are the same origin: credentials never go to another one.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default_port = match scheme.as_str() {
        "https" => "443",
        "http" => "80",
        _ => return None,
    };
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host_port.starts_with('[') => {
            if port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty() {
                (host, port)
            } else {
                (host_port, default_port)
            }
        }
        _ => (host_port, default_port),
    };
    Some(format!("{scheme}://{}:{port}", host.to_ascii_lowercase()))
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
    }
}
