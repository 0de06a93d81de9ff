"""Learner answers that the checker tests run: real, linted functions, one module per lab."""


def stub(*args):
    """What tools/make_labs.py leaves in a student lab (a bare raise means the same)."""
    raise NotImplementedError


def returning(value):
    """An answer that returns ``value``: a prediction, a diagnosis, a table of choices."""

    def answer():
        return value

    return answer
