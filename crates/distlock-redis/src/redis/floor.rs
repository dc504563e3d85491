//! What `distlock bench` measures a Redis lock against: a `PING`, and the least a correct
//! lock costs on this server.

use distlock_core::backend::{Floor, async_trait};
use distlock_core::{Error, ErrorKind, Result, random_id};

use super::RedisBackend;
use crate::error::redis_error;
use crate::keys::Key;
use crate::scripts::{Call, SCRIPTS};

#[async_trait]
impl Floor for RedisBackend {
    fn op(&self) -> &'static str {
        "PING"
    }

    async fn round(&self) -> Result<()> {
        let mut conn = self.any_conn();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(redis_error("ping"))?;
        Ok(())
    }

    fn cycle_op(&self) -> Option<&'static str> {
        Some("SET NX PX + EVALSHA compare-and-delete")
    }

    /// The least a correct lock costs on this server: no fencing, no queue, no record of
    /// the holder; on the connection the lock `name` would use.
    async fn cycle_round(&self, name: &str) -> Result<()> {
        let keys = self.keys(name)?;
        let token = random_id();
        let mut conn = self.request_conn(name);
        let taken: Option<String> = redis::cmd("SET")
            .arg(keys.named(Key::Lock))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .map_err(redis_error("acquire"))?;
        if taken.is_none() {
            return Err(Error::new(
                ErrorKind::Backend,
                format!("the bench's own key `{name}` was taken by someone else"),
            )
            .with_backend("redis"));
        }
        let mut release = Call::new(&SCRIPTS.compare_and_delete, keys, &[Key::Lock]);
        release.arg(&token);
        let _: i64 = self.invoke_on(conn, "release", &release).await?;
        Ok(())
    }
}
