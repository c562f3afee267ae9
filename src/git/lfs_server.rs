//! A repository's LFS server, found and authenticated to the way git-lfs does it: the server
//! from `lfs.url`, `.lfsconfig`, `remote.<name>.lfsurl` or the remote's URL (SSH remotes ask
//! `git-lfs-authenticate`); credentials from `http.<url>.extraHeader`, the URL, or git's
//! credential helpers; timeouts, proxy and CA file from git's and git-lfs's settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::config::GitConfig;
use super::{error::GitError, process};
use crate::remote::{Client, Endpoint, HttpSettings};
use crate::remote::{Credential, CredentialSource};

/// The LFS server of a repository, ready to be asked.
pub(crate) struct Server {
    pub(crate) client: Client,
    pub(crate) endpoint: Endpoint,
    pub(crate) credentials: GitCredentials,
}

impl Server {
    /// The server to ask for the objects of `repo` (whose commands run in `workdir`), through
    /// `remote` when one was chosen; None when there is none to ask (no remote, or one on the
    /// local file system).
    pub(crate) fn discover(
        repo: &gix::Repository,
        workdir: &Path,
        config: &GitConfig,
        remote: Option<&str>,
    ) -> Result<Option<Server>, GitError> {
        let Some((url, ssh_headers)) = endpoint_url(repo, workdir, config, remote)? else {
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
        let client = Client::new(&http_settings(config, &url))?;
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
    chosen: Option<&str>,
) -> Result<Option<Discovered>, GitError> {
    if let Some(url) = config
        .get("lfs.url")
        .or_else(|| config.lfsconfig_get("lfs.url"))
    {
        return Ok(Some((url.to_owned(), Vec::new())));
    }
    let remote = match chosen {
        Some(name) => name.to_owned(),
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
            Some(_) => Err(GitError::NoRemote { name: remote }),
            None => Ok(None),
        };
    }
    // `ls-remote --get-url` applies url.<base>.insteadOf as git does.
    let args = ["ls-remote", "--get-url", remote.as_str()];
    let out = process::output(workdir, &args)?;
    let remote_url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || remote_url.is_empty() {
        return Err(GitError::RemoteUrl { name: remote });
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
    /// `ssh://[user@]host[:port]/path` (also `git+ssh://`, `ssh+git://`) or scp-like
    /// `[user@]host:path`, as gix-url parses remote URLs.
    fn parse(remote: &str) -> Option<SshTarget> {
        let url = gix::url::parse(remote).ok()?;
        if url.scheme != gix::url::Scheme::Ssh {
            return None;
        }
        let host = url.host()?;
        let user_host = match url.user() {
            Some(user) => format!("{user}@{host}"),
            None => host.to_owned(),
        };
        Some(SshTarget {
            user_host,
            port: url.port.map(|p| p.to_string()),
            path: url.path.to_string(),
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
fn derive_lfs_url(remote: &str) -> Option<String> {
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
    let url = gix::url::parse(remote).ok()?;
    if url.scheme != gix::url::Scheme::Ssh {
        return None;
    }
    let path = url.path.to_string();
    Some(with_git(&format!(
        "https://{}/{}",
        url.host()?,
        path.trim_start_matches('/')
    )))
}

/// Credentials in a URL (`https://user:token@host/...`) are taken out of it: they are sent
/// as an `Authorization` header to that server only, and never shown. The URL is parsed by the
/// `url` crate; one it cannot parse is kept as it is (the request to it fails with a message).
fn split_credentials(url: &str) -> (String, Option<Credential>) {
    let Ok(mut parsed) = ::url::Url::parse(url) else {
        return (url.to_owned(), None);
    };
    if parsed.username().is_empty() && parsed.password().is_none() {
        return (url.to_owned(), None);
    }
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let credential = parsed.password().map(|password| Credential {
        username: decode(parsed.username()),
        password: decode(password),
    });
    // Never fails for http(s) URLs, which have a host.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    (parsed.to_string(), credential)
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
    if let Some(t) = seconds("weight-inspect.lfsobjectdeadline") {
        settings.object_deadline = t;
    }
    if let Some(t) = seconds("weight-inspect.lfsdeadline") {
        settings.command_deadline = t;
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
pub(crate) struct GitCredentials {
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
            (
                "git+ssh://git.example/org/repo",
                "https://git.example/org/repo.git/info/lfs",
            ),
        ] {
            assert_eq!(derive_lfs_url(remote).as_deref(), Some(lfs), "{remote}");
        }
        assert_eq!(derive_lfs_url("/srv/repo.git"), None);
        assert_eq!(derive_lfs_url("file:///srv/repo.git"), None);
        assert_eq!(derive_lfs_url("./relative/repo"), None);
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
}
