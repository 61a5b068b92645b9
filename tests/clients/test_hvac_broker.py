"""hvac, the Python Vault client, against the credential broker of the dev-server binary: the
AWS secrets engine's root and lease configuration, roles, credentials through creds/ and sts/,
lease revocation (the IAM user is gone from the AWS emulator afterwards), and ACL policies and
tokens. The `broker` and `moto_endpoint` fixtures are conftest.py's."""

import json
import secrets

import hvac
import hvac.exceptions
import pytest

from iam_helpers import iam_client, user_exists

ACCOUNT = "123456789012"
POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
}


def test_hvac_configures_the_aws_engine_generates_credentials_and_revokes_them(broker, moto_endpoint):
    url, token = broker
    client = hvac.Client(url=url, token=token)
    assert client.is_authenticated()
    aws = client.secrets.aws
    iam = iam_client(moto_endpoint)
    run = secrets.token_hex(6)

    aws.configure_root_iam_credentials(
        "testing",
        "testing",
        region="us-east-1",
        iam_endpoint=moto_endpoint,
        sts_endpoint=moto_endpoint,
    )
    aws.configure_lease("1h", "2h")
    assert aws.read_lease_config()["data"] == {"lease": "1h0m0s", "lease_max": "2h0m0s"}

    aws.create_or_update_role("deploy", "iam_user", policy_document=POLICY, iam_tags=[f"run={run}"])
    aws.create_or_update_role("federated", "federation_token", policy_document=POLICY, max_sts_ttl="1h")
    role_arn = f"arn:aws:iam::{ACCOUNT}:role/hangar-hvac-{run}"
    aws.create_or_update_role("assume", "assumed_role", role_arns=[role_arn])
    assert sorted(aws.list_roles()["data"]["keys"]) == ["assume", "deploy", "federated"]
    deploy = aws.read_role("deploy")["data"]
    assert deploy["credential_types"] == ["iam_user"]
    assert json.loads(deploy["policy_document"]) == POLICY

    # iam_user through creds/: a new IAM user, leased and renewable.
    creds = aws.generate_credentials("deploy")
    assert creds["lease_id"].startswith("aws/creds/deploy/")
    assert creds["renewable"] is True
    assert creds["lease_duration"] == 3600
    access_key = creds["data"]["access_key"]
    assert creds["data"]["secret_key"]
    user = iam.get_access_key_last_used(AccessKeyId=access_key)["UserName"]
    tags = iam.list_user_tags(UserName=user)["Tags"]
    assert {"Key": "run", "Value": run} in tags
    assert iam.list_user_policies(UserName=user)["PolicyNames"], "the inline policy is attached"

    client.sys.revoke_lease(creds["lease_id"])
    assert not user_exists(iam, user), "revoking the lease deletes the IAM user"

    # federation_token through sts/, with a ttl.
    federated = aws.generate_credentials("federated", endpoint="sts", ttl="15m")
    assert federated["lease_duration"] == 900
    assert federated["data"]["session_token"]

    # assumed_role with a session name.
    assumed = aws.generate_credentials("assume", endpoint="sts", role_session_name="hvac-session")
    assert assumed["data"]["arn"].endswith(f"assumed-role/hangar-hvac-{run}/hvac-session")

    aws.delete_role("federated")
    with pytest.raises(hvac.exceptions.InvalidPath):
        aws.read_role("federated")
    with pytest.raises(hvac.exceptions.InvalidRequest):
        aws.configure_lease("1h", None)


def test_hvac_manages_acl_policies_and_tokens_that_the_policies_bound(broker):
    url, token = broker
    client = hvac.Client(url=url, token=token)
    aws = client.secrets.aws
    aws.create_or_update_role("session", "federation_token", policy_document=POLICY)

    client.sys.create_or_update_acl_policy("reader", 'path "aws/roles/*" { capabilities = ["read"] }')
    assert client.sys.read_acl_policy("reader")["data"]["policy"] == 'path "aws/roles/*" { capabilities = ["read"] }'
    assert "reader" in client.sys.list_acl_policies()["data"]["keys"]

    created = client.auth.token.create(policies=["reader"], ttl="1h", display_name="hvac")
    reader = hvac.Client(url=url, token=created["auth"]["client_token"])
    me = reader.auth.token.lookup_self()["data"]
    assert me["display_name"] == "token-hvac"
    assert "reader" in me["policies"]
    assert reader.secrets.aws.read_role("session")["data"]["credential_types"] == ["federation_token"]
    with pytest.raises(hvac.exceptions.Forbidden):
        reader.secrets.aws.create_or_update_role("session", "federation_token", policy_document=POLICY)

    client.sys.delete_acl_policy("reader")
    with pytest.raises(hvac.exceptions.Forbidden):
        reader.secrets.aws.read_role("session")


def test_hvac_enables_a_secrets_engine_with_its_defaults(broker):
    """hvac sends every optional field of a mount (description, config, options, plugin_name) as
    null, which Vault takes as unset."""
    url, token = broker
    client = hvac.Client(url=url, token=token)
    path = f"team-{secrets.token_hex(4)}"
    client.sys.enable_secrets_engine("aws", path=path)
    assert f"{path}/" in client.sys.list_mounted_secrets_engines()["data"]
    client.secrets.aws.create_or_update_role(
        "deploy", "federation_token", policy_document=POLICY, mount_point=path, default_sts_ttl=None
    )
    assert client.secrets.aws.read_role("deploy", mount_point=path)["data"]["credential_types"] == ["federation_token"]


def test_hvac_token_parameters_roles_and_renewal(broker):
    """hvac's token calls: the parameters Vault takes are honoured (use counts, periods,
    renewability, metadata), token roles grant their policies, and renewals renew."""
    url, token = broker
    root = hvac.Client(url=url, token=token)
    root.sys.create_or_update_acl_policy("dev", 'path "aws/roles/*" { capabilities = ["read"] }')

    limited = root.auth.token.create(policies=["default"], num_uses=2, meta={"team": "ci"})["auth"]
    assert limited["num_uses"] == 2
    assert limited["metadata"] == {"team": "ci"}
    user = hvac.Client(url=url, token=limited["client_token"])
    assert user.auth.token.lookup_self()["data"]["num_uses"] == 1
    user.auth.token.lookup_self()
    with pytest.raises(hvac.exceptions.Forbidden):
        user.auth.token.lookup_self()

    periodic = root.auth.token.create(policies=["default"], period="1h", ttl="5m")["auth"]
    assert periodic["lease_duration"] == 3600
    renewed = hvac.Client(url=url, token=periodic["client_token"]).auth.token.renew_self(increment="10s")
    assert renewed["auth"]["lease_duration"] == 3600

    fixed = root.auth.token.create(policies=["default"], renewable=False)["auth"]
    assert fixed["renewable"] is False
    with pytest.raises(hvac.exceptions.InvalidRequest):
        hvac.Client(url=url, token=fixed["client_token"]).auth.token.renew_self()

    root.auth.token.create_or_update_role("ci", allowed_policies=["dev"], orphan=True, token_period="30m")
    assert root.auth.token.read_role("ci")["data"]["allowed_policies"] == ["dev"]
    assert "ci" in root.auth.token.list_roles()["data"]["keys"]
    from_role = root.auth.token.create(role_name="ci")["auth"]
    assert from_role["policies"] == ["default", "dev"]
    assert from_role["orphan"] is True
    assert from_role["lease_duration"] == 1800
    root.auth.token.delete_role("ci")


def _es256_jwt(private_key, claims: dict) -> str:
    """A compact ES256 JWS of `claims`, as any OIDC issuer signs one."""
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = b64(json.dumps({"alg": "ES256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    r, s = decode_dss_signature(private_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def test_hvac_enables_jwt_auth_and_logs_in_with_a_workload_s_token(broker):
    import time

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    url, token = broker
    client = hvac.Client(url=url, token=token)
    key = ec.generate_private_key(ec.SECP256R1())
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    client.sys.enable_auth_method("jwt", description="CI workloads")
    assert "jwt/" in client.sys.list_auth_methods()["data"]
    client.auth.jwt.configure(jwt_validation_pubkeys=[public_pem], bound_issuer="https://ci.example")
    client.sys.create_or_update_policy("ci", 'path "sys/mounts" { capabilities = ["read"] }')
    client.auth.jwt.create_role(
        "deploy",
        user_claim="sub",
        allowed_redirect_uris=[],
        role_type="jwt",
        bound_audiences=["hangar"],
        bound_claims_type="glob",
        bound_claims={"sub": "repo:acme/*:ref:refs/heads/main"},
        token_policies=["ci"],
        token_ttl="10m",
    )
    assert client.auth.jwt.read_role("deploy")["data"]["bound_claims"] == {"sub": ["repo:acme/*:ref:refs/heads/main"]}

    now = int(time.time())
    claims = {"iss": "https://ci.example", "aud": "hangar", "sub": "repo:acme/app:ref:refs/heads/main",
              "iat": now, "nbf": now, "exp": now + 600}
    workload = hvac.Client(url=url)
    login = workload.auth.jwt.jwt_login("deploy", _es256_jwt(key, claims))
    assert login["auth"]["policies"] == ["ci", "default"] or login["auth"]["policies"] == ["default", "ci"]
    assert login["auth"]["lease_duration"] == 600
    assert workload.is_authenticated(), "hvac keeps the token the login gave"
    assert workload.sys.list_mounted_secrets_engines()["data"], "the role's policy reads sys/mounts"

    other_branch = dict(claims, sub="repo:acme/app:ref:refs/heads/feature")
    with pytest.raises(hvac.exceptions.InvalidRequest) as refused:
        hvac.Client(url=url).auth.jwt.jwt_login("deploy", _es256_jwt(key, other_branch))
    assert "does not match any associated bound claim values" in str(refused.value)
