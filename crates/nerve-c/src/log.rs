//! Logging from C and C++: a thin adapter over `nerve::log` (the node's logger is made
//! on its first record and kept with the node's handle).

use crate::context::NodeObj;
use crate::handle::{self, Kind};
use crate::status::{c_str, guard, nerve_status_t, nerve_status_t::*, out, Error, Result};
use crate::types::nerve_node_t;
use nerve::log::{Level, LogError, Logger, SourceLocation};
use std::os::raw::{c_char, c_int};

/// Log levels (ROS 2's numbers).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug)]
pub enum nerve_log_level_t {
    /// Detail for developers.
    NERVE_LOG_DEBUG = 10,
    /// Normal operation.
    NERVE_LOG_INFO = 20,
    /// Something unexpected that the node handles.
    NERVE_LOG_WARN = 30,
    /// Something failed.
    NERVE_LOG_ERROR = 40,
    /// The node cannot go on.
    NERVE_LOG_FATAL = 50,
}

fn level(n: c_int) -> Result<Level> {
    u8::try_from(n)
        .ok()
        .and_then(|n| Level::from_number(n).ok())
        .ok_or_else(|| {
            Error::new(
                NERVE_ERR_INVALID_ARGUMENT,
                format!("log level {n} is none of NERVE_LOG_DEBUG (10), INFO (20), WARN (30), ERROR (40), FATAL (50)"),
            )
        })
}

fn log_err(e: LogError) -> Error {
    let code = match e {
        LogError::Topic(_) => NERVE_ERR_TOPIC,
        LogError::Publish(_) => NERVE_ERR_PUBLISH,
        LogError::TooLarge { .. } => NERVE_ERR_TOO_LARGE,
        LogError::BadLevel(_) | LogError::BadLevelNumber(_) | LogError::BadEnv { .. } => {
            NERVE_ERR_INVALID_ARGUMENT
        }
    };
    Error::new(code, e.to_string())
}

/// Runs `f` with the node's logger, made on first use (threshold from `NERVE_LOG_LEVEL`).
fn with_logger<R>(node: nerve_node_t, f: impl FnOnce(&Logger) -> Result<R>) -> Result<R> {
    handle::with(node.id, Kind::Node, |n: &NodeObj, _| {
        if n.1.get().is_none() {
            let logger = Logger::new(&n.0).map_err(log_err)?;
            let _ = n.1.set(logger);
        }
        f(n.1.get().expect("set above"))
    })?
}

/// Writes a record of `level` from `node`: to stderr and to `/rosout`, stamped by the
/// context's clock (simulation time when on). Below the node's threshold it does
/// nothing. `file` and `function` may be null; `message` may not.
///
/// # Safety
/// `message`, and `file` and `function` when not null, are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn nerve_node_log(
    node: nerve_node_t,
    level: c_int,
    message: *const c_char,
    file: *const c_char,
    function: *const c_char,
    line: u32,
) -> nerve_status_t {
    guard(|| {
        let level = self::level(level)?;
        let message = c_str(message, "message")?;
        let opt = |p: *const c_char, what| {
            if p.is_null() {
                Ok("")
            } else {
                c_str(p, what)
            }
        };
        let location = SourceLocation {
            file: opt(file, "file")?.to_string(),
            function: opt(function, "function")?.to_string(),
            line,
        };
        with_logger(node, |l| {
            l.log(level, message, location).map_err(log_err)?;
            Ok(NERVE_OK)
        })
    })
}

/// Sets the node's threshold: records below `level` are not written.
#[no_mangle]
pub extern "C" fn nerve_node_set_log_level(node: nerve_node_t, level: c_int) -> nerve_status_t {
    guard(|| {
        let level = self::level(level)?;
        with_logger(node, |l| {
            l.set_level(level);
            Ok(NERVE_OK)
        })
    })
}

/// Whether a record of `level` would be written (`enabled` gets it): lets a caller skip
/// formatting a message nobody reads.
///
/// # Safety
/// `enabled` points to writable storage.
#[no_mangle]
pub unsafe extern "C" fn nerve_node_log_enabled(
    node: nerve_node_t,
    level: c_int,
    enabled: *mut bool,
) -> nerve_status_t {
    guard(|| {
        let e = out(enabled, "enabled")?;
        let level = self::level(level)?;
        *e = with_logger(node, |l| Ok(l.enabled(level)))?;
        Ok(NERVE_OK)
    })
}
