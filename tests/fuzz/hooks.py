"""schemathesis hooks for tests/fuzz/run (loaded through schemathesis.toml's `hooks`).

Two jobs, both before each request is sent:

- Keep every call Hangar makes on this machine: a VCS connection's URLs point at the run's stub
  (whatever the fuzzer generated for them, or left out and defaulted to the public providers),
  and a broker mount's IAM and STS endpoints at moto.
- Keep the run's own fixtures alive: a request that would delete or rename the `fuzz`
  organization, revoke the broker's root token, replace the owners team's token, or delete the
  agent pool or token the agent gateway's cases use is sent to a throwaway of its own instead, so
  every later case still reaches what it tests.

Which token a case carries: the site-admin token on `/api/v2` (schemathesis.toml), the owners
team's token on `/api/registry`, where the public proxy answers only for an organization's
curated modules (a site admin belongs to none).
"""

import json
import os
import urllib.request
import uuid

import schemathesis

URL = os.environ["HANGAR_FUZZ_URL"]
ADMIN = os.environ["HANGAR_FUZZ_ADMIN_TOKEN"]
ROOT = os.environ["HANGAR_FUZZ_ROOT_TOKEN"]
ROOT_ACCESSOR = os.environ["HANGAR_FUZZ_ROOT_ACCESSOR"]
OWNERS_TOKEN = os.environ["HANGAR_FUZZ_OWNERS_TOKEN"]
STUB = os.environ["HANGAR_FUZZ_STUB_URL"]
MOTO = os.environ["HANGAR_FUZZ_MOTO_URL"]
# Path parameters that name a fixture, by operation path, and what a destructive case gets
# instead.
PROTECTED = {
    "/api/v2/teams/{id}/authentication-token": ("id", os.environ["HANGAR_FUZZ_OWNERS_TEAM"]),
    "/api/v2/agent-pools/{id}": ("id", os.environ["HANGAR_FUZZ_POOL"]),
    "/api/v2/authentication-tokens/{id}": ("id", os.environ["HANGAR_FUZZ_AGENT_TOKEN_ID"]),
    "/v1/sys/mounts/{path}": ("path", "aws"),
}
DESTRUCTIVE = {"DELETE", "POST", "PUT", "PATCH"}


def _call(path, method="POST", body=None, vault=False):
    request = urllib.request.Request(f"{URL}{path}", data=json.dumps(body).encode() if body is not None else None, method=method)
    if vault:
        request.add_header("X-Vault-Token", ROOT)
    else:
        request.add_header("Authorization", f"Bearer {ADMIN}")
        request.add_header("Content-Type", "application/vnd.api+json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def _throwaway_organization():
    name = f"fuzz-{uuid.uuid4().hex[:12]}"
    _call("/api/v2/organizations", body={"data": {"type": "organizations", "attributes": {"name": name, "email": "x@hangar.example"}}})
    return name


def _throwaway_vault_token():
    return _call("/v1/auth/token/create", body={"policies": ["default"]}, vault=True)["auth"]


def _attributes(body):
    data = body.get("data") if isinstance(body, dict) else None
    attributes = data.get("attributes") if isinstance(data, dict) else None
    return attributes if isinstance(attributes, dict) else None


def _header(case, name):
    return next((key for key in (case.headers or {}) if key.lower() == name.lower()), None)


@schemathesis.hook
def before_call(context, case, kwargs):
    path, method = case.operation.path, case.method.upper()
    params = case.path_parameters if case.path_parameters is not None else {}

    # Outbound calls stay on this machine.
    if path == "/api/v2/organizations/{org}/oauth-clients" and method == "POST":
        attributes = _attributes(case.body)
        if attributes is not None:
            attributes["http-url"] = STUB
            attributes["api-url"] = STUB
    if path == "/v1/{mount}/config/root" and method in ("POST", "PUT") and isinstance(case.body, dict):
        case.body["iam_endpoint"] = MOTO
        case.body["sts_endpoint"] = MOTO

    # The fixtures stay alive.
    if path == "/api/v2/organizations/{org}" and method in ("DELETE", "PATCH") and params.get("org") == "fuzz":
        params["org"] = _throwaway_organization()
    if path in PROTECTED and method in DESTRUCTIVE:
        name, value = PROTECTED[path]
        if params.get(name) == value:
            params[name] = f"{value}-protected"
    if path in ("/v1/auth/token/revoke-self",) and _header(case, "X-Vault-Token"):
        case.headers[_header(case, "X-Vault-Token")] = _throwaway_vault_token()["client_token"]
    if path in ("/v1/auth/token/revoke", "/v1/auth/token/revoke-accessor") and isinstance(case.body, dict):
        for key, value in list(case.body.items()):
            if value in (ROOT, ROOT_ACCESSOR):
                child = _throwaway_vault_token()
                case.body[key] = child["client_token"] if value == ROOT else child["accessor"]

    # The token for the path.
    authorization = _header(case, "Authorization")
    if path.startswith("/api/registry/") and authorization and case.headers[authorization] == f"Bearer {ADMIN}":
        case.headers[authorization] = f"Bearer {OWNERS_TOKEN}"
