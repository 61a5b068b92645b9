//! The runs family's JSON:API resources, in HCP Terraform's shapes.

use serde_json::json;

use super::record::{phase_id, ConfigurationVersion, Phase, Run};
use super::runs::{allowed, Action};
use crate::accounts::workspaces::WorkspacePermissions;
use crate::api::Resource;

pub fn configuration_version(cv: &ConfigurationVersion, upload_url: Option<String>) -> Resource {
    Resource::new(
        "configuration-versions",
        &cv.id,
        json!({
            "auto-queue-runs": cv.auto_queue_runs,
            "error": cv.error.as_ref().map(|_| "refused"),
            "error-message": cv.error,
            "source": "tfe-api",
            "speculative": cv.speculative,
            "provisional": false,
            "status": cv.status.as_str(),
            "status-timestamps": cv.status_timestamps,
            "changed-files": [],
            "upload-url": upload_url,
        }),
    )
    .to_one("ingress-attributes", "ingress-attributes", format!("ia-{}", cv.id.trim_start_matches("cv-")))
    .link("self", format!("/api/v2/configuration-versions/{}", cv.id))
    .link("download", format!("/api/v2/configuration-versions/{}/download", cv.id))
}

/// A run, with the actions its status allows and what the caller may do.
pub fn run(run: &Run, may: &WorkspacePermissions) -> Resource {
    let operation = &run.operation;
    let variables: Vec<_> =
        operation.variables.iter().map(|(key, value)| json!({ "key": key, "value": value })).collect();
    let can_apply = may.apply_run;
    let can_cancel = may.apply_run || (may.queue_run && run.speculative);
    Resource::new(
        "runs",
        &run.id,
        json!({
            "actions": {
                "is-cancelable": allowed(run, Action::Cancel),
                "is-confirmable": allowed(run, Action::Apply),
                "is-discardable": allowed(run, Action::Discard),
                "is-force-cancelable": allowed(run, Action::ForceCancel),
            },
            "permissions": {
                "can-apply": can_apply,
                "can-cancel": can_cancel,
                "can-comment": false,
                "can-discard": can_cancel,
                "can-force-execute": false,
                "can-force-cancel": can_cancel,
                "can-override-policy-check": false,
            },
            "allow-empty-apply": false,
            "auto-apply": operation.auto_apply,
            "canceled-at": run.status_timestamps.get("canceled-at").or(run.status_timestamps.get("force-canceled-at")),
            "created-at": run.created_at,
            "has-changes": run.plan.has_changes,
            "is-destroy": operation.is_destroy,
            "message": operation.message,
            "plan-only": operation.plan_only,
            "speculative": run.speculative,
            "position-in-queue": 0,
            "refresh": operation.refresh,
            "refresh-only": operation.refresh_only,
            "replace-addrs": operation.replace_addrs,
            "target-addrs": operation.target_addrs,
            "source": "tfe-api",
            "status": run.status.as_str(),
            "status-timestamps": run.status_timestamps,
            "trigger-reason": "manual",
            "terraform-version": "",
            "variables": variables,
            "error-message": run.error,
        }),
    )
    .to_one("workspace", "workspaces", &run.workspace_id)
    .to_one("configuration-version", "configuration-versions", &run.configuration_version_id)
    .to_one("plan", "plans", phase_id(&run.id, Phase::Plan))
    .to_one("apply", "applies", phase_id(&run.id, Phase::Apply))
    .to_one("created-by", "users", &run.created_by)
    .to_one_or_null("cost-estimate", "cost-estimates", None)
    .to_many::<String>("policy-checks", "policy-checks", Vec::new())
    .to_many::<String>("run-events", "run-events", Vec::new())
    .to_many::<String>("task-stages", "task-stages", Vec::new())
    .link("self", format!("/api/v2/runs/{}", run.id))
}

/// A run's plan or apply, with its log's signed link (none without a link key).
pub fn phase(run: &Run, phase: Phase, log_url: Option<String>) -> Resource {
    let record = run.phase(phase);
    let id = phase_id(&run.id, phase);
    let mut attributes = json!({
        "resource-additions": record.additions,
        "resource-changes": record.changes,
        "resource-destructions": record.destructions,
        "resource-imports": 0,
        "status": record.status,
        "status-timestamps": record.timestamps,
        "log-read-url": log_url,
    });
    if phase == Phase::Plan {
        attributes["has-changes"] = json!(record.has_changes);
        attributes["execution-details"] =
            json!({ "mode": if run.queue == super::queue::REMOTE_QUEUE { "remote" } else { "agent" } });
    }
    let (kind, path) = match phase {
        Phase::Plan => ("plans", "plans"),
        Phase::Apply => ("applies", "applies"),
    };
    Resource::new(kind, &id, attributes)
        .to_one("run", "runs", &run.id)
        .link("self", format!("/api/v2/{path}/{id}"))
        .link("json-output", format!("/api/v2/{path}/{id}/json-output"))
}

/// An organization's capacity, as HCP's `organization-capacity`: runs waiting and running.
pub fn capacity(org_name: &str, pending: usize, running: usize) -> Resource {
    Resource::new("organization-capacity", org_name, json!({ "pending": pending, "running": running }))
}
