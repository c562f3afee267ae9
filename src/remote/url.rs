//! A model file named by an http(s) URL (a Hugging Face `resolve` URL, a presigned link, a
//! server on the local network): its header read with the same range reader as LFS objects.

use std::path::Path;

use super::error::{RemoteError, shown_url};
use super::header::{RemoteHeader, read_header};
use super::http::{Client, HttpSettings};

/// Whether a command-line argument is an http(s) URL.
pub(crate) fn is_url(spec: &str) -> bool {
    let lower = spec.get(..8).unwrap_or(spec).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// Reads the header of the model at `url`. `headers` (`--header NAME: VALUE`) go to the URL's
/// own origin only; `HF_TOKEN` is sent as a bearer token to Hugging Face hosts.
pub(crate) fn read_url_header(
    url: &str,
    extra: &[(String, String)],
) -> Result<RemoteHeader, RemoteError> {
    let client = Client::new(&HttpSettings::default())?;
    let mut headers = extra.to_vec();
    let has_auth = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
    if !has_auth
        && is_hugging_face(url)
        && let Ok(token) = std::env::var("HF_TOKEN")
        && !token.is_empty()
    {
        headers.push(("Authorization".to_owned(), format!("Bearer {token}")));
    }
    read_header(&client, Path::new(&shown_url(url)), url, &headers, None)
}

/// Parses `NAME: VALUE` (as curl's `-H`).
pub(crate) fn parse_header(text: &str) -> Result<(String, String), RemoteError> {
    match text.split_once(':') {
        Some((name, value))
            if !name.trim().is_empty()
                && name
                    .trim()
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b':') =>
        {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(RemoteError::Config(
            "--header: expected NAME: VALUE (the value is not shown)".to_owned(),
        )),
    }
}

fn is_hugging_face(url: &str) -> bool {
    let Some(origin) = super::origins::origin(url) else {
        return false;
    };
    let host = origin.split_once("://").map_or("", |(_, rest)| {
        rest.rsplit_once(':').map_or(rest, |(h, _)| h)
    });
    ["huggingface.co", "hf.co"]
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_by_their_scheme() {
        assert!(is_url(
            "https://huggingface.co/x/resolve/main/m.safetensors"
        ));
        assert!(is_url("HTTP://127.0.0.1:8000/m.gguf"));
        assert!(!is_url("main:models/m.gguf"));
        assert!(!is_url("./https"));
    }

    #[test]
    fn hf_tokens_go_to_hugging_face_only() {
        assert!(is_hugging_face("https://huggingface.co/a/b/resolve/main/x"));
        assert!(is_hugging_face("https://cdn-lfs.hf.co/x"));
        assert!(!is_hugging_face("https://huggingface.co.evil.example/x"));
        assert!(!is_hugging_face("https://example.com/huggingface.co"));
    }

    #[test]
    fn headers_are_name_colon_value() {
        assert_eq!(
            parse_header("Authorization: Bearer x").unwrap(),
            ("Authorization".to_owned(), "Bearer x".to_owned())
        );
        let err = parse_header("no colon secret").unwrap_err().to_string();
        assert!(!err.contains("secret"));
    }
}
