//! The PostgreSQL and MariaDB launchers, against the real servers: they start with a user
//! who needs the password, answer queries, stop answering while paused, and come back on
//! the same port after a restart with their data.

use std::time::Duration;

use distlock_testkit::{
    Server, block_on, mariadb_server, mariadb_url, postgres_server, postgres_url,
};
use sqlx::{AnyConnection, Connection, Row};

/// The answer to `SELECT 41 + 1` as a 64-bit integer, in each dialect.
const PG_ANSWER: &str = "SELECT CAST(41 + 1 AS BIGINT)";
const MARIADB_ANSWER: &str = "SELECT CAST(41 + 1 AS SIGNED)";

/// `sql` (one of the answers above) on a new connection to `url`, given at most two seconds.
async fn answer(url: &str, sql: &str) -> Result<i64, String> {
    let query = async {
        let mut conn = AnyConnection::connect(url).await?;
        sqlx::query(sql)
            .fetch_one(&mut conn)
            .await?
            .try_get::<i64, _>(0)
    };
    match tokio::time::timeout(Duration::from_secs(2), query).await {
        Ok(answer) => answer.map_err(|e| e.to_string()),
        Err(_) => Err("no answer within 2 s".into()),
    }
}

fn exercise(mut server: Server, url: impl Fn(&Server) -> String, sql: &str) {
    block_on(async {
        sqlx::any::install_default_drivers();
        let url_now = url(&server);
        assert_eq!(answer(&url_now, sql).await, Ok(42));
        let wrong = url_now.replace(distlock_testkit::DATABASE_PASSWORD, "wrong");
        assert!(
            answer(&wrong, sql).await.is_err(),
            "the password is checked"
        );

        let mut conn = AnyConnection::connect(&url_now).await.unwrap();
        sqlx::query("CREATE TABLE kept (id INT PRIMARY KEY)")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO kept VALUES (7)")
            .execute(&mut conn)
            .await
            .unwrap();
        drop(conn);

        server.pause();
        assert!(
            answer(&url_now, sql).await.is_err(),
            "a paused server does not answer"
        );
        server.resume();
        assert_eq!(answer(&url_now, sql).await, Ok(42));

        let port = server.port();
        server.restart().unwrap();
        assert_eq!(server.port(), port, "restart keeps the port");
        let mut conn = AnyConnection::connect(&url(&server)).await.unwrap();
        let kept: i32 = sqlx::query("SELECT id FROM kept")
            .fetch_one(&mut conn)
            .await
            .unwrap()
            .get(0);
        assert_eq!(kept, 7, "data survives a restart");
        drop(conn);

        server.kill();
        assert!(
            answer(&url_now, sql).await.is_err(),
            "a killed server does not answer"
        );
    });
}

#[test]
fn postgres_starts_pauses_resumes_restarts_and_kills() {
    let server = postgres_server().unwrap_or_else(|e| panic!("{e}"));
    exercise(server, postgres_url, PG_ANSWER);
}

#[test]
fn mariadb_starts_pauses_resumes_restarts_and_kills() {
    let server = mariadb_server().unwrap_or_else(|e| panic!("{e}"));
    exercise(server, mariadb_url, MARIADB_ANSWER);
}
