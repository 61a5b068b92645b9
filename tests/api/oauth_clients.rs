//! VCS connections over HTTP (HCP Terraform's oauth-clients and oauth-tokens): their shape,
//! the checks on what creates them, who may see and change them, and that the provider
//! credential they hold is never shown and never stored in the clear.

use hangar::config::Config;
use hangar::store::{keys, ItemStore};
use hangar::vcs::AllowedNetworks;
use hangar_tests::builders::acme;
use hangar_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

const CLIENTS: &str = "/api/v2/organizations/acme/oauth-clients";

fn client(attributes: Value) -> Value {
    json!({"data": {"type": "oauth-clients", "attributes": attributes}})
}

fn github(secret: &str) -> Value {
    client(json!({"service-provider": "github", "oauth-token-string": secret, "name": "GitHub.com"}))
}

/// Creates a connection and returns (client id, token id).
async fn create(app: &TestApp, token: &str, body: Value) -> (String, String) {
    let created = app.post(CLIENTS, token, body).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let data = &created.body["data"];
    let id = data["id"].as_str().expect("a client id").to_owned();
    let token_id = data["relationships"]["oauth-tokens"]["data"][0]["id"].as_str().expect("a token id").to_owned();
    (id, token_id)
}

/// Every file of the data directory whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a readable data directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if std::fs::read(&path).expect("a readable file").windows(needle.len()).any(|w| w == needle) {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn a_github_connection_gets_the_hosted_urls_and_hcp_terraforms_shape() {
    let (app, owners) = acme().await;
    let created = app.post(CLIENTS, &owners, github("ghp_shape0123456789")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.headers["content-type"], "application/vnd.api+json");
    let data = &created.body["data"];
    let id = data["id"].as_str().unwrap();
    assert!(id.starts_with("oc-"), "{id}");
    assert_eq!(data["type"], "oauth-clients");
    let attributes = &data["attributes"];
    assert_eq!(attributes["service-provider"], "github");
    assert_eq!(attributes["service-provider-display-name"], "GitHub");
    assert_eq!(attributes["name"], "GitHub.com");
    assert_eq!(attributes["http-url"], "https://github.com");
    assert_eq!(attributes["api-url"], "https://api.github.com");
    assert_eq!(attributes["callback-url"], format!("{}/auth/{id}/callback", app.url));
    assert!(attributes["connect-path"].as_str().unwrap().starts_with(&format!("/auth/{id}")));
    assert!(attributes["created-at"].as_str().unwrap().ends_with('Z'));
    for absent in ["key", "secret", "rsa-public-key"] {
        assert_eq!(attributes[absent], Value::Null, "{absent}");
    }
    assert_eq!(data["relationships"]["organization"]["data"], json!({"id": "acme", "type": "organizations"}));
    let tokens = data["relationships"]["oauth-tokens"]["data"].as_array().unwrap();
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0]["type"], "oauth-tokens");
    assert!(tokens[0]["id"].as_str().unwrap().starts_with("ot-"));

    let hosted_gitlab = client(json!({"service-provider": "gitlab_hosted", "oauth-token-string": "glpat-x"}));
    let gitlab = app.post(CLIENTS, &owners, hosted_gitlab).await;
    assert_eq!(gitlab.status, 201, "{:?}", gitlab.body);
    assert_eq!(gitlab.body["data"]["attributes"]["http-url"], "https://gitlab.com");
    assert_eq!(gitlab.body["data"]["attributes"]["api-url"], "https://gitlab.com/api/v4");
    assert_eq!(gitlab.body["data"]["attributes"]["service-provider-display-name"], "GitLab");
    assert_eq!(gitlab.body["data"]["attributes"]["name"], Value::Null);
}

#[tokio::test]
async fn a_self_managed_gitlab_connection_needs_both_of_its_urls() {
    let (app, owners) = acme().await;
    let attributes = |http: Option<&str>, api: Option<&str>| {
        let mut attributes = json!({"service-provider": "gitlab_community_edition", "oauth-token-string": "glpat-y"});
        if let Some(http) = http {
            attributes["http-url"] = json!(http);
        }
        if let Some(api) = api {
            attributes["api-url"] = json!(api);
        }
        client(attributes)
    };
    let no_http = app.post(CLIENTS, &owners, attributes(None, Some("https://git.example/api/v4"))).await;
    assert_eq!(no_http.status, 422, "{:?}", no_http.body);
    assert_eq!(no_http.pointer(), "/data/attributes/http-url");
    let no_api = app.post(CLIENTS, &owners, attributes(Some("https://git.example"), None)).await;
    assert_eq!(no_api.status, 422, "{:?}", no_api.body);
    assert_eq!(no_api.pointer(), "/data/attributes/api-url");

    let both = attributes(Some("http://git.example:8080"), Some("http://git.example:8080/api/v4"));
    let created = app.post(CLIENTS, &owners, both).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let attributes = &created.body["data"]["attributes"];
    assert_eq!(attributes["service-provider-display-name"], "GitLab Community Edition");
    assert_eq!(attributes["http-url"], "http://git.example:8080");
    assert_eq!(attributes["api-url"], "http://git.example:8080/api/v4");
}

#[tokio::test]
async fn every_invalid_attribute_is_a_422_that_points_at_it() {
    let (app, owners) = acme().await;
    let cases = [
        (json!({"oauth-token-string": "t"}), "/data/attributes/service-provider"),
        (
            json!({"service-provider": "bitbucket_hosted", "oauth-token-string": "t"}),
            "/data/attributes/service-provider",
        ),
        (json!({"service-provider": 7, "oauth-token-string": "t"}), "/data/attributes/service-provider"),
        (json!({"service-provider": "github"}), "/data/attributes/oauth-token-string"),
        (json!({"service-provider": "github", "oauth-token-string": ""}), "/data/attributes/oauth-token-string"),
        (
            json!({"service-provider": "github", "oauth-token-string": "t", "http-url": "github.com"}),
            "/data/attributes/http-url",
        ),
        (
            json!({"service-provider": "github", "oauth-token-string": "t", "api-url": "ftp://api.github.com"}),
            "/data/attributes/api-url",
        ),
        (
            json!({"service-provider": "github_enterprise", "oauth-token-string": "t",
                   "http-url": "https://u:p@ghe.example", "api-url": "https://ghe.example/api/v3"}),
            "/data/attributes/http-url",
        ),
        (
            json!({"service-provider": "github_enterprise", "oauth-token-string": "t",
                   "http-url": "https://ghe.example"}),
            "/data/attributes/api-url",
        ),
        (
            json!({"service-provider": "gitlab_enterprise_edition", "oauth-token-string": "t",
                   "api-url": "https://gl.example/api/v4"}),
            "/data/attributes/http-url",
        ),
    ];
    for (attributes, pointer) in cases {
        let reply = app.post(CLIENTS, &owners, client(attributes.clone())).await;
        assert_eq!(reply.status, 422, "{attributes}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{attributes}");
    }
    let wrong_type = json!({"data": {"type": "workspaces", "attributes": {"service-provider": "github"}}});
    let reply = app.post(CLIENTS, &owners, wrong_type).await;
    assert_eq!((reply.status.as_u16(), reply.pointer()), (422, "/data/type"));

    let listed = app.get(CLIENTS, &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 0, "nothing was created");
}

#[tokio::test]
async fn the_token_string_is_never_shown_nor_stored_in_the_clear_yet_publishing_can_use_it() {
    use hangar::accounts::oauth;
    let (app, owners) = acme().await;
    let secret = "ghp_NeverShowThisSecret0123456789abcdef";
    let created = app.post(CLIENTS, &owners, github(secret)).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["data"]["id"].as_str().unwrap().to_owned();
    let token_id = created.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"].as_str().unwrap().to_owned();

    let mut replies = vec![created];
    for path in [
        CLIENTS.to_owned(),
        format!("/api/v2/oauth-clients/{id}"),
        format!("/api/v2/oauth-clients/{id}/oauth-tokens"),
        format!("/api/v2/oauth-tokens/{token_id}"),
    ] {
        let reply = app.get(&path, &owners).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        replies.push(reply);
    }
    for reply in &replies {
        assert!(!reply.body.to_string().contains(secret), "{:?}", reply.body);
        assert!(!format!("{:?}", reply.headers).contains(secret));
    }
    let db = app.data_dir.path().join("hangar.db");
    assert!(db.exists());
    assert!(!files_containing(app.data_dir.path(), id.as_bytes()).is_empty(), "the scan sees what is stored");
    assert_eq!(files_containing(app.data_dir.path(), secret.as_bytes()), Vec::<std::path::PathBuf>::new());

    // What module publishing calls, in a second process on the same data directory.
    let state = app.second_state().await;
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let connection = oauth::token_for(&state, &org_id, &token_id).await.unwrap().expect("the connection");
    assert_eq!(connection.token, secret);
    assert_eq!(
        (connection.oauth_client_id.as_str(), connection.oauth_token_id.as_str()),
        (id.as_str(), token_id.as_str())
    );
    assert_eq!(connection.service_provider, "github");
    assert_eq!(connection.api_url, "https://api.github.com");
    assert!(oauth::token_for(&state, "org-someoneelse", &token_id).await.unwrap().is_none());
    assert!(oauth::token_for(&state, &org_id, "ot-doesnotexist").await.unwrap().is_none());
}

#[tokio::test]
async fn connections_are_listed_shown_and_deleted_with_their_token() {
    let (app, owners) = acme().await;
    let (first, first_token) = create(&app, &owners, github("ghp_first")).await;
    let (second, _) = create(&app, &owners, github("ghp_second")).await;

    let listed = app.get(CLIENTS, &owners).await;
    assert_eq!(listed.status, 200);
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 2);
    let mut ids: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let mut expected = [first.as_str(), second.as_str()];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    let paged = app.get(&format!("{CLIENTS}?page[size]=1&page[number]=2"), &owners).await;
    assert_eq!(paged.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(paged.body["meta"]["pagination"]["total-pages"], 2);

    let shown = app.get(&format!("/api/v2/oauth-clients/{first}"), &owners).await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.body["data"]["id"], first);
    assert_eq!(shown.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"], first_token);

    let tokens = app.get(&format!("/api/v2/oauth-clients/{first}/oauth-tokens"), &owners).await;
    assert_eq!(tokens.status, 200);
    assert_eq!(tokens.body["meta"]["pagination"]["total-count"], 1);
    assert_eq!(tokens.body["data"][0]["id"], first_token);

    let token = app.get(&format!("/api/v2/oauth-tokens/{first_token}"), &owners).await;
    assert_eq!(token.status, 200, "{:?}", token.body);
    let data = &token.body["data"];
    assert_eq!(data["type"], "oauth-tokens");
    assert_eq!(data["attributes"]["has-ssh-key"], false);
    assert!(data["attributes"]["created-at"].is_string());
    assert!(data["attributes"].as_object().unwrap().contains_key("uid"));
    assert!(data["attributes"].as_object().unwrap().contains_key("service-provider-user"));
    assert_eq!(data["relationships"]["oauth-client"]["data"], json!({"id": first, "type": "oauth-clients"}));
    assert_eq!(data["links"]["self"], format!("/api/v2/oauth-tokens/{first_token}"));

    assert_eq!(app.delete(&format!("/api/v2/oauth-clients/{first}"), &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/oauth-clients/{first}"), &owners).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/oauth-tokens/{first_token}"), &owners).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/oauth-clients/{first}/oauth-tokens"), &owners).await.status, 404);
    assert_eq!(app.delete(&format!("/api/v2/oauth-clients/{first}"), &owners).await.status, 404);
    let after = app.get(CLIENTS, &owners).await;
    assert_eq!(after.body["meta"]["pagination"]["total-count"], 1);
    assert_eq!(after.body["data"][0]["id"], second);
}

#[tokio::test]
async fn a_reader_team_sees_connections_but_only_module_managers_change_them() {
    let (app, owners) = acme().await;
    let (id, token_id) = create(&app, &owners, github("ghp_owners")).await;
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (_, platform) = app.team_with_token("acme", "platform", json!({"manage-workspaces": true})).await;
    let (_, modules) = app.team_with_token("acme", "modules", json!({"manage-modules": true})).await;

    for path in [
        CLIENTS.to_owned(),
        format!("/api/v2/oauth-clients/{id}"),
        format!("/api/v2/oauth-clients/{id}/oauth-tokens"),
        format!("/api/v2/oauth-tokens/{token_id}"),
    ] {
        assert_eq!(app.get(&path, &reader).await.status, 200, "{path}");
    }
    for token in [&reader, &platform] {
        let denied = app.post(CLIENTS, token, github("ghp_denied")).await;
        assert_eq!(denied.status, 404, "{:?}", denied.body);
        assert_eq!(app.delete(&format!("/api/v2/oauth-clients/{id}"), token).await.status, 404);
    }
    assert_eq!(app.get(CLIENTS, &owners).await.body["meta"]["pagination"]["total-count"], 1);

    let (made, _) = create(&app, &modules, github("ghp_modules")).await;
    assert_eq!(app.delete(&format!("/api/v2/oauth-clients/{made}"), &modules).await.status, 204);
    assert_eq!(app.delete(&format!("/api/v2/oauth-clients/{id}"), &modules).await.status, 204);
}

#[tokio::test]
async fn another_organization_learns_nothing_about_its_connections() {
    let (app, owners) = acme().await;
    let (id, token_id) = create(&app, &owners, github("ghp_private")).await;
    app.create_organization("beta").await;
    let beta = app.owners_token("beta").await;
    let beta_ws = app
        .post(
            "/api/v2/organizations/beta/workspaces",
            &beta,
            json!({"data": {"type": "workspaces", "attributes": {"name": "w"}}}),
        )
        .await;
    let ws_id = beta_ws.body["data"]["id"].as_str().unwrap().to_owned();

    let probes = [
        (Method::GET, CLIENTS.to_owned()),
        (Method::POST, CLIENTS.to_owned()),
        (Method::GET, format!("/api/v2/oauth-clients/{id}")),
        (Method::DELETE, format!("/api/v2/oauth-clients/{id}")),
        (Method::GET, format!("/api/v2/oauth-clients/{id}/oauth-tokens")),
        (Method::GET, format!("/api/v2/oauth-tokens/{token_id}")),
    ];
    for (method, path) in probes {
        let body = (method == Method::POST).then(|| github("ghp_sneaky"));
        let reply = app.request(method.clone(), &path, Some(&beta), body).await;
        assert_eq!(reply.status, 404, "{method} {path}: {:?}", reply.body);
    }
    for path in [
        "/api/v2/oauth-clients/oc-doesnotexist".to_owned(),
        "/api/v2/oauth-tokens/ot-doesnotexist".to_owned(),
        format!("/api/v2/oauth-clients/{ws_id}"),
        format!("/api/v2/oauth-tokens/{id}"),
        format!("/api/v2/oauth-clients/{token_id}"),
    ] {
        assert_eq!(app.get(&path, &app.admin_token).await.status, 404, "{path}");
    }
    assert_eq!(app.get(&format!("/api/v2/oauth-clients/{id}"), &owners).await.status, 200, "untouched");
}

#[tokio::test]
async fn deleting_the_organization_removes_its_connections() {
    let (app, owners) = acme().await;
    let (id, token_id) = create(&app, &owners, github("ghp_doomed")).await;
    assert_eq!(app.delete("/api/v2/organizations/acme", &owners).await.status, 204);
    assert_eq!(app.get(&format!("/api/v2/oauth-clients/{id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.get(&format!("/api/v2/oauth-tokens/{token_id}"), &app.admin_token).await.status, 404);

    let store = app.store();
    for pointer in [&id, &token_id] {
        assert_eq!(store.get(&keys::id_pointer(pointer)).await.unwrap(), None, "{pointer}'s pointer went too");
    }
    app.create_organization("acme").await;
    let fresh = app.get(CLIENTS, &app.admin_token).await;
    assert_eq!(fresh.body["meta"]["pagination"]["total-count"], 0);
    assert_eq!(fresh.body["data"], json!([]));
}

/// A GitHub Enterprise connection at `http_url` and `api_url`.
fn enterprise(http_url: &str, api_url: &str) -> Value {
    client(json!({"service-provider": "github_enterprise", "oauth-token-string": "t",
                  "http-url": http_url, "api-url": api_url}))
}

#[tokio::test]
async fn an_oauth_client_pointing_at_a_private_address_is_refused() {
    let (app, owners) = acme().await;
    for address in [
        "http://10.0.0.1",
        "http://172.16.5.4:8080",
        "http://192.168.1.1",
        "http://100.64.0.1",
        "http://127.0.0.1:3000",
        "http://2130706433",
        "http://169.254.169.254/latest/meta-data",
        "http://0.0.0.0",
        "http://[::1]",
        "http://[fe80::1]",
        "http://[fc00::1]",
        "http://[fd00:ec2::254]",
        "http://[::ffff:127.0.0.1]",
        "http://[::ffff:a9fe:a9fe]",
        "http://224.0.0.1",
        "http://255.255.255.255",
    ] {
        for (attribute, body) in [
            ("api-url", enterprise("https://ghe.example", &format!("{address}/api/v3"))),
            ("http-url", enterprise(address, "https://ghe.example/api/v3")),
        ] {
            let reply = app.post(CLIENTS, &owners, body).await;
            assert_eq!(reply.status, 422, "{attribute} {address}: {:?}", reply.body);
            assert_eq!(reply.pointer(), format!("/data/attributes/{attribute}"), "{address}");
            let detail = reply.body["errors"][0]["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("HANGAR_VCS_ALLOWED_NETWORKS"), "says how to allow it: {detail}");
        }
    }
    let listed = app.get(CLIENTS, &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 0, "nothing was created");
    // A public address is a provider like any other.
    let public = app.post(CLIENTS, &owners, enterprise("https://8.8.8.8", "https://8.8.8.8/api/v3")).await;
    assert_eq!(public.status, 201, "{:?}", public.body);
}

#[tokio::test]
async fn an_oauth_client_url_with_a_query_a_fragment_or_credentials_is_refused() {
    let (app, owners) = acme().await;
    for url in [
        "https://ghe.example/api/v3?per_page=1",
        "https://ghe.example/api/v3?",
        "https://ghe.example/api/v3#top",
        "https://token@ghe.example/api/v3",
        "https://user:pass@ghe.example/api/v3",
    ] {
        for (attribute, body) in
            [("api-url", enterprise("https://ghe.example", url)), ("http-url", enterprise(url, "https://ghe.example"))]
        {
            let reply = app.post(CLIENTS, &owners, body).await;
            assert_eq!(reply.status, 422, "{attribute} {url}: {:?}", reply.body);
            assert_eq!(reply.pointer(), format!("/data/attributes/{attribute}"), "{url}");
        }
    }
    assert_eq!(app.get(CLIENTS, &owners).await.body["meta"]["pagination"]["total-count"], 0);
}

#[tokio::test]
async fn an_allowed_network_lets_a_connection_point_inside_it_and_nowhere_else() {
    let allowed = AllowedNetworks::parse("10.0.0.0/8, 169.254.0.0/16").unwrap();
    let config = Config { vcs_allowed_networks: allowed, ..Config::default() };
    let (app, owners) = TestApp::spawn_with_organization(config, "acme").await;
    let inside = app.post(CLIENTS, &owners, enterprise("http://10.1.2.3", "http://10.1.2.3/api/v3")).await;
    assert_eq!(inside.status, 201, "{:?}", inside.body);
    for (address, what) in [
        ("http://192.168.1.1", "another private network"),
        ("http://169.254.169.254", "the metadata service, which a network never allows"),
    ] {
        let reply = app.post(CLIENTS, &owners, enterprise("https://ghe.example", &format!("{address}/api/v3"))).await;
        assert_eq!(reply.status, 422, "{what}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/data/attributes/api-url", "{what}");
    }
}
