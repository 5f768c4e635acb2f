//! Code Mode's own operation: run a program against a Bot's tools without a model, so a
//! developer can test code the model would write (docs/code-mode.md). Each run is a
//! `code_run` execution with a command key, its calls in the common call log.

mod service;
mod turn;
mod workflow;

pub use service::{CodeRunAnswer, CodeRunError, run_program};
pub use turn::CodeModeFeature;
pub use workflow::{CODE_CALL_ID, CODE_RUN, CodeRunInput, CodeRunWorkflow};
