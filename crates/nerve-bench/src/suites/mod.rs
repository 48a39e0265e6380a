//! The suites, one folder each, and the registry that lists them: adding a suite is its
//! folder (the [`Suite`](crate::suite::Suite) implementation, its options and roles) and
//! one line below (a folder may hold more than one suite: the topic suite and the topic
//! suite across hosts).

use crate::registry::Registered;

/// Declares every suite folder's module and lists its suites in [`ALL`], in the order
/// given: `folder => [Suite, …]`, the suites as paths inside the folder's module.
macro_rules! registry {
    ($($module:ident => [$($($suite:ident)::+),+ $(,)?]),* $(,)?) => {
        $(pub mod $module;)*

        /// Every suite, in the order `nerve bench all` runs them.
        pub static ALL: &[Registered] = &[$($(Registered::of::<$module$(::$suite)+>()),+),*];
    };
}

registry! {
    service => [ServiceSuite],
    topic => [TopicSuite, cross_host::CrossHostSuite],
    paths => [PathsSuite],
    lidar => [LidarSuite],
    timer => [TimerSuite],
    scheduler => [SchedulerSuite],
    python => [PythonSuite],
    bag => [BagSuite],
    control => [ControlSuite],
    tf => [TfSuite],
    replay => [ReplaySuite],
    fleet => [FleetSuite],
}
