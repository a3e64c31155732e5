"""``hif4 sweep --cluster`` on a local Ray head: the same tables as a local ``--jobs 2`` run.

Tests here may send traffic only to loopback, and Ray binds to the primary interface even
when told ``--node-ip-address 127.0.0.1``. So the whole Ray part (head, driver, workers)
runs in a network namespace of its own (``unshare -n``), where loopback is the only
interface. The head has two worker CPUs; it is stopped (``ray stop``) inside the namespace.

The selection is the two cheapest 16-lane units measured (synthesis 40-55 s each here):
``hif4`` and ``nvfp4``, no residual, three stages. Each run synthesizes into a cache folder
of its own, so the Ray tasks really run Yosys (the test checks their cache folder filled);
verification shares the Verilator builds (cached by Verilog hash) but every run simulates.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SELECTION = ["--unit", "hif4,nvfp4", "--residual", "none", "--stages", "3", "--lanes", "16"]
VECTORS = ["--vectors", "300"]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="the cluster extra is not installed (pip install -e '.[cluster]'; make test does)")

# Runs inside the namespace: start the head, run the sweeps against it, stop it.
DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    tmp, ray_dir, port = sys.argv[1], sys.argv[2], sys.argv[3]
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    hif4 = [sys.executable, "-m", "sim.cli"]
    sel = json.loads(sys.argv[4])
    address = f"127.0.0.1:{port}"
    times = {}
    subprocess.run([ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", port,
                    "--num-cpus", "2", "--include-dashboard", "false",
                    "--object-store-memory", "300000000", "--temp-dir", ray_dir,
                    "--disable-usage-stats"], check=True, capture_output=True)
    try:
        for kind, extra in (("synth", ["--cache-dir", f"{tmp}/cache_ray"]),
                            ("verify", ["--vectors", "300"])):
            t = time.monotonic()
            subprocess.run(hif4 + ["sweep", kind, *sel, "--cluster", address, "--table",
                                   f"{tmp}/ray_{kind}.json", *extra], check=True)
            times[kind] = time.monotonic() - t
        # a failing task on Ray: retried, named, the others land
        from sim import sweep
        from sim.cost import primitives
        items = []
        for params in ((4,), (6,)):
            top, text = primitives.primitive_verilog("add", params)
            items.append((top, text, {"module": top, "unit": "add", "parameters": {}}))
        items.insert(1, ("broken", "module broken(output b); assign b = ; endmodule\\n",
                         {"module": "broken", "unit": "add", "parameters": {}}))
        report = sweep.synth_sweep(items, path=f"{tmp}/ray_fault.json", cluster=address,
                                   retries=1, progress=False, cache_dir=f"{tmp}/cache_fault")
        times["fault"] = {"done": report.done, "failed": report.failed}
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True)
    print("RESULT " + json.dumps(times))
""")


def _hif4(*argv):
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "sim.cli", *argv], check=True, cwd=REPO)
    return time.monotonic() - t


def test_cluster_sweep_equals_local_sweep(tmp_path):
    for tool in ("unshare", "ip"):
        assert shutil.which(tool), f"{tool} is needed for the test's network namespace"
    local = {"synth": _hif4("sweep", "synth", *SELECTION, "--jobs", "2", "--table",
                            str(tmp_path / "local_synth.json"), "--cache-dir",
                            str(tmp_path / "cache_local")),
             "verify": _hif4("sweep", "verify", *SELECTION, *VECTORS, "--jobs", "2", "--table",
                             str(tmp_path / "local_verify.json"))}
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    # a short folder for Ray's sockets (a Unix socket path is limited to 107 bytes)
    ray_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    try:
        inner = (f"ip link set lo up && exec {sys.executable} {script} {tmp_path} {ray_dir} "
                 f"6390 '{json.dumps(SELECTION)}'")
        proc = subprocess.run(["unshare", "-n", "sh", "-c", inner], cwd=REPO, text=True,
                              capture_output=True, timeout=900,
                              env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    on_ray = json.loads(proc.stdout.split("RESULT ", 1)[1])
    print(f"\nwall time, local --jobs 2 vs Ray head with 2 CPUs: synth {local['synth']:.0f} s "
          f"vs {on_ray['synth']:.0f} s, verify {local['verify']:.0f} s vs "
          f"{on_ray['verify']:.0f} s")
    for kind in ("synth", "verify"):
        ray_table = (tmp_path / f"ray_{kind}.json").read_bytes()
        assert ray_table == (tmp_path / f"local_{kind}.json").read_bytes(), kind
        assert len(json.loads(ray_table)) == 2
    # the Ray tasks synthesized (their own cache folder filled: flat results of both units)
    assert len(list((tmp_path / "cache_ray").glob("*.json"))) == 2
    assert all(entry["passed"] for entry in
               json.loads((tmp_path / "ray_verify.json").read_text()).values())
    fault = on_ray["fault"]
    assert list(fault["failed"]) == ["broken"] and "yosys failed" in fault["failed"]["broken"]
    from sim.cost.primitives import primitive_verilog

    good = sorted(primitive_verilog("add", p)[0] for p in ((4,), (6,)))
    assert sorted(fault["done"]) == good
    landed = json.loads((tmp_path / "ray_fault.json").read_text())
    assert len(landed) == 2
