//! The remote level's client: Bazel's HTTP remote-cache protocol, as bazel-remote and nginx WebDAV
//! serve it. `GET`, `HEAD` and `PUT` on `<base>/cas/<sha256 hex of the bytes>` for objects and on
//! `<base>/ac/<64 hex>` for action entries; 404 is a miss.
//!
//! Contract:
//! - Requests are blocking, each bounded by the timeout; a body over the blob size limit is never
//!   read whole.
//! - Credentials come from the URL's userinfo or, without one, from a netrc file's entry for the
//!   host. They travel only in the `Authorization` header: the URL every request and message uses is
//!   the base without its userinfo ([`RemoteCache::base`]), and [`redact`] hides the userinfo of a
//!   URL given whole, so neither a log line nor an error ever prints them.
//! - The key of an action's `/ac/` entry is SHA-256 over the compiler fingerprint, the action and
//!   its local key ([`RemoteCache::entry_key`]): a compiler with another fingerprint never reads it.
//! - Nothing here decides what a failure means to a build: every call returns [`Trouble`], and the
//!   two-level store turns it into a warning and a miss.

use super::ContentHash;
use crate::files;
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a remote cache is reached and used. Its `Debug` form shows the URL without credentials.
#[derive(Clone)]
pub struct RemoteOptions {
    /// `http[s]://[user[:password]@]host[:port][/prefix]`.
    pub url: String,
    /// The netrc file whose entry for the host gives the credentials when the URL has none.
    pub netrc: Option<PathBuf>,
    /// The longest one request may take.
    pub timeout: Duration,
    /// The largest object sent or taken.
    pub max_blob_bytes: u64,
    /// Read only: upload nothing.
    pub read_only: bool,
    /// Read nothing from the remote level, and overwrite its entries.
    pub recache: bool,
    /// The compiler's fingerprint in every entry key.
    pub fingerprint: String,
}

impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("url", &redact(&self.url))
            .field("netrc", &self.netrc)
            .field("timeout", &self.timeout)
            .field("max_blob_bytes", &self.max_blob_bytes)
            .field("read_only", &self.read_only)
            .field("recache", &self.recache)
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

/// Why a remote cache cannot be used as given.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("--remote-cache {url}: {why}")]
    Url { url: String, why: String },
    #[error("netrc file {}, line {line}: {why}", .path.display())]
    Netrc {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error(transparent)]
    File(#[from] files::FileError),
}

/// What went wrong with one request.
#[derive(Debug)]
pub enum Trouble {
    /// The server could not be reached, or did not answer in time: it is down for this process.
    Unreachable(String),
    /// The server answered with an error status.
    Status(u16, String),
    /// The answer is not what was asked for: wrong size, wrong hash, not an entry.
    Bad(String),
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trouble::Unreachable(why) | Trouble::Bad(why) => f.write_str(why),
            Trouble::Status(code, url) => write!(f, "{url} answered HTTP {code}"),
        }
    }
}

/// A netrc file, as read: at most this large.
const NETRC: files::Kind = files::Kind {
    what: "netrc file",
    limit: 1 << 20,
    magic: b"",
    format: "a netrc file",
};

/// Derive context of an entry key.
const ENTRY_KEY_CONTEXT: &[u8] = b"ipu-codegen remote cache v1 entry key";

/// A client of one remote cache.
pub struct RemoteCache {
    base: String,
    authorization: Option<String>,
    agent: ureq::Agent,
    max_blob_bytes: u64,
    fingerprint: String,
}

impl RemoteCache {
    /// A client for `options.url`: the URL checked and its credentials found (from its userinfo, or
    /// the netrc file's entry for its host).
    pub fn new(options: &RemoteOptions) -> Result<RemoteCache, RemoteError> {
        let url = Url::parse(&options.url)?;
        let credentials = match (&url.credentials, &options.netrc) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(path)) => netrc_entry(path, &url.host)?,
            (None, None) => None,
        };
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Ok(RemoteCache {
            base: url.base,
            authorization: credentials
                .map(|(user, password)| format!("Basic {}", base64(&format!("{user}:{password}")))),
            agent,
            max_blob_bytes: options.max_blob_bytes,
            fingerprint: options.fingerprint.clone(),
        })
    }

    /// The URL of the cache without credentials: what messages name.
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn max_blob_bytes(&self) -> u64 {
        self.max_blob_bytes
    }

    /// The `/ac/` key of action `key`: SHA-256 over the fingerprint, the action and the key.
    pub fn entry_key(&self, action: &str, key: &ContentHash) -> String {
        let mut h = sha2::Sha256::new();
        for field in [
            ENTRY_KEY_CONTEXT,
            self.fingerprint.as_bytes(),
            action.as_bytes(),
            &key.0,
        ] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field);
        }
        hex(&h.finalize())
    }

    pub fn entry_url(&self, entry_key: &str) -> String {
        format!("{}/ac/{entry_key}", self.base)
    }

    pub fn blob_url(&self, sha256: &str) -> String {
        format!("{}/cas/{sha256}", self.base)
    }

    fn request<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if let Some(value) = &self.authorization {
            request = request.header("Authorization", value);
        }
        request
    }

    /// The bytes at `url`, at most `limit` of them; `None` on 404.
    pub fn get(&self, url: &str, limit: u64) -> Result<Option<Vec<u8>>, Trouble> {
        let response = self
            .request(self.agent.get(url))
            .call()
            .map_err(|e| unreachable(url, e))?;
        match response.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            code => return Err(Trouble::Status(code, url.to_string())),
        }
        let mut body = response.into_body();
        if body.content_length().is_some_and(|n| n > limit) {
            return Err(Trouble::Bad(format!(
                "{url} is larger than the blob size limit of {limit} bytes"
            )));
        }
        match body.with_config().limit(limit).read_to_vec() {
            Ok(bytes) => Ok(Some(bytes)),
            Err(ureq::Error::BodyExceedsLimit(_)) => Err(Trouble::Bad(format!(
                "{url} is larger than the blob size limit of {limit} bytes"
            ))),
            Err(e) => Err(unreachable(url, e)),
        }
    }

    /// Whether the server holds `url`.
    pub fn has(&self, url: &str) -> Result<bool, Trouble> {
        let response = self
            .request(self.agent.head(url))
            .call()
            .map_err(|e| unreachable(url, e))?;
        match response.status().as_u16() {
            200..=299 => Ok(true),
            404 => Ok(false),
            code => Err(Trouble::Status(code, url.to_string())),
        }
    }

    /// Stores `bytes` at `url`.
    pub fn put(&self, url: &str, bytes: &[u8]) -> Result<(), Trouble> {
        let response = self
            .request(self.agent.put(url))
            .send(bytes)
            .map_err(|e| unreachable(url, e))?;
        match response.status().as_u16() {
            200..=299 => Ok(()),
            code => Err(Trouble::Status(code, url.to_string())),
        }
    }
}

fn unreachable(url: &str, e: ureq::Error) -> Trouble {
    Trouble::Unreachable(format!("{url}: {e}"))
}

/// The SHA-256 of `bytes` in lowercase hex: a blob's name in `/cas/`.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&sha2::Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard base64 with padding, for the `Authorization` header.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `url` with the userinfo of its authority, if it has one, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// A remote cache's URL, taken apart.
#[derive(Debug, PartialEq)]
struct Url {
    /// `scheme://host[:port][/prefix]`, without a trailing `/`.
    base: String,
    host: String,
    credentials: Option<(String, String)>,
}

impl Url {
    fn parse(given: &str) -> Result<Url, RemoteError> {
        let bad = |why: &str| RemoteError::Url {
            url: redact(given),
            why: why.to_string(),
        };
        let (scheme, rest) = given
            .split_once("://")
            .ok_or_else(|| bad("expected http://HOST[:PORT][/PREFIX] or https://…"))?;
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme must be http or https"));
        }
        if given.contains(['?', '#']) || given.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad(
                "a cache URL has no query, fragment, spaces or control characters",
            ));
        }
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, host_port) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        // The port is after the last `:`, unless that `:` is inside a bracketed IPv6 address.
        let (host, port) = match host_port.rfind(':') {
            Some(at) if !host_port[at..].contains(']') => {
                (&host_port[..at], Some(&host_port[at + 1..]))
            }
            _ => (host_port, None),
        };
        if host.is_empty() {
            return Err(bad("it names no host"));
        }
        if let Some(port) = port
            && port.parse::<u16>().ok().filter(|&p| p > 0).is_none()
        {
            return Err(bad("the port must be a number from 1 to 65535"));
        }
        let credentials = match userinfo {
            None => None,
            Some(info) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                let decode = |s: &str| {
                    percent_decode(s).ok_or_else(|| bad("its userinfo has a bad %-escape"))
                };
                Some((decode(user)?, decode(password)?))
            }
        };
        Ok(Url {
            base: format!("{scheme}://{host_port}{}", path.trim_end_matches('/')),
            host: host.to_string(),
            credentials,
        })
    }
}

/// `%XX` escapes decoded; `None` when one is malformed or the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = (bytes.next()? as char).to_digit(16)?;
            let lo = (bytes.next()? as char).to_digit(16)?;
            out.push((hi * 16 + lo) as u8);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// The login and password a netrc file gives `host` (its `machine` entry, else its `default`).
fn netrc_entry(path: &Path, host: &str) -> Result<Option<(String, String)>, RemoteError> {
    let text = files::read_text(path, &NETRC)?;
    let entries = parse_netrc(&text).map_err(|(line, why)| RemoteError::Netrc {
        path: path.to_path_buf(),
        line,
        why,
    })?;
    let entry = (entries.iter().find(|e| e.machine.as_deref() == Some(host)))
        .or_else(|| entries.iter().find(|e| e.machine.is_none()));
    Ok(entry.map(|e| (e.login.clone(), e.password.clone())))
}

/// One entry of a netrc file: `machine NAME` (or `default`, with no name) and its login and password.
#[derive(Debug, PartialEq)]
struct NetrcEntry {
    machine: Option<String>,
    login: String,
    password: String,
}

/// The entries of a netrc file; the line and the reason of the first thing it cannot read. Never
/// quotes a value, so a message holds no password.
fn parse_netrc(text: &str) -> Result<Vec<NetrcEntry>, (usize, String)> {
    let mut tokens = Vec::new();
    let mut in_macro = false;
    for (i, line) in text.lines().enumerate() {
        if in_macro {
            in_macro = !line.trim().is_empty();
            continue;
        }
        let words: Vec<&str> = line
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if words.first() == Some(&"macdef") {
            // A macro's body runs to the next empty line.
            in_macro = true;
            continue;
        }
        tokens.extend(words.into_iter().map(|w| (i + 1, w)));
    }
    let mut entries: Vec<NetrcEntry> = Vec::new();
    let mut tokens = tokens.into_iter();
    while let Some((line, token)) = tokens.next() {
        let mut value = |what: &str| {
            tokens
                .next()
                .map(|(_, v)| v.to_string())
                .ok_or((line, format!("`{token}` has no {what} after it")))
        };
        match token {
            "machine" => {
                let name = value("host name")?;
                entries.push(NetrcEntry {
                    machine: Some(name),
                    login: String::new(),
                    password: String::new(),
                });
            }
            "default" => entries.push(NetrcEntry {
                machine: None,
                login: String::new(),
                password: String::new(),
            }),
            "login" | "password" | "account" => {
                let v = value("value")?;
                let Some(entry) = entries.last_mut() else {
                    return Err((
                        line,
                        format!("`{token}` comes before any `machine` or `default`"),
                    ));
                };
                match token {
                    "login" => entry.login = v,
                    "password" => entry.password = v,
                    _ => {}
                }
            }
            other => {
                return Err((
                    line,
                    format!(
                        "unknown word {other:?}; a netrc file holds machine, default, login, password, account and macdef"
                    ),
                ));
            }
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gives_its_base_host_and_credentials_and_is_printed_without_them() {
        let url = Url::parse("http://ci:s%40cret@cache.example:8080/team/").unwrap();
        assert_eq!(url.base, "http://cache.example:8080/team");
        assert_eq!(url.host, "cache.example");
        assert_eq!(
            url.credentials,
            Some(("ci".to_string(), "s@cret".to_string()))
        );
        assert_eq!(
            redact("http://ci:s%40cret@cache.example:8080/team"),
            "http://***@cache.example:8080/team"
        );
        for bad in [
            "cache.example:8080",
            "ftp://cache.example",
            "http://",
            "http://u:secret@:80",
            "http://cache.example:http",
            "http://cache.example:0",
            "http://cache.example/a b",
            "http://cache.example/?q",
            "http://u:%zz@cache.example",
        ] {
            let e = Url::parse(bad).expect_err(bad).to_string();
            assert!(e.starts_with("--remote-cache "), "{e}");
            assert!(!e.contains("secret") && !e.contains("%zz"), "{e}");
        }
    }

    #[test]
    fn basic_credentials_are_base64() {
        assert_eq!(
            base64("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64("ab"), "YWI=");
        assert_eq!(base64("abc"), "YWJj");
    }

    #[test]
    fn a_netrc_file_gives_the_hosts_entry_or_the_default_and_says_where_it_is_wrong() {
        let text = "# team cache\nmachine cache.example\n  login ci password hunter2\n\
                    macdef init\ncd /\n\ndefault login anon password x\n";
        let entries = parse_netrc(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].machine.as_deref(), Some("cache.example"));
        assert_eq!(
            (entries[0].login.as_str(), entries[0].password.as_str()),
            ("ci", "hunter2")
        );
        assert_eq!(entries[1].machine, None);
        let (line, why) = parse_netrc("machine a\nlogin ci\npasword hunter2\n").unwrap_err();
        assert_eq!(line, 3);
        assert!(why.contains("pasword") && !why.contains("hunter2"), "{why}");
        assert_eq!(parse_netrc("login ci\n").unwrap_err().0, 1);
        assert_eq!(parse_netrc("machine a password").unwrap_err().0, 1);
    }

    #[test]
    fn an_entry_key_is_64_hex_and_changes_with_the_fingerprint_and_the_action() {
        let options = |fingerprint: &str| RemoteOptions {
            url: "http://127.0.0.1:1".to_string(),
            netrc: None,
            timeout: Duration::from_secs(1),
            max_blob_bytes: 1 << 20,
            read_only: false,
            recache: false,
            fingerprint: fingerprint.to_string(),
        };
        let (a, b) = (
            RemoteCache::new(&options("a")).unwrap(),
            RemoteCache::new(&options("b")).unwrap(),
        );
        let key = ContentHash::of(b"key");
        let k = a.entry_key("lower_mid", &key);
        assert_eq!(k.len(), 64);
        assert!(
            k.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
        assert_ne!(k, b.entry_key("lower_mid", &key));
        assert_ne!(k, a.entry_key("schedule", &key));
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
