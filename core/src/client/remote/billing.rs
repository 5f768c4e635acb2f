//! Usage reports and credits of the caller's organization (server only): inherent methods of
//! [`RemoteClient`].

use openbot_schema::{CreditBalance, UsagePage};
use reqwest::Method;

use super::RemoteClient;
use super::transport::Retry;
use crate::error::Error;

impl RemoteClient {
    /// A page of the usage report `query` selects (the query string of `GET /v1/usage`, e.g.
    /// `group_by=bot&from=2026-01-01T00:00:00Z`).
    pub async fn usage(&self, query: &str) -> Result<UsagePage, Error> {
        self.get(&format!("/v1/usage?{query}")).await
    }

    /// The usage report `query` selects, as CSV (`GET /v1/usage/export`).
    pub async fn usage_csv(&self, query: &str) -> Result<String, Error> {
        let path = format!("/v1/usage/export?{query}");
        let response = self
            .transport
            .send(Method::GET, &path, None::<&()>, Retry::Safe)
            .await?;
        response.text().await.map_err(|e| {
            Error::new(
                openbot_schema::ErrorCode::Unavailable,
                format!("the answer to {path} was lost: {e}"),
            )
        })
    }

    /// The organization's credits.
    pub async fn credits(&self) -> Result<CreditBalance, Error> {
        self.get("/v1/billing/credits").await
    }
}
