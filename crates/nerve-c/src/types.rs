//! The handle types of the C ABI: one `u64` each, in a struct per kind so C compilers
//! tell them apart. Written out (not by a macro) so cbindgen sees them.

/// A Nerve domain seen from this process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_context_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A node of a context.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_node_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A publisher of one message type on one topic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_publisher_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A sample loaned from a publisher, written in place until sent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_loan_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A subscriber of one topic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_subscriber_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A received sample, readable until released.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_sample_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A client of one service.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_client_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A call in flight.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_pending_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A reply to a call, readable until released.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_reply_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A server of one service.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_server_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A request taken by a server, answered once.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_request_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// An executor: runs callbacks of subscribers, servers and timers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_executor_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A timer of an executor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_timer_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A node's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_params_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A client of one action.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_action_client_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A goal sent by an action client.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_goal_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A server of one action.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_action_server_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A goal accepted by an action server.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_server_goal_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A shared-memory tensor pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_tensor_pool_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}

/// A tensor of a pool (writable until frozen) or opened from a descriptor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct nerve_tensor_t {
    /// The handle's bits (0: none); opaque to callers.
    pub id: u64,
}
