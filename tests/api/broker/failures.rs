//! How the broker fails: a hostile `username_template` is refused when written and cannot take
//! dev-server down, and AWS's errors reach the caller as Vault shows them — a client error as a
//! 400 with AWS's code and message, anything on AWS's side (or on the way to it) as a 502 whose
//! body is generic — never as the SDK's debug output.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{broker, broker_on_moto, first_error, iam_user_role, suffix, Reply, Vault, ACCOUNT, DOCUMENT};

/// Texts of the SDK's `Debug` and `DisplayErrorContext` output, which no answer may hold.
const DEBUG_TEXT: &[&str] =
    &["ServiceError", "SdkError", "DispatchFailure", "dispatch failure", "raw:", "Response {", "Error {", "source:"];

fn assert_no_debug_text(reply: &Reply) {
    let body = reply.body.to_string();
    for text in DEBUG_TEXT {
        assert!(!body.contains(text), "the body holds `{text}`: {body}");
    }
}

/// Points the `aws` mount at `endpoint` with one attempt per call, and `extra` fields.
async fn point_at(root: &Vault<'_>, endpoint: &str, extra: Value) -> Reply {
    let mut body = json!({
        "access_key": hangar_tests::moto::ACCESS_KEY,
        "secret_key": hangar_tests::moto::SECRET_KEY,
        "region": hangar_tests::moto::REGION,
        "iam_endpoint": endpoint,
        "sts_endpoint": endpoint,
        "max_retries": 0,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    root.post("aws/config/root", body).await
}

/// An endpoint that answers every request with `status` and `body`, as AWS's query API does.
async fn canned(status: u16, body: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
    let body = body.to_owned();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            read_request(&mut stream).await;
            let response = format!(
                "HTTP/1.1 {status} Canned\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        }
    });
    endpoint
}

async fn read_request(stream: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(read) = stream.read(&mut chunk).await else { return };
        if read == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..read]);
        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
        let length = head.lines().find_map(|line| line.strip_prefix("content-length:"));
        let length: usize = length.map_or(0, |value| value.trim().parse().unwrap_or(0));
        if buffer.len() >= end + 4 + length {
            return;
        }
    }
}

/// IAM's error document for `code` with `message`.
fn aws_error(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>\
         <RequestId>hangar-canned-request</RequestId></ErrorResponse>"
    )
}

// ----- username templates -----

#[tokio::test]
async fn a_self_recursive_username_template_is_a_400_and_dev_server_keeps_answering() {
    let app = broker().await;
    let root = Vault::root(&app);
    for template in [
        r#"{{define "x"}}{{template "x"}}{{end}}{{template "x"}}"#,
        r#"{{template "username_template"}}"#,
        r#"{{block "x" .}}{{template "x" .}}{{end}}"#,
    ] {
        let reply = root.post("aws/config/root", json!({"username_template": template})).await;
        assert_eq!(reply.status, 400, "{template}: {:?}", reply.body);
        let message = first_error(&reply);
        assert!(message.contains("username_template") && message.contains("template"), "{template}: {message}");
    }
    let read = root.get("aws/config/root").await;
    assert_eq!(read.status, 200, "dev-server still answers: {:?}", read.body);
    assert_eq!(read.body["data"]["username_template"], "", "the refused templates were not stored");
    app.stop().await;
}

#[tokio::test]
async fn a_username_template_over_its_bounds_is_a_400_naming_the_bound() {
    let app = broker().await;
    let root = Vault::root(&app);
    let nested = format!("{{{{ {}.DisplayName{} }}}}", "(".repeat(1000), ")".repeat(1000));
    let ranged = "{{ range . }}{{ range . }}{{ . }}{{ end }}{{ end }}".to_owned();
    let long = format!("hangar-{}", "x".repeat(10_000));
    for (template, words) in [(nested, "parentheses"), (ranged, "range"), (long, "bytes")] {
        let reply = root.post("aws/config/root", json!({"username_template": template})).await;
        assert_eq!(reply.status, 400, "{words}: {:?}", reply.body);
        assert!(first_error(&reply).contains(words), "the message names {words}: {:?}", reply.body);
    }
    assert_eq!(root.get("aws/config/root").await.status, 200, "dev-server still answers");
    app.stop().await;
}

#[tokio::test]
async fn a_username_template_that_grows_without_bound_fails_quickly_without_echoing_the_name() {
    let app = broker().await;
    let root = Vault::root(&app);
    // Each declaration multiplies the value eightfold: 64 bytes would become 16 MiB in six steps.
    let grow = r#"{{ $x := printf "%s%s%s%s%s%s%s%s" $x $x $x $x $x $x $x $x }}"#;
    let template = format!("{{{{ $x := \"{}\" }}}}{}{{{{ $x }}}}", "a".repeat(64), grow.repeat(6));
    let unreachable = "http://127.0.0.1:9";
    let written = point_at(&root, unreachable, json!({"username_template": template})).await;
    assert!(written.status.is_success(), "{:?}", written.body);
    root.write("aws/roles/grow", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;

    let creds = root.get("aws/creds/grow").await;
    assert_eq!(creds.status, 500, "{:?}", creds.body);
    let message = first_error(&creds);
    assert!(message.contains("username_template"), "{message}");
    assert!(!message.contains("aaaaaaaa"), "the rendered value is never echoed: {message}");
    assert!(message.len() < 300, "{message}");
    assert_eq!(root.get("aws/config/root").await.status, 200, "dev-server still answers");
    app.stop().await;
}

// ----- AWS's errors -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_missing_managed_policy_is_a_400_with_no_such_entity_and_no_debug_text() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let missing = format!("arn:aws:iam::{ACCOUNT}:policy/hangar-missing-{}", suffix());
    root.write("aws/roles/missing", json!({"credential_type": "iam_user", "policy_arns": [missing]})).await;

    let creds = root.get("aws/creds/missing").await;
    assert_eq!(creds.status, 400, "{:?}", creds.body);
    let message = first_error(&creds);
    assert!(message.contains("NoSuchEntity"), "the AWS code: {message}");
    assert!(message.contains(&missing), "AWS's own message names the policy: {message}");
    assert_no_debug_text(&creds);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_user_that_already_exists_is_a_400_with_entity_already_exists() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let name = format!("hangar-fixed-{}", suffix());
    let written = point_at(&root, &aws.endpoint, json!({"username_template": name, "max_retries": -1})).await;
    assert!(written.status.is_success(), "{:?}", written.body);
    iam_user_role(&root, "aws/roles/fixed", "fixed").await;

    let first = root.get("aws/creds/fixed").await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    let second = root.get("aws/creds/fixed").await;
    assert_eq!(second.status, 400, "{:?}", second.body);
    assert!(first_error(&second).contains("EntityAlreadyExists"), "{:?}", second.body);
    assert_no_debug_text(&second);
    assert!(aws.user_exists(&name).await, "the refused request did not roll back the existing user");
    let lease = first.body["lease_id"].as_str().expect("a lease");
    root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
    app.stop().await;
}

#[tokio::test]
async fn access_denied_is_a_400_with_the_code_and_the_services_message() {
    let app = broker().await;
    let root = Vault::root(&app);
    let message = "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: iam:CreateUser";
    let endpoint = canned(403, &aws_error("AccessDenied", message)).await;
    let written = point_at(&root, &endpoint, json!({})).await;
    assert!(written.status.is_success(), "{:?}", written.body);
    root.write("aws/roles/denied", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;

    let creds = root.get("aws/creds/denied").await;
    assert_eq!(creds.status, 400, "{:?}", creds.body);
    let error = first_error(&creds);
    assert!(error.contains("AccessDenied") && error.contains(message), "{error}");
    assert_no_debug_text(&creds);
    app.stop().await;
}

#[tokio::test]
async fn a_failure_on_aws_side_is_a_502_whose_body_is_generic() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("aws/roles/any", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;
    let cases = [
        (500, aws_error("ServiceFailure", "canned failure at 10.1.2.3")),
        (503, aws_error("ServiceUnavailable", "canned outage at 10.1.2.3")),
        (400, aws_error("Throttling", "canned rate exceeded at 10.1.2.3")),
        (502, "<html><body>canned proxy page at 10.1.2.3</body></html>".to_owned()),
    ];
    for (status, body) in cases {
        let endpoint = canned(status, &body).await;
        let written = point_at(&root, &endpoint, json!({})).await;
        assert!(written.status.is_success(), "{:?}", written.body);
        let creds = root.get("aws/creds/any").await;
        assert_eq!(creds.status, 502, "{body}: {:?}", creds.body);
        let error = first_error(&creds);
        assert!(!error.is_empty(), "{:?}", creds.body);
        for detail in ["canned", "10.1.2.3", "ServiceFailure", "ServiceUnavailable", "Throttling", "html", "127.0.0.1"]
        {
            assert!(!error.contains(detail), "{body}: the 502 shows {detail}: {error}");
        }
        assert_no_debug_text(&creds);
    }
    app.stop().await;
}

#[tokio::test]
async fn an_unreachable_aws_is_a_502_whose_body_is_generic() {
    let app = broker().await;
    let root = Vault::root(&app);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", closed.local_addr().expect("an address"));
    drop(closed);
    let written = point_at(&root, &endpoint, json!({})).await;
    assert!(written.status.is_success(), "{:?}", written.body);
    root.write("aws/roles/far", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;

    let creds = root.get("aws/creds/far").await;
    assert_eq!(creds.status, 502, "{:?}", creds.body);
    let error = first_error(&creds);
    for detail in ["127.0.0.1", "onnect", "refused", "io error", "iam:CreateUser"] {
        assert!(!error.contains(detail), "the 502 shows {detail}: {error}");
    }
    assert_no_debug_text(&creds);
    app.stop().await;
}

/// Each sealed secret is bound to its record: a mount's sealed root key copied into another
/// mount's `config/root` (a tampered table, a restored item) does not open there. The call is
/// refused with a generic error, before anything reaches AWS, and never shows either key.
#[tokio::test]
async fn a_sealed_root_key_moved_to_another_mount_does_not_open() {
    use hangar::store::{keys, Condition, ItemStore};
    let app = broker().await;
    let root = Vault::root(&app);
    root.write("sys/mounts/other", json!({"type": "aws"})).await;
    let config = |secret_key: &str| json!({"access_key": "AKIAEXAMPLE", "secret_key": secret_key, "iam_endpoint": "http://127.0.0.1:9", "max_retries": 0});
    root.write("aws/config/root", config("the-aws-mounts-secret")).await;
    root.write("other/config/root", config("the-other-mounts-secret")).await;
    let mounts = root.get("sys/mounts").await;
    let uuid = |path: &str| mounts.body["data"][path]["uuid"].as_str().expect("a mount uuid").to_owned();
    let (aws, other) = (uuid("aws/"), uuid("other/"));

    let store = app.store();
    let from = store.get(&keys::mount_config(&aws, "root")).await.unwrap().expect("aws's config/root");
    let mut to = store.get(&keys::mount_config(&other, "root")).await.unwrap().expect("other's config/root");
    to.attrs_mut().unwrap().insert("sealed_secret_key".into(), from.attrs().unwrap()["sealed_secret_key"].clone());
    store.put(to, Condition::Always).await.unwrap();

    let moved = root.post("other/config/rotate-root", json!({})).await;
    assert_eq!(moved.status, 500, "refused before AWS is called: {:?}", moved.body);
    let body = moved.body.to_string();
    assert!(!body.contains("the-aws-mounts-secret") && !body.contains("the-other-mounts-secret"), "{body}");
    let own = root.post("aws/config/rotate-root", json!({})).await;
    assert_eq!(own.status, 502, "the key opens where it was sealed (then AWS is unreachable): {:?}", own.body);
    app.stop().await;
}
