"""Property-based API tests generated from the app's own OpenAPI schema: whatever a client
sends that the schema allows or not, the server never answers 5xx.

Derandomized (the ``ci`` Hypothesis profile); ``make fuzz`` explores further."""

from __future__ import annotations

import os

import schemathesis
from hypothesis import settings
from hypothesis_budget import examples
from schemathesis.checks import not_a_server_error

from fabricsim.web.app import create_app
from fabricsim.web.limits import Limits

APP = create_app(store=":memory:", limits=Limits(workers=1, max_wall_s=20.0))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)
#: Schemathesis merges its own settings with ours: say derandomize outright, so CI draws
#: the same requests every run (``make fuzz`` sets the fuzz profile: random draws).
FIXED = os.environ.get("HYPOTHESIS_PROFILE", "ci") != "fuzz"


@schema.parametrize()
@settings(max_examples=examples(25), derandomize=FIXED, **({"database": None} if FIXED else {}))
def test_no_server_errors(case: schemathesis.Case) -> None:
    response = case.call()
    not_a_server_error_check(case, response)


def not_a_server_error_check(case: schemathesis.Case, response: object) -> None:
    """Fail on any 5xx answer (schemathesis' own check, with its message)."""
    case.validate_response(response, checks=(not_a_server_error,))  # type: ignore[arg-type]
