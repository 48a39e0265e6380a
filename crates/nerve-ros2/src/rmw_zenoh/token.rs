//! The liveliness tokens rmw_zenoh declares for every node, publisher, subscription,
//! service and client (its graph):
//!
//! ```text
//! @ros2_lv/<domain>/<zid>/<nid>/<nid>/NN/<enclave>/<namespace>/<node>
//! @ros2_lv/<domain>/<zid>/<nid>/<eid>/<MP|MS|SS|SC>/<enclave>/<namespace>/<node>/<name>/<type>/<hash>/<qos>
//! ```
//!
//! with `/` in names written `%` (so the root namespace and the default enclave are
//! `%`), the type in its DDS form and the QoS as in [`super::qos`].

use super::attachment::Gid;
use super::names::{
    bounded, dds_type_name, demangle, fq_name, mangle, namespace, node_name, parse_decimal,
    ros_type_name, DataKey, FormatError, TokenPart, TypeHash, MAX_NAME_LEN,
};
use super::qos::Qos;
use std::fmt;

/// The admin space of rmw_zenoh's liveliness tokens.
pub const ADMIN_SPACE: &str = "@ros2_lv";

/// The longest token accepted (input from the network is bounded).
pub const MAX_TOKEN_LEN: usize = 8 * MAX_NAME_LEN;

/// The key expression that matches every token of `domain` (what a graph follows).
pub fn graph_key_expr(domain: u32) -> String {
    format!("{ADMIN_SPACE}/{domain}/**")
}

/// What a token stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    /// `NN`: a node.
    Node,
    /// `MP`: a message publisher.
    Publisher,
    /// `MS`: a message subscription.
    Subscription,
    /// `SS`: a service server.
    ServiceServer,
    /// `SC`: a service client.
    ServiceClient,
}

impl EntityKind {
    /// The chunk rmw_zenoh writes.
    pub fn code(self) -> &'static str {
        match self {
            EntityKind::Node => "NN",
            EntityKind::Publisher => "MP",
            EntityKind::Subscription => "MS",
            EntityKind::ServiceServer => "SS",
            EntityKind::ServiceClient => "SC",
        }
    }

    /// The kind written `code`.
    pub fn from_code(code: &str) -> Option<EntityKind> {
        Some(match code {
            "NN" => EntityKind::Node,
            "MP" => EntityKind::Publisher,
            "MS" => EntityKind::Subscription,
            "SS" => EntityKind::ServiceServer,
            "SC" => EntityKind::ServiceClient,
            _ => return None,
        })
    }

    /// How many chunks a token of this kind has.
    pub fn chunks(self) -> usize {
        if self == EntityKind::Node {
            9
        } else {
            13
        }
    }
}

impl fmt::Display for EntityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The topic or service of a publisher, subscription, service or client token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicInfo {
    /// The fully qualified topic or service name (`/chatter`).
    pub name: String,
    /// The ROS 2 type name (`std_msgs/msg/String`).
    pub ros_type: String,
    /// The type hash.
    pub type_hash: TypeHash,
    /// The QoS.
    pub qos: Qos,
}

/// One liveliness token of rmw_zenoh, its chunks read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntityToken {
    /// The ROS domain id.
    pub domain: u32,
    /// The Zenoh session id (lowercase hex, as `ZenohId` displays).
    pub zid: String,
    /// The node's id within its session.
    pub node_id: u64,
    /// The entity's id within its session (the node id for a node).
    pub entity_id: u64,
    /// What it stands for.
    pub kind: EntityKind,
    /// The SROS enclave (`/` when none).
    pub enclave: String,
    /// The node's namespace (`/` for the root).
    pub namespace: String,
    /// The node's name.
    pub node_name: String,
    /// The topic or service; `None` exactly for a node.
    pub topic: Option<TopicInfo>,
}

impl EntityToken {
    /// The token of a node.
    pub fn node(
        domain: u32,
        zid: &str,
        node_id: u64,
        namespace_: &str,
        node: &str,
    ) -> Result<EntityToken, FormatError> {
        Ok(EntityToken {
            domain,
            zid: check_zid(zid).map_err(|reason| FormatError::Name {
                what: "session id",
                value: bounded(zid),
                reason,
            })?,
            node_id,
            entity_id: node_id,
            kind: EntityKind::Node,
            enclave: "/".to_owned(),
            namespace: namespace("namespace", namespace_)?,
            node_name: node_name(node)?,
            topic: None,
        })
    }

    /// The token of a publisher, subscription, service or client `entity_id` of `node`
    /// (a node token) on `topic` (fully qualified, or relative to `/`) of ROS 2 type
    /// `ros_type` (`std_msgs/msg/String`) and hash `type_hash`.
    pub fn endpoint(
        node: &EntityToken,
        kind: EntityKind,
        entity_id: u64,
        topic: &str,
        ros_type: &str,
        type_hash: &str,
        qos: Qos,
    ) -> Result<EntityToken, FormatError> {
        if kind == EntityKind::Node {
            return Err(FormatError::Token {
                key: node.key_expr(),
                part: TokenPart::EntityKind,
                reason: "NN is a node, not a publisher, subscription, service or client".to_owned(),
            });
        }
        let key = DataKey::new(node.domain, topic, ros_type, type_hash)?;
        Ok(EntityToken {
            entity_id,
            kind,
            topic: Some(TopicInfo {
                name: key.name,
                ros_type: key.ros_type,
                type_hash: key.type_hash,
                qos,
            }),
            ..node.clone()
        })
    }

    /// The data key expression of its topic or service (`None` for a node).
    pub fn data_key(&self) -> Option<DataKey> {
        self.topic.as_ref().map(|t| DataKey {
            domain: self.domain,
            name: t.name.clone(),
            ros_type: t.ros_type.clone(),
            type_hash: t.type_hash,
        })
    }

    /// The key expression of the token.
    pub fn key_expr(&self) -> String {
        self.to_string()
    }

    /// The GID rmw_zenoh gives this entity (the hash of [`EntityToken::key_expr`]).
    pub fn gid(&self) -> Gid {
        Gid::from_token_key(&self.key_expr())
    }

    /// Reads a token's key expression; every chunk is checked and the first malformed one
    /// named.
    pub fn parse(key: &str) -> Result<EntityToken, FormatError> {
        if key.len() > MAX_TOKEN_LEN {
            return Err(FormatError::TooLong {
                what: "liveliness token",
                len: key.len(),
                max: MAX_TOKEN_LEN,
            });
        }
        let c: Vec<&str> = key.split('/').collect();
        if c.first() != Some(&ADMIN_SPACE) {
            return Err(FormatError::NotAToken { key: bounded(key) });
        }
        let kind_chunk = c.get(5).copied().unwrap_or("?");
        let kind = EntityKind::from_code(kind_chunk);
        let expected = kind.map_or(13, EntityKind::chunks);
        if c.len() != expected && !(kind.is_none() && c.len() >= 6) {
            return Err(FormatError::TokenChunks {
                key: key.to_owned(),
                kind: kind_chunk.to_owned(),
                found: c.len(),
                expected,
            });
        }
        let part = |part: TokenPart, reason: String| FormatError::Token {
            key: key.to_owned(),
            part,
            reason,
        };
        let chunk = |i: usize, p: TokenPart| -> Result<&str, FormatError> {
            match c.get(i) {
                Some(s) if !s.is_empty() => Ok(s),
                _ => Err(part(p, "empty".to_owned())),
            }
        };
        let domain = parse_decimal("domain id", chunk(1, TokenPart::DomainId)?)
            .map_err(|e| part(TokenPart::DomainId, e.to_string()))?;
        let zid = chunk(2, TokenPart::SessionId)?;
        check_zid(zid).map_err(|r| part(TokenPart::SessionId, r.to_owned()))?;
        let node_id = parse_decimal("node id", chunk(3, TokenPart::NodeId)?)
            .map_err(|e| part(TokenPart::NodeId, e.to_string()))?;
        let entity_id = parse_decimal("entity id", chunk(4, TokenPart::EntityId)?)
            .map_err(|e| part(TokenPart::EntityId, e.to_string()))?;
        let kind = kind.ok_or_else(|| {
            part(
                TokenPart::EntityKind,
                format!("{kind_chunk:?} is none of NN, MP, MS, SS, SC"),
            )
        })?;
        let enclave = namespace("enclave", &demangle(chunk(6, TokenPart::Enclave)?))
            .map_err(|e| part(TokenPart::Enclave, e.to_string()))?;
        let ns = namespace("namespace", &demangle(chunk(7, TokenPart::Namespace)?))
            .map_err(|e| part(TokenPart::Namespace, e.to_string()))?;
        let node = node_name(chunk(8, TokenPart::NodeName)?)
            .map_err(|e| part(TokenPart::NodeName, e.to_string()))?;
        let topic = if kind == EntityKind::Node {
            None
        } else {
            let raw_name = demangle(chunk(9, TokenPart::TopicName)?);
            if !raw_name.starts_with('/') {
                return Err(part(
                    TokenPart::TopicName,
                    format!("{raw_name:?} is not fully qualified"),
                ));
            }
            let name = fq_name("topic or service name", &raw_name)
                .map_err(|e| part(TokenPart::TopicName, e.to_string()))?;
            let ros_type = ros_type_name(chunk(10, TokenPart::TypeName)?)
                .map_err(|e| part(TokenPart::TypeName, e.to_string()))?;
            let type_hash = TypeHash::parse(chunk(11, TokenPart::TypeHash)?)
                .map_err(|e| part(TokenPart::TypeHash, e.to_string()))?;
            let qos = Qos::parse(chunk(12, TokenPart::Qos)?)
                .map_err(|e| part(TokenPart::Qos, e.to_string()))?;
            Some(TopicInfo {
                name,
                ros_type,
                type_hash,
                qos,
            })
        };
        Ok(EntityToken {
            domain,
            zid: zid.to_owned(),
            node_id,
            entity_id,
            kind,
            enclave,
            namespace: ns,
            node_name: node,
            topic,
        })
    }
}

impl fmt::Display for EntityToken {
    /// The key expression of the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{ADMIN_SPACE}/{}/{}/{}/{}/{}/{}/{}/{}",
            self.domain,
            self.zid,
            self.node_id,
            self.entity_id,
            self.kind,
            mangle(&self.enclave),
            mangle(&self.namespace),
            mangle(&self.node_name),
        )?;
        if let Some(t) = &self.topic {
            let dds = dds_type_name(&t.ros_type).unwrap_or_else(|_| t.ros_type.clone());
            write!(
                f,
                "/{}/{}/{}/{}",
                mangle(&t.name),
                mangle(&dds),
                t.type_hash,
                t.qos
            )?;
        }
        Ok(())
    }
}

/// A Zenoh session id as `ZenohId` displays it: 1 to 32 lowercase hex digits.
fn check_zid(zid: &str) -> Result<String, &'static str> {
    if zid.is_empty() || zid.len() > 32 {
        return Err("a Zenoh id has 1 to 32 hex digits");
    }
    if !zid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err("a Zenoh id is written in lowercase hex");
    }
    Ok(zid.to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::names::TYPE_HASH_NOT_SUPPORTED;
    use super::super::qos::Durability;
    use super::*;

    const STRING_HASH: &str =
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    const ADD_TWO_INTS_HASH: &str =
        "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

    fn real_token() -> String {
        std::fs::read_to_string("/work/shared/ros2/rmw_zenoh/liveliness-token-real-humble.txt")
            .expect("liveliness-token-real-humble.txt")
            .trim()
            .to_owned()
    }

    /// liveliness-token-real-humble.txt: every chunk read, then the same bytes built.
    #[test]
    fn real_humble_publisher_token_both_ways() {
        let key = real_token();
        let t = EntityToken::parse(&key).unwrap();
        assert_eq!(t.domain, 0);
        assert_eq!(t.zid, "9ca0f8facf84ffb1e6bfa4f2500889f0");
        assert_eq!((t.node_id, t.entity_id), (0, 3));
        assert_eq!(t.kind, EntityKind::Publisher);
        assert_eq!(t.enclave, "/");
        assert_eq!(t.namespace, "/");
        assert_eq!(t.node_name, "_ros2cli_712");
        let topic = t.topic.as_ref().unwrap();
        assert_eq!(topic.name, "/chatter");
        assert_eq!(topic.ros_type, "std_msgs/msg/String");
        assert_eq!(topic.type_hash, TypeHash::NotSupported);
        assert_eq!(topic.qos.durability, Durability::TransientLocal);
        assert_eq!(topic.qos.depth, 1);
        assert_eq!(t.key_expr(), key);
        // built from parts (as the bridge would), the same bytes
        let node = EntityToken::node(
            0,
            "9ca0f8facf84ffb1e6bfa4f2500889f0",
            0,
            "/",
            "_ros2cli_712",
        )
        .unwrap();
        let built = EntityToken::endpoint(
            &node,
            EntityKind::Publisher,
            3,
            "/chatter",
            "std_msgs/msg/String",
            TYPE_HASH_NOT_SUPPORTED,
            topic.qos,
        )
        .unwrap();
        assert_eq!(built.key_expr(), key);
        // and its data key is the one in data-keys.txt
        assert_eq!(
            built.data_key().unwrap().key_expr(),
            "0/chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported"
        );
    }

    /// docs/design.md's examples, byte for byte both ways.
    #[test]
    fn design_md_examples_both_ways() {
        let node = "@ros2_lv/2/aac3178e146ba6f1fc6e6a4085e77f21/0/0/NN/%/%/listener";
        let t = EntityToken::parse(node).unwrap();
        assert_eq!(
            t,
            EntityToken::node(2, "aac3178e146ba6f1fc6e6a4085e77f21", 0, "", "listener").unwrap()
        );
        assert_eq!(t.key_expr(), node);
        let cases = [
            (format!("@ros2_lv/2/aac3178e146ba6f1fc6e6a4085e77f21/0/10/MS/%/%/listener/%chatter/std_msgs::msg::dds_::String_/{STRING_HASH}/::,10:,:,:,,"),
             "aac3178e146ba6f1fc6e6a4085e77f21", "listener", EntityKind::Subscription, "/chatter", "std_msgs/msg/String", STRING_HASH, 10),
            (format!("@ros2_lv/2/8b20917502ee955ac4476e0266340d5c/0/10/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/{STRING_HASH}/::,7:,:,:,,"),
             "8b20917502ee955ac4476e0266340d5c", "talker", EntityKind::Publisher, "/chatter", "std_msgs/msg/String", STRING_HASH, 7),
            (format!("@ros2_lv/2/f9980ee0495eaafb3e38f0d19e2eae12/0/10/SS/%/%/add_two_ints_server/%add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}/::,10:,:,:,,"),
             "f9980ee0495eaafb3e38f0d19e2eae12", "add_two_ints_server", EntityKind::ServiceServer, "/add_two_ints", "example_interfaces/srv/AddTwoInts", ADD_TWO_INTS_HASH, 10),
            (format!("@ros2_lv/2/e1dc8d1b45ae8717fce78689cc655685/0/10/SC/%/%/add_two_ints_client/%add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/{ADD_TWO_INTS_HASH}/::,10:,:,:,,"),
             "e1dc8d1b45ae8717fce78689cc655685", "add_two_ints_client", EntityKind::ServiceClient, "/add_two_ints", "example_interfaces/srv/AddTwoInts", ADD_TWO_INTS_HASH, 10),
        ];
        for (key, zid, node_name, kind, topic, ty, hash, depth) in cases {
            let node = EntityToken::node(2, zid, 0, "/", node_name).unwrap();
            let built =
                EntityToken::endpoint(&node, kind, 10, topic, ty, hash, Qos::keep_last(depth))
                    .unwrap();
            assert_eq!(built.key_expr(), key);
            assert_eq!(EntityToken::parse(&key).unwrap(), built);
        }
    }

    #[test]
    fn namespaced_names_are_mangled() {
        let node = EntityToken::node(7, "ab", 1, "/robot/arm", "driver").unwrap();
        let t = EntityToken::endpoint(
            &node,
            EntityKind::Subscription,
            4,
            "/robot/arm/joint_states",
            "sensor_msgs/msg/JointState",
            TYPE_HASH_NOT_SUPPORTED,
            Qos::keep_last(10),
        )
        .unwrap();
        let key = t.key_expr();
        assert_eq!(
            key,
            "@ros2_lv/7/ab/1/4/MS/%/%robot%arm/driver/%robot%arm%joint_states/\
             sensor_msgs::msg::dds_::JointState_/TypeHashNotSupported/::,10:,:,:,,"
        );
        assert_eq!(EntityToken::parse(&key).unwrap(), t);
        assert_eq!(graph_key_expr(7), "@ros2_lv/7/**");
    }

    /// Each malformed chunk of the real token is named.
    #[test]
    fn malformed_tokens_are_named() {
        let real = real_token();
        let with = |i: usize, v: &str| {
            let mut c: Vec<&str> = real.split('/').collect();
            c[i] = v;
            c.join("/")
        };
        let part_of = |key: &str| match EntityToken::parse(key) {
            Err(FormatError::Token { part, .. }) => Some(part),
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(part_of(&with(1, "x")), Some(TokenPart::DomainId));
        assert_eq!(part_of(&with(2, "XYZ")), Some(TokenPart::SessionId));
        assert_eq!(part_of(&with(3, "-1")), Some(TokenPart::NodeId));
        assert_eq!(part_of(&with(4, "")), Some(TokenPart::EntityId));
        assert_eq!(part_of(&with(6, "enclave")), Some(TokenPart::Enclave));
        assert_eq!(part_of(&with(7, "%a%%b")), Some(TokenPart::Namespace));
        assert_eq!(part_of(&with(8, "no de")), Some(TokenPart::NodeName));
        assert_eq!(part_of(&with(9, "chatter")), Some(TokenPart::TopicName));
        assert_eq!(
            part_of(&with(10, "std_msgs::msg::String")),
            Some(TokenPart::TypeName)
        );
        assert_eq!(part_of(&with(11, "RIHS01_12")), Some(TokenPart::TypeHash));
        assert_eq!(part_of(&with(12, "::,1")), Some(TokenPart::Qos));
        assert_eq!(part_of(&with(5, "XX")), Some(TokenPart::EntityKind));
        assert!(matches!(
            EntityToken::parse(&with(0, "@ros2")),
            Err(FormatError::NotAToken { .. })
        ));
        assert!(matches!(
            EntityToken::parse(&with(5, "NN")),
            Err(FormatError::TokenChunks {
                found: 13,
                expected: 9,
                ..
            })
        ));
        assert!(matches!(
            EntityToken::parse("@ros2_lv/0/ab/0/1/MP/%/%/n/%t"),
            Err(FormatError::TokenChunks {
                found: 10,
                expected: 13,
                ..
            })
        ));
        assert!(EntityToken::parse("@ros2_lv").is_err());
        assert!(matches!(
            EntityToken::parse(&"@ros2_lv/".repeat(2000)),
            Err(FormatError::TooLong { len: 18000, .. })
        ));
        assert!(EntityToken::node(0, "ab", 0, "relative", "n").is_err());
        let node = EntityToken::node(0, "ab", 0, "/", "n").unwrap();
        assert!(EntityToken::endpoint(
            &node,
            EntityKind::Node,
            1,
            "/t",
            "a/msg/B",
            TYPE_HASH_NOT_SUPPORTED,
            Qos::default()
        )
        .is_err());
    }
}
