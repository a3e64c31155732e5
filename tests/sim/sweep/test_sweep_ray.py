"""``hif4 sweep --cluster`` on a local Ray head: the same tables as a local ``--jobs 2`` run.

Tests here may send traffic only to loopback, and Ray binds to the primary interface even
when told ``--node-ip-address 127.0.0.1``. So the whole Ray part (head, driver, workers)
runs in a network namespace of its own (``unshare -n``), where loopback is the only
interface. The head has two worker CPUs and a Ray Client server; it is stopped (``ray stop``)
inside the namespace.

The selection is the two cheapest 16-lane units measured (synthesis 40-55 s each here):
``hif4`` and ``nvfp4``, no residual, three stages, the full-window back end (the default
suite's builds, ``CI_CONFIGS``). Each run synthesizes into a cache folder
of its own, so the Ray tasks really run Yosys (the test checks their cache folder filled);
verification shares the Verilator builds (cached by Verilog hash) but every run simulates.

Through the Ray Client (``--cluster ray://127.0.0.1:PORT``),
``tests/sim/sweep/sweep_driver.py`` runs
``hif4 sweep synth`` on primitives (seconds each): one sweep that must give the table of a
local run, and one sent SIGINT after its first result, checked as the local Ctrl-C test
checks it (``tests/sim/sweep/test_sweep.py``), and then the head's two CPUs must be free again.
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
import sweep_driver

REPO = Path(__file__).resolve().parents[3]
SELECTION = ["--unit", "hif4,nvfp4", "--residual", "none", "--stages", "3", "--lanes", "16",
             "--accum", "window"]
VECTORS = ["--vectors", "300"]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="the cluster extra is not installed (pip install -e '.[cluster]'; make test does)")

# Runs inside the namespace: start the head, run the sweeps against it, stop it.
DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    tmp, ray_dir, port, client_port = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5]
    sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
    import sweep_driver
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    hif4 = [sys.executable, "-m", "sim.cli"]
    sel = json.loads(sys.argv[4])
    address = f"127.0.0.1:{port}"
    times = {}
    subprocess.run([ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", port,
                    "--num-cpus", "2", "--include-dashboard", "false",
                    "--object-store-memory", "300000000", "--temp-dir", ray_dir,
                    "--ray-client-server-port", client_port,
                    "--disable-usage-stats"], check=True, capture_output=True)
    try:
        for kind, extra in (("synth", ["--cache-dir", f"{tmp}/cache_ray"]),
                            ("verify", ["--vectors", "300"])):
            t = time.monotonic()
            subprocess.run(hif4 + ["sweep", kind, *sel, "--cluster", address, "--table",
                                   f"{tmp}/ray_{kind}.json", *extra], check=True)
            times[kind] = time.monotonic() - t
        # a soak's chunks as Ray tasks (the same chunks as a local soak: same counts)
        subprocess.run(hif4 + ["soak", "--unit", "nvfp4", "--residual", "none", "--stages",
                               "3", "--lanes", "16", "--accum", "window", "--steps", "6000",
                               "--chunk-steps", "2000", "--cluster", address, "--quiet",
                               "--build-dir", f"{tmp}/soak_ray"], check=True)
        # a failing task on Ray: retried, named, the others land
        from sim import sweep
        from hwgen import primitives
        items = []
        for params in ((4,), (6,)):
            top, text = primitives.primitive_verilog("add", params)
            items.append((top, text, {"module": top, "unit": "add", "parameters": {}}))
        items.insert(1, ("broken", "module broken(output b); assign b = ; endmodule\\n",
                         {"module": "broken", "unit": "add", "parameters": {}}))
        report = sweep.synth_sweep(items, path=f"{tmp}/ray_fault.json", cluster=address,
                                   retries=1, progress=False, cache_dir=f"{tmp}/cache_fault")
        times["fault"] = {"done": report.done, "failed": report.failed}
        # the Ray Client: a sweep, and a sweep interrupted after its first result
        client = ["--cluster", f"ray://127.0.0.1:{client_port}"]
        t = time.monotonic()
        subprocess.run([sys.executable, sweep_driver.__file__, "24,26", *client, "--quiet",
                        "--table", f"{tmp}/client.json", "--cache-dir", f"{tmp}/cache_client"],
                       check=True)
        times["client"] = time.monotonic() - t
        t = time.monotonic()
        code, out, err, seen = sweep_driver.interrupt_after_first_result(
            ["32,31,30,29,28,27", *client, "--table", f"{tmp}/client_int.json",
             "--cache-dir", f"{tmp}/cache_client_int"], sweep_driver.Path(f"{tmp}/client_int.json"))
        times["interrupt"] = time.monotonic() - t
        import ray as ray_api
        ray_api.init(address=address, logging_level="ERROR", log_to_driver=False)
        t = time.monotonic()
        while ray_api.available_resources().get("CPU", 0) < 2 and time.monotonic() - t < 60:
            time.sleep(0.2)
        times["cpu_free"] = [ray_api.available_resources().get("CPU", 0), time.monotonic() - t]
        ray_api.shutdown()
        times["interrupted"] = {"code": code, "out": out, "err": err,
                                "survivors": sweep_driver.survivors(seen)}
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True)
    print("RESULT " + json.dumps(times))
""")


def _hif4(*argv):
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "sim.cli", *argv], check=True, cwd=REPO)
    return time.monotonic() - t


@pytest.mark.slow      # a Ray head and two workers: minutes on two cores (make test-all)
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
                 f"6390 '{json.dumps(SELECTION)}' 10001")
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
    # the soak on Ray checked the chunks a local soak checks, with the same outputs
    _hif4("soak", "--unit", "nvfp4", "--residual", "none", "--stages", "3", "--lanes", "16",
          "--accum", "window", "--steps", "6000", "--chunk-steps", "2000", "--jobs", "2",
          "--quiet", "--build-dir", str(tmp_path / "soak_local"))

    def chunks(folder):
        state = json.loads(next((tmp_path / folder / "soak").glob("*.json")).read_text())
        return state["passed"], state["chunks"]

    ray_passed, ray_chunks = chunks("soak_ray")
    local_passed, local_chunks = chunks("soak_local")
    assert ray_passed["chunks"] == local_passed["chunks"] == [[0, 2]] and not ray_chunks
    assert (ray_passed["steps"], ray_passed["outputs"]) == \
        (local_passed["steps"], local_passed["outputs"])
    assert not local_chunks
    fault = on_ray["fault"]
    assert list(fault["failed"]) == ["broken"] and "yosys failed" in fault["failed"]["broken"]
    from hwgen.primitives import primitive_verilog

    good = sorted(primitive_verilog("add", p)[0] for p in ((4,), (6,)))
    assert sorted(fault["done"]) == good
    landed = json.loads((tmp_path / "ray_fault.json").read_text())
    assert len(landed) == 2
    # through the Ray Client: the table of a local run of the same primitives
    subprocess.run([sys.executable, sweep_driver.__file__, "24,26", "--jobs", "2", "--quiet",
                    "--table", str(tmp_path / "local_client.json"), "--cache-dir",
                    str(tmp_path / "cache_local_client")], check=True, cwd=REPO)
    assert (tmp_path / "client.json").read_bytes() == \
        (tmp_path / "local_client.json").read_bytes()
    assert len(list((tmp_path / "cache_client").glob("*.json"))) == 2
    # Ctrl-C through the Ray Client: one line, the finished results kept, the rest
    # cancelled (the head's CPUs free again), no process left behind
    stop = on_ray["interrupted"]
    print(f"Ray Client sweep of 2 primitives {on_ray['client']:.0f} s; interrupted sweep "
          f"{on_ray['interrupt']:.0f} s; CPUs free {on_ray['cpu_free'][1]:.1f} s after")
    sweep_driver.check_interrupted(stop["code"], stop["out"], stop["err"],
                                   tmp_path / "client_int.json", total=6)
    assert stop["survivors"] == []
    assert on_ray["cpu_free"][0] == 2
