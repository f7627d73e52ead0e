//! TLS with rustls (the ring provider): the server's configuration built from Redis' `tls-*`
//! directives, kept here so that `CONFIG SET tls-cert-file ...` swaps it for the next
//! connection while the open ones keep theirs; and the client side for replication links
//! (`tls-replication yes`).
//!
//! | directive | meaning here |
//! | --- | --- |
//! | `tls-port` | a port of its own for TLS clients, beside the plain `port` (0: none) |
//! | `tls-cert-file`, `tls-key-file` | the server's PEM certificate chain and key (`tls-key-file-pass`: encrypted keys are refused, rustls reads none) |
//! | `tls-ca-cert-file`, `tls-ca-cert-dir` | the CAs client (and primary) certificates must chain to |
//! | `tls-auth-clients` | `yes`: a client certificate is required; `optional`: checked if sent; `no`: not asked |
//! | `tls-protocols` | `TLSv1.2` and/or `TLSv1.3` (the default: both; older ones do not exist in rustls) |
//! | `tls-ciphersuites`, `tls-ciphers` | OpenSSL names of the TLS 1.3 suites and the TLS 1.2 ciphers to offer, `:`-separated |
//! | `tls-session-caching`, `tls-session-cache-size` | server-side session resumption, its cache size |
//! | `tls-client-cert-file`, `tls-client-key-file` | the certificate a replica shows its primary (else `tls-cert-file`) |

use crate::config::Config;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedCipherSuite};
use std::sync::{Arc, RwLock};

/// The `tls-*` directives that shape the server's configuration (any change rebuilds it).
pub const SERVER_DIRECTIVES: &[&str] = &[
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphersuites",
    "tls-ciphers",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
];

/// OpenSSL's names of the suites rustls (ring) offers, and rustls' own.
const SUITE_NAMES: &[(&str, &str)] = &[
    ("TLS_AES_256_GCM_SHA384", "TLS13_AES_256_GCM_SHA384"),
    ("TLS_AES_128_GCM_SHA256", "TLS13_AES_128_GCM_SHA256"),
    ("TLS_CHACHA20_POLY1305_SHA256", "TLS13_CHACHA20_POLY1305_SHA256"),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    ("ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
    ("ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    ("ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
    ("ECDHE-RSA-CHACHA20-POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
];

/// The server's TLS configuration now (none until `tls-port` or a certificate is set).
#[derive(Debug, Default)]
pub struct Tls {
    server: RwLock<Option<Arc<ServerConfig>>>,
}

impl Tls {
    /// The configuration a new connection handshakes with.
    pub fn server(&self) -> Option<Arc<ServerConfig>> {
        self.server.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Use `config` for the next connections.
    pub fn set(&self, config: Arc<ServerConfig>) {
        *self.server.write().unwrap_or_else(|p| p.into_inner()) = Some(config);
    }

    /// Build from `config` and use it for the next connections; on error the old one stays.
    pub fn reload(&self, config: &Config) -> Result<(), String> {
        let built = server_config(config)?;
        *self.server.write().unwrap_or_else(|p| p.into_inner()) = Some(built);
        Ok(())
    }
}

/// rustls over ring: a C and assembly build of seconds, where aws-lc-rs (rustls' default,
/// with post-quantum key exchange) needs cmake and minutes on the two-core machines rill is
/// built on. ring's provider has every classic suite Redis' OpenSSL offers by default.
#[allow(deprecated)]
fn provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read the certificate file '{path}': {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the certificates in '{path}': {e}"))?;
    if certs.is_empty() {
        return Err(format!("no certificate in '{path}'"));
    }
    Ok(certs)
}

fn key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    if !pass.is_empty() {
        return Err("encrypted private keys (tls-key-file-pass, tls-client-key-file-pass) are not supported: \
                    give rill the key unencrypted, readable by its user only"
            .into());
    }
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("cannot read the private key in '{path}': {e}"))
}

/// The CAs of `tls-ca-cert-file` and every certificate file in `tls-ca-cert-dir`.
fn roots(config: &Config) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let file = config.get("tls-ca-cert-file");
    if !file.is_empty() {
        for c in certs(file)? {
            store.add(c).map_err(|e| format!("a CA certificate in '{file}' is unusable: {e}"))?;
        }
    }
    let dir = config.get("tls-ca-cert-dir");
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read tls-ca-cert-dir '{dir}': {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            // Not every file of a CA directory is a certificate (OpenSSL's hash links are).
            if let Ok(found) = certs(&path.to_string_lossy()) {
                for c in found {
                    let _ = store.add(c);
                }
            }
        }
    }
    Ok(store)
}

/// The protocol versions `tls-protocols` allows (both when empty).
fn versions(config: &Config) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let text = config.get("tls-protocols");
    if text.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1" | "tlsv1.1" => tracing::warn!("tls-protocols: {word} is not supported (rustls speaks TLS 1.2 and 1.3)"),
            _ => return Err(format!("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'. ({word})")),
        }
    }
    if out.is_empty() {
        return Err("tls-protocols allows no protocol rustls speaks (TLSv1.2, TLSv1.3)".into());
    }
    Ok(out)
}

/// The suites `tls-ciphersuites` (TLS 1.3) and `tls-ciphers` (TLS 1.2) keep, by OpenSSL name;
/// all when both are empty.
fn suites(config: &Config, all: &[SupportedCipherSuite]) -> Result<Vec<SupportedCipherSuite>, String> {
    let wanted = |directive: &str, tls13: bool| -> Option<Vec<String>> {
        let text = config.get(directive);
        (!text.trim().is_empty())
            .then(|| text.split([':', ',', ' ']).filter(|w| !w.is_empty()).map(str::to_owned).collect::<Vec<_>>())
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| {
                        SUITE_NAMES.iter().find(|(o, _)| o.eq_ignore_ascii_case(n)).map(|(_, r)| r.to_string())
                    })
                    .filter(|r| r.starts_with("TLS13_") == tls13)
                    .collect()
            })
    };
    let (v13, v12) = (wanted("tls-ciphersuites", true), wanted("tls-ciphers", false));
    let keep = |s: &SupportedCipherSuite| {
        let name = format!("{:?}", s.suite());
        let list = if name.starts_with("TLS13_") { &v13 } else { &v12 };
        list.as_ref().is_none_or(|l| l.contains(&name))
    };
    let out: Vec<SupportedCipherSuite> = all.iter().copied().filter(keep).collect();
    if out.is_empty() {
        return Err("tls-ciphers / tls-ciphersuites leave no cipher suite rustls offers".into());
    }
    Ok(out)
}

/// The server's configuration from the `tls-*` directives.
pub fn server_config(config: &Config) -> Result<Arc<ServerConfig>, String> {
    let (cert, key_file) = (config.get("tls-cert-file"), config.get("tls-key-file"));
    if cert.is_empty() || key_file.is_empty() {
        return Err("tls-cert-file and tls-key-file are both needed for TLS".into());
    }
    let mut provider = provider();
    provider.cipher_suites = suites(config, &provider.cipher_suites)?;
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(config)?)
        .map_err(|e| format!("TLS: {e}"))?;
    let verifier = match config.get("tls-auth-clients") {
        "no" => WebPkiClientVerifier::no_client_auth(),
        mode => {
            let roots = roots(config)?;
            if roots.is_empty() {
                return Err(
                    "tls-auth-clients needs the CA of client certificates: set tls-ca-cert-file or tls-ca-cert-dir \
                            (or tls-auth-clients no)"
                        .into(),
                );
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let b = if mode == "optional" { b.allow_unauthenticated() } else { b };
            b.build().map_err(|e| format!("TLS client verification: {e}"))?
        }
    };
    let mut server = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(cert)?, key(key_file, config.get("tls-key-file-pass"))?)
        .map_err(|e| format!("TLS certificate and key: {e}"))?;
    if config.get("tls-session-caching") == "no" {
        server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
    } else {
        let size = usize::try_from(config.get_i64("tls-session-cache-size")).unwrap_or(20480).max(1);
        server.session_storage = rustls::server::ServerSessionMemoryCache::new(size);
    }
    server.ignore_client_order = config.get("tls-prefer-server-ciphers") == "yes";
    Ok(Arc::new(server))
}

/// The configuration a replica connects to a TLS primary with: the primary's certificate
/// must chain to `tls-ca-cert-file`/`-dir`; the replica shows `tls-client-cert-file` (or
/// `tls-cert-file`) if set.
pub fn client_config(config: &Config) -> Result<Arc<ClientConfig>, String> {
    let mut provider = provider();
    provider.cipher_suites = suites(config, &provider.cipher_suites)?;
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions(config)?)
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(config)?);
    let (cert, key_file, pass) = if config.get("tls-client-cert-file").is_empty() {
        (config.get("tls-cert-file"), config.get("tls-key-file"), config.get("tls-key-file-pass"))
    } else {
        (config.get("tls-client-cert-file"), config.get("tls-client-key-file"), config.get("tls-client-key-file-pass"))
    };
    let client = if cert.is_empty() || key_file.is_empty() {
        builder.with_no_client_auth()
    } else {
        builder
            .with_client_auth_cert(certs(cert)?, key(key_file, pass)?)
            .map_err(|e| format!("TLS client certificate: {e}"))?
    };
    Ok(Arc::new(client))
}

/// The name a primary at `host` is checked against (an IP address or a DNS name).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_owned()).map_err(|e| format!("TLS: '{host}' is no valid server name: {e}"))
}

/// One DER element: its tag, its content, and what follows it.
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = rest.get(..n)?;
        (bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b)), rest.get(n..)?)
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

/// The subject's common name (OID 2.5.4.3) of an X.509 certificate in DER, if it has one
/// (`tls-auth-clients-user CN`).
pub fn common_name(cert: &[u8]) -> Option<String> {
    let (0x30, cert, _) = der(cert)? else { return None };
    let (0x30, tbs, _) = der(cert)? else { return None };
    let mut p = tbs;
    let (tag, _, rest) = der(p)?;
    if tag == 0xa0 {
        p = rest; // the explicit version
    }
    // Serial, signature algorithm, issuer, validity, then the subject.
    for expected in [0x02, 0x30, 0x30, 0x30] {
        let (tag, _, rest) = der(p)?;
        if tag != expected {
            return None;
        }
        p = rest;
    }
    let (0x30, mut names, _) = der(p)? else { return None };
    while !names.is_empty() {
        let (0x31, mut set, rest) = der(names)? else { return None };
        names = rest;
        while !set.is_empty() {
            let (0x30, attr, rest) = der(set)? else { return None };
            set = rest;
            let (0x06, oid, value) = der(attr)? else { return None };
            if oid == [0x55, 0x04, 0x03] {
                let (_, text, _) = der(value)?;
                return String::from_utf8(text.to_vec()).ok();
            }
        }
    }
    None
}
