//! The capability matrix (`docs/capabilities.md`): which suites each backend's tests run,
//! read from their `conformance_suite!` and `process_suite!` declarations. Each declaration
//! is checked against its backend's own capabilities by the suite it generates
//! (`declared_capabilities_match`); this test checks the checked-in matrix against the
//! declarations, so the file says what the tests prove. `DISTLOCK_REGENERATE=1` rewrites it.

use std::path::{Path, PathBuf};

/// The workspace's root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// The test files that may declare suites: the testkit's and each example backend's.
fn test_files(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("crates/distlock-testkit/tests")];
    let examples = std::fs::read_dir(root.join("examples")).expect("examples/");
    dirs.extend(examples.map(|entry| entry.expect("an example").path().join("tests")));
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .map(|entry| entry.expect("a test file").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();
    files
}

/// One declared suite: where, how its grants live, what it lacks, whether the process
/// suite runs too.
struct Row {
    place: String,
    liveness: String,
    lacks: Vec<String>,
    processes: bool,
}

/// The suites `text` (the file at `place`) declares, one per module.
fn rows_of(place: &str, text: &str) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut module: Option<(usize, String)> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        if module.as_ref().is_some_and(|(depth, _)| indent <= *depth) && !line.trim().is_empty() {
            module = None;
        }
        let mut code = line.trim().to_owned();
        // A declaration rustfmt spread over lines, read as one.
        if code.ends_with('(') {
            for rest in lines.by_ref() {
                code.push_str(rest.trim());
                if rest.contains(')') {
                    break;
                }
            }
        }
        let code = code.as_str();
        if let Some(name) = code
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(" {"))
        {
            module = Some((indent, name.to_owned()));
            continue;
        }
        let at = match &module {
            Some((_, name)) => format!("{place} `{name}`"),
            None => place.to_owned(),
        };
        // A run of chosen tests (`conformance_suite!(@tests target; …)`, as for a URL
        // option that changes one path) declares no suite of its own.
        if code.contains("_suite!(@tests") {
            continue;
        }
        if let Some(args) = code.strip_prefix("distlock_testkit::conformance_suite!(") {
            let liveness = args
                .split("liveness = ")
                .nth(1)
                .and_then(|rest| rest.split([',', ')']).next())
                .expect("every suite declares its liveness");
            let lacks = args
                .split("lacks = [")
                .nth(1)
                .and_then(|rest| rest.split(']').next())
                .map(|list| list.split(',').map(|l| l.trim().to_owned()).collect())
                .unwrap_or_default();
            rows.push(Row {
                place: at,
                liveness: liveness.trim().to_owned(),
                lacks,
                processes: false,
            });
        } else if code.starts_with("distlock_testkit::process_suite!(") {
            // The process suite runs beside the conformance suite of its file.
            if let Some(row) = rows.iter_mut().find(|row| row.place.starts_with(place)) {
                row.processes = true;
            }
        }
    }
    rows
}

/// The matrix as markdown.
fn matrix(root: &Path) -> String {
    let mut out = String::from(
        "# Capability matrix\n\n\
         Which suites each backend's tests run, as their `conformance_suite!` and\n\
         `process_suite!` declarations say; each declaration is checked against the\n\
         backend's `capabilities()` by the test `declared_capabilities_match`, and this file\n\
         against the declarations by `crates/distlock-testkit/tests/capability_matrix.rs`\n\
         (`DISTLOCK_REGENERATE=1` rewrites it). Every backend runs the common suite (mutual\n\
         exclusion, expiry, fencing, cancellation, reentrancy, status, bad input, multi-locks,\n\
         templates, jobs); \"refused\" means the backend lacks the capability and the suite checks\n\
         that it refuses it as `Unsupported`. PostgreSQL's and MySQL's session modes hold each\n\
         lock on a database connection of its own, yet declare lease liveness: the core renews\n\
         their grants as leases, each renewal asking whether the connection still holds it.\n\
         Runs of chosen tests (`conformance_suite!(@tests …)`, as for a URL option that\n\
         changes one path, such as Redis's `first_try=commands`) are not rows.\n\n\
         | tests | grants live by | read/write locks | semaphores | fair queue | breaking | notes (once_per, job_status, elections) | hand-offs | processes |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for file in test_files(root) {
        let text = std::fs::read_to_string(&file).expect("a readable test file");
        let place = file
            .strip_prefix(root)
            .expect("inside the workspace")
            .display()
            .to_string();
        for row in rows_of(&place, &text) {
            let cell = |capability: &str| match row.lacks.iter().any(|l| l == capability) {
                true => "refused",
                false => "yes",
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                row.place,
                row.liveness.to_lowercase(),
                cell("rwlock"),
                cell("semaphore"),
                cell("fair"),
                cell("force_release"),
                cell("notes"),
                cell("adopt"),
                if row.processes { "yes" } else { "no" },
            ));
        }
    }
    out
}

#[test]
fn the_checked_in_matrix_says_what_the_suites_declare() {
    let root = workspace();
    let path = root.join("docs/capabilities.md");
    let now = matrix(&root);
    if std::env::var_os("DISTLOCK_REGENERATE").is_some() {
        std::fs::write(&path, &now).expect("docs/capabilities.md written");
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == now,
        "docs/capabilities.md differs from the suites' declarations; rerun with \
         DISTLOCK_REGENERATE=1 and commit it. Now:\n{now}"
    );
    assert!(
        now.matches("\n| ").count() >= 14,
        "every backend's suite is in the matrix:\n{now}"
    );
}
