//! Writing safetensors files: the header as the reference writer lays it out (8-byte length,
//! compact JSON with `__metadata__` first, padded with spaces to a multiple of 8), tensors in
//! name order and packed back to back.

use std::collections::BTreeMap;

/// One tensor of the output, before its data offsets are assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OutTensor {
    pub name: String,
    /// safetensors dtype ("F32", "BF16", "F16", "F64").
    pub dtype: &'static str,
    pub shape: Vec<u64>,
    pub byte_len: u64,
}

/// The layout of an output file: the header bytes (length prefix included) and, for each
/// tensor in the order given, its absolute offset in the file.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub header: Vec<u8>,
    pub offsets: Vec<u64>,
    pub total_len: u64,
}

/// Lays out `tensors` (which the caller gives sorted by name) after a header carrying
/// `metadata` (omitted when empty, as the reference does for no metadata).
pub(super) fn layout(metadata: &BTreeMap<String, String>, tensors: &[OutTensor]) -> Layout {
    let mut json = String::from("{");
    let mut first = true;
    if !metadata.is_empty() {
        json.push_str("\"__metadata__\":");
        json.push_str(&serde_json::to_string(metadata).expect("string maps serialize"));
        first = false;
    }
    let mut begin = 0u64;
    let mut rel = Vec::with_capacity(tensors.len());
    for t in tensors {
        if !first {
            json.push(',');
        }
        first = false;
        let end = begin + t.byte_len;
        let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        json.push_str(&serde_json::to_string(&t.name).expect("strings serialize"));
        json.push_str(&format!(
            ":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{begin},{end}]}}",
            t.dtype,
            dims.join(",")
        ));
        rel.push(begin);
        begin = end;
    }
    json.push('}');
    let mut json = json.into_bytes();
    let pad = (8 - json.len() % 8) % 8;
    json.extend(std::iter::repeat_n(b' ', pad));
    let data_start = 8 + json.len() as u64;
    let mut header = Vec::with_capacity(json.len() + 8);
    header.extend_from_slice(&(json.len() as u64).to_le_bytes());
    header.extend_from_slice(&json);
    Layout {
        header,
        offsets: rel.iter().map(|r| r + data_start).collect(),
        total_len: data_start + begin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_padded_and_ordered() {
        let mut meta = BTreeMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        let l = layout(
            &meta,
            &[
                OutTensor {
                    name: "a".into(),
                    dtype: "F32",
                    shape: vec![2],
                    byte_len: 8,
                },
                OutTensor {
                    name: "b".into(),
                    dtype: "BF16",
                    shape: vec![],
                    byte_len: 2,
                },
            ],
        );
        assert_eq!(l.header.len() % 8, 0);
        let json = std::str::from_utf8(&l.header[8..]).unwrap();
        assert!(json.starts_with(
            "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
        ));
        assert_eq!(
            l.offsets,
            vec![l.header.len() as u64, l.header.len() as u64 + 8]
        );
        assert_eq!(l.total_len, l.header.len() as u64 + 10);
    }
}
