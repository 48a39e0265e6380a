//! Nerve's benchmark suites: Nerve side by side with the systems robots use today, in one
//! run, on one machine, with the same work per call.
#![warn(missing_docs)]

pub mod bag;
pub mod bag_bridge;
pub mod bag_conversion;
pub mod bundle;
pub mod child;
pub mod control;
pub mod cross_host;
pub mod echo;
pub mod hosts;
pub mod launch;
pub mod lidar;
pub mod machine;
pub mod paths;
pub mod pattern;
pub mod peers;
pub mod pipeline;
pub mod plot;
pub mod published;
pub mod python;
pub mod report;
pub mod scheduler;
pub mod service;
pub mod stats;
pub mod stream;
pub mod summary;
pub mod timer;
pub mod topic;
