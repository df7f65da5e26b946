"""The sampler-spec grammar does not depend on what was imported before: a spec with a hook
modifier parses in a fresh interpreter that imported nothing but the spec module."""

import json
import subprocess
import sys
from pathlib import Path

import unmask

SRC = str(Path(unmask.__file__).resolve().parents[1])


def test_a_hook_modifier_parses_before_its_module_is_imported():
    code = ("import json, sys\n"
            "from unmask.samplers.spec import parse_spec\n"
            "hooked = 'unmask.hooks' in sys.modules\n"
            "spec = parse_spec('threshold:tau=0.5+wino=0.9')\n"
            "print(json.dumps([spec.label, spec.params, sorted(spec.hooks)]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    label, params, hooks = json.loads(done.stdout)
    assert params == {"tau": 0.5} and hooks == ["wino"] and "+wino=0.9" in label
