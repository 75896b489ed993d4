"""harness.core.categories: any agent's Tool Result read as what the model was told."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crashmatrix.harness.core.categories import (
    AUTO,
    BUILTIN_MAPPINGS,
    CATEGORIES,
    CRASHMATRIX,
    SEED000,
    SEED004,
    CategoryRule,
    ResultMapping,
    category_of,
    told_for_code,
)
from crashmatrix.harness.input.yamlfile import load_schema


def _json(**fields: Any) -> str:
    return json.dumps(fields)


# --- the vocabulary -------------------------------------------------------------------------


def test_categories_are_the_ones_a_scenarios_told_and_category_may_name() -> None:
    # The scenario schema validates told:/category: on its own list; the two must not drift.
    schema = load_schema("scenario.schema.json")
    assert list(CATEGORIES) == schema["$defs"]["category"]["enum"]


def test_every_category_a_builtin_mapping_can_give_is_a_known_category() -> None:
    for mapping in (CRASHMATRIX, SEED004, SEED000, AUTO):
        given = {rule.category for rule in mapping.rules} | {mapping.default}
        assert given <= set(CATEGORIES), mapping.name


def test_builtin_mappings_are_the_names_an_adapter_file_may_write_each_under_its_own_name() -> None:
    # adapter_file reads ``results: NAME`` through BUILTIN_MAPPINGS, and the verdict looks the
    # vocabulary up by the mapping's name: the key and the name must agree.
    schema = load_schema("adapter.schema.json")
    allowed = schema["properties"]["results"]["oneOf"][0]["enum"]
    assert sorted(BUILTIN_MAPPINGS) == sorted(allowed)
    assert {key: mapping.name for key, mapping in BUILTIN_MAPPINGS.items()} == {
        "crashmatrix": "crashmatrix",
        "seed004": "seed004",
        "seed000": "seed000",
        "auto": "auto",
    }
    assert BUILTIN_MAPPINGS["crashmatrix"] is CRASHMATRIX
    assert BUILTIN_MAPPINGS["seed004"] is SEED004
    assert BUILTIN_MAPPINGS["seed000"] is SEED000
    assert BUILTIN_MAPPINGS["auto"] is AUTO


# --- CategoryRule ---------------------------------------------------------------------------


def test_an_equals_rule_holds_only_for_that_value_of_the_field() -> None:
    rule = CategoryRule("rejected", "code", "REJECTED")
    assert rule.holds("", {"code": "REJECTED"})
    assert not rule.holds("", {"code": "CONFLICT"})
    assert not rule.holds("", {"other": "REJECTED"})


def test_an_equals_null_rule_tells_an_explicit_null_from_a_missing_field() -> None:
    rule = CategoryRule("succeeded", "error", None)
    assert rule.holds("", {"error": None})
    assert not rule.holds("", {})


def test_a_rule_with_a_field_but_no_test_never_holds() -> None:
    # No equals, in or present: nothing to compare against, so no content matches it.
    rule = CategoryRule("error", "code")
    assert not rule.holds("", {"code": "TIMEOUT"})
    assert not rule.holds("", {"code": None})


def test_an_in_rule_holds_for_any_of_its_values() -> None:
    rule = CategoryRule("uncertain", "status", one_of=("unknown", "uncertain"))
    assert rule.holds("", {"status": "unknown"})
    assert rule.holds("", {"status": "uncertain"})
    assert not rule.holds("", {"status": "failed"})
    assert not rule.holds("", {})


def test_a_dotted_field_reads_into_nested_objects() -> None:
    rule = CategoryRule("conflict", "error.kind", "conflict")
    assert rule.holds("", {"error": {"kind": "conflict"}})
    assert not rule.holds("", {"error": {"kind": "timeout"}})
    # A path through a value that is not an object is a missing field, not an error.
    assert not rule.holds("", {"error": "conflict"})
    assert not rule.holds("", {"error.kind": "conflict"})


def test_a_present_rule_counts_null_as_absent() -> None:
    present = CategoryRule("uncertain", "pending", present=True)
    absent = CategoryRule("succeeded", "pending", present=False)
    assert present.holds("", {"pending": "x"})
    assert present.holds("", {"pending": False})  # a falsy value is still there
    assert not present.holds("", {"pending": None})
    assert not present.holds("", {})
    assert absent.holds("", {})
    assert absent.holds("", {"pending": None})
    assert not absent.holds("", {"pending": 0})


def test_a_field_rule_on_content_that_is_not_a_json_object_never_holds() -> None:
    rule = CategoryRule("error", "ok", False)
    assert not rule.holds("not json", None)
    assert not rule.holds("[false]", [False])
    assert not CategoryRule("error", "ok", present=True).holds("[1]", [1])


def test_a_regex_rule_searches_the_text_anywhere_not_only_at_the_start() -> None:
    rule = CategoryRule("uncertain", regex=r"may or may not")
    assert rule.holds("The email may or may not have been sent.", None)
    assert not rule.holds("The email was sent.", None)


def test_a_regex_rule_reads_the_raw_text_even_of_json_content() -> None:
    rule = CategoryRule("error", regex=r'"code":\s*"TIMEOUT"')
    text = _json(ok=False, code="TIMEOUT")
    assert rule.holds(text, json.loads(text))


# --- ResultMapping --------------------------------------------------------------------------


def test_a_mapping_gives_the_category_of_the_first_rule_that_holds() -> None:
    mapping = ResultMapping(
        "team",
        (
            CategoryRule("uncertain", regex="unknown"),
            CategoryRule("error", regex="failed"),
        ),
        default="succeeded",
    )
    assert mapping.category("failed: state unknown") == "uncertain"  # both hold; the first wins
    assert mapping.category("failed") == "error"
    assert mapping.category("Sent.") == "succeeded"


def test_a_mapping_without_a_default_reads_what_no_rule_matches_as_error() -> None:
    mapping = ResultMapping("team", (CategoryRule("succeeded", regex="^Sent"),))
    assert mapping.category("Sent.") == "succeeded"
    assert mapping.category("Something else") == "error"


def test_a_mapping_reads_none_and_empty_content_as_its_default() -> None:
    mapping = ResultMapping("team", (CategoryRule("succeeded", "ok", True),), default="uncertain")
    assert mapping.category(None) == "uncertain"
    assert mapping.category("") == "uncertain"


def test_a_regex_rule_can_match_empty_content() -> None:
    # None reads as "", so a rule for an empty result sees one.
    mapping = ResultMapping("team", (CategoryRule("uncertain", regex=r"^$"),))
    assert mapping.category(None) == "uncertain"
    assert mapping.category("") == "uncertain"
    assert mapping.category("x") == "error"


def test_a_json_mapping_reads_plain_text_as_its_default() -> None:
    assert CRASHMATRIX.category("The email was sent.") == "error"
    assert SEED000.category("completed") == "error"
    lenient = ResultMapping("lenient", CRASHMATRIX.rules, default="succeeded")
    assert lenient.category("The email was sent.") == "succeeded"


def test_a_mapping_mixes_field_and_regex_rules_on_the_same_content() -> None:
    mapping = ResultMapping(
        "team",
        (
            CategoryRule("rejected", "status", "denied"),
            CategoryRule("uncertain", regex="UNCERTAIN"),
        ),
    )
    assert mapping.category(_json(status="denied")) == "rejected"
    assert mapping.category(_json(status="x", note="UNCERTAIN")) == "uncertain"
    assert mapping.category("UNCERTAIN, not json") == "uncertain"


# --- the built-in mappings ------------------------------------------------------------------

CRASHMATRIX_RESULTS = [
    (_json(ok=True, code=None), "succeeded"),
    (_json(ok=True), "succeeded"),
    (_json(ok=True, code=None, recovery="result_replayed"), "replayed"),
    (_json(ok=False, code="TIMEOUT"), "error"),
    (_json(ok=False, code="NOT_FOUND"), "error"),
    (_json(ok=False, code="PERMISSION_DENIED"), "error"),
    (_json(ok=False, code="SIDE_EFFECT_UNCERTAIN"), "uncertain"),
    (_json(ok=False, code="MANUAL_CHECK_REQUIRED"), "uncertain"),
    (_json(ok=False, code="CONFLICT"), "conflict"),
    (_json(ok=False, code="ARGUMENTS_MISMATCH"), "conflict"),
    (_json(ok=False, code="REJECTED"), "rejected"),
    # The code decides before ok does: an uncertain result is never read as a plain error.
    (_json(ok=False, code="SIDE_EFFECT_UNCERTAIN", recovery="result_replayed"), "uncertain"),
    # Neither ok nor a known code: nothing was learned, read as the default.
    (_json(ok=None), "error"),
    (_json(result="hi"), "error"),
]


@pytest.mark.parametrize(("content", "category"), CRASHMATRIX_RESULTS)
def test_crashmatrix_reads_its_own_tool_results(content: str, category: str) -> None:
    assert category_of(content, CRASHMATRIX) == category


def test_seed004_is_crashmatrix_without_the_recovery_field() -> None:
    replayed = _json(ok=True, code=None, recovery="result_replayed")
    assert CRASHMATRIX.category(replayed) == "replayed"
    assert SEED004.category(replayed) == "succeeded"  # seed 004's shape has no recovery
    assert SEED004.rules == tuple(rule for rule in CRASHMATRIX.rules if rule.category != "replayed")
    assert SEED004.default == "error"


@pytest.mark.parametrize(("content", "category"), [(c, k) for c, k in CRASHMATRIX_RESULTS if k != "replayed"])
def test_seed004_reads_every_non_replayed_result_as_crashmatrix_does(content: str, category: str) -> None:
    assert category_of(content, SEED004) == category


@pytest.mark.parametrize(
    ("status", "category"),
    [
        ("rejected", "rejected"),
        ("unknown", "uncertain"),
        ("uncertain", "uncertain"),
        ("conflict", "conflict"),
        ("failed", "error"),
        ("error", "error"),
        ("succeeded", "succeeded"),
        ("completed", "succeeded"),  # seed 000's read-only reads
        ("ok", "succeeded"),
        ("pending", "error"),  # a status it does not know: the default
    ],
)
def test_seed000_reads_the_status_of_its_results(status: str, category: str) -> None:
    assert category_of(_json(status=status, result="x"), SEED000) == category


def test_seed000_ignores_crashmatrix_fields() -> None:
    assert SEED000.category(_json(ok=True, code=None)) == "error"


# --- auto -----------------------------------------------------------------------------------


def test_category_of_reads_with_auto_when_no_mapping_is_given() -> None:
    assert category_of(_json(ok=False, code="CONFLICT")) == "conflict"
    assert category_of(_json(status="unknown")) == "uncertain"


def test_auto_reads_a_result_with_ok_as_crashmatrix() -> None:
    assert AUTO.category(_json(ok=False, code="SIDE_EFFECT_UNCERTAIN")) == "uncertain"
    assert AUTO.category(_json(ok=True, recovery="result_replayed")) == "replayed"


def test_auto_reads_a_result_with_status_and_no_ok_as_seed000() -> None:
    assert AUTO.category(_json(status="unknown")) == "uncertain"
    assert AUTO.category(_json(status="completed")) == "succeeded"


def test_auto_prefers_ok_when_a_result_has_both_ok_and_status() -> None:
    # SEED000 would read status=unknown as uncertain; the ok shape comes first.
    assert AUTO.category(_json(ok=True, status="unknown")) == "succeeded"


def test_auto_counts_an_ok_field_that_is_null_as_the_crashmatrix_shape() -> None:
    # The marker is the field being there, not its value: ok: null picks crashmatrix, which
    # has no rule for it, even though status alone would have said uncertain.
    assert AUTO.category(_json(ok=None, status="unknown")) == "error"


@pytest.mark.parametrize("content", [None, "", "Email sent.", "[1, 2]", "42", _json(result="hi")])
def test_auto_reads_content_of_neither_shape_as_error(content: str | None) -> None:
    assert category_of(content) == "error"


def test_an_auto_mapping_uses_its_own_default_when_no_shape_fits() -> None:
    mapping = ResultMapping("mine", default="uncertain", choices=(("ok", CRASHMATRIX),))
    assert mapping.category("plain") == "uncertain"
    assert mapping.category(_json(ok=True)) == "succeeded"


def test_a_mapping_with_choices_ignores_its_own_rules() -> None:
    mapping = ResultMapping("mine", (CategoryRule("rejected", regex="."),), choices=(("status", SEED000),))
    assert mapping.category(_json(status="completed")) == "succeeded"
    assert mapping.category("anything") == "error"


def test_a_choice_marker_may_be_a_dotted_field() -> None:
    inner = ResultMapping("inner", (CategoryRule("conflict", "meta.code", "CONFLICT"),))
    mapping = ResultMapping("mine", choices=(("meta.code", inner),))
    assert mapping.category(_json(meta={"code": "CONFLICT"})) == "conflict"
    assert mapping.category(_json(meta={})) == "error"


# --- told_for_code --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "told"),
    [
        # null: the call succeeded; another agent may give a stored result as a plain success.
        (None, {"in": ["succeeded", "replayed"]}),
        ("REJECTED", "rejected"),
        ("SIDE_EFFECT_UNCERTAIN", "uncertain"),
        ("MANUAL_CHECK_REQUIRED", "uncertain"),
        ("CONFLICT", "conflict"),
        ("ARGUMENTS_MISMATCH", "conflict"),
        # Every other code is a failure with nothing done.
        ("TIMEOUT", "error"),
        ("PERMISSION_DENIED", "error"),
        ("NOT_FOUND", "error"),
        ("INVALID_ARGUMENTS", "error"),
    ],
)
def test_told_for_code_reads_one_code_through_crashmatrix(code: str | None, told: Any) -> None:
    assert told_for_code(code) == told


@pytest.mark.parametrize(
    ("code", "told"),
    [
        # The {in: [...]} expectations the shipped scenarios write.
        ({"in": [None, "SIDE_EFFECT_UNCERTAIN"]}, {"in": ["succeeded", "replayed", "uncertain"]}),
        ({"in": ["TIMEOUT", None]}, {"in": ["error", "succeeded", "replayed"]}),
        (
            {"in": [None, "REJECTED", "MANUAL_CHECK_REQUIRED"]},
            {"in": ["succeeded", "replayed", "rejected", "uncertain"]},
        ),
        ({"in": [None]}, {"in": ["succeeded", "replayed"]}),
        ({"in": ["TIMEOUT"]}, "error"),
    ],
)
def test_told_for_code_maps_an_in_expectation_option_by_option_in_order(code: Any, told: Any) -> None:
    assert told_for_code(code) == told


def test_told_for_code_gives_one_category_when_every_option_reads_the_same() -> None:
    assert told_for_code({"in": ["CONFLICT", "ARGUMENTS_MISMATCH"]}) == "conflict"
    assert told_for_code({"in": ["SIDE_EFFECT_UNCERTAIN", "MANUAL_CHECK_REQUIRED"]}) == "uncertain"


def test_told_for_code_lists_succeeded_and_replayed_once_however_often_null_appears() -> None:
    told = told_for_code({"in": [None, "TIMEOUT", None]})
    assert told == {"in": ["succeeded", "replayed", "error"]}


def test_told_for_code_reads_a_mapping_with_more_than_in_as_one_value() -> None:
    # Only exactly {in: [...]} is a list of options; any other object is a (non-null) code.
    assert told_for_code({"in": [None], "note": "x"}) == "error"


def test_every_category_told_for_code_gives_is_a_known_category() -> None:
    codes = [
        None,
        "REJECTED",
        "SIDE_EFFECT_UNCERTAIN",
        "MANUAL_CHECK_REQUIRED",
        "CONFLICT",
        "ARGUMENTS_MISMATCH",
        "TIMEOUT",
    ]
    told = told_for_code({"in": codes})
    assert isinstance(told, dict)
    assert set(told["in"]) <= set(CATEGORIES)
    assert sorted(told["in"]) == sorted(CATEGORIES)
