//! `smcrun exporter --web.config.file PATH`: node_exporter's web configuration file (its YAML
//! format, as Prometheus' exporter toolkit reads it), for an exporter that faces the network:
//! TLS (`tls_server_config`: `cert_file`, `key_file`, optionally `client_auth_type` and
//! `client_ca_file`, `min_version`, `max_version`) and basic auth (`basic_auth_users`: user ->
//! bcrypt hash). The file is read once, at start: a bad one stops the exporter before it listens.
//! Relative paths are taken from the file's directory, as node_exporter takes them.
//!
//! A password that was accepted once is remembered (a keyed SHA-256 of it, per user, in memory),
//! so a scrape every few seconds does not cost a bcrypt each time; a wrong one is checked by
//! bcrypt every time (its cost is what slows a guesser), on the scrape threads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// The file as node_exporter's exporter toolkit spells it (the keys smcrun takes; any other is
/// refused by name).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    client_auth_type: Option<String>,
    client_ca_file: Option<PathBuf>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// The `client_auth_type` values smcrun takes (the toolkit's names; its RequestClientCert and
/// RequireAnyClientCert accept certificates nobody verified, and are refused).
const CLIENT_AUTH_TYPES: [&str; 3] = [
    "NoClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
];

/// What the exporter serves with: TLS or not, basic auth or not.
pub struct WebConfig {
    /// The TLS acceptor, when `tls_server_config` is there.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// The users, when `basic_auth_users` is there.
    pub auth: Option<BasicAuth>,
}

impl WebConfig {
    /// No file: plain HTTP, no auth.
    pub fn none() -> WebConfig {
        WebConfig {
            tls: None,
            auth: None,
        }
    }

    /// Read `path`; the error is one line naming the bad value and what is expected.
    pub fn read(path: &Path) -> Result<WebConfig, String> {
        let at = |e: String| format!("--web.config.file {}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
        // An empty file is node_exporter's "no TLS, no auth".
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_norway::from_str(&text).map_err(|e| at(e.to_string()))?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file
            .tls_server_config
            .map(|t| tls_acceptor(&t, dir))
            .transpose()
            .map_err(at)?;
        let auth = file
            .basic_auth_users
            .map(BasicAuth::new)
            .transpose()
            .map_err(at)?;
        Ok(WebConfig { tls, auth })
    }
}

fn tls_version(key: &str, v: &str) -> Result<&'static rustls::SupportedProtocolVersion, String> {
    match v {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        _ => Err(format!(
            "tls_server_config.{key}: {v:?} is not a TLS version smcrun takes; expected TLS12 or TLS13"
        )),
    }
}

fn tls_acceptor(t: &TlsFile, dir: &Path) -> Result<tokio_rustls::TlsAcceptor, String> {
    let file = |p: &Path| dir.join(p);
    let cert_path = file(&t.cert_file);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| {
            format!(
                "tls_server_config.cert_file {}: {e} (expected a PEM certificate)",
                cert_path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "tls_server_config.cert_file {}: no PEM certificate in it",
            cert_path.display()
        ));
    }
    let key_path = file(&t.key_file);
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        format!(
            "tls_server_config.key_file {}: {e} (expected a PEM private key)",
            key_path.display()
        )
    })?;
    let all = [&rustls::version::TLS12, &rustls::version::TLS13];
    let min = t
        .min_version
        .as_deref()
        .map(|v| tls_version("min_version", v))
        .transpose()?;
    let max = t
        .max_version
        .as_deref()
        .map(|v| tls_version("max_version", v))
        .transpose()?;
    let lo = all
        .iter()
        .position(|v| min.is_none_or(|m| m == *v))
        .unwrap_or(0);
    let hi = all
        .iter()
        .position(|v| max.is_some_and(|m| m == *v))
        .unwrap_or(all.len() - 1);
    if lo > hi {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    let versions = &all[lo..=hi];
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let auth_type = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    if !CLIENT_AUTH_TYPES.contains(&auth_type) {
        return Err(format!(
            "tls_server_config.client_auth_type: {auth_type:?} is not taken; expected one of {}",
            CLIENT_AUTH_TYPES.join(", ")
        ));
    }
    let builder =
        match (auth_type, &t.client_ca_file) {
            ("NoClientCert", None) => builder.with_no_client_auth(),
            ("NoClientCert", Some(_)) => return Err(
                "tls_server_config.client_ca_file is given but client_auth_type is NoClientCert; \
                 expected VerifyClientCertIfGiven or RequireAndVerifyClientCert with it"
                    .into(),
            ),
            (_, None) => {
                return Err(format!(
                "tls_server_config.client_auth_type {auth_type} needs client_ca_file (the CAs that \
                 sign the clients' certificates)"
            ))
            }
            (kind, Some(ca)) => {
                let ca_path = file(ca);
                let mut roots = rustls::RootCertStore::empty();
                let cas = CertificateDer::pem_file_iter(&ca_path)
                    .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        format!(
                            "tls_server_config.client_ca_file {}: {e} (expected PEM certificates)",
                            ca_path.display()
                        )
                    })?;
                for c in cas {
                    roots.add(c).map_err(|e| {
                        format!(
                            "tls_server_config.client_ca_file {}: {e}",
                            ca_path.display()
                        )
                    })?;
                }
                let v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::clone(&provider),
                );
                let v = if kind == "VerifyClientCertIfGiven" {
                    v.allow_unauthenticated()
                } else {
                    v
                };
                let v = v.build().map_err(|e| {
                    format!(
                        "tls_server_config.client_ca_file {}: {e}",
                        ca_path.display()
                    )
                })?;
                builder.with_client_cert_verifier(v)
            }
        };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "tls_server_config: the key_file {} does not fit the cert_file {}: {e}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// `basic_auth_users`, and the passwords accepted so far.
pub struct BasicAuth {
    /// User -> bcrypt hash.
    users: BTreeMap<String, String>,
    /// User -> SHA-256 of (this process's random key, the password last accepted for it).
    accepted: Mutex<BTreeMap<String, [u8; 32]>>,
    /// The key: a memory dump shows no password, nor a digest to guess one against offline
    /// without it.
    key: [u8; 32],
}

/// The realm of the `WWW-Authenticate` header of a 401.
pub const REALM: &str = "Basic realm=\"smcrun exporter\", charset=\"UTF-8\"";

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<BasicAuth, String> {
        if users.is_empty() {
            return Err("basic_auth_users is empty; expected user: BCRYPT-HASH lines".into());
        }
        for (user, hash) in &users {
            if user.contains(':') {
                return Err(format!(
                    "basic_auth_users: the user {user:?} has a ':', which basic auth cannot carry"
                ));
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(format!(
                    "basic_auth_users.{user}: {hash:?} is not a bcrypt hash; expected \
                     $2y$COST$... (htpasswd -nBC 10 {user})"
                ));
            }
        }
        let mut key = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
            .map_err(|_| "the kernel's random pool did not answer".to_string())?;
        Ok(BasicAuth {
            users,
            accepted: Mutex::new(BTreeMap::new()),
            key,
        })
    }

    fn digest(&self, password: &[u8]) -> [u8; 32] {
        let mut c = ring::digest::Context::new(&ring::digest::SHA256);
        c.update(&self.key);
        c.update(password);
        let mut out = [0u8; 32];
        out.copy_from_slice(c.finish().as_ref());
        out
    }

    /// The user and password of an `Authorization: Basic ...` header value.
    fn credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
        let header = std::str::from_utf8(header).ok()?;
        let (scheme, value) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .ok()?;
        let colon = raw.iter().position(|b| *b == b':')?;
        let user = String::from_utf8(raw[..colon].to_vec()).ok()?;
        Some((user, raw[colon + 1..].to_vec()))
    }

    /// Whether the request's `Authorization` header (if any) names a user with their password.
    /// A password accepted before is checked against its digest; any other costs a bcrypt (for
    /// an unknown user too, so the time does not tell which users exist). Blocking: call it on a
    /// scrape thread.
    pub fn allows(&self, header: Option<&[u8]>) -> bool {
        let Some((user, password)) = header.and_then(Self::credentials) else {
            return false;
        };
        let digest = self.digest(&password);
        let remembered = self
            .accepted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&user)
            .is_some_and(|d| same(d, &digest));
        if remembered {
            return true;
        }
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h, true),
            None => (self.users.values().next().expect("not empty"), false),
        };
        let ok = bcrypt::verify(&password, hash).unwrap_or(false) && known;
        if ok {
            self.accepted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(user, digest);
        }
        ok
    }
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<WebConfig, String> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!("smcrun-webcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("{}.yml", N.fetch_add(1, Ordering::Relaxed)));
        std::fs::write(&p, text).unwrap();
        WebConfig::read(&p)
    }

    fn basic(user: &str, password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
        .into_bytes()
    }

    #[test]
    fn bad_files_name_the_bad_value() {
        let err = |t: &str| config(t).err().unwrap();
        let e = err("basic_auth_users:\n  alice: plain\n");
        assert!(
            e.contains("basic_auth_users.alice: \"plain\" is not a bcrypt hash"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: x\n  key_file: y\n  cipher: z\n");
        assert!(e.contains("unknown field `cipher`"), "{e}");
        let e = err("basic_auth: {}\n");
        assert!(e.contains("unknown field `basic_auth`"), "{e}");
        let e = err("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: y\n");
        assert!(e.contains("cert_file /nonexistent.pem"), "{e}");
        let e = err(": : :\n");
        assert!(e.contains("--web.config.file"), "{e}");
        let e = WebConfig::read(Path::new("/nonexistent.yml"))
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent.yml"), "{e}");
        assert!(config("").unwrap().auth.is_none());
    }

    #[test]
    fn passwords_are_checked_and_remembered() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let c = config(&format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        let a = c.auth.unwrap();
        assert!(!a.allows(None));
        assert!(!a.allows(Some(&basic("alice", "wrong"))));
        assert!(!a.allows(Some(&basic("bob", "s3cret"))));
        assert!(a.accepted.lock().unwrap().is_empty());
        assert!(a.allows(Some(&basic("alice", "s3cret"))));
        // Remembered: a keyed digest, not the password.
        let d = a.accepted.lock().unwrap()["alice"];
        assert_eq!(d, a.digest(b"s3cret"));
        assert!(a.allows(Some(&basic("alice", "s3cret"))));
        assert!(!a.allows(Some(&basic("alice", "s3cre"))));
        assert!(!a.allows(Some(b"Bearer x")));
    }
}
