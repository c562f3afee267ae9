//! Headers of LFS objects that are not present locally, read from the repository's LFS server
//! the way git-lfs finds and authenticates to it: the server from `lfs.url`, `.lfsconfig`,
//! `remote.<name>.lfsurl` or the remote's URL; credentials from `http.<url>.extraHeader`, the
//! URL, or git's credential helpers; then one batch request for all objects of a command and a
//! few ranged reads per object ([`crate::remote`]). Headers read are kept in
//! `<git dir>/weight-inspect/lfs-headers/`, so a second look needs no network.
//!
//! Remote reads are off with `--offline` or `git config weight-inspect.remote false`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::lfs::Pointer;
use super::process;
use super::side::ModelSide;
use crate::read::{HeaderStep, header_step};
use crate::remote::batch::{Credential, CredentialSource, LfsObject, download_actions};
use crate::remote::cache::HeaderCache;
use crate::remote::header::{RemoteHeader, read_header};
use crate::remote::{Client, Endpoint, HttpSettings, ObjectOutcome};

/// What the command line says about remote reads (set once, before any is made; git's
/// drivers and the hooks get the defaults and the repository's config).
#[derive(Debug, Clone, Default)]
pub struct RemoteOptions {
    /// `--offline`: never ask a server.
    pub offline: bool,
    /// `--remote NAME`: the remote whose LFS server to ask.
    pub remote: Option<String>,
}

static OPTIONS: OnceLock<RemoteOptions> = OnceLock::new();

/// Sets the options of this process (the first call wins).
pub fn set_options(options: RemoteOptions) {
    let _ = OPTIONS.set(options);
}

fn options() -> RemoteOptions {
    OPTIONS.get().cloned().unwrap_or_default()
}

/// Concurrent header reads of one command.
const WORKERS: usize = 4;

/// Replaces every [`ModelSide::Absent`] among `sides` (each with the name messages use for
/// it) by the model its header describes: from the header cache, else from the LFS server of
/// `repo` in one batch request. A side that cannot be read stays absent with the reason.
pub fn complete_absent(repo: &gix::Repository, sides: Vec<(String, &mut ModelSide)>) {
    let mut pending: Vec<(String, &mut ModelSide)> = sides
        .into_iter()
        .filter(|(_, side)| matches!(side, ModelSide::Absent { remote: None, .. }))
        .collect();
    if pending.is_empty() {
        return;
    }
    let cache = HeaderCache::new(cache_dir(repo));
    pending.retain_mut(|(name, side)| {
        let pointer = side.pointer().expect("absent sides have a pointer").clone();
        match cached_side(&cache, name, &pointer) {
            Some(model) => {
                **side = model;
                false
            }
            None => true,
        }
    });
    if pending.is_empty() {
        return;
    }
    // git runs in the work tree, or in the git directory of a bare repository.
    let workdir = repo.workdir().unwrap_or_else(|| repo.git_dir());
    if options().offline {
        return;
    }
    let config = match GitConfig::load(workdir) {
        Ok(config) => config,
        Err(e) => return mark_all(&mut pending, &e),
    };
    if config.bool("weight-inspect.remote") == Some(false) {
        return;
    }
    let server = match Server::discover(repo, workdir, &config) {
        Ok(Some(server)) => server,
        // No LFS server is configured (no remote, or a local one): the usual hint stands.
        Ok(None) => return,
        Err(e) => return mark_all(&mut pending, &e),
    };
    let mut objects: Vec<LfsObject> = Vec::new();
    for (_, side) in &pending {
        let p = side.pointer().expect("absent sides have a pointer");
        if !objects.iter().any(|o| o.oid == p.oid) {
            objects.push(LfsObject {
                oid: p.oid.clone(),
                size: p.size,
            });
        }
    }
    let outcomes = match download_actions(
        &server.client,
        &server.endpoint,
        &server.credentials,
        &objects,
    ) {
        Ok(outcomes) => outcomes,
        Err(e) => return mark_all(&mut pending, &e.to_string()),
    };
    let results = read_all(&server.client, &objects, &outcomes);
    for (name, side) in pending {
        let pointer = side.pointer().expect("absent sides have a pointer").clone();
        let index = objects
            .iter()
            .position(|o| o.oid == pointer.oid)
            .expect("every pending object was asked for");
        *side = match &results[index] {
            Ok(header) => side_of_header(&cache, &name, pointer, header),
            Err(why) => ModelSide::Absent {
                pointer,
                remote: Some(why.clone()),
            },
        };
    }
}

/// Opens the repository of the current directory (where git runs its drivers) and completes
/// `sides` there; without a repository they stay as they are.
pub fn complete_absent_here(sides: Vec<(String, &mut ModelSide)>) {
    if !sides
        .iter()
        .any(|(_, s)| matches!(s, ModelSide::Absent { .. }))
    {
        return;
    }
    if let Ok(repo) = super::open_repo(Path::new(".")) {
        complete_absent(&repo, sides);
    }
}

/// The header of an absent LFS object as bytes (a prefix of the object) and as the model
/// they describe, from the cache or the LFS server: for readers of bytes (the policy). None
/// when remote reads are off or there is no server to ask; an error says why the server did
/// not give a model's header.
pub fn header_prefix(
    repo: &gix::Repository,
    name: &str,
    pointer: &Pointer,
) -> Option<Result<(Vec<u8>, crate::Artifact), String>> {
    let mut side = ModelSide::Absent {
        pointer: pointer.clone(),
        remote: None,
    };
    complete_absent(repo, vec![(name.to_owned(), &mut side)]);
    match side {
        ModelSide::Model { artifact, .. } => {
            let prefix = HeaderCache::new(cache_dir(repo)).get(&pointer.oid, pointer.size);
            Some(prefix.map(|p| (p, *artifact)).ok_or_else(|| {
                "the header read from the LFS server could not be kept in the cache".to_owned()
            }))
        }
        ModelSide::Absent { remote: None, .. } => None,
        ModelSide::Absent {
            remote: Some(why), ..
        } => Some(Err(why)),
        other => Some(Err(other.note().unwrap_or_default())),
    }
}

fn mark_all(pending: &mut [(String, &mut ModelSide)], why: &str) {
    for (_, side) in pending.iter_mut() {
        if let ModelSide::Absent { remote, .. } = side {
            *remote = Some(why.to_owned());
        }
    }
}

/// The directory of cached headers: in the common git directory (shared by linked work
/// trees), outside the LFS store.
pub fn cache_dir(repo: &gix::Repository) -> PathBuf {
    repo.common_dir().join("weight-inspect").join("lfs-headers")
}

/// A cached header that still parses as a model of the pointer's size.
fn cached_side(cache: &HeaderCache, name: &str, pointer: &Pointer) -> Option<ModelSide> {
    let prefix = cache.get(&pointer.oid, pointer.size)?;
    match header_step(Path::new(name), &prefix, pointer.size) {
        HeaderStep::Parsed(Ok(artifact)) => Some(ModelSide::Model {
            artifact: Box::new(artifact),
            lfs: Some(pointer.clone()),
            from_server: true,
        }),
        _ => None,
    }
}

/// The side a header read from the server stands for; only a model's header is cached.
fn side_of_header(
    cache: &HeaderCache,
    name: &str,
    pointer: Pointer,
    header: &RemoteHeader,
) -> ModelSide {
    match &header.parsed {
        Ok(artifact) => {
            let _ = cache.put(&pointer.oid, &header.prefix);
            ModelSide::Model {
                artifact: Box::new(artifact.clone()),
                lfs: Some(pointer),
                from_server: true,
            }
        }
        Err(crate::Error::UnknownFormat { .. }) => ModelSide::NotModel {
            size: pointer.size,
            sha256: pointer.oid.clone(),
            lfs: Some(pointer),
        },
        Err(e) => ModelSide::Invalid {
            size: pointer.size,
            error: format!("{e} (header read from the LFS server for {name})"),
            lfs: Some(pointer),
        },
    }
}

/// Reads the header of each object the server gave a download for, a few at a time.
fn read_all(
    client: &Client,
    objects: &[LfsObject],
    outcomes: &[ObjectOutcome],
) -> Vec<Result<RemoteHeader, String>> {
    let next = AtomicUsize::new(0);
    let read_one = |i: usize| match &outcomes[i] {
        ObjectOutcome::Download(action) => read_header(
            client,
            Path::new(&format!("sha256:{}", objects[i].oid)),
            &action.href,
            &action.headers(),
            Some(objects[i].size),
        )
        .map_err(|e| e.to_string()),
        ObjectOutcome::Failed { code, message } => Err(object_failure(*code, message)),
    };
    let mut results: Vec<Option<Result<RemoteHeader, String>>> =
        (0..objects.len()).map(|_| None).collect();
    let workers = WORKERS.min(objects.len());
    let progress = crate::progress::Progress::new(
        objects.len() as u64,
        crate::progress::Unit::Items,
        "LFS headers",
    );
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= objects.len() {
                            break done;
                        }
                        done.push((i, read_one(i)));
                        progress.inc(1);
                    }
                })
            })
            .collect();
        for handle in handles {
            for (i, result) in handle.join().unwrap_or_default() {
                results[i] = Some(result);
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("the header read failed unexpectedly".to_owned())))
        .collect()
}

fn object_failure(code: u32, message: &str) -> String {
    let what = match code {
        404 => "the object is not on the LFS server",
        410 => "the object was removed from the LFS server",
        422 => "the LFS server refused the object as invalid",
        401 | 403 => "the LFS server refused access to the object",
        0 => "the LFS server gave no download for the object",
        _ => "the LFS server could not provide the object",
    };
    let message = crate::render::escape::shown(message);
    match code {
        0 => format!("{what}: {message}"),
        _ if message.is_empty() => format!("{what} (error {code})"),
        _ => format!("{what} (error {code}: {message})"),
    }
}

/// The LFS server of a repository, ready to be asked.
struct Server {
    client: Client,
    endpoint: Endpoint,
    credentials: GitCredentials,
}

impl Server {
    fn discover(
        repo: &gix::Repository,
        workdir: &Path,
        config: &GitConfig,
    ) -> Result<Option<Server>, String> {
        let Some((url, ssh_headers)) = endpoint_url(repo, workdir, config)? else {
            return Ok(None);
        };
        let (url, url_credential) = split_credentials(&url);
        let mut headers = ssh_headers;
        for (name, value) in extra_headers(config, &url) {
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                headers.push((name, value));
            }
        }
        let has_auth = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
        if !has_auth && let Some(c) = &url_credential {
            headers.push(("Authorization".to_owned(), c.authorization()));
        }
        let access = config
            .url_value("lfs", "access", &url)
            .or_else(|| config.lfsconfig_url_value("access", &url));
        let endpoint = Endpoint {
            url: url.clone(),
            headers,
            basic_access: access.is_some_and(|a| a.eq_ignore_ascii_case("basic"))
                && !has_auth
                && url_credential.is_none(),
        };
        let client = Client::new(&http_settings(config, &url)).map_err(|e| e.to_string())?;
        Ok(Some(Server {
            client,
            endpoint,
            credentials: GitCredentials {
                dir: workdir.to_owned(),
            },
        }))
    }
}

/// An LFS server's URL and the headers `git-lfs-authenticate` gave for it (SSH remotes).
type Discovered = (String, Vec<(String, String)>);

/// The LFS endpoint as git-lfs finds it for downloads, with the headers `git-lfs-authenticate`
/// gave for it (SSH remotes); None when there is none to ask (no such remote, or a remote on
/// the local file system).
fn endpoint_url(
    repo: &gix::Repository,
    workdir: &Path,
    config: &GitConfig,
) -> Result<Option<Discovered>, String> {
    if let Some(url) = config
        .get("lfs.url")
        .or_else(|| config.lfsconfig_get("lfs.url"))
    {
        return Ok(Some((url.to_owned(), Vec::new())));
    }
    let chosen = options().remote;
    let remote = match &chosen {
        Some(name) => name.clone(),
        None => upstream_remote(repo, config).unwrap_or_else(|| "origin".to_owned()),
    };
    let lfsurl = format!("remote.{remote}.lfsurl");
    if let Some(url) = config
        .get(&lfsurl)
        .or_else(|| config.lfsconfig_get(&lfsurl))
    {
        return Ok(Some((url.to_owned(), Vec::new())));
    }
    if config.get(&format!("remote.{remote}.url")).is_none() {
        return match chosen {
            Some(_) => Err(format!("there is no remote `{remote}`")),
            None => Ok(None),
        };
    }
    // `ls-remote --get-url` applies url.<base>.insteadOf as git does.
    let args = ["ls-remote", "--get-url", remote.as_str()];
    let out = process::output(workdir, &args).map_err(|e| e.to_string())?;
    let remote_url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || remote_url.is_empty() {
        return Err(format!("cannot read the URL of remote `{remote}`"));
    }
    if let Some(target) = SshTarget::parse(&remote_url)
        && let Some(answer) = ssh_authenticate(workdir, config, &target)
    {
        return Ok(Some(answer));
    }
    // A remote on the local file system has no LFS server: `git lfs fetch` reads it.
    Ok(derive_lfs_url(&remote_url).map(|url| (url, Vec::new())))
}

/// An SSH remote: `[user@]host`, its port, and the repository path.
#[derive(Debug, PartialEq, Eq)]
struct SshTarget {
    user_host: String,
    port: Option<String>,
    path: String,
}

impl SshTarget {
    fn parse(remote: &str) -> Option<SshTarget> {
        if let Some(rest) = ["ssh://", "git+ssh://", "ssh+git://"]
            .iter()
            .find_map(|p| remote.strip_prefix(p))
        {
            let (authority, path) = rest.split_at(rest.find('/')?);
            let (user_host, port) = match authority.rsplit_once(':') {
                Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    (h, Some(p.to_owned()))
                }
                _ => (authority, None),
            };
            return Some(SshTarget {
                user_host: user_host.to_owned(),
                port,
                path: path.to_owned(),
            });
        }
        if remote.contains("://") {
            return None;
        }
        let (authority, path) = remote.split_once(':')?;
        if authority.is_empty() || authority.contains('/') || path.is_empty() {
            return None;
        }
        Some(SshTarget {
            user_host: authority.to_owned(),
            port: None,
            path: path.to_owned(),
        })
    }
}

/// What `ssh HOST git-lfs-authenticate PATH download` answers: the server's href and the
/// headers to send it, as git-lfs asks for them. None when ssh fails or answers nothing of use
/// (the https URL derived from the remote is used then).
fn ssh_authenticate(workdir: &Path, config: &GitConfig, target: &SshTarget) -> Option<Discovered> {
    let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
    let ssh = env("GIT_SSH_COMMAND")
        .or_else(|| config.get("core.sshcommand").map(str::to_owned))
        .map(process::SshCommand::Shell)
        .or_else(|| env("GIT_SSH").map(process::SshCommand::Program))
        .unwrap_or_else(|| process::SshCommand::Program("ssh".to_owned()));
    let mut args = Vec::new();
    if let Some(port) = &target.port {
        args.extend(["-p".to_owned(), port.clone()]);
    }
    args.push(target.user_host.clone());
    args.push(format!(
        "git-lfs-authenticate {} download",
        shell_quote(&target.path)
    ));
    let out = process::ssh_output(workdir, &ssh, &args).ok()?;
    if !out.status.success() {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        href: String,
        #[serde(default)]
        header: std::collections::BTreeMap<String, String>,
    }
    let answer: Answer = serde_json::from_slice(&out.stdout).ok()?;
    crate::remote::origin(&answer.href)?;
    Some((answer.href, answer.header.into_iter().collect()))
}

/// `'text'` for a remote shell, as git quotes paths for ssh.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The current branch's upstream remote.
fn upstream_remote(repo: &gix::Repository, config: &GitConfig) -> Option<String> {
    let head = repo.head_name().ok()??;
    let branch = head.shorten().to_string();
    config
        .get(&format!("branch.{branch}.remote"))
        .filter(|r| *r != ".")
        .map(str::to_owned)
}

/// git-lfs's default endpoint for a remote URL: `https://host/path.git/info/lfs`, also for
/// SSH remotes (`git@host:path`, `ssh://host/path`). Local paths have none.
pub fn derive_lfs_url(remote: &str) -> Option<String> {
    let with_git = |base: &str| {
        let base = base.trim_end_matches('/');
        if base.ends_with(".git") {
            format!("{base}/info/lfs")
        } else {
            format!("{base}.git/info/lfs")
        }
    };
    let lower = remote.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Some(with_git(remote));
    }
    if let Some(rest) = remote
        .strip_prefix("ssh://")
        .or_else(|| remote.strip_prefix("git+ssh://"))
        .or_else(|| remote.strip_prefix("ssh+git://"))
    {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        };
        return Some(with_git(&format!("https://{host}/{path}")));
    }
    if remote.contains("://") {
        return None;
    }
    // scp-like `user@host:path` (a colon before any slash).
    let (authority, path) = remote.split_once(':')?;
    if authority.contains('/') || authority.is_empty() {
        return None;
    }
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some(with_git(&format!(
        "https://{host}/{}",
        path.trim_start_matches('/')
    )))
}

/// Credentials in a URL (`https://user:token@host/...`) are taken out of it: they are sent
/// as an `Authorization` header to that server only, and never shown.
fn split_credentials(url: &str) -> (String, Option<Credential>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_owned(), None);
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return (url.to_owned(), None);
    };
    let clean = format!("{scheme}://{host}{tail}");
    let credential = userinfo.split_once(':').map(|(user, pass)| Credential {
        username: percent_decode(user),
        password: percent_decode(pass),
    });
    (clean, credential)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let digits = [bytes[i + 1], bytes[i + 2]];
            let hex = std::str::from_utf8(&digits).expect("ASCII hex digits");
            out.push(u8::from_str_radix(hex, 16).expect("two hex digits"));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `http.<url>.extraHeader` values that apply to `url`, in order (an empty value clears the
/// ones before it, as in git).
fn extra_headers(config: &GitConfig, url: &str) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for value in config.url_values("http", "extraheader", url) {
        if value.is_empty() {
            headers.clear();
            continue;
        }
        if let Some((name, value)) = value.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    headers
}

/// Timeouts, proxy and CA file as git and git-lfs configure them.
fn http_settings(config: &GitConfig, url: &str) -> HttpSettings {
    let mut settings = HttpSettings::default();
    let seconds = |key: &str| {
        config
            .get(key)
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&s| s > 0)
            .map(Duration::from_secs)
    };
    if let Some(t) = seconds("lfs.dialtimeout") {
        settings.connect_timeout = t;
    }
    if let Some(t) = seconds("lfs.activitytimeout") {
        settings.activity_timeout = t;
    }
    if let Some(n) = config
        .get("lfs.transfer.maxretries")
        .and_then(|v| v.parse::<u32>().ok())
    {
        settings.retries = n.min(10);
    }
    settings.ca_file = std::env::var_os("GIT_SSL_CAINFO")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            config
                .url_value("http", "sslcainfo", url)
                .map(|v| expand_home(&v))
        });
    settings.proxy = config
        .url_value("http", "proxy", url)
        .filter(|v| !v.is_empty());
    settings
}

fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// git's credential helpers (`git credential fill|approve|reject`), never prompting.
struct GitCredentials {
    dir: PathBuf,
}

impl GitCredentials {
    fn run(&self, action: &str, input: &str) -> Option<String> {
        let out =
            process::output_with_input(&self.dir, &["credential", action], input.as_bytes(), &[])
                .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn described(url: &str, credential: &Credential) -> String {
        format!(
            "url={url}\nusername={}\npassword={}\n\n",
            credential.username, credential.password
        )
    }
}

impl CredentialSource for GitCredentials {
    fn fill(&self, url: &str) -> Option<Credential> {
        let answer = self.run("fill", &format!("url={url}\n\n"))?;
        let mut username = None;
        let mut password = None;
        for line in answer.lines() {
            if let Some(v) = line.strip_prefix("username=") {
                username = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("password=") {
                password = Some(v.to_owned());
            }
        }
        Some(Credential {
            username: username?,
            password: password?,
        })
    }

    fn approve(&self, url: &str, credential: &Credential) {
        let _ = self.run("approve", &Self::described(url, credential));
    }

    fn reject(&self, url: &str, credential: &Credential) {
        let _ = self.run("reject", &Self::described(url, credential));
    }
}

/// git's configuration as `git config --list` gives it (system, global, repository, `-c`),
/// and the repository's `.lfsconfig` (the work tree's, else HEAD's).
struct GitConfig {
    entries: Vec<(String, String)>,
    lfsconfig: Vec<(String, String)>,
}

impl GitConfig {
    fn load(workdir: &Path) -> Result<GitConfig, String> {
        let args = ["config", "--list", "-z"];
        let out = process::output(workdir, &args).map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(process::failed(&args, &out).to_string());
        }
        let entries = parse_list(&out.stdout);
        let file = workdir.join(".lfsconfig");
        let lfs_args: Vec<String> = if file.is_file() {
            vec![
                "config".into(),
                "--file".into(),
                file.display().to_string(),
                "--list".into(),
                "-z".into(),
            ]
        } else {
            ["config", "--blob", "HEAD:.lfsconfig", "--list", "-z"]
                .map(String::from)
                .to_vec()
        };
        let lfs_args: Vec<&str> = lfs_args.iter().map(String::as_str).collect();
        let lfsconfig = match process::output(workdir, &lfs_args) {
            Ok(out) if out.status.success() => parse_list(&out.stdout)
                .into_iter()
                // git-lfs reads only its own keys from .lfsconfig.
                .filter(|(k, _)| {
                    k.starts_with("lfs.") || (k.starts_with("remote.") && k.ends_with(".lfsurl"))
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(GitConfig { entries, lfsconfig })
    }

    /// The last value of `key` (section and name in lowercase).
    fn get(&self, key: &str) -> Option<&str> {
        last(&self.entries, key)
    }

    fn lfsconfig_get(&self, key: &str) -> Option<&str> {
        last(&self.lfsconfig, key)
    }

    fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)?.to_ascii_lowercase().as_str() {
            "false" | "no" | "off" | "0" => Some(false),
            _ => Some(true),
        }
    }

    /// Values of `section.<url>.name` and `section.name` that apply to `url`, least specific
    /// first (git's urlmatch: scheme, host and port equal, the pattern's path a prefix of the
    /// URL's at a `/`, its user the URL's when it names one).
    fn url_values(&self, section: &str, name: &str, url: &str) -> Vec<String> {
        url_values_in(&self.entries, section, name, url)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// The most specific value of `section.<url>.name` for `url`.
    fn url_value(&self, section: &str, name: &str, url: &str) -> Option<String> {
        url_values_in(&self.entries, section, name, url)
            .into_iter()
            .max_by_key(|(specificity, _)| *specificity)
            .map(|(_, v)| v)
    }

    fn lfsconfig_url_value(&self, name: &str, url: &str) -> Option<String> {
        url_values_in(&self.lfsconfig, "lfs", name, url)
            .into_iter()
            .max_by_key(|(specificity, _)| *specificity)
            .map(|(_, v)| v)
    }
}

fn last<'a>(entries: &'a [(String, String)], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `git config --list -z`: `key\nvalue\0`, or `key\0` for a key without a value (true).
fn parse_list(bytes: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(bytes)
        .split('\0')
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('\n') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (item.to_owned(), "true".to_owned()),
        })
        .collect()
}

/// Matching values with their specificity (the pattern's path length, +1 for a user).
fn url_values_in(
    entries: &[(String, String)],
    section: &str,
    name: &str,
    url: &str,
) -> Vec<(usize, String)> {
    let prefix = format!("{section}.");
    let suffix = format!(".{name}");
    let Some(target) = UrlParts::parse(url) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(key, value)| {
            let middle = key.strip_prefix(&prefix)?;
            if middle == name {
                return Some((0, value.clone()));
            }
            let pattern = middle.strip_suffix(&suffix)?;
            let specificity = UrlParts::parse(pattern)?.matches(&target)?;
            Some((specificity + 1, value.clone()))
        })
        .collect()
}

struct UrlParts {
    scheme: String,
    user: Option<String>,
    host: String,
    port: String,
    path: String,
}

impl UrlParts {
    fn parse(url: &str) -> Option<UrlParts> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, hp)) => (
                Some(userinfo.split(':').next().unwrap_or_default().to_owned()),
                hp,
            ),
            None => (None, authority),
        };
        let default_port = match scheme.as_str() {
            "https" => "443",
            "http" => "80",
            _ => "",
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
            _ => (host_port, default_port),
        };
        let path = tail.split(['?', '#']).next().unwrap_or_default();
        Some(UrlParts {
            scheme,
            user,
            host: host.to_ascii_lowercase(),
            port: port.to_owned(),
            path: path.trim_end_matches('/').to_owned(),
        })
    }

    /// How specifically this pattern matches `url`, or None.
    fn matches(&self, url: &UrlParts) -> Option<usize> {
        if self.scheme != url.scheme
            || self.port != url.port
            || !host_matches(&self.host, &url.host)
        {
            return None;
        }
        if let Some(user) = &self.user
            && url.user.as_ref() != Some(user)
        {
            return None;
        }
        let path_ok = self.path.is_empty()
            || url.path == self.path
            || url
                .path
                .strip_prefix(&self.path)
                .is_some_and(|rest| rest.starts_with('/'));
        path_ok.then(|| self.path.len() * 2 + usize::from(self.user.is_some()))
    }
}

/// Hosts are equal label by label; a pattern label `*` matches any one label.
fn host_matches(pattern: &str, host: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let h: Vec<&str> = host.split('.').collect();
    p.len() == h.len() && p.iter().zip(&h).all(|(a, b)| *a == "*" || a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfs_urls_derive_as_git_lfs_derives_them() {
        for (remote, lfs) in [
            (
                "https://git.example/org/repo",
                "https://git.example/org/repo.git/info/lfs",
            ),
            (
                "https://git.example/org/repo.git",
                "https://git.example/org/repo.git/info/lfs",
            ),
            (
                "http://127.0.0.1:9000/r.git/",
                "http://127.0.0.1:9000/r.git/info/lfs",
            ),
            (
                "git@git.example:org/repo.git",
                "https://git.example/org/repo.git/info/lfs",
            ),
            (
                "ssh://git@git.example:2222/org/repo",
                "https://git.example/org/repo.git/info/lfs",
            ),
        ] {
            assert_eq!(derive_lfs_url(remote).as_deref(), Some(lfs), "{remote}");
        }
        assert_eq!(derive_lfs_url("/srv/repo.git"), None);
        assert_eq!(derive_lfs_url("file:///srv/repo.git"), None);
    }

    #[test]
    fn ssh_remotes_are_parsed() {
        assert_eq!(
            SshTarget::parse("ssh://git@host.example:2222/org/repo.git"),
            Some(SshTarget {
                user_host: "git@host.example".into(),
                port: Some("2222".into()),
                path: "/org/repo.git".into(),
            })
        );
        assert_eq!(
            SshTarget::parse("git@host.example:org/repo.git"),
            Some(SshTarget {
                user_host: "git@host.example".into(),
                port: None,
                path: "org/repo.git".into(),
            })
        );
        assert_eq!(SshTarget::parse("https://host/x"), None);
        assert_eq!(SshTarget::parse("/srv/repo.git"), None);
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");
    }

    #[test]
    fn url_credentials_are_taken_out() {
        let (url, c) = split_credentials("https://u:p%40ss@h.example/r.git/info/lfs");
        assert_eq!(url, "https://h.example/r.git/info/lfs");
        let c = c.unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p@ss"));
        assert_eq!(split_credentials("https://h/x").1, None);
    }

    #[test]
    fn url_config_matches_like_git() {
        let entries = vec![
            ("http.extraheader".to_owned(), "A: 0".to_owned()),
            (
                "http.https://h.example/.extraheader".to_owned(),
                "B: 1".to_owned(),
            ),
            (
                "http.https://h.example/org.extraheader".to_owned(),
                "C: 2".to_owned(),
            ),
            (
                "http.https://other.example/.extraheader".to_owned(),
                "D: 3".to_owned(),
            ),
            (
                "http.https://h.example/organization.extraheader".to_owned(),
                "E: 4".to_owned(),
            ),
            (
                "http.http://h.example/.extraheader".to_owned(),
                "F: 5".to_owned(),
            ),
        ];
        let found: Vec<String> =
            url_values_in(&entries, "http", "extraheader", "https://h.example/org/r")
                .into_iter()
                .map(|(_, v)| v)
                .collect();
        assert_eq!(found, ["A: 0", "B: 1", "C: 2"]);
        let plain = vec![("http.sslcainfo".to_owned(), "/ca.pem".to_owned())];
        assert_eq!(
            url_values_in(
                &plain,
                "http",
                "sslcainfo",
                "https://127.0.0.1:1/r.git/info/lfs"
            ),
            [(0, "/ca.pem".to_owned())]
        );
        assert!(host_matches("*.example", "h.example"));
        assert!(!host_matches("*.example", "a.h.example"));
    }
}
