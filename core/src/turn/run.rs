//! The Turn loop.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use openbot_schema::{
    ContentPart, ErrorCategory, EventKind, Limits, Message, ToolResult, TurnOutcome, Usage,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::call::{CallKey, CallResult, CallSlot, CallStatus};
use super::context;
use super::host::{Host, HostError, RequestEstimate, TurnEnd, TurnFailure};
use super::limits;
use super::tools::ToolSet;
use crate::model::{Model, ModelError, ModelEvent, ModelRequest, ModelResponse};
use crate::telemetry;

/// How many attempts a model step gets before the Turn fails. Only failures that may pass
/// (a broken stream, 429, 5xx, a timeout) are tried again.
pub const MODEL_ATTEMPTS: u32 = 3;

/// How often a Turn is replayed because input arrived as it ended ([`HostError::InputArrived`])
/// before the loop gives the error to its host's runner.
const MAX_END_REPLAYS: u32 = 8;

/// Everything a Turn needs to run.
#[derive(Clone)]
pub struct TurnSpec {
    /// The system instructions.
    pub instructions: String,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The tools.
    pub tools: Arc<ToolSet>,
    /// The limits of this Turn.
    pub limits: Limits,
    /// The conversation before this Turn, oldest first.
    pub history: Vec<Message>,
    /// The input that started the Turn.
    pub input: Vec<ContentPart>,
    /// The most tokens each answer may have.
    pub max_output_tokens: Option<u32>,
}

impl std::fmt::Debug for TurnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnSpec")
            .field("model", &self.model.name())
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .field("history", &self.history.len())
            .finish_non_exhaustive()
    }
}

/// How one step ended.
enum StepEnd {
    /// Go on with the next step.
    Continue,
    /// The Turn ends.
    End(Result<TurnOutcome, TurnFailure>),
}

/// Runs a Turn to its end through `host` and returns how it ended, after the host saved it.
///
/// Returns `Err` only when the host itself fails (storage lost, a newer owner): then the Turn
/// has not ended and its host's runner decides what happens next.
pub async fn run_turn(spec: TurnSpec, host: &dyn Host) -> Result<TurnEnd, HostError> {
    let mut replays = 0;
    loop {
        let mut turn = TurnRun::new(spec.clone(), host);
        let outcome = turn.run().await?;
        let end = TurnEnd {
            outcome,
            messages: turn.current.iter().map(|m| Message::clone(m)).collect(),
            usage: turn.usage,
        };
        match host.finish(end.clone()).await {
            Ok(()) => return Ok(end),
            // Input arrived after the last check: the saved calls replay, and the check takes it.
            Err(HostError::InputArrived) if replays < MAX_END_REPLAYS => replays += 1,
            Err(err) => return Err(err),
        }
    }
}

struct TurnRun<'h> {
    spec: TurnSpec,
    host: &'h dyn Host,
    /// The conversation before the Turn, shared with each request.
    history: Vec<Arc<Message>>,
    /// The messages this Turn added so far.
    current: Vec<Arc<Message>>,
    /// Their estimated tokens.
    current_tokens: u64,
    sizer: context::ContextSizer,
    usage: Usage,
    cancel: CancellationToken,
    deadline: Option<std::time::SystemTime>,
    /// How often each tool call (name and arguments) ran in this Turn, for the loop breaker.
    repeats: limits::RepeatCounter,
}

impl<'h> TurnRun<'h> {
    fn new(spec: TurnSpec, host: &'h dyn Host) -> Self {
        let deadline = limits::deadline(&spec.limits, host.started_at());
        let sizer = context::ContextSizer::new(
            spec.model.context_window(),
            spec.max_output_tokens,
            &spec.instructions,
            spec.tools.definitions(),
            &spec.history,
        );
        let history = spec.history.iter().cloned().map(Arc::new).collect();
        let mut turn = Self {
            spec,
            host,
            history,
            current: Vec::new(),
            current_tokens: 0,
            sizer,
            usage: Usage::default(),
            cancel: host.cancellation(),
            deadline,
            repeats: limits::RepeatCounter::default(),
        };
        let input = Message::User {
            content: turn.spec.input.clone(),
        };
        turn.push(input);
        turn
    }

    /// Adds a message to the Turn and keeps its token estimate.
    fn push(&mut self, message: Message) {
        self.current_tokens += context::estimate_message(&message);
        self.current.push(Arc::new(message));
    }

    async fn run(&mut self) -> Result<Result<TurnOutcome, TurnFailure>, HostError> {
        let mut step = 1;
        for input in self.host.take_steering(step, false).await? {
            self.push(Message::User { content: input });
        }
        loop {
            if self.cancel.is_cancelled() {
                return Ok(Ok(TurnOutcome::Cancelled));
            }
            if let Some(outcome) =
                limits::reached(&self.spec.limits, step, &self.usage, self.deadline)
            {
                return Ok(Ok(outcome));
            }
            match self.step(step).await? {
                StepEnd::Continue => step += 1,
                StepEnd::End(outcome) => return Ok(outcome),
            }
        }
    }

    async fn step(&mut self, step: u32) -> Result<StepEnd, HostError> {
        let (message, usage) = match self.model_call(step).await? {
            Ok(answer) => answer,
            Err(end) => return Ok(StepEnd::End(end)),
        };
        if let Some(usage) = usage {
            self.usage += usage;
        }
        let calls = match &message {
            Message::Assistant { tool_calls, .. } => tool_calls.clone(),
            _ => Vec::new(),
        };
        if let Some(max) = self.spec.limits.max_repeated_calls
            && !self.repeats.admit(&calls, max)
        {
            // The answer is left out of the conversation: its calls will never have results.
            return Ok(StepEnd::End(Ok(TurnOutcome::RepeatedToolCall)));
        }
        self.push(message);
        if calls.is_empty() {
            // The answer is final unless input arrived meanwhile; then the model sees it.
            let steering = self.host.take_steering(step + 1, true).await?;
            if steering.is_empty() {
                return Ok(StepEnd::End(Ok(TurnOutcome::Completed)));
            }
            for content in steering {
                self.push(Message::User { content });
            }
            return Ok(StepEnd::Continue);
        }
        let results = {
            let tools = Arc::clone(&self.spec.tools);
            let host = self.host;
            let cancel = &self.cancel;
            let runs = calls.iter().enumerate().map(|(index, call)| {
                let tools = Arc::clone(&tools);
                async move { tools.run_call(host, step, index as u32, call, cancel).await }
            });
            let all = futures::future::join_all(runs);
            tokio::select! {
                results = all => results,
                _ = self.cancel.cancelled() => return Ok(StepEnd::End(Ok(TurnOutcome::Cancelled))),
                _ = limits::sleep_until(self.deadline) => {
                    self.cancel.cancel();
                    return Ok(StepEnd::End(Ok(TurnOutcome::MaxTime)));
                }
            }
        };
        for result in results {
            let result: ToolResult = result?;
            self.push(Message::Tool { result });
        }
        for input in self.host.take_steering(step + 1, false).await? {
            self.push(Message::User { content: input });
        }
        Ok(StepEnd::Continue)
    }

    /// The model's answer for `step`: saved, or asked for with up to [`MODEL_ATTEMPTS`].
    async fn model_call(
        &mut self,
        step: u32,
    ) -> Result<Result<(Message, Option<Usage>), Result<TurnOutcome, TurnFailure>>, HostError> {
        let mut attempt = match self.host.saved_call(step, CallSlot::Model).await? {
            Some(record) => match record.status {
                CallStatus::Done {
                    result: CallResult::Model { message, usage },
                } => {
                    return Ok(Ok((message, usage)));
                }
                CallStatus::Intent => record.key.attempt,
                // A model request writes nothing outside: a lost answer is asked for again.
                _ => record.key.attempt + 1,
            },
            None => 1,
        };
        if self.host.budget_exhausted().await? {
            return Ok(Err(Ok(TurnOutcome::MaxCost)));
        }
        let mut request = match self.request() {
            Ok(request) => Some(request),
            Err(overflow) => {
                return Ok(Err(Err(TurnFailure {
                    category: ErrorCategory::Configuration,
                    cause: overflow.to_string(),
                })));
            }
        };
        let first_attempt = attempt;
        loop {
            let key = CallKey {
                step,
                slot: CallSlot::Model,
                attempt,
            };
            // The first attempt takes the request; a retry builds it again.
            let this_request = match request.take() {
                Some(request) => request,
                None => match self.request() {
                    Ok(request) => request,
                    Err(overflow) => {
                        return Ok(Err(Err(TurnFailure {
                            category: ErrorCategory::Configuration,
                            cause: overflow.to_string(),
                        })));
                    }
                },
            };
            let outcome = tokio::select! {
                outcome = self.attempt(key, this_request) => match outcome {
                    // A refused reservation: nothing was sent or saved for this attempt.
                    Err(HostError::Declined(outcome)) => return Ok(Err(Ok(outcome))),
                    other => other?,
                },
                _ = self.cancel.cancelled() => return Ok(Err(Ok(TurnOutcome::Cancelled))),
                _ = limits::sleep_until(self.deadline) => return Ok(Err(Ok(TurnOutcome::MaxTime))),
            };
            match outcome {
                Ok(response) => {
                    let message = response.to_message();
                    // Calls the loop breaker will refuse are never published: no one may act
                    // on a call that will not run.
                    let refused =
                        self.spec.limits.max_repeated_calls.is_some_and(|max| {
                            self.repeats.would_refuse(&response.tool_calls, max)
                        });
                    let events = if refused {
                        Vec::new()
                    } else {
                        response
                            .tool_calls
                            .iter()
                            .map(|call| EventKind::ToolCall {
                                step,
                                call: call.clone(),
                            })
                            .collect()
                    };
                    // The intents of the calls that will run are saved with the answer.
                    let intents = if refused {
                        Vec::new()
                    } else {
                        (0..response.tool_calls.len() as u32)
                            .map(|index| CallKey {
                                step,
                                slot: CallSlot::Tool(index),
                                attempt: 1,
                            })
                            .collect()
                    };
                    let result = CallResult::Model {
                        message: message.clone(),
                        usage: response.usage,
                    };
                    self.host
                        .record_answer(key, result, events, intents)
                        .await?;
                    return Ok(Ok((message, response.usage)));
                }
                Err(err) if err.is_retryable() && attempt + 1 - first_attempt < MODEL_ATTEMPTS => {
                    tracing::debug!(step, attempt, error = %err, "model attempt failed; trying again");
                    let wait = retry_wait(&err, attempt + 1 - first_attempt);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.cancel.cancelled() => return Ok(Err(Ok(TurnOutcome::Cancelled))),
                    }
                    attempt += 1;
                }
                Err(err) => {
                    let category = match err {
                        ModelError::Configuration(_) | ModelError::ScriptExhausted(_) => {
                            ErrorCategory::Configuration
                        }
                        ModelError::Timeout => ErrorCategory::Timeout,
                        ModelError::Transport(_) => ErrorCategory::Network,
                        _ => ErrorCategory::ModelProvider,
                    };
                    return Ok(Err(Err(TurnFailure {
                        category,
                        cause: err.to_string(),
                    })));
                }
            }
        }
    }

    /// One attempt of a model call, inside its `chat {model}` span.
    async fn attempt(
        &self,
        key: CallKey,
        request: ModelRequest,
    ) -> Result<Result<ModelResponse, ModelError>, HostError> {
        let model = self.spec.model.name();
        let span = telemetry::chat(model, key.step, key.attempt);
        let started = std::time::Instant::now();
        let outcome = self
            .attempt_unlabelled(key, request)
            .instrument(span.clone())
            .await;
        match &outcome {
            Ok(Ok(response)) => telemetry::record_response(&span, model, response),
            Ok(Err(err)) => telemetry::record_error(&span, err.kind()),
            Err(_) => telemetry::record_error(&span, "host"),
        }
        if let Some(observer) = telemetry::observer() {
            let (provider, request_model) = telemetry::provider_and_model(model);
            observer.model_call(&telemetry::ModelCall {
                provider,
                model: request_model,
                usage: match &outcome {
                    Ok(Ok(response)) => response.usage,
                    _ => None,
                },
                took: started.elapsed(),
            });
        }
        outcome
    }

    /// One attempt of a model call: its start event, the streamed text, the whole answer.
    async fn attempt_unlabelled(
        &self,
        key: CallKey,
        request: ModelRequest,
    ) -> Result<Result<ModelResponse, ModelError>, HostError> {
        self.host.record_intent(key).await?;
        let started = EventKind::ModelStepStarted {
            step: key.step,
            attempt: key.attempt,
        };
        let estimate = self.estimate(&request);
        self.host
            .record_model_sending(key, vec![started], estimate)
            .await?;
        let mut stream = match self.spec.model.stream(request).await {
            Ok(stream) => stream,
            Err(err) => return Ok(Err(err)),
        };
        let mut response = ModelResponse::default();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(err) => return Ok(Err(err)),
            };
            if let ModelEvent::TextDelta(text) = &event {
                self.host
                    .publish(EventKind::TextDelta {
                        step: key.step,
                        attempt: key.attempt,
                        text: text.clone(),
                    })
                    .await?;
            }
            response.apply(&event);
        }
        if response.stop.is_none() {
            return Ok(Err(ModelError::Interrupted));
        }
        Ok(Ok(response))
    }

    /// What `request` is estimated to use, for the host's reservation.
    fn estimate(&self, request: &ModelRequest) -> RequestEstimate {
        let sent_history = request.messages.len() - self.current.len();
        let first = self.history.len() - sent_history;
        RequestEstimate {
            input_tokens: self.sizer.request_tokens(first, self.current_tokens),
            output_tokens: context::ContextSizer::output_reserve(request.max_output_tokens),
        }
    }

    fn request(&self) -> Result<ModelRequest, context::ContextOverflow> {
        let first = self
            .sizer
            .first_history_message(&self.spec.history, self.current_tokens)?;
        let mut messages = Vec::with_capacity(self.history.len() - first + self.current.len());
        messages.extend_from_slice(&self.history[first..]);
        messages.extend_from_slice(&self.current);
        Ok(ModelRequest {
            instructions: self.spec.instructions.clone(),
            messages,
            tools: self.spec.tools.shared_definitions(),
            max_output_tokens: self.spec.max_output_tokens,
        })
    }
}

/// How long to wait before another attempt: what the provider asked for, else 100 ms doubled
/// per attempt, at most 5 s.
fn retry_wait(err: &ModelError, retries: u32) -> Duration {
    if let ModelError::RateLimited {
        retry_after: Some(wait),
        ..
    } = err
    {
        return (*wait).min(Duration::from_secs(5));
    }
    Duration::from_millis(100u64 << retries.min(6)).min(Duration::from_secs(5))
}
