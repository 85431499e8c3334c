"""Every public estimator's Examples section runs as written (doctest), so none can rot."""

from __future__ import annotations

import doctest
import sys

import pytest

from wadiro_models import REGISTRY, SCNN

# every estimator the registry can make, and the plain SCNN it does not list
ESTIMATORS = sorted({entry.estimator for entry in REGISTRY.values()} | {SCNN},
                    key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_the_class_docstring_examples_run_and_print_what_they_say(cls):
    assert "\n    Examples\n    --------\n" in cls.__doc__, f"{cls.__name__} has no Examples"
    finder = doctest.DocTestFinder(recurse=False)
    tests = [test for test in finder.find(cls, cls.__name__, module=sys.modules[cls.__module__],
                                          globs={}) if test.examples]
    assert len(tests) == 1 and len(tests[0].examples) >= 3, cls.__name__
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(tests[0], out=report.append)
    assert result.attempted == len(tests[0].examples)
    assert result.failed == 0, "".join(report)
