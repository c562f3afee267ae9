//! git's configuration as the LFS server's discovery reads it: `git config --list` (system,
//! global, repository, `-c`), the repository's `.lfsconfig` (the work tree's, else HEAD's), and
//! git's URL matching for `section.<url>.name` keys (`http.<url>.extraHeader`,
//! `lfs.<url>.access`...).

use std::path::Path;

use super::{error::GitError, process};

pub(crate) struct GitConfig {
    entries: Vec<(String, String)>,
    lfsconfig: Vec<(String, String)>,
}

impl GitConfig {
    /// Reads the configuration git would use in `workdir`.
    pub(crate) fn load(workdir: &Path) -> Result<GitConfig, GitError> {
        let args = ["config", "--list", "-z"];
        let out = process::output(workdir, &args)?;
        if !out.status.success() {
            return Err(process::failed(&args, &out));
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
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        last(&self.entries, key)
    }

    pub(crate) fn lfsconfig_get(&self, key: &str) -> Option<&str> {
        last(&self.lfsconfig, key)
    }

    pub(crate) fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)?.to_ascii_lowercase().as_str() {
            "false" | "no" | "off" | "0" => Some(false),
            _ => Some(true),
        }
    }

    /// Values of `section.<url>.name` and `section.name` that apply to `url`, least specific
    /// first (git's urlmatch: scheme, host and port equal, the pattern's path a prefix of the
    /// URL's at a `/`, its user the URL's when it names one).
    pub(crate) fn url_values(&self, section: &str, name: &str, url: &str) -> Vec<String> {
        url_values_in(&self.entries, section, name, url)
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// The most specific value of `section.<url>.name` for `url`.
    pub(crate) fn url_value(&self, section: &str, name: &str, url: &str) -> Option<String> {
        most_specific(url_values_in(&self.entries, section, name, url))
    }

    pub(crate) fn lfsconfig_url_value(&self, name: &str, url: &str) -> Option<String> {
        most_specific(url_values_in(&self.lfsconfig, "lfs", name, url))
    }
}

fn most_specific(values: Vec<(usize, String)>) -> Option<String> {
    values
        .into_iter()
        .max_by_key(|(specificity, _)| *specificity)
        .map(|(_, v)| v)
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

/// The parts of a URL git's urlmatch compares, as gix-url parses them.
struct UrlParts {
    scheme: String,
    user: Option<String>,
    host: String,
    port: Option<u16>,
    path: String,
}

impl UrlParts {
    fn parse(url: &str) -> Option<UrlParts> {
        // Only URLs with a scheme are patterns (scp-like paths are not).
        url.split_once("://")?;
        let parsed = gix::url::parse(url).ok()?;
        let path = parsed.path.to_string();
        Some(UrlParts {
            scheme: parsed.scheme.as_str().to_owned(),
            user: parsed.user().map(str::to_owned),
            host: parsed.host()?.to_ascii_lowercase(),
            port: parsed.port_or_default(),
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
            (
                "http.https://*.example/org.extraheader".to_owned(),
                "G: 6".to_owned(),
            ),
            (
                "http.https://h.example:444/.extraheader".to_owned(),
                "H: 7".to_owned(),
            ),
            (
                "http.https://bob@h.example/.extraheader".to_owned(),
                "I: 8".to_owned(),
            ),
        ];
        let found: Vec<String> =
            url_values_in(&entries, "http", "extraheader", "https://h.example/org/r")
                .into_iter()
                .map(|(_, v)| v)
                .collect();
        assert_eq!(found, ["A: 0", "B: 1", "C: 2", "G: 6"]);
        let with_user: Vec<String> = url_values_in(
            &entries,
            "http",
            "extraheader",
            "https://bob@h.example:443/x",
        )
        .into_iter()
        .map(|(_, v)| v)
        .collect();
        assert_eq!(with_user, ["A: 0", "B: 1", "I: 8"]);
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

    #[test]
    fn config_lists_parse_keys_without_values_as_true() {
        assert_eq!(
            parse_list(b"a.b\nc\0d.e\0"),
            [
                ("a.b".to_owned(), "c".to_owned()),
                ("d.e".to_owned(), "true".to_owned())
            ]
        );
    }
}
