//! Git LFS pointer files and the local object store.
//!
//! A pointer is what git stores for an LFS-tracked file (spec: git-lfs docs/spec.md):
//!
//! ```text
//! version https://git-lfs.github.com/spec/v1
//! oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
//! size 12345
//! ```
//!
//! The content lives in `<lfs storage>/objects/OID[0:2]/OID[2:4]/OID`, where the storage is
//! `<common git dir>/lfs` unless `lfs.storage` says otherwise.

use std::fmt;
use std::path::{Path, PathBuf};

/// git-lfs only treats blobs smaller than this as possible pointers.
pub(crate) const MAX_POINTER_SIZE: usize = 1024;

/// The current version URL and the one of the pre-release ("hawser") pointers.
const VERSIONS: [&str; 2] = [
    "https://git-lfs.github.com/spec/v1",
    "https://hawser.github.com/spec/v1",
];

/// A parsed LFS pointer: the SHA-256 of the content and its size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pointer {
    /// 64 lowercase hex digits (without the `sha256:` prefix).
    pub oid: String,
    /// Bytes of the object.
    pub size: u64,
}

impl Pointer {
    /// Parses `bytes` as a pointer file, strictly: `version` first, then the other keys sorted,
    /// one `key value\n` per line, `oid sha256:<64 lowercase hex>`, `size <decimal>`, extension
    /// lines `ext-N-name sha256:<hex>` allowed. Anything else (including every model file) is None.
    pub fn parse(bytes: &[u8]) -> Option<Pointer> {
        if bytes.len() >= MAX_POINTER_SIZE || !bytes.starts_with(b"version ") {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let body = text.strip_suffix('\n')?;
        let mut lines = body.split('\n');
        let (key, version) = lines.next()?.split_once(' ')?;
        if key != "version" || !VERSIONS.contains(&version) {
            return None;
        }
        let mut oid = None;
        let mut size = None;
        let mut previous_key = "";
        for line in lines {
            let (key, value) = line.split_once(' ')?;
            // Keys after `version` are sorted and unique; `version` itself may not repeat.
            if key <= previous_key || key == "version" || !valid_key(key) || value.is_empty() {
                return None;
            }
            previous_key = key;
            match key {
                "oid" => oid = Some(parse_oid(value)?),
                "size" => size = Some(parse_size(value)?),
                _ if key.starts_with("ext-") => {
                    parse_oid(value)?;
                }
                _ => return None,
            }
        }
        Some(Pointer {
            oid: oid?,
            size: size?,
        })
    }

    /// The object's path relative to the LFS storage directory.
    pub fn relative_object_path(&self) -> PathBuf {
        Path::new("objects")
            .join(&self.oid[0..2])
            .join(&self.oid[2..4])
            .join(&self.oid)
    }

    /// The canonical pointer text for this object (current version URL).
    pub fn to_text(&self) -> String {
        format!(
            "version {}\noid sha256:{}\nsize {}\n",
            VERSIONS[0], self.oid, self.size
        )
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{} ({} bytes)", self.oid, self.size)
    }
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

fn parse_oid(value: &str) -> Option<String> {
    let hex = value.strip_prefix("sha256:")?;
    let ok = hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| hex.to_owned())
}

fn parse_size(value: &str) -> Option<u64> {
    // Decimal digits only: `u64::from_str` would also take a leading `+`.
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// The LFS storage directory of `repo`: `lfs.storage` (relative paths are relative to the
/// common git dir, `~/` is the home directory) or `<common git dir>/lfs`. Linked worktrees
/// share the store of the main repository, hence the common dir.
pub(super) fn storage_dir(repo: &gix::Repository) -> PathBuf {
    let common = repo.common_dir();
    let configured = repo
        .config_snapshot()
        .string("lfs.storage")
        .map(|value| value.to_string())
        .filter(|value| !value.is_empty());
    match configured {
        Some(value) => resolve_storage(common, &value),
        None => common.join("lfs"),
    }
}

fn resolve_storage(common_dir: &Path, value: &str) -> PathBuf {
    if let Some(rest) = value.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    let path = Path::new(value);
    if path.is_absolute() {
        path.to_owned()
    } else {
        common_dir.join(path)
    }
}

/// The local object of `pointer` if it is present with the size the pointer promises
/// (a partial download is as good as absent).
pub(crate) fn present_object(repo: &gix::Repository, pointer: &Pointer) -> Option<PathBuf> {
    present_in(&storage_dir(repo), pointer)
}

/// [`present_object`] in the LFS store `store` (see [`storage_dir`]).
pub(super) fn present_in(store: &Path, pointer: &Pointer) -> Option<PathBuf> {
    let path = store.join(pointer.relative_object_path());
    let meta = std::fs::metadata(&path).ok()?;
    (meta.is_file() && meta.len() == pointer.size).then_some(path)
}

/// A repository's LFS object store, held open: `git diff` of thousands of LFS files opens as
/// many objects, and the kernel's walk of each deep absolute path was a tenth of its time.
pub(super) struct ObjectStore(crate::fsutil::OpenDir);

impl ObjectStore {
    pub(super) fn new(repo: &gix::Repository) -> Self {
        ObjectStore(crate::fsutil::OpenDir::new(storage_dir(repo)))
    }

    /// [`present_in`], the object opened for reading: one open and one stat, where looking
    /// first and opening after would stat twice.
    pub(super) fn open_present(&self, pointer: &Pointer) -> Option<(PathBuf, std::fs::File)> {
        let (path, file, meta) = self.0.open_regular(&pointer.relative_object_path()).ok()?;
        (meta.len() == pointer.size).then_some((path, file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";

    fn pointer_text(version: &str, rest: &str) -> String {
        format!("version {version}\n{rest}")
    }

    #[test]
    fn parses_both_version_urls() {
        for version in VERSIONS {
            let text = pointer_text(version, &format!("oid sha256:{OID}\nsize 12345\n"));
            let p = Pointer::parse(text.as_bytes()).unwrap();
            assert_eq!(p.oid, OID);
            assert_eq!(p.size, 12345);
        }
    }

    #[test]
    fn round_trips_through_text() {
        let p = Pointer {
            oid: OID.into(),
            size: 7,
        };
        assert_eq!(Pointer::parse(p.to_text().as_bytes()), Some(p));
    }

    #[test]
    fn accepts_extensions_in_order() {
        let text = pointer_text(
            VERSIONS[0],
            &format!("ext-0-foo sha256:{OID}\noid sha256:{OID}\nsize 1\n"),
        );
        assert!(Pointer::parse(text.as_bytes()).is_some());
    }

    #[test]
    fn rejects_malformed_pointers() {
        let good = format!("oid sha256:{OID}\nsize 1\n");
        let cases = [
            // keys out of order
            pointer_text(VERSIONS[0], &format!("size 1\noid sha256:{OID}\n")),
            // version not first
            format!("oid sha256:{OID}\nversion {}\nsize 1\n", VERSIONS[0]),
            // unknown version
            pointer_text("https://example.com/spec/v2", &good),
            // uppercase hex, short hex, other hash
            pointer_text(
                VERSIONS[0],
                &format!("oid sha256:{}\nsize 1\n", OID.to_uppercase()),
            ),
            pointer_text(VERSIONS[0], "oid sha256:abcd\nsize 1\n"),
            pointer_text(VERSIONS[0], &format!("oid sha1:{OID}\nsize 1\n")),
            // size not decimal
            pointer_text(VERSIONS[0], &format!("oid sha256:{OID}\nsize +1\n")),
            pointer_text(VERSIONS[0], &format!("oid sha256:{OID}\nsize 0x10\n")),
            pointer_text(
                VERSIONS[0],
                &format!("oid sha256:{OID}\nsize 99999999999999999999999\n"),
            ),
            // missing key, duplicate key, unknown key, missing final newline, CRLF
            pointer_text(VERSIONS[0], &format!("oid sha256:{OID}\n")),
            pointer_text(
                VERSIONS[0],
                &format!("oid sha256:{OID}\noid sha256:{OID}\nsize 1\n"),
            ),
            pointer_text(VERSIONS[0], &format!("oid sha256:{OID}\nsize 1\nzzz 1\n")),
            pointer_text(VERSIONS[0], &format!("oid sha256:{OID}\nsize 1")),
            format!("version {}\r\noid sha256:{OID}\r\nsize 1\r\n", VERSIONS[0]),
            String::new(),
        ];
        for case in cases {
            assert_eq!(Pointer::parse(case.as_bytes()), None, "{case:?}");
        }
        assert_eq!(Pointer::parse(b"GGUF\x03\x00\x00\x00"), None);
        let mut big = pointer_text(VERSIONS[0], &good).into_bytes();
        big.resize(MAX_POINTER_SIZE, b'\n');
        assert_eq!(Pointer::parse(&big), None);
    }

    #[test]
    fn object_path_fans_out_by_oid_prefix() {
        let p = Pointer {
            oid: OID.into(),
            size: 1,
        };
        assert_eq!(
            p.relative_object_path(),
            Path::new("objects/4d/7a").join(OID)
        );
    }

    #[test]
    fn storage_is_relative_to_the_common_dir() {
        let common = Path::new("/repo/.git");
        assert_eq!(
            resolve_storage(common, "custom-lfs"),
            Path::new("/repo/.git/custom-lfs")
        );
        assert_eq!(resolve_storage(common, "/abs/lfs"), Path::new("/abs/lfs"));
    }
}
