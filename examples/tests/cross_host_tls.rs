//! TLS and access control between simulated hosts, through Zenoh's configuration only:
//! certificates are generated here (a trusted CA for hosts a and b, a rogue CA for host
//! c); links need mutual TLS. Host a's access control forbids host b (by certificate
//! name) the `/secret/**` topics. A second system has a default-deny host a that admits
//! host b by name, a certified host c it does not name, and a host d whose certificate,
//! from the trusted CA, has expired. Needs root and `ip`, as the other cross-host tests.

mod common;

use common::{result, SECOND};
use nerve_bench_harness::child::Child;
use nerve_bench_harness::hosts::{SimHost, SimHosts, ZenohExtra};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::sync::Mutex;

/// One system at a time: each loads both cores with its hosts.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const DOMAIN: &str = "733";

fn start(sim: &SimHosts, host: usize, args: &[&str]) -> Child {
    common::start(sim, host, DOMAIN, args)
}

/// Publishes 50 samples on `topic` from host 0 at 20 Hz, waiting for nobody.
fn publish_50(sim: &SimHosts, topic: &str) -> Child {
    start(
        sim,
        0,
        &[
            "pub",
            "--topic",
            topic,
            "--count",
            "50",
            "--hz",
            "20",
            "--subscribers",
            "0",
        ],
    )
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

/// Writes `cert.pem`, `key.pem` (signed by `issuer`) and `ca.pem` (the CA it trusts)
/// into the host's directory.
fn certify(host: &SimHost, issuer: &Issuer<'_, KeyPair>, trusted_ca: &str) {
    certify_with(host, issuer, trusted_ca, |_| {});
}

/// [`certify`], with the certificate's parameters changed by `adjust` (its validity, say).
fn certify_with(
    host: &SimHost,
    issuer: &Issuer<'_, KeyPair>,
    trusted_ca: &str,
    adjust: impl FnOnce(&mut CertificateParams),
) {
    let mut params = CertificateParams::new(vec![host.ip.clone(), host.name.clone()]).unwrap();
    adjust(&mut params);
    params
        .distinguished_name
        .push(DnType::CommonName, host.name.as_str());
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    std::fs::write(host.dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(host.dir.join("key.pem"), key.serialize_pem()).unwrap();
    std::fs::write(host.dir.join("ca.pem"), trusted_ca).unwrap();
}

/// The mutual-TLS link settings of host `h`.
fn tls_link(h: &SimHost) -> String {
    let f = |n: &str| h.dir.join(n).display().to_string();
    format!(
        "tls: {{ root_ca_certificate: \"{ca}\", listen_private_key: \"{key}\", \
         listen_certificate: \"{cert}\", enable_mtls: true, connect_private_key: \"{key}\", \
         connect_certificate: \"{cert}\" }}",
        ca = f("ca.pem"),
        key = f("key.pem"),
        cert = f("cert.pem"),
    )
}

fn tls_extra(i: usize, h: &SimHost) -> ZenohExtra {
    let link = tls_link(h);
    let top = if i == 0 {
        "access_control: { enabled: true, default_permission: \"allow\", \
         rules: [{ id: \"no_secret\", messages: [\"put\", \"declare_subscriber\", \"query\", \
         \"reply\"], flows: [\"ingress\", \"egress\"], permission: \"deny\", \
         key_exprs: [\"nerve/*/t/secret/**\"] }], \
         subjects: [{ id: \"hostb\", cert_common_names: [\"hostb\"] }], \
         policies: [{ rules: [\"no_secret\"], subjects: [\"hostb\"] }] },"
            .to_string()
    } else {
        String::new()
    };
    ZenohExtra { link, top }
}

/// Host a denies by default and allows host b (by certificate name) everything.
fn default_deny_extra(i: usize, h: &SimHost) -> ZenohExtra {
    let top = if i == 0 {
        "access_control: { enabled: true, default_permission: \"deny\", \
         rules: [{ id: \"all\", messages: [\"put\", \"delete\", \"declare_subscriber\", \
         \"query\", \"reply\", \"declare_queryable\", \"liveliness_token\", \
         \"liveliness_query\", \"declare_liveliness_subscriber\"], \
         flows: [\"ingress\", \"egress\"], permission: \"allow\", key_exprs: [\"**\"] }], \
         subjects: [{ id: \"hostb\", cert_common_names: [\"hostb\"] }], \
         policies: [{ rules: [\"all\"], subjects: [\"hostb\"] }] },"
            .to_string()
    } else {
        String::new()
    };
    ZenohExtra {
        link: tls_link(h),
        top,
    }
}

#[test]
fn tls_admits_certified_hosts_refuses_a_rogue_one_and_access_control_applies() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sim = SimHosts::create_with(3, 2000, "tls", tls_extra).expect("simulated hosts");
    let (good_pem, good) = ca("nerve-test-ca");
    let (_, rogue) = ca("rogue-ca");
    let hosts = sim.hosts();
    certify(&hosts[0], &good, &good_pem);
    certify(&hosts[1], &good, &good_pem);
    certify(&hosts[2], &rogue, &good_pem);

    let sub = |host: usize, topic: &str| {
        start(
            &sim,
            host,
            &["sub", "--topic", topic, "--count", "50", "--seconds", "8"],
        )
    };
    let mut open_b = sub(1, "/open/data");
    let mut secret_b = sub(1, "/secret/data");
    let mut open_c = sub(2, "/open/data");
    let pubs: Vec<Child> = ["/open/data", "/secret/data"]
        .iter()
        .map(|t| publish_50(&sim, t))
        .collect();
    let r = result(&mut open_b, 20 * SECOND);
    assert!(
        r["received"].as_u64().unwrap() >= 40,
        "certified host b: {r}"
    );
    let r = result(&mut secret_b, 20 * SECOND);
    assert_eq!(r["received"], 0, "access control keeps /secret from b: {r}");
    let r = result(&mut open_c, 20 * SECOND);
    assert_eq!(
        r["received"], 0,
        "host c's rogue certificate is refused: {r}"
    );
    drop(pubs);
}

#[test]
fn default_deny_admits_only_named_hosts_and_an_expired_certificate_is_refused() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sim = SimHosts::create_with(4, 2000, "tls", default_deny_extra).expect("simulated hosts");
    let (good_pem, good) = ca("nerve-test-ca");
    let hosts = sim.hosts();
    certify(&hosts[0], &good, &good_pem);
    certify(&hosts[1], &good, &good_pem);
    certify(&hosts[2], &good, &good_pem);
    certify_with(&hosts[3], &good, &good_pem, |p| {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let mut subs: Vec<Child> = (1..4)
        .map(|host| {
            start(
                &sim,
                host,
                &[
                    "sub",
                    "--topic",
                    "/open/data",
                    "--count",
                    "50",
                    "--seconds",
                    "8",
                ],
            )
        })
        .collect();
    let _pub = publish_50(&sim, "/open/data");
    let r = result(&mut subs[0], 20 * SECOND);
    assert!(
        r["received"].as_u64().unwrap() >= 40,
        "host b is named: {r}"
    );
    let r = result(&mut subs[1], 20 * SECOND);
    assert_eq!(
        r["received"], 0,
        "default deny keeps unnamed host c out: {r}"
    );
    let r = result(&mut subs[2], 20 * SECOND);
    assert_eq!(
        r["received"], 0,
        "host d's expired certificate is refused: {r}"
    );
}
