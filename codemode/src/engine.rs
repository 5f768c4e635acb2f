use std::sync::OnceLock;

use wasmtime::{Config, Engine, InstancePre, Linker, Module};

use crate::imports::{self, State};

/// The guest module, built by scripts/build-codemode-guest and embedded by build.rs.
static GUEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.wasm"));

/// How often the ticker advances the engine's epoch: the granularity of the wall-time limit.
pub(crate) const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(10);

/// Native stack wasm code may use; the run thread gets room above it.
pub(crate) const MAX_WASM_STACK: usize = 2 << 20;

/// Why the sandbox could not start or run a program (never a program's own failure:
/// that is a [`crate::ProgramError`] in the outcome).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SandboxError {
    /// The engine or the guest module could not be prepared.
    #[error("the Code Mode engine could not start: {0}")]
    Engine(String),
    /// The run thread could not be started or ended without an outcome.
    #[error("the Code Mode run could not complete: {0}")]
    Run(String),
}

/// The compiled guest: one wasmtime Engine and the guest module compiled once, ready to be
/// instantiated in a fresh Store per run.
pub struct Sandbox {
    pub(crate) engine: Engine,
    pub(crate) pre: InstancePre<State>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The process's sandbox, compiled on first use. Later calls return the same one (or the
    /// same error).
    pub fn shared() -> Result<&'static Sandbox, SandboxError> {
        static SHARED: OnceLock<Result<Sandbox, SandboxError>> = OnceLock::new();
        SHARED
            .get_or_init(Sandbox::new)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Compiles the guest module in a new engine (what [`Sandbox::shared`] does once).
    pub fn new() -> Result<Sandbox, SandboxError> {
        let mut config = Config::new();
        config.consume_fuel(true);
        // Wall time beside fuel: fuel does not advance while a program waits for the host.
        config.epoch_interruption(true);
        config.max_wasm_stack(MAX_WASM_STACK);
        // Same results on every machine: replay compares what the program asks for.
        config.cranelift_nan_canonicalization(true);
        let engine = Engine::new(&config).map_err(|e| SandboxError::Engine(e.to_string()))?;
        let module =
            Module::new(&engine, GUEST).map_err(|e| SandboxError::Engine(e.to_string()))?;
        let mut linker: Linker<State> = Linker::new(&engine);
        imports::define(&mut linker).map_err(|e| SandboxError::Engine(e.to_string()))?;
        // Anything else the C library might import traps instead of reaching the host.
        linker
            .define_unknown_imports_as_traps(&module)
            .map_err(|e| SandboxError::Engine(e.to_string()))?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| SandboxError::Engine(e.to_string()))?;
        start_ticker(&engine)?;
        Ok(Sandbox { engine, pre })
    }

    /// The epoch ticks a run of `wall_ms` may last (at least one).
    pub(crate) fn deadline_ticks(wall_ms: u64) -> u64 {
        (wall_ms / EPOCH_TICK.as_millis() as u64).max(1)
    }

    /// Size of the embedded guest module in bytes.
    pub fn guest_bytes() -> usize {
        GUEST.len()
    }
}

/// One thread per engine (so one per process for [`Sandbox::shared`]) that advances its epoch
/// every [`EPOCH_TICK`]; it ends when the engine is dropped.
fn start_ticker(engine: &Engine) -> Result<(), SandboxError> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("codemode-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .map(drop)
        .map_err(|e| SandboxError::Engine(format!("the epoch ticker could not start: {e}")))
}
