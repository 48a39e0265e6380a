//! Endpoints the access-control policy denies to this host: their network side is a
//! stand-in that sends and receives nothing, and says so.
//!
//! The choice: a denied endpoint is created (its shared-memory route on this host works,
//! as the policy governs the network only) with a warning on stderr naming the rule, and
//! it is listed in this process's `info` answer, so `nerve topic info` shows it denied
//! with the rule. A denied publisher counts the samples it withheld while subscribers on
//! other hosts exist (`withheld`): nothing is sent into the void unseen. A denied client
//! sees no server on other hosts (its calls fail as with none), a denied server and
//! subscriber get nothing from them. It does not fail
//! the declaration: on a host denied one topic, the rest of a node keeps running, as in
//! SROS2 where an enforced denial is a refused endpoint of the network, not a crash.

use super::discovery::EntityKind;
use super::policy::{Action, Denial};
use super::topic::RemoteWatch;
use super::{lock, Plane};
use crate::error::NetError;
use crate::message::header::{CallHeader, SampleHeader};
use crate::message::TypeInfo;
use crate::transport::doorbell::Doorbell;
use crate::transport::intra::{Buf, LocalSample};
use crate::transport::remote::{
    RemoteCall, RemoteClient, RemotePublisher, RemoteRequest, RemoteServer, RemoteSubscriber,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// One endpoint of a process denied by the policy, as `info` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedEndpoint {
    /// publisher, subscriber, server or client.
    pub kind: String,
    /// Topic or service name.
    pub name: String,
    /// The deciding rule's id (`default` for the policy's default).
    pub rule: String,
    /// Where the rule is (`file:line`).
    pub at: String,
    /// Samples a denied publisher did not send while subscribers on other hosts existed.
    #[serde(default)]
    pub withheld: u64,
}

/// A denied endpoint while it lives (the plane keeps a weak reference to report it).
pub(crate) struct Denied {
    domain: u32,
    action: Action,
    name: String,
    denial: Denial,
    withheld: AtomicU64,
}

/// The denied endpoints of a process, while they live.
pub(crate) type DeniedMap = Mutex<Vec<Weak<Denied>>>;

impl Plane {
    /// Checks `action` on `name` against the policy for this host: `None` if allowed (or
    /// no policy); else warns on stderr naming the rule and returns the record that the
    /// endpoint holds while it lives.
    pub(crate) fn denied(&self, domain: u32, action: Action, name: &str) -> Option<Arc<Denied>> {
        let denial = self.policy.as_ref()?.check(&self.host_name, action, name)?;
        eprintln!(
            "nerve: access control: {} of {name} on host {} is denied by policy {denial}; \
             it works on this host only, other hosts neither send to it nor accept from it",
            action.endpoint(),
            self.host_name,
        );
        self.ensure_info(domain);
        let d = Arc::new(Denied {
            domain,
            action,
            name: name.to_string(),
            denial,
            withheld: AtomicU64::new(0),
        });
        let mut all = lock(&self.denied);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&d));
        Some(d)
    }
}

/// The denied endpoints of `domain` still alive, for the `info` answer.
pub(crate) fn report(map: &DeniedMap, domain: u32) -> Vec<DeniedEndpoint> {
    lock(map)
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|d| d.domain == domain)
        .map(|d| DeniedEndpoint {
            kind: d.action.endpoint().to_string(),
            name: d.name.clone(),
            rule: d.denial.rule.clone(),
            at: d.denial.at.clone(),
            // SYNC: a statistic; nothing is published through it.
            withheld: d.withheld.load(Ordering::Relaxed),
        })
        .collect()
}

/// A denied publisher: sends nothing, counts what it withheld from subscribers on other
/// hosts.
pub(crate) struct DeniedPublisher {
    denied: Arc<Denied>,
    subscribers: RemoteWatch,
}

impl DeniedPublisher {
    pub(crate) fn new(
        plane: &Plane,
        domain: u32,
        topic: &str,
        denied: Arc<Denied>,
    ) -> Result<DeniedPublisher, NetError> {
        Ok(DeniedPublisher {
            denied,
            subscribers: RemoteWatch::new(plane, domain, EntityKind::Subscriber, topic)?,
        })
    }

    fn withhold(&self) {
        // SYNC: a statistic; nothing is published through it.
        self.denied.withheld.fetch_add(1, Ordering::Relaxed);
    }
}

impl RemotePublisher for DeniedPublisher {
    /// None reachable: the policy keeps them from this host's samples.
    fn remote_subscribers(&self) -> usize {
        0
    }

    /// While subscribers on other hosts exist, so that what they miss is counted.
    fn wants_frames(&self) -> bool {
        self.subscribers.count() > 0
    }

    fn publish_shared(&self, _: &SampleHeader, _: Buf, _: usize) -> Result<(), NetError> {
        self.withhold();
        Ok(())
    }

    fn publish_copy(&self, _: &SampleHeader, _: &[u8]) -> Result<(), NetError> {
        self.withhold();
        Ok(())
    }
}

/// A denied subscriber, server or client: nothing from or to other hosts.
pub(crate) struct DeniedEndpointSide {
    denied: Arc<Denied>,
}

impl DeniedEndpointSide {
    pub(crate) fn new(denied: Arc<Denied>) -> DeniedEndpointSide {
        DeniedEndpointSide { denied }
    }
}

impl RemoteSubscriber for DeniedEndpointSide {
    fn pop(&self) -> Option<LocalSample> {
        None
    }
    fn is_empty(&self) -> bool {
        true
    }
    fn refused(&self) -> u64 {
        0
    }
}

impl RemoteServer for DeniedEndpointSide {
    fn pop(&self) -> Option<RemoteRequest> {
        None
    }
    fn has_requests(&self) -> bool {
        false
    }
    fn rejected(&self) -> u64 {
        0
    }
}

impl RemoteClient for DeniedEndpointSide {
    fn remote_servers(&self) -> usize {
        0
    }
    fn in_flight(&self) -> usize {
        0
    }
    fn call(
        &self,
        _: &Arc<Doorbell>,
        _: &CallHeader,
        _: &[u8],
        _: &TypeInfo,
        _: usize,
        _: u32,
    ) -> Result<Arc<dyn RemoteCall>, NetError> {
        Err(NetError::Send {
            key: self.denied.name.clone(),
            reason: format!("denied by policy {}", self.denied.denial),
        })
    }
}
