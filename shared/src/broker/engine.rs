//! The AWS secrets engine's paths under a mount (`/v1/<mount>/…`), in one table as Vault's
//! `builtin/logical/aws/backend.go` lists them. A mount path may hold slashes, so one catch-all
//! route finds the mount, checks the caller's policy for the operation's capability, then finds
//! the path's row here: a path no row matches is a 404, an operation its row does not take a 405.

use axum::extract::{Path, RawQuery, State};
use axum::http::Method;
use axum::response::Response;
use futures::future::BoxFuture;

use super::error::{BrokerError, Result};
use super::http::{is_list, Caller, VaultBody};
use super::mounts;
use super::paths::{config_lease, config_root, creds, roles, static_roles};
use super::policies;
use super::request::EngineRequest;
use super::request::Operation::{self, Delete, List, Read, Update};
use crate::state::AppState;

type Handler = for<'r> fn(&'r EngineRequest<'r>) -> BoxFuture<'r, Result<Response>>;

/// A handler of `paths/` as a table entry.
macro_rules! handler {
    ($handler:path) => {{
        fn boxed<'r>(request: &'r EngineRequest<'r>) -> BoxFuture<'r, Result<Response>> {
            Box::pin($handler(request))
        }
        boxed as Handler
    }};
}

/// A row: a path pattern within the mount, and the operations it takes with their handlers.
/// `{name}` stands for one segment; a trailing `/` marks a directory, the path a LIST names
/// (clients send it with or without the slash). Vault's rows also say whether a path names a
/// stored object (create and update then differ by its existence) or an action; a field for
/// that belongs here, next to the operations it would change.
struct Row {
    pattern: &'static str,
    operations: &'static [(Operation, Handler)],
}

impl Row {
    fn handler(&self, operation: Operation) -> Option<Handler> {
        self.operations.iter().find(|(op, _)| *op == operation).map(|(_, handler)| *handler)
    }
}

/// Every path the engine serves. `List` on a path naming one object reads it, as `GET
/// ?list=true` there always has.
const PATHS: &[Row] = &[
    Row {
        pattern: "config/root",
        operations: &[
            (Read, handler!(config_root::read)),
            (List, handler!(config_root::read)),
            (Update, handler!(config_root::write)),
        ],
    },
    Row { pattern: "config/rotate-root", operations: &[(Update, handler!(config_root::rotate))] },
    Row {
        pattern: "config/lease",
        operations: &[
            (Read, handler!(config_lease::read)),
            (List, handler!(config_lease::read)),
            (Update, handler!(config_lease::write)),
        ],
    },
    Row { pattern: "roles/", operations: &[(List, handler!(roles::list))] },
    Row {
        pattern: "roles/{name}",
        operations: &[
            (Read, handler!(roles::read)),
            (List, handler!(roles::read)),
            (Update, handler!(roles::write)),
            (Delete, handler!(roles::delete)),
        ],
    },
    Row { pattern: "creds/{name}", operations: &[(Read, handler!(creds::creds)), (Update, handler!(creds::creds))] },
    Row { pattern: "sts/{name}", operations: &[(Read, handler!(creds::sts)), (Update, handler!(creds::sts))] },
    Row { pattern: "static-roles/", operations: &[(List, handler!(static_roles::list))] },
    Row {
        pattern: "static-roles/{name}",
        operations: &[
            (Read, handler!(static_roles::read)),
            (Update, handler!(static_roles::write)),
            (Delete, handler!(static_roles::delete)),
        ],
    },
    Row { pattern: "static-creds/{name}", operations: &[(Read, handler!(static_roles::creds))] },
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

/// The operation of a method, as Vault maps them; `None` for a method it has none for.
fn operation(method: &Method, list: bool) -> Option<Operation> {
    match *method {
        Method::GET if list => Some(Operation::List),
        Method::GET => Some(Operation::Read),
        Method::POST | Method::PUT => Some(Operation::Update),
        Method::DELETE => Some(Operation::Delete),
        _ => None,
    }
}

pub(super) async fn dispatch(
    State(state): State<AppState>,
    caller: Caller,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    VaultBody(body): VaultBody,
) -> Result<Response> {
    let path = path.trim_matches('/').to_owned();
    let (mount, rest) = mounts::route(state.store.as_ref(), &path).await?.ok_or_else(|| {
        BrokerError::NotFoundWithReason(format!("no handler for route \"{path}\": no secrets engine is mounted there"))
    })?;
    let operation = operation(&method, is_list(query.as_deref()));
    // The row is found first, as the capability may come to depend on it; but only a caller
    // allowed on the path learns whether it is served.
    let found = find(rest);
    // Any other method needs `update`; the table then answers it 405.
    let needed = operation.map_or("update", Operation::capability);
    // Vault checks a LIST against the path with a trailing slash, so `aws/roles/*` covers it.
    let checked = if operation == Some(Operation::List) { format!("{path}/") } else { path.clone() };
    let allowed = policies::allowed(state.store.as_ref(), &caller.0, &checked, needed).await?
        || (needed == "update" && policies::allowed(state.store.as_ref(), &caller.0, &checked, "create").await?);
    if !allowed {
        return Err(BrokerError::PermissionDenied);
    }
    let (row, name) = found
        .ok_or_else(|| BrokerError::NotFoundWithReason(format!("no handler for route \"{}/{rest}\"", mount.path)))?;
    let served = operation.and_then(|op| Some((op, row.handler(op)?)));
    let (operation, handler) = served.ok_or(BrokerError::MethodNotAllowed)?;
    let request = EngineRequest { state: &state, caller, mount, operation, name, query, body };
    handler(&request).await
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
        let object = Some(vec![Read, List, Update]);
        assert_eq!(served("config/root"), object);
        assert_eq!(served("config/lease"), object);
        assert_eq!(served("config/rotate-root"), Some(vec![Update]));
        assert_eq!(served("roles"), Some(vec![List]));
        assert_eq!(served("roles/deploy"), Some(vec![Read, List, Update, Delete]));
        assert_eq!(served("creds/deploy"), Some(vec![Read, Update]));
        assert_eq!(served("sts/deploy"), Some(vec![Read, Update]));
        assert_eq!(served("static-roles"), Some(vec![List]));
        assert_eq!(served("static-roles/app"), Some(vec![Read, Update, Delete]));
        assert_eq!(served("static-creds/app"), Some(vec![Read]));
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
