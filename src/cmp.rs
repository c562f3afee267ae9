//! Two models' bytes compared as cmp(1) compares files: sizes first, then the data read in
//! order with large buffers, stopping at the first byte that differs. Nothing is hashed: where
//! only a digest is known without reading (an LFS pointer's oid), the digests are compared.
//!
//! The structural diff reads headers only; this is what tells two files of one structure apart
//! (a fine-tune, a weight-only commit, a copy cut short) and names the first tensor that differs.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::artifact::Artifact;

/// Bytes read from each file per step: large enough to run at the page cache's speed, fixed so
/// that nothing from a file sizes an allocation.
const CHUNK: usize = 4 << 20;

/// Where one file's bytes are.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// A file on this machine.
    File(PathBuf),
    /// Bytes already in memory (a git blob).
    Bytes(Vec<u8>),
    /// Only a digest of the bytes is here: an LFS pointer whose object is not.
    Digest { sha256: String, size: u64 },
    /// The bytes are not here at all (a URL's model: only its header was read); `size` when
    /// known.
    Elsewhere { size: Option<u64>, why: String },
}

/// One file of a model: a multi-file model's part by name, or the one file (`name` None).
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub name: Option<String>,
    pub source: Source,
}

impl Part {
    pub(crate) fn single(source: Source) -> Part {
        Part { name: None, source }
    }
}

/// How the bytes of two models compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BytesOutcome {
    /// Every byte is equal (or the digests are): `size` bytes in all.
    Identical {
        size: u64,
    },
    Differ(Difference),
    /// The structures differ, so the bytes do; nothing was read beyond the headers.
    StructureDiffers,
    /// Not compared: `--structure-only`, or the bytes of a side are not here.
    NotCompared {
        why: String,
    },
}

/// Where two models' bytes first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    /// The part file, for a multi-file model.
    pub part: Option<String>,
    pub how: How,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum How {
    /// The sizes differ (one side may be cut short); the data was not read.
    Sizes { old: u64, new: u64 },
    /// The first byte that differs, and what holds it.
    At { offset: u64, place: Place },
    /// The digests differ (LFS oids); the bytes are not here to say where.
    Digests {
        old: String,
        old_size: u64,
        new: String,
        new_size: u64,
    },
    /// The files of a multi-file model are not the same files.
    Files,
}

/// What holds a byte of a model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    Header,
    Tensor(String),
    /// Padding between tensors, or bytes after the last one.
    OutsideTensors,
}

impl BytesOutcome {
    /// Whether the bytes are known to differ.
    pub(crate) fn differs(&self) -> bool {
        matches!(
            self,
            BytesOutcome::Differ(_) | BytesOutcome::StructureDiffers
        )
    }
}

/// An error reading a side's bytes: the file and what failed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", crate::escape::shown_path(.path))]
pub(crate) struct CmpError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Compares two models of one structure byte by byte; `new` names the tensor that holds the
/// first difference.
pub(crate) fn compare(
    old: &[Part],
    new: &[Part],
    model: &Artifact,
) -> Result<BytesOutcome, CmpError> {
    let names = |parts: &[Part]| parts.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    if names(old) != names(new) {
        return Ok(BytesOutcome::Differ(Difference {
            part: None,
            how: How::Files,
        }));
    }
    let mut total = 0;
    for (a, b) in old.iter().zip(new) {
        match compare_one(&a.source, &b.source, model, a.name.as_deref())? {
            One::Equal(size) => total += size,
            One::Differ(how) => {
                return Ok(BytesOutcome::Differ(Difference {
                    part: a.name.clone(),
                    how,
                }));
            }
            One::Unknown(why) => return Ok(BytesOutcome::NotCompared { why }),
        }
    }
    Ok(BytesOutcome::Identical { size: total })
}

/// One pair of files compared.
enum One {
    Equal(u64),
    Differ(How),
    Unknown(String),
}

fn compare_one(
    old: &Source,
    new: &Source,
    model: &Artifact,
    part: Option<&str>,
) -> Result<One, CmpError> {
    let (old_size, new_size) = (size_of(old)?, size_of(new)?);
    if let (Some(a), Some(b)) = (old_size, new_size)
        && a != b
    {
        return Ok(One::Differ(How::Sizes { old: a, new: b }));
    }
    match (old, new) {
        (
            Source::Digest {
                sha256: a,
                size: old_size,
            },
            Source::Digest {
                sha256: b,
                size: new_size,
            },
        ) => Ok(if a == b {
            One::Equal(*old_size)
        } else {
            One::Differ(How::Digests {
                old: a.clone(),
                old_size: *old_size,
                new: b.clone(),
                new_size: *new_size,
            })
        }),
        (Source::Elsewhere { why, .. }, _) | (_, Source::Elsewhere { why, .. }) => {
            Ok(One::Unknown(why.clone()))
        }
        (Source::Digest { .. }, _) | (_, Source::Digest { .. }) => Ok(One::Unknown(
            "an LFS object is not on this machine (`git lfs fetch` brings it)".to_owned(),
        )),
        _ => {
            let offset = first_difference(old, new)?;
            Ok(match offset {
                None => One::Equal(old_size.unwrap_or(0)),
                Some(offset) => One::Differ(How::At {
                    offset,
                    place: place_of(model, part, offset),
                }),
            })
        }
    }
}

fn size_of(source: &Source) -> Result<Option<u64>, CmpError> {
    Ok(match source {
        Source::File(path) => Some(
            std::fs::metadata(path)
                .map_err(|source| CmpError {
                    path: path.clone(),
                    source,
                })?
                .len(),
        ),
        Source::Bytes(bytes) => Some(bytes.len() as u64),
        Source::Digest { size, .. } => Some(*size),
        Source::Elsewhere { size, .. } => *size,
    })
}

/// The offset of the first byte that differs between two readable sources of equal size.
fn first_difference(old: &Source, new: &Source) -> Result<Option<u64>, CmpError> {
    let mut a = Reader::open(old)?;
    let mut b = Reader::open(new)?;
    let mut buf_a = vec![0u8; CHUNK];
    let mut buf_b = vec![0u8; CHUNK];
    let mut offset = 0u64;
    loop {
        let n = a.fill(&mut buf_a)?;
        let m = b.fill(&mut buf_b[..n.clamp(1, CHUNK)])?;
        let common = n.min(m);
        if let Some(i) = (buf_a[..common] != buf_b[..common])
            .then(|| {
                buf_a[..common]
                    .iter()
                    .zip(&buf_b[..common])
                    .position(|(x, y)| x != y)
            })
            .flatten()
        {
            return Ok(Some(offset + i as u64));
        }
        if n != m {
            // One side ended first (it shrank while read): they differ where it ended.
            return Ok(Some(offset + common as u64));
        }
        if n == 0 {
            return Ok(None);
        }
        offset += n as u64;
    }
}

/// Sequential reads from a file, or from bytes in memory.
enum Reader<'a> {
    File { file: std::fs::File, path: &'a Path },
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn open(source: &'a Source) -> Result<Reader<'a>, CmpError> {
        match source {
            Source::File(path) => Ok(Reader::File {
                file: std::fs::File::open(path).map_err(|source| CmpError {
                    path: path.clone(),
                    source,
                })?,
                path,
            }),
            Source::Bytes(bytes) => Ok(Reader::Bytes(bytes)),
            Source::Digest { .. } | Source::Elsewhere { .. } => {
                unreachable!("only readable sources are opened")
            }
        }
    }

    /// Fills `buf` as far as the source goes; the count read (short only at the end).
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, CmpError> {
        match self {
            Reader::Bytes(bytes) => {
                let n = buf.len().min(bytes.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                *bytes = &bytes[n..];
                Ok(n)
            }
            Reader::File { file, path } => {
                let mut filled = 0;
                while filled < buf.len() {
                    match file.read(&mut buf[filled..]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(source) => {
                            return Err(CmpError {
                                path: path.to_path_buf(),
                                source,
                            });
                        }
                    }
                }
                Ok(filled)
            }
        }
    }
}

/// What holds byte `offset` of the model's file `part` (its one file when None): the header,
/// a tensor's data (the first by offset that holds it), or neither.
fn place_of(model: &Artifact, part: Option<&str>, offset: u64) -> Place {
    let in_part = |name: &str| match part {
        None => true,
        Some(part) => model.part_of(name).is_some_and(|p| p.file == part),
    };
    let holder = model
        .tensors
        .iter()
        .filter(|(_, t)| t.file_offset <= offset && offset < t.file_offset + t.byte_length)
        .filter(|(name, _)| in_part(name))
        .min_by_key(|(_, t)| t.file_offset);
    if let Some((name, _)) = holder {
        return Place::Tensor(name.to_owned());
    }
    let data_start = model
        .tensors
        .iter()
        .filter(|(name, _)| in_part(name))
        .map(|(_, t)| t.file_offset)
        .min();
    match data_start {
        Some(start) if offset < start => Place::Header,
        None => Place::Header,
        Some(_) => Place::OutsideTensors,
    }
}

/// Two models of one structure: their bytes compared, or why not; a different structure is a
/// difference without reading.
pub(crate) fn outcome(
    structure_differs: bool,
    sides: Option<(&[Part], &[Part])>,
    model: &Artifact,
) -> BytesOutcome {
    if structure_differs {
        return BytesOutcome::StructureDiffers;
    }
    let Some((old, new)) = sides else {
        return BytesOutcome::NotCompared {
            why: "--structure-only: headers only".to_owned(),
        };
    };
    compare(old, new, model).unwrap_or_else(|e| BytesOutcome::NotCompared {
        why: format!("reading the bytes failed: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: &[u8]) -> Vec<Part> {
        vec![Part::single(Source::Bytes(b.to_vec()))]
    }

    /// A safetensors file of two f32 tensors of 4 bytes each: `a` then `b`.
    fn file() -> Vec<u8> {
        let header = br#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header);
        out.extend_from_slice(&[0; 8]);
        out
    }

    fn model() -> Artifact {
        crate::read::read_bytes(Path::new("t.safetensors"), &file()).unwrap()
    }

    #[test]
    fn names_the_tensor_that_holds_the_first_difference() {
        let m = model();
        let a = file();
        let mut b = a.clone();
        let end = b.len();
        b[end - 2] = 1;
        match compare(&bytes(&a), &bytes(&b), &m).unwrap() {
            BytesOutcome::Differ(Difference {
                how: How::At { offset, place },
                ..
            }) => {
                assert_eq!(offset, end as u64 - 2);
                assert_eq!(place, Place::Tensor("b".to_owned()));
            }
            other => panic!("{other:?}"),
        }
        let mut h = a.clone();
        h[9] = b' ';
        assert!(matches!(
            compare(&bytes(&a), &bytes(&h), &m).unwrap(),
            BytesOutcome::Differ(Difference {
                how: How::At {
                    place: Place::Header,
                    ..
                },
                ..
            })
        ));
        assert_eq!(
            compare(&bytes(&a), &bytes(&a), &m).unwrap(),
            BytesOutcome::Identical {
                size: a.len() as u64
            }
        );
    }

    #[test]
    fn first_difference_across_chunks() {
        let mut a = vec![7u8; CHUNK * 2 + 10];
        let b = a.clone();
        assert_eq!(
            first_difference(&Source::Bytes(a.clone()), &Source::Bytes(b.clone())).unwrap(),
            None
        );
        a[CHUNK + 3] = 8;
        assert_eq!(
            first_difference(&Source::Bytes(a), &Source::Bytes(b)).unwrap(),
            Some(CHUNK as u64 + 3)
        );
    }

    #[test]
    fn sizes_and_digests_decide_without_reading() {
        let m = model();
        assert_eq!(
            compare(&bytes(b"abc"), &bytes(b"abcd"), &m).unwrap(),
            BytesOutcome::Differ(Difference {
                part: None,
                how: How::Sizes { old: 3, new: 4 }
            })
        );
        let digest = |s: &str| {
            vec![Part::single(Source::Digest {
                sha256: s.to_owned(),
                size: 9,
            })]
        };
        assert_eq!(
            compare(&digest("aa"), &digest("aa"), &m).unwrap(),
            BytesOutcome::Identical { size: 9 }
        );
        assert!(compare(&digest("aa"), &digest("bb"), &m).unwrap().differs());
        assert!(matches!(
            compare(&digest("aa"), &bytes(&[0; 9]), &m).unwrap(),
            BytesOutcome::NotCompared { .. }
        ));
    }
}
