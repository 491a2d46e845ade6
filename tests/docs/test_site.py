"""The docs site: it builds with warnings as errors, its generated reference is current and complete
(every config key, CLI command, metric the code names, alarm and public name), and the README fits two
screens and links into it."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(ROOT / "docs"))
import gen_reference  # noqa: E402

REFERENCE = ROOT / "docs" / "reference"
README_MAX_LINES = 150
SECTIONS = ("get-started", "concepts", "how-to", "reference", "results")


def test_the_site_builds_strict_with_no_warning(built_site):
    _, proc = built_site
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "WARNING" not in log, log[-5000:]


def test_the_generated_reference_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _schema_keys(cls, prefix: str = "") -> list[str]:
    """Every dotted key of a config dataclass, read from the schema itself (not from the generator)."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            keys += _schema_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def _page_keys(text: str) -> list[str]:
    """The first cell of every table row, when it is one `code` span."""
    return re.findall(r"(?m)^\| `([^`]+)` \|", text)


def test_every_config_key_is_in_the_config_reference(site):
    from rlvr.config.commands import EvalCommandConfig, SftCommandConfig
    from rlvr.config.schema import Config

    text = (REFERENCE / "config.md").read_text()
    run_part, _, commands_part = text.partition("## `rlvr sft` keys")
    sft_part, _, eval_part = commands_part.partition("## `rlvr eval` keys")
    listed = {k for k in _page_keys(run_part) if not k.startswith("check_")}
    engines = set(_page_keys(run_part.partition("## Engines")[2]))
    schema = set(_schema_keys(Config))
    assert schema - listed == set(), "config keys missing from docs/reference/config.md"
    assert listed - engines - {k for k in listed if k.startswith("check")} - schema == set(), "stale keys"
    assert set(_schema_keys(SftCommandConfig)) == set(_page_keys(sft_part))
    assert set(_schema_keys(EvalCommandConfig)) == set(_page_keys(eval_part))
    html = (site / "reference" / "config.html").read_text()
    missing = [k for k in schema if f"<code>{k}</code>" not in html]
    assert not missing, f"keys missing from the built page: {missing}"


def test_every_engine_and_cli_command_is_in_the_reference():
    from rlvr.cli.main import build_parser
    from rlvr.rollout.engines import ENGINES

    config = (REFERENCE / "config.md").read_text().partition("## Engines")[2]
    assert set(ENGINES) <= set(_page_keys(config))
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    cli = (REFERENCE / "cli.md").read_text()
    assert [f"rlvr {name}" for name in sub.choices] == re.findall(r"(?m)^## `(rlvr \w+)`$", cli)


def _code_metric_names() -> set[str]:
    """Strings of src/rlvr that look like metric names: NAMESPACE/... (f-string parts as {})."""
    out = set()
    for path in (ROOT / "src" / "rlvr").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            m = re.fullmatch(r"([a-z_]+)/[A-Za-z0-9_@{}.]*[A-Za-z0-9@}]", text)   # not a prefix (x/, x_)
            if m and m.group(1) in gen_reference.NAMESPACES:
                out.add(text)
    return out


def test_every_metric_the_code_names_is_in_the_metrics_reference():
    names = gen_reference.metric_names()
    page = (REFERENCE / "metrics.md").read_text()
    assert all(f"`{n}`" in page for n in names)
    missing = []
    for text in sorted(_code_metric_names()):
        if "{}" in text:   # an f-string: some catalogue name must be an instance of it, or match it
            rx = re.compile(re.escape(text).replace(r"\{\}", ".+") + r"\Z")
            ok = any(rx.match(n) for n in names) or gen_reference.in_catalogue(text.replace("{}", "x"))
        else:
            ok = gen_reference.in_catalogue(text)
        if not ok:
            missing.append(text)
    assert not missing, f"metric names in src/rlvr missing from gen_reference.METRICS: {missing}"
    assert len(_code_metric_names()) > 50   # the scan sees the code (a broken scan finds nothing)


def test_every_alarm_is_in_the_metrics_reference():
    tree = ast.parse((ROOT / "src" / "rlvr" / "monitor" / "doctor.py").read_text())
    alarms = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
              and getattr(n.func, "id", None) == "_alarm"}
    page = (REFERENCE / "metrics.md").read_text().partition("## Alarms")[2]
    assert len(alarms) >= 15 and alarms == set(_page_keys(page))
    doctor_page = (ROOT / "docs" / "concepts" / "doctor.md").read_text()
    assert all(f"`{a}`" in doctor_page for a in alarms)


def test_every_public_name_is_in_the_api_reference(site):
    import rlvr

    page = (REFERENCE / "api.md").read_text()
    html = (site / "reference" / "api.html").read_text()
    for name, module in rlvr._SURFACE.items():
        assert f"::: {module}.{name}\n" in page
        assert re.search(rf'id="{re.escape(module)}(\.\w+)*\.{name}"', html), name


def test_readme_fits_two_screens_and_links_into_the_site():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    for command in ("make quickstart", "make test", "make docs"):
        assert command in readme
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert all((ROOT / link).is_file() for link in links), [x for x in links if not (ROOT / x).is_file()]
    assert {Path(link).parts[1] for link in links} >= set(SECTIONS)
    assert '"verifier": "math"' in readme and "train_path" in readme   # the own-data example
