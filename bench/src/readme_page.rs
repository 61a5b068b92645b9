//! The worst module page a README can make, against a plain one, and what two such views at
//! once do to `ping` (issue 37): dev-server in this process on the embedded store, its console
//! signed in with the owners' token. A README of table rows pulldown-cmark would pad to 256K
//! cells took 56 s and 1.1 GB for one view before the console bounded its rendering.

use std::time::{Duration, Instant};

use hangar_tests::{targz, Entry, TestApp};
use serde_json::json;

use crate::stats::{millis, ratio, table, Samples};

const VIEWS: usize = 30;
const PINGS: usize = 300;

/// Each page: its module's name, and the README its version carries.
fn readmes() -> Vec<(&'static str, String)> {
    let plain =
        format!("# vpc\n\nA network.\n\n| input | meaning |\n|---|---|\n{}", "| cidr | the range |\n".repeat(40));
    // Short rows under a wide header: the padding the parser did before the bound.
    let tables = format!("# t\n\n|{}\n|{}\n{}", "a|".repeat(2000), "-|".repeat(2000), "|x\n".repeat(14_000));
    let quotes = ">".repeat(60_000);
    // Just under every bound at once: what a page may still have to render.
    let largest = format!(
        "# big\n\n|{}\n|{}\n{}\n\n{}",
        "a|".repeat(20),
        "-|".repeat(20),
        "|x|y|z|\n".repeat(490),
        "A paragraph of words. ".repeat(2200)
    );
    vec![("plain", plain), ("tables", tables), ("quotes", quotes), ("largest", largest)]
}

pub async fn run() -> String {
    let (app, owners) = TestApp::with_organization("acme").await;
    for (name, readme) in readmes() {
        publish(&app, &owners, name, readme.as_bytes()).await;
    }
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
    let cookie = sign_in(&client, &app.url, &owners).await;
    let page = |name: &str| format!("{}/app/organizations/acme/modules/private/acme/{name}/aws", app.url);

    let mut rows = Vec::new();
    let mut plain_median = 0.0;
    for (name, _) in readmes() {
        let mut samples = Samples::default();
        let mut bytes = 0;
        for _ in 0..VIEWS {
            let started = Instant::now();
            let answer = client.get(page(name)).header("Cookie", &cookie).send().await.expect("the page");
            assert_eq!(answer.status(), 200, "{name}");
            bytes = answer.bytes().await.expect("its body").len();
            samples.push(started.elapsed());
        }
        let median = samples.median().as_secs_f64();
        if name == "plain" {
            plain_median = median;
        }
        rows.push(vec![
            format!("module page, {name} README"),
            millis(samples.median()),
            ratio(median, plain_median),
            format!("{bytes} bytes"),
        ]);
    }

    let ping = |client: reqwest::Client, url: String| async move {
        let mut samples = Samples::default();
        for _ in 0..PINGS {
            let started = Instant::now();
            let answer = client.get(format!("{url}/api/v2/ping")).send().await.expect("ping");
            assert_eq!(answer.status(), 204);
            samples.push(started.elapsed());
        }
        samples
    };
    let idle = ping(client.clone(), app.url.clone()).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let viewers: Vec<_> = (0..2)
        .map(|_| {
            let (client, url, cookie, stop) = (client.clone(), page("largest"), cookie.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = client.get(&url).header("Cookie", &cookie).send().await.map(|a| a.bytes());
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let loaded = ping(client.clone(), app.url.clone()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for viewer in viewers {
        let _ = viewer.await;
    }
    let (idle_median, loaded_median) = (idle.median(), loaded.median());
    rows.push(vec![
        "ping, idle".into(),
        millis(idle_median),
        "".into(),
        format!("p99 {}", millis(idle.percentile(0.99))),
    ]);
    rows.push(vec![
        "ping while two views of the largest page run".into(),
        millis(loaded_median),
        ratio(loaded_median.as_secs_f64(), idle_median.as_secs_f64()),
        format!("p99 {}", millis(loaded.percentile(0.99))),
    ]);
    app.stop().await;
    format!(
        "### A module page and its README (`bench readme-page`)\n\n{VIEWS} views of each page (medians), then {PINGS} pings idle and while two \
         clients view the largest page (every bound nearly reached) in a loop.\n\n{}",
        table(&["what", "median", "× plain page / × idle ping", "size / p99"], &rows)
    )
}

/// `acme`'s module `<name>/aws`, version 1.0.0, with `readme`.
async fn publish(app: &TestApp, token: &str, name: &str, readme: &[u8]) {
    let modules = "/api/v2/organizations/acme/registry-modules";
    let module = json!({"data": {"type": "registry-modules", "attributes": {"name": name, "provider": "aws"}}});
    assert_eq!(app.post(modules, token, module).await.status, 201);
    let provider = format!("{modules}/private/acme/{name}/aws");
    let body = json!({"data": {"type": "registry-module-versions", "attributes": {"version": "1.0.0"}}});
    let created = app.post(&format!("{provider}/versions"), token, body).await;
    let url = created.body["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
    let archive = targz(&[Entry::File("main.tf", b"variable \"a\" {}\n"), Entry::File("README.md", readme)]);
    assert_eq!(app.upload(&url, archive).await, 200);
    let settled = app.settled(&format!("{provider}/version?module_version=1.0.0"), token).await;
    assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "{name}");
}

/// Signs in to the console with `token`; the session's `Cookie` header value.
async fn sign_in(client: &reqwest::Client, url: &str, token: &str) -> String {
    let form = client.get(format!("{url}/app/sign-in")).send().await.expect("the sign-in page");
    let set = form.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("its cookie").to_owned();
    let sign_in_cookie = set.split(';').next().expect("name=value").to_owned();
    let html = form.text().await.expect("the page");
    let at = html.find("name=\"form_token\" value=\"").expect("a form token") + 25;
    let form_token = html[at..].split('"').next().expect("its value").to_owned();
    let signed = client
        .post(format!("{url}/app/sign-in"))
        .header("Cookie", sign_in_cookie)
        .header("Origin", url)
        .form(&[("token", token), ("form_token", form_token.as_str())])
        .send()
        .await
        .expect("signed in");
    let session = signed.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("a session cookie");
    session.split(';').next().expect("name=value").to_owned()
}
