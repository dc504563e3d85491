//! One fencing counter per cluster slot, not per name: the key of the counter that lock
//! names in a slot share (on a single server too, so a proxy that shards one server's keys
//! by slot sees every script touch one slot).
//!
//! A counter per name would be made on a name's first grant and kept for `fence_ttl`
//! after: a service that locks `orders/<id>` would leave one key per order for a day, and
//! the first grant on each name would pay for making it. Names that hash to one slot share
//! a counter instead, `{<prefix><tag>}:slot-fence`, where `<tag>` is the first string (one
//! to three characters of `0-9a-zA-Z-_`, shortest first, in that order) that puts the key
//! in that slot (CRC16 is linear, so the three-character tags reach every slot from any
//! prefix). Every client with the same prefix finds the same tag, so every grant of a name
//! counts on the one counter, strictly increasing; the tokens of one name are no longer
//! consecutive, which fencing never needed.

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

/// The longest tag: three characters reach every slot.
const LONGEST: usize = 3;

/// For one prefix, the tag that puts a counter key in each slot: its length and characters.
#[derive(Debug)]
pub(crate) struct SlotTags {
    tags: Box<[(u8, [u8; LONGEST])]>,
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

    /// Tries tags shortest first, in alphabet order, each slot keeping the first.
    fn compute(prefix: &str) -> SlotTags {
        let mut after_prefix = State::<XMODEM>::new();
        after_prefix.update(prefix.as_bytes());
        let mut tags = vec![(0_u8, [0_u8; LONGEST]); SLOTS];
        for length in 1..=LONGEST {
            // Every tag of `length` characters, as a number in base 64.
            for n in 0..ALPHABET.len().pow(length as u32) {
                let mut tag = [0_u8; LONGEST];
                let mut rest = n;
                for at in (0..length).rev() {
                    tag[at] = ALPHABET[rest % ALPHABET.len()];
                    rest /= ALPHABET.len();
                }
                let mut crc = after_prefix;
                crc.update(&tag[..length]);
                let slot = &mut tags[usize::from(crc.get()) % SLOTS];
                if slot.0 == 0 {
                    *slot = (length as u8, tag);
                }
            }
        }
        SlotTags { tags: tags.into() }
    }

    /// The tag of slot `slot`.
    pub(crate) fn tag(&self, slot: usize) -> &str {
        let (length, tag) = &self.tags[slot % SLOTS];
        // The alphabet is ASCII.
        std::str::from_utf8(&tag[..usize::from(*length)]).unwrap_or_default()
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
        for prefix in ["", "locks:", "a", "ünïcode/"] {
            let tags = SlotTags::for_prefix(prefix);
            for slot in 0..SLOTS {
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
