"""`python -m devtools serve --responder MODULE:FUNCTION --url_file FILE`

Runs the scripted OpenAI-compatible server on 127.0.0.1 in the foreground, for shell
scripts that need a model offline (e.g. scripts/construct_smoke.sh). The server's URL
(the api_base to pass on) is written to --url_file once it listens; it stops on SIGTERM
or SIGINT, or by itself after --max_lifetime_s.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from pathlib import Path

from PersonalWAB.data.layout import write_atomic
from devtools.scripted_server import ScriptedLLMServer


def _responder(spec: str):
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SystemExit(f"error: --responder {spec!r}: cannot load it ({exc}); expected MODULE:FUNCTION") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the scripted model server")
    serve.add_argument("--responder", required=True, help="MODULE:FUNCTION answering each request body")
    serve.add_argument("--url_file", required=True, help="where to write the server's api_base")
    serve.add_argument("--max_lifetime_s", type=float, default=3600.0)
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(_responder(args.responder), max_lifetime_s=args.max_lifetime_s).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.stop())
    write_atomic(Path(args.url_file), server.url.encode("utf-8"))
    print(f"scripted model server at {server.url}", flush=True)
    while not server.wait(0.5):
        pass
    print(f"scripted model server stopped after {len(server.requests)} request(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
