"""The AWS emulator as the tests run it: moto's server, one request at a time.

moto's DynamoDB is not safe under concurrent requests: a transaction deep-copies the table to
roll back, so a write landing meanwhile fails it ("dictionary changed size during iteration")
or is lost when it rolls back. DynamoDB serialises conflicting writes itself; here a lock around
each request does, so tests that write concurrently see DynamoDB's semantics, not moto's races.
SQS receives are left outside the lock: they may long-poll, and hold nothing moto shares.

Usage: python tests/moto_server.py -H 127.0.0.1 -p PORT
"""

import argparse
import os
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

LOCK = threading.Lock()


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
            # The body is produced inside the lock: moto builds it from shared state.
            return list(moto(environ, start_response))

    run_simple(args.host, args.port, serialised, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
