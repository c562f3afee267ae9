//! The members of a zip archive as `torch.save` writes them: read from the central directory
//! or, in a prefix of a file (a partial download, the first window of a remote read), from the
//! local headers in order. PyTorch stores every member uncompressed, so a member is read in
//! place; anything else is refused rather than inflated. No zip crate does this: they read the
//! whole central directory into memory and cannot walk the local headers of a prefix.

use std::ops::Range;

use crate::escape::quoted;

/// Members beyond this many are refused: a checkpoint has one per storage and a few more.
pub(super) const MAX_MEMBERS: u64 = 1 << 20;

/// The most bytes allowed between one member's data and the next member's local header (or
/// the central directory), after a member whose sizes are in a data descriptor: 16 bytes as
/// torch writes it, 24 in zip64. More could hold a local entry the directory does not list.
const MAX_GAP: u64 = 24;

/// One member of the archive as the central directory (or its local header) describes it.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) name: String,
    method: u16,
    compressed: u64,
    uncompressed: u64,
    local_header: u64,
}

/// One named error per rule of the container.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error(
        "the zip directory declares {count} members, more than the {limit} a checkpoint may have"
    )]
    TooManyMembers { count: u64, limit: u64 },
    #[error(
        "the zip directory at offset {offset} ({size} bytes) lies outside the file ({file_len} bytes)"
    )]
    DirectoryOutsideFile {
        offset: u64,
        size: u64,
        file_len: u64,
    },
    #[error(
        "member {} is compressed (zip method {method}); torch.save stores members \
         uncompressed, and compressed ones are not inflated",
        quoted(.member)
    )]
    Compressed { member: String, method: u16 },
    #[error(
        "member {} declares {compressed} stored bytes but {uncompressed} bytes of content",
        quoted(.member)
    )]
    SizeMismatch {
        member: String,
        compressed: u64,
        uncompressed: u64,
    },
    #[error("member {}: no local header at offset {offset}", quoted(.member))]
    NoLocalHeader { member: String, offset: u64 },
    #[error("member {}: its local header names it {}", quoted(.member), quoted(.local))]
    NameMismatch { member: String, local: String },
    #[error(
        "member {} appears twice in the zip directory: which one a reader takes is not \
         defined",
        quoted(.member)
    )]
    DuplicateMember { member: String },
    #[error(
        "bytes {start}..{end} of the archive belong to no member the zip directory lists (a \
         local entry there would be seen by some readers and not by torch)"
    )]
    Unlisted { start: u64, end: u64 },
    #[error(
        "member {}: its local header says {local} stored bytes, the zip directory {central} (a \
         reader of local headers would be led elsewhere than torch)",
        quoted(.member)
    )]
    LocalSizes {
        member: String,
        local: u64,
        central: u64,
    },
    #[error(
        "no zip end record in the last {searched} bytes of the file ({file_len} bytes): the \
         zip directory torch reads is not there"
    )]
    NoEndRecord { searched: u64, file_len: u64 },
    #[error(
        "the zip directory ({size} bytes from offset {offset}) is larger than the {limit} bytes \
         a header may take ({raise})"
    )]
    DirectoryTooLarge {
        offset: u64,
        size: u64,
        limit: u64,
        raise: String,
    },
    #[error(
        "member {} at offset {offset}, read from the first bytes of the file, is not the member \
         the zip directory lists there (torch would read another)",
        quoted(.member)
    )]
    NotInDirectory { member: String, offset: u64 },
    #[error(
        "member {} (bytes {first_range:?}) overlaps member {} (bytes {second_range:?})",
        quoted(.first),
        quoted(.second)
    )]
    Overlap {
        first: String,
        first_range: Range<u64>,
        second: String,
        second_range: Range<u64>,
    },
}

impl Member {
    /// Where the member's bytes are: after its local header. Err when it is not stored as
    /// torch stores members or its header is not where the directory says.
    pub(super) fn data_range(&self, bytes: &[u8]) -> Result<Range<u64>, ZipError> {
        if self.method != 0 {
            return Err(ZipError::Compressed {
                member: self.name.clone(),
                method: self.method,
            });
        }
        if self.compressed != self.uncompressed {
            return Err(ZipError::SizeMismatch {
                member: self.name.clone(),
                compressed: self.compressed,
                uncompressed: self.uncompressed,
            });
        }
        let no_header = || ZipError::NoLocalHeader {
            member: self.name.clone(),
            offset: self.local_header,
        };
        let at = usize::try_from(self.local_header).map_err(|_| no_header())?;
        let header = bytes
            .get(at..at.saturating_add(30))
            .filter(|h| h.starts_with(b"PK\x03\x04"))
            .ok_or_else(no_header)?;
        let name_len = usize::from(u16le(header, 26));
        let extra_len = usize::from(u16le(header, 28));
        if let Some(local) = bytes.get(at + 30..at + 30 + name_len)
            && local != self.name.as_bytes()
            && String::from_utf8_lossy(local) != self.name
        {
            return Err(ZipError::NameMismatch {
                member: self.name.clone(),
                local: String::from_utf8_lossy(local).into_owned(),
            });
        }
        let start = self.local_header + 30 + name_len as u64 + extra_len as u64;
        Ok(start..start.saturating_add(self.compressed))
    }

    /// The member's bytes, when stored uncompressed and present in full.
    pub(super) fn stored_data<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8], MemberError> {
        let range = self.data_range(bytes)?;
        let file_len = bytes.len() as u64;
        let outside = MemberError::OutsideFile {
            member: self.name.clone(),
            range: range.clone(),
            file_len,
        };
        let (Ok(start), Ok(end)) = (usize::try_from(range.start), usize::try_from(range.end))
        else {
            return Err(outside);
        };
        bytes.get(start..end).ok_or(outside)
    }

    /// The span the member takes in the file, header included.
    fn span(&self, bytes: &[u8]) -> Result<Range<u64>, ZipError> {
        let data = self.data_range(bytes)?;
        Ok(self.local_header..data.end)
    }
}

/// A member's bytes could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    #[error(transparent)]
    Zip(#[from] ZipError),
    #[error(
        "member {} (bytes {range:?}) runs past the end of the file ({file_len} bytes): \
         the file is truncated",
        quoted(.member)
    )]
    OutsideFile {
        member: String,
        range: Range<u64>,
        file_len: u64,
    },
}

/// Whether a member name is the pickle of a `torch.save` archive (`FOLDER/data.pkl`).
pub(super) fn is_data_pkl(name: &str) -> bool {
    name == "data.pkl" || name.ends_with("/data.pkl")
}

/// The data.pkl torch reads: `FOLDER/data.pkl`, FOLDER being the top folder of the archive's
/// first entry. torch's reader takes the archive's name from its first entry and reads every
/// record under that name, so the other folders of an archive (a clean `a/` behind a hostile
/// `b/`) are never what torch loads.
pub(super) fn torch_data_pkl(members: &[Member]) -> Option<&Member> {
    let first = members.first()?;
    let wanted = match first.name.split_once('/') {
        Some((folder, _)) => format!("{folder}/data.pkl"),
        None => "data.pkl".to_owned(),
    };
    members.iter().find(|m| m.name == wanted)
}

/// Whether a member name is one `torch.save` writes beside data.pkl (`FOLDER/byteorder`,
/// `FOLDER/version`, `FOLDER/.format_version`, `FOLDER/data/KEY`).
pub(super) fn is_torch_member(name: &str) -> bool {
    let Some((_, rest)) = name.split_once('/') else {
        return false;
    };
    matches!(
        rest,
        "byteorder" | "version" | ".format_version" | ".storage_alignment"
    ) || rest
        .strip_prefix("data/")
        .is_some_and(|key| !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()))
}

fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The members of an archive, and whether they are all of them.
pub(super) struct Archive {
    pub(super) members: Vec<Member>,
    /// From the central directory: every member of the archive. Otherwise the members whose
    /// local headers a prefix of the file holds, in order.
    pub(super) complete: bool,
    /// Where the central directory starts, when it was read.
    pub(super) directory: Option<u64>,
}

/// The members of a zip archive: from the central directory when the end record is present,
/// else by walking local headers from the start (a prefix of a file). Ok(None) when `bytes`
/// hold no zip member at all.
pub(super) fn members(bytes: &[u8]) -> Result<Option<Archive>, ZipError> {
    if let Some((members, directory)) = central_directory(bytes)? {
        check_unique(&members)?;
        return Ok(Some(Archive {
            members,
            complete: true,
            directory: Some(directory),
        }));
    }
    let Some(members) = local_headers(bytes) else {
        return Ok(None);
    };
    check_unique(&members)?;
    Ok(Some(Archive {
        members,
        complete: false,
        directory: None,
    }))
}

/// Two members of one name are ambiguous: readers differ in which they take.
fn check_unique(members: &[Member]) -> Result<(), ZipError> {
    let mut seen = std::collections::HashSet::with_capacity(members.len());
    for m in members {
        if !seen.insert(m.name.as_str()) {
            return Err(ZipError::DuplicateMember {
                member: m.name.clone(),
            });
        }
    }
    Ok(())
}

/// Checks that the members the central directory lists tile the archive from its first byte to
/// the directory, and that each local header agrees with the directory on the member's sizes:
/// torch reads the directory, while a reader walking local headers (a prefix of the file) goes
/// by the local sizes, so a local entry the directory does not list (a benign `data.pkl` before
/// the real one), or local sizes that lead elsewhere, would show it something else. Only a
/// member whose local header defers its sizes to a data descriptor (as torch writes them) may
/// be followed by one (at most 24 bytes) before the next member.
pub(super) fn check_tiled(
    members: &[Member],
    bytes: &[u8],
    directory: u64,
) -> Result<(), ZipError> {
    let mut spans: Vec<(Range<u64>, &Member)> = members
        .iter()
        .map(|m| Ok((m.span(bytes)?, m)))
        .collect::<Result<_, ZipError>>()?;
    spans.sort_by_key(|(r, _)| (r.start, r.end));
    let mut end = 0u64;
    let mut descriptor_allowed = false;
    let directory_span = directory..directory;
    let starts = spans
        .iter()
        .map(|(r, m)| (r, Some(*m)))
        .chain(std::iter::once((&directory_span, None)));
    for (span, member) in starts {
        let gap = if descriptor_allowed { MAX_GAP } else { 0 };
        if span.start < end || span.start > end.saturating_add(gap) {
            return Err(ZipError::Unlisted {
                start: end.min(span.start),
                end: span.start.max(end),
            });
        }
        let Some(member) = member else { break };
        // Within the file: span() found the header.
        let at = member.local_header as usize;
        let header = &bytes[at..at + 30];
        let flags = u16le(header, 6);
        descriptor_allowed = flags & 0x08 != 0;
        let (stored, content) = (u32le(header, 18), u32le(header, 22));
        let agrees = |local: u32, central: u64| local == 0xFFFF_FFFF || u64::from(local) == central;
        let sizes_agree = agrees(stored, member.compressed) && agrees(content, member.uncompressed);
        if !descriptor_allowed && !sizes_agree {
            return Err(ZipError::LocalSizes {
                member: member.name.clone(),
                local: u64::from(stored),
                central: member.compressed,
            });
        }
        end = span.end;
    }
    Ok(())
}

/// Checks that no two members share bytes (a member inside another is how a zip bomb reuses
/// data). Members whose header is not in `bytes` are left out.
pub(super) fn check_overlaps(members: &[Member], bytes: &[u8]) -> Result<(), ZipError> {
    let mut spans: Vec<(Range<u64>, &str)> = Vec::with_capacity(members.len());
    for m in members {
        if m.local_header >= bytes.len() as u64 {
            continue;
        }
        spans.push((m.span(bytes)?, &m.name));
    }
    spans.sort_by_key(|(r, _)| (r.start, r.end));
    for pair in spans.windows(2) {
        let ((a, an), (b, bn)) = (&pair[0], &pair[1]);
        if b.start < a.end {
            return Err(ZipError::Overlap {
                first: an.to_string(),
                first_range: a.clone(),
                second: bn.to_string(),
                second_range: b.clone(),
            });
        }
    }
    Ok(())
}

/// The members the central directory lists, and where it starts.
fn central_directory(bytes: &[u8]) -> Result<Option<(Vec<Member>, u64)>, ZipError> {
    match directory_in_tail(bytes, 0, bytes.len() as u64)? {
        Tail::Directory(members, offset) => Ok((!members.is_empty()).then_some((members, offset))),
        Tail::NoEndRecord | Tail::StartsAt(_) => Ok(None),
    }
}

/// What the last bytes of a file say about its central directory.
enum Tail {
    /// The members it lists (possibly none) and where it starts.
    Directory(Vec<Member>, u64),
    /// No end record among these bytes.
    NoEndRecord,
    /// The directory (or the zip64 record) starts at this offset, before these bytes.
    StartsAt(u64),
}

/// The central directory from `tail`, the bytes from offset `tail_start` to the end of a
/// `file_len`-byte file (all of it when `tail_start` is 0). Offsets in the result are the
/// file's.
fn directory_in_tail(tail: &[u8], tail_start: u64, file_len: u64) -> Result<Tail, ZipError> {
    // The end record is 22 bytes plus a comment of up to 65535 bytes.
    let Some(last) = tail.len().checked_sub(22) else {
        return Ok(Tail::NoEndRecord);
    };
    let search_start = tail.len().saturating_sub(22 + 65535);
    let Some(eocd) = (search_start..=last)
        .rev()
        .find(|&i| tail[i..].starts_with(b"PK\x05\x06"))
    else {
        return Ok(Tail::NoEndRecord);
    };
    let mut count = u64::from(u16le(tail, eocd + 10));
    let mut cd_size = u64::from(u32le(tail, eocd + 12));
    let mut cd_offset = u64::from(u32le(tail, eocd + 16));
    if cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF || count == 0xFFFF {
        // zip64: the locator sits just before the end record and points at the zip64 end record.
        let Some(record_at) = eocd
            .checked_sub(20)
            .filter(|&loc| tail[loc..].starts_with(b"PK\x06\x07"))
            .map(|loc| u64le(tail, loc + 8))
        else {
            return Ok(Tail::NoEndRecord);
        };
        if record_at < tail_start {
            return Ok(Tail::StartsAt(record_at));
        }
        let Some(record) = usize::try_from(record_at - tail_start)
            .ok()
            .and_then(|rec| tail.get(rec..rec.checked_add(56)?))
            .filter(|rec| rec.starts_with(b"PK\x06\x06"))
        else {
            return Ok(Tail::NoEndRecord);
        };
        count = u64le(record, 32);
        cd_size = u64le(record, 40);
        cd_offset = u64le(record, 48);
    }
    if count > MAX_MEMBERS {
        return Err(ZipError::TooManyMembers {
            count,
            limit: MAX_MEMBERS,
        });
    }
    let outside = ZipError::DirectoryOutsideFile {
        offset: cd_offset,
        size: cd_size,
        file_len,
    };
    if cd_offset
        .checked_add(cd_size)
        .is_none_or(|end| end > file_len)
    {
        return Err(outside);
    }
    if cd_offset < tail_start {
        return Ok(Tail::StartsAt(cd_offset));
    }
    let cd = usize::try_from(cd_offset - tail_start)
        .ok()
        .zip(usize::try_from(cd_size).ok())
        .and_then(|(start, size)| tail.get(start..start.checked_add(size)?))
        .ok_or(outside)?;
    Ok(Tail::Directory(directory_entries(cd)?, cd_offset))
}

/// The entries of a central directory's bytes.
fn directory_entries(cd: &[u8]) -> Result<Vec<Member>, ZipError> {
    let mut members = Vec::new();
    let mut pos = 0usize;
    while cd.len() >= pos + 46 && cd[pos..].starts_with(b"PK\x01\x02") {
        if members.len() as u64 >= MAX_MEMBERS {
            return Err(ZipError::TooManyMembers {
                count: members.len() as u64 + 1,
                limit: MAX_MEMBERS,
            });
        }
        let h = &cd[pos..];
        let method = u16le(h, 10);
        let mut compressed = u64::from(u32le(h, 20));
        let mut uncompressed = u64::from(u32le(h, 24));
        let name_len = usize::from(u16le(h, 28));
        let extra_len = usize::from(u16le(h, 30));
        let comment_len = usize::from(u16le(h, 32));
        let mut local_header = u64::from(u32le(h, 42));
        let Some(name) = h.get(46..46 + name_len) else {
            break;
        };
        let extra = h
            .get(46 + name_len..46 + name_len + extra_len)
            .unwrap_or_default();
        // zip64 extended information: present fields appear in a fixed order, each only when
        // its 32-bit counterpart is saturated.
        if let Some(z64) = zip64_extra(extra) {
            let mut fields = z64.chunks_exact(8).map(|c| u64le(c, 0));
            if uncompressed == 0xFFFF_FFFF {
                uncompressed = fields.next().unwrap_or(uncompressed);
            }
            if compressed == 0xFFFF_FFFF {
                compressed = fields.next().unwrap_or(compressed);
            }
            if local_header == 0xFFFF_FFFF {
                local_header = fields.next().unwrap_or(local_header);
            }
        }
        members.push(Member {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed,
            uncompressed,
            local_header,
        });
        pos += 46 + name_len + extra_len + comment_len;
    }
    Ok(members)
}

/// How many bytes at the end of a file hold its end record wherever its comment puts it.
pub(super) const END_RECORD_SEARCH: u64 = 22 + 65535;

/// What a check of a prefix against the file's last bytes found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DirectoryCheck {
    /// The directory lists exactly the members read from the prefix, where they were read.
    Agrees,
    /// The directory starts at this offset, before the bytes given: read from there.
    ReadFrom(u64),
}

/// Checks the members read from `prefix` (by their local headers, as a prefix is read) against
/// the central directory torch reads, found in `tail` (the file's bytes from `tail_start` to
/// its end, `file_len`): every member walked must be one the directory lists at that offset,
/// under that name, with those sizes, and the directory may list no other member among them.
/// Otherwise a local entry the directory does not list (a benign data.pkl before the real one)
/// would be judged in place of what torch loads.
pub(super) fn check_prefix_against_tail(
    prefix: &[u8],
    tail: &[u8],
    tail_start: u64,
    file_len: u64,
) -> Result<DirectoryCheck, ZipError> {
    let (listed, _) = match directory_in_tail(tail, tail_start, file_len)? {
        Tail::Directory(members, offset) => (members, offset),
        Tail::StartsAt(offset) => return Ok(DirectoryCheck::ReadFrom(offset)),
        Tail::NoEndRecord => {
            return Err(ZipError::NoEndRecord {
                searched: tail.len() as u64,
                file_len,
            });
        }
    };
    check_unique(&listed)?;
    let walked = local_headers(prefix).unwrap_or_default();
    let by_offset: std::collections::HashMap<u64, &Member> =
        listed.iter().map(|m| (m.local_header, m)).collect();
    for local in &walked {
        // A zip64 local size (all ones) is not walked past nor read by: it agrees.
        let size_agrees = |local: u64, central: u64| local == 0xFFFF_FFFF || local == central;
        let agrees = by_offset.get(&local.local_header).is_some_and(|m| {
            m.name == local.name
                && m.method == local.method
                && size_agrees(local.compressed, m.compressed)
                && size_agrees(local.uncompressed, m.uncompressed)
        });
        if !agrees {
            return Err(ZipError::NotInDirectory {
                member: local.name.clone(),
                offset: local.local_header,
            });
        }
    }
    // Nothing the directory lists starts among the members walked but between them.
    let walked_end = walked.last().map_or(0, |m| m.local_header);
    let walked_at: std::collections::HashSet<u64> = walked.iter().map(|m| m.local_header).collect();
    if let Some(hidden) = listed
        .iter()
        .find(|m| m.local_header < walked_end && !walked_at.contains(&m.local_header))
    {
        return Err(ZipError::Unlisted {
            start: hidden.local_header,
            end: hidden.local_header,
        });
    }
    Ok(DirectoryCheck::Agrees)
}

fn zip64_extra(mut extra: &[u8]) -> Option<&[u8]> {
    while extra.len() >= 4 {
        let id = u16le(extra, 0);
        let len = usize::from(u16le(extra, 2));
        let body = extra.get(4..4 + len)?;
        if id == 0x0001 {
            return Some(body);
        }
        extra = &extra[4 + len..];
    }
    None
}

pub(super) fn local_headers(bytes: &[u8]) -> Option<Vec<Member>> {
    let mut members = Vec::new();
    let mut pos = 0usize;
    while let Some(h) = bytes
        .get(pos..pos + 30)
        .filter(|h| h.starts_with(b"PK\x03\x04"))
    {
        if members.len() as u64 >= MAX_MEMBERS {
            break;
        }
        let flags = u16le(h, 6);
        let method = u16le(h, 8);
        let compressed = u64::from(u32le(h, 18));
        let uncompressed = u64::from(u32le(h, 22));
        let name_len = usize::from(u16le(h, 26));
        let extra_len = usize::from(u16le(h, 28));
        let name = bytes.get(pos + 30..pos + 30 + name_len)?;
        members.push(Member {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed,
            uncompressed,
            local_header: pos as u64,
        });
        // A data descriptor (sizes after the data) or a zip64 size cannot be walked past.
        if flags & 0x08 != 0 || compressed == 0xFFFF_FFFF {
            break;
        }
        let next = usize::try_from(compressed)
            .ok()
            .and_then(|len| (pos + 30 + name_len + extra_len).checked_add(len));
        match next {
            Some(next) => pos = next,
            None => break,
        }
    }
    (!members.is_empty()).then_some(members)
}

/// For the fuzz target `zip_directory`: when an archive's central directory is accepted (no
/// duplicate, no overlap, tiled), every member a walk of its local headers from the first byte
/// finds is one the directory lists, at that offset and under that name. Panics otherwise.
pub fn assert_directory_agrees_with_local_headers(bytes: &[u8]) {
    let Ok(Some(archive)) = members(bytes) else {
        return;
    };
    let Some(directory) = archive.directory else {
        return;
    };
    if check_overlaps(&archive.members, bytes).is_err()
        || check_tiled(&archive.members, bytes, directory).is_err()
    {
        return;
    }
    for local in local_headers(bytes).unwrap_or_default() {
        assert!(
            archive
                .members
                .iter()
                .any(|m| m.local_header == local.local_header && m.name == local.name),
            "a local entry {:?} at {} the directory does not list",
            local.name,
            local.local_header
        );
    }
}
