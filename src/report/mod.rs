//! The report stage: turning a finished run (its [`crate::run::results::RunReport`],
//! fan-in included) into what people read — `results.json` and the Markdown summary
//! ([`summary`], also the Actions step summary), the terminal table ([`table`]) and what to do next ([`next`]) — and
//! showing a run live while it goes ([`progress`], a reporter fed the run's typed
//! events). Publishing reads what this stage wrote.

pub mod next;
pub mod progress;
pub mod summary;
pub mod table;
