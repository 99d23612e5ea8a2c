"""Tests that lean on a Linux-only package skip on a Mac, saying why, instead of erroring (issue 36.2).

pyproject installs onnxruntime and faiss-cpu on Linux only, and a Mac's numpy uses Accelerate, which threadpoolctl
does not control. The modules below run in a subprocess where both packages cannot be imported and threadpoolctl
finds no BLAS, as on a Mac: everything that needs them is skipped with its reason, the rest still passes.
"""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Before pytest starts: the Linux-only packages unimportable (find_spec sees None too), threadpoolctl without its
# BLAS controllers (OpenMP's stays), as a Mac's numpy + Accelerate leaves it.
AS_ON_A_MAC = """
import sys
for name in ("onnxruntime", "faiss"):
    sys.modules[name] = None
import threadpoolctl
threadpoolctl._ALL_CONTROLLERS[:] = [c for c in threadpoolctl._ALL_CONTROLLERS if c.user_api != "blas"]
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""
MODULES = ["tests/test_bert_threads.py", "tests/test_embeddings.py"]


def _outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """module.test name → (passed | skipped | failed | error, the skip or failure message)."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        found = [child for child in case if child.tag in ("skipped", "failure", "error")]
        kind = found[0].tag if found else "passed"
        outcomes[f"{case.get('classname')}.{case.get('name')}"] = (kind, found[0].get("message", "") if found else "")
    return outcomes


def test_linux_only_packages_and_openblas_missing_make_skips_with_reasons_not_errors(tmp_path):
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-c", AS_ON_A_MAC, "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
         "-k", "bert_threads or onnx", *MODULES],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = _outcomes(report)
    problems = {name: outcome for name, outcome in outcomes.items() if outcome[0] in ("failure", "error")}
    assert not problems
    skipped = {name: message for name, (kind, message) in outcomes.items() if kind == "skipped"}
    embeddings, threads = "tests.test_embeddings.", "tests.test_bert_threads."
    onnx_test = f"{embeddings}test_the_onnxruntime_encoder_computes_what_the_numpy_one_does"
    assert "onnxruntime is not installed" in skipped[onnx_test]
    limits = [name for name in outcomes if name.startswith(threads) and "same_vector" not in name]
    assert len(limits) == 3 and all("finds no BLAS" in skipped.get(name, "") for name in limits)
    # what needs neither still runs: a lasting process embeds through numpy, one query gives its batch's vector
    lasting_test = f"{embeddings}test_a_lasting_process_embeds_through_onnxruntime_where_it_is_installed"
    assert outcomes[lasting_test][0] == "passed"
    assert outcomes[f"{threads}test_one_query_gives_the_same_vector_as_in_a_batch"][0] == "passed"
