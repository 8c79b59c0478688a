//! Issue 24: `smcrun exporter --web.config.file` (node_exporter's web config) as a scraper and
//! an operator meet it: real curl over TLS with a self-signed certificate made here (openssl),
//! basic auth with a hash htpasswd made (bcrypt), right, wrong and missing passwords, plain HTTP
//! refused on the TLS port, a client certificate required and checked; and every kind of bad
//! config stopping the exporter with one line before it listens.
//!
//! Needs curl, openssl and htpasswd (apache2-utils); `tests/deps` installs them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, ok, run, smcrun, tool};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smcrun-web-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A self-signed certificate for 127.0.0.1 (and its key) in `dir`, named `name`.
fn self_signed(dir: &Path, name: &str) {
    let mut c = tool("openssl");
    c.args([
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
    ])
    .args(["-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"])
    .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
    .arg("-keyout")
    .arg(dir.join(format!("{name}.key")))
    .arg("-out")
    .arg(dir.join(format!("{name}.pem")))
    .current_dir(dir);
    ok(c);
}

/// A client certificate `name` (clientAuth) signed by the certificate `ca` of `dir`.
fn signed_by(dir: &Path, ca: &str, name: &str) {
    let mut c = tool("openssl");
    c.args([
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
    ])
    .args(["-nodes", "-subj", &format!("/CN={name}")])
    .args([
        "-keyout",
        &format!("{name}.key"),
        "-out",
        &format!("{name}.csr"),
    ])
    .current_dir(dir);
    ok(c);
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    let mut c = tool("openssl");
    c.args(["x509", "-req", "-days", "2", "-in", &format!("{name}.csr")])
        .args(["-CA", &format!("{ca}.pem"), "-CAkey", &format!("{ca}.key")])
        .args(["-CAcreateserial", "-extfile", "client.ext"])
        .args(["-out", &format!("{name}.pem")])
        .current_dir(dir);
    ok(c);
}

/// The bcrypt hash htpasswd makes of `password` (cost 5: a test needs no slow hash).
fn bcrypt_of(user: &str, password: &str) -> String {
    let mut c = tool("htpasswd");
    c.args(["-nbBC", "5", user, password]);
    let out = String::from_utf8(ok(c).stdout).unwrap();
    out.trim()
        .strip_prefix(&format!("{user}:"))
        .unwrap()
        .to_string()
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// curl's answer: (exit status, HTTP status, the headers and body as text).
fn curl(args: &[&str], url: &str) -> (i32, u16, String) {
    let mut c = tool("curl");
    c.args(["-sS", "-D", "-", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url);
    let o = c.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let code = text
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    (o.status.code().unwrap_or(-1), code, text)
}

/// Start the exporter with `config`; wait until it accepts connections.
fn start(config: &Path) -> (Killed, u16) {
    let port = free_port();
    let mut c = smcrun();
    c.args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--web.config.file")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = Killed(c.spawn().unwrap());
    let end = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < end, "the exporter did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    (child, port)
}

#[test]
fn tls_and_basic_auth_as_curl_sees_them() {
    let d = tmpdir("tls");
    self_signed(&d, "server");
    let hash = bcrypt_of("alice", "s3cret");
    // Paths relative to the config's directory, as node_exporter takes them.
    std::fs::write(
        d.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n\
             basic_auth_users:\n  alice: '{hash}'\n"
        ),
    )
    .unwrap();
    let (_exporter, port) = start(&d.join("web.yml"));
    let ca = d.join("server.pem");
    let ca = ca.to_str().unwrap();
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");

    // The right password: the scrape, with its content type; the certificate checked by curl.
    let (rc, code, text) = curl(&["--cacert", ca, "-u", "alice:s3cret"], &url("/metrics"));
    assert_eq!((rc, code), (0, 200), "{text}");
    assert!(text.contains("\nsmc_up "), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
        "{text}"
    );
    // Again: the remembered password answers as well.
    let (_, code, _) = curl(&["--cacert", ca, "-u", "alice:s3cret"], &url("/metrics"));
    assert_eq!(code, 200);
    let (_, code, text) = curl(&["--cacert", ca, "-u", "alice:s3cret"], &url("/"));
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("<a href=\"/metrics\">"), "{text}");

    // A wrong password, an unknown user, none at all: 401 with the challenge, no metrics.
    for auth in [&["-u", "alice:wrong"][..], &["-u", "bob:s3cret"], &[]] {
        let args = [&["--cacert", ca][..], auth].concat();
        let (rc, code, text) = curl(&args, &url("/metrics"));
        assert_eq!((rc, code), (0, 401), "{auth:?}: {text}");
        assert!(
            text.to_ascii_lowercase()
                .contains("www-authenticate: basic realm=\"smcrun exporter\""),
            "{auth:?}: {text}"
        );
        assert!(!text.contains("smc_up"), "{auth:?}: {text}");
    }

    // Plain HTTP on the TLS port: refused, nothing of the metrics.
    let (_, code, text) = curl(
        &["-u", "alice:s3cret"],
        &format!("http://127.0.0.1:{port}/metrics"),
    );
    assert_eq!(code, 400, "{text}");
    assert!(
        text.contains("Client sent an HTTP request to an HTTPS server."),
        "{text}"
    );
    assert!(!text.contains("smc_up"), "{text}");
    // A certificate curl does not trust: curl refuses it (exit 60), the exporter is not fooled
    // into plain text.
    let (rc, _, _) = curl(&["-u", "alice:s3cret"], &url("/metrics"));
    assert_eq!(rc, 60);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_client_certificate_is_required_and_verified() {
    let d = tmpdir("mtls");
    self_signed(&d, "server");
    self_signed(&d, "ca");
    signed_by(&d, "ca", "client");
    self_signed(&d, "other-ca");
    signed_by(&d, "other-ca", "stranger");
    std::fs::write(
        d.join("web.yml"),
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
    )
    .unwrap();
    let (_exporter, port) = start(&d.join("web.yml"));
    let url = format!("https://127.0.0.1:{port}/metrics");
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let ca = vec!["--cacert".to_string(), p("server.pem")];
    let with = |who: &str| {
        let mut v = ca.clone();
        v.extend([
            "--cert".into(),
            p(&format!("{who}.pem")),
            "--key".into(),
            p(&format!("{who}.key")),
        ]);
        v
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let (rc, code, text) = curl(&args(&with("client")), &url);
    assert_eq!((rc, code), (0, 200), "{text}");
    for refused in [with("stranger"), ca.clone()] {
        let (rc, code, text) = curl(&args(&refused), &url);
        assert!(rc != 0 && code != 200, "{refused:?}: {rc} {text}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn basic_auth_without_tls() {
    let d = tmpdir("auth");
    let hash = bcrypt_of("prom", "pw");
    std::fs::write(
        d.join("web.yml"),
        format!("basic_auth_users:\n  prom: {hash}\n"),
    )
    .unwrap();
    let (_exporter, port) = start(&d.join("web.yml"));
    let url = format!("http://127.0.0.1:{port}/metrics");
    assert_eq!(curl(&["-u", "prom:pw"], &url).1, 200);
    assert_eq!(curl(&["-u", "prom:pW"], &url).1, 401);
    let _ = std::fs::remove_dir_all(&d);
}

/// Each bad config: exit 2, one line naming the bad value and what is expected, and no listening.
#[test]
fn a_bad_web_config_stops_the_exporter_with_one_line() {
    let d = tmpdir("bad");
    self_signed(&d, "server");
    std::fs::write(d.join("garbage.pem"), "not a certificate\n").unwrap();
    let hash = bcrypt_of("alice", "x");
    let cases: [(&str, Option<String>, &str); 6] = [
        ("missing.yml", None, "missing.yml"),
        (
            "yaml.yml",
            Some("tls_server_config: [\n".into()),
            "yaml.yml",
        ),
        (
            "key.yml",
            Some(format!(
                "basic_auth_users:\n  alice: '{hash}'\nhttp_server_config: {{}}\n"
            )),
            "unknown field `http_server_config`",
        ),
        (
            "cert.yml",
            Some("tls_server_config:\n  cert_file: garbage.pem\n  key_file: server.key\n".into()),
            "cert_file",
        ),
        (
            "hash.yml",
            Some("basic_auth_users:\n  alice: plaintext\n".into()),
            "basic_auth_users.alice: \"plaintext\" is not a bcrypt hash",
        ),
        (
            "auth.yml",
            Some(
                "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  \
                 client_auth_type: Sometimes\n"
                    .into(),
            ),
            "\"Sometimes\"",
        ),
    ];
    for (name, text, want) in cases {
        if let Some(t) = &text {
            std::fs::write(d.join(name), t).unwrap();
        }
        let port = free_port();
        let mut c = smcrun();
        c.args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--web.config.file")
            .arg(d.join(name));
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(want), "{name}: {want:?} not in {err}");
        assert!(err.contains("--web.config.file"), "{name}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
