//! The HTTP client: ureq with rustls, the system's root certificates (or the CA file git is
//! told to use), proxies from git config or the environment, connect and activity timeouts,
//! bounded retries with backoff on 429 and 5xx (honoring `Retry-After`), and redirects followed
//! here so that no header goes to another origin than the one it was given for.

use std::path::PathBuf;
use std::time::Duration;

use ureq::tls::{RootCerts, TlsConfig};

use super::error::{RemoteError, shown_url};
use super::origins::origin;

/// How to reach servers; the git adapter's LFS server discovery says where git keeps each value.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// PEM file of the only roots to trust (`http.sslCAInfo`, `GIT_SSL_CAINFO`); None: the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// `http.proxy`; None: `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`.
    pub proxy: Option<String>,
    pub connect_timeout: Duration,
    /// Longest wait for any one read from the server (a stalled server ends in an error).
    pub activity_timeout: Duration,
    /// Further tries of a request after a 429, a 5xx or a failed connection.
    pub retries: u32,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            ca_file: None,
            proxy: None,
            connect_timeout: Duration::from_secs(30),
            activity_timeout: Duration::from_secs(30),
            retries: 3,
        }
    }
}

/// The longest wait a `Retry-After` can impose before a retry.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// Redirects followed for one request.
const MAX_REDIRECTS: u32 = 5;

/// A request: method, URL, headers and body. Headers are sent to `url`'s origin only.
#[derive(Debug, Clone)]
pub struct Request {
    pub post: bool,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn get(url: &str, headers: Vec<(String, String)>) -> Request {
        Request {
            post: false,
            url: url.to_owned(),
            headers,
            body: Vec::new(),
        }
    }
}

pub type Response = ureq::http::Response<ureq::Body>;

#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    retries: u32,
}

impl Client {
    pub fn new(settings: &HttpSettings) -> Result<Client, RemoteError> {
        let roots = match &settings.ca_file {
            Some(file) => RootCerts::new_with_certs(&read_pem_certs(file)?),
            None => RootCerts::PlatformVerifier,
        };
        let proxy = match &settings.proxy {
            Some(value) => Some(ureq::Proxy::new(value).map_err(|e| {
                RemoteError::Config(format!(
                    "http.proxy {}: {e}",
                    crate::escape::shown(&shown_url(value))
                ))
            })?),
            None => ureq::Proxy::try_from_env(),
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .proxy(proxy)
            .timeout_connect(Some(settings.connect_timeout))
            .timeout_per_read(Some(settings.activity_timeout))
            .timeout_recv_response(Some(settings.activity_timeout))
            .user_agent(concat!("weight-inspect/", env!("CARGO_PKG_VERSION")))
            // Ranges of compressed bodies would not be ranges of the object.
            .accept_encoding("identity")
            .build();
        Ok(Client {
            agent: config.new_agent(),
            retries: settings.retries,
        })
    }

    /// Sends `request`, retrying 429, 5xx and failed connections with backoff and following
    /// redirects; the response's status is whatever the server finally said.
    pub fn send(&self, request: &Request) -> Result<Response, RemoteError> {
        let mut current = request.clone();
        let mut redirects = 0;
        loop {
            let response = self.send_with_retries(&current)?;
            let status = response.status().as_u16();
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok(response);
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                return Err(RemoteError::protocol(
                    &request.url,
                    format!("more than {MAX_REDIRECTS} redirects"),
                ));
            }
            let Some(location) = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
            else {
                return Err(RemoteError::protocol(
                    &current.url,
                    format!("HTTP {status} without a Location"),
                ));
            };
            let next = resolve_location(&current.url, location);
            // Headers (credentials) were given for one origin: another gets only those that
            // describe the request itself.
            if origin(&next) != origin(&current.url) {
                current.headers.retain(|(name, _)| {
                    ["range", "accept", "content-type"]
                        .contains(&name.to_ascii_lowercase().as_str())
                });
            }
            if status == 303 {
                current.post = false;
                current.body.clear();
            }
            current.url = next;
        }
    }

    fn send_with_retries(&self, request: &Request) -> Result<Response, RemoteError> {
        let mut attempt = 0;
        loop {
            let result = self.send_once(request);
            let wait = match &result {
                Ok(response) => {
                    let status = response.status().as_u16();
                    if status != 429 && !(500..=599).contains(&status) {
                        return result;
                    }
                    retry_after(response).unwrap_or_else(|| backoff(attempt))
                }
                Err(RemoteError::Transport { .. }) => backoff(attempt),
                Err(_) => return result,
            };
            if attempt >= self.retries {
                return result;
            }
            attempt += 1;
            std::thread::sleep(wait.min(MAX_RETRY_WAIT));
        }
    }

    fn send_once(&self, request: &Request) -> Result<Response, RemoteError> {
        // Failed connections and timeouts are worth another try; a certificate that is not
        // trusted or a malformed answer is not.
        let transport = |e: ureq::Error| {
            let message = describe(&e);
            if message.starts_with("TLS: ") || matches!(e, ureq::Error::BadUri(_)) {
                RemoteError::protocol(&request.url, message)
            } else {
                RemoteError::Transport {
                    url: shown_url(&request.url),
                    message,
                }
            }
        };
        if request.post {
            let mut builder = self.agent.post(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            builder.send(&request.body[..]).map_err(transport)
        } else {
            let mut builder = self.agent.get(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            builder.call().map_err(transport)
        }
    }
}

/// ureq's error, phrased without any part of the request (no URL with credentials, no header).
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(what) => format!("timed out ({what})"),
        ureq::Error::Io(io) => {
            let text = io.to_string();
            // rustls's verdicts reach us as I/O errors.
            if text.contains("certificate") || text.contains("handshake") {
                format!("TLS: {text} (see http.sslCAInfo / GIT_SSL_CAINFO)")
            } else {
                text
            }
        }
        ureq::Error::HostNotFound => "host not found".to_owned(),
        ureq::Error::ConnectionFailed => "connection failed".to_owned(),
        ureq::Error::BadUri(_) => "not a valid URL".to_owned(),
        ureq::Error::Tls(message) => {
            format!("TLS: {message} (see http.sslCAInfo / GIT_SSL_CAINFO)")
        }
        ureq::Error::Rustls(err) => format!("TLS: {err} (see http.sslCAInfo / GIT_SSL_CAINFO)"),
        other => other.to_string(),
    }
}

/// Exponential backoff: 250 ms, 500 ms, 1 s, ...
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64 << attempt.min(6))
}

/// A `Retry-After` in seconds (the date form is rare for these servers and waits the default).
fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get("retry-after")?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// A `Location` relative to the URL it answered.
fn resolve_location(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_owned();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some(path) = location.strip_prefix('/') {
        if let Some(host_path) = path.strip_prefix('/') {
            return format!("{scheme}://{host_path}");
        }
        return format!("{scheme}://{authority}/{path}");
    }
    let base_path = rest[authority.len()..]
        .split(['?', '#'])
        .next()
        .unwrap_or("/");
    let dir = base_path.rsplit_once('/').map_or("", |(dir, _)| dir);
    format!("{scheme}://{authority}{dir}/{location}")
}

/// The certificates of a PEM file.
fn read_pem_certs(
    file: &std::path::Path,
) -> Result<Vec<ureq::tls::Certificate<'static>>, RemoteError> {
    let bytes = std::fs::read(file).map_err(|e| {
        RemoteError::Config(format!(
            "{}: cannot read the CA file: {e}",
            crate::escape::shown_path(file)
        ))
    })?;
    let certs: Vec<_> = ureq::tls::parse_pem(&bytes)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(cert)) => Some(cert),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(RemoteError::Config(format!(
            "{}: no PEM certificate in the CA file",
            crate::escape::shown_path(file)
        )));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve_against_the_request() {
        let base = "http://a:1/x/y?q";
        assert_eq!(resolve_location(base, "http://b/z"), "http://b/z");
        assert_eq!(resolve_location(base, "/z"), "http://a:1/z");
        assert_eq!(resolve_location(base, "//b:2/z"), "http://b:2/z");
        assert_eq!(resolve_location(base, "z"), "http://a:1/x/z");
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        assert!(backoff(0) < backoff(1));
        assert_eq!(backoff(10), backoff(6));
    }
}
