"""`python -m devtools.doubles serve --responder MODULE:FUNCTION --url_file FILE`

`serve` runs the scripted OpenAI-compatible server on 127.0.0.1 in the foreground, for shell
scripts that need a model offline (e.g. scripts/construct_smoke.sh). The server's URL
(the api_base to pass on) is written to --url_file once it listens; it stops on SIGTERM
or SIGINT, or by itself after --max_lifetime_s.
"""

from __future__ import annotations

import importlib
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from PersonalWAB.cli import dispatch
from PersonalWAB.data.layout import write_atomic
from PersonalWAB.settings import parse, setting
from devtools.doubles.scripted_server import ScriptedLLMServer

COMMANDS = {"serve": ("devtools.doubles.__main__:serve", "run the scripted model server")}


@dataclass
class ServeSettings:
    """The scripted server's answers, where its URL goes, and how long it may live."""

    responder: str = setting(str, "MODULE:FUNCTION answering each request body", required=True)
    url_file: str = setting(str, "where to write the server's api_base once it listens (a script waits for it)",
                            required=True)
    max_lifetime_s: float = setting(3600.0, "the server stops by itself after this many seconds (a script that "
                                            "dies cannot leave it running)")


def _responder(spec: str):
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SystemExit(f"error: --responder {spec!r}: cannot load it ({exc}); expected MODULE:FUNCTION") from None


def serve(argv: list[str] | None = None) -> int:
    args = parse(ServeSettings, argv, prog="python -m devtools.doubles serve", description=__doc__)
    server = ScriptedLLMServer(_responder(args.responder), max_lifetime_s=args.max_lifetime_s).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.stop())
    write_atomic(Path(args.url_file), server.url.encode("utf-8"))
    print(f"scripted model server at {server.url}", flush=True)
    while not server.wait(0.5):
        pass
    print(f"scripted model server stopped after {len(server.requests)} request(s)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return dispatch("python -m devtools.doubles", "Tools for developing and checking PersonalWAB.", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
