//! Errors as data: configuration mistakes, server errors, and replies of an unexpected shape.

use std::fmt;

/// A worker or CLI setting that cannot work; raised before anything touches the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The stream name has no hash tag and contains `{` or `}`, so no derived key (dead-letter
    /// stream, idempotency guard) can be put in its cluster slot by wrapping it in braces.
    UntaggableStreamName { stream: String },
    /// The dead-letter stream would hash to another cluster slot than the stream.
    DeadLetterSlotMismatch { stream: String, dead_letter: String },
    /// A numeric setting is out of range; `what` names it and says the allowed range.
    OutOfRange { what: &'static str },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UntaggableStreamName { stream } => write!(
                f,
                "stream name {stream:?} has braces but no hash tag; name the dead-letter stream \
                 explicitly, or use a tagged name such as {{orders}}"
            ),
            ConfigError::DeadLetterSlotMismatch { stream, dead_letter } => write!(
                f,
                "dead-letter stream {dead_letter:?} does not share a hash tag with {stream:?}; \
                 the dead-letter MULTI would fail on a cluster (use e.g. {{orders}} and \
                 {{orders}}:dlq)"
            ),
            ConfigError::OutOfRange { what } => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a worker stopped with an error, or why a toolkit call failed.
#[derive(Debug)]
pub enum WorkerError {
    /// The configuration was refused before connecting.
    Config(ConfigError),
    /// The server (or the connection to it) failed a command; `context` says which step.
    Redis { context: &'static str, source: redis::RedisError },
    /// A reply did not have the shape its command documents.
    UnexpectedReply { context: &'static str, detail: String },
}

impl WorkerError {
    pub(crate) fn redis(context: &'static str) -> impl FnOnce(redis::RedisError) -> WorkerError {
        move |source| WorkerError::Redis { context, source }
    }

    pub(crate) fn reply(context: &'static str, detail: impl Into<String>) -> WorkerError {
        WorkerError::UnexpectedReply { context, detail: detail.into() }
    }

    /// The server error code (`NOGROUP`, `BUSYGROUP`, ...) when the server refused a command.
    pub fn code(&self) -> Option<&str> {
        match self {
            WorkerError::Redis { source, .. } => source.code(),
            _ => None,
        }
    }

    /// True when the connection itself failed (as opposed to the server refusing a command).
    pub fn is_connection_error(&self) -> bool {
        match self {
            WorkerError::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_connection_dropped()
                    || source.is_timeout()
                    || source.is_unrecoverable_error()
            }
            _ => false,
        }
    }
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerError::Config(e) => write!(f, "configuration: {e}"),
            WorkerError::Redis { context, source } => write!(f, "{context}: {source}"),
            WorkerError::UnexpectedReply { context, detail } => {
                write!(f, "{context}: unexpected reply: {detail}")
            }
        }
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkerError::Config(e) => Some(e),
            WorkerError::Redis { source, .. } => Some(source),
            WorkerError::UnexpectedReply { .. } => None,
        }
    }
}

impl From<ConfigError> for WorkerError {
    fn from(e: ConfigError) -> Self {
        WorkerError::Config(e)
    }
}
