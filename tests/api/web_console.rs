//! The web console over HTTP, as a browser drives it (cookies by hand, redirects not followed):
//! the security headers on every answer, the session cookie's attributes, sign-in refusals,
//! sign-out and token revocation ending the session on the server, forms from another site
//! refused, another organization's module a 404 page, sanitized READMEs, and broker pages
//! without a secret. The browser test (tests/web/console.mjs) drives the same pages in Chromium.

use hangar_tests::builders::{module, new_module, pool_and_token, publish_version};
use hangar_tests::{moto, targz, Entry, TestApp};
use reqwest::header::{self, HeaderMap};
use reqwest::{redirect, StatusCode};
use serde_json::json;

/// A browser: no redirects followed, its own session cookie.
pub(crate) struct Browser<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    cookie: Option<String>,
}

/// What a page answered.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    headers: HeaderMap,
    pub(crate) html: String,
}

impl Answer {
    fn location(&self) -> &str {
        self.headers.get(header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    fn set_cookie(&self) -> Option<&str> {
        self.headers.get(header::SET_COOKIE).and_then(|v| v.to_str().ok())
    }

    /// The form token of the page's form (sign-in or sign-out).
    fn form_token(&self) -> String {
        let at = self.html.find("name=\"form_token\" value=\"").expect("a form with a token") + 25;
        self.html[at..].split('"').next().expect("a value").to_owned()
    }
}

impl<'a> Browser<'a> {
    pub(crate) fn new(app: &'a TestApp) -> Self {
        let client = reqwest::Client::builder().redirect(redirect::Policy::none()).build().expect("a client");
        Browser { app, client, cookie: None }
    }

    async fn read(response: reqwest::Response) -> Answer {
        let (status, headers) = (response.status(), response.headers().clone());
        Answer { status, headers, html: response.text().await.expect("a body") }
    }

    pub(crate) async fn get(&self, path: &str) -> Answer {
        let mut request = self.client.get(format!("{}{path}", self.app.url));
        if let Some(cookie) = &self.cookie {
            request = request.header(header::COOKIE, cookie);
        }
        Self::read(request.send().await.expect("dev-server answers")).await
    }

    /// POSTs a form as a page of `origin` would, with `extra_cookie` beside the session's.
    async fn post_with(
        &self,
        origin: Option<&str>,
        extra_cookie: Option<&str>,
        path: &str,
        form: &[(&str, &str)],
    ) -> Answer {
        let mut request = self.client.post(format!("{}{path}", self.app.url)).form(form);
        if let Some(origin) = origin {
            request = request.header(header::ORIGIN, origin);
        }
        let cookies: Vec<&str> = self.cookie.as_deref().into_iter().chain(extra_cookie).collect();
        if !cookies.is_empty() {
            request = request.header(header::COOKIE, cookies.join("; "));
        }
        Self::read(request.send().await.expect("dev-server answers")).await
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Answer {
        self.post_with(Some(&self.app.url.clone()), None, path, form).await
    }

    /// Loads the sign-in page: its form token and the cookie (`name=value`) that pairs with it.
    async fn sign_in_form(&self) -> (String, String) {
        let page = self.get("/app/sign-in").await;
        assert_eq!(page.status, 200, "{}", page.html);
        let cookie = page.set_cookie().expect("the sign-in cookie").split(';').next().expect("name=value").to_owned();
        assert!(cookie.starts_with("hangar_sign_in="), "{cookie}");
        (page.form_token(), cookie)
    }

    /// Sends the sign-in form as the sign-in page would, with `token`.
    async fn try_sign_in(&self, token: &str) -> Answer {
        let (form_token, cookie) = self.sign_in_form().await;
        let form = [("token", token), ("form_token", form_token.as_str())];
        self.post_with(Some(&self.app.url.clone()), Some(&cookie), "/app/sign-in", &form).await
    }

    /// Signs in and keeps the cookie; returns the sign-in answer.
    pub(crate) async fn sign_in(&mut self, token: &str) -> Answer {
        let answer = self.try_sign_in(token).await;
        assert_eq!(answer.status, 303, "signing in: {}", answer.html);
        let set = answer.set_cookie().expect("a session cookie");
        self.cookie = Some(set.split(';').next().expect("name=value").to_owned());
        answer
    }
}

/// `org`'s module `<name>/aws` with version 1.0.0 made of `entries`.
async fn publish(app: &TestApp, token: &str, org: &str, name: &str, entries: &[Entry<'_>]) {
    let provider = new_module(app, token, org, name, "aws").await;
    let settled = publish_version(app, token, &provider, "1.0.0", targz(entries)).await;
    assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "{:?}", settled.body);
}

const HOSTILE_README: &[u8] = b"# vpc\n\nA network.\n\n<script>window.pwned = 1</script>\n\n\
    Badge <img src=x onerror=\"window.pwned = 2\"> and [a link](javascript:alert(1)).\n";

#[tokio::test]
async fn every_console_answer_carries_the_security_headers() {
    let app = TestApp::spawn().await;
    let browser = Browser::new(&app);
    for (path, status) in [
        ("/app/sign-in", 200),
        ("/app", 303),
        ("/app/", 308),
        ("/app/nowhere", 404),
        ("/app/console.css", 200),
        // Signed out, the sign-out page goes to sign-in.
        ("/app/sign-out", 303),
    ] {
        let answer = browser.get(path).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.html);
        let header = |name: &str| answer.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let csp = header("content-security-policy");
        for directive in [
            "default-src 'none'",
            "style-src 'self'",
            "img-src https:",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {directive} missing from {csp}");
        }
        // One script, the copy button's, by its hash: nothing inline or loaded besides.
        let scripts: Vec<&str> = csp
            .split(';')
            .find(|directive| directive.trim().starts_with("script-src"))
            .map(|directive| directive.split_whitespace().collect())
            .unwrap_or_default();
        assert_eq!(scripts.len(), 2, "{path}: {csp}");
        assert!(scripts[1].starts_with("'sha256-") && scripts[1].ends_with("='"), "{path}: {csp}");
        assert!(!csp.contains("unsafe"), "{path}: {csp}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        if status >= 400 {
            assert!(header("content-type").starts_with("text/html"), "{path}: errors are pages");
            assert!(answer.html.contains("<h1>"), "{path}: {}", answer.html);
        }
    }
    // dev-server opens on the console.
    let root = browser.get("/").await;
    assert_eq!((root.status.as_u16(), root.location()), (303, "/app"));
    app.stop().await;
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_session_cookie_that_is_not_the_token() {
    let app = TestApp::spawn().await;
    let mut browser = Browser::new(&app);
    let answer = browser.sign_in(&app.admin_token).await;
    assert_eq!(answer.location(), "/app");
    let cookie = answer.set_cookie().expect("a cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/app", &format!("Max-Age={}", 8 * 3600)] {
        assert!(cookie.contains(attribute), "{attribute} missing: {cookie}");
    }
    assert!(!cookie.contains("Secure"), "served over http: {cookie}");
    assert!(!cookie.contains(&app.admin_token), "the cookie holds a session id, not the token");
    let home = browser.get("/app").await;
    assert_eq!(home.status, 200, "{}", home.html);
    assert!(home.html.contains("Organizations"), "{}", home.html);
    assert!(!home.html.contains(&app.admin_token), "the token is never shown again");
    app.stop().await;
}

#[tokio::test]
async fn a_token_that_is_not_valid_gets_the_form_again_and_no_cookie() {
    let app = TestApp::spawn().await;
    let browser = Browser::new(&app);
    let long = "x".repeat(600);
    for token in ["not-a-token", "", "   ", long.as_str()] {
        let answer = browser.try_sign_in(token).await;
        assert_eq!(answer.status, 401, "{token:?}: {}", answer.html);
        let cookie = answer.set_cookie().unwrap_or_default();
        assert!(cookie.starts_with("hangar_sign_in="), "no session cookie, a new form's: {cookie}");
        assert!(answer.html.contains("That token is not valid"), "{}", answer.html);
        assert!(answer.html.contains("name=\"token\""), "the form again");
    }
    app.stop().await;
}

#[tokio::test]
async fn signing_out_deletes_the_session_so_a_copied_cookie_opens_nothing() {
    let app = TestApp::spawn().await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&app.admin_token).await;
    let home = browser.get("/app").await;
    assert_eq!(home.status, 200);
    let copied = browser.cookie.clone();

    let out = browser.post("/app/sign-out", &[("form_token", &home.form_token())]).await;
    assert_eq!((out.status.as_u16(), out.location()), (303, "/app/sign-in"), "{}", out.html);
    let cleared = out.set_cookie().expect("the cookie is cleared");
    assert!(cleared.starts_with("hangar_session=;") && cleared.contains("Max-Age=0"), "{cleared}");

    browser.cookie = copied;
    let replayed = browser.get("/app").await;
    assert_eq!((replayed.status.as_u16(), replayed.location()), (303, "/app/sign-in"));
    app.stop().await;
}

#[tokio::test]
async fn forms_from_another_site_or_without_the_form_token_are_refused() {
    let app = TestApp::spawn().await;
    let mut browser = Browser::new(&app);
    let admin = app.admin_token.as_str();
    // From another site, with a form token and cookie of this one's: the origin refuses it.
    let (form_token, cookie) = browser.sign_in_form().await;
    let form = [("token", admin), ("form_token", form_token.as_str())];
    let foreign = browser.post_with(Some("https://evil.example"), Some(&cookie), "/app/sign-in", &form).await;
    assert_eq!(foreign.status, 403, "{}", foreign.html);
    // No origin (Referrer-Policy: no-referrer) is left to the form token: a forged form has a
    // token but not the browser's sign-in cookie (SameSite=Strict), or not the matching one.
    let guessed = [("token", admin), ("form_token", "guessed")];
    for (origin, cookie, form) in [
        (Some("null"), None, &form[..]),
        (None, None, &form[..]),
        (Some("null"), Some(cookie.as_str()), &guessed[..]),
        (None, Some(cookie.as_str()), &[("token", admin)][..]),
    ] {
        let answer = browser.post_with(origin, cookie, "/app/sign-in", form).await;
        assert_eq!(answer.status, 403, "{origin:?} {cookie:?} {form:?}: {}", answer.html);
        assert!(answer.set_cookie().is_none(), "{origin:?}");
    }
    // The browser's own form, sent as Chromium sends it under no-referrer, passes.
    let own = browser.post_with(Some("null"), Some(&cookie), "/app/sign-in", &form).await;
    assert_eq!(own.status, 303, "{}", own.html);
    browser.sign_in(&app.admin_token).await;
    let home = browser.get("/app").await;
    let token = home.form_token();
    let forged = browser.post("/app/sign-out", &[("form_token", "guessed")]).await;
    assert_eq!(forged.status, 403, "{}", forged.html);
    let cross = browser.post_with(Some("https://evil.example"), None, "/app/sign-out", &[("form_token", &token)]).await;
    assert_eq!(cross.status, 403, "{}", cross.html);
    assert_eq!(browser.get("/app").await.status, 200, "the session survives both");
    app.stop().await;
}

#[tokio::test]
async fn another_organizations_module_is_the_same_404_page_as_a_missing_one() {
    let (app, owners_a) = TestApp::with_organization("alpha").await;
    app.create_organization("bravo").await;
    let owners_b = app.owners_token("bravo").await;
    let readme = Entry::File("README.md", b"# x\n");
    publish(&app, &owners_a, "alpha", "net", &[Entry::File("main.tf", b"variable \"a\" {}\n"), readme]).await;
    publish(&app, &owners_b, "bravo", "secret", &[Entry::File("main.tf", b"variable \"b\" {}\n")]).await;

    let mut browser = Browser::new(&app);
    browser.sign_in(&owners_a).await;
    let own = browser.get("/app/organizations/alpha/modules/private/alpha/net/aws").await;
    assert_eq!(own.status, 200, "{}", own.html);
    let missing = browser.get("/app/organizations/alpha/modules/private/alpha/nothing/aws").await;
    assert_eq!(missing.status, 404);
    for path in [
        "/app/organizations/bravo/modules/private/bravo/secret/aws",
        "/app/organizations/bravo/modules",
        "/app/organizations/bravo/agent-pools",
        "/app/organizations/alpha/modules/private/bravo/secret/aws",
        "/app/broker",
    ] {
        let other = browser.get(path).await;
        assert_eq!(other.status, 404, "{path}: {}", other.html);
        assert_eq!(other.html, missing.html, "{path}: the same page as a missing module");
        assert!(!other.html.contains("secret/aws") && !other.html.contains("bravo"), "{path}");
    }
    let home = browser.get("/app").await;
    assert!(home.html.contains("alpha") && !home.html.contains("bravo"), "{}", home.html);
    app.stop().await;
}

#[tokio::test]
async fn revoking_the_token_ends_its_sessions_at_once() {
    let (app, _) = TestApp::with_organization("acme").await;
    let (team, token) = app.team_with_token("acme", "readers", json!({})).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&token).await;
    assert_eq!(browser.get("/app/organizations/acme/modules").await.status, 200);

    let revoked = app.delete(&format!("/api/v2/teams/{team}/authentication-token"), &app.admin_token).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    let after = browser.get("/app/organizations/acme/modules").await;
    assert_eq!((after.status.as_u16(), after.location()), (303, "/app/sign-in"));
    app.stop().await;
}

#[tokio::test]
async fn a_readme_is_sanitized_and_the_module_page_shows_its_metadata() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let main =
        b"variable \"cidr\" {\n  type = string\n  description = \"The range.\"\n}\noutput \"vpc_id\" { value = 1 }\n";
    publish(&app, &owners, "acme", "vpc", &[Entry::File("main.tf", main), Entry::File("README.md", HOSTILE_README)])
        .await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;

    let found = browser.get("/app/organizations/acme/modules?q=vp&provider=aws").await;
    assert_eq!(found.status, 200, "{}", found.html);
    assert!(found.html.contains("href=\"/app/organizations/acme/modules/private/acme/vpc/aws\""), "{}", found.html);
    let none = browser.get("/app/organizations/acme/modules?q=nothing-like-it").await;
    assert!(none.html.contains("No module matches."), "{}", none.html);

    let page = browser.get("/app/organizations/acme/modules/private/acme/vpc/aws").await;
    assert_eq!(page.status, 200, "{}", page.html);
    let html = &page.html;
    assert!(html.contains("<h1>vpc</h1>") && html.contains("A network."), "the README renders: {html}");
    assert!(html.contains("&lt;script&gt;window.pwned = 1&lt;/script&gt;"), "shown as text: {html}");
    assert!(html.contains("onerror=\"window.pwned = 2\"&gt;") || html.contains("onerror=&quot;"), "{html}");
    let readme = html.split("<article class=\"markdown\">").nth(1).and_then(|rest| rest.split("</article>").next());
    let readme = readme.expect("the README's article");
    assert!(!readme.contains("<script") && !readme.contains("<img"), "no element from the README's HTML: {readme}");
    let scripts = html.matches("<script>").count();
    assert_eq!(scripts, 1, "the page's one script is the copy button's");
    assert!(html.contains(&format!("<script>{}</script>", hangar::web::layout::COPY_SCRIPT)), "{html}");
    assert!(!html.contains("javascript:"), "{html}");
    assert!(html.contains("<code>cidr</code>") && html.contains("The range."), "inputs: {html}");
    assert!(html.contains("<code>vpc_id</code>"), "outputs: {html}");
    let host = app.url.trim_start_matches("http://");
    assert!(html.contains(&format!("source  = &quot;{host}/acme/vpc/aws&quot;")), "usage: {html}");
    assert!(html.contains("version = &quot;~&gt; 1.0&quot;"), "usage: {html}");

    let unknown_version = browser.get("/app/organizations/acme/modules/private/acme/vpc/aws?version=9.9.9").await;
    assert_eq!(unknown_version.status, 404);
    let long = format!("/app/organizations/acme/modules?q={}", "a".repeat(101));
    assert_eq!(browser.get(&long).await.status, 400, "search terms are bounded");
    app.stop().await;
}

/// A README made to cost (tables of short rows that pulldown-cmark pads to their header's 2,000
/// cells, block quotes 60,000 deep) is shown as too large to render: the page's size, and so
/// its cost, stays bounded whatever the author wrote. (Before, one view took 56 s and 1.1 GB.)
#[tokio::test]
async fn a_readme_made_to_cost_is_too_large_to_render_and_the_page_stays_small() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let tables = format!("# vpc\n\n|{}\n|{}\n{}", "a|".repeat(2000), "-|".repeat(2000), "|x\n".repeat(14_000));
    let quotes = ">".repeat(60_000);
    publish(
        &app,
        &owners,
        "acme",
        "vpc",
        &[Entry::File("main.tf", b"variable \"a\" {}\n"), Entry::File("README.md", tables.as_bytes())],
    )
    .await;
    publish(
        &app,
        &owners,
        "acme",
        "dns",
        &[Entry::File("main.tf", b"variable \"a\" {}\n"), Entry::File("README.md", quotes.as_bytes())],
    )
    .await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    for module in ["vpc", "dns"] {
        let page = browser.get(&format!("/app/organizations/acme/modules/private/acme/{module}/aws")).await;
        assert_eq!(page.status, 200, "{module}");
        assert!(
            page.html.contains("README too large to render"),
            "{module}: {}",
            &page.html[..page.html.len().min(2000)]
        );
        assert!(page.html.len() < 64 * 1024, "{module}: a page of {} bytes", page.html.len());
    }
    app.stop().await;
}

/// A README's images load only from the hosts the operator allows (none by default), so a
/// README cannot have every viewer's browser call a host of its author's choosing.
#[tokio::test]
async fn readme_images_load_only_from_the_hosts_the_operator_allows() {
    let config = hangar::config::Config { console_image_hosts: vec!["img.example".into()], ..Default::default() };
    let (app, owners) = TestApp::spawn_with_organization(config, "acme").await;
    let readme = b"# vpc\n\n![ok](https://img.example/badge.svg) ![no](https://tracker.example/pixel.gif)\n";
    publish(
        &app,
        &owners,
        "acme",
        "vpc",
        &[Entry::File("main.tf", b"variable \"a\" {}\n"), Entry::File("README.md", readme)],
    )
    .await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let page = browser.get("/app/organizations/acme/modules/private/acme/vpc/aws").await;
    assert!(page.html.contains("src=\"https://img.example/badge.svg\""), "{}", page.html);
    assert!(!page.html.contains("tracker.example"), "{}", page.html);
    app.stop().await;
}

/// No page strands a signed-in person: an error page keeps the header and the sign-out form,
/// the sign-in and sign-out pages answer a GET with their forms and who is signed in, an
/// organization's name leads to its page, and statuses read as words.
#[tokio::test]
async fn every_page_keeps_the_way_on_for_whoever_is_signed_in() {
    let (app, owners) = TestApp::with_organization("acme").await;
    publish(&app, &owners, "acme", "vpc", &[Entry::File("main.tf", b"variable \"a\" {}\n")]).await;
    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let signed_in = |answer: &Answer| {
        answer.html.contains("action=\"/app/sign-out\"") && answer.html.contains("name=\"form_token\"")
    };

    for path in ["/app/nowhere", "/app/organizations/elsewhere/modules", "/app/broker"] {
        let error = browser.get(path).await;
        assert_eq!(error.status, 404, "{path}");
        assert!(signed_in(&error), "{path}: an error page keeps the sign-out form: {}", error.html);
        assert!(error.html.contains("<nav class=\"top\">"), "{path}: and the header");
    }
    let sign_in = browser.get("/app/sign-in").await;
    assert_eq!(sign_in.status, 200, "the sign-in page answers a signed-in GET");
    assert!(sign_in.html.contains("Signed in as") && signed_in(&sign_in), "{}", sign_in.html);
    let sign_out = browser.get("/app/sign-out").await;
    assert_eq!(sign_out.status, 200);
    assert!(signed_in(&sign_out) && sign_out.html.contains("Signed in as"), "{}", sign_out.html);

    let home = browser.get("/app").await;
    assert!(home.html.contains("href=\"/app/organizations/acme\""), "the organization's name is a link: {}", home.html);
    let org = browser.get("/app/organizations/acme").await;
    assert_eq!(org.status, 200, "{}", org.html);
    for link in ["/app/organizations/acme/modules", "/app/organizations/acme/agent-pools"] {
        assert!(org.html.contains(&format!("href=\"{link}\"")), "{link}: {}", org.html);
    }
    let modules = browser.get("/app/organizations/acme/modules").await;
    assert!(!modules.html.contains(">setup_complete<") && !modules.html.contains(">pending<"), "{}", modules.html);

    let form_token = sign_out.form_token();
    let out = browser.post("/app/sign-out", &[("form_token", form_token.as_str())]).await;
    assert_eq!((out.status.as_u16(), out.location()), (303, "/app/sign-in"));
    app.stop().await;
}

#[tokio::test]
async fn the_agent_pools_page_shows_each_agents_status_and_the_capacity_used() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let (_, agent_token) = pool_and_token(&app, &owners).await;
    let registered = app
        .client
        .post(format!("{}/api/agent/register", app.url))
        .bearer_auth(&agent_token)
        .json(&json!({"name": "runner-1"}))
        .send()
        .await
        .expect("dev-server answers");
    assert!(registered.status().is_success(), "{}", registered.text().await.unwrap_or_default());

    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let page = browser.get("/app/organizations/acme/agent-pools").await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(page.html.contains("builders") && page.html.contains("runner-1"), "{}", page.html);
    assert!(page.html.contains("status-idle"), "{}", page.html);
    assert!(page.html.contains("Capacity used: <strong>1 of 1</strong>"), "{}", page.html);
    assert!(!page.html.contains(&agent_token), "an agent token is never shown");
    app.stop().await;
}

#[tokio::test]
async fn a_workspace_page_shows_its_lock_state_versions_and_outputs_to_whoever_may_read_them() {
    use hangar_tests::builders::{grant, lock, new_workspace, terraform_state, write_state};
    let (app, owners) = TestApp::with_organization("acme").await;
    let ws = new_workspace(&app, &owners, "acme", "network").await;
    lock(&app, &owners, &ws).await;
    let state = terraform_state(
        7,
        "lin",
        &[("endpoint", json!("db.internal"), false), ("password", json!("hunter2-secret"), true)],
    );
    assert_eq!(write_state(&app, &owners, &ws, &state, 7).await.status, 201);

    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let org_page = browser.get("/app/organizations/acme").await;
    assert!(org_page.html.contains("/app/organizations/acme/workspaces/network"), "{}", org_page.html);
    let page = browser.get("/app/organizations/acme/workspaces/network").await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(page.html.contains("status-locked") && page.html.contains("<td>7</td>"), "{}", page.html);
    assert!(page.html.contains("db.internal") && page.html.contains("sensitive"), "{}", page.html);
    assert!(!page.html.contains("hunter2-secret"), "a sensitive output is never shown");

    // A team whose access holds no state sees the workspace, not its state; one without access
    // sees the same 404 as for nothing.
    let (auditors_id, auditors) = app.team_with_token("acme", "auditors", json!({})).await;
    grant(&app, &owners, &auditors_id, &ws, json!({"access": "custom", "state-versions": "none"})).await;
    let mut auditor = Browser::new(&app);
    auditor.sign_in(&auditors).await;
    let limited = auditor.get("/app/organizations/acme/workspaces/network").await;
    assert_eq!(limited.status, 200);
    assert!(
        limited.html.contains("may not read this workspace") && !limited.html.contains("db.internal"),
        "{}",
        limited.html
    );
    let (_, strangers) = app.team_with_token("acme", "strangers", json!({})).await;
    let mut stranger = Browser::new(&app);
    stranger.sign_in(&strangers).await;
    assert_eq!(stranger.get("/app/organizations/acme/workspaces/network").await.status, 404);
    assert_eq!(stranger.get("/app/organizations/acme/workspaces/missing").await.status, 404);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn broker_pages_show_roles_and_rotations_but_never_a_secret() {
    let moto::Moto { endpoint, sdk } = moto::moto().await;
    let root = "console-root-token";
    let config = hangar::config::Config { root_service_token: Some(root.into()), ..Default::default() };
    let app = TestApp::spawn_with(config).await;
    let vault = |method: reqwest::Method, path: &str, body: serde_json::Value| {
        let request = app.client.request(method, format!("{}/v1/{path}", app.url)).header("X-Vault-Token", root);
        request.json(&body).send()
    };
    let configured = json!({
        "access_key": moto::ACCESS_KEY, "secret_key": moto::SECRET_KEY, "region": moto::REGION,
        "iam_endpoint": endpoint, "sts_endpoint": endpoint,
    });
    assert!(vault(reqwest::Method::POST, "aws/config/root", configured)
        .await
        .expect("an answer")
        .status()
        .is_success());
    let role = json!({"credential_type": "assumed_role", "role_arns": ["arn:aws:iam::123456789012:role/deploy"], "default_sts_ttl": 900, "max_sts_ttl": 3600});
    assert!(vault(reqwest::Method::POST, "aws/roles/deploy", role).await.expect("an answer").status().is_success());
    let user = format!("console-{}", hangar::ids::random_token(8).to_lowercase());
    aws_sdk_iam::Client::new(&sdk).create_user().user_name(&user).send().await.expect("CreateUser");
    let statics = json!({"username": user, "rotation_period": "2h"});
    let written = vault(reqwest::Method::POST, "aws/static-roles/app", statics).await.expect("an answer");
    assert!(written.status().is_success(), "{}", written.text().await.unwrap_or_default());
    let creds = vault(reqwest::Method::GET, "aws/static-creds/app", json!(null)).await.expect("an answer");
    let creds: serde_json::Value = creds.json().await.expect("JSON");
    let secret = creds["data"]["secret_key"].as_str().expect("the static role's secret").to_owned();
    let access = creds["data"]["access_key"].as_str().expect("its key id").to_owned();

    let mut browser = Browser::new(&app);
    browser.sign_in(root).await;
    let mounts = browser.get("/app/broker").await;
    assert_eq!(mounts.status, 200, "{}", mounts.html);
    assert!(mounts.html.contains("href=\"/app/broker/mount?path=aws\""), "{}", mounts.html);
    let mount = browser.get("/app/broker/mount?path=aws").await;
    assert_eq!(mount.status, 200, "{}", mount.html);
    assert!(mount.html.contains("deploy") && mount.html.contains("assumed_role"), "{}", mount.html);
    assert!(mount.html.contains("15m") && mount.html.contains("1h"), "TTLs: {}", mount.html);
    assert!(mount.html.contains(&user) && mount.html.contains("2h"), "the static role: {}", mount.html);
    assert!(mount.html.contains("arn:aws:iam::123456789012:role/deploy"), "the role's ARNs: {}", mount.html);
    assert!(mount.html.contains("set, with an access key"), "whether config/root is set: {}", mount.html);
    assert!(mount.html.contains("<dt>Leases</dt><dd>none</dd>"), "the mount's leases: {}", mount.html);
    for page in [&mounts, &mount] {
        for never in [secret.as_str(), access.as_str(), moto::SECRET_KEY, root] {
            assert!(!page.html.contains(never), "a secret on a broker page: {never}");
        }
    }
    assert_eq!(browser.get("/app/organizations").await.status, 404);
    assert_eq!(browser.get("/app/broker/mount?path=nowhere").await.status, 404);

    // A token that may list nothing lands on a page that says who it is and what it may do.
    let created =
        vault(reqwest::Method::POST, "auth/token/create", json!({"policies": ["default"], "display_name": "ci"}));
    let created: serde_json::Value = created.await.expect("an answer").json().await.expect("JSON");
    let mut limited = Browser::new(&app);
    limited.sign_in(created["auth"]["client_token"].as_str().expect("a token")).await;
    let landing = limited.get("/app/broker").await;
    assert_eq!(landing.status, 200, "{}", landing.html);
    assert!(landing.html.contains("token-ci") && landing.html.contains("may not list the broker"), "{}", landing.html);
    assert!(landing.html.contains("action=\"/app/sign-out\""), "{}", landing.html);
    app.stop().await;
}

#[tokio::test]
async fn the_modules_list_pages_with_the_apis_own_page_parameters() {
    let (app, owners) = TestApp::with_organization("acme").await;
    for n in 0..23 {
        let created =
            app.post("/api/v2/organizations/acme/registry-modules", &owners, module(&format!("m{n:02}"), "aws")).await;
        assert_eq!(created.status, 201, "{:?}", created.body);
    }
    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let first = browser.get("/app/organizations/acme/modules").await;
    assert!(first.html.contains("Page 1 of 2 · 23 in all"), "{}", first.html);
    assert!(first.html.contains("acme/m19") && !first.html.contains("acme/m20"), "{}", first.html);
    let next =
        first.html.split("rel=\"next\" href=\"").nth(1).and_then(|rest| rest.split('"').next()).expect("a next link");
    let next = next.replace("&amp;", "&");
    assert!(next.contains("page%5Bnumber%5D=2"), "{next}");
    let second = browser.get(&next).await;
    assert!(second.html.contains("Page 2 of 2") && second.html.contains("acme/m22"), "{}", second.html);
    assert!(!second.html.contains("rel=\"next\""), "the last page has no next link");
    let oversized = browser.get("/app/organizations/acme/modules?page%5Bsize%5D=1000").await;
    assert!(oversized.html.contains("Page 1 of 1 · 23 in all"), "sizes above 100 are served as 100");
    assert_eq!(browser.get("/app/organizations/acme/modules?page%5Bnumber%5D=x").await.status, 400);
    app.stop().await;
}

#[tokio::test]
async fn the_module_page_marks_deprecated_and_revoked_versions_with_their_reasons() {
    let (app, owners) = TestApp::with_organization("acme").await;
    let files = [Entry::File("main.tf", b"variable \"a\" {}\n" as &[u8])];
    publish(&app, &owners, "acme", "vpc", &files).await;
    let provider = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
    for version in ["1.1.0", "1.2.0"] {
        publish_version(&app, &owners, provider, version, targz(&files)).await;
    }
    let deprecation =
        |reason: &str| json!({"deprecated-status": "Deprecated", "reason": reason, "link": "https://example.com/why"});
    let body = json!({"data": {"type": "module-versions", "attributes": {"deprecation": deprecation("Use 1.1.")}}});
    assert_eq!(app.patch(&format!("{provider}/1.0.0"), &owners, body).await.status, 200);
    let revocation = json!({"status": "Revoked", "message": "It leaks.", "link": "https://example.com/leak"});
    let both = json!({"data": {"type": "module-versions", "attributes": {
        "deprecation": deprecation("Broken."), "revocation": revocation}}});
    let revoked = app.patch(&format!("{provider}/1.2.0"), &owners, both).await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);

    let mut browser = Browser::new(&app);
    browser.sign_in(&owners).await;
    let page = browser.get("/app/organizations/acme/modules/private/acme/vpc/aws").await;
    assert_eq!(page.status, 200, "{}", page.html);
    let versions = page.html.split("<section class=\"versions\">").nth(1).expect("the versions").to_owned();
    let row = |version: &str| {
        let start = versions.find(&format!(">{version}</a>")).unwrap_or_else(|| panic!("{version} listed"));
        versions[start..].split("</tr>").next().expect("a row").to_owned()
    };
    let (v100, v110, v120) = (row("1.0.0"), row("1.1.0"), row("1.2.0"));
    assert!(
        v100.contains("status-deprecated") && v100.contains("Use 1.1.") && !v100.contains("status-revoked"),
        "{v100}"
    );
    assert!(v100.contains("href=\"https://example.com/why\""), "{v100}");
    assert!(!v110.contains("status-deprecated") && !v110.contains("status-revoked"), "{v110}");
    assert!(v120.contains("status-revoked") && v120.contains("It leaks.") && v120.contains("Broken."), "{v120}");
    assert!(v120.contains("href=\"https://example.com/leak\""), "{v120}");
    // The latest offered version is 1.1.0: 1.2.0 is revoked.
    assert!(page.html.contains("version = &quot;~&gt; 1.1&quot;"), "{}", page.html);
    let shown = browser.get("/app/organizations/acme/modules/private/acme/vpc/aws?version=1.2.0").await;
    assert!(
        shown.html.contains("Version 1.2.0 is revoked") && !shown.html.contains("section class=\"usage\""),
        "{}",
        shown.html
    );
    app.stop().await;
}
