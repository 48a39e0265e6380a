//! The QoS chunk of rmw_zenoh liveliness tokens (`qos_to_keyexpr` / `keyexpr_to_qos` of
//! `rmw_zenoh_cpp`):
//!
//! ```text
//! <reliability>:<durability>:<history>,<depth>:<deadline s>,<deadline ns>:<lifespan s>,<lifespan ns>:<liveliness>,<lease s>,<lease ns>
//! ```
//!
//! Every field is written only where it differs from rmw_zenoh's default profile
//! (reliable, volatile, keep last 42, infinite deadline, lifespan and lease, automatic
//! liveliness) and left empty otherwise; policies are written as the numbers of the
//! `rmw_qos_*_policy_e` enums. A reliable, volatile, keep-last-7 publisher writes
//! `::,7:,:,:,,`.

use std::fmt;

/// The longest QoS chunk accepted (input from the network is bounded).
pub const MAX_QOS_LEN: usize = 256;

/// What is wrong with a QoS chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QosError {
    /// The chunk is longer than [`MAX_QOS_LEN`].
    #[error("QoS chunk of {len} bytes (at most {MAX_QOS_LEN})")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The chunk does not have six `:`-separated groups.
    #[error("QoS {value:?}: {found} ':'-separated groups, expected 6")]
    Groups {
        /// The chunk.
        value: String,
        /// How many groups it has.
        found: usize,
    },
    /// A group does not have the right number of `,`-separated fields.
    #[error(
        "QoS {value:?}: the {group} group has {found} ','-separated fields, expected {expected}"
    )]
    Fields {
        /// The chunk.
        value: String,
        /// Which group (history, deadline, lifespan, liveliness).
        group: &'static str,
        /// How many fields it has.
        found: usize,
        /// How many it should have.
        expected: usize,
    },
    /// A policy field holds a code rmw_zenoh does not know.
    #[error("QoS {value:?}: {field} {code:?} is not a known policy code")]
    Policy {
        /// The chunk.
        value: String,
        /// Which policy.
        field: &'static str,
        /// The code as written.
        code: String,
    },
    /// A numeric field is not an unsigned decimal.
    #[error("QoS {value:?}: {field} {number:?} is not an unsigned decimal number")]
    Number {
        /// The chunk.
        value: String,
        /// Which field.
        field: &'static str,
        /// The text as written.
        number: String,
    },
}

/// Reliability (`rmw_qos_reliability_policy_e`; the codes rmw_zenoh reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// 0: the middleware's default (reliable for rmw_zenoh).
    SystemDefault,
    /// 1.
    Reliable,
    /// 2.
    BestEffort,
    /// 3.
    Unknown,
}

/// Durability (`rmw_qos_durability_policy_e`; the codes rmw_zenoh reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// 0: the middleware's default (volatile for rmw_zenoh).
    SystemDefault,
    /// 1: late joiners get the last `depth` samples.
    TransientLocal,
    /// 2.
    Volatile,
    /// 3.
    Unknown,
}

/// History (`rmw_qos_history_policy_e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// 0: the middleware's default (keep last for rmw_zenoh).
    SystemDefault,
    /// 1: keep the last `depth` samples.
    KeepLast,
    /// 2.
    KeepAll,
    /// 3.
    Unknown,
}

/// Liveliness (`rmw_qos_liveliness_policy_e`; the codes rmw_zenoh reads: 2, the
/// deprecated manual-by-node, is not among them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveliness {
    /// 0: the middleware's default (automatic).
    SystemDefault,
    /// 1.
    Automatic,
    /// 3.
    ManualByTopic,
    /// 4.
    Unknown,
    /// 5.
    BestAvailable,
}

macro_rules! policy_codes {
    ($t:ty, $field:literal, $($v:ident = $c:literal),+) => {
        impl $t {
            /// The number of this policy in the rmw enum (what the token holds).
            pub fn code(self) -> u8 {
                match self { $(Self::$v => $c),+ }
            }
            /// The policy with rmw number `code`, if rmw_zenoh reads it.
            pub fn from_code(code: u8) -> Option<Self> {
                match code { $($c => Some(Self::$v),)+ _ => None }
            }
            fn parse_field(qos: &str, s: &str, default: Self) -> Result<Self, QosError> {
                if s.is_empty() {
                    return Ok(default);
                }
                s.parse::<u8>()
                    .ok()
                    .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(Self::from_code)
                    .ok_or_else(|| QosError::Policy {
                        value: qos.to_owned(),
                        field: $field,
                        code: s.to_owned(),
                    })
            }
        }
    };
}

policy_codes!(
    Reliability,
    "reliability",
    SystemDefault = 0,
    Reliable = 1,
    BestEffort = 2,
    Unknown = 3
);
policy_codes!(
    Durability,
    "durability",
    SystemDefault = 0,
    TransientLocal = 1,
    Volatile = 2,
    Unknown = 3
);
policy_codes!(
    History,
    "history",
    SystemDefault = 0,
    KeepLast = 1,
    KeepAll = 2,
    Unknown = 3
);
policy_codes!(
    Liveliness,
    "liveliness",
    SystemDefault = 0,
    Automatic = 1,
    ManualByTopic = 3,
    Unknown = 4,
    BestAvailable = 5
);

/// A QoS duration as rmw holds it (`rmw_time_t`: seconds and nanoseconds, not
/// normalised).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QosDuration {
    /// Seconds.
    pub sec: u64,
    /// Nanoseconds.
    pub nsec: u64,
}

impl QosDuration {
    /// `RMW_DURATION_INFINITE` (rmw_zenoh's default for deadline, lifespan and lease).
    pub const INFINITE: QosDuration = QosDuration {
        sec: 9_223_372_036,
        nsec: 854_775_807,
    };
    /// `RMW_DURATION_UNSPECIFIED` (0, 0): "the default", which rmw_zenoh makes infinite.
    pub const UNSPECIFIED: QosDuration = QosDuration { sec: 0, nsec: 0 };

    /// Whether this is [`QosDuration::INFINITE`].
    pub fn is_infinite(self) -> bool {
        self == Self::INFINITE
    }

    /// As a [`std::time::Duration`] (saturating; `None` when infinite).
    pub fn to_duration(self) -> Option<std::time::Duration> {
        if self.is_infinite() {
            return None;
        }
        let extra = self.nsec / 1_000_000_000;
        Some(std::time::Duration::new(
            self.sec.saturating_add(extra),
            (self.nsec % 1_000_000_000) as u32,
        ))
    }
}

/// The QoS profile of a publisher, subscription, service or client, as its liveliness
/// token carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Qos {
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// History kind.
    pub history: History,
    /// History depth (for keep last).
    pub depth: u64,
    /// Deadline.
    pub deadline: QosDuration,
    /// Lifespan.
    pub lifespan: QosDuration,
    /// Liveliness kind.
    pub liveliness: Liveliness,
    /// Liveliness lease duration.
    pub liveliness_lease: QosDuration,
}

impl Default for Qos {
    /// rmw_zenoh's default profile (`QoS::default_qos()`): what an empty field means.
    fn default() -> Qos {
        Qos {
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            history: History::KeepLast,
            depth: Qos::DEFAULT_DEPTH,
            deadline: QosDuration::INFINITE,
            lifespan: QosDuration::INFINITE,
            liveliness: Liveliness::Automatic,
            liveliness_lease: QosDuration::INFINITE,
        }
    }
}

impl Qos {
    /// The depth rmw_zenoh gives a keep-last history of depth 0.
    pub const DEFAULT_DEPTH: u64 = 42;

    /// Reliable, volatile, keep last `depth` (ROS 2's default profile with depth 10).
    pub fn keep_last(depth: u64) -> Qos {
        Qos {
            depth,
            ..Qos::default()
        }
    }

    /// What rmw_zenoh makes of a requested profile before it declares an entity
    /// (`QoS::best_available_qos`): system-default and unknown policies become its
    /// defaults, depth 0 becomes 42, unspecified durations become infinite.
    pub fn adapted(self) -> Qos {
        let d = Qos::default();
        let dur = |t: QosDuration| {
            if t == QosDuration::UNSPECIFIED {
                QosDuration::INFINITE
            } else {
                t
            }
        };
        Qos {
            reliability: match self.reliability {
                Reliability::SystemDefault | Reliability::Unknown => d.reliability,
                r => r,
            },
            durability: match self.durability {
                Durability::SystemDefault | Durability::Unknown => d.durability,
                r => r,
            },
            history: match self.history {
                History::SystemDefault | History::Unknown => d.history,
                h => h,
            },
            depth: if self.depth == 0 { d.depth } else { self.depth },
            deadline: dur(self.deadline),
            lifespan: dur(self.lifespan),
            liveliness: match self.liveliness {
                Liveliness::SystemDefault | Liveliness::Unknown => d.liveliness,
                l => l,
            },
            liveliness_lease: dur(self.liveliness_lease),
        }
    }

    /// The token chunk (`qos_to_keyexpr`).
    pub fn encode(&self) -> String {
        self.to_string()
    }

    /// Reads a token chunk back (`keyexpr_to_qos`): empty fields take the default.
    pub fn parse(s: &str) -> Result<Qos, QosError> {
        if s.len() > MAX_QOS_LEN {
            return Err(QosError::TooLong { len: s.len() });
        }
        let d = Qos::default();
        let groups: Vec<&str> = s.split(':').collect();
        let [rel, dur, hist, deadline, lifespan, live] = groups.as_slice() else {
            return Err(QosError::Groups {
                value: s.to_owned(),
                found: groups.len(),
            });
        };
        let num = |field: &'static str, n: &str, default: u64| -> Result<u64, QosError> {
            if n.is_empty() {
                return Ok(default);
            }
            n.parse::<u64>()
                .ok()
                .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| QosError::Number {
                    value: s.to_owned(),
                    field,
                    number: n.to_owned(),
                })
        };
        let h = fields(s, "history", hist, 2)?;
        let dl = fields(s, "deadline", deadline, 2)?;
        let ls = fields(s, "lifespan", lifespan, 2)?;
        let lv = fields(s, "liveliness", live, 3)?;
        Ok(Qos {
            reliability: Reliability::parse_field(s, rel, d.reliability)?,
            durability: Durability::parse_field(s, dur, d.durability)?,
            history: History::parse_field(s, h[0], d.history)?,
            depth: num("depth", h[1], d.depth)?,
            deadline: QosDuration {
                sec: num("deadline seconds", dl[0], d.deadline.sec)?,
                nsec: num("deadline nanoseconds", dl[1], d.deadline.nsec)?,
            },
            lifespan: QosDuration {
                sec: num("lifespan seconds", ls[0], d.lifespan.sec)?,
                nsec: num("lifespan nanoseconds", ls[1], d.lifespan.nsec)?,
            },
            liveliness: Liveliness::parse_field(s, lv[0], d.liveliness)?,
            liveliness_lease: QosDuration {
                sec: num("lease seconds", lv[1], d.liveliness_lease.sec)?,
                nsec: num("lease nanoseconds", lv[2], d.liveliness_lease.nsec)?,
            },
        })
    }
}

/// The `,`-separated fields of one group of a QoS chunk `s`.
fn fields<'a>(
    s: &str,
    group: &'static str,
    g: &'a str,
    expected: usize,
) -> Result<Vec<&'a str>, QosError> {
    let f: Vec<&'a str> = g.split(',').collect();
    if f.len() == expected {
        Ok(f)
    } else {
        Err(QosError::Fields {
            value: s.to_owned(),
            group,
            found: f.len(),
            expected,
        })
    }
}

impl fmt::Display for Qos {
    /// The token chunk (`qos_to_keyexpr`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = Qos::default();
        let field = |f: &mut fmt::Formatter<'_>, differs: bool, v: u64| -> fmt::Result {
            if differs {
                write!(f, "{v}")
            } else {
                Ok(())
            }
        };
        let rel = self.reliability.code();
        field(f, self.reliability != d.reliability, rel.into())?;
        f.write_str(":")?;
        field(
            f,
            self.durability != d.durability,
            self.durability.code().into(),
        )?;
        f.write_str(":")?;
        field(f, self.history != d.history, self.history.code().into())?;
        f.write_str(",")?;
        field(f, self.depth != d.depth, self.depth)?;
        for (t, dt) in [(self.deadline, d.deadline), (self.lifespan, d.lifespan)] {
            f.write_str(":")?;
            field(f, t.sec != dt.sec, t.sec)?;
            f.write_str(",")?;
            field(f, t.nsec != dt.nsec, t.nsec)?;
        }
        f.write_str(":")?;
        field(
            f,
            self.liveliness != d.liveliness,
            self.liveliness.code().into(),
        )?;
        f.write_str(",")?;
        let (l, dl) = (self.liveliness_lease, d.liveliness_lease);
        field(f, l.sec != dl.sec, l.sec)?;
        f.write_str(",")?;
        field(f, l.nsec != dl.nsec, l.nsec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn best_effort(depth: u64) -> Qos {
        Qos {
            reliability: Reliability::BestEffort,
            ..Qos::keep_last(depth)
        }
    }

    /// qos-components.txt: best effort, keep last 1 and 7, byte for byte both ways.
    #[test]
    fn qos_components_match_real_captures() {
        let text = std::fs::read_to_string("/work/shared/ros2/rmw_zenoh/qos-components.txt")
            .expect("qos-components.txt");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["2::,1:,:,:,,", "2::,7:,:,:,,"]);
        for (line, want) in lines.iter().zip([best_effort(1), best_effort(7)]) {
            assert_eq!(want.encode(), *line);
            assert_eq!(Qos::parse(line).unwrap(), want);
        }
    }

    /// The Humble token's chunk (`ros2 topic pub`: reliable, transient local, depth 1)
    /// and docs/design.md's examples (depths 10 and 7).
    #[test]
    fn token_and_design_md_examples() {
        let tl = Qos {
            durability: Durability::TransientLocal,
            ..Qos::keep_last(1)
        };
        assert_eq!(tl.encode(), ":1:,1:,:,:,,");
        assert_eq!(Qos::parse(":1:,1:,:,:,,").unwrap(), tl);
        assert_eq!(Qos::keep_last(10).encode(), "::,10:,:,:,,");
        assert_eq!(Qos::keep_last(7).encode(), "::,7:,:,:,,");
        // the default profile writes nothing at all
        assert_eq!(Qos::default().encode(), "::,:,:,:,,");
        assert_eq!(Qos::parse("::,:,:,:,,").unwrap(), Qos::default());
    }

    #[test]
    fn every_field_round_trips() {
        let q = Qos {
            reliability: Reliability::BestEffort,
            durability: Durability::TransientLocal,
            history: History::KeepAll,
            depth: 0,
            deadline: QosDuration { sec: 1, nsec: 500 },
            lifespan: QosDuration { sec: 10, nsec: 0 },
            liveliness: Liveliness::ManualByTopic,
            liveliness_lease: QosDuration { sec: 2, nsec: 3 },
        };
        let s = q.encode();
        assert_eq!(s, "2:1:2,0:1,500:10,0:3,2,3");
        assert_eq!(Qos::parse(&s).unwrap(), q);
    }

    #[test]
    fn adapted_like_rmw_zenoh() {
        let asked = Qos {
            reliability: Reliability::SystemDefault,
            durability: Durability::Unknown,
            history: History::SystemDefault,
            depth: 0,
            deadline: QosDuration::UNSPECIFIED,
            ..Qos::default()
        };
        assert_eq!(asked.adapted(), Qos::default());
    }

    #[test]
    fn malformed_chunks_are_named() {
        // (chunk, variant, the group or field it names)
        let cases = [
            ("::,7:,:,", "Groups", "found: 5"),
            ("::7:,:,:,,", "Fields", "\"history\""),
            ("::,7:,:,:,", "Fields", "\"liveliness\""),
            ("9::,7:,:,:,,", "Policy", "\"reliability\""),
            (":4:,7:,:,:,,", "Policy", "\"durability\""),
            ("::,7:,:,:2,,", "Policy", "\"liveliness\""),
            ("::,-7:,:,:,,", "Number", "\"depth\""),
            ("::,7:x,:,:,,", "Number", "\"deadline seconds\""),
        ];
        for (bad, variant, names) in cases {
            let e = format!("{:?}", Qos::parse(bad).unwrap_err());
            assert!(e.starts_with(variant) && e.contains(names), "{bad}: {e}");
        }
        assert!(matches!(
            Qos::parse(&":".repeat(300)),
            Err(QosError::TooLong { len: 300 })
        ));
        assert!(Qos::parse("::,99999999999999999999:,:,:,,").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(QosDuration::INFINITE.to_duration(), None);
        assert_eq!(
            QosDuration {
                sec: 1,
                nsec: 1_500_000_000
            }
            .to_duration(),
            Some(std::time::Duration::from_millis(2500))
        );
    }
}
