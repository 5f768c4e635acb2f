//! Calling another node: a signed `POST /rpc/v1/{operation}` to its RPC address, with a
//! deadline, and an answer believed only when it is signed for this call.
//!
//! RPC goes straight to the cluster's own addresses, outside the outbound policy (which
//! governs what members' tools, models and Apps may reach): the addresses come from the
//! `nodes` table, which only nodes write.

use std::time::Duration;

use reqwest::header::HeaderValue;

use super::auth::{self, ClusterKey, header};
use super::{PREFIX, RpcError};
use crate::cluster::NodeRecord;
use crate::store::now_ms;

/// A node's client for calling the others.
#[derive(Debug, Clone)]
pub struct NodeClient {
    node: String,
    key: ClusterKey,
    http: reqwest::Client,
}

impl NodeClient {
    /// The client node `node` calls others with.
    pub fn new(node: &str, key: ClusterKey) -> Result<Self, RpcError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(2))
            .build()
            .map_err(|err| RpcError::Setup(err.to_string()))?;
        Ok(Self {
            node: node.to_string(),
            key,
            http,
        })
    }

    /// Calls `operation` on `to` with `body`, waiting at most `within`. `request_id` names the
    /// call: give the same one to each try of the same call.
    pub async fn call(
        &self,
        to: &NodeRecord,
        operation: &str,
        body: Vec<u8>,
        within: Duration,
        request_id: &str,
    ) -> Result<Vec<u8>, RpcError> {
        let node = to.name.clone();
        let path = format!("{PREFIX}{operation}");
        let time = now_ms().to_string();
        let deadline = (now_ms() + within.as_millis() as i64).to_string();
        let nonce = auth::nonce();
        let digest = auth::digest(&body);
        let head = auth::RequestHead {
            method: "POST",
            path: &path,
            node: &self.node,
            time: &time,
            nonce: &nonce,
            deadline: &deadline,
            request_id,
        };
        let signature = self.key.sign(&head.parts(&digest));
        let value = |text: &str| {
            HeaderValue::from_str(text)
                .map_err(|_| RpcError::Setup(format!("`{text}` cannot be sent in a header")))
        };
        let request = self
            .http
            .post(format!("http://{}{path}", to.rpc_address))
            .timeout(within)
            .header(header::NODE, value(&self.node)?)
            .header(header::TIME, value(&time)?)
            .header(header::NONCE, value(&nonce)?)
            .header(header::DEADLINE, value(&deadline)?)
            .header(header::REQUEST_ID, value(request_id)?)
            .header(header::SIGNATURE, value(&signature)?)
            .body(body);
        let response = request.send().await.map_err(|err| {
            if err.is_timeout() {
                RpcError::Deadline { node: node.clone() }
            } else if err.is_connect() {
                RpcError::Unreachable { node: node.clone() }
            } else {
                RpcError::Lost { node: node.clone() }
            }
        })?;
        let status = response.status().as_u16();
        let signed = response
            .headers()
            .get(header::SIGNATURE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let answered_by = response
            .headers()
            .get(header::NODE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response.bytes().await.map_err(|err| {
            if err.is_timeout() {
                RpcError::Deadline { node: node.clone() }
            } else {
                RpcError::Lost { node: node.clone() }
            }
        })?;
        let code = status.to_string();
        let digest = auth::digest(&body);
        let genuine = match (&signed, &answered_by) {
            (Some(signature), Some(by)) if *by == to.name => self
                .key
                .verify(&auth::answer_parts(&nonce, &code, by, &digest), signature),
            _ => false,
        };
        if !genuine {
            return Err(RpcError::Unauthenticated { node });
        }
        let reason = || {
            serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_string))
                .unwrap_or_default()
        };
        match status {
            200..=299 => Ok(body.to_vec()),
            400..=499 => Err(RpcError::Refused {
                node,
                status,
                reason: reason(),
            }),
            _ => Err(RpcError::Failed {
                node,
                status,
                reason: reason(),
            }),
        }
    }
}
