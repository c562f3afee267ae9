//! LFS servers on loopback for the remote-header tests (tests/common/lfs_server.py): the real
//! giftless, and a purpose-built server that honors Range and produces faults on demand. Each
//! is started with a port the OS picks, waited for until it listens, and stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

use super::{python, repo_root};

pub struct LfsServer {
    child: Child,
    /// Kept open: the server exits when it closes (also when a test panics or is killed).
    _stdin: ChildStdin,
    pub port: u16,
    /// Tokens the server accepts (`read`, `write`) or puts in its answers (`href`).
    pub tokens: Value,
    scheme: &'static str,
}

impl LfsServer {
    /// giftless over `storage` (`STORAGE/org/repo/OID`); with `auth`, JWTs are required.
    pub fn giftless(storage: &Path, auth: bool) -> LfsServer {
        let mut args = vec!["giftless", storage.to_str().unwrap()];
        if auth {
            args.push("--auth");
        }
        LfsServer::start(&args)
    }

    /// The Range-honoring server over `storage`, with a fault (see lfs_server.py) and, for
    /// the faults that involve one, another origin.
    pub fn range(storage: &Path, fault: &str, other_origin: Option<&str>) -> LfsServer {
        let mut args = vec!["range", storage.to_str().unwrap(), "--fault", fault];
        if let Some(other) = other_origin {
            args.extend(["--other-origin", other]);
        }
        LfsServer::start(&args)
    }

    /// An HTTP CONNECT proxy that tunnels every target host to 127.0.0.1 (see lfs_server.py).
    pub fn proxy() -> LfsServer {
        LfsServer::start(&["proxy"])
    }

    /// The Range-honoring server over https, with the certificate and key of PEM files.
    pub fn range_tls(storage: &Path, cert: &Path, key: &Path) -> LfsServer {
        let mut server = LfsServer::start(&[
            "range",
            storage.to_str().unwrap(),
            "--tls",
            cert.to_str().unwrap(),
            key.to_str().unwrap(),
        ]);
        server.scheme = "https";
        server
    }

    fn start(args: &[&str]) -> LfsServer {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/common/lfs_server.py"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("failed to start the LFS server");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let announced: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            let _ = child.kill();
            panic!("the LFS server {args:?} did not start ({e}): {line:?}")
        });
        LfsServer {
            child,
            _stdin: stdin,
            port: announced["port"].as_u64().unwrap() as u16,
            tokens: announced["tokens"].clone(),
            scheme: "http",
        }
    }

    pub fn origin(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    /// The LFS endpoint of repository `org/repo` on this server.
    pub fn lfs_url(&self) -> String {
        format!("{}/org/repo.git/info/lfs", self.origin())
    }

    pub fn token(&self, name: &str) -> String {
        self.tokens[name].as_str().unwrap().to_owned()
    }

    /// What the server counted: `bytes_sent` (bodies) and `requests` (plain http servers).
    pub fn stats(&self) -> Value {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "GET /_stats HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap()
    }

    pub fn bytes_sent(&self) -> u64 {
        self.stats()["bytes_sent"].as_u64().unwrap()
    }

    /// The requests whose path contains `part`.
    pub fn requests_to(&self, part: &str) -> Vec<Value> {
        self.stats()["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["path"].as_str().unwrap().contains(part))
            .cloned()
            .collect()
    }
}

impl Drop for LfsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
