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
/// under it, or one name of it), an unresolvable name, or a dotted name that passes through a
/// dangerous module as an attribute (`torch.serialization.os.system`: pickle resolves the
/// name attribute by attribute, and `torch.serialization.os` is the `os` module); benign: a
/// name in [`BENIGN`] or one of the globals of tensors; else unknown.
pub(crate) fn tier(global: &str) -> Tier {
    // An unresolvable import, as picklescan counts it.
    if global.starts_with('<') || global.contains("unknown") {
        return Tier::Dangerous;
    }
    if listed_dangerous(global) {
        return Tier::Dangerous;
    }
    if BENIGN.contains(&global) || is_expected_import(global) {
        return Tier::Benign;
    }
    if passes_through_dangerous(global) {
        return Tier::Dangerous;
    }
    Tier::Unknown
}

/// Whether `global` is a dangerous module, under one, or one of a module's dangerous names.
fn listed_dangerous(global: &str) -> bool {
    DANGEROUS.iter().any(|entry| {
        global
            .strip_prefix(entry.module)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|rest| entry.names.is_empty() || entry.names.contains(&rest))
    })
}

/// Whether a tail of `global`, from its second dotted part on, is dangerous while something
/// is still reached from it: `a.os.system` reaches `system` through `a.os`. The benign list is
/// consulted first, so a package's own submodule named like a dangerous one
/// (`numpy.random._pickle`) is not flagged for its known data types.
fn passes_through_dangerous(global: &str) -> bool {
    let mut rest = global;
    while let Some((_, tail)) = rest.split_once('.') {
        if tail.contains('.') && listed_dangerous(tail) {
            return true;
        }
        rest = tail;
    }
    false
}

/// The builtins that run code, import, open files or reach attributes by name, under the
/// module's Python 3 name (`builtins`), its Python 2 name (`__builtin__`) and the name of the
/// dict it is reached through (`__builtins__`).
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
    "dir",
];

/// The scanners a dangerous entry was reviewed against, and which of them list it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// picklescan 1.0.5, `_unsafe_globals` (src/picklescan/scanner.py).
    Picklescan,
    /// modelscan, `DEFAULT_SETTINGS["unsafe_globals"]` (modelscan/settings.py).
    Modelscan,
    /// fickling, `UNSAFE_IMPORTS` (fickling/fickle.py).
    Fickling,
    /// ModelAudit, `SUSPICIOUS_GLOBALS` (modelaudit/detectors/suspicious_symbols.py).
    ModelAudit,
    /// This project's own review: code paths the scanners do not name (issue 44).
    Review,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Source {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Picklescan => "picklescan",
            Source::Modelscan => "modelscan",
            Source::Fickling => "fickling",
            Source::ModelAudit => "ModelAudit",
            Source::Review => "review",
        }
    }
}

/// One dangerous module, or some names of it, with who lists it and why it is dangerous.
/// Its sources and reason are data for review (docs/pytorch.md renders them); the tier
/// reads only the module and names.
#[derive(Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Dangerous {
    pub(crate) module: &'static str,
    /// The dangerous names of the module; empty: all of it and its submodules.
    pub(crate) names: &'static [&'static str],
    pub(crate) sources: &'static [Source],
    pub(crate) why: &'static str,
}

use Source::{Fickling as F, ModelAudit as A, Modelscan as M, Picklescan as P, Review as R};

const fn entry(
    module: &'static str,
    names: &'static [&'static str],
    sources: &'static [Source],
    why: &'static str,
) -> Dangerous {
    Dangerous {
        module,
        names,
        sources,
        why,
    }
}

const ALL: &[&str] = &[];

/// Globals that run code, import, touch files, processes or the network, or reach attributes
/// by name. "Dangerous" is anything that executes: the union of what the four scanners list
/// ([`Source`]), reviewed entry by entry, and code paths inside torch and numpy they do not
/// name. docs/pytorch.md renders this table (a test keeps the two in step). Not adopted from
/// the scanners: `base64`, `codecs` (encoders; numpy's protocol-2 arrays are
/// `_codecs.encode`), `difflib` (compares sequences) and `platform.system` (returns the OS's
/// name).
pub(crate) const DANGEROUS: &[Dangerous] = &[
    entry(
        "builtins",
        BUILTIN_CALLABLES,
        &[P, M, F, A],
        "eval, exec, import, open, getattr",
    ),
    entry(
        "__builtin__",
        BUILTIN_CALLABLES,
        &[P, M, F, A],
        "Python 2's builtins",
    ),
    entry(
        "__builtin__",
        &["execfile", "reload"],
        &[A],
        "Python 2's file execution",
    ),
    entry(
        "__builtins__",
        BUILTIN_CALLABLES,
        &[F, A],
        "the builtins, as a module's dict names them",
    ),
    entry(
        "os",
        ALL,
        &[P, M, F, A],
        "system, popen, exec*, spawn*, files",
    ),
    entry("posix", ALL, &[P, M, F, A], "os on Unix"),
    entry("nt", ALL, &[P, M, F, A], "os on Windows"),
    entry("posixpath", ALL, &[A], "os.path on Unix"),
    entry("ntpath", ALL, &[A], "os.path on Windows"),
    entry("subprocess", ALL, &[P, M, F, A], "runs commands"),
    entry("_posixsubprocess", ALL, &[F], "fork_exec"),
    entry("commands", ALL, &[P, F, A], "Python 2's subprocess"),
    entry("pty", ALL, &[P, M, F, A], "spawn"),
    entry(
        "sys",
        ALL,
        &[P, M, F, A],
        "modules, the interpreter's state",
    ),
    entry("runpy", ALL, &[P, M, F, A], "runs modules and files"),
    entry("code", ALL, &[P, F], "an interactive interpreter"),
    entry("codeop", ALL, &[F, A], "compiles code"),
    entry(
        "types",
        &["CodeType", "FunctionType"],
        &[F, A],
        "builds functions from bytecode",
    ),
    entry("marshal", ALL, &[F, A], "loads bytecode"),
    entry("importlib", ALL, &[F, A, R], "imports"),
    entry("_frozen_importlib", ALL, &[F], "imports"),
    entry(
        "_frozen_importlib_external",
        ALL,
        &[F],
        "imports, loads files",
    ),
    entry("_imp", ALL, &[F], "imports"),
    entry("imp", ALL, &[F], "load_source runs a file"),
    entry("pkgutil", ALL, &[F, A], "resolve_name imports"),
    entry(
        "zipimport",
        ALL,
        &[F, A, R],
        "zipimporter loads code from an archive",
    ),
    entry("site", ALL, &[F], "runs .pth files"),
    entry("gc", ALL, &[F], "reaches every object"),
    entry("inspect", ALL, &[F], "getattr by another name"),
    entry("unittest", ALL, &[F], "loads and runs tests"),
    entry("test", ALL, &[F], "CPython's test support runs code"),
    entry("doctest", ALL, &[P, F, A], "runs docstrings, debug_script"),
    entry("_interpreters", ALL, &[F], "runs code in a subinterpreter"),
    entry(
        "_xxsubinterpreters",
        ALL,
        &[F],
        "runs code in a subinterpreter",
    ),
    entry(
        "operator",
        &["attrgetter", "itemgetter", "methodcaller"],
        &[P, M, F, A],
        "getattr by another name",
    ),
    entry(
        "_operator",
        &["attrgetter", "itemgetter", "methodcaller"],
        &[F, A],
        "getattr by another name",
    ),
    entry(
        "functools",
        &["partial", "reduce"],
        &[P, F, A],
        "binds a callable's arguments",
    ),
    entry(
        "cProfile",
        ALL,
        &[P, F, A, R],
        "run and runctx exec a string",
    ),
    entry("profile", ALL, &[P, F, A], "run and runctx exec a string"),
    entry("pdb", ALL, &[P, F, A], "the debugger runs code"),
    entry("bdb", ALL, &[P, F, A], "the debugger runs code"),
    entry("timeit", ALL, &[P, F, A], "exec of a string"),
    entry("trace", ALL, &[P, F, A], "runs code"),
    entry(
        "linecache",
        ALL,
        &[F, R],
        "getline reads any file (and lazy loaders import)",
    ),
    entry("fileinput", ALL, &[F, A], "reads files"),
    entry("glob", ALL, &[F, A], "lists files"),
    entry("filecmp", ALL, &[F, A], "reads files"),
    entry("shutil", ALL, &[P, F, A], "copies, moves, removes files"),
    entry("tempfile", ALL, &[F, A], "creates files"),
    entry("distutils", ALL, &[P, F, A], "write_file, spawn"),
    entry("io", &["FileIO", "open", "open_code"], &[R], "opens files"),
    entry("_io", &["FileIO", "open", "open_code"], &[R], "opens files"),
    entry("mmap", ALL, &[F, A], "maps files and memory"),
    entry("tarfile", ALL, &[F, A], "extracts archives"),
    entry("zipfile", ALL, &[F, A], "extracts archives"),
    entry("shelve", ALL, &[F, A], "opens databases of pickles"),
    entry("sqlite3", ALL, &[F, A], "opens databases"),
    entry("_sqlite3", ALL, &[F, A], "opens databases"),
    entry("compileall", ALL, &[F, A], "writes bytecode"),
    entry("py_compile", ALL, &[F, A], "writes bytecode"),
    entry("pickle", ALL, &[P, M, F, A], "a pickle inside the pickle"),
    entry("_pickle", ALL, &[P, F, A], "a pickle inside the pickle"),
    entry(
        "dill",
        ALL,
        &[F, A, R],
        "_dill._create_function and _create_code build code",
    ),
    entry("cloudpickle", ALL, &[F, A], "builds functions and imports"),
    entry("joblib", ALL, &[F, A], "loads pickles"),
    entry("socket", ALL, &[P, M, F, A], "network"),
    entry("socketserver", ALL, &[F, A], "listens"),
    entry("ssl", ALL, &[P, F, A], "network (get_server_certificate)"),
    entry("select", ALL, &[F, A], "network multiplexing"),
    entry("selectors", ALL, &[F, A], "network multiplexing"),
    entry("http", ALL, &[F], "network clients and servers"),
    entry("httplib", ALL, &[P, M, F], "Python 2's http.client"),
    entry("urllib", ALL, &[F], "downloads"),
    entry("urllib2", ALL, &[F], "Python 2's downloads"),
    entry("requests", ALL, &[P, M, F, A], "downloads (requests.api)"),
    entry("aiohttp", ALL, &[P, M, F, A], "network"),
    entry("asyncio", ALL, &[P, F, A], "runs coroutines, subprocesses"),
    entry("smtplib", ALL, &[F, A], "network"),
    entry("imaplib", ALL, &[F, A], "IMAP4_stream runs a command"),
    entry("ftplib", ALL, &[F], "network"),
    entry("poplib", ALL, &[F, A], "network"),
    entry("telnetlib", ALL, &[F], "network"),
    entry("nntplib", ALL, &[F, A], "network"),
    entry("xmlrpc", ALL, &[F, A], "network, remote calls"),
    entry(
        "webbrowser",
        ALL,
        &[P, M, F, A],
        "opens URLs, runs a browser",
    ),
    entry(
        "logging.config",
        ALL,
        &[F, A, R],
        "listen serves a socket that executes configuration",
    ),
    entry(
        "logging.handlers",
        ALL,
        &[F],
        "handlers open files and sockets",
    ),
    entry(
        "logging",
        &["FileHandler", "config", "handlers"],
        &[F, A],
        "opens files",
    ),
    entry("syslog", ALL, &[F, A], "writes to the system log"),
    entry("multiprocessing", ALL, &[F, A], "starts processes"),
    entry(
        "concurrent.futures",
        &["ProcessPoolExecutor", "ThreadPoolExecutor"],
        &[A],
        "runs callables",
    ),
    entry("threading", ALL, &[F, A], "runs callables in threads"),
    entry(
        "_thread",
        ALL,
        &[F, A, R],
        "start_new_thread runs a callable",
    ),
    entry("signal", ALL, &[F, A], "installs handlers"),
    entry("_signal", ALL, &[F, A], "installs handlers"),
    entry("atexit", ALL, &[F], "registers callables"),
    entry(
        "ctypes",
        ALL,
        &[P, F, A, R],
        "loads libraries, calls C, writes memory",
    ),
    entry(
        "_ctypes",
        ALL,
        &[F, A],
        "loads libraries, calls C, writes memory",
    ),
    entry(
        "pydoc",
        ALL,
        &[P, F, A],
        "locate imports, pipepager runs a command",
    ),
    entry("pexpect", ALL, &[F, A], "spawns commands"),
    entry("pipes", ALL, &[F], "Template runs shell commands"),
    entry("venv", ALL, &[P, F, A], "creates environments, runs pip"),
    entry("ensurepip", ALL, &[P, F, A], "runs pip"),
    entry("pip", ALL, &[P, F, A], "installs packages"),
    entry("idlelib", ALL, &[P, F, A], "runcode and friends"),
    entry(
        "lib2to3",
        ALL,
        &[P, F, A],
        "Grammar.loads unpickles, make_label evals",
    ),
    entry(
        "uuid",
        ALL,
        &[F, A],
        "runs commands to find the MAC address",
    ),
    entry("_osx_support", ALL, &[F], "runs commands"),
    entry("_aix_support", ALL, &[F], "runs commands"),
    entry("_pyrepl", ALL, &[R], "an interactive interpreter"),
    entry("numpy.f2py", ALL, &[P], "eval of strings"),
    entry(
        "numpy.testing._private.utils",
        ALL,
        &[P, R],
        "runstring is exec",
    ),
    entry("numpy.testing", &["runstring"], &[R], "runstring is exec"),
    entry(
        "numpy",
        &["load"],
        &[R],
        "loads another pickle (allow_pickle)",
    ),
    entry(
        "numpy.lib.npyio",
        &["load"],
        &[R],
        "loads another pickle (allow_pickle)",
    ),
    entry(
        "numpy.ctypeslib",
        ALL,
        &[R],
        "load_library loads a shared library",
    ),
    entry("pandas", &["read_pickle"], &[R], "loads another pickle"),
    entry("pandas.io.pickle", ALL, &[R], "loads another pickle"),
    entry("torch", &["load"], &[R], "loads another pickle"),
    entry(
        "torch.serialization",
        &["load"],
        &[P, R],
        "loads another pickle",
    ),
    entry("torch.hub", ALL, &[R], "downloads and runs hubconf.py"),
    entry(
        "torch.utils.cpp_extension",
        ALL,
        &[R],
        "load_inline compiles and loads C++",
    ),
    entry(
        "torch.jit",
        &["load", "_load", "_load_for_lite_interpreter"],
        &[R],
        "loads TorchScript code",
    ),
    entry(
        "torch.jit._serialization",
        ALL,
        &[R],
        "loads TorchScript code",
    ),
    entry("torch.jit.mobile", ALL, &[R], "loads TorchScript code"),
    entry(
        "torch.jit.unsupported_tensor_ops",
        &["execWrapper"],
        &[P],
        "exec",
    ),
    entry(
        "torch.package",
        ALL,
        &[R],
        "PackageImporter imports code from an archive",
    ),
    entry("torch.library", ALL, &[R], "registers operators"),
    entry(
        "torch.ops",
        ALL,
        &[R],
        "load_library loads a shared library",
    ),
    entry("torch._dynamo.guards", &["GuardBuilder.get"], &[P], "eval"),
    entry(
        "torch._inductor.codecache",
        ALL,
        &[P, R],
        "compile_file runs a compiler",
    ),
    entry(
        "torch.fx.experimental.symbolic_shapes",
        &["ShapeEnv.evaluate_guards_expression"],
        &[P],
        "eval",
    ),
    entry(
        "torch.utils._config_module",
        &["ConfigModule.load_config"],
        &[P],
        "a pickle inside the pickle",
    ),
    entry(
        "torch.utils.bottleneck.__main__",
        &["run_cprofile", "run_autograd_prof"],
        &[P],
        "exec",
    ),
    entry("torch.utils.collect_env", &["run"], &[P], "runs a command"),
    entry(
        "torch.utils.data.datapipes.utils.decoder",
        &["basichandlers"],
        &[P],
        "a pickle inside the pickle",
    ),
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
            "zipimport.zipimporter",
            "linecache.getline",
            "logging.config.listen",
            "_thread.start_new_thread",
            "dill._dill._create_function",
            "dill._dill._create_code",
            "cProfile.run",
            "ctypes.CDLL",
            "torch.utils.cpp_extension.load_inline",
            "torch.hub.load",
            "numpy.testing._private.utils.runstring",
            "torch.jit.load",
            "torch.jit._serialization.load",
            "torch.serialization.os.system",
            "torch.serialization.os.path.join",
            "a.b.builtins.eval",
        ] {
            assert_eq!(tier(name), Tier::Dangerous, "{name}");
        }
        for name in [
            "argparse.Namespace",
            "numpy._core.multiarray._reconstruct",
            "torch.Size",
            "numpy.random._pickle.__randomstate_ctor",
        ] {
            assert_eq!(tier(name), Tier::Benign, "{name}");
        }
        for name in [
            "__main__.Net",
            "transformers.training_args.TrainingArguments",
            "builtins.print",
            "osmosis.x",
            "torch.serialization.StorageType",
            "torch.nn.modules.linear.Linear",
            "mypackage.os",
            "mypackage.osmosis.system",
        ] {
            assert_eq!(tier(name), Tier::Unknown, "{name}");
        }
    }

    #[test]
    fn the_documented_table_is_the_list() {
        let doc = include_str!("../../../docs/pytorch.md");
        for entry in DANGEROUS {
            let names = if entry.names.is_empty() {
                "*".to_owned()
            } else {
                entry.names.join(", ")
            };
            let sources: Vec<_> = entry.sources.iter().map(|s| s.name()).collect();
            let row = format!(
                "| `{}` | {} | {} | {} |",
                entry.module,
                names,
                sources.join(", "),
                entry.why
            );
            assert!(doc.contains(&row), "docs/pytorch.md lacks the row\n{row}");
        }
    }

    #[test]
    fn os_aliases_are_named() {
        assert_eq!(with_os_alias("posix.system"), "posix.system (os.system)");
        assert_eq!(with_os_alias("nt.system"), "nt.system (os.system)");
        assert_eq!(with_os_alias("os.system"), "os.system");
    }
}
