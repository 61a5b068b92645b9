"""Workspaces, team access, variables and state versions through terrasnek, unchanged: the
payloads its docs give, the filters it builds, and what it reads back."""

import base64
import hashlib
import json

import pytest
from terrasnek.api import TFC
from terrasnek.exceptions import TFCHTTPConflict, TFCHTTPNotFound


def _client(hangar, token):
    api = TFC(token, url=hangar.url, verify=hangar.certificate or True, skip_version_check=True)
    api.set_org("acme")
    return api


def _state(serial, value):
    return json.dumps({"version": 4, "terraform_version": "1.0.3", "serial": serial, "lineage": "lin",
                       "outputs": {"endpoint": {"value": value, "type": "string"},
                                   "password": {"value": "s3cret", "type": "string", "sensitive": True}},
                       "resources": []}).encode()


def _payload(state, serial):
    return {"data": {"type": "state-versions", "attributes": {
        "serial": serial, "md5": hashlib.md5(state).hexdigest(), "lineage": "lin",
        "state": base64.b64encode(state).decode()}}}


def test_terrasnek_keeps_state_variables_and_team_access(hangar):
    admin = TFC(hangar.admin_token, url=hangar.url, verify=hangar.certificate or True, skip_version_check=True)
    admin.orgs.create({"data": {"type": "organizations", "attributes": {"name": "acme", "email": "ops@acme.example"}}})
    api = _client(hangar, hangar.admin_token)
    assert api.orgs.entitlements("acme")["data"]["attributes"]["state-storage"] is True

    ws = api.workspaces.create({"data": {"type": "workspaces", "attributes": {"name": "network"}}})["data"]
    assert api.workspaces.show(workspace_name="network")["data"]["id"] == ws["id"]

    api.workspace_vars.create(ws["id"], {"data": {"type": "vars", "attributes": {
        "key": "region", "value": "eu-west-1", "category": "terraform", "hcl": False, "sensitive": False}}})
    api.workspace_vars.create(ws["id"], {"data": {"type": "vars", "attributes": {
        "key": "TOKEN", "value": "s3cret", "category": "env", "hcl": False, "sensitive": True}}})
    listed = {v["attributes"]["key"]: v["attributes"]["value"] for v in api.workspace_vars.list(ws["id"])["data"]}
    assert listed == {"region": "eu-west-1", "TOKEN": None}

    api.workspaces.lock(ws["id"], {"reason": "terrasnek writes state"})
    with pytest.raises(TFCHTTPConflict):
        api.workspaces.lock(ws["id"], {"reason": "again"})
    first = api.state_versions.create(ws["id"], _payload(_state(1, "a.example"), 1))["data"]
    second = api.state_versions.create(ws["id"], _payload(_state(2, "b.example"), 2))["data"]
    with pytest.raises(TFCHTTPConflict):
        api.state_versions.create(ws["id"], _payload(_state(2, "c.example"), 2))
    api.workspaces.unlock(ws["id"])

    assert api.state_versions.get_current(ws["id"])["data"]["id"] == second["id"]
    filters = [{"keys": ["workspace", "name"], "value": "network"},
               {"keys": ["organization", "name"], "value": "acme"}]
    assert [v["id"] for v in api.state_versions.list(filters)["data"]] == [second["id"], first["id"]]
    outputs = {o["attributes"]["name"]: o for o in api.state_versions.list_outputs(second["id"])["data"]}
    assert outputs["endpoint"]["attributes"]["value"] == "b.example"
    assert outputs["password"]["attributes"]["value"] is None, "sensitive values are hidden in lists"
    alone = api.state_version_outputs.show(outputs["password"]["id"])["data"]
    assert alone["attributes"]["value"] == "s3cret", "and shown when read alone, as tfe_outputs reads them"
    current = api.state_version_outputs.show_current_for_workspace(ws["id"])["data"]
    assert {o["attributes"]["name"] for o in current} == {"endpoint", "password"}

    # A team given read-outputs reads the current outputs, not the state or its history.
    team = api.teams.create({"data": {"type": "teams", "attributes": {"name": "consumers"}}})["data"]
    token = api.team_tokens.create(team["id"])["data"]["attributes"]["token"]
    access = api.team_access.add_team_access({"data": {
        "attributes": {"access": "custom", "state-versions": "read-outputs"},
        "relationships": {"team": {"data": {"type": "teams", "id": team["id"]}},
                          "workspace": {"data": {"type": "workspaces", "id": ws["id"]}}},
        "type": "team-workspaces"}})["data"]
    assert access["attributes"]["state-versions"] == "read-outputs"
    consumer = _client(hangar, token)
    shown = consumer.state_version_outputs.show_current_for_workspace(ws["id"])["data"]
    assert {o["attributes"]["name"] for o in shown} == {"endpoint", "password"}
    assert consumer.state_versions.get_current(ws["id"])["data"]["attributes"]["hosted-state-download-url"] is None
    with pytest.raises(TFCHTTPNotFound):
        consumer.state_versions.show(first["id"])
