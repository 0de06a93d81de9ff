"""tools/commit_msg.py and its commit-msg hook: the commit convention of CONTRIBUTING.md."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.helpers import ROOT
from tools import commit_msg


def test_a_subject_of_72_characters_then_a_blank_line_passes():
    assert commit_msg.problems("x" * 72 + "\n\nWhy it changed.\n") == []
    assert commit_msg.problems("Fix a link\n") == []  # a body is welcome, not required


def test_a_long_subject_or_a_missing_blank_line_is_named():
    (long,) = commit_msg.problems("x" * 73 + "\n\nbody")
    assert "73 characters, more than 72" in long
    (joined,) = commit_msg.problems("Subject\nbody right under it")
    assert "second line must be blank" in joined
    assert commit_msg.problems("# only a comment\n") == [
        "the message is empty: write a subject that says what changed"
    ]


def test_git_s_comments_and_what_follows_the_scissors_do_not_count():
    message = "# Please enter the commit message\nShort\n\nBody\n" + commit_msg.SCISSORS
    assert commit_msg.problems(message + "\n" + "y" * 200 + "\n") == []


def test_the_script_exits_1_with_one_line_per_problem(tmp_path):
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text("z" * 80 + "\nno blank line\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "tools/commit_msg.py", str(path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 2, done.stderr
    assert commit_msg.main([]) == 2


def test_pre_commit_install_also_installs_the_commit_msg_hook():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert "commit-msg" in config["default_install_hook_types"]
    assert config["default_stages"] == ["pre-commit"]  # the lint does not run on the message
    hooks = [h for r in config["repos"] if r["repo"] == "local" for h in r["hooks"]]
    (hook,) = [h for h in hooks if h["id"] == "commit-subject"]
    assert hook["stages"] == ["commit-msg"] and hook["entry"] == "python tools/commit_msg.py"
