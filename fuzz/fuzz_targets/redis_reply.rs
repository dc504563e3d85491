//! Fuzz target `redis_reply`: any bytes, read as a RESP reply and decoded as every reply
//! distlock reads from Redis, must not panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|reply: &[u8]| distlock::redis::fuzz_reply(reply));
