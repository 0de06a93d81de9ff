"""Install the course's JupyterLab settings: quiet for a room of attendees (``make lab``).

JupyterLab reads ``overrides.json`` from its application settings folder,
``<prefix>/share/jupyter/lab/settings``, and uses it as the default of every setting it names
(a user can still change them in the Settings editor). The course's overrides
(``tools/jupyterlab_overrides.json``):

- no update check and no news feed: no pop-up asks thirty attendees whether to fetch news,
  and nothing contacts a web site when the room's network is slow or closed;
- no extension manager: it queries PyPI and invites installing extensions mid-workshop;
- Markdown files open rendered, so ``jupyter lab README.md`` shows the course's README as
  its landing page.

    python -m tools.lab_settings                 # into this Python's prefix (the venv)
    python -m tools.lab_settings --prefix DIR    # into DIR/share/jupyter/lab/settings
    python -m tools.lab_settings --check         # exit 1 if the installed file differs

Settings already in an ``overrides.json`` there are kept unless the course sets them too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as a file (`python tools/lab_settings.py`), not as `python -m tools.lab_settings`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT

OVERRIDES = REPO_ROOT / "tools" / "jupyterlab_overrides.json"


def settings_dir(prefix: str | Path = sys.prefix) -> Path:
    """JupyterLab's application settings folder under ``prefix``."""
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings"


def course_overrides() -> dict:
    return json.loads(OVERRIDES.read_text(encoding="utf-8"))


def merged(existing: dict, ours: dict) -> dict:
    """``existing`` with the course's plugins' settings merged in (ours win, key by key)."""
    result = {plugin: dict(values) for plugin, values in existing.items()}
    for plugin, values in ours.items():
        result.setdefault(plugin, {}).update(values)
    return result


def install(prefix: str | Path = sys.prefix) -> Path:
    """Write the merged ``overrides.json`` under ``prefix``; return its path."""
    target = settings_dir(prefix) / "overrides.json"
    existing = {}
    if target.exists():
        try:
            existing = json.loads(target.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise SystemExit(
                f"{target} is not valid JSON ({err}): fix or delete it, then run this again"
            ) from err
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(merged(existing, course_overrides()), indent=2) + "\n", "utf-8")
    return target


def is_installed(prefix: str | Path = sys.prefix) -> bool:
    target = settings_dir(prefix) / "overrides.json"
    if not target.exists():
        return False
    current = json.loads(target.read_text(encoding="utf-8"))
    return merged(current, course_overrides()) == current


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", default=sys.prefix, help="default: this Python's prefix")
    parser.add_argument("--check", action="store_true", help="only check, install nothing")
    args = parser.parse_args(argv)
    if args.check:
        ok = is_installed(args.prefix)
        state = "up to date" if ok else "missing or different"
        print(f"{settings_dir(args.prefix) / 'overrides.json'}: {state}")
        return 0 if ok else 1
    print(f"JupyterLab settings for the course: {install(args.prefix)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
