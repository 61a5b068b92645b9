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

const FUNCTION_RESOURCES: [(&str, &str); 12] = [
    ("accounts", "AccountsFunction"),
    ("state-versions", "StateVersionsFunction"),
    ("runs", "RunsFunction"),
    ("registry-api", "RegistryApiFunction"),
    ("registry-protocol", "RegistryProtocolFunction"),
    ("registry-ingest", "RegistryIngestFunction"),
    ("agent-pools", "AgentPoolsFunction"),
    ("agent-gateway", "AgentGatewayFunction"),
    ("credential-broker", "CredentialBrokerFunction"),
    ("key-rotation", "KeyRotationFunction"),
    ("registry-sync", "RegistrySyncFunction"),
    ("web", "WebFunction"),
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
    // The `Resource: "*"` left are the key policies' own (a key policy's resource is the key).
    let everywhere = TEMPLATE.matches("Resource: \"*\"").count();
    let in_key_policies: usize =
        ["SealingKey", "IdentityKey"].iter().map(|key| resource(key).matches("Resource: \"*\"").count()).sum();
    assert_eq!(everywhere, in_key_policies, "Resource \"*\" elsewhere");
    for parameter in ["BrokerAllowedPolicyArns", "BrokerAllowedRoleArns", "BrokerAllowedGroups", "BrokerIamResources"] {
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
        "HANGAR_BROKER_ALLOWED_GROUPS: !If [BrokerAddsToGroups, !Join [\",\", !Ref BrokerAllowedGroups], none]",
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
        [
            keys::STATIC_ROLE_SCHEDULE,
            keys::USER_INTENT_SCHEDULE,
            keys::LEASE_EXPIRY_SCHEDULE,
            keys::TOKEN_REVOCATION_SCHEDULE,
        ]
        .map(String::from),
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
    // The console reads the broker's items for a broker token's pages, and writes only its own
    // sessions (`the_console_reads_and_writes_only_its_sessions`).
    for (function, name) in FUNCTION_RESOURCES.iter().filter(|(function, _)| *function != "web") {
        let text = resource(name);
        let broker = matches!(*function, "credential-broker" | "key-rotation");
        let policy = if broker { "BrokerWritesOwnItemsPolicy" } else { "BrokerItemsOffLimitsPolicy" };
        assert!(text.contains(&format!("- !Ref {policy}\n")), "{name} lacks {policy}");
    }
}

#[test]
fn the_console_reads_and_writes_only_its_sessions() {
    let web = resource("WebFunction");
    assert!(!web.contains("TableItemsPolicy"), "{web}");
    // Of the bucket and the key, it reads states' outputs alone: sealed objects, decrypted by S3.
    for statement in statements(web).into_iter().filter(|s| s.contains("s3:") || s.contains("kms:")) {
        let actions = actions_of(statement);
        let reads_sealed = actions.contains("Action: s3:GetObject\n") && statement.contains("/sealed/*");
        let decrypts_via_s3 = actions.contains("Action: kms:Decrypt\n") && statement.contains("kms:ViaService");
        assert!(reads_sealed || decrypts_via_s3, "{statement}");
    }
    assert!(!web.contains("SecretArn"), "the console installs no token: {web}");
    let session = hangar::store::keys::web_session("h").pk;
    let pattern = format!("\"{}*\"", &session[..=session.find('#').unwrap()]);
    for statement in statements(web) {
        let actions = actions_of(statement);
        let writes = ["PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem", "BatchWriteItem", "Transact"];
        if writes.iter().any(|write| actions.contains(write)) {
            assert!(!actions.contains("UpdateItem") && !actions.contains("Transact"), "{statement}");
            let condition = statement.split("\"ForAllValues:StringLike\":").nth(1).expect("writes are conditioned");
            let keys = condition.lines().next().unwrap();
            assert!(keys.contains("dynamodb:LeadingKeys") && keys.contains(&format!("[{pattern}]")), "{statement}");
        }
    }
    assert!(web.contains("Path: /app }") && web.contains("Path: \"/app/{proxy+}\" }"), "{web}");
}

#[test]
fn each_function_opens_only_its_own_kinds_of_secret() {
    let kinds = |name: &str| -> Vec<String> {
        statements(resource(name))
            .into_iter()
            .filter(|statement| ["kms:Encrypt", "kms:Decrypt"].iter().any(|a| actions_of(statement).contains(a)))
            .map(|statement| {
                let condition = statement.split("StringEquals:").nth(1).expect("every sealing grant has a condition");
                condition.lines().next().unwrap().trim().to_owned()
            })
            .collect()
    };
    let broker = "{ \"kms:EncryptionContext:kind\": [broker-root-key, broker-static-role-key] }";
    assert_eq!(kinds("CredentialBrokerFunction"), [broker]);
    assert_eq!(kinds("KeyRotationFunction"), [broker, LEGACY]);
    for name in
        ["AccountsFunction", "RegistryApiFunction", "RegistrySyncFunction", "RunsFunction", "AgentGatewayFunction"]
    {
        assert!(
            kinds(name).iter().all(|k| !k.contains("broker-root-key") && !k.contains("broker-static-role-key")),
            "{name}: {:?}",
            kinds(name)
        );
    }
    for name in ["RegistryProtocolFunction", "RegistryIngestFunction", "AgentPoolsFunction"] {
        assert!(kinds(name).is_empty(), "{name} uses no KMS: {:?}", kinds(name));
    }
    // A job's agent receives its workspace's variables, sensitive ones unsealed.
    let gateway = kinds("AgentGatewayFunction");
    assert!(gateway.contains(&"{ \"kms:EncryptionContext:kind\": workspace-variable }".to_owned()), "{gateway:?}");
}

/// The KMS condition of values sealed before records were bound, which opens any kind.
const LEGACY: &str = "{ \"kms:EncryptionContext:purpose\": hangar-broker-secret }";

#[test]
fn only_the_scheduled_functions_open_legacy_sealed_values_and_only_while_readable() {
    for (function, name) in FUNCTION_RESOURCES {
        let text = resource(name);
        let legacy: Vec<&str> = statements(text).into_iter().filter(|s| s.contains(LEGACY)).collect();
        if !matches!(function, "key-rotation" | "registry-sync") {
            assert!(legacy.is_empty(), "{name} may open legacy values: {legacy:?}");
            continue;
        }
        assert_eq!(legacy.len(), 1, "{name}: {legacy:?}");
        assert!(actions_of(legacy[0]).contains("Action: kms:Decrypt\n"), "{name}: {}", legacy[0]);
        let at = text.find(LEGACY).unwrap();
        let grant = &text[text[..at].rfind("- !If").expect("the grant is conditional")..at];
        assert!(grant.starts_with("- !If\n              - LegacyReadable\n"), "{name}: {grant}");
    }
    let parameter = resource("LegacySealedValues");
    assert!(parameter.contains("Default: Readable\n") && parameter.contains("AllowedValues: [Readable, Resealed]"));
    assert!(TEMPLATE.contains("LegacyReadable: !Equals [!Ref LegacySealedValues, Readable]"));
}

#[test]
fn group_memberships_only_for_the_allowed_groups_under_the_user_path() {
    let group_actions = ["iam:AddUserToGroup", "iam:RemoveUserFromGroup"];
    let mut allowed = Vec::new();
    for (_, name) in FUNCTION_RESOURCES {
        let text = resource(name);
        let mut denied = false;
        for statement in statements(text) {
            let actions = actions_of(statement);
            if !group_actions.iter().any(|action| actions.contains(action)) {
                continue;
            }
            if statement.starts_with("Deny") {
                let outside =
                    "NotResource: !Sub \"arn:${AWS::Partition}:iam::${AWS::AccountId}:group${BrokerUserPath}*\"";
                assert!(statement.contains(outside), "{name}: {statement}");
                denied = true;
                continue;
            }
            assert!(statement.contains("!Ref BrokerAllowedGroups]"), "{name}: any group: {statement}");
            assert!(!statement.contains("BrokerIamResources") && !statement.contains("group${"), "{statement}");
            allowed.push(name);
        }
        let conditional = text.matches("- BrokerAddsToGroups\n              - Effect: Allow\n").count();
        assert_eq!(conditional, allowed.iter().filter(|n| **n == name).count(), "{name}: only with the parameter");
        assert_eq!(denied, allowed.contains(&name), "{name}: a Deny keeps its groups under BrokerUserPath");
    }
    assert_eq!(allowed, ["CredentialBrokerFunction", "KeyRotationFunction"]);
    assert!(TEMPLATE.contains("BrokerAddsToGroups: !And\n    - !Condition BrokerCreatesUsers\n"));
    assert!(!TEMPLATE.contains(":group${BrokerUserPath}*\"\n                  -"), "no group in the users' resources");
}

#[test]
fn the_sealing_key_refuses_encrypt_and_decrypt_without_an_encryption_context() {
    let key = resource("SealingKey");
    let deny = statements(key).into_iter().find(|s| s.starts_with("Deny")).expect("a Deny in the key policy");
    assert!(deny.contains("Principal: \"*\""), "whoever asks: {deny}");
    assert!(deny.contains("Action: [kms:Encrypt, kms:Decrypt]\n"), "only the data-key uses: {deny}");
    assert!(deny.contains("\"Null\": { \"kms:EncryptionContextKeys\": \"true\" }"), "{deny}");
    // The account's administration of the key (policy, rotation, deletion) is not denied.
    let admin = statements(key).into_iter().find(|s| s.contains("AWS::AccountId}:root")).expect("the account");
    assert!(admin.starts_with("Allow") && admin.contains("Action: kms:*\n"), "{admin}");
    for management in ["kms:*", "kms:Put", "kms:Schedule", "kms:Enable", "kms:Disable", "kms:Create"] {
        assert!(!actions_of(deny).contains(management), "{management} is not denied: {deny}");
    }
}

// ----- the broker's AWS work (issue 18) -----

/// What IAM makes one remove before it deletes a user: revocation and rollback delete it all.
const USER_DELETION: [&str; 15] = [
    "iam:ListAccessKeys",
    "iam:DeleteAccessKey",
    "iam:ListUserPolicies",
    "iam:DeleteUserPolicy",
    "iam:ListAttachedUserPolicies",
    "iam:DetachUserPolicy",
    "iam:ListGroupsForUser",
    "iam:DeleteLoginProfile",
    "iam:ListMFADevices",
    "iam:DeactivateMFADevice",
    "iam:ListSSHPublicKeys",
    "iam:DeleteSSHPublicKey",
    "iam:ListSigningCertificates",
    "iam:DeleteSigningCertificate",
    "iam:DeleteServiceSpecificCredential",
];

#[test]
fn the_brokers_functions_may_delete_everything_a_user_holds() {
    for name in ["CredentialBrokerFunction", "KeyRotationFunction"] {
        let allowed: String = statements(resource(name))
            .into_iter()
            .filter(|statement| statement.starts_with("Allow"))
            .map(actions_of)
            .collect();
        for action in USER_DELETION.iter().chain(&["iam:ListServiceSpecificCredentials", "iam:DeleteUser"]) {
            assert!(allowed.contains(action), "{name} lacks {action}");
        }
    }
}

#[test]
fn only_the_job_gateway_and_the_brokers_functions_sign_identity_tokens_with_a_p256_key() {
    let key = resource("IdentityKey");
    for line in ["KeySpec: ECC_NIST_P256", "KeyUsage: SIGN_VERIFY"] {
        assert!(key.contains(line), "{line}: {key}");
    }
    assert!(!key.contains("Condition: Enterprise"), "run identity tokens are signed on every edition");
    for (_, name) in FUNCTION_RESOURCES {
        let function = resource(name);
        let signs = function.contains("kms:Sign");
        let signer = matches!(name, "CredentialBrokerFunction" | "KeyRotationFunction" | "AgentGatewayFunction");
        assert_eq!(signs, signer, "{name}");
        if matches!(name, "CredentialBrokerFunction" | "KeyRotationFunction") {
            // The broker's own workload identity signs only on the enterprise edition.
            let enterprise_sign = "- Enterprise\n              - Effect: Allow\n                Action: [kms:Sign";
            assert!(function.contains(enterprise_sign), "{name}");
        }
        let publishes = function.contains("HANGAR_IDENTITY_KMS_KEY_ID");
        let expected = signer || name == "RunsFunction";
        assert_eq!(publishes, expected, "{name}: only the functions that sign or publish know the key");
    }
}

/// The DynamoDB actions a function's policies allow (its own statements and the shared item
/// policy it references); deny statements are left out.
fn dynamodb_allowed(name: &str) -> String {
    let function = resource(name);
    let mut allowed: Vec<&str> = statements(function).into_iter().filter(|s| s.starts_with("Allow")).collect();
    if function.contains("- !Ref TableItemsPolicy\n") {
        allowed.extend(statements(resource("TableItemsPolicy")).into_iter().filter(|s| s.starts_with("Allow")));
    }
    allowed.iter().map(|statement| actions_of(statement)).collect()
}

#[test]
fn every_function_may_make_the_calls_its_store_reads_and_transactions_use() {
    // The DynamoDB adapter reads with GetItem, BatchGetItem (any read of two keys or more: the
    // token and the organization's name, a module and its organization) and Query; a
    // TransactWriteItems needs the action of each of its parts, and transactions carry checks.
    for (function, name) in FUNCTION_RESOURCES {
        let allowed = dynamodb_allowed(name);
        for action in ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"] {
            assert!(allowed.contains(action), "{function} may not {action}: {allowed}");
        }
        let writes = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"];
        if writes.iter().any(|write| allowed.contains(write)) && function != "web" {
            assert!(allowed.contains("dynamodb:ConditionCheckItem"), "{function} writes without checks: {allowed}");
        }
    }
}
