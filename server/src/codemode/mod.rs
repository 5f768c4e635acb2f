//! Code Mode's own operation: run a program against a Bot's tools without a model, so a
//! developer can test code the model would write (docs/code-mode.md).

mod service;

pub use service::{CodeRunError, run_program};
