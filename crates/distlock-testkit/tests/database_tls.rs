//! TLS to PostgreSQL and MariaDB, against servers that take TCP connections only with TLS
//! and a certificate authority made for the test: the driver's own URL options verify the
//! server against the authority they name, in both lock modes; an authority that did not
//! sign the server's certificate, or no TLS at all, is refused as bad input; and no message
//! carries the password.

use distlock::ErrorKind;
use distlock_testkit::{DATABASE_PASSWORD, TestCertificates};

/// The queries that reach one TLS server.
struct TlsQueries {
    /// Verifies the server's certificate and name against the test's authority.
    verified: String,
    /// Verifies the server's certificate against the test's authority, not its name.
    certificate_only: String,
    /// Encrypts without verifying, as `sslmode=require` does in libpq.
    encrypted: String,
    /// Verifies against an authority that did not sign the server's certificate.
    untrusted: String,
    /// No TLS.
    plain: String,
    /// Verifies against an authority file that is not there.
    missing: String,
}

async fn only_tls_with_a_trusted_server_is_used(url: impl Fn(&str) -> String, queries: TlsQueries) {
    for mode in ["session", "lease"] {
        let client = distlock::Client::connect(&url(&format!("{}&mode={mode}", queries.verified)))
            .await
            .unwrap_or_else(|e| panic!("{mode} mode over verified TLS: {e:?}"));
        let guard = client.mutex("tls").lock().await.unwrap();
        assert!(client.mutex("tls").try_lock().await.unwrap().is_none());
        guard.release().await.unwrap();
        assert!(!format!("{client:?}").contains(DATABASE_PASSWORD));
        client.close().await.unwrap();
    }
    for query in [&queries.certificate_only, &queries.encrypted] {
        let client = distlock::Client::connect(&url(query))
            .await
            .unwrap_or_else(|e| panic!("{query}: {e:?}"));
        client
            .mutex("tls")
            .lock()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        client.close().await.unwrap();
    }

    for (query, what, names) in [
        (&queries.untrusted, "an untrusted authority", "certificate"),
        (&queries.plain, "no TLS", ""),
        (&queries.missing, "a missing authority file", MISSING),
    ] {
        let err = distlock::Client::connect(&url(query))
            .await
            .expect_err(what);
        let shown = format!("{err} {err:?}");
        eprintln!("{what}: {err}");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {shown}");
        assert!(shown.contains(names), "{what}: {shown}");
        assert!(!shown.contains(DATABASE_PASSWORD), "{what}: {shown}");
    }
}

/// An authority file that is not there.
const MISSING: &str = "no-such-authority.pem";

/// An authority and server certificate for the server, and an authority of another.
fn certificates(dir: &tempfile::TempDir) -> (TestCertificates, TestCertificates) {
    let make = |name: &str| {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        TestCertificates::make(&sub).unwrap_or_else(|e| panic!("{e}"))
    };
    (make("server"), make("other"))
}

#[test]
fn postgres_over_tls_trusts_only_the_named_authority() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (certs, other) = certificates(&dir);
        let pg = distlock_testkit::postgres_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let base = distlock_testkit::postgres_url(&pg);
        let verify =
            |ca: &std::path::Path| format!("sslmode=verify-full&sslrootcert={}", ca.display());
        let queries = TlsQueries {
            verified: verify(&certs.ca),
            certificate_only: format!("sslmode=verify-ca&sslrootcert={}", certs.ca.display()),
            encrypted: "sslmode=require".into(),
            untrusted: verify(&other.ca),
            plain: "sslmode=disable".into(),
            missing: format!("sslmode=verify-full&sslrootcert={MISSING}"),
        };
        only_tls_with_a_trusted_server_is_used(|q| format!("{base}?{q}"), queries).await;
    });
}

#[test]
fn mariadb_over_tls_trusts_only_the_named_authority() {
    distlock_testkit::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (certs, other) = certificates(&dir);
        let db = distlock_testkit::mariadb_tls_server(&certs).unwrap_or_else(|e| panic!("{e}"));
        let base = distlock_testkit::mariadb_url(&db);
        let verify =
            |ca: &std::path::Path| format!("ssl-mode=verify_identity&ssl-ca={}", ca.display());
        let queries = TlsQueries {
            verified: verify(&certs.ca),
            certificate_only: format!("ssl-mode=verify_ca&ssl-ca={}", certs.ca.display()),
            encrypted: "ssl-mode=required".into(),
            untrusted: verify(&other.ca),
            plain: "ssl-mode=disabled".into(),
            missing: format!("ssl-mode=verify_ca&ssl-ca={MISSING}"),
        };
        only_tls_with_a_trusted_server_is_used(|q| format!("{base}?{q}"), queries).await;
    });
}

/// Connecting with `query` fails as bad input, saying `names`.
async fn refused_as_bad_input(url: String, names: &str) {
    let err = distlock::Client::connect(&url).await.expect_err(&url);
    eprintln!("{err}");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
    assert!(err.to_string().contains(names), "{url}: {err}");
    assert!(!format!("{err:?}").contains(DATABASE_PASSWORD), "{err:?}");
}

#[test]
fn tls_asked_of_a_server_without_it_or_an_authority_that_is_a_directory_is_bad_input() {
    distlock_testkit::block_on(async {
        let pg = distlock_testkit::postgres_server().unwrap_or_else(|e| panic!("{e}"));
        let db = distlock_testkit::mariadb_server().unwrap_or_else(|e| panic!("{e}"));
        let (pg, db) = (
            distlock_testkit::postgres_url(&pg),
            distlock_testkit::mariadb_url(&db),
        );
        refused_as_bad_input(format!("{pg}?sslmode=require"), "TLS").await;
        refused_as_bad_input(format!("{db}?ssl-mode=required"), "TLS").await;
        // An authority "file" that is a directory is named, not read as an empty store.
        let dir = std::env::temp_dir();
        let dir = dir.display();
        refused_as_bad_input(
            format!("{pg}?sslmode=verify-ca&sslrootcert={dir}"),
            "not a file",
        )
        .await;
        refused_as_bad_input(
            format!("{db}?ssl-mode=verify_ca&ssl-ca={dir}"),
            "not a file",
        )
        .await;
    });
}
