pub mod authentication_builtin;
pub mod authentication_plugin;
pub mod types;

pub use authentication_plugin::*;
pub use types::*;
