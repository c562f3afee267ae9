//! Recognizes PyTorch pickle checkpoints by their bytes and lists the globals they import.
//!
//! Nothing is ever unpickled: loading a pickle runs whatever callables it names (`os.system`
//! included), which is why policies forbid them. The scanner walks the opcode stream, skipping
//! every argument by its declared length, and records the `module.name` pairs that GLOBAL, INST
//! and STACK_GLOBAL would import. Two containers are recognized:
//! - a zip archive holding `data.pkl` (PyTorch ≥ 1.6 `torch.save`; entries are stored
//!   uncompressed, so the pickle is read in place), found through the central directory;
//! - a raw pickle of protocol 2 or later (legacy `torch.save`, which writes several pickles
//!   back to back followed by raw storage bytes).
//!
//! Work is linear in the bytes scanned, the number of imports kept is capped, and nothing is
//! allocated by a count read from the file.
//!
//! `zip.rs` finds the members of a zip archive, `opcodes.rs` walks a pickle stream, and
//! `allowlist.rs` tells the imports a tensor checkpoint needs from the ones a reviewer should
//! look at.

mod allowlist;
mod opcodes;
mod zip;

use opcodes::Scanner;
use zip::ZipEntry;

/// Imports beyond this many distinct names are counted but not listed.
const MAX_IMPORTS: usize = 256;
/// Raw pickles following one another (legacy torch.save writes five).
const MAX_STREAMS: usize = 16;

/// How the pickle was wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// A zip archive; `entry` is the name of the `data.pkl` member.
    Zip { entry: String },
    /// A bare pickle stream starting with the PROTO opcode.
    Raw { protocol: u8 },
}

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickleReport {
    pub container: Container,
    /// Distinct `module.name` imports in order of first appearance (at most 256).
    pub imports: Vec<String>,
    /// Distinct imports not listed because of the cap.
    pub imports_omitted: usize,
    /// Why the scan stopped early, if it did (a compressed member, a malformed stream...).
    /// The imports before that point are still reported.
    pub incomplete: Option<String>,
}

impl PickleReport {
    /// Imports that a plain PyTorch/NumPy state dict does not need: the ones a reviewer should
    /// look at (`os.system`, `builtins.eval`, `subprocess.Popen`...).
    pub fn unexpected_imports(&self) -> Vec<&str> {
        self.imports
            .iter()
            .map(String::as_str)
            .filter(|name| !allowlist::is_expected_import(name))
            .collect()
    }

    /// One line for reports: container, then imports with the unexpected ones called out.
    pub fn describe(&self) -> String {
        let mut out = match &self.container {
            Container::Zip { entry } => format!("pickle (zip archive, {entry})"),
            Container::Raw { protocol } => format!("pickle (raw, protocol {protocol})"),
        };
        if self.imports.is_empty() {
            out.push_str(" importing nothing");
        } else {
            out.push_str(" importing ");
            out.push_str(&self.imports.join(", "));
            if self.imports_omitted > 0 {
                out.push_str(&format!(" and {} more", self.imports_omitted));
            }
            let unexpected: Vec<String> = self
                .unexpected_imports()
                .into_iter()
                .map(allowlist::with_os_alias)
                .collect();
            if !unexpected.is_empty() {
                out.push_str(&format!(
                    "; suspicious (not needed by a tensor state dict): {}",
                    unexpected.join(", ")
                ));
            }
        }
        if let Some(why) = &self.incomplete {
            out.push_str(&format!(" (scan incomplete: {why})"));
        }
        out
    }
}

/// Recognizes a pickle checkpoint and scans it; None when `bytes` is not one.
pub fn sniff(bytes: &[u8]) -> Option<PickleReport> {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return sniff_zip(bytes);
    }
    sniff_raw(bytes)
}

fn sniff_raw(bytes: &[u8]) -> Option<PickleReport> {
    let protocol = match bytes {
        [0x80, p @ 2..=5, ..] => *p,
        _ => return None,
    };
    let mut scan = Scanner::default();
    let mut pos = 0usize;
    let mut streams = 0usize;
    let mut incomplete = None;
    // Legacy torch.save: magic, protocol, sys_info, the object, storage keys, then raw data.
    while streams < MAX_STREAMS
        && bytes.get(pos) == Some(&0x80)
        && matches!(bytes.get(pos + 1), Some(2..=5))
    {
        match scan.run(bytes, pos) {
            Ok(end) => {
                streams += 1;
                pos = end;
            }
            Err(err) => {
                // The first opcodes must parse for the bytes to count as a pickle at all.
                if streams == 0 && scan.opcodes < 3 {
                    return None;
                }
                // After a complete pickle, what follows may be raw storage bytes that merely
                // start like one; the imports seen on the way are kept either way.
                if streams == 0 {
                    incomplete = Some(err);
                }
                break;
            }
        }
    }
    Some(scan.finish(Container::Raw { protocol }, incomplete))
}

fn sniff_zip(bytes: &[u8]) -> Option<PickleReport> {
    let entries = zip::entries(bytes)?;
    let data_pkl = entries
        .iter()
        .find(|e| e.name == "data.pkl" || e.name.ends_with("/data.pkl"))?;
    let mut scan = Scanner::default();
    let mut incomplete = None;
    // Scan data.pkl first, then any other pickle members (TorchScript's constants.pkl...).
    let mut order: Vec<&ZipEntry> = vec![data_pkl];
    order.extend(
        entries
            .iter()
            .filter(|e| e.name.ends_with(".pkl") && e.name != data_pkl.name),
    );
    for entry in order {
        let result = entry
            .stored_data(bytes)
            .and_then(|data| scan.run(data, 0).map(|_| ()));
        if let Err(err) = result {
            incomplete.get_or_insert(format!("{}: {err}", entry.name));
        }
    }
    Some(scan.finish(
        Container::Zip {
            entry: data_pkl.name.clone(),
        },
        incomplete,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pickle.dumps({"a": 1}, protocol=2)`
    const DICT_P2: &[u8] = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01s.";

    #[test]
    fn plain_dict_imports_nothing() {
        let r = sniff(DICT_P2).unwrap();
        assert_eq!(r.container, Container::Raw { protocol: 2 });
        assert!(r.imports.is_empty());
        assert!(r.incomplete.is_none());
    }

    #[test]
    fn global_opcode_protocol_2() {
        // pickle.dumps(os.system-reducer, protocol=2) as CPython writes it.
        let bytes = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00echoq\x01\x85q\x02Rq\x03.";
        let r = sniff(bytes).unwrap();
        assert_eq!(r.imports, vec!["posix.system"]);
        assert_eq!(r.unexpected_imports(), vec!["posix.system"]);
    }

    #[test]
    fn stack_global_with_memo() {
        // protocol 4: SHORT_BINUNICODE "os" MEMOIZE SHORT_BINUNICODE "system" MEMOIZE
        // STACK_GLOBAL MEMOIZE, then the same global again through BINGET 0 / BINGET 1.
        let mut b = vec![0x80, 4, 0x95];
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(b"\x8c\x02os\x94\x8c\x06system\x94\x93\x94");
        b.extend_from_slice(b"h\x00h\x01\x93\x94");
        b.extend_from_slice(b"\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93\x94");
        b.extend_from_slice(b")R\x94.");
        let r = sniff(&b).unwrap();
        assert_eq!(r.imports, vec!["os.system", "collections.OrderedDict"]);
        assert_eq!(r.unexpected_imports(), vec!["os.system"]);
    }

    #[test]
    fn not_a_pickle() {
        assert!(sniff(b"GGUF\x03\x00\x00\x00").is_none());
        assert!(sniff(b"\x80\x02\xff\xff\xff").is_none());
        assert!(sniff(b"").is_none());
        assert!(sniff(b"\x80").is_none());
        assert!(sniff(b"PK\x03\x04").is_none());
    }

    #[test]
    fn truncated_stream_is_reported_not_dropped() {
        let bytes = b"\x80\x02cposix\nsystem\nq\x00X\xff\xff\x00\x00ab";
        let r = sniff(bytes).unwrap();
        assert_eq!(r.imports, vec!["posix.system"]);
        assert!(r.incomplete.as_deref().unwrap().contains("past the end"));
    }

    #[test]
    fn raw_storage_after_the_pickles_is_not_scanned_as_pickle() {
        let mut b = DICT_P2.to_vec();
        b.extend_from_slice(b"\x80\x02\xff\xff raw storage bytes");
        let r = sniff(&b).unwrap();
        assert!(r.incomplete.is_none(), "{r:?}");
        // A second stream that imports before breaking still reports its import.
        let mut b = DICT_P2.to_vec();
        b.extend_from_slice(b"\x80\x02cos\nsystem\n\xff");
        assert_eq!(sniff(&b).unwrap().imports, vec!["os.system"]);
    }

    #[test]
    fn hostile_lengths_do_not_panic() {
        for op in [0x8d_u8, 0x8e, 0x96, b'B', b'T', b'X', 0x8b] {
            let mut b = vec![0x80, 4, b'N', b'N', b'N', op];
            b.extend_from_slice(&[0xff; 8]);
            let _ = sniff(&b);
        }
    }

    fn stored_zip(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in members {
            let offset = out.len() as u32;
            let mut h = Vec::new();
            h.extend_from_slice(b"PK\x03\x04");
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            h.extend_from_slice(&0u32.to_le_bytes()); // crc (not checked)
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(&h);
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            central.extend_from_slice(b"PK\x01\x02");
            central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend_from_slice(&0u32.to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(name.len() as u16).to_le_bytes());
            central.extend_from_slice(&[0; 8]);
            central.extend_from_slice(&0u32.to_le_bytes());
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let cd_offset = out.len() as u32;
        out.extend_from_slice(&central);
        out.extend_from_slice(b"PK\x05\x06\0\0\0\0");
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(central.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_offset.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    #[test]
    fn zip_with_data_pkl() {
        let zip = stored_zip(&[
            ("archive/version", b"3\n"),
            (
                "archive/data.pkl",
                b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nq\x00.",
            ),
            ("archive/data/0", &[0u8; 16]),
        ]);
        let r = sniff(&zip).unwrap();
        assert_eq!(
            r.container,
            Container::Zip {
                entry: "archive/data.pkl".into()
            }
        );
        assert_eq!(r.imports, vec!["torch._utils._rebuild_tensor_v2"]);
        assert!(r.unexpected_imports().is_empty());
        // Without the central directory, the local headers still lead to data.pkl.
        let cut = &zip[..zip.len() - 40];
        assert_eq!(sniff(cut).unwrap().imports, r.imports);
    }

    #[test]
    fn zip_without_data_pkl_is_not_a_checkpoint() {
        let zip = stored_zip(&[("readme.txt", b"hello")]);
        assert!(sniff(&zip).is_none());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..512), head in 0usize..4) {
            let prefixes: [&[u8]; 4] = [b"", b"\x80\x02", b"\x80\x04\x95", b"PK\x03\x04"];
            let mut bytes = prefixes[head].to_vec();
            bytes.extend_from_slice(&body);
            let _ = sniff(&bytes);
            // A real archive with a garbage data.pkl, cut anywhere.
            let zip = stored_zip(&[("archive/data.pkl", &body)]);
            for cut in [zip.len(), zip.len() / 2, 31] {
                let _ = sniff(&zip[..cut.min(zip.len())]);
            }
        }
    }
}
