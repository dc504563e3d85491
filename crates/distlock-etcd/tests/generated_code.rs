//! `src/grpc/etcdserverpb.rs` is checked in so that a crate depending on distlock-etcd builds
//! without protoc. This test generates it again from `proto/etcd.proto` (with the protoc the
//! protoc-bin-vendored crate brings) and fails if the two differ; with
//! `DISTLOCK_REGENERATE=1` it writes the new code over the old instead.

use std::path::Path;

#[test]
fn the_checked_in_grpc_code_is_what_the_proto_generates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("a temp dir");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path().expect("a vendored protoc"));
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .out_dir(out.path())
        .compile_with_config(
            config,
            &[crate_dir.join("proto/etcd.proto")],
            &[crate_dir.join("proto")],
        )
        .expect("the proto compiles");
    let generated = std::fs::read_to_string(out.path().join("etcdserverpb.rs")).unwrap();
    let checked_in = crate_dir.join("src/grpc/etcdserverpb.rs");
    if std::env::var_os("DISTLOCK_REGENERATE").is_some() {
        std::fs::write(&checked_in, &generated).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&checked_in).unwrap_or_default();
    assert!(
        current == generated,
        "src/grpc/etcdserverpb.rs is not what proto/etcd.proto generates: run \
         DISTLOCK_REGENERATE=1 cargo test -p distlock-etcd --test generated_code"
    );
}
