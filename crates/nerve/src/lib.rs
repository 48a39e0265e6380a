//! # Nerve
//!
//! A robotics middleware: typed topics and services with zero-copy shared memory between
//! processes, precise timers, executors ([`Executor`], [`MultiThreadedExecutor`]), state
//! machines ([`machine`]) and a real-time-aware tick scheduler ([`scheduler`], [`rt`]).
//!
//! ```
//! use nerve::prelude::*;
//! use std::time::Duration;
//!
//! #[derive(Clone, Copy, nerve::Message)]
//! #[repr(C)]
//! #[message(name = "demo/Pose")]
//! struct Pose { x: f64, y: f64, theta: f64 }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::from_env()?;
//! let node = ctx.node("demo").create()?;
//! // subscribers see what is published after they exist (or what the topic's history
//! // keeps: `Qos::latched()`)
//! let sub = node.subscriber::<Pose>("/pose").create()?;
//! let publisher = node.publisher::<Pose>("/pose").create()?;
//! publisher.publish(&Pose { x: 1.0, y: 2.0, theta: 0.5 })?;
//!
//! let p = sub.recv_timeout(Duration::from_millis(100))?.expect("a pose");
//! println!("x = {} (seq {})", p.x, p.header().seq);
//! assert_eq!((p.x, p.header().seq), (1.0, 1));
//! # Ok(()) }
//! ```
//!
//! Samples are loaned from shared memory (`Publisher::loan`, `Publisher::loan_slice`),
//! written in place and read in place by subscribers; dropping a received `Sample`
//! releases its memory. Every sample carries a [`SampleHeader`].
#![warn(missing_docs)]

extern crate self as nerve;

// The tree is the table of contents (docs/design.md opens with it). Lower layers never
// import higher ones: sys <- message <- transport <- topic/service <- exec; the network
// plane (net) plugs into transport's remote traits; context ties a domain together.
pub mod action;
pub mod config;
mod context;
pub mod error;
mod exec;
pub mod introspect;
pub mod log;
mod loom;
pub mod message;
pub mod name;
pub mod param;
pub mod qos;
pub mod service;
mod sys;
pub mod tensor;
pub mod time;
mod topic;
pub mod trace;
mod transport;

#[cfg(feature = "net")]
pub mod net;

// public module paths of the executor layer and the OS layer
pub use exec::{executor, machine, scheduler, timer};
pub use sys::{rt, signals as shutdown};

pub use config::Config;
pub use context::{Context, Node, NodeBuilder};
pub use error::{
    CallError, ContextError, DecodeError, ExecError, LoanError, MachineError, NameError, NodeError,
    PublishError, RecvError, SchedulerError, ServeError, ServiceError, TensorError, TopicError,
    WaitError,
};
pub use exec::executor::{CallbackGroup, Calls, Executor, ExecutorHandle, MultiThreadedExecutor};
pub use exec::machine::{
    Machine, MachineHandle, MachineSpec, StateSpec, TransitionEvent, TransitionSpec,
};
pub use exec::scheduler::{MissPolicy, NodeConfig, Scheduler, SchedulerReport};
pub use exec::timer::{Overrun, Precision, Tick, Timer, TimerHandle};
pub use exec::waitset::{WaitSet, WaitSetWaker, Waitable, MAX_WAITSET_ENTRIES};
pub use log::{Level, LogRecord, Logger};
pub use message::header::{CallHeader, CallStatus, SampleHeader};
pub use message::{Message, NoElem, Pod, Serde, SerdeMessage, TypeInfo};
pub use nerve_derive::{Message, Pod};
pub use qos::{Overflow, Qos, ServiceQos};
pub use service::client::{Client, ClientBuilder, PendingCall, Reply, RequestLoan, LIVENESS_CHECK};
pub use service::client::{RawClient, RawPendingCall, RawReply, RawRequestLoan};
pub use service::server::{RawRequest, RawServer};
pub use service::server::{ReplyLoan, Request, Server, ServiceBuilder, ServiceThread};
pub use service::{HandlerResult, Service, ServiceType};
pub use sys::clock::{mono_ns, stamp_ns, wall_ns};
pub use tensor::{DType, Tensor, TensorDescriptor, TensorMut, TensorPool};
pub use topic::publisher::{Loan, Publisher, PublisherBuilder, ATTACH_GRACE};
pub use topic::raw::{RawLoan, RawPublisher, RawSample, RawSubscriber};
pub use topic::subscriber::{Sample, Subscriber, SubscriberBuilder, SubscriberStats};
pub use transport::wait::WaitMode;

/// The common imports.
pub mod prelude {
    pub use crate::{
        Client, Context, Executor, Machine, MachineSpec, Message, Node, Overflow, Overrun, Pod,
        Precision, Publisher, Qos, Sample, SampleHeader, Serde, SerdeMessage, Server, Service,
        ServiceQos, Subscriber, WaitMode, WaitSet,
    };
}
