"""Terraform 1.0.3 (the venv's), unchanged, with `backend "remote"` against dev-server `--tls`:
its plans and applies run on a `hangar-agent` the test starts (HANGAR_AGENT names the binary,
built by tests/run) registered to the workspace's agent pool. `terraform plan` prints the plan's
log, `apply -auto-approve` applies on the agent and stores the state in the workspace, a second
plan finds no changes, a module from Hangar's own registry installs inside the run with the job
token, and `terraform output` reads the result."""

import io
import json
import os
import ssl
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from test_terraform_init import terraform


class Api:
    """Hangar's JSON:API with one token."""

    def __init__(self, hangar, token: str):
        self.url = hangar.url
        self.token = token
        self.context = ssl.create_default_context(cafile=hangar.certificate) if hangar.certificate else None

    def call(self, method: str, path: str, body=None, raw: bytes | None = None, content_type="application/vnd.api+json"):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(f"{self.url}{path}" if path.startswith("/") else path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, context=self.context) as response:
            payload = response.read()
            return json.loads(payload) if payload else None


def agent_mode_workspace(api: Api, org: str, name: str) -> tuple[str, str]:
    """A workspace of `org` running on a new agent pool: the workspace's id and a pool token."""
    pool = api.call("POST", f"/api/v2/organizations/{org}/agent-pools", {"data": {"type": "agent-pools", "attributes": {"name": f"{name}-pool"}}})
    pool_id = pool["data"]["id"]
    token = api.call("POST", f"/api/v2/agent-pools/{pool_id}/authentication-tokens", {"data": {"type": "authentication-tokens", "attributes": {"description": "test"}}})
    workspace = api.call(
        "POST",
        f"/api/v2/organizations/{org}/workspaces",
        {
            "data": {
                "type": "workspaces",
                "attributes": {"name": name, "execution-mode": "agent"},
                "relationships": {"agent-pool": {"data": {"type": "agent-pools", "id": pool_id}}},
            }
        },
    )
    return workspace["data"]["id"], token["data"]["attributes"]["token"]


def start_agent(hangar, token: str, *flags: str, terraform_binary: str | None = None) -> subprocess.Popen:
    binary = os.environ.get("HANGAR_AGENT")
    if not binary:
        pytest.fail("HANGAR_AGENT must name the hangar-agent binary (tests/run sets it)")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HANGAR_ADDRESS": hangar.url,
        "HANGAR_AGENT_TOKEN": token,
        "HANGAR_AGENT_NAME": "test-agent",
        "HANGAR_TERRAFORM": terraform_binary or terraform(),
        "SSL_CERT_FILE": hangar.certificate or "",
        "RUST_LOG": "info",
    }
    return subprocess.Popen([binary, *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def module_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        body = b'variable "name" {\n  type = string\n}\noutput "greeting" {\n  value = "hello, ${var.name}"\n}\n'
        info = tarfile.TarInfo("main.tf")
        info.size = len(body)
        archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def publish_module(api: Api, org: str) -> None:
    api.call("POST", f"/api/v2/organizations/{org}/registry-modules", {"data": {"type": "registry-modules", "attributes": {"name": "greeter", "provider": "null", "registry-name": "private"}}})
    version = api.call(
        "POST",
        f"/api/v2/organizations/{org}/registry-modules/private/{org}/greeter/null/versions",
        {"data": {"type": "registry-module-versions", "attributes": {"version": "1.0.0"}}},
    )
    upload = version["data"]["links"]["upload"]
    request = urllib.request.Request(upload, data=module_archive(), method="PUT")
    with urllib.request.urlopen(request, context=api.context):
        pass
    deadline = time.time() + 60
    while time.time() < deadline:
        shown = api.call("GET", f"/api/v2/organizations/{org}/registry-modules/private/{org}/greeter/null")
        statuses = [v["status"] for v in shown["data"]["attributes"]["version-statuses"]]
        if "ok" in statuses:
            return
        time.sleep(0.5)
    raise AssertionError(f"the module version never settled: {statuses}")


def configuration(host: str, org: str, workspace: str, greeting: str) -> str:
    return f"""
terraform {{
  backend "remote" {{
    hostname     = "{host}"
    organization = "{org}"
    workspaces {{
      name = "{workspace}"
    }}
  }}
}}

module "greeter" {{
  source = "{host}/{org}/greeter/null"
  version = "1.0.0"
  name = "{greeting}"
}}

output "greeting" {{
  value = module.greeter.greeting
}}
"""


class Cli:
    def __init__(self, hangar, work: Path, token: str):
        self.work = work
        work.mkdir()
        host = urlparse(hangar.url).netloc
        cli_config = work / "terraformrc"
        cli_config.write_text(f'credentials "{host}" {{\n  token = "{token}"\n}}\n')
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work),
            "TF_CLI_CONFIG_FILE": str(cli_config),
            "SSL_CERT_FILE": hangar.certificate,
            "CHECKPOINT_DISABLE": "1",
        }

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([terraform(), *args], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=300)

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"terraform {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout


def plan_apply_cycle(hangar, api: Api, work: Path, workspace: str, workspace_id: str) -> None:
    """`plan`, `apply -auto-approve`, `output`, `plan` again: each on Hangar's side."""
    host = urlparse(hangar.url).netloc
    cli = Cli(hangar, work, hangar.admin_token)
    (cli.work / "main.tf").write_text(configuration(host, "acme", workspace, "world"))
    cli.ok("init", "-input=false", "-no-color")

    planned = cli.ok("plan", "-input=false", "-no-color")
    assert "Running plan in the remote backend" in planned, planned
    # The plan's log, as Terraform printed it on the agent, module installed with the job token.
    assert "Downloading " in planned and "greeter" in planned, planned
    assert "hello, world" in planned, planned

    applied = cli.ok("apply", "-auto-approve", "-input=false", "-no-color")
    assert "Apply complete!" in applied, applied
    assert cli.ok("output", "-raw", "greeting") == "hello, world"

    again = cli.ok("plan", "-input=false", "-no-color")
    assert "No changes." in again, again

    runs = api.call("GET", f"/api/v2/workspaces/{workspace_id}/runs")["data"]
    statuses = [run["attributes"]["status"] for run in runs]
    assert statuses.count("applied") == 1 and statuses.count("planned_and_finished") == 2, statuses
    shown = api.call("GET", f"/api/v2/organizations/acme/workspaces/{workspace}")["data"]
    assert shown["attributes"]["locked"] is False
    assert shown["relationships"]["current-state-version"]["data"] is not None


def create_organization(api: Api) -> None:
    api.call("POST", "/api/v2/organizations", {"data": {"type": "organizations", "attributes": {"name": "acme", "email": "ops@acme.example"}}})


def test_plan_and_apply_run_on_a_hangar_agent(hangar_tls, tmp_path: Path):
    api = Api(hangar_tls, hangar_tls.admin_token)
    create_organization(api)
    workspace_id, pool_token = agent_mode_workspace(api, "acme", "app")
    publish_module(api, "acme")
    agent = start_agent(hangar_tls, pool_token)
    try:
        plan_apply_cycle(hangar_tls, api, tmp_path / "app", "app", workspace_id)

        # Someone holds the workspace's lock: the apply's run waits `pending` (the CLI reads the
        # workspace's runs and the organization's queue meanwhile) and goes on once it is unlocked.
        host = urlparse(hangar_tls.url).netloc
        cli = Cli(hangar_tls, tmp_path / "waiting", hangar_tls.admin_token)
        (cli.work / "main.tf").write_text(configuration(host, "acme", "app", "again"))
        cli.ok("init", "-input=false", "-no-color")
        api.call("POST", f"/api/v2/workspaces/{workspace_id}/actions/lock", {"reason": "maintenance"})
        waiting = subprocess.Popen(
            [terraform(), "apply", "-auto-approve", "-input=false", "-no-color"],
            cwd=cli.work, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        time.sleep(4)
        assert waiting.poll() is None, waiting.communicate()[0]
        runs = api.call("GET", f"/api/v2/workspaces/{workspace_id}/runs")["data"]
        assert runs[0]["attributes"]["status"] == "pending", runs[0]["attributes"]
        api.call("POST", f"/api/v2/workspaces/{workspace_id}/actions/unlock", {})
        output, _ = waiting.communicate(timeout=180)
        assert waiting.returncode == 0, output
        assert "Apply complete!" in output, output
        assert cli.ok("output", "-raw", "greeting") == "hello, again"
    finally:
        agent.terminate()
        try:
            agent.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            agent.kill()


@pytest.fixture
def hangar_runner():
    """dev-server `--tls` whose built-in runner runs the venv's Terraform."""
    from conftest import _serve

    yield from _serve("--tls", env={"HANGAR_TERRAFORM": terraform()})


def test_a_remote_workspace_runs_on_dev_servers_runner(hangar_runner, tmp_path: Path):
    api = Api(hangar_runner, hangar_runner.admin_token)
    create_organization(api)
    workspace = api.call(
        "POST",
        "/api/v2/organizations/acme/workspaces",
        {"data": {"type": "workspaces", "attributes": {"name": "web", "execution-mode": "remote"}}},
    )
    publish_module(api, "acme")
    plan_apply_cycle(hangar_runner, api, tmp_path / "web", "web", workspace["data"]["id"])
