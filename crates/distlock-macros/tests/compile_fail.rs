//! Each misuse of the attributes is a compile error that says what is wrong, pointing at
//! it: the expected messages are checked in beside each case (`tests/ui/*.stderr`; after a
//! deliberate change of a message, `TRYBUILD=overwrite cargo test -p distlock-macros --test
//! compile_fail` writes them anew).

#[test]
fn misuses_are_compile_errors_that_say_why() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
