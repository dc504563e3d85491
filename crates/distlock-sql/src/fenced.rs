//! Resource-side fencing: writes that only land if the writer's fencing token is not older
//! than the one stored with the row.
//!
//! A lock alone cannot stop a holder that paused (a GC pause, a stalled VM) past its lease
//! from writing after someone else took over. The resource can: each row keeps the fencing
//! token of the last write, and a write carries its own; the database applies it only if
//! the token is not older. The holder that took over wrote with a greater token, so the
//! stale holder's write matches no row and is rejected.
//!
//! The pattern, in PostgreSQL's spelling (`$1` the writer's token, then the new values,
//! then the row's key):
//!
//! ```sql
//! UPDATE accounts SET balance = $2, fence = $1 WHERE id = $3 AND fence <= $1
//! ```
//!
//! `<=` rather than `<`: the same grant may write the row several times (tokens are unique
//! per grant, so only that grant has the equal token); any older grant is refused. Create
//! each row with `fence = 0` (or the first writer's token) before fenced writes reach it.
//! [`FencedUpdate`] writes this statement for PostgreSQL, MySQL/MariaDB and SQLite, always
//! taking its parameters in the same order: token, new values, key.

use distlock_core::{Error, Result};

/// The SQL dialect a statement is written for.
///
/// # Examples
///
/// ```
/// use distlock_sql::fenced::Dialect;
/// assert_eq!(Dialect::from_scheme("postgres"), Some(Dialect::Postgres));
/// assert_eq!(Dialect::from_scheme("mariadb"), Some(Dialect::MySql));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL: `$n` parameters.
    Postgres,
    /// MySQL and MariaDB: `?` parameters, in the order they appear.
    MySql,
    /// SQLite: `?n` parameters.
    Sqlite,
}

impl Dialect {
    /// The dialect of a database URL scheme (`postgres`, `postgresql`, `mysql`, `mariadb`,
    /// `sqlite`).
    ///
    /// # Examples
    ///
    /// See [`Dialect`].
    pub fn from_scheme(scheme: &str) -> Option<Dialect> {
        match scheme {
            "postgres" | "postgresql" => Some(Dialect::Postgres),
            "mysql" | "mariadb" => Some(Dialect::MySql),
            "sqlite" => Some(Dialect::Sqlite),
            _ => None,
        }
    }

    /// The `n`th (from 1) parameter's placeholder.
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql => "?".to_owned(),
            Dialect::Sqlite => format!("?{n}"),
        }
    }
}

/// A fenced `UPDATE` of one row: sets some columns and the row's fence column to the
/// writer's token, only where the stored token is not newer.
///
/// Bind, in this order: the fencing token (as a signed 64-bit integer), one value per
/// column given to [`set`](Self::set), then the row's key. The write landed if exactly
/// one row was affected ([`applied`]).
///
/// # Examples
///
/// ```
/// use distlock_sql::fenced::{Dialect, FencedUpdate};
///
/// let update = FencedUpdate::new("accounts", "id", "fence")?.set("balance")?;
/// assert_eq!(
///     update.sql(Dialect::Postgres),
///     "UPDATE accounts SET balance = $2, fence = $1 WHERE id = $3 AND fence <= $1"
/// );
/// assert_eq!(
///     update.sql(Dialect::MySql),
///     "UPDATE accounts JOIN (SELECT ? AS token) AS writer SET accounts.balance = ?, \
///      accounts.fence = writer.token WHERE accounts.id = ? AND accounts.fence <= writer.token"
/// );
/// // With sqlx: sqlx::query(&update.sql(Dialect::Postgres))
/// //     .bind(guard.fencing_token() as i64).bind(balance).bind(id).execute(&pool).await?
/// # Ok::<(), distlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedUpdate {
    table: String,
    key: String,
    fence: String,
    columns: Vec<String>,
}

impl FencedUpdate {
    /// An update of `table`'s row whose `key` column is bound last, fenced by the integer
    /// column `fence`. Names must be plain SQL identifiers (letters, digits, `_`, not
    /// starting with a digit), optionally qualified by a schema (`billing.accounts`).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_sql::fenced::FencedUpdate;
    /// assert!(FencedUpdate::new("accounts; DROP TABLE x", "id", "fence").is_err());
    /// ```
    pub fn new(table: &str, key: &str, fence: &str) -> Result<FencedUpdate> {
        Ok(FencedUpdate {
            table: identifier(table, true)?,
            key: identifier(key, false)?,
            fence: identifier(fence, false)?,
            columns: Vec::new(),
        })
    }

    /// Also sets `column` (its value is bound after the token and earlier columns).
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_sql::fenced::FencedUpdate;
    /// let update = FencedUpdate::new("stock", "sku", "fence")?.set("count")?.set("note")?;
    /// assert!(update.set("fence").is_err(), "the fence column is set by the statement itself");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn set(mut self, column: &str) -> Result<FencedUpdate> {
        let column = identifier(column, false)?;
        if column == self.fence || column == self.key {
            return Err(Error::invalid(format!(
                "`{column}` is the key or the fence column; a fenced update sets the fence itself and never changes the key"
            )));
        }
        self.columns.push(column);
        Ok(self)
    }

    /// The statement in `dialect`.
    ///
    /// # Examples
    ///
    /// ```
    /// use distlock_sql::fenced::{Dialect, FencedUpdate};
    /// let update = FencedUpdate::new("t", "id", "fence")?.set("v")?;
    /// assert_eq!(update.sql(Dialect::Sqlite),
    ///     "UPDATE t SET v = ?2, fence = ?1 WHERE id = ?3 AND fence <= ?1");
    /// # Ok::<(), distlock_core::Error>(())
    /// ```
    pub fn sql(&self, dialect: Dialect) -> String {
        let key_param = dialect.param(self.columns.len() + 2);
        match dialect {
            Dialect::Postgres | Dialect::Sqlite => {
                let token = dialect.param(1);
                let sets: Vec<String> = self
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c} = {}", dialect.param(i + 2)))
                    .chain([format!("{} = {token}", self.fence)])
                    .collect();
                format!(
                    "UPDATE {} SET {} WHERE {} = {key_param} AND {} <= {token}",
                    self.table,
                    sets.join(", "),
                    self.key,
                    self.fence
                )
            }
            Dialect::MySql => {
                // MySQL's `?` cannot be repeated: the token is bound once, in a derived
                // table, and referred to by name.
                let t = &self.table;
                let sets: Vec<String> = self
                    .columns
                    .iter()
                    .map(|c| format!("{t}.{c} = ?"))
                    .chain([format!("{t}.{} = writer.token", self.fence)])
                    .collect();
                format!(
                    "UPDATE {t} JOIN (SELECT ? AS token) AS writer SET {} WHERE {t}.{} = {key_param} AND {t}.{} <= writer.token",
                    sets.join(", "),
                    self.key,
                    self.fence
                )
            }
        }
    }
}

/// Whether a fenced write landed, from the rows it affected: `false` means the row holds a
/// newer token (a later holder wrote; this writer's grant is stale) or does not exist.
///
/// # Examples
///
/// ```
/// assert!(distlock_sql::fenced::applied(1));
/// assert!(!distlock_sql::fenced::applied(0));
/// ```
pub fn applied(rows_affected: u64) -> bool {
    rows_affected == 1
}

/// `name` if it is a plain identifier (or, where `qualified`, `schema.identifier`).
fn identifier(name: &str, qualified: bool) -> Result<String> {
    let plain = |part: &str| {
        part.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let parts: Vec<&str> = name.split('.').collect();
    let fits =
        parts.iter().all(|p| plain(p)) && (parts.len() == 1 || (qualified && parts.len() == 2));
    if fits && name.len() <= 128 {
        Ok(name.to_owned())
    } else {
        Err(Error::invalid(format!(
            "`{name}` is not a plain SQL identifier (letters, digits and `_`, not starting with a digit{})",
            if qualified {
                ", optionally `schema.table`"
            } else {
                ""
            }
        )))
    }
}
