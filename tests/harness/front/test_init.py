"""``crashmatrix init AGENT.py``: what it reads from an agent's code and the adapter it writes,
without running anything (``--no-run``; the clean runs and first verdicts are in
``test_init_runs.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.front.agent_code import read_agent
from crashmatrix.harness.front.init import draft, input_modes, main_init, suite_tools

ROOT = Path(__file__).resolve().parents[3]
AGENTS = Path(__file__).parent / "data" / "init_agents"
# Every example agent of kind 2 or 3 (an adapter.yaml with python: or command:) and every
# golden agent: init must write for each an adapter the real loader takes.
EXAMPLES = sorted(
    path.parent / "agent.py"
    for path in (ROOT / "examples").glob("*/adapter.yaml")
    if re.search(r"^(python|command):", path.read_text(encoding="utf-8"), re.MULTILINE)
)
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/agent.py"))


def _init(agent: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main_init([str(agent), "--out", str(out), "--no-run"])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def _adapter(agent: Path, tmp_path: Path) -> tuple[str, dict[str, object]]:
    text = draft(read_agent(agent), suite_tools(), here=tmp_path, input_modes=input_modes()).text
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return text, data


def test_examples_are_all_there() -> None:
    names = {path.parent.name for path in EXAMPLES}
    assert {"python_agent", "desk_agent", "memo_agent", "blackbox_agent", "http_agent"} <= names
    assert len(GOLDEN) >= 8


@pytest.mark.parametrize("agent", EXAMPLES + GOLDEN, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_init_writes_an_adapter_the_loader_takes_for_every_example(
    agent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adapter.yaml"
    status, printed = _init(agent, out, capsys)
    assert status in (0, 1), printed
    load_foreign(out)  # raises on a file the loader refuses
    assert f"{out}: loads" in printed
    todos = [line for line in printed.splitlines() if line.startswith("TODO: ")]
    if status == 1:
        assert todos and any("(blocks a run)" in line for line in todos), printed
    # Each TODO printed is also in the file, where the person editing it sees it.
    text = out.read_text(encoding="utf-8")
    for line in todos:
        assert f"# {line.removesuffix(' (blocks a run)')}" in text


def test_desk_agent_adapter_is_the_hand_written_one_in_substance(tmp_path: Path) -> None:
    _, data = _adapter(ROOT / "examples" / "desk_agent" / "agent.py", tmp_path)
    assert data["session"] == {"path": ".desk/session.jsonl"}
    assert data["env"] == {"DESK_AGENT_SESSION": "{session}", "DESK_AGENT_MODEL": "crashmatrix-scripted"}
    assert data["catalogue"] == {"send_email": {}, "create_order": {}}
    assert data["results"] == "seed004"
    assert data["approvals"]["prompt"] == r"Approve (?P<again>again )?(?P<tool>\w+) \(\S+\)\? \[y/n\] "
    effects = {e["tool"]: e for e in data["effects"]}
    assert effects["send_email"]["jsonl"] == "outbox.jsonl"
    assert effects["send_email"]["ids"] == {"tool_call_id": "call"}
    assert effects["create_order"]["sqlite"]["path"] == "orders.db"
    assert effects["create_order"]["ids"] == {"idempotency_key": "idempotency_key"}
    marks = {(r["function"], r["boundary"]) for r in data["boundaries"]}
    assert {
        ("append_line", "after_tool_call_saved"),
        ("append_line", "after_approved"),
        ("append_line", "after_running"),
        ("send_email", "after_side_effect"),
        ("create_order", "after_side_effect"),
        ("append_line", "before_tool_result"),
        ("append_line", "after_tool_result"),
    } == marks


def test_a_tool_in_a_dispatch_dict_is_marked_where_it_is_looked_up(tmp_path: Path) -> None:
    """``HANDLERS = {"send_mail": send_mail}`` holds the function itself: a rule on send_mail
    would never fire. The rule goes on run_tool, which looks the handler up by the call's
    name, with where: on it; the suite's send_email is mapped to its names."""
    text, data = _adapter(AGENTS / "repl_mailer.py", tmp_path)
    assert data["catalogue"] == {
        "send_email": {
            "name": "send_mail",
            "arguments": {"to": "recipient", "subject": "title", "body": "text"},
        }
    }
    effects = [e for e in data["effects"] if e["tool"] == "send_email"]
    assert effects == [
        {
            "tool": "send_email",
            "counts": "emails",
            "jsonl": "outbox.jsonl",
            "ids": {"tool_call_id": "call_id"},
        }
    ]
    side = [r for r in data["boundaries"] if r["boundary"] == "after_side_effect"]
    assert side == [
        {
            "function": "run_tool",
            "boundary": "after_side_effect",
            "where": [{"argument": "call", "key": "function.name", "equals": "send_mail"}],
            "call_id": {"argument": "call", "key": "id"},
        }
    ]
    assert "send_mail" not in {r["function"] for r in data["boundaries"]}
    assert "HANDLERS['send_mail']" in text  # the comment says why
    assert data["session"] == {"path": ".mailer/conversation.jsonl", "keeps_ledger": False}
    assert data["env"] == {"REPL_MAILER_CONVERSATION": "{session}"}
    assert data["input"] == {"prompt": "> "}


def test_a_decorator_registry_and_a_function_entry_point_get_a_launcher(tmp_path: Path) -> None:
    """order-bot has no main(): chat(message) is its entry, @tool stores each tool in
    REGISTRY, its conversation and its orders are SQLite rows."""
    findings = read_agent(AGENTS / "order_bot.py")
    assert (findings.main, findings.entry, findings.recover, findings.turns) == (
        "",
        "chat",
        "recover",
        "call",
    )
    result = draft(findings, suite_tools(), here=tmp_path, input_modes=input_modes())
    data = yaml.safe_load(result.text)
    assert data["python"] == {"script": "crashmatrix_launcher.py", "main": "main"}
    assert "order_bot.recover()" in result.launcher and "order_bot.chat(text)" in result.launcher
    assert data["catalogue"] == {
        "create_order": {"name": "place_order", "arguments": {"item": "product", "quantity": "count"}}
    }
    assert data["session"]["sqlite"] == {
        "path": ".bot/state.db",
        "query": "SELECT body FROM messages ORDER BY rowid",
    }
    assert data["effects"][0]["sqlite"]["path"] == "orders.db"
    functions = {r["function"] for r in data["boundaries"]}
    # The registry holds place_order itself; execute also saves the Tool Result, so the
    # moment between the effect and the result is the writer's call (before_tool_result).
    assert "order_bot.place_order" not in functions
    assert {
        "boundary": "before_tool_result",
        "function": "order_bot.remember",
        "at": "call",
        "where": [{"argument": "message", "key": "role", "equals": "tool"}],
        "call_id": {"argument": "message", "key": "tool_call_id"},
    } in data["boundaries"]


def test_a_ledger_and_an_http_service_are_mapped(tmp_path: Path) -> None:
    _, data = _adapter(AGENTS / "ledger_orders.py", tmp_path)
    assert data["services"] == ["orders"]
    assert data["env"] == {"LEDGER_ORDERS_SESSION": "{session}", "LEDGER_ORDERS_URL": "{orders_url}"}
    assert data["input"] == {"prompt": "orders> "}  # written with sys.stdout.write before readline
    assert "keeps_ledger" not in data["session"]  # its status rules declare the ledger
    running = [r for r in data["boundaries"] if r["boundary"] == "after_running"]
    assert running == [
        {
            "function": "append",
            "boundary": "after_running",
            "where": [{"argument": "record", "key": "status", "equals": "running"}],
            "call_id": {"argument": "record", "key": "tool_call_id"},
        }
    ]
    saved = next(r for r in data["boundaries"] if r["boundary"] == "after_tool_call_saved")
    assert saved["call_id"] == {"argument": "record", "key": "message.tool_calls.*.id"}


def test_a_one_shot_agent_taking_argv_gets_its_turn_in_argv_or_a_blocking_todo(tmp_path: Path) -> None:
    findings = read_agent(AGENTS / "oneshot_cli.py")
    assert findings.turns == "argv"
    result = draft(findings, suite_tools(), here=tmp_path, input_modes=input_modes())
    data = yaml.safe_load(result.text)
    if "argv" in input_modes():
        assert data["input"] == {"via": "argv"}
        assert data["python"]["argv"] == ["{turn}"]
        assert not result.blocked
    else:
        assert result.blocked and "sys.argv" in result.todos[0].text
    # Without the argv mode the same agent is refused with the reason, never run blind.
    older = draft(findings, suite_tools(), here=tmp_path, input_modes=frozenset())
    assert older.blocked and any("sys.argv" in todo.text for todo in older.todos)
    assert "input" not in yaml.safe_load(older.text)


def test_each_key_names_the_line_it_was_read_from(tmp_path: Path) -> None:
    agent = AGENTS / "repl_mailer.py"
    source = agent.read_text(encoding="utf-8").splitlines()
    text, _ = _adapter(agent, tmp_path)
    cited = re.findall(r"repl_mailer\.py:(\d+)", text)
    assert cited
    for line in map(int, cited):
        assert source[line - 1].strip(), f"line {line} is empty"
    session = next(line for line in text.splitlines() if line.startswith("  path:"))
    number = int(re.search(r"repl_mailer\.py:(\d+)", session).group(1))  # type: ignore[union-attr]
    assert "save(CONVERSATION" in source[number - 1]


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("def main(:\n", "agent.py", r"agent\.py:1:\d+: not Python"),
        ("x = 1\n", "agent.txt", "not a Python file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, name: str, message: str
) -> None:
    agent = tmp_path / name
    agent.write_text(content, encoding="utf-8")
    status = main_init([str(agent), "--out", str(tmp_path / "a.yaml"), "--no-run"])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err


def test_an_existing_adapter_is_never_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adapter.yaml"
    out.write_text("name: mine\n", encoding="utf-8")
    assert main_init([str(AGENTS / "repl_mailer.py"), "--out", str(out), "--no-run"]) == 2
    assert "exists already" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "name: mine\n"
    assert main_init([str(AGENTS / "repl_mailer.py"), "--out", str(out), "--no-run", "--force"]) == 0
    assert "repl_mailer" in out.read_text(encoding="utf-8")


def test_an_agent_with_no_tool_of_the_suite_is_a_blocking_todo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json\n\ndef main():\n    while True:\n"
        "        text = input('> ')\n        print(json.dumps(text))\n",
        encoding="utf-8",
    )
    status, printed = _init(agent, tmp_path / "adapter.yaml", capsys)
    assert status == 1
    assert "TODO: agent.py: none of its tools (none found) matches one of the suite's" in printed


def test_a_seed004_ledger_with_its_own_words_is_mapped(tmp_path: Path) -> None:
    """http_agent: {"kind": "ledger", ...} lines, a refusal it calls denied, its approval
    prompt written with sys.stdout.write before sys.stdin.readline, services over HTTP."""
    _, data = _adapter(ROOT / "examples" / "http_agent" / "agent.py", tmp_path)
    assert data["session"] == {
        "path": ".http-agent/session.jsonl",
        "type_field": "kind",
        "ledger_type": "ledger",
        "statuses": {"denied": "rejected", "error": "failed"},
    }
    assert data["approvals"]["prompt"] == r"Approve (?P<again>again )?(?P<tool>\w+) \(\S+\)\? \[y/n\] "
    assert data["services"] == ["mail", "orders"]
    assert data["env"]["HTTP_AGENT_MAIL_URL"] == "{mail_url}"


def test_a_session_not_found_is_read_from_the_model_requests_not_a_default_path(tmp_path: Path) -> None:
    """seed000_agent names its session file from an id at run time: not found by reading."""
    text, data = _adapter(ROOT / "examples" / "seed000_agent" / "agent.py", tmp_path)
    assert data["session"] == {"readable": False}
    assert "# TODO: agent.py: no JSONL append" in text


def test_an_environment_default_built_from_a_constant_path_is_the_session(tmp_path: Path) -> None:
    """memo_agent: Journal(Path(os.environ.get("MEMO_AGENT_JOURNAL", str(JOURNAL)))), with
    JOURNAL = Path(".memo") / "journal.jsonl"; its records say entry: chat."""
    _, data = _adapter(ROOT / "examples" / "memo_agent" / "agent.py", tmp_path)
    assert data["session"]["path"] == ".memo/journal.jsonl"
    assert (data["session"]["type_field"], data["session"]["message_type"]) == ("entry", "chat")
    assert data["env"]["MEMO_AGENT_JOURNAL"] == "{session}"


@pytest.mark.parametrize(
    ("folder", "framework"), [("langgraph_agent", "langgraph"), ("openai_agents_agent", "openai-agents")]
)
def test_a_framework_agent_is_told_to_use_framework_and_factory(
    tmp_path: Path, folder: str, framework: str
) -> None:
    result = draft(read_agent(ROOT / "examples" / folder / "agent.py"), suite_tools(), here=tmp_path)
    assert result.blocked
    assert (
        f"built on {framework} (a framework agent); write framework: {framework} and factory:"
        in result.todos[0].text
    )


def test_a_missing_scenario_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adapter.yaml"
    status = main_init(
        [str(AGENTS / "repl_mailer.py"), "--out", str(out), "--scenario", str(tmp_path / "no.yaml")]
    )
    err = capsys.readouterr().err
    assert status == 2 and "--scenario" in err and "no such file" in err
    assert not out.exists()


def test_the_schema_line_names_the_installed_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "deeper" / "adapter.yaml"
    assert _init(AGENTS / "repl_mailer.py", out, capsys)[0] == 0
    first = out.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    schema = Path(first.partition("$schema=")[2])
    assert (schema if schema.is_absolute() else out.parent / schema).resolve().name == "adapter.schema.json"
    assert (schema if schema.is_absolute() else out.parent / schema).is_file()


def test_a_journal_class_built_with_a_constant_path_is_the_session(tmp_path: Path) -> None:
    """real_shell: Journal(JOURNAL).write opens self.path; memo_agent's save_note calls
    file.write on a file it opened itself, which is no call of its Journal.write."""
    _, shell = _adapter(ROOT / "tests" / "golden" / "real_shell" / "agent.py", tmp_path)
    assert shell["session"]["path"] == ".shell/journal.jsonl"
    _, memo = _adapter(ROOT / "examples" / "memo_agent" / "agent.py", tmp_path)
    assert ".memo/journal.jsonl" not in [effect.get("jsonl") for effect in memo.get("effects") or ()]


def _rules_and_lines(text: str, data: dict[str, object]) -> list[tuple[dict[str, str], list[int]]]:
    """Each results: rule with the agent lines its comment cites."""
    rules = data["results"]
    assert isinstance(rules, list)
    block = text.split("\nresults:", 1)[1].split("\ncatalogue:", 1)[0].splitlines()[1:]
    return [
        (rule, [int(n) for n in re.findall(r"\.py:(\d+)", line)])
        for rule, line in zip(rules, block, strict=True)
    ]


def test_sentences_its_tools_return_become_results_rules_by_where_they_are_returned(tmp_path: Path) -> None:
    """inline_mailer's deliver returns a sentence on its plain path, one after ``if not ...``
    and one from an ``except`` handler, and raises on a bad address: an error rule from the
    literal start of each failure, default succeeded, and each rule cites its return line;
    the raise gives none (an exception is no Tool Result)."""
    agent = AGENTS / "inline_mailer.py"
    source = agent.read_text(encoding="utf-8").splitlines()
    text, data = _adapter(agent, tmp_path)
    cited = _rules_and_lines(text, data)
    assert [rule for rule, _ in cited] == [
        {"regex": "^no recipient given; nothing was sent", "category": "error"},
        {"regex": "^mail not queued:", "category": "error"},
        {"default": "succeeded"},
    ]
    for _, lines in cited:
        assert lines and all(source[n - 1].strip().startswith("return") for n in lines), lines
    assert "raise" not in "".join(source[n - 1] for _, lines in cited for n in lines)
    assert "# TODO:" not in text
    # The rules read the agent's own sentences as they are: the success is no error.
    rules = [(re.compile(r["regex"]), r["category"]) for r, _ in cited if "regex" in r]
    for sentence, category in [
        ("mail to ann@example.com queued", "succeeded"),
        ("mail not queued: [Errno 28] No space left on device", "error"),
        ("no recipient given; nothing was sent", "error"),
    ]:
        assert next((c for r, c in rules if r.search(sentence)), "succeeded") == category


def test_an_inline_dispatch_dict_marks_the_function_it_holds(tmp_path: Path) -> None:
    """{"send_mail": deliver}[name](**arguments) is built at each call from the module's
    attributes: the rule on deliver fires, so it is where after_side_effect goes."""
    text, data = _adapter(AGENTS / "inline_mailer.py", tmp_path)
    assert data["catalogue"] == {
        "send_email": {
            "name": "send_mail",
            "arguments": {"to": "recipient", "subject": "title", "body": "text"},
        }
    }
    side = [r for r in data["boundaries"] if r["boundary"] == "after_side_effect"]
    assert side == [{"function": "deliver", "boundary": "after_side_effect"}]
    assert "held in a dict written where it is used (inline_mailer.py:" in text
    assert data["effects"] == [{"tool": "send_email", "counts": "emails", "jsonl": "outbox.jsonl"}]


def test_schemas_from_a_comprehension_over_tuples_and_an_if_elif_dispatch(tmp_path: Path) -> None:
    """spec_orders: [{"type": "function", "function": {"name": name, ...}} for name, description,
    properties in SPECS]; run_tool's ``if name == "order_supplies": place(...)``."""
    findings = read_agent(AGENTS / "spec_orders.py")
    assert {(t.name, t.parameters, t.function, t.branch) for t in findings.tools} == {
        ("order_supplies", ("product", "count"), "place", "run_tool"),
        ("stock", ("product",), "count_left", "run_tool"),
    }
    text, data = _adapter(AGENTS / "spec_orders.py", tmp_path)
    assert data["catalogue"] == {
        "create_order": {"name": "order_supplies", "arguments": {"item": "product", "quantity": "count"}}
    }
    assert {"function": "place", "boundary": "after_side_effect"} in data["boundaries"]
    assert "called by name where run_tool branches on 'order_supplies'" in text
    assert data["results"] == [{"regex": "^order failed:", "category": "error"}, {"default": "succeeded"}]
    assert data["effects"][0]["sqlite"]["query"] == "SELECT rowid, product, count FROM orders"


def test_schemas_from_a_helper_over_tuples_and_a_match_dispatch(tmp_path: Path) -> None:
    """match_mailer: TOOLS = [schema(*spec) for spec in SPECS], each spec (name, description,
    [parameter names]); execute's ``match name: case "send_mail": return deliver(**a)``:
    what deliver returns is the Tool Result."""
    findings = read_agent(AGENTS / "match_mailer.py")
    assert {(t.name, t.parameters, t.function) for t in findings.tools} == {
        ("send_mail", ("recipient", "title", "text"), "deliver"),
        ("list_mail", (), "listing"),
    }
    _, data = _adapter(AGENTS / "match_mailer.py", tmp_path)
    assert data["catalogue"]["send_email"] == {
        "name": "send_mail",
        "arguments": {"to": "recipient", "subject": "title", "body": "text"},
    }
    assert {"function": "deliver", "boundary": "after_side_effect"} in data["boundaries"]
    assert data["results"] == [{"regex": "^mail not queued:", "category": "error"}, {"default": "succeeded"}]


def test_the_five_minute_agent_gets_sentence_rules_and_no_todo(tmp_path: Path) -> None:
    """examples/five_minutes/shop_agent.py returns f"sent to {to}" and f"order {order} placed":
    read as auto they were "error" (told error, but it happened: a false red)."""
    text, data = _adapter(ROOT / "examples" / "five_minutes" / "shop_agent.py", tmp_path)
    assert data["results"] == [{"default": "succeeded"}]
    assert "# TODO:" not in text
    side = {r["function"] for r in data["boundaries"] if r["boundary"] == "after_side_effect"}
    assert side == {"send_email", "create_order"}


def test_memo_agent_sentences_in_an_if_elif_on_its_tool_names_give_its_rules(tmp_path: Path) -> None:
    """memo_agent's run_tool branches on call.tool and returns (phase, sentence): its words
    and phases give the rules its hand-written adapter has, and the functions its branches
    call by name get the send's and the order's rules."""
    text, data = _adapter(ROOT / "examples" / "memo_agent" / "agent.py", tmp_path)
    assert data["results"] == [
        {"regex": "^UNSURE:", "category": "uncertain"},
        {"regex": "^ERROR:", "category": "error"},
        {"regex": "^ALREADY PLACED: order", "category": "replayed"},
        {"default": "succeeded"},
    ]
    side = {r["function"] for r in data["boundaries"] if r["boundary"] == "after_side_effect"}
    assert {"deliver_mail", "place_order"} <= side
    assert "no function of its own runs" not in text


@pytest.mark.parametrize(
    ("body", "results", "todo"),
    [
        # JSON objects: read by their shape
        ('    return json.dumps({"sent": to})\n', "auto", ""),
        # a branch that is no error check: what it says is not known
        (
            '    if len(to) > 50:\n        return "long address, sent anyway"\n    return f"sent to {to}"\n',
            [{"default": "succeeded"}],
            "send_email returns 'long address, sent anyway...' in a branch init cannot classify",
        ),
        # an error whose start a success shares: no rule could tell them apart
        (
            '    try:\n        pass\n    except OSError:\n        return f"mail {to} not sent"\n'
            '    return f"mail {to} sent"\n',
            [{"default": "succeeded"}],
            "which starts as a success does ('mail ')",
        ),
        # sentences wrapped into JSON on their way to the model: the Tool Result is JSON
        (
            '    return f"sent to {to}"\n\n\ndef run(call):\n'
            '    return {"role": "tool", "tool_call_id": call["id"], '
            '"content": json.dumps({"result": send_email(**call["arguments"])})}\n',
            "auto",
            "",
        ),
        # a state check (nothing sent yet) is not read as an error check
        (
            '    if not os.path.exists(to):\n        return "new address"\n    return f"sent to {to}"\n',
            [{"default": "succeeded"}],
            "send_email returns 'new address...' in a branch init cannot classify",
        ),
    ],
    ids=["json", "branch", "clash", "wrapped", "state-check"],
)
def test_what_init_cannot_classify_is_a_todo_and_json_stays_auto(
    tmp_path: Path, body: str, results: object, todo: str
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, os\n\n"
        'TOOLS = [{"type": "function", "function": {"name": "send_email", "parameters": '
        '{"type": "object", "properties": {"to": {}, "subject": {}, "body": {}}}}}]\n\n\n'
        "def send_email(to, subject, body):\n" + body + "\n\n"
        "def main():\n    while True:\n        input('> ')\n",
        encoding="utf-8",
    )
    result = draft(read_agent(agent), suite_tools(), here=tmp_path, input_modes=input_modes())
    assert yaml.safe_load(result.text)["results"] == results
    results_todos = [t.text for t in result.todos if "returns" in t.text]
    if todo:
        assert len(results_todos) == 1 and todo in results_todos[0], result.todos
        assert f"# TODO: {results_todos[0]}" in result.text
    else:
        assert not results_todos


def test_a_helper_called_with_the_unpacked_names_of_each_tuple_reads_them(tmp_path: Path) -> None:
    """[schema(name, text, params) for name, text, params in SPECS]: the name is the tuple's
    first item, its parameters the list after it."""
    agent = tmp_path / "agent.py"
    agent.write_text(
        "SPECS = [\n"
        '    ("notify", "Send an email.", ["recipient", "subject", "body"]),\n'
        '    ("buy", "Place an order.", ["item", "quantity"]),\n'
        "]\n\n\n"
        "def schema(name, text, params):\n"
        '    return {"type": "function", "function": {"name": name, "description": text}}\n\n\n'
        "TOOLS = [schema(name, text, params) for name, text, params in SPECS]\n",
        encoding="utf-8",
    )
    tools = {(t.name, t.parameters, t.line) for t in read_agent(agent).tools}
    assert tools == {("notify", ("recipient", "subject", "body"), 2), ("buy", ("item", "quantity"), 3)}
