//! Logging: leveled records a node writes to stderr and publishes on [`LOG_TOPIC`]
//! (`/rosout`, ROS 2's name), where `nerve log echo`, the Foxglove bridge (its Log
//! panel) and any subscriber read them.
//!
//! One home for every door: Rust calls [`Logger`] directly, C and C++ call it through
//! the C ABI (`nerve_node_log`), so a record has the same fields, levels, stamp (the
//! context's clock: simulation time when it is on) and stderr line whichever language
//! wrote it.
//!
//! A record is a [`Serde`] message (postcard): text of any length, nothing cut. A
//! record larger than [`MAX_RECORD`] is refused with [`LogError::TooLarge`] (still
//! written to stderr); a record that cannot be published (no loan free) is counted in
//! [`Logger::dropped`] and the error returned, never blocking the caller.

use crate::error::{PublishError, TopicError};
use crate::message::{Serde, SerdeMessage};
use crate::qos::Qos;
use crate::topic::publisher::Publisher;
use crate::Node;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

/// The topic every node's records go to (ROS 2's `/rosout`).
pub const LOG_TOPIC: &str = "/rosout";

/// The environment variable that sets the default threshold (`debug`, `info`, `warn`,
/// `error`, `fatal`; default `info`).
pub const LEVEL_ENV: &str = "NERVE_LOG_LEVEL";

/// The largest encoded record, bytes.
pub const MAX_RECORD: usize = 1024 * 1024;

/// How severe a record is. The numbers are ROS 2's (`rcl_interfaces/msg/Log`), so a
/// record converts to ROS 2 and back without a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Level {
    /// Detail for developers.
    Debug = 10,
    /// Normal operation.
    Info = 20,
    /// Something unexpected that the node handles.
    Warn = 30,
    /// Something failed.
    Error = 40,
    /// The node cannot go on.
    Fatal = 50,
}

impl Level {
    /// Every level, least severe first.
    pub const ALL: [Level; 5] = [
        Level::Debug,
        Level::Info,
        Level::Warn,
        Level::Error,
        Level::Fatal,
    ];

    /// The level of ROS 2 number `n` (10, 20, 30, 40, 50).
    pub fn from_number(n: u8) -> Result<Level, LogError> {
        Level::ALL
            .into_iter()
            .find(|l| *l as u8 == n)
            .ok_or(LogError::BadLevelNumber(n))
    }

    /// The upper-case name used on stderr: `DEBUG`, `INFO`, `WARN`, `ERROR`, `FATAL`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
            Level::Fatal => "FATAL",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = LogError;

    /// `debug`, `info`, `warn` (or `warning`), `error`, `fatal`, in any case.
    fn from_str(s: &str) -> Result<Level, LogError> {
        match s.to_ascii_lowercase().as_str() {
            "debug" => Ok(Level::Debug),
            "info" => Ok(Level::Info),
            "warn" | "warning" => Ok(Level::Warn),
            "error" => Ok(Level::Error),
            "fatal" => Ok(Level::Fatal),
            _ => Err(LogError::BadLevel(s.to_string())),
        }
    }
}

/// Where in the source a record was written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLocation {
    /// Source file.
    pub file: String,
    /// Function (empty where the language does not say, as in Rust).
    pub function: String,
    /// Line.
    pub line: u32,
}

impl SourceLocation {
    /// The caller's file and line (Rust has no function name at run time).
    #[track_caller]
    pub fn caller() -> SourceLocation {
        let l = std::panic::Location::caller();
        SourceLocation {
            file: l.file().to_string(),
            function: String::new(),
            line: l.line(),
        }
    }
}

/// One log record, as published on [`LOG_TOPIC`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// When it was written: the context's clock, ns (simulation time when it is on).
    pub stamp_ns: i64,
    /// Severity.
    pub level: Level,
    /// The writing node's full name (`/ns/name`).
    pub node: String,
    /// The text.
    pub message: String,
    /// Where it was written.
    pub location: SourceLocation,
}

impl SerdeMessage for LogRecord {
    const TYPE_NAME: &'static str = "nerve/Log";
}

impl fmt::Display for LogRecord {
    /// `[WARN] [1733580000.123456789] [/ns/node]: text`, as ROS 2's console prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, ns) = (
            self.stamp_ns.div_euclid(1_000_000_000),
            self.stamp_ns.rem_euclid(1_000_000_000),
        );
        write!(
            f,
            "[{}] [{s}.{ns:09}] [{}]: {}",
            self.level, self.node, self.message
        )
    }
}

/// Logging failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A level name that is none of `debug`, `info`, `warn`, `error`, `fatal`.
    #[error("unknown log level {0:?}: expected debug, info, warn, error or fatal")]
    BadLevel(String),
    /// A level number that is none of ROS 2's 10, 20, 30, 40, 50.
    #[error("unknown log level number {0}: expected 10, 20, 30, 40 or 50")]
    BadLevelNumber(u8),
    /// [`LEVEL_ENV`] holds no level.
    #[error("{LEVEL_ENV}={value:?}: expected debug, info, warn, error or fatal")]
    BadEnv {
        /// What the variable holds.
        value: String,
    },
    /// The record is larger than [`MAX_RECORD`]; it was written to stderr only.
    #[error("log record of {len} bytes exceeds the maximum of {MAX_RECORD} bytes; written to stderr only")]
    TooLarge {
        /// Encoded size.
        len: usize,
    },
    /// The log topic could not be opened.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// The record could not be published (counted in [`Logger::dropped`]).
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// The QoS of [`LOG_TOPIC`]: every node of a system may publish (256 publishers), a
/// late reader gets each publisher's last 16 records (when that logger next writes or
/// [`Logger::update_connections`] runs).
pub fn log_qos() -> Qos {
    Qos::default()
        .max_endpoints(256, 16)
        .depth(256)
        .history(16)
        .payload(4096, MAX_RECORD)
}

/// The threshold [`LEVEL_ENV`] sets (`Info` when unset).
pub fn level_from_env() -> Result<Level, LogError> {
    match std::env::var(LEVEL_ENV) {
        Err(_) => Ok(Level::Info),
        Ok(v) => v.parse().map_err(|_| LogError::BadEnv { value: v }),
    }
}

/// A node's logger: filters by level, writes each record to stderr and publishes it.
pub struct Logger {
    node: Node,
    publisher: Publisher<Serde<LogRecord>>,
    level: Cell<Level>,
    stderr: bool,
    dropped: Cell<u64>,
}

impl Logger {
    /// A logger of `node`: threshold from [`LEVEL_ENV`], records on stderr and on
    /// [`LOG_TOPIC`].
    pub fn new(node: &Node) -> Result<Logger, LogError> {
        Logger::with(node, level_from_env()?, true)
    }

    /// A logger with threshold `level`, writing to stderr if `stderr`.
    pub fn with(node: &Node, level: Level, stderr: bool) -> Result<Logger, LogError> {
        let publisher = node
            .publisher::<Serde<LogRecord>>(LOG_TOPIC)
            .qos(log_qos())
            .create()?;
        Ok(Logger {
            node: node.clone(),
            publisher,
            level: Cell::new(level),
            stderr,
            dropped: Cell::new(0),
        })
    }

    /// The threshold: records below it are not written.
    pub fn level(&self) -> Level {
        self.level.get()
    }

    /// Sets the threshold.
    pub fn set_level(&self, level: Level) {
        self.level.set(level);
    }

    /// Whether a record of `level` would be written.
    pub fn enabled(&self, level: Level) -> bool {
        level >= self.level.get()
    }

    /// Records that could not be published (they reached stderr).
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Hands readers that joined since the last record this logger's last 16 records
    /// (logging does it too; call it from idle loops to serve late readers sooner).
    pub fn update_connections(&self) {
        self.publisher.update_connections();
    }

    /// Writes `message` at `level` from `location` (nothing when below the threshold).
    pub fn log(
        &self,
        level: Level,
        message: &str,
        location: SourceLocation,
    ) -> Result<(), LogError> {
        if !self.enabled(level) {
            return Ok(());
        }
        let record = LogRecord {
            stamp_ns: self.node.context().clock().now_ns(),
            level,
            node: self.node.full_name(),
            message: message.to_string(),
            location,
        };
        if self.stderr {
            // a closed stderr is not the caller's failure
            let _ = writeln!(std::io::stderr().lock(), "{record}");
        }
        let len = crate::message::serde_encode(&record)
            .map(|b| b.len())
            .unwrap_or(0);
        if len > MAX_RECORD {
            self.dropped.set(self.dropped.get() + 1);
            return Err(LogError::TooLarge { len });
        }
        self.publisher.publish_value(&record).map_err(|e| {
            self.dropped.set(self.dropped.get() + 1);
            LogError::from(e)
        })
    }

    /// Writes at [`Level::Debug`] from the caller's line.
    #[track_caller]
    pub fn debug(&self, message: &str) -> Result<(), LogError> {
        self.log(Level::Debug, message, SourceLocation::caller())
    }

    /// Writes at [`Level::Info`] from the caller's line.
    #[track_caller]
    pub fn info(&self, message: &str) -> Result<(), LogError> {
        self.log(Level::Info, message, SourceLocation::caller())
    }

    /// Writes at [`Level::Warn`] from the caller's line.
    #[track_caller]
    pub fn warn(&self, message: &str) -> Result<(), LogError> {
        self.log(Level::Warn, message, SourceLocation::caller())
    }

    /// Writes at [`Level::Error`] from the caller's line.
    #[track_caller]
    pub fn error(&self, message: &str) -> Result<(), LogError> {
        self.log(Level::Error, message, SourceLocation::caller())
    }

    /// Writes at [`Level::Fatal`] from the caller's line.
    #[track_caller]
    pub fn fatal(&self, message: &str) -> Result<(), LogError> {
        self.log(Level::Fatal, message, SourceLocation::caller())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Context};
    use std::time::Duration;

    fn ctx() -> Context {
        // the tests share a domain: each reads only its own node's records
        let dir = std::env::temp_dir().join("nerve-tests/");
        Context::new(Config::default().domain(619).unwrap().state_dir(dir)).unwrap()
    }

    /// The next record of node `name`, skipping other tests' records.
    fn next_of(sub: &crate::Subscriber<Serde<LogRecord>>, name: &str) -> LogRecord {
        loop {
            let s = sub
                .recv_timeout(Duration::from_secs(5))
                .unwrap()
                .expect("a record");
            let r = s.decode().unwrap();
            if r.node == name {
                return r;
            }
        }
    }

    #[test]
    fn levels_parse_and_number_as_ros2() {
        assert_eq!("WARNING".parse::<Level>().unwrap(), Level::Warn);
        assert_eq!("fatal".parse::<Level>().unwrap(), Level::Fatal);
        assert!(matches!("loud".parse::<Level>(), Err(LogError::BadLevel(s)) if s == "loud"));
        assert_eq!(Level::from_number(40).unwrap(), Level::Error);
        assert!(Level::from_number(41).is_err());
        assert!(Level::Debug < Level::Info && Level::Error < Level::Fatal);
    }

    #[test]
    fn a_record_reaches_a_subscriber_with_its_fields_and_the_threshold_filters() {
        let ctx = ctx();
        let node = ctx.node("talker").namespace("/robot").create().unwrap();
        let reader = ctx.node("reader").create().unwrap();
        let sub = reader
            .subscriber::<Serde<LogRecord>>(LOG_TOPIC)
            .qos(log_qos())
            .create()
            .unwrap();
        let log = Logger::with(&node, Level::Info, false).unwrap();
        log.debug("hidden").unwrap();
        let line = line!() + 1;
        log.warn("speed 2.5 m/s ünïcödé").unwrap();
        let r = next_of(&sub, "/robot/talker");
        assert_eq!(r.level, Level::Warn);
        assert_eq!(r.node, "/robot/talker");
        assert_eq!(r.message, "speed 2.5 m/s ünïcödé");
        assert_eq!(r.location.line, line);
        assert!(
            r.location.file.ends_with("log/mod.rs"),
            "{}",
            r.location.file
        );
        assert!(r.stamp_ns > 0);
        // the debug record was below the threshold: the next one is the one after it
        log.set_level(Level::Debug);
        log.debug("now shown").unwrap();
        let r = next_of(&sub, "/robot/talker");
        assert_eq!((r.level, r.message.as_str()), (Level::Debug, "now shown"));
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn an_oversized_record_is_refused_and_counted() {
        let ctx = ctx();
        let node = ctx.node("big").create().unwrap();
        let log = Logger::with(&node, Level::Info, false).unwrap();
        let text = "x".repeat(MAX_RECORD + 1);
        assert!(matches!(log.info(&text), Err(LogError::TooLarge { len }) if len > MAX_RECORD));
        assert_eq!(log.dropped(), 1);
    }

    #[test]
    fn the_stderr_line_reads_as_ros2s() {
        let r = LogRecord {
            stamp_ns: 1_500_000_001,
            level: Level::Error,
            node: "/n".into(),
            message: "boom".into(),
            location: SourceLocation::default(),
        };
        assert_eq!(r.to_string(), "[ERROR] [1.500000001] [/n]: boom");
    }
}
