//! The links of paired machines: each machine's agent (`openbot computer run`) keeps one
//! WebSocket to one node (`GET /v1/computers/link`), and that node is the link's physical
//! owner in the resource directory (kind [`KIND`], scope [`scope`]). A call from any node goes
//! to the owner: here, over the socket; elsewhere, over node RPC ([`CALL`]).
//!
//! A call is sent once. A connection that breaks before the answer, or an answer that does not
//! come in time, is [`LinkError::Lost`] or [`LinkError::Deadline`]: the call may have run, and
//! nothing here sends it again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::extract::ws::{Message, WebSocket};
use openbot_core::computer::link::{AgentMessage, LinkCall, LinkReply, LinkResult, OutputBatch};
use openbot_schema::ExecutionId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::store::ComputerStore;
use crate::cluster::directory::{Directory, DirectoryError, Physical};
use crate::cluster::rpc::{OperationError, Operations, RpcError};

/// The directory kind of a machine's link.
pub const KIND: &str = "computer.link";

/// The RPC operation that runs a call on the node holding the machine's link.
pub const CALL: &str = "computer.call";

/// The longest a call waits for the machine's answer (a terminal read waits up to 30 s).
pub const CALL_DEADLINE: Duration = Duration::from_secs(45);

/// How often the node pings an idle link.
const PING: Duration = Duration::from_secs(15);

/// A link the node heard nothing from (no answer, no pong) for this long is taken as dead.
const SILENT: Duration = Duration::from_secs(45);

/// How much longer a routed call waits than the call itself: the hop to the owner.
const ROUTE_MARGIN: Duration = Duration::from_secs(5);

/// How many output batches wait to be saved before the link waits for them.
const OUTPUT_QUEUE: usize = 256;

/// The most batches one save writes.
const BATCHES_PER_SAVE: usize = 64;

/// The longest terminal session ID a node saves output of.
const MAX_SESSION_ID: usize = 64;

/// Saves a link's terminal output as it comes, all batches waiting at once in one
/// transaction, until the link ends. A save that fails is tried twice more; then its batches
/// are dropped, with a warning (a new link sends a session's kept output again).
async fn save_output(
    store: Arc<dyn ComputerStore>,
    computer: Uuid,
    mut queue: mpsc::Receiver<OutputBatch>,
) {
    while let Some(first) = queue.recv().await {
        let mut batches = vec![first];
        while batches.len() < BATCHES_PER_SAVE {
            match queue.try_recv() {
                Ok(batch) => batches.push(batch),
                Err(_) => break,
            }
        }
        let mut tries = 0;
        loop {
            tries += 1;
            match store.save_output(computer, &batches).await {
                Ok(()) => break,
                Err(err) if tries < 3 => {
                    tracing::debug!(computer = %computer, error_kind = crate::engine::store_error_kind(&err), "terminal output was not saved yet; trying again");
                    tokio::time::sleep(Duration::from_millis(200 * tries)).await;
                }
                Err(err) => {
                    tracing::warn!(computer = %computer, batches = batches.len(), error_kind = crate::engine::store_error_kind(&err), "terminal output could not be saved");
                    break;
                }
            }
        }
    }
}

/// The directory scope of Computer `id`'s link.
pub fn scope(computer: Uuid) -> String {
    format!("computer:{computer}")
}

/// Why a call reached no answer.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// No node holds a link to the machine: the call was not sent.
    #[error("the Computer is not connected: start `openbot computer run` on it")]
    NotConnected,
    /// The link broke after the call was sent: it may have run.
    #[error("the Computer's connection broke before its answer came; the call may have run")]
    Lost,
    /// No answer came in time: the call may have run, or may still run.
    #[error("the Computer gave no answer in time; the call may have run")]
    Deadline,
    /// The directory could not say where the link is: the call was not sent.
    #[error("the Computer's connection could not be found")]
    Directory(#[from] DirectoryError),
}

impl LinkError {
    /// Whether the call may have run on the machine.
    pub fn may_have_run(&self) -> bool {
        matches!(self, LinkError::Lost | LinkError::Deadline)
    }
}

/// One Computer tool call, as a Bot made it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The Computer tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
    /// The execution that made it.
    pub execution_id: ExecutionId,
    /// The provider's ID of the call.
    pub call_id: String,
}

/// A call routed to the link's owner.
#[derive(Serialize, Deserialize)]
struct RoutedCall {
    computer: Uuid,
    request: Request,
    within_ms: u64,
}

/// What one try of a routed call came to.
enum Routed<T> {
    /// The node ran it (or may have): this is the answer.
    Answered(T),
    /// The node did not run it: the link is not there.
    NotThere,
}

/// One live link on this node.
struct Link {
    resource: Uuid,
    outgoing: mpsc::Sender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<LinkResult>>>,
    next: AtomicU64,
    ended: CancellationToken,
}

impl Link {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<LinkResult>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn call(&self, request: Request, within: Duration) -> Result<LinkResult, LinkError> {
        if self.ended.is_cancelled() {
            return Err(LinkError::NotConnected);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let call = LinkCall {
            id,
            tool: request.tool,
            arguments: request.arguments,
            execution_id: request.execution_id,
            call_id: request.call_id,
        };
        let text = serde_json::to_string(&call).map_err(|_| LinkError::NotConnected)?;
        let (answer, answered) = oneshot::channel();
        self.pending().insert(id, answer);
        if self.outgoing.send(text).await.is_err() {
            // The link ended before the call was handed to its socket: it was never sent.
            self.pending().remove(&id);
            return Err(LinkError::NotConnected);
        }
        match tokio::time::timeout(within, answered).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(LinkError::Lost),
            Err(_) => {
                self.pending().remove(&id);
                Err(LinkError::Deadline)
            }
        }
    }

    fn answer(&self, reply: LinkReply) {
        if let Some(waiting) = self.pending().remove(&reply.id) {
            let _ = waiting.send(reply.result);
        }
    }
}

/// Closes a link when its owner is asked to (the Computer removed, the machine linked again
/// elsewhere, the lease lost).
struct LinkClose(CancellationToken);

#[async_trait]
impl Physical for LinkClose {
    async fn close(self: Box<Self>) -> Result<(), String> {
        self.0.cancel();
        Ok(())
    }
}

/// The machines' links this node holds, and the way to those other nodes hold.
pub struct Links {
    directory: Arc<Directory>,
    /// Where the machines' terminal output is saved.
    output: Option<Arc<dyn ComputerStore>>,
    held: Mutex<HashMap<Uuid, Arc<Link>>>,
    /// The node each machine was last reached through: tried first, and forgotten when it
    /// refuses (the link is not there any more), so a steady route costs no directory read.
    routes: Mutex<HashMap<Uuid, crate::cluster::NodeRecord>>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("held", &self.held().len())
            .finish_non_exhaustive()
    }
}

/// A link registered in the directory, before its socket is taken.
#[derive(Debug)]
pub struct Registered {
    computer: Uuid,
    resource: Uuid,
}

impl Links {
    /// The links of this node, registered in `directory`, saving the machines' terminal
    /// output in `output` (when given).
    pub fn new(directory: Arc<Directory>, output: Option<Arc<dyn ComputerStore>>) -> Arc<Self> {
        Arc::new(Self {
            directory,
            output,
            held: Mutex::default(),
            routes: Mutex::default(),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Link>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, crate::cluster::NodeRecord>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn local(&self, computer: Uuid) -> Option<Arc<Link>> {
        self.held()
            .get(&computer)
            .filter(|link| !link.ended.is_cancelled())
            .cloned()
    }

    /// Registers a link of `computer` owned by this node, before its socket is taken.
    pub async fn register(&self, computer: Uuid) -> Result<Registered, DirectoryError> {
        let resource = self
            .directory
            .register(KIND, &scope(computer), None, None)
            .await?;
        Ok(Registered { computer, resource })
    }

    /// Serves a registered link over `socket` until either side ends it; then its pending
    /// calls are lost, and its close is saved in the directory. Older links of the same
    /// machine, here or on other nodes, are closed.
    pub async fn serve(self: Arc<Self>, registered: Registered, mut socket: WebSocket) {
        let Registered { computer, resource } = registered;
        let (outgoing, mut to_send) = mpsc::channel::<String>(64);
        let link = Arc::new(Link {
            resource,
            outgoing,
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            ended: CancellationToken::new(),
        });
        if let Some(old) = self.held().insert(computer, Arc::clone(&link)) {
            old.ended.cancel();
        }
        self.directory
            .attach(resource, Box::new(LinkClose(link.ended.clone())));
        let directory = Arc::clone(&self.directory);
        crate::telemetry::spawn(async move {
            // The machine moved here: its links elsewhere end, each closed by its owner.
            if let Ok(open) = directory.open_resources(&scope(computer)).await {
                for row in open.into_iter().filter(|row| row.id != resource) {
                    if let Err(err) = directory.close(row.id).await {
                        tracing::warn!(resource = %row.id, error_kind = err.kind(), "an older link of a Computer could not be closed");
                    }
                }
            }
        });
        tracing::info!(computer = %computer, resource = %resource, "a Computer linked to this node");
        let saving = self.output.clone().map(|store| {
            let (batches, queue) = mpsc::channel::<OutputBatch>(OUTPUT_QUEUE);
            crate::telemetry::spawn(save_output(store, computer, queue));
            batches
        });
        let mut ping = tokio::time::interval(PING);
        let mut heard = Instant::now();
        loop {
            tokio::select! {
                received = socket.recv() => match received {
                    Some(Ok(Message::Text(text))) => {
                        heard = Instant::now();
                        match serde_json::from_str::<AgentMessage>(text.as_str()) {
                            Ok(AgentMessage::Reply(reply)) => link.answer(reply),
                            Ok(AgentMessage::Output { output }) => {
                                if output.session.id.len() > MAX_SESSION_ID {
                                    tracing::warn!(computer = %computer, "a Computer sent output of a session with an overlong ID; its link ends");
                                    break;
                                }
                                // Waits while the saves are behind: the machine slows down
                                // rather than output being lost.
                                if let Some(saving) = &saving
                                    && saving.send(output).await.is_err()
                                {
                                    break;
                                }
                            }
                            Err(_) => {
                                tracing::warn!(computer = %computer, "a Computer sent a message that is no answer; its link ends");
                                break;
                            }
                        }
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => heard = Instant::now(),
                    Some(Ok(Message::Binary(_))) => {
                        tracing::warn!(computer = %computer, "a Computer sent a binary message; its link ends");
                        break;
                    }
                    Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                },
                text = to_send.recv() => match text {
                    Some(text) => {
                        if socket.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                    None => break,
                },
                _ = ping.tick() => {
                    if heard.elapsed() > SILENT {
                        tracing::info!(computer = %computer, "a Computer's link went silent; it ends");
                        break;
                    }
                    if socket.send(Message::Ping(Default::default())).await.is_err() {
                        break;
                    }
                }
                () = link.ended.cancelled() => {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
            }
        }
        link.ended.cancel();
        // Dropping the waiting senders answers each pending call with `Lost`.
        link.pending().clear();
        {
            let mut held = self.held();
            if held
                .get(&computer)
                .is_some_and(|current| Arc::ptr_eq(current, &link))
            {
                held.remove(&computer);
            }
        }
        if let Err(err) = self.directory.close(link.resource).await {
            tracing::warn!(resource = %resource, error_kind = err.kind(), "a Computer link's close could not be saved");
        }
        tracing::info!(computer = %computer, resource = %resource, "a Computer's link ended");
    }

    /// Runs `request` on Computer `computer`, through whichever node holds its link, waiting
    /// at most `within` for the answer.
    pub async fn call(
        &self,
        computer: Uuid,
        request: Request,
        within: Duration,
    ) -> Result<LinkResult, LinkError> {
        if let Some(link) = self.local(computer) {
            return link.call(request, within).await;
        }
        let request_id = format!("{}:{}", request.execution_id, request.call_id);
        let routed = RoutedCall {
            computer,
            within_ms: within.as_millis() as u64,
            request,
        };
        let body = serde_json::to_vec(&routed).map_err(|_| LinkError::NotConnected)?;
        let peers = self.directory.peers();
        let cached = self.routes().get(&computer).cloned();
        if let (Some(peers), Some(node)) = (peers, cached) {
            match self.route(peers, &node, &body, within, &request_id).await {
                Routed::Answered(answer) => return answer,
                Routed::NotThere => {
                    self.routes().remove(&computer);
                }
            }
        }
        let open = self.directory.open_resources(&scope(computer)).await?;
        let incarnation = self.directory.incarnation();
        if open.iter().any(|row| row.owner_incarnation == incarnation)
            && let Some(link) = self.taken_soon(computer).await
        {
            // Registered here a moment ago: the agent hears it linked just before this node
            // takes its socket.
            return link.call(routed.request, within).await;
        }
        let Some(peers) = peers else {
            return Err(LinkError::NotConnected);
        };
        for row in open {
            if row.owner_node == self.directory.node() {
                // Ours, and ended since: not linked here any more.
                continue;
            }
            let node = match peers.nodes.node(&row.owner_node).await {
                Ok(Some(node)) if node.incarnation == row.owner_incarnation => node,
                Ok(_) => continue,
                Err(err) => return Err(LinkError::Directory(err.into())),
            };
            if let Routed::Answered(answer) =
                self.route(peers, &node, &body, within, &request_id).await
            {
                self.routes().insert(computer, node);
                return answer;
            }
        }
        Err(LinkError::NotConnected)
    }

    /// The link of `computer` on this node once its socket is taken, waiting up to a second.
    async fn taken_soon(&self, computer: Uuid) -> Option<Arc<Link>> {
        for _ in 0..20 {
            if let Some(link) = self.local(computer) {
                return Some(link);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// One try of a routed call on `node`.
    async fn route(
        &self,
        peers: &crate::cluster::directory::Peers,
        node: &crate::cluster::NodeRecord,
        body: &[u8],
        within: Duration,
        request_id: &str,
    ) -> Routed<Result<LinkResult, LinkError>> {
        match peers
            .client
            .call(node, CALL, body.to_vec(), within + ROUTE_MARGIN, request_id)
            .await
        {
            Ok(answer) => {
                Routed::Answered(serde_json::from_slice(&answer).map_err(|_| LinkError::Lost))
            }
            // Not run there: the link is not there (any more).
            Err(RpcError::Unreachable { .. } | RpcError::Refused { .. }) => Routed::NotThere,
            Err(RpcError::Deadline { .. }) => Routed::Answered(Err(LinkError::Deadline)),
            Err(_) => Routed::Answered(Err(LinkError::Lost)),
        }
    }

    /// Ends every link of Computer `computer`, each closed by the node that holds it, and
    /// waits for their saved results (a removed Computer). Answers whether all are closed.
    pub async fn close(&self, computer: Uuid) -> Result<bool, DirectoryError> {
        let statuses = self.directory.close_scope(&scope(computer)).await?;
        Ok(statuses
            .iter()
            .all(|(_, status)| matches!(status, crate::cluster::directory::ResourceStatus::Closed)))
    }

    /// `operations` with [`CALL`]: another node running a call on a link this node holds.
    pub fn operations(self: &Arc<Self>, operations: Operations) -> Operations {
        let links = Arc::clone(self);
        operations.with(CALL, move |call| {
            let links = Arc::clone(&links);
            async move {
                let routed: RoutedCall = serde_json::from_slice(&call.body)
                    .map_err(|_| OperationError::BadRequest("not a Computer call".into()))?;
                tracing::info!(from = %call.from, computer = %routed.computer, "a Computer call routed here from another node");
                let Some(link) = links.local(routed.computer) else {
                    return Err(OperationError::BadRequest(
                        "the Computer is not linked to this node".into(),
                    ));
                };
                let within = Duration::from_millis(routed.within_ms).min(CALL_DEADLINE);
                match link.call(routed.request, within).await {
                    Ok(result) => serde_json::to_vec(&result).map_err(|_| {
                        OperationError::Failed("the answer could not be written".into())
                    }),
                    Err(LinkError::NotConnected) => Err(OperationError::BadRequest(
                        "the Computer is not linked to this node".into(),
                    )),
                    Err(err) => Err(OperationError::Failed(err.to_string())),
                }
            }
        })
    }
}
