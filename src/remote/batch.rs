//! The Git LFS batch API (git-lfs docs/api/batch.md): one `POST {endpoint}/objects/batch` per
//! 100 objects asks where to download them; each answer is an href with the headers to send
//! to it, or a per-object error (404, 410, 422, ...).

use std::io::Read;

use serde::{Deserialize, Serialize};

use super::error::{RemoteError, shown_url};
use super::http::{Client, Request};
use super::origins::origin;

const MEDIA_TYPE: &str = "application/vnd.git-lfs+json";
/// Objects per batch request (the API's recommended maximum).
const CHUNK: usize = 100;
/// A batch answer for 100 objects is a few tens of KiB; anything past this is refused.
const MAX_RESPONSE: u64 = 16 << 20;

/// An LFS server: its URL (`.../info/lfs`, without credentials) and the headers every
/// request to it carries (`http.<url>.extraHeader`, `Authorization` from URL credentials or
/// an SSH `git-lfs-authenticate`).
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// `lfs.<url>.access = basic`: ask for credentials before the first request.
    pub basic_access: bool,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are credentials: only their names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("url", &shown_url(&self.url))
            .field("headers", &names)
            .finish()
    }
}

/// A user name and password, for HTTP basic authentication.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

impl Credential {
    pub(crate) fn authorization(&self) -> String {
        use base64::Engine;
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// Where credentials come from when a server asks for them (git's credential helpers).
pub(crate) trait CredentialSource: Sync {
    /// Credentials for `url`, or None when there are none to be had (no prompting).
    fn fill(&self, url: &str) -> Option<Credential>;
    /// The server took them: helpers may store them.
    fn approve(&self, url: &str, credential: &Credential);
    /// The server refused them: helpers forget them.
    fn reject(&self, url: &str, credential: &Credential);
}

/// An object to download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LfsObject {
    /// The object's SHA-256 (hex).
    pub oid: String,
    /// Bytes of the object.
    pub size: u64,
}

/// Where to get one object: the href and the headers to send there (and nowhere else).
#[derive(Clone, Deserialize)]
pub struct Action {
    pub href: String,
    #[serde(default)]
    pub header: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Action")
            .field("href", &shown_url(&self.href))
            .finish()
    }
}

impl Action {
    pub fn headers(&self) -> Vec<(String, String)> {
        self.header
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// The server's answer for one object.
#[derive(Debug, Clone)]
pub enum ObjectOutcome {
    /// Where to download the object from.
    Download(Action),
    /// A per-object error: its code (404 missing, 410 removed, 422 invalid, ...) and message.
    Failed {
        /// The error code.
        code: u32,
        /// The server's message.
        message: String,
    },
}

#[derive(Serialize)]
struct BatchRequest<'a> {
    operation: &'static str,
    transfers: [&'static str; 1],
    objects: &'a [LfsObject],
    hash_algo: &'static str,
}

#[derive(Deserialize)]
struct BatchResponse {
    #[serde(default)]
    transfer: Option<String>,
    objects: Vec<ResponseObject>,
}

#[derive(Deserialize)]
struct ResponseObject {
    oid: String,
    #[serde(default)]
    actions: Option<Actions>,
    #[serde(default)]
    error: Option<ObjectError>,
}

#[derive(Deserialize)]
struct Actions {
    download: Option<Action>,
}

#[derive(Deserialize)]
struct ObjectError {
    code: u32,
    #[serde(default)]
    message: String,
}

/// Asks `endpoint` where to download `objects`: one outcome per object, in order. A 401 asks
/// `credentials` once per call; the credential that worked is kept for later chunks.
pub(crate) fn download_actions(
    client: &Client,
    endpoint: &Endpoint,
    credentials: &dyn CredentialSource,
    objects: &[LfsObject],
) -> Result<Vec<ObjectOutcome>, RemoteError> {
    let url = format!("{}/objects/batch", endpoint.url.trim_end_matches('/'));
    let mut credential = if endpoint.basic_access {
        credentials.fill(&endpoint.url)
    } else {
        None
    };
    let mut outcomes = Vec::with_capacity(objects.len());
    for chunk in objects.chunks(CHUNK) {
        let body = serde_json::to_vec(&BatchRequest {
            operation: "download",
            transfers: ["basic"],
            objects: chunk,
            hash_algo: "sha256",
        })
        .expect("JSON of plain data cannot fail");
        let mut asked = false;
        let response = loop {
            let mut headers = vec![
                ("Accept".to_owned(), MEDIA_TYPE.to_owned()),
                ("Content-Type".to_owned(), MEDIA_TYPE.to_owned()),
            ];
            headers.extend(endpoint.headers.iter().cloned());
            if let Some(c) = &credential {
                headers.retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
                headers.push(("Authorization".to_owned(), c.authorization()));
            }
            let request = Request {
                post: true,
                url: url.clone(),
                headers,
                body: body.clone(),
                deadline: client.deadline(),
            };
            let (response, answered_by) = client.send_following(&request)?;
            // Only the endpoint's own origin judges the credential it was given (after a
            // redirect, another origin never saw it).
            let judged = super::origins::same_origin(&answered_by, &endpoint.url);
            if response.status().as_u16() != 401 || asked || !judged {
                if let Some(c) = credential.as_ref().filter(|_| judged) {
                    match response.status().as_u16() {
                        401 | 403 => credentials.reject(&endpoint.url, c),
                        200..=299 if asked => credentials.approve(&endpoint.url, c),
                        _ => {}
                    }
                }
                break response;
            }
            asked = true;
            match credentials.fill(&endpoint.url) {
                Some(c) if Some(&c) != credential.as_ref() => credential = Some(c),
                _ => break response,
            }
        };
        if response.status().as_u16() != 200 {
            return Err(super::header::status_error(&url, response));
        }
        let mut text = Vec::new();
        response
            .into_body()
            .into_reader()
            .take(MAX_RESPONSE)
            .read_to_end(&mut text)
            .map_err(|e| RemoteError::Transport {
                url: shown_url(&url),
                message: format!("reading the batch response: {e}"),
            })?;
        outcomes.extend(parse_batch_response(&url, &text, chunk)?);
    }
    Ok(outcomes)
}

/// The outcome for each of `objects` (in order) in `text`, the body of a batch response from
/// `url`: a download action with an http(s) link, or the reason there is none. Err when the
/// body is not a batch response or chose another transfer adapter than "basic".
pub fn parse_batch_response(
    url: &str,
    text: &[u8],
    objects: &[LfsObject],
) -> Result<Vec<ObjectOutcome>, RemoteError> {
    let parsed: BatchResponse = serde_json::from_slice(text)
        .map_err(|e| RemoteError::protocol(url, format!("the batch response is not valid: {e}")))?;
    if let Some(transfer) = parsed.transfer.as_deref()
        && transfer != "basic"
    {
        return Err(RemoteError::protocol(
            url,
            format!(
                "the server chose the transfer adapter \"{}\", expected \"basic\"",
                crate::escape::shown(transfer)
            ),
        ));
    }
    Ok(objects
        .iter()
        .map(|object| outcome_of(&parsed, object))
        .collect())
}

fn outcome_of(response: &BatchResponse, object: &LfsObject) -> ObjectOutcome {
    let Some(answer) = response.objects.iter().find(|o| o.oid == object.oid) else {
        return ObjectOutcome::Failed {
            code: 0,
            message: "the server's batch answer does not mention this object".to_owned(),
        };
    };
    if let Some(error) = &answer.error {
        return ObjectOutcome::Failed {
            code: error.code,
            message: error.message.chars().take(200).collect(),
        };
    }
    match answer.actions.as_ref().and_then(|a| a.download.clone()) {
        Some(action) if origin(&action.href).is_some() => ObjectOutcome::Download(action),
        Some(_) => ObjectOutcome::Failed {
            code: 0,
            message: "the server's download link is not an http(s) URL".to_owned(),
        },
        None => ObjectOutcome::Failed {
            code: 0,
            message: "the server gave no download action for this object".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(c: char) -> LfsObject {
        LfsObject {
            oid: c.to_string().repeat(64),
            size: 1,
        }
    }

    #[test]
    fn each_object_gets_its_outcome_in_order() {
        let (a, b, c) = (object('a'), object('b'), object('c'));
        let body = format!(
            r#"{{"objects":[
                {{"oid":"{}","error":{{"code":404,"message":"{}"}}}},
                {{"oid":"{}","actions":{{"download":{{"href":"file:///etc/passwd"}}}}}},
                {{"oid":"{}","actions":{{"download":{{"href":"https://cdn.example/x"}}}}}}]}}"#,
            b.oid,
            "x".repeat(300),
            c.oid,
            a.oid
        );
        let outcomes = parse_batch_response("https://lfs/b", body.as_bytes(), &[a, b, c]).unwrap();
        assert!(
            matches!(&outcomes[0], ObjectOutcome::Download(action) if action.href == "https://cdn.example/x")
        );
        assert!(
            matches!(&outcomes[1], ObjectOutcome::Failed { code: 404, message } if message.len() == 200)
        );
        assert!(
            matches!(&outcomes[2], ObjectOutcome::Failed { code: 0, message } if message.contains("not an http(s) URL"))
        );
        let err = parse_batch_response("https://lfs/b", br#"{"transfer":"ssh","objects":[]}"#, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"ssh\""), "{err}");
        assert!(parse_batch_response("https://lfs/b", b"<html>", &[]).is_err());
    }
}
