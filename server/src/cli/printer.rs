//! Printing a Turn's events as they stream: the answer's text for people, or one JSON line
//! per event. `openbot run`, `openbot chats send` and `openbot executions observe` share it.

use std::io::Write;
use std::process::ExitCode;

use openbot_schema::{ErrorCategory, ErrorId, Event, EventKind, ExecutionState, TurnOutcome};

/// Prints events in order and remembers how the Turn ended.
#[derive(Debug, Default)]
pub struct Printer {
    json: bool,
    /// Whether the current attempt printed text: a new attempt then starts on a fresh line.
    printed: bool,
    /// The outcome, once `turn_ended` was printed.
    pub outcome: Option<TurnOutcome>,
    /// The failure, once `failed` was printed.
    pub failure: Option<(ErrorCategory, ErrorId)>,
    /// How a tool job ended, once `job_ended` was printed.
    pub job: Option<ExecutionState>,
}

impl Printer {
    /// A printer of text, or of JSON lines with `json`.
    pub fn new(json: bool) -> Self {
        Self {
            json,
            ..Self::default()
        }
    }

    /// Prints one event.
    pub fn print(&mut self, event: &Event) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        if self.json {
            writeln!(stdout, "{}", serde_json::to_string(event)?)?;
        }
        match &event.kind {
            EventKind::TextDelta { text, .. } if !self.json => {
                write!(stdout, "{text}")?;
                stdout.flush()?;
                self.printed = true;
            }
            EventKind::ModelStepStarted { attempt, .. } if !self.json => {
                if *attempt > 1 && self.printed {
                    writeln!(stdout)?;
                    eprintln!("openbot: the answer broke off; asking again (attempt {attempt})");
                }
                self.printed = false;
            }
            EventKind::TurnEnded { outcome, .. } => {
                if !self.json && self.printed {
                    writeln!(stdout)?;
                }
                self.outcome = Some(*outcome);
            }
            EventKind::ApprovalRequested {
                request_id, call, ..
            } if !self.json => {
                eprintln!(
                    "openbot: the call `{}` waits for approval: openbot approvals approve {request_id}",
                    call.name
                );
            }
            EventKind::ChildStarted { child_id, kind, .. } if !self.json => {
                eprintln!(
                    "openbot: started {kind} {child_id}: openbot executions observe {child_id}"
                );
            }
            EventKind::JobEnded { state } => {
                self.job = Some(*state);
            }
            EventKind::Failed {
                category, error_id, ..
            } => {
                if !self.json && self.printed {
                    writeln!(stdout)?;
                }
                self.failure = Some((*category, *error_id));
            }
            _ => {}
        }
        Ok(())
    }

    /// 0 when the Turn (or tool job) completed; otherwise 1, after one line on standard error
    /// that says why (the caller adds a failure's cause when it may read it).
    pub fn exit_code(&self) -> ExitCode {
        match self.job {
            Some(ExecutionState::Completed) => return ExitCode::SUCCESS,
            Some(state) => {
                eprintln!("openbot: the tool job ended {}", state.as_str());
                return ExitCode::FAILURE;
            }
            None => {}
        }
        match (self.outcome, self.failure) {
            (Some(TurnOutcome::Completed), _) => ExitCode::SUCCESS,
            (Some(outcome), _) => {
                eprintln!("openbot: the turn ended early: {}", outcome_text(outcome));
                ExitCode::FAILURE
            }
            (None, Some((category, error_id))) => {
                eprintln!(
                    "openbot: the turn failed ({}; error id {error_id})",
                    serde_json::to_value(category)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                );
                ExitCode::FAILURE
            }
            (None, None) => {
                eprintln!("openbot: the event stream ended before the turn did");
                ExitCode::FAILURE
            }
        }
    }
}

fn outcome_text(outcome: TurnOutcome) -> &'static str {
    match outcome {
        TurnOutcome::Completed => "completed",
        TurnOutcome::MaxSteps => "the step limit was reached",
        TurnOutcome::MaxTime => "the time limit was reached",
        TurnOutcome::MaxCost => "the cost limit was reached",
        TurnOutcome::CreditsExhausted => "the organization's credits are used up",
        TurnOutcome::Cancelled => "cancelled",
        TurnOutcome::RepeatedToolCall => "the same tool call was repeated too often",
    }
}
