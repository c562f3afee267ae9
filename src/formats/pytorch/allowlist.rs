//! Which imports a tensor checkpoint needs, and which ones a reviewer should look at.

/// CPython pickles `os.system` as `posix.system` (or `nt.system`): say which it is.
pub(super) fn with_os_alias(name: &str) -> String {
    match name.split_once('.') {
        Some(("posix" | "nt", attr)) => format!("{name} (os.{attr})"),
        _ => name.to_string(),
    }
}

/// Globals a torch/numpy tensor checkpoint legitimately imports: an explicit list, never a
/// whole module (`torch.utils.cpp_extension.load_inline` and
/// `numpy.testing._private.utils.runstring` run code, and both live under `torch.`/`numpy.`).
pub(super) fn is_expected_import(name: &str) -> bool {
    if EXPECTED.contains(&name) {
        return true;
    }
    // `torch.FloatStorage` and the other storage classes, and torch's dtypes, layouts and
    // memory formats (`torch.float16`, `torch.strided`), which pickle as attributes of `torch`.
    let Some(attr) = name.strip_prefix("torch.") else {
        return false;
    };
    (attr.ends_with("Storage")
        && attr.len() > "Storage".len()
        && attr.bytes().all(|b| b.is_ascii_alphanumeric()))
        || TORCH_ATTRIBUTES.contains(&attr)
}

/// What `torch.save` and numpy write for tensors, parameters and arrays.
const EXPECTED: &[&str] = &[
    "collections.OrderedDict",
    "_codecs.encode",
    "builtins.set",
    "builtins.frozenset",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_sparse_csr_tensor",
    "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._tensor._rebuild_from_type",
    "torch._tensor._rebuild_from_type_v2",
    "torch.nn.parameter.Parameter",
    "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
    "torch.storage._load_from_bytes",
    "torch.serialization._get_layout",
    "torch.torch_version.TorchVersion",
    "torch.Size",
    "torch.device",
    "torch.Tensor",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.ndarray",
    "numpy.dtype",
];

/// `torch.NAME` attributes a checkpoint names: dtypes, layouts, memory formats, quantization
/// schemes.
const TORCH_ATTRIBUTES: &[&str] = &[
    "float32",
    "float",
    "float64",
    "double",
    "float16",
    "half",
    "bfloat16",
    "complex32",
    "complex64",
    "complex128",
    "cfloat",
    "cdouble",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "short",
    "int32",
    "int",
    "int64",
    "long",
    "bool",
    "quint8",
    "qint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "_mkldnn",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
    "per_tensor_affine",
    "per_channel_affine",
    "per_tensor_symmetric",
    "per_channel_symmetric",
    "per_channel_affine_float_qparams",
];

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
            "torch.BFloat16Storage",
            "torch.float16",
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
            "torch.utils.cpp_extension.load_inline",
            "numpy.testing._private.utils.runstring",
            "torch.load",
            "torch.Storage.x",
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
