//! The workspace-hack: no code, only dependencies with the union of their features (see Cargo.toml).
