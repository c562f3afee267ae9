//! The HTTP client: ureq with rustls, the system's root certificates (or the CA file git is
//! told to use), proxies from git config or the environment, connect and activity timeouts,
//! bounded retries with backoff on 429 and 5xx (honoring `Retry-After`), and redirects followed
//! here so that no header goes to another origin than the one it was given for.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ureq::tls::{RootCerts, TlsConfig};

use super::error::{RemoteError, shown_url};
use super::origins::origin;

/// How to reach servers; the git adapter's LFS server discovery says where git keeps each value.
#[derive(Debug, Clone)]
pub(crate) struct HttpSettings {
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
    /// Longest time spent on the header of one object (every request and retry for it): a
    /// server that trickles bytes, each within the activity timeout, still ends here.
    pub object_deadline: Duration,
    /// Longest time one command spends on a server, from its first request: past it, every
    /// object not read yet is reported unreadable.
    pub command_deadline: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            ca_file: None,
            proxy: None,
            connect_timeout: Duration::from_secs(30),
            activity_timeout: Duration::from_secs(30),
            retries: 3,
            object_deadline: DEFAULT_OBJECT_DEADLINE,
            command_deadline: DEFAULT_COMMAND_DEADLINE,
        }
    }
}

/// The default of [`HttpSettings::object_deadline`] (`weight-inspect.lfsObjectDeadline`).
pub(super) const DEFAULT_OBJECT_DEADLINE: Duration = Duration::from_secs(120);
/// The default of [`HttpSettings::command_deadline`] (`weight-inspect.lfsDeadline`).
pub(super) const DEFAULT_COMMAND_DEADLINE: Duration = Duration::from_secs(600);

/// The longest wait a `Retry-After` can impose before a retry.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// Redirects followed for one request.
const MAX_REDIRECTS: u32 = 5;

/// A request: method, URL, headers and body. Headers are sent to `url`'s origin only.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub post: bool,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the request, its retries and the reading of its body must be over (see
    /// [`Client::deadline`]).
    pub deadline: Instant,
}

impl Request {
    pub(crate) fn get(url: &str, headers: Vec<(String, String)>, deadline: Instant) -> Request {
        Request {
            post: false,
            url: url.to_owned(),
            headers,
            body: Vec::new(),
            deadline,
        }
    }
}

pub(super) type Response = ureq::http::Response<ureq::Body>;

#[derive(Debug, Clone)]
pub(crate) struct Client {
    agent: ureq::Agent,
    retries: u32,
    object_deadline: Duration,
    /// The end of this command's time with the server (its start plus the command deadline).
    command_end: Instant,
}

impl Client {
    pub(crate) fn new(settings: &HttpSettings) -> Result<Client, RemoteError> {
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
            object_deadline: settings.object_deadline,
            command_end: Instant::now() + settings.command_deadline,
        })
    }

    /// The deadline of what starts now for one object (or one batch request): the object
    /// deadline from now, or the command's end if that comes first.
    pub(crate) fn deadline(&self) -> Instant {
        (Instant::now() + self.object_deadline).min(self.command_end)
    }

    /// Sends `request`, retrying 429, 5xx and failed connections with backoff and following
    /// redirects; the response's status is whatever the server finally said.
    pub(crate) fn send(&self, request: &Request) -> Result<Response, RemoteError> {
        self.send_following(request).map(|(response, _)| response)
    }

    /// [`Self::send`], with the URL that gave the final answer (another than the request's
    /// after a redirect): whose verdict on a credential it is.
    pub(crate) fn send_following(
        &self,
        request: &Request,
    ) -> Result<(Response, String), RemoteError> {
        let mut current = request.clone();
        let mut redirects = 0;
        loop {
            let response = self.send_with_retries(&current)?;
            let status = response.status().as_u16();
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok((response, current.url));
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
            let Some(next) = resolve_location(&current.url, location) else {
                return Err(RemoteError::protocol(
                    &current.url,
                    format!("HTTP {status} with a Location that is not an http(s) URL"),
                ));
            };
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
            if Instant::now() >= request.deadline {
                return Err(deadline_passed(&request.url, "before the request was sent"));
            }
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
            let wait = wait.min(MAX_RETRY_WAIT);
            if attempt >= self.retries || Instant::now() + wait >= request.deadline {
                return result;
            }
            attempt += 1;
            std::thread::sleep(wait);
        }
    }

    fn send_once(&self, request: &Request) -> Result<Response, RemoteError> {
        // Failed connections and timeouts are worth another try; a certificate that is not
        // trusted or a malformed answer is not.
        let transport = |e: ureq::Error| {
            if Instant::now() >= request.deadline {
                return deadline_passed(&request.url, "waiting for the answer");
            }
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
        // ureq's global timeout covers the whole call, the reading of the body included.
        let left = Some(request.deadline.saturating_duration_since(Instant::now()));
        if request.post {
            let mut builder = self.agent.post(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            let builder = builder.config().timeout_global(left).build();
            builder.send(&request.body[..]).map_err(transport)
        } else {
            let mut builder = self.agent.get(&request.url);
            for (name, value) in &request.headers {
                builder = builder.header(name, value);
            }
            let builder = builder.config().timeout_global(left).build();
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

/// The error of a request whose deadline passed (not retried).
pub(crate) fn deadline_passed(url: &str, when: &str) -> RemoteError {
    RemoteError::protocol(
        url,
        format!(
            "the deadline for reading from the LFS server passed {when} (see \
             weight-inspect.lfsObjectDeadline and weight-inspect.lfsDeadline)"
        ),
    )
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

/// A `Location` resolved against the URL it answered (RFC 3986, by the `url` crate: `..`
/// and `.` segments, scheme-relative and absolute locations); None unless it is http(s).
fn resolve_location(base: &str, location: &str) -> Option<String> {
    let next = url::Url::parse(base).ok()?.join(location).ok()?;
    matches!(next.scheme(), "http" | "https").then(|| next.to_string())
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
        let resolved = |location| resolve_location(base, location);
        assert_eq!(resolved("http://b/z").as_deref(), Some("http://b/z"));
        assert_eq!(resolved("/z").as_deref(), Some("http://a:1/z"));
        assert_eq!(resolved("//b:2/z").as_deref(), Some("http://b:2/z"));
        assert_eq!(resolved("z").as_deref(), Some("http://a:1/x/z"));
        assert_eq!(resolved("../z?s=1").as_deref(), Some("http://a:1/z?s=1"));
        assert_eq!(resolved("./w/../z").as_deref(), Some("http://a:1/x/z"));
        assert_eq!(resolved("/../../z").as_deref(), Some("http://a:1/z"));
        assert_eq!(resolved("file:///etc/passwd"), None);
    }

    #[test]
    fn backoff_grows_and_is_bounded() {
        assert!(backoff(0) < backoff(1));
        assert_eq!(backoff(10), backoff(6));
    }
}
