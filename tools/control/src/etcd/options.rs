//! The etcd options `nlbctl publish|fleet` and `nlbd --etcd` share: endpoints, TLS files and
//! etcd's user, read into [`Settings`] with errors that name the option, the file and what
//! would be valid.

use super::{Credentials, Endpoint, Settings, REQUEST_TIMEOUT};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The environment variable holding `--etcd-user`'s password when no
/// `--etcd-password-file` is given.
pub const PASSWORD_ENV: &str = "NLB_ETCD_PASSWORD";

/// How to reach etcd securely: TLS and etcd's own authentication.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EtcdArgs {
    /// etcd over TLS: the CA certificates (PEM) that signed etcd's server certificate. With
    /// it, HOST:PORT endpoints are https://.
    #[arg(long, value_name = "FILE", requires = "etcd")]
    pub etcd_cacert: Option<PathBuf>,
    /// A client certificate (PEM: the certificate, then its chain) for an etcd started with
    /// --client-cert-auth; with --etcd-key and --etcd-cacert.
    #[arg(long, value_name = "FILE", requires_all = ["etcd_key", "etcd_cacert"])]
    pub etcd_cert: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1) of --etcd-cert.
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd's authentication: the user to authenticate as. Its password is read from
    /// --etcd-password-file, or else from the environment variable NLB_ETCD_PASSWORD (never
    /// from the command line).
    #[arg(long, value_name = "NAME", requires = "etcd")]
    pub etcd_user: Option<String>,
    /// The file holding --etcd-user's password (its first line).
    #[arg(long, value_name = "FILE", requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
}

impl EtcdArgs {
    /// The settings for `endpoints` (`--etcd`), the password of `--etcd-user` taken from
    /// [`PASSWORD_ENV`] when no file is given.
    pub fn settings(&self, endpoints: &str) -> Result<Settings, String> {
        self.settings_with(endpoints, std::env::var(PASSWORD_ENV).ok())
    }

    /// [`EtcdArgs::settings`] with the environment's password given.
    pub fn settings_with(
        &self,
        endpoints: &str,
        env_password: Option<String>,
    ) -> Result<Settings, String> {
        let endpoints = parse_endpoints(endpoints, self.etcd_cacert.is_some())?;
        let tls = match &self.etcd_cacert {
            None => None,
            Some(ca) => {
                let client = match (&self.etcd_cert, &self.etcd_key) {
                    (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
                    (None, None) => None,
                    _ => {
                        return Err(
                            "--etcd-cert and --etcd-key go together (valid: both, or neither)"
                                .into(),
                        )
                    }
                };
                Some(Arc::new(tls_config(ca, client)?))
            }
        };
        if tls.is_none() && (self.etcd_cert.is_some() || self.etcd_key.is_some()) {
            return Err(
                "--etcd-cert needs --etcd-cacert (the CA that signed etcd's certificate)".into(),
            );
        }
        let credentials = match &self.etcd_user {
            None => None,
            Some(user) => {
                if user.is_empty() || user.chars().any(char::is_control) {
                    return Err(format!(
                        "--etcd-user {user:?} is not a user name (valid: a non-empty name)"
                    ));
                }
                let password = match (&self.etcd_password_file, env_password) {
                    (Some(file), _) => read_password(file)?,
                    (None, Some(p)) if !p.is_empty() => p,
                    (None, _) => {
                        return Err(format!(
                            "--etcd-user {user}: no password (valid: --etcd-password-file FILE, or the environment variable {PASSWORD_ENV})"
                        ))
                    }
                };
                Some(Credentials::new(user.clone(), password))
            }
        };
        Ok(Settings {
            endpoints,
            tls,
            credentials,
            timeout: REQUEST_TIMEOUT,
        })
    }
}

/// `--etcd`: comma-separated `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`; `HOST:PORT`
/// is https with TLS (`--etcd-cacert`), else http.
pub fn parse_endpoints(list: &str, tls: bool) -> Result<Vec<Endpoint>, String> {
    let valid = if tls {
        "HOST:PORT or https://HOST:PORT, comma-separated, such as 127.0.0.1:2379"
    } else {
        "HOST:PORT or http://HOST:PORT, comma-separated, such as 127.0.0.1:2379; https://HOST:PORT with --etcd-cacert"
    };
    let mut out = Vec::new();
    for e in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (scheme_tls, rest) = if let Some(r) = e.strip_prefix("https://") {
            (Some(true), r)
        } else if let Some(r) = e.strip_prefix("http://") {
            (Some(false), r)
        } else {
            (None, e)
        };
        match (scheme_tls, tls) {
            (Some(true), false) => {
                return Err(format!(
                    "--etcd `{e}`: an https endpoint needs --etcd-cacert FILE (the CA that signed etcd's certificate)"
                ))
            }
            (Some(false), true) => {
                return Err(format!(
                    "--etcd `{e}`: --etcd-cacert makes the connection TLS (valid: {valid})"
                ))
            }
            _ => {}
        }
        let parsed = rest.rsplit_once(':').and_then(|(host, port)| {
            let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
            let host_ok = !host.is_empty()
                && !host.contains(['/', '@', ' ', '?', '#'])
                && (host.starts_with('[') == host.ends_with(']'))
                && (host.starts_with('[') || !host.contains(':'));
            host_ok.then(|| (host.to_string(), port))
        });
        let Some((host, port)) = parsed else {
            return Err(format!("--etcd `{e}` is not an endpoint (valid: {valid})"));
        };
        out.push(Endpoint { tls, host, port });
    }
    if out.is_empty() {
        return Err(format!("--etcd: no endpoint given (valid: {valid})"));
    }
    Ok(out)
}

fn read_file(option: &str, file: &Path, valid: &str) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| {
        format!(
            "{option} {}: cannot read it: {e} (valid: {valid})",
            file.display()
        )
    })
}

/// The TLS configuration: `cacert`'s CAs to check etcd's certificate, and a client
/// certificate and key when given.
pub fn tls_config(
    cacert: &Path,
    client: Option<(&Path, &Path)>,
) -> Result<rustls::ClientConfig, String> {
    const CA_VALID: &str = "a PEM file of the CA certificates that signed etcd's certificate";
    let pem = read_file("--etcd-cacert", cacert, CA_VALID)?;
    let mut roots = rustls::RootCertStore::empty();
    for (n, cert) in CertificateDer::pem_slice_iter(&pem).enumerate() {
        let cert = cert.map_err(|e| {
            format!(
                "--etcd-cacert {}: certificate {} is not readable PEM: {e} (valid: {CA_VALID})",
                cacert.display(),
                n + 1
            )
        })?;
        roots.add(cert).map_err(|e| {
            format!(
                "--etcd-cacert {}: certificate {} is not a CA certificate TLS can use: {e} (valid: {CA_VALID})",
                cacert.display(),
                n + 1
            )
        })?;
    }
    if roots.is_empty() {
        return Err(format!(
            "--etcd-cacert {}: no certificate in it (valid: {CA_VALID}, each a BEGIN CERTIFICATE block)",
            cacert.display()
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots);
    let Some((cert_file, key_file)) = client else {
        return Ok(builder.with_no_client_auth());
    };
    const CERT_VALID: &str =
        "a PEM file with the client certificate (BEGIN CERTIFICATE), then its chain";
    let pem = read_file("--etcd-cert", cert_file, CERT_VALID)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "--etcd-cert {}: not readable PEM: {e} (valid: {CERT_VALID})",
                cert_file.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "--etcd-cert {}: no certificate in it (valid: {CERT_VALID})",
            cert_file.display()
        ));
    }
    const KEY_VALID: &str =
        "a PEM file with one private key: BEGIN PRIVATE KEY (PKCS#8), BEGIN RSA PRIVATE KEY or BEGIN EC PRIVATE KEY";
    let pem = read_file("--etcd-key", key_file, KEY_VALID)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => "no private key in it".to_string(),
            e => format!("not readable PEM: {e}"),
        };
        format!(
            "--etcd-key {}: {why} (valid: {KEY_VALID})",
            key_file.display()
        )
    })?;
    builder.with_client_auth_cert(certs, key).map_err(|e| {
        format!(
            "--etcd-cert {} with --etcd-key {}: {e} (valid: the certificate and its own private key)",
            cert_file.display(),
            key_file.display()
        )
    })
}

/// The password in `file`: its first line, without the line end.
fn read_password(file: &Path) -> Result<String, String> {
    const VALID: &str = "a file whose first line is --etcd-user's password";
    let bytes = read_file("--etcd-password-file", file, VALID)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "--etcd-password-file {}: not UTF-8 text (valid: {VALID})",
            file.display()
        )
    })?;
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        return Err(format!(
            "--etcd-password-file {}: its first line is empty (valid: {VALID})",
            file.display()
        ));
    }
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_follow_the_tls_option() {
        let urls = |list: &str, tls: bool| -> Vec<String> {
            parse_endpoints(list, tls)
                .unwrap()
                .iter()
                .map(Endpoint::to_string)
                .collect()
        };
        assert_eq!(
            urls("127.0.0.1:2379, http://e2:2380,[::1]:5", false),
            ["http://127.0.0.1:2379", "http://e2:2380", "http://[::1]:5"]
        );
        assert_eq!(
            urls("e1:2379,https://e2:2379", true),
            ["https://e1:2379", "https://e2:2379"]
        );
        for bad in [
            "",
            "127.0.0.1",
            "h:0",
            "h:70000",
            "h:1/x",
            ":5",
            "::1:5",
            "u@h:1",
        ] {
            assert!(parse_endpoints(bad, false).is_err(), "{bad}");
        }
        let e = parse_endpoints("https://h:1", false).unwrap_err();
        assert!(e.contains("--etcd-cacert"), "{e}");
        let e = parse_endpoints("http://h:1", true).unwrap_err();
        assert!(e.contains("makes the connection TLS"), "{e}");
    }

    #[test]
    fn a_user_needs_a_password_from_a_file_or_the_environment() {
        let dir = std::env::temp_dir().join(format!("nlb-etcd-options-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = EtcdArgs {
            etcd_user: Some("nlb".into()),
            ..EtcdArgs::default()
        };
        let e = args.settings_with("h:1", None).unwrap_err();
        assert!(
            e.contains("NLB_ETCD_PASSWORD") && e.contains("--etcd-password-file"),
            "{e}"
        );
        let s = args.settings_with("h:1", Some("from-env".into())).unwrap();
        assert_eq!(
            s.credentials.as_ref().map(|c| c.password.as_str()),
            Some("from-env")
        );
        // Debug output never shows it.
        assert!(!format!("{s:?}").contains("from-env"));
        let file = dir.join("pw");
        std::fs::write(&file, "s3cret \nsecond line\n").unwrap();
        args.etcd_password_file = Some(file.clone());
        let s = args.settings_with("h:1", Some("from-env".into())).unwrap();
        assert_eq!(
            s.credentials.map(|c| c.password),
            Some("s3cret ".to_string())
        );
        std::fs::write(&file, "\n").unwrap();
        let e = args.settings_with("h:1", None).unwrap_err();
        assert!(
            e.contains(&file.display().to_string()) && e.contains("empty"),
            "{e}"
        );
        args.etcd_password_file = Some(dir.join("missing"));
        let e = args.settings_with("h:1", None).unwrap_err();
        assert!(e.contains("missing: cannot read it"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_files_that_hold_the_wrong_thing_are_named() {
        let dir = std::env::temp_dir().join(format!("nlb-etcd-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let args = EtcdArgs {
            etcd_cacert: Some(empty.clone()),
            ..EtcdArgs::default()
        };
        let e = args.settings_with("h:1", None).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "--etcd-cacert {}: no certificate",
                empty.display()
            )),
            "{e}"
        );
        let args = EtcdArgs {
            etcd_cacert: Some(dir.join("nope.pem")),
            ..EtcdArgs::default()
        };
        let e = args.settings_with("h:1", None).unwrap_err();
        assert!(
            e.contains("nope.pem: cannot read it") && e.contains("valid: a PEM file"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
