//! The AWS secrets engine's paths under a mount (`/v1/<mount>/…`), in one table as Vault's
//! `builtin/logical/aws/backend.go` lists them. A mount path may hold slashes, so one catch-all
//! route finds the mount and the path's row here, resolves a write to a stored object into a
//! create or an update, and checks the caller's policy for that operation's capability on the
//! path (the clean one `http::refuse_unclean_paths` gave, the one served): then a path no row
//! matches is a 404, an operation its row does not take a 405.

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody, VaultPath};
use super::mounts;
use super::paths::{config_lease, config_root, creds, roles, static_roles};
use super::policies;
use super::request::EngineRequest;
use super::request::Operation::{self, Create, Delete, List, Read, Update};
use crate::state::AppState;

type Handler = for<'r> fn(&'r EngineRequest<'r>) -> BoxFuture<'r, Result<Response>>;

/// Whether the object a path names is stored (Vault's `ExistenceCheck`).
type Exists = for<'r> fn(&'r EngineRequest<'r>) -> BoxFuture<'r, Result<bool>>;

/// A function of `paths/` as a table entry: `boxed!(roles::read => Response)`.
macro_rules! boxed {
    ($function:path => $output:ty) => {{
        fn boxed<'r>(request: &'r EngineRequest<'r>) -> BoxFuture<'r, Result<$output>> {
            Box::pin($function(request))
        }
        boxed as for<'r> fn(&'r EngineRequest<'r>) -> BoxFuture<'r, Result<$output>>
    }};
}

/// A handler of `paths/`.
macro_rules! handler {
    ($handler:path) => {
        boxed!($handler => Response)
    };
}

/// The existence check of a path naming a stored object.
macro_rules! exists {
    ($check:path) => {
        Some(boxed!($check => bool))
    };
}

/// A row: a path pattern within the mount, whether it names a stored object, and the operations
/// it takes with their handlers. `{name}` stands for one segment; a trailing `/` marks a
/// directory, the path a LIST names (clients send it with or without the slash).
struct Row {
    pattern: &'static str,
    /// How to tell whether the object the path names is stored, for a path naming one: a write
    /// to it is then a `Create` or an `Update` ([`Operation::write`]), and the row takes both.
    /// `None` for an action or a directory, whose writes are updates.
    exists: Option<Exists>,
    operations: &'static [(Operation, Handler)],
}

impl Row {
    fn handler(&self, operation: Operation) -> Option<Handler> {
        self.operations.iter().find(|(op, _)| *op == operation).map(|(_, handler)| *handler)
    }
}

/// Every path the engine serves. Only directories list: a `LIST` (or `GET ?list=true`) of a path
/// naming one object is a 405, as Vault serves none there, so that a policy's `list` on
/// `<path>/` never reads the object a deny on `<path>` keeps.
const PATHS: &[Row] = &[
    Row {
        pattern: "config/root",
        exists: exists!(config_root::exists),
        operations: &[
            (Read, handler!(config_root::read)),
            (Create, handler!(config_root::write)),
            (Update, handler!(config_root::write)),
        ],
    },
    Row { pattern: "config/rotate-root", exists: None, operations: &[(Update, handler!(config_root::rotate))] },
    Row {
        pattern: "config/lease",
        exists: exists!(config_lease::exists),
        operations: &[
            (Read, handler!(config_lease::read)),
            (Create, handler!(config_lease::write)),
            (Update, handler!(config_lease::write)),
        ],
    },
    Row { pattern: "roles/", exists: None, operations: &[(List, handler!(roles::list))] },
    Row {
        pattern: "roles/{name}",
        exists: exists!(roles::exists),
        operations: &[
            (Read, handler!(roles::read)),
            (Create, handler!(roles::write)),
            (Update, handler!(roles::write)),
            (Delete, handler!(roles::delete)),
        ],
    },
    Row {
        pattern: "creds/{name}",
        exists: None,
        operations: &[(Read, handler!(creds::creds)), (Update, handler!(creds::creds))],
    },
    Row {
        pattern: "sts/{name}",
        exists: None,
        operations: &[(Read, handler!(creds::sts)), (Update, handler!(creds::sts))],
    },
    Row { pattern: "static-roles/", exists: None, operations: &[(List, handler!(static_roles::list))] },
    Row {
        pattern: "static-roles/{name}",
        exists: exists!(static_roles::exists),
        operations: &[
            (Read, handler!(static_roles::read)),
            (Create, handler!(static_roles::write)),
            (Update, handler!(static_roles::write)),
            (Delete, handler!(static_roles::delete)),
        ],
    },
    Row { pattern: "static-creds/{name}", exists: None, operations: &[(Read, handler!(static_roles::creds))] },
];

/// The row serving `path` (within the mount, without slashes at either end), and the segment
/// its `{name}` stands for ("" when it has none).
fn find(path: &str) -> Option<(&'static Row, &str)> {
    PATHS.iter().find_map(|row| {
        let mut name = "";
        let mut segments = path.split('/');
        for part in row.pattern.trim_end_matches('/').split('/') {
            let segment = segments.next()?;
            match part {
                "{name}" => name = segment,
                literal if literal != segment => return None,
                _ => {}
            }
        }
        segments.next().is_none().then_some((row, name))
    })
}

/// The operation of a method, as Vault maps them; `None` for a method it has none for. A write
/// is an update until its row says otherwise.
fn operation(method: &Method, list: bool) -> Option<Operation> {
    match *method {
        Method::GET if list => Some(Operation::List),
        Method::GET => Some(Operation::Read),
        Method::POST | Method::PUT => Some(Operation::Update),
        Method::DELETE => Some(Operation::Delete),
        _ => None,
    }
}

/// The HTTP methods that reach a row's operations, as `operation` maps them: `LIST` for a list
/// (which is also `GET ?list=true`), POST and PUT for a write.
fn methods(row: &Row) -> Vec<&'static str> {
    let mut methods: Vec<&'static str> = Vec::new();
    for (op, _) in row.operations {
        let of_op: &[&'static str] = match op {
            Read => &["GET"],
            List => &["LIST"],
            Create | Update => &["POST", "PUT"],
            Delete => &["DELETE"],
        };
        for method in of_op {
            if !methods.contains(method) {
                methods.push(method);
            }
        }
    }
    methods
}

/// Every path the engine serves under a mount, with its methods: what the OpenAPI document lists.
pub fn served_paths() -> impl Iterator<Item = (&'static str, Vec<&'static str>)> {
    PATHS.iter().map(|row| (row.pattern, methods(row)))
}

/// Vault's 405, with the `Allow` header RFC 9110 asks of one: the row's methods, a LIST as the
/// GET it is also served as.
fn method_not_allowed(row: &Row) -> Response {
    let mut allowed = methods(row);
    if allowed.contains(&"LIST") {
        allowed.retain(|m| *m != "LIST" && *m != "GET");
        allowed.insert(0, "GET");
    }
    let mut response = BrokerError::MethodNotAllowed.into_response();
    if let Ok(allow) = HeaderValue::from_str(&allowed.join(",")) {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// The operation a request performs on its row: a write to a stored object is a create or an
/// update by the object's existence; anything else is what its method says. Any method without
/// an operation is taken as an update, which the table then answers 405.
async fn resolve(request: &EngineRequest<'_>, row: Option<&Row>, asked: Option<Operation>) -> Result<Operation> {
    match (asked, row.and_then(|row| row.exists)) {
        (Some(Update), Some(exists)) => Ok(Operation::write(exists(request).await?)),
        (asked, _) => Ok(asked.unwrap_or(Update)),
    }
}

pub(super) async fn dispatch(
    State(state): State<AppState>,
    caller: Caller,
    method: Method,
    VaultPath(path): VaultPath,
    RawQuery(query): RawQuery,
    VaultBody(body): VaultBody,
) -> Result<Response> {
    let (mount, rest) = mounts::route(state.store.as_ref(), &path).await?.ok_or_else(|| {
        BrokerError::NotFoundWithReason(format!("no handler for route \"{path}\": no secrets engine is mounted there"))
    })?;
    let asked = operation(&method, is_list(query.as_deref()));
    // The row is found first, as the capability depends on it; but only a caller allowed on the
    // path learns whether it is served.
    let found = find(rest);
    let name = found.map_or("", |(_, name)| name);
    let mut request = EngineRequest { state: &state, caller, mount, operation: Update, name, query, body };
    request.operation = resolve(&request, found.map(|(row, _)| row), asked).await?;
    // Vault checks a LIST against the path with a trailing slash, so `aws/roles/*` covers it.
    let checked = if asked == Some(List) { format!("{path}/") } else { path.clone() };
    if !policies::allowed(state.store.as_ref(), &request.caller.0, &checked, request.operation.capability()).await? {
        return Err(BrokerError::PermissionDenied);
    }
    let (row, _) = found.ok_or_else(|| {
        BrokerError::NotFoundWithReason(format!("no handler for route \"{}/{rest}\"", request.mount.path))
    })?;
    match asked.and_then(|_| row.handler(request.operation)) {
        Some(handler) => handler(&request).await,
        None => Ok(method_not_allowed(row)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which operations `path` takes, or `None` when no row serves it.
    fn served(path: &str) -> Option<Vec<Operation>> {
        find(path).map(|(row, _)| row.operations.iter().map(|(op, _)| *op).collect())
    }

    #[test]
    fn the_table_serves_the_engines_paths_with_their_operations() {
        let config = Some(vec![Read, Create, Update]);
        assert_eq!(served("config/root"), config);
        assert_eq!(served("config/lease"), config);
        assert_eq!(served("config/rotate-root"), Some(vec![Update]));
        assert_eq!(served("roles"), Some(vec![List]));
        assert_eq!(served("roles/deploy"), Some(vec![Read, Create, Update, Delete]));
        assert_eq!(served("creds/deploy"), Some(vec![Read, Update]));
        assert_eq!(served("sts/deploy"), Some(vec![Read, Update]));
        assert_eq!(served("static-roles"), Some(vec![List]));
        assert_eq!(served("static-roles/app"), Some(vec![Read, Create, Update, Delete]));
        assert_eq!(served("static-creds/app"), Some(vec![Read]));
    }

    /// A row naming a stored object takes a write as a create or an update, so it serves both;
    /// an action's write is always an update, so no other row serves a create.
    #[test]
    fn rows_naming_stored_objects_and_only_they_take_creates() {
        for row in PATHS {
            let takes = |operation| row.handler(operation).is_some();
            match row.exists {
                Some(_) => assert!(takes(Create) && takes(Update), "{}", row.pattern),
                None => assert!(!takes(Create), "{}", row.pattern),
            }
        }
        let objects: Vec<&str> = PATHS.iter().filter(|row| row.exists.is_some()).map(|row| row.pattern).collect();
        assert_eq!(objects, ["config/root", "config/lease", "roles/{name}", "static-roles/{name}"]);
    }

    /// A LIST is checked on `<path>/`: a row naming one object that listed would read it past
    /// a deny on `<path>`.
    #[test]
    fn only_directories_list() {
        for row in PATHS {
            assert_eq!(row.handler(List).is_some(), row.pattern.ends_with('/'), "{}", row.pattern);
        }
    }

    #[test]
    fn paths_no_row_matches_are_not_served() {
        for path in ["", "config", "config/other", "creds", "sts", "static-creds", "roles/a/b", "creds/a/b"] {
            assert_eq!(served(path), None, "{path}");
        }
    }

    #[test]
    fn the_name_is_the_segment_in_its_place() {
        assert_eq!(find("roles/deploy").map(|(_, name)| name), Some("deploy"));
        assert_eq!(find("static-creds/app").map(|(_, name)| name), Some("app"));
        assert_eq!(find("config/root").map(|(_, name)| name), Some(""));
    }
}
