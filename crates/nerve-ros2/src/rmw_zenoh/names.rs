//! ROS 2 names, type names, type hashes and the data key expressions of rmw_zenoh
//! (`<domain>/<fully qualified name without its leading slash>/<DDS type name>/<type hash>`).

use std::fmt;

/// What Humble's rmw_zenoh writes where later releases write a RIHS01 type hash (Humble
/// has no type hashes).
pub const TYPE_HASH_NOT_SUPPORTED: &str = "TypeHashNotSupported";

/// The prefix of a RIHS01 type hash (REP-2016): `RIHS01_` and 64 lowercase hex digits.
pub const RIHS01_PREFIX: &str = "RIHS01_";

/// The longest name, type name or key chunk accepted (input from the network is bounded).
pub const MAX_NAME_LEN: usize = 1024;

/// What is wrong with a name, type, hash, key expression or liveliness token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A ROS 2 name (topic, service, namespace, node, enclave) is not valid.
    #[error("{what} {value:?}: {reason}")]
    Name {
        /// Which kind of name.
        what: &'static str,
        /// The name as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A ROS 2 type name (`pkg/msg/Name`) or its DDS form (`pkg::msg::dds_::Name_`) is
    /// not valid.
    #[error("type name {value:?}: {reason}")]
    TypeName {
        /// The type name as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A type hash is neither `RIHS01_<64 lowercase hex digits>` nor
    /// `TypeHashNotSupported`.
    #[error("type hash {value:?}: {reason}")]
    TypeHash {
        /// The hash as given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A number (domain id, node id, entity id) is not a plain decimal.
    #[error("{what} {value:?} is not a decimal number without leading zeros")]
    Number {
        /// Which number.
        what: &'static str,
        /// The text as given.
        value: String,
    },
    /// A data key expression does not have the shape `<domain>/<name>/<type>/<hash>`.
    #[error("data key expression {key:?}: {reason}")]
    DataKey {
        /// The key expression.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A key expression is longer than accepted.
    #[error("{what} of {len} bytes (at most {max})")]
    TooLong {
        /// What it is.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The most accepted.
        max: usize,
    },
    /// A key expression is not a liveliness token of rmw_zenoh (`@ros2_lv/...`).
    #[error("liveliness token {key:?}: not under @ros2_lv")]
    NotAToken {
        /// The key expression.
        key: String,
    },
    /// A liveliness token has the wrong number of `/`-separated chunks for its kind.
    #[error("liveliness token {key:?}: {found} chunks, a {kind} token has {expected}")]
    TokenChunks {
        /// The key expression.
        key: String,
        /// The entity kind chunk as found (or `?` when there is none).
        kind: String,
        /// How many chunks it has.
        found: usize,
        /// How many a token of that kind has.
        expected: usize,
    },
    /// One chunk of a liveliness token is malformed.
    #[error("liveliness token {key:?}: {part}: {reason}")]
    Token {
        /// The key expression.
        key: String,
        /// Which chunk.
        part: TokenPart,
        /// What is wrong with it.
        reason: String,
    },
}

/// The chunks of a liveliness token (named in [`FormatError::Token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPart {
    /// `<domain_id>`.
    DomainId,
    /// `<session_id>`: the Zenoh session id in hex.
    SessionId,
    /// `<node_id>`.
    NodeId,
    /// `<entity_id>`.
    EntityId,
    /// `<entity_kind>`: `NN`, `MP`, `MS`, `SS` or `SC`.
    EntityKind,
    /// `<mangled_enclave>`.
    Enclave,
    /// `<mangled_namespace>`.
    Namespace,
    /// `<node_name>`.
    NodeName,
    /// `<mangled_qualified_name>` of the topic or service.
    TopicName,
    /// `<type_name>` (DDS form).
    TypeName,
    /// `<type_hash>`.
    TypeHash,
    /// `<qos>`.
    Qos,
}

impl fmt::Display for TokenPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenPart::DomainId => "domain id",
            TokenPart::SessionId => "session id",
            TokenPart::NodeId => "node id",
            TokenPart::EntityId => "entity id",
            TokenPart::EntityKind => "entity kind",
            TokenPart::Enclave => "enclave",
            TokenPart::Namespace => "namespace",
            TokenPart::NodeName => "node name",
            TokenPart::TopicName => "topic or service name",
            TokenPart::TypeName => "type name",
            TokenPart::TypeHash => "type hash",
            TokenPart::Qos => "QoS",
        })
    }
}

/// A type hash as rmw_zenoh writes it in key expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TypeHash {
    /// `TypeHashNotSupported` (Humble).
    NotSupported,
    /// `RIHS01_<hex>` (Iron and later): the 32-byte SHA-256 of the type description.
    Rihs01([u8; 32]),
}

impl TypeHash {
    /// Parses `TypeHashNotSupported` or `RIHS01_` followed by 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<TypeHash, FormatError> {
        let err = |reason| FormatError::TypeHash {
            value: bounded(s),
            reason,
        };
        if s == TYPE_HASH_NOT_SUPPORTED {
            return Ok(TypeHash::NotSupported);
        }
        let hex = s
            .strip_prefix(RIHS01_PREFIX)
            .ok_or_else(|| err("neither RIHS01_<hex> nor TypeHashNotSupported"))?;
        if hex.len() != 64 {
            return Err(err("a RIHS01 hash has 64 hex digits"));
        }
        let mut out = [0u8; 32];
        for (i, pair) in hex.as_bytes().chunks_exact(2).enumerate() {
            let hi = lower_hex_digit(pair[0]).ok_or_else(|| err("not lowercase hex"))?;
            let lo = lower_hex_digit(pair[1]).ok_or_else(|| err("not lowercase hex"))?;
            out[i] = (hi << 4) | lo;
        }
        Ok(TypeHash::Rihs01(out))
    }
}

impl fmt::Display for TypeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeHash::NotSupported => f.write_str(TYPE_HASH_NOT_SUPPORTED),
            TypeHash::Rihs01(h) => {
                f.write_str(RIHS01_PREFIX)?;
                for b in h {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::str::FromStr for TypeHash {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<TypeHash, FormatError> {
        TypeHash::parse(s)
    }
}

fn lower_hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// At most [`MAX_NAME_LEN`] bytes of `s` for an error message (input may be hostile).
pub(crate) fn bounded(s: &str) -> String {
    if s.len() <= MAX_NAME_LEN {
        return s.to_owned();
    }
    let mut end = MAX_NAME_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// A ROS 2 type name (`std_msgs/msg/String`) in the DDS form rmw_zenoh writes
/// (`std_msgs::msg::dds_::String_`).
pub fn dds_type_name(ros_type: &str) -> Result<String, FormatError> {
    let err = |reason| FormatError::TypeName {
        value: bounded(ros_type),
        reason,
    };
    if ros_type.len() > MAX_NAME_LEN {
        return Err(err("too long"));
    }
    let parts: Vec<&str> = ros_type.split('/').collect();
    let [pkg, kind, name] = parts.as_slice() else {
        return Err(err("expected <package>/<msg|srv|action>/<Name>"));
    };
    for p in [pkg, kind, name] {
        check_type_chunk(p).map_err(err)?;
    }
    Ok(format!("{pkg}::{kind}::dds_::{name}_"))
}

/// The ROS 2 type name (`std_msgs/msg/String`) of a DDS type name as rmw_zenoh writes it
/// (`std_msgs::msg::dds_::String_`).
pub fn ros_type_name(dds_type: &str) -> Result<String, FormatError> {
    let err = |reason| FormatError::TypeName {
        value: bounded(dds_type),
        reason,
    };
    if dds_type.len() > MAX_NAME_LEN {
        return Err(err("too long"));
    }
    let parts: Vec<&str> = dds_type.split("::").collect();
    let [pkg, kind, dds, name] = parts.as_slice() else {
        return Err(err("expected <package>::<msg|srv|action>::dds_::<Name>_"));
    };
    if *dds != "dds_" {
        return Err(err("the third chunk of a DDS type name is dds_"));
    }
    let name = name
        .strip_suffix('_')
        .ok_or_else(|| err("a DDS type name ends with _"))?;
    for p in [pkg, kind, &name] {
        check_type_chunk(p).map_err(err)?;
    }
    Ok(format!("{pkg}/{kind}/{name}"))
}

fn check_type_chunk(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("empty chunk");
    }
    if !p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err("only letters, digits and _ are allowed");
    }
    if p.as_bytes()[0].is_ascii_digit() {
        return Err("a chunk must not start with a digit");
    }
    Ok(())
}

/// A fully qualified ROS 2 topic or service name (`/robot/chatter`); one without its
/// leading slash is taken relative to the root namespace.
pub fn fq_name(what: &'static str, name: &str) -> Result<String, FormatError> {
    let err = |reason| FormatError::Name {
        what,
        value: bounded(name),
        reason,
    };
    if name.len() > MAX_NAME_LEN {
        return Err(err("too long"));
    }
    let rel = name.strip_prefix('/').unwrap_or(name);
    if rel.is_empty() {
        return Err(err("empty"));
    }
    for chunk in rel.split('/') {
        check_name_chunk(chunk).map_err(err)?;
    }
    Ok(format!("/{rel}"))
}

/// A namespace or enclave: `/` or a fully qualified name.
pub fn namespace(what: &'static str, ns: &str) -> Result<String, FormatError> {
    if ns.is_empty() || ns == "/" {
        return Ok("/".to_owned());
    }
    if !ns.starts_with('/') {
        return Err(FormatError::Name {
            what,
            value: bounded(ns),
            reason: "must start with /",
        });
    }
    fq_name(what, ns)
}

/// A node name: letters, digits and `_`, not starting with a digit.
pub fn node_name(name: &str) -> Result<String, FormatError> {
    if name.len() > MAX_NAME_LEN {
        return Err(FormatError::Name {
            what: "node name",
            value: bounded(name),
            reason: "too long",
        });
    }
    check_name_chunk(name).map_err(|reason| FormatError::Name {
        what: "node name",
        value: bounded(name),
        reason,
    })?;
    Ok(name.to_owned())
}

fn check_name_chunk(c: &str) -> Result<(), &'static str> {
    if c.is_empty() {
        return Err("empty chunk (// or a trailing /)");
    }
    if !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err("only letters, digits, _ and / are allowed");
    }
    if c.as_bytes()[0].is_ascii_digit() {
        return Err("a chunk must not start with a digit");
    }
    Ok(())
}

/// A decimal number as rmw_zenoh writes it (no sign, no leading zeros).
pub(crate) fn parse_decimal<T: std::str::FromStr>(
    what: &'static str,
    s: &str,
) -> Result<T, FormatError> {
    let err = || FormatError::Number {
        what,
        value: bounded(s),
    };
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return Err(err());
    }
    s.parse().map_err(|_| err())
}

/// `/` in a name written as `%` (liveliness tokens cannot hold `/` inside a chunk).
pub fn mangle(name: &str) -> String {
    name.replace('/', "%")
}

/// `%` in a liveliness token chunk read back as `/`.
pub fn demangle(chunk: &str) -> String {
    chunk.replace('%', "/")
}

/// The data key expression of a topic or service:
/// `<domain>/<name without its leading slash>/<DDS type name>/<type hash>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DataKey {
    /// The ROS domain id.
    pub domain: u32,
    /// The fully qualified topic or service name (`/chatter`).
    pub name: String,
    /// The ROS 2 type name (`std_msgs/msg/String`).
    pub ros_type: String,
    /// The type hash.
    pub type_hash: TypeHash,
}

impl DataKey {
    /// The key of topic or service `name` (fully qualified, or relative to `/`) of ROS 2
    /// type `ros_type` (`std_msgs/msg/String`) with type hash `type_hash` (`RIHS01_...`
    /// or `TypeHashNotSupported`).
    pub fn new(
        domain: u32,
        name: &str,
        ros_type: &str,
        type_hash: &str,
    ) -> Result<DataKey, FormatError> {
        let name = fq_name("topic or service name", name)?;
        dds_type_name(ros_type)?;
        Ok(DataKey {
            domain,
            name,
            ros_type: ros_type.to_owned(),
            type_hash: TypeHash::parse(type_hash)?,
        })
    }

    /// The key expression (`0/chatter/std_msgs::msg::dds_::String_/RIHS01_...`).
    pub fn key_expr(&self) -> String {
        self.to_string()
    }

    /// Reads a data key expression back.
    pub fn parse(key: &str) -> Result<DataKey, FormatError> {
        let err = |reason: String| FormatError::DataKey {
            key: bounded(key),
            reason,
        };
        if key.len() > 4 * MAX_NAME_LEN {
            return Err(FormatError::TooLong {
                what: "data key expression",
                len: key.len(),
                max: 4 * MAX_NAME_LEN,
            });
        }
        let chunks: Vec<&str> = key.split('/').collect();
        if chunks.len() < 4 {
            return Err(err(format!(
                "{} chunks, expected <domain>/<name>/<type>/<hash>",
                chunks.len()
            )));
        }
        let n = chunks.len();
        let domain = parse_decimal("domain id", chunks[0]).map_err(|e| err(e.to_string()))?;
        let name = fq_name("topic or service name", &chunks[1..n - 2].join("/"))
            .map_err(|e| err(e.to_string()))?;
        let ros_type = ros_type_name(chunks[n - 2]).map_err(|e| err(e.to_string()))?;
        let type_hash = TypeHash::parse(chunks[n - 1]).map_err(|e| err(e.to_string()))?;
        Ok(DataKey {
            domain,
            name,
            ros_type,
            type_hash,
        })
    }
}

impl fmt::Display for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // the type was checked when the key was made; a hand-built one with a malformed
        // type still gives a key (with the type as written)
        let dds = dds_type_name(&self.ros_type).unwrap_or_else(|_| self.ros_type.clone());
        write!(
            f,
            "{}/{}/{}/{}",
            self.domain,
            self.name.strip_prefix('/').unwrap_or(&self.name),
            dds,
            self.type_hash
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRING_HASH: &str =
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    const ADD_TWO_INTS_HASH: &str =
        "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";

    fn capture(name: &str) -> String {
        let p = format!("/work/shared/ros2/rmw_zenoh/{name}");
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    /// data-keys.txt: the Humble keys, byte for byte, both ways.
    #[test]
    fn data_keys_match_real_humble_captures() {
        let lines: Vec<String> = capture("data-keys.txt")
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), 2);
        let built = [
            DataKey::new(
                0,
                "/chatter",
                "std_msgs/msg/String",
                TYPE_HASH_NOT_SUPPORTED,
            ),
            DataKey::new(
                42,
                "/robot/_hidden/chatter",
                "std_msgs/msg/String",
                TYPE_HASH_NOT_SUPPORTED,
            ),
        ];
        for (line, key) in lines.iter().zip(built) {
            let key = key.unwrap();
            assert_eq!(&key.key_expr(), line);
            let back = DataKey::parse(line).unwrap();
            assert_eq!(back, key);
            assert_eq!(&back.key_expr(), line);
        }
    }

    /// ROS 2's docs/design.md examples (Jazzy and later, RIHS01 hashes).
    #[test]
    fn data_keys_match_design_md_examples() {
        let cases = [
            (0, "/chatter", "std_msgs/msg/String", STRING_HASH,
             "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"),
            (0, "/robot1/chatter", "std_msgs/msg/String", STRING_HASH,
             "0/robot1/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"),
            (2, "add_two_ints", "example_interfaces/srv/AddTwoInts", ADD_TWO_INTS_HASH,
             "2/add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a"),
        ];
        for (domain, name, ty, hash, want) in cases {
            let key = DataKey::new(domain, name, ty, hash).unwrap();
            assert_eq!(key.key_expr(), want);
            assert_eq!(DataKey::parse(want).unwrap(), key);
        }
    }

    #[test]
    fn type_names_both_ways() {
        assert_eq!(
            dds_type_name("std_msgs/msg/String").unwrap(),
            "std_msgs::msg::dds_::String_"
        );
        assert_eq!(
            ros_type_name("example_interfaces::srv::dds_::AddTwoInts_").unwrap(),
            "example_interfaces/srv/AddTwoInts"
        );
        for bad in [
            "std_msgs/String",
            "std_msgs/msg/",
            "a/b/c/d",
            "x/msg/Str-ing",
            "",
        ] {
            assert!(
                matches!(dds_type_name(bad), Err(FormatError::TypeName { .. })),
                "{bad}"
            );
        }
        for bad in [
            "std_msgs::msg::String_",
            "std_msgs::msg::dds_::String",
            "std_msgs::msg::dds::String_",
        ] {
            assert!(
                matches!(ros_type_name(bad), Err(FormatError::TypeName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn type_hashes_both_ways() {
        let h = TypeHash::parse(STRING_HASH).unwrap();
        assert_eq!(h.to_string(), STRING_HASH);
        assert!(matches!(h, TypeHash::Rihs01(b) if b[0] == 0xdf && b[31] == 0x18));
        assert_eq!(
            TypeHash::parse("TypeHashNotSupported").unwrap(),
            TypeHash::NotSupported
        );
        for bad in [
            "RIHS01_df66",
            "RIHS02_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
            "RIHS01_DF668C740482BBD48FB39D76A70DFD4BD59DB1288021743503259E948F6B1A18",
            "RIHS01_zz668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
            "",
        ] {
            assert!(
                matches!(TypeHash::parse(bad), Err(FormatError::TypeHash { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn malformed_data_keys_are_named() {
        for (bad, says) in [
            ("0/chatter/std_msgs::msg::dds_::String_", "chunks"),
            (
                "x/chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported",
                "domain id",
            ),
            (
                "00/chatter/std_msgs::msg::dds_::String_/TypeHashNotSupported",
                "domain id",
            ),
            (
                "0/cha tter/std_msgs::msg::dds_::String_/TypeHashNotSupported",
                "topic or service name",
            ),
            (
                "0//std_msgs::msg::dds_::String_/TypeHashNotSupported",
                "topic or service name",
            ),
            ("0/chatter/std_msgs/TypeHashNotSupported", "type name"),
            (
                "0/chatter/std_msgs::msg::dds_::String_/RIHS01_00",
                "type hash",
            ),
        ] {
            let e = DataKey::parse(bad).unwrap_err();
            assert!(matches!(e, FormatError::DataKey { .. }), "{bad}");
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn long_data_keys_are_refused() {
        let key = format!(
            "0/{}/std_msgs::msg::dds_::String_/TypeHashNotSupported",
            "a/".repeat(3000)
        );
        assert!(matches!(
            DataKey::parse(&key),
            Err(FormatError::TooLong { .. })
        ));
    }

    #[test]
    fn names() {
        assert_eq!(fq_name("topic", "chatter").unwrap(), "/chatter");
        assert_eq!(fq_name("topic", "/a/_b/c1").unwrap(), "/a/_b/c1");
        for bad in ["", "/", "/a/", "/a//b", "/1a", "/a%b", "/a*"] {
            assert!(fq_name("topic", bad).is_err(), "{bad}");
        }
        assert_eq!(namespace("namespace", "").unwrap(), "/");
        assert_eq!(namespace("namespace", "/robot").unwrap(), "/robot");
        assert!(namespace("namespace", "robot").is_err());
        assert!(node_name("talker_1").is_ok());
        assert!(node_name("a/b").is_err());
        assert_eq!(mangle("/robot/chatter"), "%robot%chatter");
        assert_eq!(demangle("%robot%chatter"), "/robot/chatter");
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert!(fq_name("topic", &long).is_err());
    }
}
