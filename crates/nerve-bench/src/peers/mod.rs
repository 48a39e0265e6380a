//! The systems under test, one module each. For request/response (the service suite)
//! each has a client (run in the measuring process) and a server (run in a child
//! process) that keep the [`echo`] contract over the [`pattern`] payload; the stream ends
//! of the topic, lidar and cross-host suites (a publisher and a subscriber per system, in
//! child processes) are in [`stream`].

pub mod cpp;
pub mod cyclone;
pub mod echo;
pub mod iceoryx2;
pub mod nerve;
pub mod pattern;
pub mod rclpy;
pub mod stream;
pub mod uds;
pub mod zenoh;
