//! ROS 2's nodes on DDS: every participant announces its nodes on `ros_discovery_info`
//! (a node is not a DDS entity), and the bridge announces Nerve's nodes there too, as
//! nodes of its participant, so ROS 2's tools (`get_node_names()`) list them.

use crate::engine::lock;
use ros2_client::entities_info::ParticipantEntitiesInfo;
use rustdds::no_key::DataReader;
use rustdds::{CDRDeserializerAdapter, TopicKind};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a participant is remembered once none of its endpoints is seen (an
/// announcement may come before the participant's endpoints are discovered).
const PARTICIPANT_GRACE: Duration = Duration::from_secs(5);
/// Most participants remembered from `ros_discovery_info`.
const MAX_PARTICIPANTS: usize = 1024;

type InfoReader =
    DataReader<ParticipantEntitiesInfo, CDRDeserializerAdapter<ParticipantEntitiesInfo>>;

/// What participants announced of their nodes, and when their endpoints were last seen.
#[derive(Default)]
struct Announced {
    info: Option<InfoReader>,
    participants: HashMap<ros2_client::Gid, (ParticipantEntitiesInfo, Instant)>,
}

/// ROS 2's nodes as the participants announce them, and the nodes that stand for Nerve's.
pub(crate) struct Nodes {
    announced: Mutex<Announced>,
    mirrored: Mutex<HashMap<String, ros2_client::Node>>,
}

impl Nodes {
    /// Reads `ros_discovery_info` of `participant` (without it, no node names are known).
    pub(crate) fn new(participant: &rustdds::DomainParticipant) -> Nodes {
        let info = participant
            .create_topic(
                ros2_client::builtin_topics::ros_discovery::TOPIC_NAME.to_string(),
                ros2_client::builtin_topics::ros_discovery::TYPE_NAME.to_string(),
                &ros2_client::builtin_topics::ros_discovery::QOS_PUB,
                TopicKind::NoKey,
            )
            .ok()
            .and_then(|t| {
                participant
                    .create_subscriber(&rustdds::QosPolicies::qos_none())
                    .ok()?
                    .create_datareader_no_key::<ParticipantEntitiesInfo, CDRDeserializerAdapter<_>>(
                        &t,
                        // every participant's announcement is one sample of the same
                        // (keyless) instance: keep many, or only the last one survives
                        Some(
                            rustdds::QosPolicyBuilder::new()
                                .reliable(rustdds::Duration::ZERO)
                                .durability(rustdds::policy::Durability::TransientLocal)
                                .history(rustdds::policy::History::KeepLast { depth: 256 })
                                .build(),
                        ),
                    )
                    .ok()
            });
        Nodes {
            announced: Mutex::new(Announced {
                info,
                participants: HashMap::new(),
            }),
            mirrored: Mutex::default(),
        }
    }

    /// The fully qualified names of the nodes of the participants whose GUID prefixes are
    /// in `alive` (those with endpoints in the graph; others are forgotten after a grace).
    pub(crate) fn names(&self, alive: &BTreeSet<Vec<u8>>) -> BTreeSet<String> {
        let mut a = lock(&self.announced);
        let Announced { info, participants } = &mut *a;
        if let Some(r) = info.as_mut() {
            while let Ok(Some(s)) = r.take_next_sample() {
                let info = s.value().clone();
                if participants.len() < MAX_PARTICIPANTS || participants.contains_key(&info.gid()) {
                    participants.insert(info.gid(), (info, Instant::now()));
                }
            }
        }
        let now = Instant::now();
        participants.retain(|gid, (_, seen)| {
            if alive.contains(&gid.as_bytes()[..12]) {
                *seen = now;
            }
            now.duration_since(*seen) < PARTICIPANT_GRACE
        });
        let mut names = BTreeSet::new();
        for (p, _) in participants.values() {
            for n in p.nodes() {
                names.insert(if n.namespace() == "/" {
                    format!("/{}", n.name())
                } else {
                    format!("{}/{}", n.namespace(), n.name())
                });
            }
        }
        names
    }

    /// Makes the ROS 2 nodes that stand for Nerve's nodes `wanted` (full names), and drops
    /// those of nodes gone.
    pub(crate) fn mirror(&self, ros: &ros2_client::Context, wanted: &BTreeSet<String>) {
        let mut mirrored = lock(&self.mirrored);
        mirrored.retain(|n, _| wanted.contains(n));
        for name in wanted {
            if mirrored.contains_key(name) {
                continue;
            }
            let (ns, base) = match name.rsplit_once('/') {
                Some((ns, base)) if !ns.is_empty() => (ns.to_string(), base.to_string()),
                Some((_, base)) => ("/".to_string(), base.to_string()),
                None => ("/".to_string(), name.clone()),
            };
            let Ok(node_name) = ros2_client::NodeName::new(&ns, &base) else {
                continue;
            };
            if let Ok(n) = ros.new_node(
                node_name,
                ros2_client::NodeOptions::new().enable_rosout(false),
            ) {
                mirrored.insert(name.clone(), n);
            }
        }
    }
}
