//! One module per command family. Each exposes `COMMANDS: &[CommandSpec]`.

use crate::command::CommandSpec;

pub mod stream;

/// Every engine command family, for the command table.
pub fn families() -> Vec<&'static [CommandSpec]> {
    vec![stream::COMMANDS]
}
