"""Every optional extra, hidden in turn: `rlvr train` with the option that needs it exits 2 with an
install line that works from a checkout, and writes nothing (no run directory).

A package is hidden the way a missing install looks to Python: `sys.modules[name] = None`, so
both `import name` and `importlib.util.find_spec(name)` fail. One fresh subprocess runs every case
through `rlvr.cli.main`, each with only its own package hidden.
"""

import json
import os
import subprocess
import sys
import textwrap

from rlvr.rollout.engines import ENGINES
from rlvr.training.extras import EXTRAS, engine_extras

ALL = EXTRAS + tuple(e for row in ENGINES.values() for e in engine_extras(row))

CASES = {   # extra: the command-line override that needs it
    "lora": "model.lora.r=8",
    "gym": "data.task=reasoning_gym:gcd",
    "verifiers": "data.task=verifiers:my_env:load_environment",
    "vllm": "rollout.engine=vllm",
    "ray": "rollout.engine=ray",
    "wandb": "run.trackers=[tensorboard,wandb]",
    "mlflow": "run.trackers=[mlflow]",
    "trackio": "run.trackers=[trackio]",
}

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    from rlvr.cli.main import main
    out = {}
    for extra, (module, override, run_dir) in json.loads(sys.argv[1]).items():
        hidden = sys.modules.get(module, "absent")
        sys.modules[module] = None            # the package looks uninstalled
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["train", "quickstart", "model.path=builtin:tiny-llama", "grpo.steps=1",
                         f"run.dir={run_dir}", override])
        if hidden == "absent":
            del sys.modules[module]
        else:
            sys.modules[module] = hidden
        out[extra] = [code, err.getvalue()]
    print(json.dumps(out))
""")


def test_each_missing_extra_stops_the_run_with_exit_2_and_its_install_line(tmp_path):
    assert set(CASES) == {e.extra for e in ALL}, "every extra needs a case here"
    modules = {e.extra: e.module for e in ALL}
    cases = {x: (modules[x], o, str(tmp_path / "runs" / x)) for x, o in CASES.items()}
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases)], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for extra, (code, err) in results.items():
        assert code == 2, (extra, err)
        assert f"pip install -e '.[{extra}]'" in err, (extra, err)
        assert "Traceback" not in err, (extra, err)
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))
