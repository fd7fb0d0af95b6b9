//! A remote cache on loopback for the tests: nginx serving WebDAV `PUT` and `GET` from a folder of
//! its own, on 127.0.0.1 and a free port, its prefix, pid file, logs and temp folders in a temp dir,
//! in the foreground as a child the helper stops when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether nginx can be run.
pub fn nginx_installed() -> bool {
    Command::new("nginx")
        .arg("-v")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A running nginx serving one folder as a remote cache.
pub struct CacheServer {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
    /// Asks for this login and password (HTTP basic authentication), when set.
    login: Option<(String, String)>,
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("an address").port()
}

impl CacheServer {
    /// Starts nginx; `None` (the test skips) when nginx is not installed.
    pub fn start() -> Option<CacheServer> {
        CacheServer::start_with(None)
    }

    /// Starts nginx asking every request for `user` and `password`.
    pub fn start_with_login(user: &str, password: &str) -> Option<CacheServer> {
        CacheServer::start_with(Some((user.to_string(), password.to_string())))
    }

    fn start_with(login: Option<(String, String)>) -> Option<CacheServer> {
        if super::skip_without("nginx", nginx_installed()) {
            return None;
        }
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        let mut server = CacheServer {
            dir,
            port: free_port(),
            child: None,
            login,
        };
        server.resume();
        Some(server)
    }

    /// Starts nginx again on the same port and folder (after [`CacheServer::stop`]).
    pub fn resume(&mut self) {
        let d = self.dir.path();
        let auth = match &self.login {
            Some((user, password)) => {
                std::fs::write(d.join("htpasswd"), format!("{user}:{{PLAIN}}{password}\n"))
                    .unwrap();
                format!(
                    "auth_basic cache;\n      auth_basic_user_file {}/htpasswd;\n",
                    d.display()
                )
            }
            None => String::new(),
        };
        let config = format!(
            "daemon off;\nuser root;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
             client_max_body_size 0;\n\
             server {{\n    listen 127.0.0.1:{port};\n    root {d}/root;\n\
             location / {{\n      dav_methods PUT DELETE;\n      create_full_put_path on;\n\
             dav_access user:rw;\n      {auth}    }}\n  }}\n}}\n",
            d = d.display(),
            port = self.port
        );
        std::fs::write(d.join("nginx.conf"), config).unwrap();
        let child = Command::new("nginx")
            .arg("-p")
            .arg(d)
            .arg("-c")
            .arg(d.join("nginx.conf"))
            .arg("-e")
            .arg(d.join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        self.child = Some(child);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "nginx did not listen on port {}: {}",
                self.port,
                std::fs::read_to_string(d.join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops nginx; the port then refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: the master stops its worker before it exits (a killed master leaves the
            // worker serving).
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The folder nginx serves: `cas/` and `ac/` under it.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The files under `root()/<folder>`, in name order.
    pub fn files(&self, folder: &str) -> Vec<PathBuf> {
        let dir = self.root().join(folder);
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        files
    }
}

impl Drop for CacheServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A server that accepts connections and never answers, until dropped.
pub struct Hanging {
    pub port: u16,
    _listener: TcpListener,
    _held: std::sync::Arc<std::sync::Mutex<Vec<TcpStream>>>,
}

impl Hanging {
    pub fn start() -> Hanging {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let accepting = listener.try_clone().unwrap();
        let streams = held.clone();
        std::thread::spawn(move || {
            for stream in accepting.incoming().flatten() {
                streams.lock().unwrap().push(stream);
            }
        });
        Hanging {
            port,
            _listener: listener,
            _held: held,
        }
    }
}
