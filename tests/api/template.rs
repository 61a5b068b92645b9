//! template.yaml keeps what the code relies on, checked on its text: uploads trigger ingest and
//! expire by their own prefix, served archives never expire by age.

use std::time::Duration;

use hangar::blobs::{OBJECT_PREFIX, UPLOAD_PREFIX};
use hangar::registry::versions::UPLOAD_LINK_VALIDITY;

const TEMPLATE: &str = include_str!("../../template.yaml");

/// A resource's lines: from `  <name>:` to the next resource (or the next section).
fn resource(name: &str) -> &'static str {
    let start = TEMPLATE.find(&format!("\n  {name}:\n")).unwrap_or_else(|| panic!("no resource {name}")) + 1;
    let rest = &TEMPLATE[start..];
    let end = rest
        .match_indices('\n')
        .map(|(at, _)| at + 1)
        .find(|&at| {
            let line = &rest[at..];
            let top = line.starts_with("  ") && line.as_bytes().get(2).is_some_and(u8::is_ascii_alphabetic);
            top || line.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        })
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The archive bucket's lifecycle rule for `prefix`.
fn lifecycle_rule(prefix: &str) -> &'static str {
    let rules = resource("Archives").split("- Id: ").skip(1);
    let mut matching = rules.filter(|rule| rule.contains(&format!("Prefix: {prefix}\n")));
    let rule = matching.next().unwrap_or_else(|| panic!("no lifecycle rule for {prefix}"));
    assert!(matching.next().is_none(), "one rule for {prefix}");
    rule
}

fn days(rule: &str, field: &str) -> Option<u64> {
    let at = rule.find(&format!("{field}: "))? + field.len() + 2;
    rule[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[test]
fn stray_uploads_expire_after_their_link_and_archives_never_by_age() {
    let uploads = lifecycle_rule(UPLOAD_PREFIX);
    assert!(uploads.contains("Status: Enabled"), "{uploads}");
    let expiry = days(uploads, "ExpirationInDays").expect("uploads expire");
    assert!(
        Duration::from_secs(expiry * 86_400) > UPLOAD_LINK_VALIDITY,
        "an upload outlives its link ({expiry} days against {UPLOAD_LINK_VALIDITY:?})"
    );
    assert!(days(uploads, "DaysAfterInitiation").is_some(), "incomplete multipart uploads are aborted");

    let archives = lifecycle_rule(OBJECT_PREFIX);
    assert!(days(archives, "ExpirationInDays").is_none(), "a served archive lives as long as its version");
}

#[test]
fn only_uploads_trigger_ingest() {
    let ingest = resource("RegistryIngestFunction");
    let events = &ingest[ingest.find("Type: S3").expect("an S3 trigger")..];
    assert!(events.contains(&format!("{{ Name: prefix, Value: {UPLOAD_PREFIX} }}")), "{events}");
}

// ----- least privilege (issue 17, section 3) -----

/// The statements of a resource's policies: each from its `Effect:` to the next one (or to the
/// resource's events).
fn statements(resource: &str) -> Vec<&str> {
    let body = resource.split("\n      Events:").next().unwrap_or(resource);
    body.split("Effect: ").skip(1).collect()
}

fn actions_of(statement: &str) -> String {
    let action = statement.split("Resource:").next().unwrap_or(statement);
    action.split("Condition:").next().unwrap_or(action).to_owned()
}

const IAM_WRITES: [&str; 9] = ["Create", "Put", "Attach", "Add", "Delete", "Tag", "Update", "Remove", "Detach"];

fn writes_iam_or_calls_sts(actions: &str) -> bool {
    actions.contains("sts:") || IAM_WRITES.iter().any(|verb| actions.contains(&format!("iam:{verb}")))
}

const FUNCTION_RESOURCES: [(&str, &str); 9] = [
    ("accounts", "AccountsFunction"),
    ("registry-api", "RegistryApiFunction"),
    ("registry-protocol", "RegistryProtocolFunction"),
    ("registry-ingest", "RegistryIngestFunction"),
    ("agent-pools", "AgentPoolsFunction"),
    ("agent-gateway", "AgentGatewayFunction"),
    ("credential-broker", "CredentialBrokerFunction"),
    ("key-rotation", "KeyRotationFunction"),
    ("registry-sync", "RegistrySyncFunction"),
];

#[test]
fn every_function_is_in_the_template_with_its_binary() {
    for function in hangar::lambda::FUNCTIONS {
        let (_, resource_name) = FUNCTION_RESOURCES
            .iter()
            .find(|(name, _)| *name == function)
            .unwrap_or_else(|| panic!("{function} has no resource name here"));
        assert!(resource(resource_name).contains(&format!("Binary: {function} }}")), "{resource_name}");
    }
}

#[test]
fn no_iam_write_or_sts_action_is_allowed_on_every_resource() {
    for (_, name) in FUNCTION_RESOURCES {
        for statement in statements(resource(name)) {
            if writes_iam_or_calls_sts(&actions_of(statement)) {
                assert!(!statement.contains("Resource: \"*\""), "{name}: {statement}");
                assert!(!statement.contains(":user/*\""), "{name}: every user: {statement}");
            }
        }
    }
    // The one `Resource: "*"` left is the key policy's own (a key policy's resource is the key).
    let everywhere = TEMPLATE.matches("Resource: \"*\"").count();
    assert_eq!(everywhere, resource("SealingKey").matches("Resource: \"*\"").count(), "Resource \"*\" elsewhere");
    for parameter in ["BrokerAllowedPolicyArns", "BrokerAllowedRoleArns", "BrokerIamResources"] {
        assert!(resource(parameter).contains("Default: \"\"\n"), "{parameter} allows nothing extra by default");
    }
}

#[test]
fn the_broker_creates_and_grants_users_only_with_the_permissions_boundary() {
    let mut seen = Vec::new();
    for (_, name) in FUNCTION_RESOURCES {
        for statement in statements(resource(name)) {
            let actions = actions_of(statement);
            for action in ["iam:CreateUser", "iam:AttachUserPolicy", "iam:PutUserPolicy"] {
                if actions.contains(action) {
                    assert!(
                        statement.contains("\"iam:PermissionsBoundary\": !Ref BrokerPermissionsBoundaryArn"),
                        "{name} {action} without the boundary condition: {statement}"
                    );
                    assert!(statement.contains("user${BrokerUserPath}*"), "{name} {action} outside the path");
                    seen.push((name, action));
                }
            }
            if actions.contains("iam:AttachUserPolicy") {
                assert!(statement.contains("\"iam:PolicyARN\": !Ref BrokerAllowedPolicyArns"), "{statement}");
            }
        }
    }
    assert_eq!(seen.len(), 3, "the broker alone creates, attaches and puts: {seen:?}");
    assert!(seen.iter().all(|(name, _)| *name == "CredentialBrokerFunction"), "{seen:?}");
    assert!(resource("BrokerUserPath").contains("Default: /hangar/\n"));
    // The settings the broker enforces are the parameters the role is scoped by.
    for variable in [
        "HANGAR_BROKER_USER_PATH: !Ref BrokerUserPath",
        "HANGAR_BROKER_PERMISSIONS_BOUNDARY: !If [BrokerCreatesUsers, !Ref BrokerPermissionsBoundaryArn",
        "HANGAR_BROKER_ALLOWED_POLICY_ARNS: !If [BrokerAttachesPolicies",
        "HANGAR_BROKER_ALLOWED_ROLE_ARNS: !If [BrokerAssumesRoles",
        "HANGAR_BROKER_STATIC_USERS: !Ref BrokerStaticUserPath",
    ] {
        assert!(TEMPLATE.contains(variable), "{variable}");
    }
}

#[test]
fn vcs_work_runs_without_iam_or_sts_and_rotation_without_s3_writes() {
    let sync = resource("RegistrySyncFunction");
    for statement in statements(sync) {
        let actions = actions_of(statement);
        assert!(!actions.contains("iam:") && !actions.contains("sts:"), "registry-sync: {statement}");
    }
    assert!(sync.contains("ScheduleExpression:"), "registry-sync runs on a schedule");
    let rotation = resource("KeyRotationFunction");
    for statement in statements(rotation) {
        let actions = actions_of(statement);
        assert!(!actions.contains("s3:") && !actions.contains("sts:"), "key-rotation: {statement}");
        assert!(!actions.contains("iam:CreateUser") && !actions.contains("iam:Attach"), "key-rotation: {statement}");
    }
}

#[test]
fn the_api_is_throttled_logged_and_alarmed() {
    let api = resource("Api");
    assert!(api.contains("ThrottlingRateLimit: !Ref ThrottlingRateLimit"), "{api}");
    assert!(api.contains("ThrottlingBurstLimit: !Ref ThrottlingBurstLimit"), "{api}");
    assert!(api.contains("DestinationArn: !GetAtt ApiAccessLogs.Arn"), "{api}");
    assert!(resource("ApiAccessLogs").contains("RetentionInDays: !Ref AccessLogRetentionDays"));
    let alarm = resource("Api5xxAlarm");
    assert!(alarm.contains("MetricName: 5xx") && alarm.contains("Value: !Ref Api"), "{alarm}");
    assert!(resource("ReservedConcurrency").contains("Default: 0\n"), "off by default");
    assert!(TEMPLATE.contains("ReservedConcurrentExecutions: !If [ReserveConcurrency, !Ref ReservedConcurrency"));
    assert!(resource("AccountsFunction").contains("Method: GET, Path: /api/openapi.json }"));
}

/// The partitions of the broker's items, as the store names them.
fn broker_partitions() -> Vec<String> {
    use hangar::store::keys;
    let mut partitions = vec![
        keys::broker_policy("p").pk,
        keys::broker_root_bootstrap().pk,
        keys::mount_role("m", "r").pk,
        keys::service_token("h").pk,
        keys::service_token_accessor("a").pk,
    ];
    partitions.extend(
        [keys::STATIC_ROLE_SCHEDULE, keys::LEASE_EXPIRY_SCHEDULE, keys::TOKEN_REVOCATION_SCHEDULE].map(String::from),
    );
    partitions
}

#[test]
fn only_the_brokers_functions_reach_its_items_and_they_write_nothing_else() {
    let off_limits = resource("BrokerItemsOffLimitsPolicy");
    let own = resource("BrokerWritesOwnItemsPolicy");
    assert!(off_limits.contains("Effect: Deny") && off_limits.contains("\"ForAnyValue:StringLike\""), "{off_limits}");
    assert!(own.contains("Effect: Deny") && own.contains("\"ForAnyValue:StringNotLike\""), "{own}");
    for partition in broker_partitions() {
        // `BMOUNT#<uuid>` is matched by `BMOUNT#*`; the fixed ones by themselves.
        let pattern = match partition.find('#') {
            Some(at) => format!("\"{}*\"", &partition[..=at]),
            None => partition.clone(),
        };
        for policy in [off_limits, own] {
            let keys = &policy[policy.find("dynamodb:LeadingKeys").expect("LeadingKeys")..];
            assert!(keys.lines().next().unwrap().contains(&pattern), "{pattern} missing: {policy}");
        }
    }
    for (function, name) in FUNCTION_RESOURCES {
        let text = resource(name);
        let broker = matches!(function, "credential-broker" | "key-rotation");
        let policy = if broker { "BrokerWritesOwnItemsPolicy" } else { "BrokerItemsOffLimitsPolicy" };
        assert!(text.contains(&format!("- !Ref {policy}\n")), "{name} lacks {policy}");
    }
}

#[test]
fn each_function_opens_only_its_own_kinds_of_secret() {
    let kinds = |name: &str| -> Vec<String> {
        statements(resource(name))
            .into_iter()
            .filter(|statement| actions_of(statement).contains("kms:"))
            .map(|statement| {
                let condition = statement.split("StringEquals:").nth(1).expect("every KMS grant has a condition");
                condition.lines().next().unwrap().trim().to_owned()
            })
            .collect()
    };
    let broker = [
        "{ \"kms:EncryptionContext:kind\": [broker-root-key, broker-static-role-key] }",
        "{ \"kms:EncryptionContext:purpose\": hangar-broker-secret }",
    ];
    assert_eq!(kinds("CredentialBrokerFunction"), broker);
    assert_eq!(kinds("KeyRotationFunction"), broker);
    for name in ["AccountsFunction", "RegistryApiFunction", "RegistrySyncFunction"] {
        assert!(
            kinds(name).iter().all(|k| !k.contains("broker-root-key") && !k.contains("broker-static-role-key")),
            "{name}: {:?}",
            kinds(name)
        );
    }
    for name in ["RegistryProtocolFunction", "RegistryIngestFunction", "AgentPoolsFunction", "AgentGatewayFunction"] {
        assert!(kinds(name).is_empty(), "{name} uses no KMS: {:?}", kinds(name));
    }
}
