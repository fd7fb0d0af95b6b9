//! The remote cache on loopback (nginx WebDAV, `common::cache_server`): a second, empty store builds
//! from it with no phase computed and the same package; every remote entry is an REAPI
//! `ActionResult` naming its `/cas/` blob; damaged or missing blobs, a stopped, refusing or hanging
//! server, another compiler fingerprint, a read-only client and credentials each do what the README
//! says, and every build among them succeeds with the same package.

mod common;
use common::cache_server::{CacheServer, Hanging, free_port};
use common::{Ran, SMALL, SMALL_ID, Sandbox, phases};
use prost::Message as _;
use sha2::Digest as _;

/// `build SMALL` in `sb` against the cache at `url`, with `extra` flags.
fn build(sb: &Sandbox, url: &str, extra: &[&str]) -> Ran {
    let mut args = vec!["build", SMALL, "--remote-cache", url];
    args.extend(extra);
    sb.run(&args)
}

/// The value of `key=` on the build's summary line.
fn field(r: &Ran, key: &str) -> String {
    (r.stdout.split_whitespace())
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {}", r.stdout))
        .to_string()
}

fn package(sb: &Sandbox) -> Vec<u8> {
    std::fs::read(sb.stages().join(SMALL_ID).join("model.ipuexe")).expect("a package")
}

/// A build of the small preset in a store of its own, with no remote cache: the package every build
/// here must make.
fn local_package() -> Vec<u8> {
    let sb = Sandbox::new();
    sb.run(&["build", SMALL]).assert_ok();
    package(&sb)
}

fn warnings(r: &Ran) -> Vec<&str> {
    r.stderr.lines().filter(|l| l.contains(" WARN ")).collect()
}

#[test]
fn a_second_empty_store_builds_every_phase_from_the_server_with_the_same_package() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let first = Sandbox::new();
    let cold = build(&first, &server.url(), &[]);
    cold.assert_ok();
    assert_eq!(cold.phases_run(), phases());
    assert!(warnings(&cold).is_empty(), "{}", cold.stderr);

    let second = Sandbox::new();
    let warm = build(&second, &server.url(), &[]);
    warm.assert_ok();
    assert_eq!(field(&warm, "phasesRun"), "-");
    assert_eq!(field(&warm, "phasesLocal"), "-");
    assert_eq!(field(&warm, "phasesRemote"), phases().join(","));
    assert!(warnings(&warm).is_empty(), "{}", warm.stderr);
    assert_eq!(
        package(&second),
        package(&first),
        "a byte-identical package"
    );

    let stats = second.run(&["cache", "stats"]);
    stats.assert_ok();
    let n = phases().len();
    for shown in [
        format!("lastBuild={SMALL_ID}"),
        "localHits=0".to_string(),
        format!("localMisses={n}"),
        format!("remoteHits={n}"),
        "remoteMisses=0".to_string(),
    ] {
        assert!(stats.stdout.contains(&shown), "{shown}: {}", stats.stdout);
    }
    // A third build finds everything in its own folder.
    let again = build(&second, &server.url(), &[]);
    assert_eq!(field(again.assert_ok(), "phasesLocal"), phases().join(","));
}

#[test]
fn every_entry_is_an_action_result_whose_digest_names_its_blob_and_every_local_entry_has_one() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let sb = Sandbox::new();
    build(&sb, &server.url(), &[]).assert_ok();
    let entries = server.files("ac");
    let stats = sb.run(&["cache", "stats", "--json"]);
    let stats: serde_json::Value = serde_json::from_str(&stats.assert_ok().stdout).unwrap();
    // The phases' entries and the exchange schedule cache's, as the local store holds them.
    assert!(entries.len() > phases().len(), "{entries:?}");
    assert_eq!(stats["actions"], serde_json::json!(entries.len()));
    for entry in entries {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
        let bytes = std::fs::read(&entry).unwrap();
        let result = ipu_codegen::store::reapi::ActionResult::decode(&bytes[..])
            .unwrap_or_else(|e| panic!("{name} is not an ActionResult: {e}"));
        assert_eq!(result.output_files.len(), 1, "{result:?}");
        let file = &result.output_files[0];
        let digest = file.digest.as_ref().expect("a digest");
        let blob = std::fs::read(server.root().join("cas").join(&digest.hash))
            .unwrap_or_else(|e| panic!("{name} names a blob the server lacks: {e}"));
        assert_eq!(blob.len() as i64, digest.size_bytes);
        let sha: String = (sha2::Sha256::digest(&blob).iter())
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, digest.hash, "a blob is named by its SHA-256");
        // The path names the output by the local store's blake3 hash, under its kind.
        let (kind, blake3) = file.path.split_once('/').expect("kind/hash");
        assert_eq!(blake3::hash(&blob).to_hex().as_str(), blake3);
        assert!(sb.object_path(blake3).exists(), "{kind} {blake3}");
    }
}

#[test]
fn a_damaged_or_deleted_blob_is_a_warning_and_a_miss_and_recache_repairs_the_server() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let expected = local_package();
    let first = Sandbox::new();
    build(&first, &server.url(), &[]).assert_ok();
    let blobs = server.files("cas");
    assert!(!blobs.is_empty());
    // Damage every blob but keep its size; then a fresh store rebuilds everything, warning.
    for blob in &blobs {
        let mut bytes = std::fs::read(blob).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        std::fs::write(blob, bytes).unwrap();
    }
    let damaged = Sandbox::new();
    let r = build(&damaged, &server.url(), &[]);
    r.assert_ok();
    assert_eq!(r.phases_run(), phases(), "every damaged blob is a miss");
    assert!(
        r.stderr.contains("does not hash to its SHA-256 name"),
        "{}",
        r.stderr
    );
    assert_eq!(package(&damaged), expected);
    damaged.assert_intact_and_warm();

    // --recache from a store that holds everything overwrites the server's blobs and entries.
    let recached = build(&first, &server.url(), &["--recache"]);
    assert_eq!(
        field(recached.assert_ok(), "phasesLocal"),
        phases().join(",")
    );
    let fresh = Sandbox::new();
    let r = build(&fresh, &server.url(), &[]);
    assert_eq!(field(r.assert_ok(), "phasesRun"), "-");
    assert!(warnings(&r).is_empty(), "{}", r.stderr);

    // Blobs deleted behind their entries: a warning naming the missing blob, and a miss.
    for blob in server.files("cas") {
        std::fs::remove_file(blob).unwrap();
    }
    let missing = Sandbox::new();
    let r = build(&missing, &server.url(), &[]);
    r.assert_ok();
    assert_eq!(r.phases_run(), phases());
    assert!(
        r.stderr.contains("which the server does not hold"),
        "{}",
        r.stderr
    );
    assert_eq!(package(&missing), expected);
}

#[test]
fn a_stopped_refusing_or_hanging_server_is_one_warning_and_the_build_succeeds() {
    let Some(mut server) = CacheServer::start() else {
        return;
    };
    let expected = local_package();
    build(&Sandbox::new(), &server.url(), &[]).assert_ok();
    server.stop();
    let refused = format!("http://127.0.0.1:{}", free_port());
    let hanging = Hanging::start();
    let hanging = format!("http://127.0.0.1:{}", hanging.port);
    for url in [server.url(), refused, hanging] {
        let sb = Sandbox::new();
        let started = std::time::Instant::now();
        let r = build(&sb, &url, &["--remote-timeout", "1"]);
        r.assert_ok();
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{url}: one timeout, not one a request"
        );
        assert_eq!(r.phases_run(), phases(), "{url}");
        let warned = warnings(&r);
        assert_eq!(warned.len(), 1, "{url}: {}", r.stderr);
        assert!(warned[0].contains("unreachable"), "{}", warned[0]);
        assert_eq!(package(&sb), expected, "{url}");
    }
}

#[test]
fn a_read_only_client_uploads_nothing_and_reads_what_others_uploaded() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let reader = Sandbox::new();
    build(&reader, &server.url(), &["--remote-read-only"]).assert_ok();
    assert!(server.files("").is_empty(), "{:?}", server.files(""));
    build(&Sandbox::new(), &server.url(), &[]).assert_ok();
    let fresh = Sandbox::new();
    let r = build(&fresh, &server.url(), &["--remote-read-only"]);
    assert_eq!(field(r.assert_ok(), "phasesRun"), "-");
}

#[test]
fn objects_over_the_blob_size_limit_stay_local_and_so_do_their_entries() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let expected = local_package();
    let r = build(
        &Sandbox::new(),
        &server.url(),
        &["--remote-max-blob-bytes", "4K"],
    );
    r.assert_ok();
    assert!(
        r.stderr
            .contains("over the blob size limit of 4096; it stays local"),
        "{}",
        r.stderr
    );
    let blobs = server.files("cas");
    assert!(!blobs.is_empty(), "the small objects were sent");
    for blob in &blobs {
        assert!(
            std::fs::metadata(blob).unwrap().len() <= 4096,
            "{}",
            blob.display()
        );
    }
    // Every entry on the server names a blob it holds; the phases whose output stayed local are
    // computed by the next store, which reads the rest.
    let next = Sandbox::new();
    let r = build(&next, &server.url(), &[]);
    r.assert_ok();
    assert!(warnings(&r).is_empty(), "{}", r.stderr);
    let (ran, remote) = (field(&r, "phasesRun"), field(&r, "phasesRemote"));
    assert!(
        ran != "-" && remote != "-",
        "ran {ran}, from the server {remote}"
    );
    assert_eq!(package(&next), expected);
}

#[test]
fn several_builders_against_one_server_all_succeed_with_one_package() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let expected = local_package();
    let sandboxes: Vec<Sandbox> = (0..3).map(|_| Sandbox::new()).collect();
    let url = server.url();
    std::thread::scope(|s| {
        let builds: Vec<_> = (sandboxes.iter())
            .map(|sb| s.spawn(|| build(sb, &url, &[])))
            .collect();
        for b in builds {
            let r = b.join().unwrap();
            r.assert_ok();
            assert!(warnings(&r).is_empty(), "{}", r.stderr);
        }
    });
    for sb in &sandboxes {
        assert_eq!(package(sb), expected);
    }
    let r = build(&Sandbox::new(), &url, &[]);
    assert_eq!(field(r.assert_ok(), "phasesRun"), "-");
}

#[test]
fn entries_of_another_compiler_fingerprint_are_never_read() {
    let Some(server) = CacheServer::start() else {
        return;
    };
    let with = |fingerprint: &str| {
        let sb = Sandbox::new();
        let r = ran_with(&sb, &server.url(), fingerprint);
        (sb, r)
    };
    let (_, a) = with("compiler-a");
    assert_eq!(a.assert_ok().phases_run(), phases());
    let (_, b) = with("compiler-b");
    assert_eq!(
        b.assert_ok().phases_run(),
        phases(),
        "no entry of compiler-a is read"
    );
    assert_eq!(field(&b, "phasesRemote"), "-");
    let (_, again) = with("compiler-a");
    assert_eq!(field(again.assert_ok(), "phasesRun"), "-");
}

fn ran_with(sb: &Sandbox, url: &str, fingerprint: &str) -> Ran {
    common::ran(
        sb.command(&["build", SMALL, "--remote-cache", url])
            .env("IPU_CODEGEN_FINGERPRINT", fingerprint)
            .output()
            .unwrap(),
    )
}

#[test]
fn credentials_come_from_the_url_or_a_netrc_file_and_are_never_printed() {
    let Some(server) = CacheServer::start_with_login("ci", "hunter2") else {
        return;
    };
    let port = server.url().rsplit(':').next().unwrap().to_string();
    let with_login = format!("http://ci:hunter2@127.0.0.1:{port}");
    build(&Sandbox::new(), &with_login, &[]).assert_ok();
    assert!(
        !server.files("ac").is_empty(),
        "uploads with the URL's login"
    );

    // Without credentials the server refuses: warnings, misses, a build that succeeds.
    let anonymous = build(&Sandbox::new(), &server.url(), &[]);
    assert_eq!(anonymous.assert_ok().phases_run(), phases());
    assert!(
        anonymous.stderr.contains("HTTP 401"),
        "{}",
        anonymous.stderr
    );

    // A netrc file's entry for the host.
    let sb = Sandbox::new();
    std::fs::write(
        sb.path("netrc"),
        "machine 127.0.0.1\n  login ci\n  password hunter2\n",
    )
    .unwrap();
    let netrc = sb.path("netrc");
    let r = build(
        &sb,
        &server.url(),
        &["--remote-netrc", netrc.to_str().unwrap()],
    );
    assert_eq!(field(r.assert_ok(), "phasesRun"), "-");

    // A wrong password in the URL, with the server down: the password is in no message.
    let wrong = format!("http://ci:s3cretpass@127.0.0.1:{}", free_port());
    let r = build(&Sandbox::new(), &wrong, &[]);
    r.assert_ok();
    assert!(!r.stderr.contains("s3cretpass") && !r.stdout.contains("s3cretpass"));
    let help = Sandbox::new()
        .command(&["build", "--help"])
        .env("IPU_CODEGEN_REMOTE_CACHE", &wrong)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("s3cretpass"));
}

#[test]
fn a_bad_url_netrc_or_flag_is_a_clear_error_naming_it() {
    let sb = Sandbox::new();
    for (args, says) in [
        (
            vec!["--remote-cache", "ftp://u:s3cretpass@host/x"],
            "--remote-cache ftp://***@host/x: the scheme must be http or https",
        ),
        (
            vec!["--remote-cache", "http://host:port"],
            "the port must be a number",
        ),
        (
            vec!["--remote-read-only"],
            "--remote-read-only and --recache need a --remote-cache URL",
        ),
        (
            vec![
                "--remote-cache",
                "http://127.0.0.1:9",
                "--remote-read-only",
                "--recache",
            ],
            "--recache overwrites remote entries, which --remote-read-only forbids",
        ),
        (
            vec![
                "--remote-cache",
                "http://127.0.0.1:9",
                "--remote-netrc",
                "bad-netrc",
            ],
            "line 2: unknown word \"passwd\"",
        ),
        (
            vec![
                "--remote-cache",
                "http://127.0.0.1:9",
                "--remote-netrc",
                "no-such-netrc",
            ],
            "no-such-netrc",
        ),
    ] {
        std::fs::write(sb.path("bad-netrc"), "machine host login ci\npasswd x\n").unwrap();
        let mut argv = vec!["build", SMALL];
        argv.extend(args.iter().copied());
        let r = sb.run(&argv);
        r.assert_clean_failure();
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("s3cretpass"), "{}", r.stderr);
    }
}
