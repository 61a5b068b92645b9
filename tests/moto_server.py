"""The AWS emulator as the tests run it: moto's server, one request at a time.

moto's DynamoDB is not safe under concurrent requests: a transaction deep-copies the table to
roll back, so a write landing meanwhile fails it ("dictionary changed size during iteration")
or is lost when it rolls back. DynamoDB serialises conflicting writes itself; here a lock around
each request does, so tests that write concurrently see DynamoDB's semantics, not moto's races.
SQS receives are left outside the lock: they may long-poll, and hold nothing moto shares.

IAM is moto's own, stock, as users run it: the broker must work with what moto answers. Only a
user tagged `hangar-test-iam=strict` (the one test that gives a user everything IAM makes one
remove first) gets two rules moto lacks: DeleteUser is refused with DeleteConflict while the
user still holds anything (keys, policies, groups, login profile, MFA devices, SSH keys, signing
certificates, service-specific credentials), and service-specific credentials exist (Create,
List, Delete), held here.

Usage: python tests/moto_server.py -H 127.0.0.1 -p PORT
"""

import argparse
import io
import os
import threading
import uuid
from urllib.parse import parse_qs

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

LOCK = threading.Lock()

IAM_NAMESPACE = "https://iam.amazonaws.com/doc/2010-05-08/"
# The tag that opts a user into the IAM rules below.
STRICT_TAG = {"Key": "hangar-test-iam", "Value": "strict"}
# Service-specific credentials by (account, user name): moto has none.
SERVICE_CREDENTIALS = {}


def iam_request(environ):
    """The form parameters of an IAM query-API request (the body is put back for moto)."""
    if "/iam/aws4_request" not in environ.get("HTTP_AUTHORIZATION", ""):
        return None
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    params = {key: values[-1] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
    query = {key: values[-1] for key, values in parse_qs(environ.get("QUERY_STRING", "")).items()}
    return {**query, **params}


def answer(start_response, status, body):
    data = body.encode()
    start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(data)))])
    return [data]


def iam_error(start_response, status, code, message):
    body = (
        f'<ErrorResponse xmlns="{IAM_NAMESPACE}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{message}</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>"
    )
    return answer(start_response, status, body)


def iam_result(start_response, action, result):
    body = (
        f'<{action}Response xmlns="{IAM_NAMESPACE}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></{action}Response>"
    )
    return answer(start_response, "200 OK", body)


def held_by(backend, user):
    """What a user still holds that IAM makes one remove before deleting it."""
    held = []
    if user.access_keys:
        held.append("access keys")
    if user.policies or user.managed_policies:
        held.append("policies")
    if backend.get_groups_for_user(user.name):
        held.append("group memberships")
    if user.password is not None:
        held.append("a login profile")
    if user.mfa_devices:
        held.append("MFA devices")
    if user.ssh_public_keys:
        held.append("SSH public keys")
    if user.signing_certificates:
        held.append("signing certificates")
    if SERVICE_CREDENTIALS.get((backend.account_id, user.name)):
        held.append("service-specific credentials")
    return held


def strict_iam(environ, start_response):
    """Answers what moto would answer unlike IAM; None leaves the request to moto."""
    params = iam_request(environ)
    action = (params or {}).get("Action")
    if action not in ("DeleteUser", *SERVICE_CREDENTIAL_ACTIONS):
        return None
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends

    backend = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    name = params.get("UserName", "")
    user = backend.users.get(name)
    if user is None or STRICT_TAG not in backend.tagger.list_tags_for_resource(user.arn)["Tags"]:
        return None
    if action == "DeleteUser":
        held = held_by(backend, user)
        if not held:
            SERVICE_CREDENTIALS.pop((backend.account_id, name), None)
            return None
        message = f"Cannot delete entity, must remove {', '.join(held)} first."
        return iam_error(start_response, "409 Conflict", "DeleteConflict", message)
    return SERVICE_CREDENTIAL_ACTIONS[action](start_response, backend.account_id, name, params)


def create_service_credential(start_response, account, user, params):
    service = params.get("ServiceName", "")
    credential = {"id": "ACCA" + uuid.uuid4().hex[:17].upper(), "service": service, "user": user}
    SERVICE_CREDENTIALS.setdefault((account, user), []).append(credential)
    result = (
        f"<ServiceSpecificCredential><CreateDate>2026-01-01T00:00:00Z</CreateDate><ServiceName>{service}</ServiceName>"
        f"<ServiceUserName>{user}-at-1</ServiceUserName><ServicePassword>secret</ServicePassword>"
        f"<ServiceSpecificCredentialId>{credential['id']}</ServiceSpecificCredentialId><UserName>{user}</UserName>"
        f"<Status>Active</Status></ServiceSpecificCredential>"
    )
    return iam_result(start_response, "CreateServiceSpecificCredential", result)


def list_service_credentials(start_response, account, user, _params):
    members = "".join(
        f"<member><UserName>{user}</UserName><Status>Active</Status><ServiceUserName>{user}-at-1</ServiceUserName>"
        f"<CreateDate>2026-01-01T00:00:00Z</CreateDate><ServiceSpecificCredentialId>{c['id']}</ServiceSpecificCredentialId>"
        f"<ServiceName>{c['service']}</ServiceName></member>"
        for c in SERVICE_CREDENTIALS.get((account, user), [])
    )
    result = f"<ServiceSpecificCredentials>{members}</ServiceSpecificCredentials>"
    return iam_result(start_response, "ListServiceSpecificCredentials", result)


def delete_service_credential(start_response, account, user, params):
    wanted = params.get("ServiceSpecificCredentialId", "")
    held = SERVICE_CREDENTIALS.get((account, user), [])
    if not any(c["id"] == wanted for c in held):
        return iam_error(start_response, "404 Not Found", "NoSuchEntity", f"No such credential {wanted}.")
    SERVICE_CREDENTIALS[(account, user)] = [c for c in held if c["id"] != wanted]
    return iam_result(start_response, "DeleteServiceSpecificCredential", "")


SERVICE_CREDENTIAL_ACTIONS = {
    "CreateServiceSpecificCredential": create_service_credential,
    "ListServiceSpecificCredentials": list_service_credentials,
    "DeleteServiceSpecificCredential": delete_service_credential,
}


def long_poll(environ):
    return environ.get("HTTP_X_AMZ_TARGET", "").endswith(".ReceiveMessage") or "Action=ReceiveMessage" in environ.get(
        "QUERY_STRING", ""
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    moto = DomainDispatcherApplication(create_backend_app)

    def serialised(environ, start_response):
        if long_poll(environ):
            return moto(environ, start_response)
        with LOCK:
            answered = strict_iam(environ, start_response)
            if answered is not None:
                return answered
            # The body is produced inside the lock: moto builds it from shared state.
            return list(moto(environ, start_response))

    run_simple(args.host, args.port, serialised, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
