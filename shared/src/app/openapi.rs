//! `GET /api/openapi.json`: the OpenAPI 3.1 document of every route Hangar serves, every
//! function's and dev-server's alike, without a token. The document is `shared/openapi.json`,
//! written by hand and embedded as it is; the tests below hold it to the routers, so that a
//! route cannot be served without its entry, nor an entry be left without its route.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Where every function serves the document.
pub const PATH: &str = "/api/openapi.json";

/// The document, as the repository keeps it.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

/// Answers with the document.
pub async fn serve() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT).into_response()
}

#[cfg(test)]
mod tests {
    //! axum lists no routes, but its `Router`'s `Debug` shows each route's path and `Allow`
    //! header, which is what is read here. Should an axum release change that form, the parse
    //! finds nothing and the tests fail loudly, never pass on an empty list.

    use std::collections::{BTreeMap, BTreeSet};

    use serde_json::Value;

    /// Path → methods, as the document or a router has them.
    type Table = BTreeMap<String, BTreeSet<String>>;

    /// Routes that answer every method and are no operation of their own.
    const CATCH_ALLS: &[(&str, &str)] = &[
        // The registry protocol's own 404 for unknown paths under /api/registry.
        ("/api/registry/{rest}", "the protocol's 404 for unknown paths"),
        // The broker's engine: its paths are the table in broker/engine.rs, checked below.
        ("/v1/{path}", "the secrets engine's path table"),
        // The auth methods' paths: the JWT method's table in broker/jwt, checked below.
        ("/v1/auth/{path}", "the auth methods' path table"),
    ];

    /// The methods a router's `Debug` gives each path (`{*rest}` written as `{rest}`, HEAD left
    /// out where GET implies it; `*` for a route that takes any method).
    fn routes_of<S>(router: &axum::Router<S>) -> Table {
        let debug = format!("{router:?}");
        // Only the path router: the fallback router repeats nested routers' fallbacks.
        let debug = debug.split(", fallback_router:").next().expect("a Router's Debug");
        let (endpoints, paths) = debug.split_once("node: Node { paths: ").expect("axum's Router Debug form");
        let mut ids = BTreeMap::new();
        for entry in paths.split("RouteId(").skip(1) {
            let (id, rest) = entry.split_once("): \"").expect("RouteId(n): \"path\"");
            let path = rest.split('"').next().expect("a quoted path");
            ids.insert(id.to_owned(), path.replace("{*", "{"));
        }
        let mut table = Table::new();
        for entry in endpoints.split("RouteId(").skip(1) {
            let (id, endpoint) = entry.split_once("): ").expect("RouteId(n): endpoint");
            let path = ids.get(id).unwrap_or_else(|| panic!("route {id} has no path")).clone();
            let allow = endpoint.split("allow_header: ").nth(1).unwrap_or("Skip");
            let methods: BTreeSet<String> = match allow.strip_prefix("Bytes(b\"") {
                Some(list) => list.split('"').next().unwrap_or("").split(',').map(str::to_owned).collect(),
                None => BTreeSet::from(["*".to_owned()]),
            };
            let methods =
                if methods.contains("GET") { methods.into_iter().filter(|m| m != "HEAD").collect() } else { methods };
            table.insert(path, methods);
        }
        assert!(!table.is_empty(), "no route read from axum's Debug form: {debug}");
        table
    }

    /// Every route of every function, the upload links included.
    fn served() -> Table {
        let mut table = routes_of(&super::super::families().route(super::PATH, axum::routing::get(super::serve)));
        let dir = tempfile::tempdir().expect("a temporary directory");
        let links = crate::links::LinkSigner::new(vec![7; 32]);
        let sealer = crate::seal::LocalSealer::open(&dir.path().join("seal.key")).expect("a sealer");
        let blobs = crate::blobs::LocalBlobs::new(dir.path(), links, sealer, String::new(), 1).expect("local blobs");
        table.extend(routes_of(&super::super::objects::object_routes(blobs)));
        assert!(table.len() >= 50, "too few routes read from axum's Debug form: {table:?}");
        table
    }

    fn document() -> Value {
        serde_json::from_str(super::DOCUMENT).expect("openapi.json is JSON")
    }

    /// The document's paths and their methods, upper-cased.
    fn documented(document: &Value) -> Table {
        const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options", "trace"];
        let paths = document["paths"].as_object().expect("openapi.json has paths");
        paths
            .iter()
            .map(|(path, item)| {
                let methods = METHODS.iter().filter(|m| item.get(**m).is_some()).map(|m| m.to_uppercase()).collect();
                (path.clone(), methods)
            })
            .collect()
    }

    /// The broker engine's rows as the document writes them, under `/v1/{mount}/`: a LIST is a
    /// GET with `?list=true`, a write either POST or PUT, as Vault takes them.
    fn engine_paths() -> Table {
        crate::broker::engine_paths()
            .map(|(pattern, methods)| {
                let methods = methods.iter().map(|m| if *m == "LIST" { "GET" } else { m }).map(str::to_owned);
                (format!("/v1/{{mount}}/{}", pattern.trim_end_matches('/')), methods.collect())
            })
            .collect()
    }

    /// What the document must list: every route, with the catch-alls replaced by the engine's
    /// rows.
    fn expected() -> Table {
        let mut table = served();
        for (path, why) in CATCH_ALLS {
            let methods = table.remove(*path).unwrap_or_else(|| panic!("no catch-all route {path} ({why})"));
            assert_eq!(methods, BTreeSet::from(["*".to_owned()]), "{path} takes any method");
        }
        table.extend(engine_paths());
        table.extend(crate::broker::auth_method_paths.iter().map(|(pattern, methods)| {
            let methods = methods.iter().map(|m| if *m == "LIST" { "GET" } else { m }).map(|m| m.to_string());
            (format!("/v1/auth/{{path}}/{pattern}"), methods.collect())
        }));
        table
    }

    /// Each side's entries the other lacks, as readable lines.
    fn differences(expected: &Table, documented: &Table) -> Vec<String> {
        let mut lines = Vec::new();
        for (path, methods) in expected {
            for method in methods.difference(documented.get(path).unwrap_or(&BTreeSet::new())) {
                lines.push(format!("served but not in openapi.json: {method} {path}"));
            }
        }
        for (path, methods) in documented {
            for method in methods.difference(expected.get(path).unwrap_or(&BTreeSet::new())) {
                lines.push(format!("in openapi.json but not served: {method} {path}"));
            }
        }
        lines
    }

    #[test]
    fn every_route_has_its_entry_and_every_entry_its_route() {
        let lines = differences(&expected(), &documented(&document()));
        assert!(lines.is_empty(), "shared/openapi.json and the routers differ:\n{}", lines.join("\n"));
    }

    #[test]
    fn a_missing_entry_or_an_extra_one_is_reported() {
        let expected = expected();
        let mut documented = expected.clone();
        documented.get_mut("/api/v2/ping").expect("ping is documented").remove("GET");
        documented.insert("/api/v2/nowhere".into(), BTreeSet::from(["GET".to_owned()]));
        assert_eq!(
            differences(&expected, &documented),
            ["served but not in openapi.json: GET /api/v2/ping", "in openapi.json but not served: GET /api/v2/nowhere"]
        );
    }

    /// A LIST is documented as `GET` with a `list` query parameter, required where the path
    /// answers nothing else.
    #[test]
    fn engine_lists_are_documented_as_get_with_list() {
        let document = document();
        for (pattern, methods) in crate::broker::engine_paths() {
            if !methods.contains(&"LIST") {
                continue;
            }
            let path = format!("/v1/{{mount}}/{}", pattern.trim_end_matches('/'));
            let get = &document["paths"][&path]["get"];
            let parameters = get["parameters"].as_array().map(Vec::as_slice).unwrap_or_default();
            let list = parameters
                .iter()
                .map(|p| resolve(&document, p))
                .find(|p| p["name"] == "list" && p["in"] == "query")
                .unwrap_or_else(|| panic!("GET {path} documents no `list` query parameter"));
            let required = list["required"].as_bool().unwrap_or(false);
            assert_eq!(
                required,
                !methods.contains(&"GET"),
                "`list` of GET {path} is required exactly when only LIST is served"
            );
        }
    }

    /// A parameter given as a `$ref` into `components`.
    fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
        match value["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => document.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref {pointer}")),
            None => value,
        }
    }

    #[test]
    fn the_document_is_openapi_3_1_with_every_ref_resolving() {
        let document = document();
        assert!(document["openapi"].as_str().is_some_and(|v| v.starts_with("3.1.")), "openapi: 3.1.x");
        fn walk(document: &Value, value: &Value) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("external $ref {r}"));
                        assert!(document.pointer(pointer).is_some(), "dangling $ref {r}");
                    }
                    map.values().for_each(|v| walk(document, v));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(document, v)),
                _ => {}
            }
        }
        walk(&document, &document);
    }
}
