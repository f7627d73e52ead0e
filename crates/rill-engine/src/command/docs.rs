//! COMMAND DOCS argument trees, built from each spec's syntax string.
