"""Rich assertion messages (pytest's rewriting) in the shared parity helpers too."""
import pytest

pytest.register_assert_rewrite("tests.helpers.parity", "tests.helpers.hf",
                              "tests.helpers.seq2seq")
