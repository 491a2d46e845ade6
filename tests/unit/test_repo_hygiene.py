"""Every reference in the repository resolves inside it: no build-machine paths, no citation of a
document the repository does not hold.

The rules, over every text file git tracks or would track (source, docs, shell, Makefile, YAML,
TOML; this file itself excepted, since it spells the patterns out):

1. No absolute path into a user's or a build machine's tree: `/work/`, `/root/`, `/home/`,
   `/Users/`. `/tmp` is allowed: code uses it at run time (the sandbox mounts a tmpfs there, a
   bench example unpacks into it), and it names no particular machine.
2. No relative path that climbs out of the repository (`../shared/NOTES.md` from the root).
3. Every `*.md` a file names exists: a path relative to that file's folder or to the repository
   root, or a bare name (`math.md`, as in a layout listing or `ROOT / "docs" / "math.md"`) that
   some file of the repository carries. An absolute `*.md` path never counts as in the repository.
   `mkdocs.yml` names its pages relative to its `docs_dir`, `docs/`, so there that folder counts too.
   Exceptions: links (`https://...`), and `verdict.md`, which experiments write at run time.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve()
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt"}
TEXT_NAMES = {"Makefile"}
SKIP_DIRS = {".git", ".venv", ".venv-bench", ".venv-vllm", ".whl", "runs", "build", "dist",
             "__pycache__", ".pytest_cache", ".hypothesis"}

MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|Users)/")
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
CLIMB = re.compile(r"(?<![\w./-])(?:\.\./)+[\w.-]+(?:/[\w.-]+)*")
MD_NAME = re.compile(r"(?<![\w/.-])[\w./-]*\w\.md\b")
RUNTIME_MD = {"verdict.md"}


def _is_text(path: Path) -> bool:
    if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
        return True
    if path.suffix:
        return False
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def repo_files(root: Path = REPO) -> list[Path]:
    """Tracked and not-ignored files (git), else every file outside build and venv folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=root, capture_output=True, check=True).stdout.decode()
        paths = [root / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in root.rglob("*") if not SKIP_DIRS & set(p.relative_to(root).parts)]
    return sorted(p for p in paths if p.is_file() and p.resolve() != SELF and _is_text(p))


def _cited_file_exists(path: Path, name: str, root: Path, md_names: set[str]) -> bool:
    if name.startswith("/"):
        return False
    if "/" not in name and name in md_names:
        return True
    if path.name == "mkdocs.yml" and (path.parent / "docs" / name).is_file():   # nav: docs_dir-relative
        return True
    return (path.parent / name).is_file() or (root / name.removeprefix("./")).is_file()


def problems_in(path: Path, text: str, root: Path = REPO, md_names: set[str] = frozenset()) -> list[str]:
    """`file:line: what` for every reference in `text` (the contents of `path`) that breaks a rule;
    `md_names`: the names of the repository's `*.md` files."""
    rel = path.relative_to(root)
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = URL.sub(" ", line)
        where = f"{rel}:{lineno}"
        out += [f"{where}: machine path {m.group()!r}" for m in MACHINE_PATH.finditer(line)]
        for m in CLIMB.finditer(line):
            target = (path.parent / m.group()).resolve()
            if not target.is_relative_to(root.resolve()):
                out.append(f"{where}: outside the repository {m.group()!r}")
        for m in MD_NAME.finditer(line):
            name = m.group()
            if Path(name).name in RUNTIME_MD:
                continue
            if not _cited_file_exists(path, name, root, md_names):
                out.append(f"{where}: cites {name!r}, not in the repository")
    return out


def test_no_machine_paths_and_no_citation_outside_the_repository():
    files = repo_files()
    md_names = {p.name for p in files if p.suffix == ".md"}
    found = [p for path in files for p in problems_in(path, path.read_text(errors="replace"), REPO, md_names)]
    assert not found, "\n".join(["references that do not resolve inside the repository:"] + found)


def test_the_rules_catch_the_cases_they_are_for(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("")
    src = tmp_path / "pkg" / "mod.py"
    src.parent.mkdir()
    (src.parent / "README.md").write_text("")
    lines = {
        '"""Design: see /wo' 'rk/shared/SANDBOX.md."""': ["machine path '/work/'",
                                                        "'/work/shared/SANDBOX.md'"],
        "# measured by ../../sha" "red/SCALEOUT.md": ["outside the repository", "cites '../../shared"],
        "# (measured by ../sha" "red/SCALEOUT.md)": ["cites '../shared/SCALEOUT.md'"],
        "# (DESIGN.md, 'Scaling out')": ["cites 'DESIGN.md'"],
        "cache = '/ho" "me/ci/.cache'": ["machine path '/home/'"],
        "# docs/notes.md, ../docs/notes.md, README.md, notes.md, runs/x/verdict.md": [],
        "# docs/missing.md, pkg/notes.md": ["cites 'docs/missing.md'", "cites 'pkg/notes.md'"],
        "# https://github.com/org/repo/blob/main/GUIDE.md": [],
        "workdir = '/tmp'; out = '/tmp/he'; p = os.path.expanduser('~/x')": [],
    }
    for text, expected in lines.items():
        found = problems_in(src, text, tmp_path, {"notes.md", "README.md"})
        assert len(found) == len(expected), (text, found)
        assert all(e in f for e, f in zip(expected, found)), (text, found)
    (tmp_path / "docs" / "guide").mkdir()
    (tmp_path / "docs" / "guide" / "page.md").write_text("")
    site = tmp_path / "mkdocs.yml"   # the site's nav names pages under docs/, and only it does
    assert problems_in(site, "  - Guide: guide/page.md\n  - Lost: lost/page.md", tmp_path, set()) == [
        "mkdocs.yml:2: cites 'lost/page.md', not in the repository"]
    assert problems_in(src, "# see guide/page.md", tmp_path, set()) == [
        "pkg/mod.py:1: cites 'guide/page.md', not in the repository"]
