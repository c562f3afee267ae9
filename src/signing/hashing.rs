//! The digests of a model's resources, in parallel on rayon's pool (one file, or one shard, a
//! task: SHA-256 cannot be split inside a file, so a model of many files hashes on every core
//! and one large file on one). An LFS pointer's oid is the SHA-256 of its object, so under the
//! `files` serialization with `sha256` a pointer is its file's digest and nothing is read;
//! under any other the object's bytes are hashed where they are here, and a file with only its
//! pointer "needs its object".

use std::io::{Read, Seek, SeekFrom};

use rayon::prelude::*;

use super::error::{Result, io};
use super::tree::{Bytes, ModelFile};
use crate::formats::oms::{HashAlgorithm, Method, ResourceKey, Serialization};

/// A resource's digest as computed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Digested {
    Digest(Vec<u8>),
    /// Only an LFS pointer is here, and the serialization needs the bytes.
    NeedsObject,
}

/// A resource of the model as it is here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hashed {
    pub key: ResourceKey,
    pub digest: Digested,
    /// Whether the digest came from an LFS pointer rather than from bytes.
    pub from_pointer: bool,
}

enum Hasher {
    Sha256(sha2::Sha256),
    Blake2b(Box<blake2::Blake2b512>),
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    fn new(algorithm: HashAlgorithm) -> Hasher {
        use sha2::Digest;
        match algorithm {
            HashAlgorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            HashAlgorithm::Blake2b => Hasher::Blake2b(Box::new(blake2::Blake2b512::new())),
            HashAlgorithm::Blake3 => Hasher::Blake3(Box::new(blake3::Hasher::new())),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest;
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Blake2b(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        use sha2::Digest;
        match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Blake2b(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
        }
    }
}

/// The resources `serialization` makes of `files`, each with its digest, in no set order.
pub(crate) fn digest_all(
    repo: Option<&gix::Repository>,
    files: &[ModelFile],
    serialization: &Serialization,
) -> Result<Vec<Hashed>> {
    let oid_is_digest =
        serialization.method == Method::Files && serialization.hash == HashAlgorithm::Sha256;
    let mut tasks = Vec::new();
    let mut done = Vec::new();
    for file in files {
        if oid_is_digest && let Some(pointer) = &file.pointer {
            done.push(Hashed {
                key: key(&file.name, None),
                digest: Digested::Digest(
                    hex::decode(&pointer.oid).expect("a pointer's oid is hex"),
                ),
                from_pointer: true,
            });
            continue;
        }
        for range in ranges(file.len(), serialization.method) {
            tasks.push((file, range));
        }
    }
    // Blobs are read through the repository on this thread; files on disk on the pool.
    let (blobs, disk): (Vec<_>, Vec<_>) = tasks
        .into_iter()
        .partition(|(f, _)| matches!(f.bytes, Bytes::Blob { .. }));
    for (file, range) in blobs {
        let Bytes::Blob { id, .. } = file.bytes else {
            unreachable!()
        };
        let repo = repo.expect("a blob comes from a repository");
        let data = crate::git::blob_bytes(repo, id)?;
        let (start, end) = range.unwrap_or((0, data.len() as u64));
        let mut hasher = Hasher::new(serialization.hash);
        hasher.update(&data[start as usize..end.min(data.len() as u64) as usize]);
        done.push(Hashed {
            key: key(&file.name, shard(range, serialization.method)),
            digest: Digested::Digest(hasher.finish()),
            from_pointer: false,
        });
    }
    let hashed: Vec<Hashed> = disk
        .par_iter()
        .map(|(file, range)| -> Result<Hashed> {
            let digest = match &file.bytes {
                Bytes::File { path, len } => {
                    let (start, end) = range.unwrap_or((0, *len));
                    Digested::Digest(hash_range(path, start, end, serialization.hash)?)
                }
                Bytes::Absent | Bytes::Blob { .. } => Digested::NeedsObject,
            };
            Ok(Hashed {
                key: key(&file.name, shard(*range, serialization.method)),
                digest,
                from_pointer: false,
            })
        })
        .collect::<Result<_>>()?;
    done.extend(hashed);
    Ok(done)
}

fn key(name: &str, range: Option<(u64, u64)>) -> ResourceKey {
    ResourceKey {
        path: name.to_owned(),
        range,
    }
}

fn shard(range: Option<(u64, u64)>, method: Method) -> Option<(u64, u64)> {
    match method {
        Method::Files => None,
        Method::Shards { .. } => range,
    }
}

/// The byte ranges a file of `len` bytes is hashed in: the whole file (None) for `files`, and
/// `shard_size` pieces for `shards` (none for an empty file, as model_signing does).
/// The resources `serialization` makes of one file's bytes, each with its digest.
pub(crate) fn digest_bytes(
    name: &str,
    bytes: &[u8],
    serialization: &Serialization,
) -> Vec<(ResourceKey, Vec<u8>)> {
    ranges(bytes.len() as u64, serialization.method)
        .into_iter()
        .map(|range| {
            let (start, end) = range.unwrap_or((0, bytes.len() as u64));
            let mut hasher = Hasher::new(serialization.hash);
            hasher.update(&bytes[start as usize..end as usize]);
            (
                key(name, shard(range, serialization.method)),
                hasher.finish(),
            )
        })
        .collect()
}

fn ranges(len: u64, method: Method) -> Vec<Option<(u64, u64)>> {
    match method {
        Method::Files => vec![None],
        Method::Shards { shard_size } => {
            let mut out = Vec::new();
            let mut start = 0;
            while start < len {
                let end = len.min(start.saturating_add(shard_size));
                out.push(Some((start, end)));
                start = end;
            }
            out
        }
    }
}

/// The digest of bytes `[start, end)` of `path`, read 4 MiB at a time; a file shorter than
/// `end` (changed while it was read) gives the digest of what it has.
fn hash_range(
    path: &std::path::Path,
    start: u64,
    end: u64,
    algorithm: HashAlgorithm,
) -> Result<Vec<u8>> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    if start > 0 {
        file.seek(SeekFrom::Start(start)).map_err(io(path))?;
    }
    let mut hasher = Hasher::new(algorithm);
    let mut left = end - start;
    let mut buf = vec![0u8; (4 << 20).min(left.max(1) as usize)];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = file.read(&mut buf[..want]).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_file_and_an_empty_file_has_none() {
        let m = Method::Shards { shard_size: 4 };
        assert_eq!(ranges(9, m), vec![Some((0, 4)), Some((4, 8)), Some((8, 9))]);
        assert_eq!(ranges(8, m), vec![Some((0, 4)), Some((4, 8))]);
        assert!(ranges(0, m).is_empty());
        assert_eq!(ranges(0, Method::Files), vec![None]);
    }
}
