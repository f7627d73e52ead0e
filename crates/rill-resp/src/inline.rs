//! Splitting an inline request line into arguments, as Redis (and redis-cli) do.
//!
//! ```text
//! set  k\tv               -> ["set", "k", "v"]          whitespace separates words
//! echo "a b\x41\n"        -> ["echo", "a bA\n"]         "..." escapes: \n \r \t \b \a \xHH, \<c> = c
//! echo 'it\'s' 'a\nb'     -> ["echo", "it's", "a\\nb"]  '...' knows only \'
//! echo a"b c"             -> ["echo", "ab c"]           a quote may start mid-word...
//! echo "a"b               -> error                      ...but must be followed by space or end
//! ```
//!
//! Unquoted words are zero-copy slices of the line; a word with quotes is rebuilt because its
//! escapes change the bytes.

use bytes::Bytes;

use crate::request::ProtocolError;

/// Whitespace between inline arguments: C's `isspace` (space, \t, \n, \v, \f, \r).
fn is_separator(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Bytes that end an unquoted word. Redis stops an unquoted word only at these four, so a
/// vertical tab or form feed stays inside the word although it separates words elsewhere.
fn ends_unquoted_word(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Splits an inline line the way redis-cli and Redis do (see the module docs).
pub(crate) fn split_inline(line: &Bytes) -> Result<Vec<Bytes>, ProtocolError> {
    let bytes: &[u8] = line;
    let mut args = Vec::new();
    let mut pos = 0;
    loop {
        while bytes.get(pos).is_some_and(|&b| is_separator(b)) {
            pos += 1;
        }
        if pos >= bytes.len() {
            return Ok(args);
        }
        let start = pos;
        // Fast path: a plain word is a slice of the line.
        while bytes.get(pos).is_some_and(|&b| !ends_unquoted_word(b) && b != b'"' && b != b'\'') {
            pos += 1;
        }
        match bytes.get(pos) {
            Some(b'"' | b'\'') => {
                let mut word = bytes.get(start..pos).unwrap_or_default().to_vec();
                pos = quoted_word_rest(bytes, pos, &mut word)?;
                args.push(Bytes::from(word));
            }
            _ => args.push(line.slice(start..pos)),
        }
    }
}

/// Continues a word at `pos`, which holds an opening quote; returns the position after it.
/// A quoted part ends the word: its closing quote must be followed by whitespace or the end.
fn quoted_word_rest(bytes: &[u8], pos: usize, word: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    let after_closing_quote = match bytes.get(pos) {
        Some(b'"') => double_quoted(bytes, pos + 1, word)?,
        Some(b'\'') => single_quoted(bytes, pos + 1, word)?,
        _ => return Ok(pos),
    };
    match bytes.get(after_closing_quote) {
        None => Ok(after_closing_quote),
        Some(&b) if is_separator(b) => Ok(after_closing_quote),
        Some(_) => Err(ProtocolError::UnbalancedQuotes),
    }
}

/// Reads a `"..."` body from `pos` (after the opening quote) up to and including the closing
/// quote. Escapes: `\n \r \t \b \a`, `\xHH`; any other escaped byte stands for itself.
fn double_quoted(bytes: &[u8], mut pos: usize, word: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        match bytes.get(pos) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'"') => return Ok(pos + 1),
            Some(b'\\') => {
                let hex = (bytes.get(pos + 2), bytes.get(pos + 3));
                match (bytes.get(pos + 1), hex) {
                    (Some(b'x'), (Some(&high), Some(&low))) if is_hex(high) && is_hex(low) => {
                        word.push(hex_value(high) << 4 | hex_value(low));
                        pos += 4;
                    }
                    (Some(&escaped), _) => {
                        word.push(match escaped {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                        pos += 2;
                    }
                    (None, _) => return Err(ProtocolError::UnbalancedQuotes),
                }
            }
            Some(&b) => {
                word.push(b);
                pos += 1;
            }
        }
    }
}

/// Reads a `'...'` body; the only escape is `\'`, any other backslash is literal.
fn single_quoted(bytes: &[u8], mut pos: usize, word: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        match bytes.get(pos) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'\'') => return Ok(pos + 1),
            Some(b'\\') if bytes.get(pos + 1) == Some(&b'\'') => {
                word.push(b'\'');
                pos += 2;
            }
            Some(&b) => {
                word.push(b);
                pos += 1;
            }
        }
    }
}

fn is_hex(byte: u8) -> bool {
    byte.is_ascii_hexdigit()
}

fn hex_value(byte: u8) -> u8 {
    match byte {
        b'0'..=b'9' => byte - b'0',
        b'a'..=b'f' => byte - b'a' + 10,
        b'A'..=b'F' => byte - b'A' + 10,
        _ => 0,
    }
}
