"""Learner answers that the checker tests run: real, linted functions, one module per lab."""


def stub(*args):
    """What tools/make_labs.py leaves in a student lab (a bare raise means the same)."""
    raise NotImplementedError
