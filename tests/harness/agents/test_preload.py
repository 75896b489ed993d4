"""What the fork server imports and prepares once for an agent (``harness.agents.preload``,
``harness.lives.warm_agent``): the agent's libraries, never its own code."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from crashmatrix.harness.agents.loading import fork_preload, preload_for
from crashmatrix.harness.agents.preload import imports_of
from crashmatrix.harness.lives import warm_agent

ROOT = Path(__file__).resolve().parents[3]


def test_the_libraries_an_agent_imports_are_named_and_its_own_modules_are_not(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from __future__ import annotations\n"
        "import json, os.path\n"
        "from http import client\n"
        "from . import sibling\n"
        "import helpers\n"
        "from pkg import thing\n"
        "try:\n    import sqlite3\nexcept ImportError:\n    sqlite3 = None\n"
        "if True:\n    import uuid\n"
        "def main():\n    import secrets  # inside a function: when it runs, not at import\n",
        encoding="utf-8",
    )
    assert imports_of(agent, own=[tmp_path]) == ("json", "os.path", "http", "sqlite3", "uuid")


def test_a_file_that_does_not_parse_names_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "agent.py"
    broken.write_text("import json\ndef (:\n", encoding="utf-8")
    assert imports_of(broken) == ()
    assert imports_of(tmp_path / "missing.py") == ()


def test_a_kind_two_agent_preloads_its_libraries_a_black_box_and_the_reference_nothing_more() -> None:
    desk = str(ROOT / "examples" / "desk_agent" / "adapter.yaml")
    names = preload_for(desk)
    assert "openai" in names and "sqlite3" in names
    assert not any("desk" in name or name == "agent" for name in names)  # never its own code
    assert preload_for(str(ROOT / "examples" / "blackbox_agent" / "adapter.yaml")) == ()
    assert fork_preload("reference") == [
        "crashmatrix.harness.agents.reference",
        "crashmatrix.mock_tools.toolbox",
    ]
    whole = fork_preload(desk)
    assert (
        whole[0] == "crashmatrix.harness.agents.reference" and whole[-1] == "crashmatrix.mock_tools.toolbox"
    )


def test_an_adapter_that_cannot_load_preloads_nothing_and_fails_later_with_its_error(tmp_path: Path) -> None:
    assert preload_for(str(tmp_path / "missing.yaml")) == ()


def test_the_default_tls_context_is_made_once_and_shared(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import httpcore2
    import httpcore2._ssl

    # Restored after the test: the patch is meant for a fork server, not this process.
    monkeypatch.setattr(httpcore2, "default_ssl_context", httpcore2._ssl.default_ssl_context)
    monkeypatch.setattr(httpcore2._ssl, "default_ssl_context", httpcore2._ssl.default_ssl_context)
    made: list[ssl.SSLContext] = []
    original = httpcore2._ssl.default_ssl_context

    def counting(*, _trust_env: bool = True) -> ssl.SSLContext:
        made.append(original(_trust_env=_trust_env))
        return made[-1]

    monkeypatch.setattr(httpcore2._ssl, "default_ssl_context", counting)
    warm_agent.share_default_tls()
    first = httpcore2.default_ssl_context()
    assert httpcore2.default_ssl_context() is first and httpcore2._ssl.default_ssl_context() is first
    assert len(made) == 1  # made once, when shared; every client after gets it
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # another setting: its own context
    assert httpcore2.default_ssl_context() is not first and len(made) == 2


def test_warming_openai_answers_a_tool_call_without_a_socket() -> None:
    warm_agent.warm_openai()  # raises if the client, the transport or the answer were wrong


def test_a_server_prepares_clients_only_for_an_agent_whose_lives_build_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    called: list[str] = []
    for step in ("share_default_tls", "warm_openai", "warm_async_http"):
        monkeypatch.setattr(warm_agent, step, lambda step=step: called.append(step))
    warm_agent.warm("reference")  # its lives use the harness's client: own_http_client = False
    assert called == []
    warm_agent.warm(str(ROOT / "examples" / "python_agent" / "adapter.yaml"))  # builds OpenAI()
    assert called == ["share_default_tls", "warm_openai", "warm_async_http"]


@pytest.mark.slow
def test_warming_imports_anyios_asyncio_backend_only_for_an_agent_that_uses_anyio() -> None:
    # A fresh interpreter: this process's sys.modules already holds whatever other tests used.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from crashmatrix.harness.lives.warm_agent import warm_async_http\n"
        "warm_async_http()\n"
        "before = 'anyio._backends._asyncio' in sys.modules\n"
        "import anyio\n"
        "warm_async_http()\n"
        "print(before, 'anyio._backends._asyncio' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_a_framework_agents_server_runs_one_of_its_lives_before_any_fork_and_no_other_kind_does() -> None:
    # In a forked child: the life imports LangGraph and the example into this process.
    pytest.importorskip("langgraph")
    import json
    import os
    import sys
    import threading

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            from crashmatrix.harness.lives import life, warmup  # its own life first, at import

            sys.path.insert(0, str(ROOT))  # examples.* import as from the repository's root
            seen: list[str] = []
            original = life.run_life

            def counting(spec: life.LifeSpec, tracer: object) -> None:
                seen.append(spec.agent)
                original(spec, tracer)  # type: ignore[arg-type]

            life.run_life = counting  # type: ignore[assignment]
            threads = threading.active_count()
            warmup.warm_framework("reference")
            warmup.warm_framework(str(ROOT / "examples" / "python_agent" / "adapter.yaml"))
            warmup.warm_framework("langgraph:examples.langgraph_agent.agent:build")  # raises if it failed
            left = threading.active_count() - threads  # a thread would be lost by every fork
            os.write(write, json.dumps({"seen": seen, "left": left}).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as answer:
        told = json.loads(answer.read() or "{}")
    assert told == {"seen": ["langgraph:examples.langgraph_agent.agent:build"], "left": 0}


@pytest.mark.slow
def test_a_fork_server_for_a_framework_agent_has_run_one_of_its_lives_before_the_first_fork(
    tmp_path: Path,
) -> None:
    pytest.importorskip("langgraph")
    import json
    import sys

    from crashmatrix.harness.lives.injector import LifeLauncher

    spec = "langgraph:examples.langgraph_agent.agent:build"
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))  # the server gets this sys.path: examples.* import
    try:
        launcher = LifeLauncher("fork", preload=fork_preload(spec), warm=(spec,))
        assert launcher.server is not None
        out = tmp_path / "state.json"
        # The life's own code as a string (exec): unpickling a function of this module would
        # import it, and with it modules the server may not have imported itself.
        report = (
            "import json, sys\n"
            "from crashmatrix.harness.lives.forkserver import warming\n"
            "framework_life = 'crashmatrix.harness.agents.foreign_session' in sys.modules  # its run_life's\n"
            f"open({str(out)!r}, 'w').write(json.dumps([list(warming()), framework_life]))\n"
        )
        ended = launcher.server.run(exec, (report,), deadline=120)
        assert ended.code == 0
        assert json.loads(out.read_text(encoding="utf-8")) == [[spec], True]
    finally:
        if added:
            sys.path.remove(str(ROOT))
