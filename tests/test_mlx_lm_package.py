"""mlx-lm's model code imports without its package __init__ (models.mlx_lm_package), and the __init__ still runs,
unchanged, for whoever asks for a name it defines. Each case runs in a fresh interpreter: what is imported is the
point, and this test process may have imported mlx_lm whole already.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WITHOUT_TORCH = "import sys\nsys.modules['torch'] = None\n"  # as installed without the `st` extra


def _run(code: str) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", WITHOUT_TORCH + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_model_cache_and_sampling_modules_import_without_transformers():
    result = _run("""
import json, sys
from models import mlx_lm_package
package = mlx_lm_package.install()
import mlx_lm.models.qwen2, mlx_lm.models.llama, mlx_lm.models.cache, mlx_lm.sample_utils
from mlx_lm import models  # a submodule: no reason to run the __init__
print(json.dumps({"transformers": "transformers" in sys.modules, "deferred": mlx_lm_package.is_deferred(package),
                  "sampler": callable(mlx_lm.sample_utils.make_sampler(temp=0.0)),
                  "models": models is sys.modules["mlx_lm.models"]}))
""")
    assert result == {"transformers": False, "deferred": True, "sampler": True, "models": True}


def test_a_later_from_mlx_lm_import_load_runs_the_real_init():
    result = _run("""
import json, sys
from models import mlx_lm_package
package = mlx_lm_package.install()
import mlx_lm.models.cache
from mlx_lm import load, stream_generate
generate, utils = sys.modules["mlx_lm.generate"], sys.modules["mlx_lm.utils"]
print(json.dumps({"load": load is utils.load, "stream": stream_generate is generate.stream_generate,
                  "rebound": package.generate is generate.generate,  # the __init__ binds the function over the module
                  "transformers": "transformers" in sys.modules, "deferred": mlx_lm_package.is_deferred(package),
                  "version": isinstance(package.__version__, str), "all": sorted(package.__all__)}))
""")
    assert result["load"] and result["stream"] and result["rebound"] and result["transformers"] and result["version"]
    assert not result["deferred"]
    assert result["all"] == sorted(["__version__", "convert", "batch_generate", "generate", "stream_generate", "load"])


def test_the_tuner_imports_through_the_deferred_package():
    result = _run("""
import json
from models import mlx_lm_package
mlx_lm_package.install()
import mlx_lm.tuner.utils
from mlx_lm.tuner.utils import linear_to_lora_layers, load_adapters
print(json.dumps({"tuner": callable(linear_to_lora_layers) and callable(load_adapters)}))
""")
    assert result == {"tuner": True}


def test_an_already_imported_mlx_lm_is_left_alone():
    result = _run("""
import json, sys
import mlx_lm
from models import mlx_lm_package
print(json.dumps({"same": mlx_lm_package.install() is mlx_lm, "deferred": mlx_lm_package.is_deferred(mlx_lm)}))
""")
    assert result == {"same": True, "deferred": False}


def test_an_unknown_name_is_an_attribute_error_and_runs_nothing():
    result = _run("""
import json, sys
from models import mlx_lm_package
package = mlx_lm_package.install()
try:
    package.no_such_name
    raised = False
except AttributeError:
    raised = True
print(json.dumps({"raised": raised, "deferred": mlx_lm_package.is_deferred(package),
                  "transformers": "transformers" in sys.modules}))
""")
    assert result == {"raised": True, "deferred": True, "transformers": False}


def test_the_names_an_init_binds_are_read_from_its_code():
    from models.mlx_lm_package import init_names
    code = compile("import os\nfrom .utils import load\n__version__ = '1'\nif os.sep:\n    late = 1\n", "x", "exec")
    assert init_names(code) == {"os", "load", "__version__", "late"}
