"""The JVM that runs Anserini, reached through pyjnius from one thread.

pyjnius attaches every Python thread that touches Java to the JVM, and threads that end
while attached are never cleaned up, so all Java calls run on one long-lived worker thread
(`on_jvm`); the benchmark's many task threads only hand work to it. The JVM starts on the
first call that needs it (`anserini`), never at import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, TypeVar

T = TypeVar("T")

_jvm_thread_id: int | None = None
_anserini: SimpleNamespace | None = None  # Java classes; read and written on the JVM thread only


def _remember_jvm_thread() -> None:
    global _jvm_thread_id
    _jvm_thread_id = threading.get_ident()


_JVM_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pwab-jvm", initializer=_remember_jvm_thread)

_JVM_OPTIONS = (
    # Leave SIGINT/SIGTERM to Python, so Ctrl-C still raises KeyboardInterrupt.
    "-Xrs",
    # One log4j context for the whole JVM: with the default per-class-loader selector,
    # log-level changes made through Configurator miss Anserini's loggers under pyjnius.
    "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
    # The quick (C1) JIT only: on 2 busy cores the optimising compiler's threads cost more
    # than they win back in a run's queries (start + first query 1.2-1.5 s of CPU against
    # 1.9-2.6 s, and 100 queries after it 0.5-1.3 s against 1.9-3.0 s; load average ~13).
    "-XX:TieredStopAtLevel=1",
)


def on_jvm(function: Callable[..., T], *args: Any) -> T:
    """Run `function` on the single thread that owns every Java call."""
    if threading.get_ident() == _jvm_thread_id:
        return function(*args)
    return _JVM_EXECUTOR.submit(function, *args).result()


def start_jvm_early() -> None:
    """Start the JVM on its thread without waiting for it, so a run that will search
    overlaps the JVM's start-up (~1.5 s of class loading) with loading its data."""
    _JVM_EXECUTOR.submit(anserini)


def anserini() -> SimpleNamespace:
    """Anserini's classes, starting the JVM on first use (JVM thread only)."""
    global _anserini
    if _anserini is None:
        _anserini = _start_jvm()
    return _anserini


def _start_jvm() -> SimpleNamespace:
    import jnius_config

    if not jnius_config.vm_running:
        jnius_config.add_options(*_JVM_OPTIONS)
    # pyserini.pyclass puts the bundled Anserini fat jar on the class path and starts the JVM;
    # pyserini.search.lucene would also load faiss, transformers and an OpenAI client.
    from pyserini.pyclass import JArrayList, autoclass
    from jnius import JavaException

    _quiet_java_logging(autoclass)
    return SimpleNamespace(
        JavaException=JavaException,
        ArrayList=JArrayList,
        SimpleSearcher=autoclass("io.anserini.search.SimpleSearcher"),
        IndexCollection=autoclass("io.anserini.index.IndexCollection"),
        IndexArgs=autoclass("io.anserini.index.IndexCollection$Args"),
    )


def _quiet_java_logging(autoclass: Callable[[str], Any]) -> None:
    """Silence Anserini's INFO chatter, which log4j writes to the process's stdout.

    Under Java 17, log4j also prints a one-off warning about `getCallerClass` to
    System.out when it first initialises; stdout is muted around that moment.
    """
    system = autoclass("java.lang.System")
    print_stream = autoclass("java.io.PrintStream")
    stdout = system.out
    system.setOut(print_stream(autoclass("java.io.OutputStream").nullOutputStream()))
    try:
        autoclass("org.apache.logging.log4j.core.config.Configurator").setRootLevel(
            autoclass("org.apache.logging.log4j.Level").WARN
        )
    finally:
        system.setOut(stdout)
