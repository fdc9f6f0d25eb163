//! The fan-in stage: looking at the workers' results together. Best-of-N selection
//! and the conflict map ([`select::fan_in`], [`conflicts`]), the integration branch
//! that merges every success that merges cleanly ([`conflicts::integrate_report`]),
//! and, for matrix mode, verifying and importing the branch bundles that worker jobs
//! hand over ([`bundle`]). It hands the amended [`crate::run::results::RunReport`] to
//! the report stage.

pub mod bundle;
pub mod conflicts;
pub mod select;
