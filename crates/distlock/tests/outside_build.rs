//! A crate outside this workspace that depends on `distlock` with the `etcd` feature builds
//! on a machine without protoc: the workspace's `.cargo/config.toml` (which points
//! etcd-client's build script at a protoc for the workspace's own tests) does not reach it,
//! and nothing it builds may need one. The crate is made in a temp dir and built offline
//! with the workspace's lock file, `PROTOC` unset and a `protoc` first on `PATH` that fails.

use std::path::Path;
use std::process::Command;

/// The crates whose build scripts run protoc.
const PROTOC_RUNNERS: [&str; 3] = ["prost-build", "tonic-build", "tonic-prost-build"];

#[test]
fn a_crate_outside_the_workspace_builds_with_etcd_and_no_protoc() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().expect("the workspace");
    let outside = tempfile::tempdir().expect("a temp dir");
    let root = outside.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let manifest = format!(
        "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\ndistlock = {{ path = {:?}, default-features = false, features = [\"etcd\"] }}\n\n\
         [workspace]\n",
        workspace.join("crates/distlock")
    );
    std::fs::write(root.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    distlock::install_backends();\n    \
         let url = distlock::parse_lock_url(\"etcd://127.0.0.1:2379/locks\").unwrap();\n    \
         println!(\"{:?}\", distlock::etcd::EtcdConfig::from_url(&url).unwrap());\n}\n",
    )
    .unwrap();
    // The versions the workspace has resolved (and downloaded): an offline build needs them.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let protoc = root.join("bin/protoc");
    std::fs::write(
        &protoc,
        "#!/bin/sh\necho 'protoc was run in a build that must need none' >&2\nexit 97\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&protoc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Its own target dir beside the workspace's, so a second run builds little.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("outside-crate");
    let cargo = |args: &[&str]| {
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(args)
            .args(["--offline", "--quiet"])
            .current_dir(root)
            .env_remove("PROTOC")
            .env_remove("RUSTFLAGS")
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("cargo runs")
    };

    let tree = cargo(&["tree", "--edges", "normal,build", "--prefix", "none"]);
    let tree = String::from_utf8_lossy(&tree.stdout);
    for runner in PROTOC_RUNNERS {
        assert!(
            !tree
                .lines()
                .any(|line| line.starts_with(&format!("{runner} "))),
            "{runner} is built for a crate that depends on distlock with etcd:\n{tree}"
        );
    }
    let built = cargo(&["build"]);
    assert!(
        built.status.success(),
        "the outside crate did not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(target.join("debug/outside"))
        .output()
        .expect("it runs");
    let shown = String::from_utf8_lossy(&ran.stdout);
    assert!(shown.contains("prefix: \"locks\""), "{shown}");
}
