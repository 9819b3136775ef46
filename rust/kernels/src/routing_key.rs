//! A routing key as the dispatch kernels hold it. A leaf module: the error types name keys
//! without depending on any kernel.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A routing key: its bytes, and whether it is a text key (Pulsar's string message key) or a
/// binary one (its ordering key), so that it is handed back as it came.
/// Keys compare by their bytes only.
#[derive(Debug, Clone)]
pub struct RoutingKey {
    pub bytes: Box<[u8]>,
    pub text: bool,
}

impl RoutingKey {
    pub fn new(bytes: &[u8], text: bool) -> Self {
        Self {
            bytes: bytes.into(),
            text,
        }
    }
}

/// A text key as a quoted string, a binary key as escaped bytes.
impl fmt::Display for RoutingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.text, std::str::from_utf8(&self.bytes)) {
            (true, Ok(s)) => write!(f, "{s:?}"),
            _ => write!(f, "bytes \"{}\"", self.bytes.escape_ascii()),
        }
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
