//! The members of a zip archive (PyTorch's `torch.save` container), read from the central
//! directory or, for a truncated file, from the local headers; members are read in place,
//! since PyTorch stores them uncompressed.

/// One member of a zip archive as the central directory (or a local header) describes it.
#[derive(Debug)]
pub(super) struct ZipEntry {
    pub(super) name: String,
    method: u16,
    compressed_size: u64,
    local_header: u64,
}

impl ZipEntry {
    /// The member's bytes, when stored uncompressed and present in full.
    pub(super) fn stored_data<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8], String> {
        if self.method != 0 {
            return Err(format!(
                "compressed with zip method {} (PyTorch stores members uncompressed), not scanned",
                self.method
            ));
        }
        let at = usize::try_from(self.local_header).map_err(|_| "offset too large".to_string())?;
        let header = bytes
            .get(at..at.saturating_add(30))
            .filter(|h| h.starts_with(b"PK\x03\x04"))
            .ok_or_else(|| format!("no local file header at offset {at}"))?;
        let name_len = usize::from(u16le(header, 26));
        let extra_len = usize::from(u16le(header, 28));
        let start = at + 30 + name_len + extra_len;
        let len =
            usize::try_from(self.compressed_size).map_err(|_| "size too large".to_string())?;
        bytes
            .get(start..start.saturating_add(len))
            .ok_or_else(|| format!("member data at offset {start} runs past the end of the file"))
    }
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

/// The members of a zip archive: from the central directory when the end record is present,
/// else by walking local headers from the start (a truncated file).
pub(super) fn entries(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    match central_directory(bytes) {
        Some(entries) => Some(entries),
        None => local_headers(bytes),
    }
}

fn central_directory(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    // The end record is 22 bytes plus a comment of up to 65535 bytes.
    let tail_start = bytes.len().saturating_sub(22 + 65535);
    let eocd = (tail_start..=bytes.len().checked_sub(22)?)
        .rev()
        .find(|&i| bytes[i..].starts_with(b"PK\x05\x06"))?;
    let mut cd_size = u64::from(u32le(bytes, eocd + 12));
    let mut cd_offset = u64::from(u32le(bytes, eocd + 16));
    if cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
        // zip64: the locator sits just before the end record and points at the zip64 end record.
        let loc = eocd.checked_sub(20)?;
        if !bytes[loc..].starts_with(b"PK\x06\x07") {
            return None;
        }
        let rec = usize::try_from(u64le(bytes, loc + 8)).ok()?;
        let rec_bytes = bytes.get(rec..rec.checked_add(56)?)?;
        if !rec_bytes.starts_with(b"PK\x06\x06") {
            return None;
        }
        cd_size = u64le(rec_bytes, 40);
        cd_offset = u64le(rec_bytes, 48);
    }
    let start = usize::try_from(cd_offset).ok()?;
    let end = start.checked_add(usize::try_from(cd_size).ok()?)?;
    let cd = bytes.get(start..end)?;
    let mut entries = Vec::new();
    let mut pos = 0usize;
    while cd.len() >= pos + 46 && cd[pos..].starts_with(b"PK\x01\x02") {
        let h = &cd[pos..];
        let method = u16le(h, 10);
        let mut compressed_size = u64::from(u32le(h, 20));
        let uncompressed_size = u64::from(u32le(h, 24));
        let name_len = usize::from(u16le(h, 28));
        let extra_len = usize::from(u16le(h, 30));
        let comment_len = usize::from(u16le(h, 32));
        let mut local_header = u64::from(u32le(h, 42));
        let name = h.get(46..46 + name_len)?;
        let extra = h.get(46 + name_len..46 + name_len + extra_len)?;
        // zip64 extended information: present fields appear in a fixed order, each only when
        // its 32-bit counterpart is saturated.
        if let Some(z64) = zip64_extra(extra) {
            let mut fields = z64.chunks_exact(8).map(|c| u64le(c, 0));
            if uncompressed_size == 0xFFFF_FFFF {
                fields.next();
            }
            if compressed_size == 0xFFFF_FFFF {
                compressed_size = fields.next()?;
            }
            if local_header == 0xFFFF_FFFF {
                local_header = fields.next()?;
            }
        }
        entries.push(ZipEntry {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed_size,
            local_header,
        });
        pos += 46 + name_len + extra_len + comment_len;
    }
    if entries.is_empty() {
        None
    } else {
        Some(entries)
    }
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

fn local_headers(bytes: &[u8]) -> Option<Vec<ZipEntry>> {
    let mut entries = Vec::new();
    let mut pos = 0usize;
    while let Some(h) = bytes
        .get(pos..pos + 30)
        .filter(|h| h.starts_with(b"PK\x03\x04"))
    {
        let flags = u16le(h, 6);
        let method = u16le(h, 8);
        let compressed_size = u64::from(u32le(h, 18));
        let name_len = usize::from(u16le(h, 26));
        let extra_len = usize::from(u16le(h, 28));
        let name = bytes.get(pos + 30..pos + 30 + name_len)?;
        entries.push(ZipEntry {
            name: String::from_utf8_lossy(name).into_owned(),
            method,
            compressed_size,
            local_header: pos as u64,
        });
        // A data descriptor (sizes after the data) or a zip64 size cannot be walked past.
        if flags & 0x08 != 0 || compressed_size == 0xFFFF_FFFF {
            break;
        }
        let next = usize::try_from(compressed_size)
            .ok()
            .and_then(|len| (pos + 30 + name_len + extra_len).checked_add(len));
        match next {
            Some(next) => pos = next,
            None => break,
        }
    }
    if entries.is_empty() {
        None
    } else {
        Some(entries)
    }
}
