//! Statements prepared once per connection.
//!
//! tokio-postgres runs a statement given as text in two round trips: it
//! prepares it, then binds and executes it. A statement prepared before
//! runs in one. The pool keeps each connection's prepared statements, so
//! the paths every IMAP command takes name their SQL through these
//! methods and pay the prepare once per connection. SQL built per call
//! (SEARCH) is not cached: its shapes have no bound.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::error::Result;

/// Parameters of a statement, as tokio-postgres takes them.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// `query`, `query_opt`, `query_one` and `execute` on a statement prepared once per
/// connection.
#[async_trait::async_trait]
pub(super) trait Prepared {
    async fn query_prepared(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>>;
    async fn query_opt_prepared(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>>;
    async fn query_one_prepared(&self, sql: &str, params: Params<'_>) -> Result<Row>;
    async fn execute_prepared(&self, sql: &str, params: Params<'_>) -> Result<u64>;
}

#[async_trait::async_trait]
impl<C: GenericClient + Sync> Prepared for C {
    async fn query_prepared(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let statement = self.prepare_cached(sql).await?;
        Ok(self.query(&statement, params).await?)
    }

    async fn query_opt_prepared(&self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        let statement = self.prepare_cached(sql).await?;
        Ok(self.query_opt(&statement, params).await?)
    }

    async fn query_one_prepared(&self, sql: &str, params: Params<'_>) -> Result<Row> {
        let statement = self.prepare_cached(sql).await?;
        Ok(self.query_one(&statement, params).await?)
    }

    async fn execute_prepared(&self, sql: &str, params: Params<'_>) -> Result<u64> {
        let statement = self.prepare_cached(sql).await?;
        Ok(self.execute(&statement, params).await?)
    }
}
