//! A routing key as the dispatch kernels hold it.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

use super::error::key_text;

/// A routing key: its bytes, and whether it is a text key (Pulsar's string message key) or a
/// binary one (its ordering key), so that it is handed back as it came.
/// Keys compare by their bytes only.
#[derive(Debug, Clone)]
pub struct RoutingKey {
    /// The key's bytes: a text key's UTF-8.
    pub bytes: Box<[u8]>,
    /// True for a text key (a string message key), false for a binary one (an ordering key).
    pub text: bool,
}

impl RoutingKey {
    /// A key of `bytes`, text or binary as `text` says.
    pub fn new(bytes: &[u8], text: bool) -> Self {
        Self {
            bytes: bytes.into(),
            text,
        }
    }
}

/// A text key as a quoted string, a binary key as escaped bytes, as errors show it.
impl fmt::Display for RoutingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&key_text(&self.bytes, self.text))
    }
}

/// The key as an error carries it: its bytes, and whether it is text.
impl From<RoutingKey> for (Box<[u8]>, bool) {
    fn from(key: RoutingKey) -> Self {
        (key.bytes, key.text)
    }
}

impl PartialEq for RoutingKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for RoutingKey {}

impl Hash for RoutingKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

impl Borrow<[u8]> for RoutingKey {
    fn borrow(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_show_as_text_or_escaped_bytes() {
        assert_eq!(RoutingKey::new(b"a\"b", true).to_string(), r#""a\"b""#);
        assert_eq!(
            RoutingKey::new(b"\x00a", false).to_string(),
            r#"bytes "\x00a""#
        );
    }

    #[test]
    fn keys_compare_by_their_bytes_only() {
        assert_eq!(RoutingKey::new(b"k", true), RoutingKey::new(b"k", false));
        assert_ne!(RoutingKey::new(b"k", true), RoutingKey::new(b"K", true));
    }
}
