pub mod access_control_builtin;
pub mod access_control_plugin;
pub mod types;

pub use access_control_plugin::*;
pub use types::*;
