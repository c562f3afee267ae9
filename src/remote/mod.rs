//! Reading model headers over HTTP: only the header bytes of a model file are downloaded, with
//! `Range` requests (or from the start of a whole-object stream that is dropped once the header
//! is read). Used for Git LFS objects that are not present locally (the LFS batch API,
//! [`batch`]) and for model files named by an http(s) URL ([`url`]).
//!
//! This module knows HTTP and the LFS protocol, not git: the git adapter finds the server and
//! its credentials (the git adapter's LFS server discovery) and hands them over as an [`Endpoint`].

mod batch;
mod cache;
mod error;
mod header;
mod http;
mod origins;
mod url;

// The face of the remote adapter: what git's LFS reading, the input seam and the command line
// use.
pub(crate) use batch::{Credential, CredentialSource, Endpoint, download_actions};
// Also what the crate's `network` face gives the fuzz targets.
pub(crate) use self::url::{is_url, parse_header, read_url_header};
pub use batch::{LfsObject, ObjectOutcome, parse_batch_response};
pub(crate) use cache::HeaderCache;
pub use error::RemoteError;
pub(crate) use error::shown_url;
pub(crate) use header::{RemoteHeader, read_header};
pub use header::{parse_content_range, status_detail};
pub(crate) use http::{Client, HttpSettings};
pub use origins::origin;
