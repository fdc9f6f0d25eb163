//! The fan-in stage: looking at the workers' results together. Best-of-N selection
//! and the conflict map ([`select::fan_in`], [`conflicts`]), the integration branch
//! that merges every success that merges cleanly ([`conflicts::integrate_report`]),
//! and, for matrix mode, the artifacts worker jobs hand over ([`artifact`]: their
//! results and branch bundles ([`bundle`]), verified and imported). It hands the
//! amended [`crate::run::results::RunReport`] to the report stage.

pub mod artifact;
pub mod bundle;
pub mod conflicts;
pub mod select;
