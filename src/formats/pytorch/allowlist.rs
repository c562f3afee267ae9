//! Which imports a tensor checkpoint needs, and which ones a reviewer should look at.

/// CPython pickles `os.system` as `posix.system` (or `nt.system`): say which it is.
pub(super) fn with_os_alias(name: &str) -> String {
    match name.split_once('.') {
        Some(("posix" | "nt", attr)) => format!("{name} (os.{attr})"),
        _ => name.to_string(),
    }
}

/// Globals a torch/numpy tensor checkpoint legitimately imports.
pub(super) fn is_expected_import(name: &str) -> bool {
    let (module, attr) = name.rsplit_once('.').unwrap_or(("", name));
    matches!(
        name,
        "collections.OrderedDict" | "_codecs.encode" | "builtins.set" | "builtins.frozenset"
    ) || ((module == "torch" || module.starts_with("torch."))
        && !attr.is_empty()
        && module != "torch.hub"
        && module != "torch.jit"
        && module != "torch.package")
        || module == "numpy"
        || module.starts_with("numpy.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_modules_are_expected_code_loaders_are_not() {
        for name in [
            "collections.OrderedDict",
            "torch._utils._rebuild_tensor_v2",
            "torch.FloatStorage",
            "numpy.core.multiarray._reconstruct",
        ] {
            assert!(is_expected_import(name), "{name}");
        }
        for name in [
            "posix.system",
            "builtins.eval",
            "torch.hub.load",
            "torch.jit._load",
            "torch.package.PackageImporter",
            "torchvision.x",
            "torch",
        ] {
            assert!(!is_expected_import(name), "{name}");
        }
    }

    #[test]
    fn os_aliases_are_named() {
        assert_eq!(with_os_alias("posix.system"), "posix.system (os.system)");
        assert_eq!(with_os_alias("nt.system"), "nt.system (os.system)");
        assert_eq!(with_os_alias("os.system"), "os.system");
    }
}
