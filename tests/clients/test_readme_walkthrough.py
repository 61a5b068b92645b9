"""The README's first steps run as written: its shell blocks, in order, against the dev-server
binary started as the README starts it (`--tls`), in a copy of the repository's README and
examples. Only what this machine must change is changed: free ports instead of 8443 and 5000,
and the test environment's moto and Terraform instead of installing them again."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def walkthrough():
    """The README's shell blocks from its first steps to its documentation, but the first (which
    starts dev-server: the test does)."""
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index("## First steps"), readme.index("## Documentation")
    blocks = re.findall(r"```sh\n(.*?)```", readme[start:end], re.S)
    assert len(blocks) >= 4, blocks
    return blocks[1:]


def test_the_readme_walkthrough_runs_as_written():
    binary = os.environ["HANGAR_DEV_SERVER"]
    bin_dir = Path(os.environ.get("HANGAR_VENV", ROOT / ".venv")) / "bin"
    hangar_port, moto_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        shutil.copy(ROOT / "README.md", work / "README.md")
        shutil.copytree(ROOT / "examples", work / "examples")
        consumer = work / "examples/consumer/main.tf"
        consumer.write_text(consumer.read_text().replace("127.0.0.1:8443", f"127.0.0.1:{hangar_port}"))
        script = "set -euo pipefail\n" + "\n".join(walkthrough())
        script = (
            script.replace("127.0.0.1:8443", f"127.0.0.1:{hangar_port}")
            .replace("-p 5000", f"-p {moto_port}")
            .replace("127.0.0.1:5000", f"127.0.0.1:{moto_port}")
            .replace("python3 -m venv .moto && .moto/bin/pip install --quiet 'moto[server]'", "true")
            .replace(".moto/bin/moto_server", f"{bin_dir}/moto_server")
        )
        # moto runs on in the background: its output must not hold the script's pipes open.
        script = re.sub(r"(moto_server [^&\n]*?)\s*&", r"\1 >/dev/null 2>&1 &", script)
        server = subprocess.Popen(
            [binary, "--listen", f"127.0.0.1:{hangar_port}", "--tls"],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        try:
            tokens = {}
            for line in server.stdout:
                if line.startswith("Site-admin token"):
                    tokens["admin"] = line.rsplit(" ", 1)[-1].strip()
                if line.startswith("Root service token"):
                    tokens["root"] = line.rsplit(" ", 1)[-1].strip()
                if line.startswith("Hangar is listening on "):
                    break
            script = script.replace("<site-admin token>", tokens["admin"]).replace(
                "<root service token>", tokens["root"]
            )
            env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TF_IN_AUTOMATION": "1"}
            env.pop("TF_CLI_CONFIG_FILE", None)
            ran = subprocess.run(
                ["bash", "-c", script],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                start_new_session=True,
            )
            output = ran.stdout + ran.stderr
            assert ran.returncode == 0, output
            assert "\nok\n" in f"\n{output}", "the version is ok:\n" + output
            assert f"Downloading 127.0.0.1:{hangar_port}/acme/vpc/aws 1.0.0" in output, output
            assert '"c" = "10.0.2.0/24"' in output, "apply gave the subnets:\n" + output
            assert re.search(r"\bAKIA[A-Z0-9]{16}\b", output), "the broker issued a key:\n" + output
        finally:
            server.terminate()
            server.wait(timeout=15)
            subprocess.run(["pkill", "-f", f"moto_server -H 127.0.0.1 -p {moto_port}"], check=False)
