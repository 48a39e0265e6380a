//! How a command fails: [`Failure`] and the exit code each kind maps to (0 success and
//! broken pipe, 1 runtime error, 2 usage error, 130 interrupted), shared by every command.

/// An error with the exit code it maps to.
pub enum Failure {
    /// Bad arguments: exit 2.
    Usage(String),
    /// Failure while running: exit 1.
    Runtime(anyhow::Error),
    /// Stopped by SIGINT or SIGTERM after writing what it could (the command said so):
    /// exit 130.
    Interrupted,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Runtime(e.into())
    }
}

/// Result of a command.
pub type CmdResult = Result<(), Failure>;

/// A usage error.
pub fn usage(msg: impl Into<String>) -> Failure {
    Failure::Usage(msg.into())
}

/// Why a service client could not be opened: a bad name is a usage error, anything else
/// a failure at run time.
pub fn client_failure(e: nerve::ServiceError) -> Failure {
    match e {
        nerve::ServiceError::Name(_) => usage(e.to_string()),
        e => Failure::Runtime(e.into()),
    }
}

/// A service client that found no server on `name` within `timeout`.
pub fn no_server(name: &str, timeout: std::time::Duration) -> Failure {
    Failure::Runtime(anyhow::anyhow!(
        "service {name}: no server within {timeout:?}"
    ))
}

/// The error and its causes on one line, each cause left out where the message before it
/// already says it (library errors name their source in their own text: `{e:#}` would
/// print it twice).
pub fn describe(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
