//! ROS 2 interface type names: `pkg/msg/Name`, `pkg/srv/Name_Request`, the DDS form
//! `pkg::msg::dds_::Name_`, and the sub-types that rosidl generates for services and actions.

use std::fmt;
use std::str::FromStr;

/// Which interface namespace a type lives in (`msg`, `srv` or `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterfaceKind {
    /// `pkg/action/...`: an action or one of its generated sub-types.
    Action,
    /// `pkg/msg/...`: a plain message.
    Msg,
    /// `pkg/srv/...`: a service or one of its generated sub-types.
    Srv,
}

impl InterfaceKind {
    /// The namespace as written in type names: `"msg"`, `"srv"` or `"action"`.
    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceKind::Action => "action",
            InterfaceKind::Msg => "msg",
            InterfaceKind::Srv => "srv",
        }
    }

    /// Parses `"msg"`, `"srv"` or `"action"`.
    pub fn from_namespace(s: &str) -> Option<Self> {
        match s {
            "msg" => Some(InterfaceKind::Msg),
            "srv" => Some(InterfaceKind::Srv),
            "action" => Some(InterfaceKind::Action),
            _ => None,
        }
    }

    /// The file extension of interface files of this kind (`msg`, `srv`, `action`).
    pub fn file_extension(self) -> &'static str {
        self.as_str()
    }
}

impl fmt::Display for InterfaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The role a type name plays relative to the interface file that defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubType {
    /// A plain message (`pkg/msg/Name`), or a service/action composite itself.
    None,
    /// `Name_Request` of a service.
    Request,
    /// `Name_Response` of a service.
    Response,
    /// `Name_Event` of a service (service introspection).
    Event,
    /// `Name_Goal` of an action.
    Goal,
    /// `Name_Result` of an action.
    Result,
    /// `Name_Feedback` of an action.
    Feedback,
    /// `Name_SendGoal` service composite of an action.
    SendGoal,
    /// `Name_SendGoal_Request` of an action.
    SendGoalRequest,
    /// `Name_SendGoal_Response` of an action.
    SendGoalResponse,
    /// `Name_SendGoal_Event` of an action.
    SendGoalEvent,
    /// `Name_GetResult` service composite of an action.
    GetResult,
    /// `Name_GetResult_Request` of an action.
    GetResultRequest,
    /// `Name_GetResult_Response` of an action.
    GetResultResponse,
    /// `Name_GetResult_Event` of an action.
    GetResultEvent,
    /// `Name_FeedbackMessage` of an action (what the feedback topic carries).
    FeedbackMessage,
}

impl SubType {
    /// The suffix appended to the interface name (empty for [`SubType::None`]).
    pub fn suffix(self) -> &'static str {
        match self {
            SubType::None => "",
            SubType::Request => "_Request",
            SubType::Response => "_Response",
            SubType::Event => "_Event",
            SubType::Goal => "_Goal",
            SubType::Result => "_Result",
            SubType::Feedback => "_Feedback",
            SubType::SendGoal => "_SendGoal",
            SubType::SendGoalRequest => "_SendGoal_Request",
            SubType::SendGoalResponse => "_SendGoal_Response",
            SubType::SendGoalEvent => "_SendGoal_Event",
            SubType::GetResult => "_GetResult",
            SubType::GetResultRequest => "_GetResult_Request",
            SubType::GetResultResponse => "_GetResult_Response",
            SubType::GetResultEvent => "_GetResult_Event",
            SubType::FeedbackMessage => "_FeedbackMessage",
        }
    }
}

const SRV_SUBTYPES: [SubType; 3] = [SubType::Request, SubType::Response, SubType::Event];
const ACTION_SUBTYPES: [SubType; 12] = [
    SubType::SendGoalRequest,
    SubType::SendGoalResponse,
    SubType::SendGoalEvent,
    SubType::GetResultRequest,
    SubType::GetResultResponse,
    SubType::GetResultEvent,
    SubType::SendGoal,
    SubType::GetResult,
    SubType::FeedbackMessage,
    SubType::Goal,
    SubType::Result,
    SubType::Feedback,
];

/// Error for a malformed type name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name does not have the form `pkg/Name`, `pkg/msg/Name`, `pkg/srv/Name` or `pkg/action/Name`.
    #[error("invalid ROS 2 type name `{name}`: expected `pkg/msg/Name`, `pkg/srv/Name`, `pkg/action/Name` or `pkg/Name`")]
    Malformed {
        /// The offending input.
        name: String,
    },
    /// The namespace between the slashes is not `msg`, `srv` or `action`.
    #[error("invalid ROS 2 type name `{name}`: unknown interface namespace `{namespace}` (expected msg, srv or action)")]
    UnknownNamespace {
        /// The offending input.
        name: String,
        /// The namespace found.
        namespace: String,
    },
    /// The package part is not a valid ROS package name.
    #[error("invalid package name `{package}` in type name `{name}`: must match [a-z][a-z0-9_]*")]
    InvalidPackage {
        /// The offending input.
        name: String,
        /// The package part.
        package: String,
    },
    /// The type part is not a valid ROS type name.
    #[error("invalid type `{type_part}` in type name `{name}`: must match [A-Za-z][A-Za-z0-9_]*")]
    InvalidType {
        /// The offending input.
        name: String,
        /// The type part.
        type_part: String,
    },
    /// A DDS type name that is not of the form `pkg::msg::dds_::Name_`.
    #[error("invalid DDS type name `{name}`: expected `pkg::msg::dds_::Name_`")]
    MalformedDds {
        /// The offending input.
        name: String,
    },
}

pub(crate) fn is_valid_package(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

pub(crate) fn is_valid_type(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A fully qualified ROS 2 interface type name such as `sensor_msgs/msg/Imu` or
/// `example_interfaces/srv/AddTwoInts_Request`.
///
/// Parse with [`TypeName::parse`] (or `str::parse`); display gives the canonical
/// `pkg/kind/Name` form.
///
/// Equality, hashing and ordering are those of the canonical string, so a
/// `HashMap<TypeName, _>` can be queried with a `&str` in canonical form.
#[derive(Debug, Clone)]
pub struct TypeName {
    /// Canonical `pkg/kind/Name`.
    full: String,
    /// Length of the package part.
    pkg_len: usize,
    kind: InterfaceKind,
}

impl PartialEq for TypeName {
    fn eq(&self, other: &Self) -> bool {
        self.full == other.full
    }
}

impl Eq for TypeName {}

impl std::hash::Hash for TypeName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.full.hash(state)
    }
}

impl PartialOrd for TypeName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TypeName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.full.cmp(&other.full)
    }
}

impl std::borrow::Borrow<str> for TypeName {
    fn borrow(&self) -> &str {
        &self.full
    }
}

impl AsRef<str> for TypeName {
    fn as_ref(&self) -> &str {
        &self.full
    }
}

impl TypeName {
    fn make(package: &str, kind: InterfaceKind, name: &str) -> Self {
        TypeName {
            full: format!("{package}/{kind}/{name}"),
            pkg_len: package.len(),
            kind,
        }
    }

    /// The canonical `pkg/kind/Name` string (same as `to_string()`, without allocating).
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// Builds a name from its parts, validating them.
    pub fn new(package: &str, kind: InterfaceKind, name: &str) -> Result<Self, NameError> {
        let full = format!("{package}/{kind}/{name}");
        if !is_valid_package(package) {
            return Err(NameError::InvalidPackage {
                name: full,
                package: package.to_string(),
            });
        }
        if !is_valid_type(name) {
            return Err(NameError::InvalidType {
                name: full,
                type_part: name.to_string(),
            });
        }
        Ok(TypeName::make(package, kind, name))
    }

    /// Builds a name from parts known to be valid (crate-internal constants and suffixes).
    pub(crate) fn from_valid_parts(package: &str, kind: InterfaceKind, name: &str) -> Self {
        TypeName::make(package, kind, name)
    }

    /// Parses `pkg/msg/Name`, `pkg/srv/Name[_Request|_Response|_Event]`,
    /// `pkg/action/Name[_Goal|...]`, or the short message form `pkg/Name` (meaning `pkg/msg/Name`).
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let parts: Vec<&str> = s.split('/').collect();
        let (package, kind, name) = match parts.as_slice() {
            [p, n] => (*p, InterfaceKind::Msg, *n),
            [p, k, n] => {
                let kind = InterfaceKind::from_namespace(k).ok_or_else(|| {
                    NameError::UnknownNamespace {
                        name: s.to_string(),
                        namespace: k.to_string(),
                    }
                })?;
                (*p, kind, *n)
            }
            _ => {
                return Err(NameError::Malformed {
                    name: s.to_string(),
                })
            }
        };
        if !is_valid_package(package) {
            return Err(NameError::InvalidPackage {
                name: s.to_string(),
                package: package.to_string(),
            });
        }
        if !is_valid_type(name) {
            return Err(NameError::InvalidType {
                name: s.to_string(),
                type_part: name.to_string(),
            });
        }
        Ok(TypeName::make(package, kind, name))
    }

    /// Parses the DDS form used on the wire by rmw implementations, e.g.
    /// `std_msgs::msg::dds_::String_` or `example_interfaces::srv::dds_::AddTwoInts_Request_`.
    pub fn from_dds_name(s: &str) -> Result<Self, NameError> {
        let bad = || NameError::MalformedDds {
            name: s.to_string(),
        };
        let parts: Vec<&str> = s.split("::").collect();
        let [package, kind, dds, name] = parts.as_slice() else {
            return Err(bad());
        };
        if *dds != "dds_" {
            return Err(bad());
        }
        let kind = InterfaceKind::from_namespace(kind).ok_or_else(bad)?;
        let name = name.strip_suffix('_').ok_or_else(bad)?;
        TypeName::new(package, kind, name).map_err(|_| bad())
    }

    /// The DDS type name, e.g. `std_msgs::msg::dds_::String_`.
    pub fn to_dds_name(&self) -> String {
        format!("{}::{}::dds_::{}_", self.package(), self.kind, self.name())
    }

    /// The package, e.g. `sensor_msgs`.
    pub fn package(&self) -> &str {
        &self.full[..self.pkg_len]
    }

    /// The interface namespace (`msg`, `srv` or `action`).
    pub fn kind(&self) -> InterfaceKind {
        self.kind
    }

    /// The type's own name including any generated suffix, e.g. `AddTwoInts_Request`.
    pub fn name(&self) -> &str {
        &self.full[self.pkg_len + self.kind.as_str().len() + 2..]
    }

    /// Splits off the generated sub-type suffix: for `pkg/action/Fib_SendGoal_Request` this is
    /// `("Fib", SubType::SendGoalRequest)`; for messages it is `(name, SubType::None)`.
    ///
    /// Note that a service/action whose own name ends in e.g. `_Request` is ambiguous; rosidl
    /// forbids underscores in interface names, so this never happens for valid interfaces.
    pub fn split_subtype(&self) -> (&str, SubType) {
        let candidates: &[SubType] = match self.kind {
            InterfaceKind::Msg => &[],
            InterfaceKind::Srv => &SRV_SUBTYPES,
            InterfaceKind::Action => &ACTION_SUBTYPES,
        };
        for st in candidates {
            if let Some(base) = self.name().strip_suffix(st.suffix()) {
                if !base.is_empty() {
                    return (base, *st);
                }
            }
        }
        (self.name(), SubType::None)
    }

    /// The name of the interface file's base type (`pkg/srv/AddTwoInts` for
    /// `pkg/srv/AddTwoInts_Request`).
    pub fn interface(&self) -> TypeName {
        let (base, _) = self.split_subtype();
        TypeName::make(self.package(), self.kind, base)
    }

    /// This interface's generated sub-type, e.g. `Fib` + [`SubType::Goal`] = `Fib_Goal`.
    pub fn with_subtype(&self, sub: SubType) -> TypeName {
        TypeName::make(
            self.package(),
            self.kind,
            &format!("{}{}", self.name(), sub.suffix()),
        )
    }

    /// The form used in `ros2msg` dependency headers and .msg fields: `pkg/Name` for messages,
    /// the full `pkg/kind/Name` otherwise.
    pub fn to_short_string(&self) -> String {
        match self.kind {
            InterfaceKind::Msg => format!("{}/{}", self.package(), self.name()),
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for TypeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl FromStr for TypeName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TypeName::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        let t = TypeName::parse("std_msgs/String").unwrap();
        assert_eq!(t.to_string(), "std_msgs/msg/String");
        let t = TypeName::parse("test_msgs/action/Fibonacci_SendGoal_Request").unwrap();
        assert_eq!(t.split_subtype(), ("Fibonacci", SubType::SendGoalRequest));
        assert_eq!(t.interface().to_string(), "test_msgs/action/Fibonacci");
        let t = TypeName::parse("a/srv/Add_Event").unwrap();
        assert_eq!(t.split_subtype(), ("Add", SubType::Event));
        assert!(TypeName::parse("a/foo/B").is_err());
        assert!(TypeName::parse("A/msg/B").is_err());
        assert!(TypeName::parse("a/msg/").is_err());
        assert!(TypeName::parse("a//msg/B").is_err());
        assert!(TypeName::parse("").is_err());
    }

    #[test]
    fn dds_round_trip() {
        let t = TypeName::parse("example_interfaces/srv/AddTwoInts_Request").unwrap();
        assert_eq!(
            t.to_dds_name(),
            "example_interfaces::srv::dds_::AddTwoInts_Request_"
        );
        assert_eq!(TypeName::from_dds_name(&t.to_dds_name()).unwrap(), t);
        assert_eq!(
            TypeName::from_dds_name("std_msgs::msg::dds_::String_")
                .unwrap()
                .to_string(),
            "std_msgs/msg/String"
        );
        assert!(TypeName::from_dds_name("std_msgs::msg::String_").is_err());
        assert!(TypeName::from_dds_name("std_msgs::msg::dds_::String").is_err());
    }
}
