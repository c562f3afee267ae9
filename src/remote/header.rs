//! Reading only the header of a model over HTTP, in growing windows: `Range` requests for
//! each window (206), or — from a server that ignores `Range` and sends the whole object
//! (200) — the first bytes of that stream, which is dropped once the header is read. The core
//! says how far to read ([`crate::read::header_step`]); no format is parsed here.

use std::io::Read;
use std::path::Path;

use super::error::{RemoteError, shown_url};
use super::http::{Client, Request, Response};
use crate::artifact::Artifact;
use crate::read::{HeaderStep, header_step};

/// First window: a whole safetensors header of a few hundred tensors, or the start of a GGUF.
const FIRST_WINDOW: u64 = 256 * 1024;
/// Beyond what the GGUF parser needs next, a window reads at most this much ahead, so a
/// download is never more than this past the end of the header.
const MAX_READ_AHEAD: u64 = 1 << 20;

/// The header of a remote model: the bytes read (a prefix of the file) and their parse.
#[derive(Debug)]
pub(crate) struct RemoteHeader {
    pub prefix: Vec<u8>,
    /// The file's last bytes, where its header is there (a lossless `.wdelta`); else empty.
    pub tail: Vec<u8>,
    /// The size of the whole file.
    pub file_size: u64,
    pub parsed: Result<Artifact, crate::error::Error>,
}

impl RemoteHeader {
    /// What the bytes read are ([`crate::read::classify_ends`]), `name` naming the file.
    pub(crate) fn content(&self, name: &Path) -> crate::read::Content {
        crate::read::classify_ends(name, &self.prefix, &self.tail, self.file_size).unwrap_or_else(
            |(start, end)| {
                let why = format!(
                    "the header needs bytes {start}..{end} of the file's {}, more than were read",
                    self.file_size
                );
                crate::read::Content::BadDelta {
                    error: Box::new(crate::error::Error::io(name, std::io::Error::other(why))),
                }
            },
        )
    }
}

/// The most of a file's end read for a header kept there: the header cap and as much again
/// for a lossless `.wdelta`'s chunk index.
fn max_tail() -> u64 {
    crate::formats::limits::max_header_bytes().saturating_mul(2)
}

/// Reads the header of the file at `url` (sent `headers`, which are for that URL's origin
/// only). `expected_size`: the size the file must have (an LFS pointer's); None: learned from
/// the server. `name` names the file in parse errors.
pub(crate) fn read_header(
    client: &Client,
    name: &Path,
    url: &str,
    headers: &[(String, String)],
    expected_size: Option<u64>,
) -> Result<RemoteHeader, RemoteError> {
    let mut source = RangeSource {
        client,
        url,
        headers,
        size: expected_size,
        stream: None,
        stream_pos: 0,
        deadline: client.deadline(),
    };
    let mut prefix = Vec::new();
    let mut want = expected_size.map_or(FIRST_WINDOW, |size| size.min(FIRST_WINDOW));
    loop {
        source.fill(&mut prefix, want)?;
        let size = source.size.unwrap_or(prefix.len() as u64);
        let have = prefix.len() as u64;
        match header_step(name, &prefix, size) {
            HeaderStep::Parsed(parsed) => {
                let parsed = match parsed {
                    Ok(artifact) => source
                        .judge_zip_directory(name, &prefix, size)?
                        .map(|()| artifact),
                    Err(e) => Err(e),
                };
                let tail = source.delta_tail(name, &mut prefix, size)?;
                return Ok(RemoteHeader {
                    prefix,
                    tail,
                    file_size: size,
                    parsed,
                });
            }
            HeaderStep::Need { end, exact: true } => want = end,
            HeaderStep::Need { end, exact: false } => {
                want = end.max(have + have.min(MAX_READ_AHEAD)).min(size);
            }
        }
    }
}

/// Where the bytes come from: ranges of `url`, or the rest of a whole-object stream.
struct RangeSource<'a> {
    client: &'a Client,
    url: &'a str,
    headers: &'a [(String, String)],
    /// The file's size, once known.
    size: Option<u64>,
    /// The body of a 200 answer, positioned at `stream_pos`.
    stream: Option<ureq::BodyReader<'static>>,
    stream_pos: u64,
    /// When every request for this object must be over, its body read.
    deadline: std::time::Instant,
}

impl RangeSource<'_> {
    /// A header read from the first bytes of a zip checkpoint is judged against the central
    /// directory torch reads, at the end of the file: its last bytes are read (a second range)
    /// and must list exactly the members the prefix was read by. Ok(Err) when they do not: the
    /// file is refused, as a read of the whole file refuses it.
    fn judge_zip_directory(
        &mut self,
        name: &Path,
        prefix: &[u8],
        size: u64,
    ) -> Result<Result<(), crate::error::Error>, RemoteError> {
        use crate::formats::pytorch::{self, DirectoryCheck};
        let Some(mut start) = pytorch::zip_tail_start(prefix, size) else {
            return Ok(Ok(()));
        };
        loop {
            let tail = self.tail(prefix, start, size)?;
            match pytorch::check_zip_tail(prefix, &tail, start, size) {
                Ok(DirectoryCheck::Agrees) => return Ok(Ok(())),
                Ok(DirectoryCheck::ReadFrom(earlier)) => start = earlier,
                Err(source) => {
                    return Ok(Err(crate::error::Error::Pytorch {
                        path: name.to_owned(),
                        source: Box::new(source),
                    }));
                }
            }
        }
    }

    /// For a `.wdelta` whose header lies beyond `prefix`: a lossy one's (after the preamble)
    /// is read into `prefix`; a lossless one's (at the end of the file) into the returned tail,
    /// from the first offset its reading needs, within [`max_tail`]. Empty for anything else.
    fn delta_tail(
        &mut self,
        name: &Path,
        prefix: &mut Vec<u8>,
        size: u64,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut tail = Vec::new();
        if !crate::formats::wdelta::is_wdelta(prefix) {
            return Ok(tail);
        }
        let mut rounds = 0;
        // Each round reads more of one end: a lossless footer, header and index take three.
        while rounds < 6 {
            rounds += 1;
            let Err((start, end)) = crate::read::classify_ends(name, prefix, &tail, size) else {
                break;
            };
            let tail_start = size - tail.len() as u64;
            if end <= max_tail() && start <= prefix.len() as u64 && end < tail_start {
                self.fill(prefix, end)?;
            } else if size - start <= max_tail() && start < tail_start {
                // A window at once: the footer, then the header and index before it.
                let from = start
                    .min(size.saturating_sub(FIRST_WINDOW))
                    .max(prefix.len() as u64);
                tail = self.tail(prefix, from, size)?;
            } else {
                break;
            }
        }
        Ok(tail)
    }

    /// The file's bytes from `start` to its end (`size`), those in `prefix` taken from it.
    fn tail(&mut self, prefix: &[u8], start: u64, size: u64) -> Result<Vec<u8>, RemoteError> {
        let mut tail = usize::try_from(start)
            .ok()
            .and_then(|start| prefix.get(start..))
            .unwrap_or_default()
            .to_vec();
        self.fill_at(&mut tail, start, size)?;
        Ok(tail)
    }

    /// Extends `prefix` to `want` bytes (fewer only when the file is shorter and its size was
    /// not known in advance).
    fn fill(&mut self, prefix: &mut Vec<u8>, want: u64) -> Result<(), RemoteError> {
        self.fill_at(prefix, 0, want)
    }

    /// Extends `buf`, the file's bytes from offset `base`, to the file's offset `want`.
    fn fill_at(&mut self, buf: &mut Vec<u8>, base: u64, want: u64) -> Result<(), RemoteError> {
        let have = base + buf.len() as u64;
        if want <= have {
            return Ok(());
        }
        if have < self.stream_pos {
            // A stream only goes forward: bytes before it are asked for again.
            self.stream = None;
        }
        if let Some(stream) = &mut self.stream {
            // The bytes up to `have` are skipped.
            skip_exactly(
                self.url,
                stream,
                have.saturating_sub(self.stream_pos),
                self.deadline,
            )?;
            self.stream_pos = have.max(self.stream_pos);
            read_exactly(self.url, stream, buf, want - have, self.deadline)?;
            self.stream_pos = want;
            return Ok(());
        }
        let mut headers = self.headers.to_vec();
        headers.push(("Range".to_owned(), format!("bytes={have}-{}", want - 1)));
        let request = Request::get(self.url, headers, self.deadline);
        let response = self.client.send(&request)?;
        let status = response.status().as_u16();
        match status {
            206 => {
                let (start, end, total) = content_range(self.url, &response)?;
                self.check_size(total)?;
                let size = self.size.unwrap_or(total);
                self.size = Some(size);
                let expected_end = (want - 1).min(size - 1);
                if start != have || end != expected_end {
                    return Err(RemoteError::protocol(
                        self.url,
                        format!(
                            "asked for bytes {have}-{}, the server sent Content-Range \
                             bytes {start}-{end}/{total}",
                            want - 1
                        ),
                    ));
                }
                let len = end - start + 1;
                check_length(self.url, &response, len)?;
                let mut body = response.into_body().into_reader();
                read_exactly(self.url, &mut body, buf, len, self.deadline)
            }
            200 => {
                let length = response.body().content_length();
                if let Some(length) = length {
                    self.check_size(length)?;
                }
                let size = match (self.size, length) {
                    (Some(size), _) => size,
                    (None, Some(length)) => length,
                    (None, None) => {
                        return Err(RemoteError::protocol(
                            self.url,
                            "the server sent neither Content-Range nor Content-Length; the \
                             file's size is needed to read its header",
                        ));
                    }
                };
                self.size = Some(size);
                let mut body = response.into_body().into_reader();
                // The whole object from its start: skip what is already here.
                skip_exactly(self.url, &mut body, have, self.deadline)?;
                let result = read_exactly(
                    self.url,
                    &mut body,
                    buf,
                    want.min(size) - have,
                    self.deadline,
                );
                self.stream = Some(body);
                self.stream_pos = want.min(size);
                result
            }
            _ => Err(status_error(self.url, response)),
        }
    }

    /// A size the server states must be the one expected.
    fn check_size(&self, stated: u64) -> Result<(), RemoteError> {
        match self.size {
            Some(size) if size != stated => Err(RemoteError::protocol(
                self.url,
                format!("the server says the file has {stated} bytes, expected {size}"),
            )),
            _ => Ok(()),
        }
    }
}

/// Reads and drops exactly `len` bytes of `body`, 64 KiB at a time.
fn skip_exactly(
    url: &str,
    body: &mut impl Read,
    len: u64,
    deadline: std::time::Instant,
) -> Result<(), RemoteError> {
    const CHUNK: u64 = 64 * 1024;
    let mut window = Vec::with_capacity(CHUNK as usize);
    let mut rest = len;
    while rest > 0 {
        window.clear();
        read_exactly(url, body, &mut window, rest.min(CHUNK), deadline)?;
        rest -= window.len() as u64;
    }
    Ok(())
}

/// Appends exactly `len` bytes of `body` to `buf`; a body that ends earlier is an error.
fn read_exactly(
    url: &str,
    body: &mut impl Read,
    buf: &mut Vec<u8>,
    len: u64,
    deadline: std::time::Instant,
) -> Result<(), RemoteError> {
    let before = buf.len() as u64;
    let read = body.take(len).read_to_end(buf);
    let got = buf.len() as u64 - before;
    match read {
        Err(_) if std::time::Instant::now() >= deadline => Err(super::http::deadline_passed(
            url,
            &format!("after {got} of {len} bytes of the body"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut || e.to_string().contains("timeout") => {
            Err(RemoteError::Transport {
                url: shown_url(url),
                message: format!(
                    "timed out waiting for the body after {got} of {len} bytes (the server \
                     stalled; see lfs.activitytimeout)"
                ),
            })
        }
        Err(e) => Err(RemoteError::Transport {
            url: shown_url(url),
            message: format!("reading the body after {got} of {len} bytes: {e}"),
        }),
        Ok(_) if got < len => Err(RemoteError::protocol(
            url,
            format!("the body ended after {got} of {len} bytes"),
        )),
        Ok(_) => Ok(()),
    }
}

/// `Content-Range: bytes START-END/TOTAL` (TOTAL may not be `*`: the size is needed).
fn content_range(url: &str, response: &Response) -> Result<(u64, u64, u64), RemoteError> {
    let value = response
        .headers()
        .get("content-range")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    parse_content_range(value).ok_or_else(|| {
        RemoteError::protocol(
            url,
            format!(
                "HTTP 206 with Content-Range {:?}, expected bytes START-END/SIZE",
                value.chars().take(80).collect::<String>()
            ),
        )
    })
}

/// `bytes START-END/TOTAL` with START ≤ END < TOTAL, digits only; None for anything else.
pub fn parse_content_range(value: &str) -> Option<(u64, u64, u64)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    let (start, end, total) = (number(start)?, number(end)?, number(total)?);
    (start <= end && end < total).then_some((start, end, total))
}

/// A body longer than the range it answers is refused before it is read.
fn check_length(url: &str, response: &Response, expected: u64) -> Result<(), RemoteError> {
    match response.body().content_length() {
        Some(length) if length != expected => Err(RemoteError::protocol(
            url,
            format!("Content-Length {length} for a range of {expected} bytes"),
        )),
        _ => Ok(()),
    }
}

/// The error for a status that is no answer to a download: the status, and a short excerpt of
/// a plain or JSON message the server gave (escaped, never a header).
pub(super) fn status_error(url: &str, response: Response) -> RemoteError {
    let status = response.status().as_u16();
    let mut text = String::new();
    let _ = response
        .into_body()
        .into_reader()
        .take(4096)
        .read_to_string(&mut text);
    RemoteError::Status {
        url: shown_url(url),
        status,
        detail: status_detail(status, &text),
    }
}

/// What follows "the server answered HTTP STATUS" for a body `text`: a hint for the status,
/// and the JSON `message` (or the text) cut to 200 characters and escaped.
pub fn status_detail(status: u16, text: &str) -> String {
    let message = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| text.to_owned());
    let message: String = message.trim().chars().take(200).collect();
    let hint = match status {
        401 => " (no valid credentials)",
        403 => " (forbidden; a download link may have expired)",
        404 => " (not found)",
        410 => " (gone)",
        416 => " (range not satisfiable: the file is shorter than expected)",
        _ => "",
    };
    if message.is_empty() {
        hint.to_owned()
    } else {
        format!("{hint}: {}", crate::escape::shown(&message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_are_parsed_strictly() {
        assert_eq!(parse_content_range("bytes 0-9/100"), Some((0, 9, 100)));
        for bad in [
            "bytes 0-9/*",
            "bytes 9-0/100",
            "bytes 0-100/100",
            "bytes=0-9/100",
            "bytes -9/100",
            "bytes +0-9/100",
            "",
        ] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
    }
}
