//! Fault points for the engine's process tests: in a build with the `fault-points` feature
//! (only the test builds of `scripts/test`), with `OPENBOT_FAULT_POINT` set to a point's name,
//! the process aborts at once when it reaches that point, like a crash. Any other build has no
//! fault points at all: every function here is empty and the variables are never read.
//!
//! Two kinds of points:
//!
//! - named places of a tool call ([`FaultPoint`]): `after_tool_intent`, `after_tool_sending`
//!   (marked sending, not yet sent) and `after_tool_sent` (sent, its result not yet saved);
//!   of a file deletion: `after_object_deleted` (its object gone, its row not yet); and of a
//!   submission that claimed its own work: `after_submission_claimed` (committed, not started);
//! - commit boundaries of the durable host. Each commit is labelled by what it carries
//!   ([`labels`]), and `before:<label>` / `after:<label>` abort just before / just after the
//!   first commit whose labels include `<label>`; `lost_reply:<label>` lets that commit succeed
//!   and tells the host it failed, as if its reply was lost; `hold:<label>` stops the host
//!   just after that commit (the process stays up) until the file named by
//!   `OPENBOT_FAULT_RELEASE` exists, after creating that name with `.held` added, so that a
//!   test can cut the node's database connections at that checkpoint of a live node. A label may join several with `+`
//!   (all must be carried) and end in `#n` (the n-th such commit, from 1). `after_tool_result`
//!   is `after:tool_result`.
//!
//! With `OPENBOT_FAULT_LOG` set to a file, each commit appends its labels (joined with `+`) as a
//! line, so a test can list the commit boundaries of a Turn and name every point.

/// What a commit of the durable host carries, as fault points name it.
pub mod labels {
    /// A model request's `sending` record (with its start event and input mark).
    pub const MODEL_SENDING: &str = "model_sending";
    /// A model's answer.
    pub const ANSWER: &str = "answer";
    /// The intents of the tool calls an answer asked for.
    pub const TOOL_INTENT: &str = "tool_intent";
    /// A tool call's `sending` record (for a retry-safe tool, saved with the answer).
    pub const TOOL_SENDING: &str = "tool_sending";
    /// A tool call's result.
    pub const TOOL_RESULT: &str = "tool_result";
    /// A Code Mode program's fixed time, saved when the program first starts.
    pub const CODE_CLOCK: &str = "code_clock";
    /// Text deltas.
    pub const TEXT: &str = "text";
    /// A waiting state (children, a delivery) or other events.
    pub const STATE: &str = "state";
    /// The Turn's end.
    pub const END: &str = "end";
}

/// Places in a tool call where a test may crash the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// A tool call's intent is saved; nothing was sent.
    AfterToolIntent,
    /// A tool call is marked sending; it is about to be sent.
    AfterToolSending,
    /// A tool call was sent and answered; its result is not saved yet.
    AfterToolSent,
    /// A file deletion removed the file's object; its row is not removed yet.
    AfterObjectDeleted,
    /// A submission claimed its own work for this node; the work has not started yet.
    AfterSubmissionClaimed,
}

impl FaultPoint {
    #[cfg_attr(not(feature = "fault-points"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterToolIntent => "after_tool_intent",
            FaultPoint::AfterToolSending => "after_tool_sending",
            FaultPoint::AfterToolSent => "after_tool_sent",
            FaultPoint::AfterObjectDeleted => "after_object_deleted",
            FaultPoint::AfterSubmissionClaimed => "after_submission_claimed",
        }
    }
}

/// Aborts the process if `point` is the configured fault point.
#[cfg(feature = "fault-points")]
pub fn fault(point: FaultPoint) {
    if armed::configured().as_deref() == Some(point.name()) {
        eprintln!("openbot: fault point {} reached; aborting", point.name());
        std::process::abort();
    }
}

/// Does nothing: this build has no fault points.
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn fault(_point: FaultPoint) {}

/// The fault of one commit, decided when it starts: whether it is the configured commit.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommitFault {
    #[cfg(feature = "fault-points")]
    target: Option<armed::Stage>,
    #[cfg(feature = "fault-points")]
    name: Option<&'static str>,
}

/// Called once per commit (not per retry), before it is sent: logs its labels and aborts at
/// `before:<label>`. The answer tells the commit what to do after it.
#[cfg(feature = "fault-points")]
pub fn commit_starts(labels: &[&'static str]) -> CommitFault {
    armed::log(labels);
    let target = armed::matches(labels);
    if target == Some(armed::Stage::Before) {
        eprintln!(
            "openbot: fault point before:{} reached; aborting",
            labels.join("+")
        );
        std::process::abort();
    }
    CommitFault {
        target,
        name: labels.first().copied(),
    }
}

/// Does nothing: this build has no fault points.
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn commit_starts(_labels: &[&'static str]) -> CommitFault {
    CommitFault::default()
}

impl CommitFault {
    /// After the commit succeeded: aborts at `after:<label>`, holds at `hold:<label>`.
    #[inline(always)]
    pub fn after(&self) {
        #[cfg(feature = "fault-points")]
        if self.target == Some(armed::Stage::After) {
            eprintln!(
                "openbot: fault point after:{} reached; aborting",
                self.name.unwrap_or_default()
            );
            std::process::abort();
        }
        #[cfg(feature = "fault-points")]
        if self.target == Some(armed::Stage::Hold) {
            armed::hold(self.name.unwrap_or_default());
        }
    }

    /// After the commit succeeded: whether its reply is to be lost (`lost_reply:<label>`).
    /// True once per process.
    #[inline(always)]
    pub fn lose_reply(&self) -> bool {
        #[cfg(feature = "fault-points")]
        if self.target == Some(armed::Stage::LostReply) {
            use std::sync::atomic::{AtomicBool, Ordering};
            static LOST: AtomicBool = AtomicBool::new(false);
            if !LOST.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "openbot: fault point lost_reply:{} reached; the reply is lost",
                    self.name.unwrap_or_default()
                );
                return true;
            }
        }
        false
    }
}

#[cfg(feature = "fault-points")]
mod armed {
    use std::io::Write as _;
    use std::sync::{Mutex, OnceLock, PoisonError};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Stage {
        Before,
        After,
        LostReply,
        Hold,
    }

    /// Stops this thread (the process stays up) until the release file exists; creates the
    /// `.held` file first, so the test knows the checkpoint is reached.
    pub(super) fn hold(name: &str) {
        let Some(release) = std::env::var_os("OPENBOT_FAULT_RELEASE") else {
            eprintln!("openbot: fault point hold:{name} needs OPENBOT_FAULT_RELEASE; aborting");
            std::process::abort();
        };
        let release = std::path::PathBuf::from(release);
        let mut held = release.clone().into_os_string();
        held.push(".held");
        if std::fs::write(&held, name).is_err() {
            eprintln!("openbot: fault point hold:{name} cannot mark itself held; aborting");
            std::process::abort();
        }
        eprintln!("openbot: fault point hold:{name} reached; holding");
        while !release.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("openbot: fault point hold:{name} released");
    }

    /// A commit-boundary point: its stage, the labels a commit must carry, which such commit.
    struct CommitPoint {
        stage: Stage,
        labels: Vec<String>,
        occurrence: u32,
    }

    pub(super) fn configured() -> &'static Option<String> {
        static CONFIGURED: OnceLock<Option<String>> = OnceLock::new();
        CONFIGURED.get_or_init(|| std::env::var("OPENBOT_FAULT_POINT").ok())
    }

    fn point() -> &'static Option<CommitPoint> {
        static POINT: OnceLock<Option<CommitPoint>> = OnceLock::new();
        POINT.get_or_init(|| {
            let text = configured().as_deref()?;
            // The older name of the point after a tool result's commit.
            let text = if text == "after_tool_result" {
                "after:tool_result"
            } else {
                text
            };
            let (stage, rest) = text.split_once(':')?;
            let stage = match stage {
                "before" => Stage::Before,
                "after" => Stage::After,
                "lost_reply" => Stage::LostReply,
                "hold" => Stage::Hold,
                _ => return None,
            };
            let (joined, occurrence) = match rest.split_once('#') {
                Some((joined, n)) => (joined, n.parse().ok()?),
                None => (rest, 1),
            };
            Some(CommitPoint {
                stage,
                labels: joined.split('+').map(str::to_string).collect(),
                occurrence,
            })
        })
    }

    /// Counts the commits that carry the point's labels; the stage when this is the one.
    pub(super) fn matches(labels: &[&'static str]) -> Option<Stage> {
        static SEEN: Mutex<u32> = Mutex::new(0);
        let point = point().as_ref()?;
        if !point.labels.iter().all(|l| labels.contains(&l.as_str())) {
            return None;
        }
        let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
        *seen += 1;
        (*seen == point.occurrence).then_some(point.stage)
    }

    pub(super) fn log(labels: &[&'static str]) {
        static LOG: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
        let file = LOG.get_or_init(|| {
            let path = std::env::var_os("OPENBOT_FAULT_LOG")?;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
                .map(Mutex::new)
        });
        if let Some(file) = file {
            let mut file = file.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = writeln!(file, "{}", labels.join("+"));
        }
    }
}
