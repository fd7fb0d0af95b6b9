//! The store options every subcommand takes: the local folder (`--cache`) and, with `--remote-cache`,
//! the shared remote cache behind it. [`StoreArgs::open`] gives the commands a [`Store`] and they do
//! not know which levels it has.
//!
//! Contract: a remote option without `--remote-cache` is an error, as are a malformed URL and a netrc
//! file that does not read; credentials (in the URL, or from the netrc file) never reach a message,
//! a log line or `--help` (the environment's value is hidden there).

use super::GLOBAL;
use super::cache::parse_size;
use anyhow::{Result, bail};
use clap::Args;
use ipu_codegen::store::{COMPILER_VERSION, LocalStore, RemoteOptions, Store, TwoLevel};
use std::path::PathBuf;
use std::time::Duration;

/// Where builds keep their artifacts.
#[derive(Args, Debug)]
pub struct StoreArgs {
    /// The content-addressed store.
    #[arg(
        long,
        global = true,
        env = "IPU_CODEGEN_CACHE",
        default_value = "cache",
        help_heading = GLOBAL
    )]
    pub cache: PathBuf,
    /// A shared cache behind the local store, over Bazel's HTTP remote-cache protocol
    /// (bazel-remote, nginx WebDAV): `http[s]://[USER:PASSWORD@]HOST[:PORT][/PREFIX]`. Reads go to
    /// the local store, then to it; every artifact goes to both.
    #[arg(
        long,
        global = true,
        env = "IPU_CODEGEN_REMOTE_CACHE",
        hide_env_values = true,
        value_name = "URL",
        help_heading = GLOBAL
    )]
    remote_cache: Option<String>,
    /// Read from the remote cache, upload nothing to it.
    #[arg(long, global = true, help_heading = GLOBAL)]
    remote_read_only: bool,
    /// Read nothing from the remote cache and overwrite its entries (and blobs) with what this
    /// machine builds or holds: for entries found bad.
    #[arg(long, global = true, help_heading = GLOBAL)]
    recache: bool,
    /// Give up on one request to the remote cache after this many seconds (a miss, with a warning;
    /// the process then goes on without the server).
    #[arg(
        long,
        global = true,
        default_value_t = 60,
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..=3600),
        help_heading = GLOBAL
    )]
    remote_timeout: u64,
    /// The largest object sent to or taken from the remote cache; larger ones stay local (a count
    /// of bytes, or `500M`, `1G`, …).
    #[arg(
        long,
        global = true,
        default_value = "1G",
        value_name = "SIZE",
        value_parser = parse_size,
        help_heading = GLOBAL
    )]
    remote_max_blob_bytes: u64,
    /// The netrc file whose entry for the cache's host gives its login and password when the URL
    /// has none (default: $NETRC, else ~/.netrc when it exists).
    #[arg(
        long,
        global = true,
        env = "IPU_CODEGEN_REMOTE_NETRC",
        value_name = "FILE",
        help_heading = GLOBAL
    )]
    remote_netrc: Option<PathBuf>,
    /// Test-only: stands in for the compiler's fingerprint in the remote cache's entry keys.
    #[arg(long, global = true, env = "IPU_CODEGEN_FINGERPRINT", hide = true)]
    fingerprint: Option<String>,
}

impl StoreArgs {
    /// The store the options name: the local folder, behind it the remote cache when one is given.
    pub fn open(&self) -> Result<Box<dyn Store>> {
        let local = LocalStore::open(&self.cache)?;
        let Some(url) = &self.remote_cache else {
            if self.remote_read_only || self.recache {
                bail!("--remote-read-only and --recache need a --remote-cache URL");
            }
            return Ok(Box::new(local));
        };
        if self.remote_read_only && self.recache {
            bail!(
                "--recache overwrites remote entries, which --remote-read-only forbids; give one"
            );
        }
        let netrc = self.remote_netrc.clone().or_else(|| {
            std::env::var_os("NETRC").map(PathBuf::from).or_else(|| {
                let home = std::env::var_os("HOME").map(PathBuf::from)?;
                Some(home.join(".netrc")).filter(|p| p.exists())
            })
        });
        let options = RemoteOptions {
            url: url.clone(),
            netrc,
            timeout: Duration::from_secs(self.remote_timeout),
            max_blob_bytes: self.remote_max_blob_bytes,
            read_only: self.remote_read_only,
            recache: self.recache,
            fingerprint: (self.fingerprint.clone()).unwrap_or_else(|| COMPILER_VERSION.to_string()),
        };
        Ok(Box::new(TwoLevel::new(local, &options)?))
    }
}
