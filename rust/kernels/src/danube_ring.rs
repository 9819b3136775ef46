//! Danube's Key-Shared consumer state (SPEC 7): consumers with optional glob key filters on
//! a ring of 100 virtual nodes each, at `h("{consumer_id}-{v}")`. A key goes to the one
//! eligible consumer when there is exactly one, else to the eligible owner of the first
//! node at or above `h(key)`, wrapping; ties go to the node added first.
//!
//! `h` is FNV-1a 64 over the bytes, xor-folded to 32 bits, then murmur3's fmix32.

use super::error::{InvalidInput, KernelResult, NotFound, StateResult};

/// Virtual nodes per consumer, as in Danube (and Pulsar's default).
pub const VNODES_PER_CONSUMER: u32 = 100;

struct ConsumerFilters {
    id: u64,
    filters: Vec<Box<[u8]>>,
}

/// Danube's Key-Shared consumers: each with its key filters and 100 virtual nodes on a 32-bit hash
/// ring, and the selection of one consumer per routing key.
#[derive(Default)]
pub struct KeySharedConsumerState {
    consumers: Vec<ConsumerFilters>,
    /// `(node hash, consumer index)`, sorted stably so equal hashes keep insertion order.
    ring: Vec<(u32, usize)>,
    filtered: usize,
}

impl KeySharedConsumerState {
    /// No consumers.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many consumers are held.
    pub fn len(&self) -> usize {
        self.consumers.len()
    }

    /// True when no consumer is held.
    pub fn is_empty(&self) -> bool {
        self.consumers.is_empty()
    }

    /// The consumers in the order they were added.
    pub fn consumer_ids(&self) -> Vec<u64> {
        self.consumers.iter().map(|c| c.id).collect()
    }

    /// True when `consumer` is held.
    pub fn contains(&self, consumer: u64) -> bool {
        self.consumers.iter().any(|c| c.id == consumer)
    }

    /// A consumer's filters; None for a consumer not in the state.
    pub fn key_filters(&self, consumer: u64) -> Option<Vec<Box<[u8]>>> {
        let c = self.consumers.iter().find(|c| c.id == consumer)?;
        Some(c.filters.clone())
    }

    /// Adds a consumer; no filters means every key. A duplicate id or an empty filter is
    /// an error.
    pub fn add_consumer(&mut self, consumer: u64, filters: Vec<Box<[u8]>>) -> KernelResult<()> {
        if self.contains(consumer) {
            return Err(InvalidInput::ConsumerExists {
                consumer,
                status: "was already added",
            });
        }
        if let Some(i) = filters.iter().position(|f| f.is_empty()) {
            return Err(InvalidInput::EmptyFilter.at(i));
        }
        self.consumers.push(ConsumerFilters {
            id: consumer,
            filters,
        });
        self.rebuild();
        Ok(())
    }

    /// Removes a consumer and its nodes; a consumer not held is an error (`NotFound::Consumer`).
    pub fn remove_consumer(&mut self, consumer: u64) -> StateResult<()> {
        let before = self.consumers.len();
        self.consumers.retain(|c| c.id != consumer);
        if self.consumers.len() == before {
            return Err(NotFound::Consumer {
                consumer,
                status: "in the state",
            }
            .into());
        }
        self.rebuild();
        Ok(())
    }

    /// Removes every consumer.
    pub fn disconnect_all(&mut self) {
        self.consumers.clear();
        self.rebuild();
    }

    /// The consumer for a routing key; None when no consumer accepts it.
    pub fn select_consumer(&self, key: &[u8]) -> Option<u64> {
        let mut eligible = Vec::new();
        self.select_with(key, &mut eligible)
    }

    /// `select_consumer` with a scratch buffer reused across keys.
    pub fn select_with(&self, key: &[u8], eligible: &mut Vec<bool>) -> Option<u64> {
        if self.consumers.is_empty() {
            return None;
        }
        if self.filtered == 0 {
            return Some(self.consumers[self.node_at(fnv1a_hash_32(key), |_| true)].id);
        }
        eligible.clear();
        eligible.extend(self.consumers.iter().map(|c| accepts(&c.filters, key)));
        match eligible.iter().filter(|&&e| e).count() {
            0 => None,
            1 => eligible
                .iter()
                .position(|&e| e)
                .map(|i| self.consumers[i].id),
            _ => {
                let at = self.node_at(fnv1a_hash_32(key), |i| eligible[i]);
                Some(self.consumers[at].id)
            }
        }
    }

    /// The consumer index of the first eligible node at or above `hash`, wrapping. Only
    /// called with at least one eligible consumer, each of which has nodes.
    fn node_at(&self, hash: u32, eligible: impl Fn(usize) -> bool) -> usize {
        let start = self.ring.partition_point(|n| n.0 < hash);
        let (wrapped, ahead) = self.ring.split_at(start);
        ahead
            .iter()
            .chain(wrapped)
            .find(|n| eligible(n.1))
            .map_or(0, |n| n.1)
    }

    fn rebuild(&mut self) {
        self.ring.clear();
        for (index, c) in self.consumers.iter().enumerate() {
            for vnode in 0..VNODES_PER_CONSUMER {
                let hash = fnv1a_hash_32(format!("{}-{vnode}", c.id).as_bytes());
                self.ring.push((hash, index));
            }
        }
        self.ring.sort_by_key(|n| n.0);
        self.filtered = self
            .consumers
            .iter()
            .filter(|c| !c.filters.is_empty())
            .count();
    }
}

/// No filters accepts every key; otherwise any matching filter does.
fn accepts(filters: &[Box<[u8]>], key: &[u8]) -> bool {
    filters.is_empty() || filters.iter().any(|f| glob_match(f, key))
}

/// FNV-1a 64 over the bytes, xor-folded to 32 bits, then murmur3's fmix32.
pub fn fnv1a_hash_32(key: &[u8]) -> u32 {
    let mut h64: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h64 ^= u64::from(b);
        h64 = h64.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut h = ((h64 >> 32) ^ h64) as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// Byte-wise, case-sensitive glob: `*` matches any run of bytes, `?` exactly one byte, every
/// other byte itself; there are no escapes. Iterative, backtracking to the last `*` only.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    star = Some((sp, st + 1));
                    p = sp + 1;
                    t = st + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(patterns: &[&str]) -> Vec<Box<[u8]>> {
        patterns.iter().map(|p| p.as_bytes().into()).collect()
    }

    #[test]
    fn globs() {
        let cases = [
            ("payment", "payment", true),
            ("payment", "payments", false),
            ("ship*", "shipping", true),
            ("ship*", "ship", true),
            ("ship*", "shi", false),
            ("eu-west-?", "eu-west-1", true),
            ("eu-west-?", "eu-west-12", false),
            ("*", "", true),
            ("*-*-*", "a-b-c", true),
            ("eu-*-order", "eu-west-1-order", true),
            ("eu-*-order", "eu-west-1-payment", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("Pay*", "payment", false),
            ("?", "\u{e9}", false),
            ("??", "\u{e9}", true),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                glob_match(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} {text}"
            );
        }
    }

    #[test]
    fn hash_is_fnv_folded_and_mixed() {
        assert_eq!(fnv1a_hash_32(b"order-123"), fnv1a_hash_32(b"order-123"));
        assert_ne!(fnv1a_hash_32(b"order-123"), fnv1a_hash_32(b"order-124"));
        // FNV-1a 64 of "" is the offset basis; fold and mix it by hand.
        let basis: u64 = 0xcbf2_9ce4_8422_2325;
        let mut h = ((basis >> 32) ^ basis) as u32;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^= h >> 16;
        assert_eq!(fnv1a_hash_32(b""), h);
    }

    #[test]
    fn selection_is_stable_and_minimal() {
        let mut s = KeySharedConsumerState::new();
        s.add_consumer(1, vec![]).unwrap();
        s.add_consumer(2, vec![]).unwrap();
        let keys: Vec<String> = (0..1000).map(|i| format!("key-{i}")).collect();
        let before: Vec<_> = keys
            .iter()
            .map(|k| s.select_consumer(k.as_bytes()))
            .collect();
        s.add_consumer(3, vec![]).unwrap();
        for (k, b) in keys.iter().zip(&before) {
            let a = s.select_consumer(k.as_bytes());
            assert!(a == *b || a == Some(3));
        }
        s.remove_consumer(3).unwrap();
        let again: Vec<_> = keys
            .iter()
            .map(|k| s.select_consumer(k.as_bytes()))
            .collect();
        assert_eq!(again, before);
    }

    #[test]
    fn filters_decide_eligibility() {
        let mut s = KeySharedConsumerState::new();
        s.add_consumer(1, filters(&["payment", "invoice"])).unwrap();
        s.add_consumer(2, filters(&["ship*"])).unwrap();
        assert_eq!(s.select_consumer(b"payment"), Some(1));
        assert_eq!(s.select_consumer(b"shipping"), Some(2));
        assert_eq!(s.select_consumer(b"other"), None);
        s.add_consumer(3, vec![]).unwrap();
        assert_eq!(s.select_consumer(b"other"), Some(3));
        let p = s.select_consumer(b"payment");
        assert!(p == Some(1) || p == Some(3));
    }

    #[test]
    fn filtered_selection_equals_a_ring_of_the_eligible() {
        let mut s = KeySharedConsumerState::new();
        let mut only = KeySharedConsumerState::new();
        for id in [4, 5, 6] {
            s.add_consumer(id, filters(&["k*"])).unwrap();
            only.add_consumer(id, vec![]).unwrap();
        }
        s.add_consumer(7, filters(&["x*"])).unwrap();
        for i in 0..500 {
            let key = format!("k{i}");
            assert_eq!(
                s.select_consumer(key.as_bytes()),
                only.select_consumer(key.as_bytes())
            );
        }
    }

    #[test]
    fn bad_input_changes_nothing() {
        let mut s = KeySharedConsumerState::new();
        s.add_consumer(1, vec![]).unwrap();
        assert!(s.add_consumer(1, vec![]).is_err());
        assert!(s.add_consumer(2, filters(&["a", ""])).is_err());
        assert!(s.remove_consumer(9).is_err());
        assert_eq!(s.consumer_ids(), vec![1]);
        assert_eq!(s.select_consumer(b"x"), Some(1));
        s.disconnect_all();
        assert_eq!(s.select_consumer(b"x"), None);
    }
}
