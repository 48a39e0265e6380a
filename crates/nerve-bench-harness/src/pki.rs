//! Certificates for simulated hosts: a CA, host certificates signed by it (common name
//! and subject names: the host's name and address), a rogue CA for refusal tests, and the
//! files and environment a fleet needs to run under an access-control policy.
//!
//! Files of host `h` (in `h.dir`): `cert.pem`, `key.pem` (its identity) and `ca.pem`
//! (the CA it trusts).

use crate::hosts::{SimHost, SimHosts};
use crate::PeerError;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::PathBuf;

fn err(e: impl std::fmt::Display) -> PeerError {
    PeerError::setup("pki", e)
}

/// A certificate authority.
pub struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A new self-signed CA with common name `name`.
    pub fn new(name: &str) -> Result<Ca, PeerError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA's certificate (PEM).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Writes `cert.pem` and `key.pem` of `host` (common name: the host's name), signed
    /// by this CA, and `ca.pem`: `trusted`, the CA the host trusts.
    pub fn certify(&self, host: &SimHost, trusted: &Ca) -> Result<(), PeerError> {
        self.certify_with(host, trusted, |_| {})
    }

    /// [`Ca::certify`], with the certificate's parameters changed by `adjust` (its
    /// validity, say).
    pub fn certify_with(
        &self,
        host: &SimHost,
        trusted: &Ca,
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Result<(), PeerError> {
        let mut params =
            CertificateParams::new(vec![host.ip.clone(), host.name.clone()]).map_err(err)?;
        adjust(&mut params);
        params
            .distinguished_name
            .push(DnType::CommonName, host.name.as_str());
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        let write = |name: &str, text: &str| {
            std::fs::write(host.dir.join(name), text)
                .map_err(|e| err(format!("{}: {e}", host.dir.join(name).display())))
        };
        write("cert.pem", &cert.pem())?;
        write("key.pem", &key.serialize_pem())?;
        write("ca.pem", &trusted.pem)
    }
}

/// The mutual-TLS link settings of `host` over its files (the text of
/// [`crate::hosts::ZenohExtra::link`]), for a Zenoh configuration that sets TLS itself
/// (a run without a policy, or a policy without `[tls]`).
pub fn tls_link(host: &SimHost) -> String {
    let f = |n: &str| host.dir.join(n).display().to_string();
    format!(
        "tls: {{ root_ca_certificate: \"{ca}\", listen_private_key: \"{key}\", \
         listen_certificate: \"{cert}\", enable_mtls: true, connect_private_key: \"{key}\", \
         connect_certificate: \"{cert}\" }}",
        ca = f("ca.pem"),
        key = f("key.pem"),
        cert = f("cert.pem"),
    )
}

/// The `[tls]` table of a policy file written by [`certify_fleet`]: the files
/// [`Ca::certify`] writes, relative to the policy (which lies beside the hosts'
/// directories).
pub const POLICY_TLS: &str =
    "[tls]\nca = \"{host}/ca.pem\"\ncert = \"{host}/cert.pem\"\nkey = \"{host}/key.pem\"\n";

/// A fleet certified by one CA, with its policy.
pub struct Fleet {
    /// The CA every host trusts and is certified by.
    pub ca: Ca,
    /// The policy file, if one was written.
    pub policy: Option<PathBuf>,
    /// Per host (in [`SimHosts::hosts`] order): the environment a process on it needs
    /// besides [`SimHosts::spawn`]'s own (`NERVE_POLICY`; empty without a policy).
    pub env: Vec<Vec<(&'static str, String)>>,
}

/// Certifies every host of `sim` with one new CA and, given policy text (TOML), writes
/// it as `policy.toml` beside the hosts' directories and names it in each host's
/// environment.
///
/// Contract: `sim` was created with proto `"tls"`. With a policy that holds
/// [`POLICY_TLS`] (append it to the rules), the policy adds mutual TLS itself and the
/// hosts need no [`crate::hosts::ZenohExtra`] (create them with `ZenohExtra::default()`);
/// without one (policy `None`, or a policy without `[tls]`), create the hosts with
/// `ZenohExtra { link: pki::tls_link(h), .. }`, whose files this writes. Hosts are
/// certified by name (the certificate's common name is [`SimHost::name`], which is also
/// the `NERVE_HOST_NAME` the plane checks the policy for). Run a process on host `i`
/// with `sim.spawn(i, exe, args, &fleet.env[i], …)`. Fails on a file that cannot be
/// written; the policy's own errors show when a process opens the plane (check it with
/// `nerve::net::policy::Policy::parse` first to fail early).
pub fn certify_fleet(sim: &SimHosts, policy: Option<&str>) -> Result<Fleet, PeerError> {
    let ca = Ca::new("nerve-sim-ca")?;
    for h in sim.hosts() {
        ca.certify(h, &ca)?;
    }
    let path = match policy {
        Some(text) => {
            let path = sim.dir().join("policy.toml");
            std::fs::write(&path, text).map_err(|e| err(format!("{}: {e}", path.display())))?;
            Some(path)
        }
        None => None,
    };
    let env = sim
        .hosts()
        .iter()
        .map(|_| match &path {
            Some(p) => vec![("NERVE_POLICY", p.display().to_string())],
            None => Vec::new(),
        })
        .collect();
    Ok(Fleet {
        ca,
        policy: path,
        env,
    })
}
