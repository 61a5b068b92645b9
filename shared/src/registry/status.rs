//! The statuses a module version moves through, as HCP Terraform spells them: `pending` until
//! its archive is ingested, then `ok` or `reg_ingress_failed`. Both the version record and its
//! module's `versions` list carry them.

pub const PENDING: &str = "pending";
pub const OK: &str = "ok";
pub const FAILED: &str = "reg_ingress_failed";
