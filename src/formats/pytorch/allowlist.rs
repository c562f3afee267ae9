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
pub(crate) fn is_expected_import(name: &str) -> bool {
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
    // numpy ≥ 1.24's array rebuilder for pickle protocol 5 (a buffer, a dtype, a shape).
    "numpy.core.numeric._frombuffer",
    "numpy._core.numeric._frombuffer",
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

/// How much a reviewer should care about a global a pickle names that is not one of the
/// globals of tensors (a finding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Tier {
    /// Runs code, imports, opens files or sockets, or reaches attributes by name.
    Dangerous,
    /// A class or function of a library: what it does when called is not known here.
    Unknown,
    /// A type known to hold data only.
    Benign,
}

impl Tier {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tier::Dangerous => "dangerous",
            Tier::Unknown => "unknown",
            Tier::Benign => "benign",
        }
    }
}

/// The tier of `module.name`. Dangerous: a name in [`DANGEROUS`] (a whole module, a module
/// under it, or one name of it), or an unresolvable name; benign: a name in [`BENIGN`] or one
/// of the globals of tensors; else unknown.
pub(crate) fn tier(global: &str) -> Tier {
    // An unresolvable import, as picklescan counts it.
    if global.starts_with('<') || global.contains("unknown") {
        return Tier::Dangerous;
    }
    for (module, names) in DANGEROUS {
        let Some(rest) = global
            .strip_prefix(module)
            .and_then(|rest| rest.strip_prefix('.'))
        else {
            continue;
        };
        if names.is_empty() || names.contains(&rest) {
            return Tier::Dangerous;
        }
    }
    if BENIGN.contains(&global) || is_expected_import(global) {
        return Tier::Benign;
    }
    Tier::Unknown
}

/// The builtins that run code, import, open files or reach attributes by name, under the
/// module's Python 3 name (`builtins`) and its Python 2 name (`__builtin__`).
const BUILTIN_CALLABLES: &[&str] = &[
    "eval",
    "compile",
    "getattr",
    "apply",
    "exec",
    "open",
    "breakpoint",
    "__import__",
    "setattr",
    "delattr",
    "globals",
    "locals",
    "vars",
    "input",
];

/// Globals that run code, import, touch files, processes or the network, or reach attributes
/// by name: module, and the names of it that are dangerous (empty: all of it and its
/// submodules). The union of picklescan 1.0.5's `_unsafe_globals`
/// (<https://github.com/mmaitre314/picklescan>, src/picklescan/scanner.py) and of what
/// fickling and the issue name besides (`importlib`, `builtins.__import__`, `marshal`,
/// `ctypes`, `code`, `pty`, `tempfile`, `io`).
pub(super) const DANGEROUS: &[(&str, &[&str])] = &[
    ("__builtin__", BUILTIN_CALLABLES),
    ("__builtin__", &["execfile", "reload"]),
    ("builtins", BUILTIN_CALLABLES),
    (
        "cloudpickle.cloudpickle",
        &[
            "_builtin_type",
            "_make_function",
            "_function_setstate",
            "_make_cell",
            "_make_empty_cell",
            "subimport",
        ],
    ),
    ("types", &["CodeType", "FunctionType"]),
    ("aiohttp", &[]),
    ("asyncio", &[]),
    ("bdb", &[]),
    ("commands", &[]),
    ("ctypes", &[]),
    ("functools", &["partial", "reduce"]),
    ("httplib", &[]),
    ("http.client", &[]),
    ("logging", &["FileHandler"]),
    ("_io", &["FileIO", "open"]),
    ("io", &["FileIO", "open"]),
    ("numpy.f2py", &[]),
    ("numpy.testing._private.utils", &[]),
    ("nt", &[]),
    ("posix", &[]),
    ("_operator", &["attrgetter", "itemgetter", "methodcaller"]),
    ("operator", &["attrgetter", "itemgetter", "methodcaller"]),
    ("os", &[]),
    ("requests.api", &[]),
    ("runpy", &[]),
    ("shutil", &[]),
    ("socket", &[]),
    ("ssl", &[]),
    ("subprocess", &[]),
    ("sys", &[]),
    ("code", &[]),
    ("codeop", &[]),
    ("cProfile", &[]),
    ("distutils.file_util", &[]),
    ("doctest", &["debug_script"]),
    ("ensurepip", &["_run_pip"]),
    (
        "idlelib.autocomplete",
        &["AutoComplete.get_entity", "AutoComplete.fetch_completions"],
    ),
    ("idlelib.calltip", &["Calltip.fetch_tip", "get_entity"]),
    ("idlelib.debugobj", &["ObjectTreeItem.SetText"]),
    (
        "idlelib.pyshell",
        &[
            "ModifiedInterpreter.runcode",
            "ModifiedInterpreter.runcommand",
        ],
    ),
    ("idlelib.run", &["Executive.runcode"]),
    ("imaplib", &["IMAP4_stream"]),
    ("importlib", &[]),
    ("lib2to3.pgen2.grammar", &["Grammar.loads"]),
    ("lib2to3.pgen2.pgen", &["ParserGenerator.make_label"]),
    ("marshal", &[]),
    ("pdb", &[]),
    ("pickle", &[]),
    ("_pickle", &[]),
    ("pip", &[]),
    ("pkgutil", &["resolve_name"]),
    ("pty", &[]),
    ("profile", &[]),
    ("pydoc", &[]),
    ("tempfile", &[]),
    ("test", &[]),
    ("timeit", &[]),
    ("torch._dynamo.guards", &["GuardBuilder.get"]),
    ("torch._inductor.codecache", &["compile_file"]),
    (
        "torch.fx.experimental.symbolic_shapes",
        &["ShapeEnv.evaluate_guards_expression"],
    ),
    ("torch.jit.unsupported_tensor_ops", &["execWrapper"]),
    ("torch.serialization", &["load"]),
    ("torch.utils._config_module", &["ConfigModule.load_config"]),
    (
        "torch.utils.bottleneck.__main__",
        &["run_cprofile", "run_autograd_prof"],
    ),
    ("torch.utils.collect_env", &["run"]),
    (
        "torch.utils.data.datapipes.utils.decoder",
        &["basichandlers"],
    ),
    ("trace", &["Trace.run", "Trace.runctx"]),
    ("urllib.request", &[]),
    ("uuid", &[]),
    ("venv", &[]),
    ("webbrowser", &[]),
    ("_osx_support", &[]),
    ("_aix_support", &[]),
    ("_pyrepl", &[]),
];

/// Globals known to hold data only: what training checkpoints name beside their tensors.
pub(super) const BENIGN: &[&str] = &[
    "argparse.Namespace",
    "collections.OrderedDict",
    "collections.defaultdict",
    "collections.Counter",
    "builtins.set",
    "builtins.frozenset",
    "builtins.slice",
    "builtins.complex",
    "builtins.bytearray",
    "builtins.object",
    "__builtin__.set",
    "__builtin__.object",
    "datetime.datetime",
    "datetime.date",
    "datetime.timedelta",
    "decimal.Decimal",
    "pathlib.PosixPath",
    "pathlib.WindowsPath",
    "numpy.dtype",
    "numpy.ndarray",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.random._pickle.__randomstate_ctor",
    "numpy.random._pickle.__generator_ctor",
    "numpy.random._pickle.__bit_generator_ctor",
    "numpy.random.mtrand.RandomState",
    "torch.Size",
    "torch.device",
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
    fn tiers_follow_the_lists() {
        for name in [
            "posix.system",
            "builtins.eval",
            "builtins.getattr",
            "__builtin__.__import__",
            "subprocess.Popen",
            "os.path.join",
            "runpy._run_code",
            "importlib.import_module",
            "torch.serialization.load",
            "<copyreg extension 1>",
        ] {
            assert_eq!(tier(name), Tier::Dangerous, "{name}");
        }
        for name in [
            "argparse.Namespace",
            "numpy._core.multiarray._reconstruct",
            "torch.Size",
        ] {
            assert_eq!(tier(name), Tier::Benign, "{name}");
        }
        for name in [
            "__main__.Net",
            "transformers.training_args.TrainingArguments",
            "builtins.print",
            "osmosis.x",
            "torch.serialization.StorageType",
        ] {
            assert_eq!(tier(name), Tier::Unknown, "{name}");
        }
    }

    #[test]
    fn os_aliases_are_named() {
        assert_eq!(with_os_alias("posix.system"), "posix.system (os.system)");
        assert_eq!(with_os_alias("nt.system"), "nt.system (os.system)");
        assert_eq!(with_os_alias("os.system"), "os.system");
    }
}
