"""Agent pools, agent tokens and agents through pytfe, unchanged: the calls an operator makes.
The agent's own side (register, report) has no pytfe call, so it goes over plain HTTP."""

import json
import urllib.error
import urllib.request

import pytest
from pytfe import TFEClient, TFEConfig
from pytfe.errors import NotFound, TFEError
from pytfe.models import (
    AgentPoolAssignToWorkspacesOptions,
    AgentPoolCreateOptions,
    AgentPoolListOptions,
    AgentPoolUpdateOptions,
    AgentStatus,
    AgentTokenCreateOptions,
    OrganizationCreateOptions,
)


def call(hangar, method: str, path: str, token: str, body: dict) -> tuple[int, dict]:
    """One JSON request to dev-server; returns (status, parsed body)."""
    request = urllib.request.Request(
        hangar.url + path,
        method=method,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def client_with_acme(hangar) -> TFEClient:
    client = TFEClient(TFEConfig(address=hangar.url, token=hangar.admin_token))
    client.organizations.create(OrganizationCreateOptions(name="acme", email="ops@acme.example"))
    return client


def test_an_operator_manages_a_pool_and_its_tokens_through_pytfe(hangar):
    client = client_with_acme(hangar)

    created = client.agent_pools.create("acme", AgentPoolCreateOptions(name="builders"))
    assert created.id.startswith("apool-")
    assert created.name == "builders"
    assert created.organization_scoped is True
    assert created.agent_count == 0
    assert created.created_at is not None

    read = client.agent_pools.read(created.id)
    assert (read.id, read.name, read.created_at) == (created.id, "builders", created.created_at)
    assert [p.id for p in client.agent_pools.list("acme")] == [created.id]
    searched = client.agent_pools.list("acme", AgentPoolListOptions(query="build", sort="-name"))
    assert [p.name for p in searched] == ["builders"]
    assert list(client.agent_pools.list("acme", AgentPoolListOptions(query="nothing"))) == []

    updated = client.agent_pools.update(created.id, AgentPoolUpdateOptions(name="builders-east"))
    assert updated.id == created.id
    assert updated.name == "builders-east"
    assert updated.organization_scoped is True, "an omitted attribute keeps its value"
    assert client.agent_pools.read(created.id).name == "builders-east"

    token = client.agent_tokens.create(created.id, AgentTokenCreateOptions(description="ci runner"))
    assert token.id.startswith("at-")
    assert token.token, "the secret is shown on creation"
    assert token.description == "ci runner"
    assert token.last_used_at is None
    tokens = list(client.agent_tokens.list(created.id))
    assert [(t.id, t.description) for t in tokens] == [(token.id, "ci runner")]
    read_token = client.agent_tokens.read(token.id)
    assert (read_token.id, read_token.description) == (token.id, "ci runner")
    assert read_token.created_at == token.created_at

    client.agent_tokens.delete(token.id)
    assert list(client.agent_tokens.list(created.id)) == []
    with pytest.raises((NotFound, TFEError)):
        client.agent_tokens.read(token.id)
    assert list(client.agents.list(created.id)) == []

    client.agent_pools.delete(created.id)
    with pytest.raises((NotFound, TFEError)):
        client.agent_pools.read(created.id)
    assert list(client.agent_pools.list("acme")) == []


def test_pytfe_sees_an_agent_that_registered_through_the_gateway(hangar):
    client = client_with_acme(hangar)
    pool = client.agent_pools.create("acme", AgentPoolCreateOptions(name="builders"))
    secret = client.agent_tokens.create(pool.id, AgentTokenCreateOptions(description="runner")).token

    status, registered = call(hangar, "POST", "/api/agent/register", secret, {"name": "runner-1"})
    assert status == 201, registered
    agent_id = registered["data"]["id"]

    agents = list(client.agents.list(pool.id))
    assert [(a.id, a.name, a.status, a.ip_address) for a in agents] == [
        (agent_id, "runner-1", AgentStatus.IDLE, "127.0.0.1")
    ]
    agent = client.agents.read(agent_id)
    assert agent.status == AgentStatus.IDLE
    assert agent.last_ping_at is not None
    assert client.agent_pools.read(pool.id).agent_count == 1
    token_id = next(t.id for t in client.agent_tokens.list(pool.id))
    assert client.agent_tokens.read(token_id).last_used_at is not None

    with pytest.raises(TFEError) as refused:
        client.agents.delete(agent_id)
    assert refused.value.status == 412

    status, reported = call(hangar, "PUT", f"/api/agent/agents/{agent_id}/status", secret, {"status": "exited"})
    assert status == 200, reported
    client.agents.delete(agent_id)
    assert list(client.agents.list(pool.id)) == []


def test_pytfe_limits_a_pool_to_the_workspaces_it_names(hangar):
    client = client_with_acme(hangar)
    status, workspace = call(
        hangar,
        "POST",
        "/api/v2/organizations/acme/workspaces",
        hangar.admin_token,
        {"data": {"type": "workspaces", "attributes": {"name": "web"}}},
    )
    assert status == 201, workspace
    web = workspace["data"]["id"]

    pool = client.agent_pools.create("acme", AgentPoolCreateOptions(name="private", organization_scoped=False))
    assert pool.organization_scoped is False
    options = AgentPoolAssignToWorkspacesOptions(workspace_ids=[web])
    assigned = client.agent_pools.assign_to_workspaces(pool.id, options)
    assert [w.id for w in assigned.allowed_workspaces] == [web]
    assert [w.id for w in client.agent_pools.read(pool.id).allowed_workspaces] == [web]
    for_web = client.agent_pools.list("acme", AgentPoolListOptions(allowed_workspace_name="web"))
    assert [p.id for p in for_web] == [pool.id]
