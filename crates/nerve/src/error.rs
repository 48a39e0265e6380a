//! Error types, one enum per operation. Messages name the thing and the reason.

use std::time::Duration;
use thiserror::Error;

/// A topic or node name that breaks the grammar (see [`crate::name`]).
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("invalid name {name:?}: {reason}")]
pub struct NameError {
    /// The rejected name.
    pub name: String,
    /// Why it was rejected.
    pub reason: String,
}

/// Creating a [`crate::Context`] failed.
#[derive(Debug, Error)]
pub enum ContextError {
    /// The domain id is not a number in range.
    #[error("invalid domain id {value:?}: must be an integer from 0 to {max}")]
    InvalidDomain {
        /// What was given.
        value: String,
        /// Largest allowed id.
        max: u32,
    },
    /// The configuration file could not be read or parsed.
    #[error("config file {path}: {reason}")]
    ConfigFile {
        /// Path of the file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// An environment variable holds a value that is not allowed.
    #[error("{name}={value:?}: expected {expected}")]
    InvalidSetting {
        /// The variable.
        name: &'static str,
        /// What was given.
        value: String,
        /// What is allowed.
        expected: &'static str,
    },
    /// The state directory is not usable.
    #[error("state directory {path}: {reason}")]
    StateDir {
        /// The directory.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The wake-up doorbell in shared memory could not be opened.
    #[error("cannot open the wake-up doorbell {path}: {reason}")]
    Doorbell {
        /// Its path in /dev/shm.
        path: String,
        /// The system error (in the message, so not also a `source`: printed with its
        /// chain, the reason would show twice).
        reason: std::io::Error,
    },
    /// The deterministic replay of the domain could not be joined.
    #[error(transparent)]
    Lockstep(#[from] crate::time::lockstep::LockstepError),
    /// The simulation clock could not follow its topic.
    #[error("simulation time: {reason}")]
    SimClock {
        /// What went wrong.
        reason: std::io::Error,
    },
}

/// Creating a [`crate::Node`] failed.
#[derive(Debug, Error)]
pub enum NodeError {
    /// The node name breaks the grammar.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The shared-memory node could not be created.
    #[error("cannot create node {name:?}: {reason}")]
    Create {
        /// Node name.
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Errors of the network plane (Zenoh).
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum NetError {
    /// The Zenoh configuration file cannot be read or is invalid.
    #[error("zenoh configuration {path}: {reason}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The Zenoh session could not be opened (e.g. a listen endpoint is taken).
    #[error("cannot open the zenoh session: {0}")]
    Open(String),
    /// Declaring a publisher, subscriber, queryable or token failed.
    #[error("zenoh: cannot declare {what} on {key}: {reason}")]
    Declare {
        /// What was declared.
        what: &'static str,
        /// Key expression.
        key: String,
        /// Zenoh's reason.
        reason: String,
    },
    /// Sending on the network failed.
    #[error("zenoh: cannot send on {key}: {reason}")]
    Send {
        /// Key expression.
        key: String,
        /// Zenoh's reason.
        reason: String,
    },
    /// A discovery query failed.
    #[error("zenoh discovery: {0}")]
    Discovery(String),
    /// The access-control policy file cannot be used (boxed: it names file and line).
    #[cfg(feature = "net")]
    #[error(transparent)]
    Policy(Box<crate::net::policy::PolicyError>),
}

#[cfg(feature = "net")]
impl From<crate::net::policy::PolicyError> for NetError {
    fn from(e: crate::net::policy::PolicyError) -> Self {
        NetError::Policy(Box::new(e))
    }
}

/// Opening a publisher or subscriber on a topic failed.
#[derive(Debug, Error)]
pub enum TopicError {
    /// The topic name breaks the grammar.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The requested QoS is inconsistent.
    #[error("topic {topic}: invalid QoS: {reason}")]
    InvalidQos {
        /// Topic name.
        topic: String,
        /// What is inconsistent.
        reason: String,
    },
    /// The topic exists with another message type.
    #[error("topic {topic} has type {existing}, but {requested} was requested")]
    TypeMismatch {
        /// Topic name.
        topic: String,
        /// Type the topic was created with (name and layout).
        existing: String,
        /// Type asked for (name and layout).
        requested: String,
    },
    /// The topic exists with QoS settings this endpoint cannot work with.
    #[error("topic {topic}: incompatible QoS: {reason}")]
    IncompatibleQos {
        /// Topic name.
        topic: String,
        /// Which setting conflicts.
        reason: String,
    },
    /// The topic already has its maximum number of publishers or subscribers.
    #[error("topic {topic} already has its maximum of {max} {kind}")]
    TooManyEndpoints {
        /// Topic name.
        topic: String,
        /// "publishers" or "subscribers".
        kind: &'static str,
        /// The limit.
        max: usize,
    },
    /// The name exists but is not a Nerve topic (another messaging pattern or foreign service).
    #[error("topic {topic}: {reason}")]
    NotATopic {
        /// Topic name.
        topic: String,
        /// What was found instead.
        reason: String,
    },
    /// The message type cannot be carried (e.g. it needs more than 8-byte alignment).
    #[error("topic {topic}: unsupported message layout: {reason}")]
    UnsupportedLayout {
        /// Topic name.
        topic: String,
        /// Why.
        reason: String,
    },
    /// The shared-memory layer failed.
    #[error("topic {topic}: shared memory: {reason}")]
    Shm {
        /// Topic name.
        topic: String,
        /// The underlying failure.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Loaning a sample failed.
#[derive(Debug, Error)]
pub enum LoanError {
    /// The payload is larger than the topic's `max_payload`.
    #[error("topic {topic}: payload of {requested} bytes exceeds the maximum of {max} bytes")]
    PayloadTooLarge {
        /// Topic name.
        topic: String,
        /// Bytes asked for.
        requested: usize,
        /// QoS `max_payload`.
        max: usize,
    },
    /// All samples of the publisher's pool are in use (held by subscribers or loaned).
    #[error("topic {topic}: all samples are in use (loaned or held by subscribers); raise Qos::shm_budget or drop held samples")]
    PoolExhausted {
        /// Topic name.
        topic: String,
    },
    /// A type-erased loan's length does not fit the topic's layout.
    #[error("topic {topic}: a loan of {len} bytes does not fit {type_name}: {reason}")]
    BadLength {
        /// Topic name.
        topic: String,
        /// The topic's type.
        type_name: String,
        /// Bytes asked for.
        len: usize,
        /// What is wrong.
        reason: String,
    },
    /// Too many samples are loaned at once.
    #[error(
        "topic {topic}: {max} samples are on loan already, the most Qos::max_loans allows \
         (send or drop one first; the limit holds whoever subscribes)"
    )]
    TooManyLoans {
        /// Topic name.
        topic: String,
        /// The limit.
        max: usize,
    },
    /// The shared-memory layer failed.
    #[error("topic {topic}: shared memory: {reason}")]
    Shm {
        /// Topic name.
        topic: String,
        /// The underlying failure.
        reason: String,
    },
}

/// Publishing a sample failed.
#[derive(Debug, Error)]
pub enum PublishError {
    /// No sample could be loaned.
    #[error(transparent)]
    Loan(#[from] LoanError),
    /// A subscriber's queue stayed full for the whole back-pressure timeout.
    #[error("topic {topic}: a subscriber's queue stayed full for {timeout:?} (back-pressure); the sample was not delivered to it")]
    BackPressureTimeout {
        /// Topic name.
        topic: String,
        /// The QoS timeout.
        timeout: Duration,
    },
    /// Under back-pressure, a subscriber had not attached to this publisher yet and its
    /// queue was full, so the sample did not reach it.
    #[error("topic {topic}: sample reached {delivered} of {subscribers} subscribers (one had not attached yet and its queue was full)")]
    Undelivered {
        /// Topic name.
        topic: String,
        /// Subscribers that got the sample.
        delivered: usize,
        /// Subscribers connected.
        subscribers: usize,
    },
    /// A type-erased payload does not fit the topic's layout; nothing was sent.
    #[error("topic {topic}: a payload of {len} bytes does not fit {type_name}: {reason}")]
    BadPayload {
        /// Topic name.
        topic: String,
        /// The topic's type.
        type_name: String,
        /// Payload length in bytes.
        len: usize,
        /// What is wrong.
        reason: String,
    },
    /// A value could not be encoded (serde messages).
    #[error("topic {topic}: cannot encode value: {reason}")]
    Encode {
        /// Topic name.
        topic: String,
        /// Encoder message.
        reason: String,
    },
    /// The shared-memory layer failed.
    #[error("topic {topic}: shared memory: {reason}")]
    Shm {
        /// Topic name.
        topic: String,
        /// The underlying failure.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Receiving a sample failed.
#[derive(Debug, Error)]
pub enum RecvError {
    /// The shared-memory layer failed.
    #[error("topic {topic}: shared memory: {reason}")]
    Shm {
        /// Topic name.
        topic: String,
        /// The underlying failure.
        reason: String,
    },
    /// The subscriber already holds as many samples as it may (`Qos::max_borrowed`, or
    /// the topic's shared-memory limit): release one before taking more. The sample stays
    /// queued.
    #[error(
        "topic {topic}: this subscriber already holds {max} samples (its max_borrowed): \
         release one before taking more"
    )]
    TooManyHeld {
        /// Topic name.
        topic: String,
        /// Samples a subscriber may hold at once.
        max: usize,
    },
}

/// Decoding a serde message failed.
#[derive(Debug, Clone, Error)]
#[error("cannot decode {type_name}: {reason}")]
pub struct DecodeError {
    /// Type that was decoded.
    pub type_name: String,
    /// Decoder message.
    pub reason: String,
}

/// Waiting on a [`crate::WaitSet`] failed.
#[derive(Debug, Error)]
pub enum WaitError {
    /// The wait set is full.
    #[error("a wait set holds at most {max} entries")]
    Full {
        /// The limit.
        max: usize,
    },
    /// The system call failed.
    #[error("wait failed: {0}")]
    Os(std::io::Error),
}

/// Creating a service server or client failed.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// The service name breaks the grammar (same as topic names).
    #[error(transparent)]
    Name(#[from] NameError),
    /// The requested settings are inconsistent.
    #[error("service {service}: invalid QoS: {reason}")]
    InvalidQos {
        /// Service name.
        service: String,
        /// What is inconsistent.
        reason: String,
    },
    /// The service exists with another type.
    #[error("service {service} has type {existing}, but {requested} was requested")]
    TypeMismatch {
        /// Service name.
        service: String,
        /// Type the service was created with.
        existing: String,
        /// Type asked for.
        requested: String,
    },
    /// No such service (introspection only; typed clients create it).
    #[error("service {service} does not exist")]
    NotFound {
        /// Service name.
        service: String,
    },
    /// The name exists but is not a Nerve service.
    #[error("service {service}: {reason}")]
    NotAService {
        /// Service name.
        service: String,
        /// What was found instead.
        reason: String,
    },
    /// Another live server already serves the service.
    #[error("service {service} already has a live server")]
    AlreadyServed {
        /// Service name.
        service: String,
    },
    /// The service has its maximum number of clients.
    #[error("service {service} already has its maximum of {max} clients")]
    TooManyClients {
        /// Service name.
        service: String,
        /// The limit.
        max: usize,
    },
    /// A message type cannot be carried (e.g. it needs more than 8-byte alignment).
    #[error("service {service}: unsupported message layout: {reason}")]
    UnsupportedLayout {
        /// Service name.
        service: String,
        /// Why.
        reason: String,
    },
    /// The shared-memory layer failed.
    #[error("service {service}: shared memory: {reason}")]
    Shm {
        /// Service name.
        service: String,
        /// The underlying failure.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// A service call failed. Every variant names the service.
#[derive(Debug, Error)]
pub enum CallError {
    /// No server serves the service.
    #[error("service {service}: no server is running")]
    NoServer {
        /// Service name.
        service: String,
    },
    /// No response within the timeout.
    #[error("service {service}: no response within {timeout:?}")]
    Timeout {
        /// Service name.
        service: String,
        /// The call's timeout.
        timeout: Duration,
    },
    /// The server went away (died or stopped) before it responded.
    #[error("service {service}: the server went away before responding")]
    ServerGone {
        /// Service name.
        service: String,
    },
    /// The server's handler failed; its message is carried over.
    #[error("service {service}: handler failed: {message}")]
    Handler {
        /// Service name.
        service: String,
        /// The handler's error message.
        message: String,
    },
    /// The server rejected the request (malformed, or the handler produced no response).
    #[error("service {service}: request rejected: {reason}")]
    Rejected {
        /// Service name.
        service: String,
        /// The server's reason.
        reason: String,
    },
    /// The request is larger than the service allows; nothing was sent.
    #[error("service {service}: request of {requested} bytes exceeds the maximum of {max} bytes")]
    PayloadTooLarge {
        /// Service name.
        service: String,
        /// Bytes asked for.
        requested: usize,
        /// `ServiceQos::max_request`.
        max: usize,
    },
    /// A type-erased request payload does not fit the request type's layout; nothing was
    /// sent.
    #[error("service {service}: a request of {len} bytes does not fit {type_name}: {reason}")]
    BadPayload {
        /// Service name.
        service: String,
        /// The request type.
        type_name: String,
        /// Payload length in bytes.
        len: usize,
        /// What is wrong.
        reason: String,
    },
    /// Too many calls of this client are in flight.
    #[error("service {service}: more than {max} calls in flight (ServiceQos::max_in_flight)")]
    TooManyInFlight {
        /// Service name.
        service: String,
        /// The limit.
        max: usize,
    },
    /// The response violated the response type's layout; it was dropped.
    #[error("service {service}: malformed response: {reason}")]
    Malformed {
        /// Service name.
        service: String,
        /// What was wrong.
        reason: String,
    },
    /// The shared-memory layer failed.
    #[error("service {service}: shared memory: {reason}")]
    Shm {
        /// Service name.
        service: String,
        /// The underlying failure.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Serving a request failed.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The response is larger than the service allows; nothing was sent.
    #[error("service {service}: response of {requested} bytes exceeds the maximum of {max} bytes")]
    PayloadTooLarge {
        /// Service name.
        service: String,
        /// Bytes asked for.
        requested: usize,
        /// `ServiceQos::max_response`.
        max: usize,
    },
    /// A type-erased response payload does not fit the response type's layout; nothing
    /// was sent.
    #[error("service {service}: a response of {len} bytes does not fit {type_name}: {reason}")]
    BadPayload {
        /// Service name.
        service: String,
        /// The response type.
        type_name: String,
        /// Payload length in bytes.
        len: usize,
        /// What is wrong.
        reason: String,
    },
    /// The request was already answered (one response per request).
    #[error("service {service}: request {seq} was already answered")]
    AlreadyReplied {
        /// Service name.
        service: String,
        /// The request's call number.
        seq: u64,
    },
    /// The shared-memory layer failed.
    #[error("service {service}: shared memory: {reason}")]
    Shm {
        /// Service name.
        service: String,
        /// The underlying failure.
        reason: String,
    },
    /// The network plane failed.
    #[error(transparent)]
    Net(#[from] NetError),
}

/// Running an [`crate::Executor`] failed.
#[derive(Debug, Error)]
pub enum ExecError {
    /// Too many entities with an input to wait on.
    #[error("an executor waits on at most {max} subscriptions, services and clients")]
    Full {
        /// The limit.
        max: usize,
    },
    /// Receiving a sample failed.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// Serving a request failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// A call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Publishing failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// Opening a topic failed.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// Creating a service endpoint failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Creating a node failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// A state machine failed.
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// A worker thread could not start or panicked.
    #[error("executor thread: {0}")]
    Thread(String),
    /// Work that a higher layer put on the executor failed: serving an action or
    /// following its goals (an [`crate::action::ActionError`]; downcast the source to
    /// read it). Kept as a boxed error so this enum names no error of the layers above
    /// it: errors point down the layers only.
    #[error(transparent)]
    Work(Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// Defining or running a state machine failed.
#[derive(Debug, Error)]
pub enum MachineError {
    /// The spec text is not valid TOML or YAML for a machine.
    #[error("state machine spec: {reason}")]
    Parse {
        /// The parser's message.
        reason: String,
    },
    /// The spec file could not be read or parsed.
    #[error("state machine file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The spec is inconsistent.
    #[error("state machine {machine}: {reason}")]
    Invalid {
        /// Machine name.
        machine: String,
        /// What is wrong.
        reason: String,
    },
    /// A hook names a state that does not exist.
    #[error("state machine {machine}: no state named {state:?}")]
    UnknownState {
        /// Machine name.
        machine: String,
        /// The name given.
        state: String,
    },
    /// A trigger that no transition names.
    #[error("state machine {machine}: no transition is triggered by {trigger:?}")]
    UnknownTrigger {
        /// Machine name.
        machine: String,
        /// The trigger given.
        trigger: String,
    },
    /// A transition names a guard or action that was not registered.
    #[error(
        "state machine {machine}: {kind} {name:?} is named by a transition but not registered"
    )]
    UnknownHook {
        /// Machine name.
        machine: String,
        /// "guard" or "action".
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// Pass-through states kept triggering each other.
    #[error("state machine {machine}: more than {max} pass-through states in a row (a loop?)")]
    PassThroughLoop {
        /// Machine name.
        machine: String,
        /// The bound.
        max: usize,
    },
    /// Too many triggers queued and not yet handled.
    #[error("state machine {machine}: {max} triggers already queued")]
    InboxFull {
        /// Machine name.
        machine: String,
        /// The bound.
        max: usize,
    },
}

/// Setting up or running a [`crate::Scheduler`] failed.
#[derive(Debug, Error)]
pub enum SchedulerError {
    /// A node's settings are invalid.
    #[error("scheduler node {node}: {reason}")]
    InvalidNode {
        /// The node.
        node: String,
        /// What is wrong.
        reason: String,
    },
    /// Too many nodes.
    #[error("a scheduler runs at most {max} nodes")]
    TooManyNodes {
        /// The limit.
        max: usize,
    },
    /// Nothing to run.
    #[error("the scheduler has no nodes")]
    NoNodes,
    /// Opening the statistics topic failed.
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// Publishing statistics failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// The watchdog thread could not start.
    #[error("watchdog thread: {0}")]
    Thread(String),
}

/// A [`crate::tensor`] operation failed: creating or opening a pool, allocating a tensor
/// or opening one from a descriptor. Every message names the pool and the reason.
#[derive(Debug, Error)]
pub enum TensorError {
    /// The pool name is not 1 to 31 characters of `[A-Za-z0-9_-]`.
    #[error("invalid tensor pool name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The slot count or the slot size is out of range.
    #[error("tensor pool {pool}: {reason}")]
    InvalidSize {
        /// The pool.
        pool: String,
        /// What is out of range.
        reason: String,
    },
    /// `create` found the pool's file already there.
    #[error("tensor pool {pool} exists already ({path})")]
    Exists {
        /// The pool.
        pool: String,
        /// Its file.
        path: String,
    },
    /// `open` found no pool of that name in the domain.
    #[error("tensor pool {pool} does not exist ({path})")]
    NotFound {
        /// The pool.
        pool: String,
        /// The file looked for.
        path: String,
    },
    /// The file is a symbolic link, not a regular file, another user's, or writable by
    /// others: a pool is shared memory, so only this user's own file is mapped.
    #[error("tensor pool {pool}: refusing {path}: {reason}")]
    NotPrivate {
        /// The pool.
        pool: String,
        /// Its file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// /dev/shm has no room for the pool (its memory is reserved when it is created).
    #[error("tensor pool {pool}: /dev/shm has no room for {bytes} bytes")]
    NoSpace {
        /// The pool.
        pool: String,
        /// The pool's size.
        bytes: u64,
    },
    /// The file is no tensor pool, or its header contradicts itself or the file's size.
    #[error("tensor pool {pool}: {path} is not a valid pool: {reason}")]
    Corrupt {
        /// The pool.
        pool: String,
        /// Its file.
        path: String,
        /// What does not add up.
        reason: String,
    },
    /// The file has another layout version than this build reads.
    #[error(
        "tensor pool {pool}: file layout version {found}, this build reads version {supported}"
    )]
    Version {
        /// The pool.
        pool: String,
        /// The file's version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// `open_or_create` found the pool with other dimensions than it asked for.
    #[error("tensor pool {pool} exists with {slots} slots of {slot_bytes} bytes, not {want_slots} of {want_slot_bytes}")]
    Mismatch {
        /// The pool.
        pool: String,
        /// Its slot count.
        slots: usize,
        /// Its slot size in bytes.
        slot_bytes: usize,
        /// The slot count asked for.
        want_slots: usize,
        /// The slot size asked for (rounded up as `create` would).
        want_slot_bytes: usize,
    },
    /// Every handle record of the pool is in use by a live handle.
    #[error("tensor pool {pool}: all {records} handle records are in use (too many open handles)")]
    TooManyHandles {
        /// The pool.
        pool: String,
        /// The number of records.
        records: usize,
    },
    /// A system call on the pool's file failed.
    #[error("tensor pool {pool}: cannot {what} {path}: {source}")]
    Io {
        /// The pool.
        pool: String,
        /// Its file.
        path: String,
        /// What was being done.
        what: &'static str,
        /// The system error.
        source: std::io::Error,
    },
    /// Every slot holds a tensor (after reclaiming those of dead processes).
    #[error("tensor pool {pool} is full: all {slots} slots hold tensors")]
    Full {
        /// The pool.
        pool: String,
        /// Its slot count.
        slots: usize,
    },
    /// The tensor does not fit a slot.
    #[error("tensor pool {pool}: a {dtype} tensor of shape {shape:?} needs {}, a slot holds {slot_bytes} bytes",
        match bytes { Some(b) => format!("{b} bytes"), None => "more bytes than a u64 counts".to_string() })]
    TooLarge {
        /// The pool.
        pool: String,
        /// The shape asked for.
        shape: Vec<u64>,
        /// The element type.
        dtype: crate::tensor::DType,
        /// The bytes it needs (`None`: more than a `u64` counts).
        bytes: Option<u64>,
        /// The bytes a slot holds.
        slot_bytes: usize,
    },
    /// More dimensions than a tensor may have.
    #[error("tensor pool {pool}: {ndim} dimensions, at most {max}")]
    TooManyDims {
        /// The pool.
        pool: String,
        /// The dimensions asked for.
        ndim: usize,
        /// The limit.
        max: usize,
    },
    /// The descriptor belongs to another pool, or to an earlier pool of the same name.
    #[error("tensor pool {pool}: the descriptor is of {reason}")]
    WrongPool {
        /// The pool.
        pool: String,
        /// Whose it is.
        reason: String,
    },
    /// The descriptor's slot is not a slot of the pool.
    #[error("tensor pool {pool}: descriptor slot {slot} is out of range ({slots} slots)")]
    SlotOutOfRange {
        /// The pool.
        pool: String,
        /// The descriptor's slot.
        slot: u32,
        /// The pool's slot count.
        slots: usize,
    },
    /// The descriptor's element type code is none of [`crate::tensor::DType`]'s.
    #[error("tensor pool {pool}: descriptor has unknown dtype code {code}")]
    UnknownDType {
        /// The pool.
        pool: String,
        /// The code.
        code: u8,
    },
    /// The descriptor's shape, byte length or reserved bytes do not add up, or differ
    /// from what the slot holds.
    #[error("tensor pool {pool}: bad descriptor: {reason}")]
    BadShape {
        /// The pool.
        pool: String,
        /// What does not add up.
        reason: String,
    },
    /// The descriptor's tensor was freed (and its slot maybe reused) since it was made.
    #[error("tensor pool {pool}: the descriptor of slot {slot} generation {generation} is stale: that tensor was freed (the slot is at generation {current})")]
    Stale {
        /// The pool.
        pool: String,
        /// The slot.
        slot: u32,
        /// The descriptor's generation.
        generation: u32,
        /// The slot's generation now.
        current: u32,
    },
    /// The descriptor's slot is still being written (never frozen): it cannot be opened.
    #[error("tensor pool {pool}: slot {slot} is still being written (not frozen)")]
    Unpublished {
        /// The pool.
        pool: String,
        /// The slot.
        slot: u32,
    },
    /// The slot's shared reference count is at its limit.
    #[error("tensor pool {pool}: slot {slot} has as many references as a slot counts")]
    TooManyReferences {
        /// The pool.
        pool: String,
        /// The slot.
        slot: u32,
    },
}
