//! In a cluster, one fencing counter per slot, not per name: the key of the counter that
//! lock names in a slot share (a single server has one, `{<prefix>}:slot-fence`).
//!
//! A counter per name would be made on a name's first grant and kept for `fence_ttl`
//! after: a service that locks `orders/<id>` would leave one key per order for a day, and
//! the first grant on each name would pay for making it. Names that hash to one slot share
//! a counter instead, `{<prefix><tag>}:slot-fence`, where `<tag>` is the first string (one
//! to three characters of `0-9a-zA-Z-_`, shortest first, in that order) that puts the key
//! in that slot. Every client with the same prefix finds the same tag, so every grant of
//! a name counts on the one counter, strictly increasing; the tokens of one name are no
//! longer consecutive, which fencing never needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crc16::{State, XMODEM};

/// Slots of a Redis Cluster (and the hash a single server's keys would have in one).
const SLOTS: usize = 16384;

/// The characters a tag is made of, in the order they are tried.
const ALPHABET: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_";

/// The slot of a key with no hash tag: the one the key `bytes` hashes to.
pub(crate) fn slot_of(bytes: &[&[u8]]) -> usize {
    let mut crc = State::<XMODEM>::new();
    for part in bytes {
        crc.update(part);
    }
    usize::from(crc.get()) % SLOTS
}

/// For one prefix, the tag that puts a counter key in each slot.
#[derive(Debug)]
pub(crate) struct SlotTags {
    tags: Box<[Box<str>]>,
}

impl SlotTags {
    /// The tags for `prefix`, computed once per prefix in a process (a few milliseconds)
    /// and shared by every client using it.
    pub(crate) fn for_prefix(prefix: &str) -> Arc<SlotTags> {
        static KNOWN: OnceLock<Mutex<HashMap<String, Arc<SlotTags>>>> = OnceLock::new();
        let known = KNOWN.get_or_init(Mutex::default);
        let mut known = known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        known
            .entry(prefix.to_owned())
            .or_insert_with(|| Arc::new(SlotTags::compute(prefix)))
            .clone()
    }

    /// Tries tags shortest first, in alphabet order, until every slot has one.
    fn compute(prefix: &str) -> SlotTags {
        let mut after_prefix = State::<XMODEM>::new();
        after_prefix.update(prefix.as_bytes());
        let mut tags: Vec<Option<Box<str>>> = vec![None; SLOTS];
        let mut missing = SLOTS;
        let mut tag = Vec::new();
        let mut length = 1;
        while missing > 0 {
            // Every tag of `length` characters, as a number in base 64.
            let count = ALPHABET.len().pow(length);
            for n in 0..count {
                tag.clear();
                let mut rest = n;
                for _ in 0..length {
                    tag.push(ALPHABET[rest % ALPHABET.len()]);
                    rest /= ALPHABET.len();
                }
                tag.reverse();
                let mut crc = after_prefix;
                crc.update(&tag);
                let slot = &mut tags[usize::from(crc.get()) % SLOTS];
                if slot.is_none() {
                    *slot = Some(String::from_utf8_lossy(&tag).into());
                    missing -= 1;
                }
            }
            length += 1;
        }
        SlotTags {
            tags: tags.into_iter().flatten().collect(),
        }
    }

    /// The tag of slot `slot`.
    pub(crate) fn tag(&self, slot: usize) -> &str {
        &self.tags[slot % SLOTS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // From the Redis Cluster specification: CRC16 (XMODEM) of the key, modulo 16384.
        assert_eq!(slot_of(&[b"123456789"]), 0x31C3);
        assert_eq!(slot_of(&[b"foo"]), 12182);
        assert_eq!(slot_of(&[b"fo", b"o"]), 12182);
    }

    #[test]
    fn every_slot_has_a_short_tag_that_lands_in_it() {
        for prefix in ["", "locks:", "a"] {
            let tags = SlotTags::for_prefix(prefix);
            for slot in [0, 1, 5000, 12182, SLOTS - 1] {
                let tag = tags.tag(slot);
                assert!((1..=3).contains(&tag.len()), "{tag:?}");
                assert_eq!(slot_of(&[prefix.as_bytes(), tag.as_bytes()]), slot);
            }
        }
        assert!(Arc::ptr_eq(
            &SlotTags::for_prefix("locks:"),
            &SlotTags::for_prefix("locks:")
        ));
    }

    #[test]
    fn tags_are_the_first_in_alphabet_order() {
        let tags = SlotTags::for_prefix("");
        // "0" is the first tag tried, so it keeps its slot.
        assert_eq!(tags.tag(slot_of(&[b"0"])), "0");
        assert_eq!(tags.tag(slot_of(&[b"_"])), "_");
    }
}
