//! Status codes, the thread-local error message and the guard every entry point runs in.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call did. `NERVE_OK` and `NERVE_NOTHING` are not errors; every other code
/// leaves a message naming the thing and the reason in `nerve_last_error()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum nerve_status_t {
    /// Done.
    NERVE_OK = 0,
    /// Nothing was there: no sample queued, no reply yet, nothing within the timeout.
    NERVE_NOTHING = 1,
    /// A required pointer argument was null.
    NERVE_ERR_NULL = 2,
    /// An argument is out of range or malformed (names, sizes, QoS, UTF-8).
    NERVE_ERR_INVALID_ARGUMENT = 3,
    /// The handle is null or was never issued.
    NERVE_ERR_BAD_HANDLE = 4,
    /// The handle was released (double free, use after free, a loan after send), or
    /// the thread that created it has exited.
    NERVE_ERR_STALE_HANDLE = 5,
    /// The handle is of another kind than the call expects.
    NERVE_ERR_WRONG_KIND = 6,
    /// Two handles of one call come from different contexts.
    NERVE_ERR_WRONG_CONTEXT = 7,
    /// A type does not match (a struct's layout hash differs from the topic's, a
    /// payload's size does not fit the type).
    NERVE_ERR_TYPE_MISMATCH = 8,
    /// A schema text is malformed or claims another layout.
    NERVE_ERR_SCHEMA = 9,
    /// The context could not be opened (configuration, domain, state directory).
    NERVE_ERR_CONTEXT = 10,
    /// The node could not be created.
    NERVE_ERR_NODE = 11,
    /// The topic could not be opened.
    NERVE_ERR_TOPIC = 12,
    /// No sample could be loaned (pool exhausted, too large, too many loans).
    NERVE_ERR_LOAN = 13,
    /// A sample could not be sent.
    NERVE_ERR_PUBLISH = 14,
    /// A sample could not be received.
    NERVE_ERR_RECV = 15,
    /// A service endpoint could not be opened.
    NERVE_ERR_SERVICE = 16,
    /// A call failed for a reason without its own code (shared memory or network
    /// failure); the typed call failures have theirs (`NERVE_ERR_NO_SERVER` and after).
    NERVE_ERR_CALL = 17,
    /// The server left while the call was in flight.
    NERVE_ERR_SERVER_GONE = 18,
    /// A request could not be taken or answered.
    NERVE_ERR_SERVE = 19,
    /// Executor or wait set failure.
    NERVE_ERR_EXEC = 20,
    /// A callback reported failure (its message is kept).
    NERVE_ERR_CALLBACK = 21,
    /// A parameter call failed (unknown, read-only, wrong type, out of range).
    NERVE_ERR_PARAM = 22,
    /// An action call failed.
    NERVE_ERR_ACTION = 23,
    /// A tensor pool call failed.
    NERVE_ERR_TENSOR = 24,
    /// The object is in use by a call further up this thread's stack (an executor
    /// spun from its own callback).
    NERVE_ERR_BUSY = 25,
    /// A caller's buffer is too small; the size needed is reported.
    NERVE_ERR_BUFFER_TOO_SMALL = 26,
    /// A call timed out (no response, no action result, no transform within the time).
    NERVE_ERR_TIMEOUT = 27,
    /// A bug in Nerve: a Rust panic was caught at the ABI.
    NERVE_ERR_PANIC = 28,
    // Typed failures (issue 45), mapped from the Rust errors by `typed_status` below.
    /// No server serves the service or action (Rust `CallError::NoServer`).
    NERVE_ERR_NO_SERVER = 29,
    /// The server's handler failed; its message is carried over (`CallError::Handler`).
    NERVE_ERR_HANDLER_FAILED = 30,
    /// A payload is larger than its service or topic allows (`max_request`,
    /// `max_response`, `max_payload`); nothing was sent (`CallError::PayloadTooLarge`,
    /// `LoanError::PayloadTooLarge`, `ServeError::PayloadTooLarge`).
    NERVE_ERR_TOO_LARGE = 31,
    /// More calls of this client are in flight than `ServiceQos::max_in_flight`
    /// (`CallError::TooManyInFlight`); nothing was sent.
    NERVE_ERR_TOO_MANY_IN_FLIGHT = 32,
    /// The server rejected the request or the goal, with its reason
    /// (`CallError::Rejected`, `ActionError::Rejected`).
    NERVE_ERR_REJECTED = 33,
    /// A response broke its type's layout and was dropped (`CallError::Malformed`).
    NERVE_ERR_MALFORMED = 34,
    /// The handle belongs to another thread's table (its objects are used on the thread
    /// that created them; destroying or releasing them works from any thread).
    NERVE_ERR_WRONG_THREAD = 35,
}

use nerve_status_t::*;

/// A failed call: its code and message.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: nerve_status_t,
    pub(crate) message: String,
}

impl Error {
    /// An error with `code` and `message`.
    pub(crate) fn new(code: nerve_status_t, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }
}

/// The result of the body of an entry point.
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// Maps a library error to `code`, keeping its message.
pub(crate) fn err<E: std::fmt::Display>(code: nerve_status_t) -> impl FnOnce(E) -> Error {
    move |e| Error::new(code, e.to_string())
}

// ---------------------------------------------------------------------------------------
// Typed failures: the one mapping from the Rust errors to status codes (issue 45). Every
// entry point that calls, publishes or acts maps its error here, so one failure has one
// code whichever call met it.
// ---------------------------------------------------------------------------------------

/// The status code of a failed service call.
pub(crate) fn call_status(e: &nerve::CallError) -> nerve_status_t {
    use nerve::CallError as C;
    match e {
        C::NoServer { .. } => NERVE_ERR_NO_SERVER,
        C::Timeout { .. } => NERVE_ERR_TIMEOUT,
        C::ServerGone { .. } => NERVE_ERR_SERVER_GONE,
        C::Handler { .. } => NERVE_ERR_HANDLER_FAILED,
        C::Rejected { .. } => NERVE_ERR_REJECTED,
        C::PayloadTooLarge { .. } => NERVE_ERR_TOO_LARGE,
        C::BadPayload { .. } => NERVE_ERR_TYPE_MISMATCH,
        C::TooManyInFlight { .. } => NERVE_ERR_TOO_MANY_IN_FLIGHT,
        C::Malformed { .. } => NERVE_ERR_MALFORMED,
        C::Shm { .. } | C::Net(_) => NERVE_ERR_CALL,
    }
}

/// The status code of a failed loan: a payload over the topic's maximum is
/// `NERVE_ERR_TOO_LARGE`, one not fitting the type `NERVE_ERR_TYPE_MISMATCH`, the rest
/// `otherwise`.
pub(crate) fn loan_status(e: &nerve::LoanError, otherwise: nerve_status_t) -> nerve_status_t {
    match e {
        nerve::LoanError::PayloadTooLarge { .. } => NERVE_ERR_TOO_LARGE,
        nerve::LoanError::BadLength { .. } => NERVE_ERR_TYPE_MISMATCH,
        _ => otherwise,
    }
}

/// The status code of a failed publish (its loan's failures as `loan_status`).
pub(crate) fn publish_status(e: &nerve::PublishError) -> nerve_status_t {
    match e {
        nerve::PublishError::Loan(l) => loan_status(l, NERVE_ERR_PUBLISH),
        nerve::PublishError::BadPayload { .. } => NERVE_ERR_TYPE_MISMATCH,
        _ => NERVE_ERR_PUBLISH,
    }
}

/// The status code of a failed answer to a request.
pub(crate) fn serve_status(e: &nerve::ServeError) -> nerve_status_t {
    match e {
        nerve::ServeError::PayloadTooLarge { .. } => NERVE_ERR_TOO_LARGE,
        nerve::ServeError::BadPayload { .. } => NERVE_ERR_TYPE_MISMATCH,
        _ => NERVE_ERR_SERVE,
    }
}

/// The status code of a failed action operation: the call, loan and publish failures it
/// wraps keep their codes; a rejected goal is `NERVE_ERR_REJECTED`, a server gone
/// `NERVE_ERR_SERVER_GONE`, a result not in time `NERVE_ERR_TIMEOUT`, the rest
/// `NERVE_ERR_ACTION`.
pub(crate) fn action_status(e: &nerve::action::ActionError) -> nerve_status_t {
    use nerve::action::ActionError as A;
    match e {
        A::Call(c) => call_status(c),
        A::Rejected { .. } => NERVE_ERR_REJECTED,
        A::ServerGone { .. } => NERVE_ERR_SERVER_GONE,
        A::Timeout { .. } => NERVE_ERR_TIMEOUT,
        A::Loan(l) => loan_status(l, NERVE_ERR_ACTION),
        A::Publish(p) => match publish_status(p) {
            NERVE_ERR_PUBLISH => NERVE_ERR_ACTION,
            typed => typed,
        },
        A::Serve(s) => match serve_status(s) {
            NERVE_ERR_SERVE => NERVE_ERR_ACTION,
            typed => typed,
        },
        _ => NERVE_ERR_ACTION,
    }
}

/// `e` as an entry point's error, with its typed code (`call_status`).
pub(crate) fn call_error(e: nerve::CallError) -> Error {
    Error::new(call_status(&e), e.to_string())
}

/// `e` as an entry point's error, with its typed code (`action_status`).
pub(crate) fn action_error(e: nerve::action::ActionError) -> Error {
    Error::new(action_status(&e), e.to_string())
}

thread_local! {
    /// The message of the last failed call on this thread.
    static LAST: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last(message: &str) {
    // an interior NUL would end the C string early; show it instead
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = Some(text));
}

/// Runs an entry point's body: catches panics, records the message of a failure and
/// returns the status code. Nothing unwinds across the ABI.
pub(crate) fn guard<F: FnOnce() -> Result<nerve_status_t>>(f: F) -> nerve_status_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            set_last(&e.message);
            e.code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            set_last(&format!(
                "internal error (a bug in Nerve, please report): {what}"
            ));
            NERVE_ERR_PANIC
        }
    }
}

/// Reads a C string argument named `what`.
pub(crate) fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::new(NERVE_ERR_NULL, format!("{what} is null")));
    }
    // SAFETY: the caller passes a NUL-terminated string that lives for the call (the
    // documented contract of every `const char*` parameter).
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|e| {
        Error::new(
            NERVE_ERR_INVALID_ARGUMENT,
            format!("{what} is not UTF-8: {e}"),
        )
    })
}

/// Checks an out-pointer argument named `what` and returns it as a reference.
pub(crate) fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T> {
    // SAFETY: non-null out-pointers point to writable, aligned storage of `T` for the
    // call's duration (the documented contract of every out parameter).
    unsafe { p.as_mut() }.ok_or_else(|| Error::new(NERVE_ERR_NULL, format!("{what} is null")))
}

/// A byte range argument (`data`, `len`) named `what`; null is allowed when `len` is 0.
pub(crate) fn bytes<'a>(data: *const u8, len: usize, what: &str) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(Error::new(
            NERVE_ERR_NULL,
            format!("{what} is null but its length is {len}"),
        ));
    }
    // SAFETY: the caller passes `len` readable bytes at `data` that stay unchanged for
    // the call (the documented contract of every (pointer, length) parameter).
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

/// The message of the last failed call on this thread ("" if none). Valid until the
/// next failing call on this thread.
#[no_mangle]
pub extern "C" fn nerve_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ref().map_or(c"".as_ptr(), |s| s.as_ptr()))
}

/// The name of a status code (`"NERVE_ERR_TOPIC"`), a static string.
#[no_mangle]
pub extern "C" fn nerve_status_name(code: i32) -> *const c_char {
    // an int from C, not the enum: any value may arrive
    const ALL: [nerve_status_t; 36] = [
        NERVE_OK,
        NERVE_NOTHING,
        NERVE_ERR_NULL,
        NERVE_ERR_INVALID_ARGUMENT,
        NERVE_ERR_BAD_HANDLE,
        NERVE_ERR_STALE_HANDLE,
        NERVE_ERR_WRONG_KIND,
        NERVE_ERR_WRONG_CONTEXT,
        NERVE_ERR_TYPE_MISMATCH,
        NERVE_ERR_SCHEMA,
        NERVE_ERR_CONTEXT,
        NERVE_ERR_NODE,
        NERVE_ERR_TOPIC,
        NERVE_ERR_LOAN,
        NERVE_ERR_PUBLISH,
        NERVE_ERR_RECV,
        NERVE_ERR_SERVICE,
        NERVE_ERR_CALL,
        NERVE_ERR_SERVER_GONE,
        NERVE_ERR_SERVE,
        NERVE_ERR_EXEC,
        NERVE_ERR_CALLBACK,
        NERVE_ERR_PARAM,
        NERVE_ERR_ACTION,
        NERVE_ERR_TENSOR,
        NERVE_ERR_BUSY,
        NERVE_ERR_BUFFER_TOO_SMALL,
        NERVE_ERR_TIMEOUT,
        NERVE_ERR_PANIC,
        NERVE_ERR_NO_SERVER,
        NERVE_ERR_HANDLER_FAILED,
        NERVE_ERR_TOO_LARGE,
        NERVE_ERR_TOO_MANY_IN_FLIGHT,
        NERVE_ERR_REJECTED,
        NERVE_ERR_MALFORMED,
        NERVE_ERR_WRONG_THREAD,
    ];
    let Some(&known) = ALL.iter().find(|c| **c as i32 == code) else {
        return c"(unknown status)".as_ptr();
    };
    let name: &'static CStr = match known {
        NERVE_OK => c"NERVE_OK",
        NERVE_NOTHING => c"NERVE_NOTHING",
        NERVE_ERR_NULL => c"NERVE_ERR_NULL",
        NERVE_ERR_INVALID_ARGUMENT => c"NERVE_ERR_INVALID_ARGUMENT",
        NERVE_ERR_BAD_HANDLE => c"NERVE_ERR_BAD_HANDLE",
        NERVE_ERR_STALE_HANDLE => c"NERVE_ERR_STALE_HANDLE",
        NERVE_ERR_WRONG_KIND => c"NERVE_ERR_WRONG_KIND",
        NERVE_ERR_WRONG_CONTEXT => c"NERVE_ERR_WRONG_CONTEXT",
        NERVE_ERR_TYPE_MISMATCH => c"NERVE_ERR_TYPE_MISMATCH",
        NERVE_ERR_SCHEMA => c"NERVE_ERR_SCHEMA",
        NERVE_ERR_CONTEXT => c"NERVE_ERR_CONTEXT",
        NERVE_ERR_NODE => c"NERVE_ERR_NODE",
        NERVE_ERR_TOPIC => c"NERVE_ERR_TOPIC",
        NERVE_ERR_LOAN => c"NERVE_ERR_LOAN",
        NERVE_ERR_PUBLISH => c"NERVE_ERR_PUBLISH",
        NERVE_ERR_RECV => c"NERVE_ERR_RECV",
        NERVE_ERR_SERVICE => c"NERVE_ERR_SERVICE",
        NERVE_ERR_CALL => c"NERVE_ERR_CALL",
        NERVE_ERR_SERVER_GONE => c"NERVE_ERR_SERVER_GONE",
        NERVE_ERR_SERVE => c"NERVE_ERR_SERVE",
        NERVE_ERR_EXEC => c"NERVE_ERR_EXEC",
        NERVE_ERR_CALLBACK => c"NERVE_ERR_CALLBACK",
        NERVE_ERR_PARAM => c"NERVE_ERR_PARAM",
        NERVE_ERR_ACTION => c"NERVE_ERR_ACTION",
        NERVE_ERR_TENSOR => c"NERVE_ERR_TENSOR",
        NERVE_ERR_BUSY => c"NERVE_ERR_BUSY",
        NERVE_ERR_BUFFER_TOO_SMALL => c"NERVE_ERR_BUFFER_TOO_SMALL",
        NERVE_ERR_TIMEOUT => c"NERVE_ERR_TIMEOUT",
        NERVE_ERR_PANIC => c"NERVE_ERR_PANIC",
        NERVE_ERR_NO_SERVER => c"NERVE_ERR_NO_SERVER",
        NERVE_ERR_HANDLER_FAILED => c"NERVE_ERR_HANDLER_FAILED",
        NERVE_ERR_TOO_LARGE => c"NERVE_ERR_TOO_LARGE",
        NERVE_ERR_TOO_MANY_IN_FLIGHT => c"NERVE_ERR_TOO_MANY_IN_FLIGHT",
        NERVE_ERR_REJECTED => c"NERVE_ERR_REJECTED",
        NERVE_ERR_MALFORMED => c"NERVE_ERR_MALFORMED",
        NERVE_ERR_WRONG_THREAD => c"NERVE_ERR_WRONG_THREAD",
    };
    name.as_ptr()
}

/// Sets the message a callback's failure reports (call it before returning non-zero
/// from a callback); the executor's error then carries it, and so does the error of a
/// managed node's transition whose callback failed (`nerve_managed_trigger`).
///
/// # Safety
/// `message` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nerve_callback_fail(message: *const c_char) {
    let text = c_str(message, "message").unwrap_or("(no message)");
    crate::exec::set_callback_message(text);
}
