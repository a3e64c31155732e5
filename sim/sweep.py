"""Grid sweeps as independent tasks, in a local process pool or on a Ray cluster.

A sweep is a list of :class:`Task` (a name, a kind and a module-level function with its
arguments, all passed by value: Verilog text and manifest, unit parameters, settings). The
driver (:func:`run_tasks`) submits them to

* a local :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` processes (the
  default; Ray is not imported), or
* a Ray cluster (``cluster``: ``"ray://HOST:PORT"``, ``"HOST:PORT"`` or ``"auto"``), one
  Ray task each, with the CPUs and memory of its kind (:data:`RESOURCES`) declared.

Every result comes back to the driver, which hands it to ``on_result`` as soon as it is
known; the sweeps below merge it into their table there and save the table, so a local
run and a cluster run write the same file. A task that raises (or whose worker is lost) is
submitted again, at most ``retries`` times, then named in :attr:`Report.failed`; the others
go on. Ctrl-C (SIGINT) cancels what has not finished and keeps what has: a result being
merged when it comes is merged first, the local pool's workers are stopped with every
process they started (each worker leads a process group of its own, so a Ctrl-C at the
terminal reaches the driver only, which ends the groups), Ray tasks are cancelled with
``ray.cancel``; then :class:`Interrupted` is raised with the :class:`Report`.

This is the one executor of the toolkit: every parallel run goes through :func:`run_tasks`.
The layers below it (generators, verification, cost) hold the per-item work (synthesize
one text, measure one module, verify one configuration); generating the configurations a
run needs happens here (:func:`generate_config`). Built on it here:

* :func:`synth_sweep`: Verilog texts synthesized into the synthesis table
  (``sim/cost/synth_table.json``, merged by :func:`sim.cost.table.merge_into`);
  :func:`synthesize_sweep` feeds it ``rtl_out/`` and the configuration grid, smallest
  first (``benchmarks/fit_area_model.py --units``);
* :func:`verify_sweep`: configurations simulated against the golden model into the
  verification table (:data:`VERIFY_TABLE`, merged by :func:`merge_verify`);
* :func:`energy_sweep`: configurations' energy per MAC (:mod:`sim.cost.energy`) into the
  energy table (:data:`ENERGY_TABLE`, merged by :func:`merge_verify` as well);
* :func:`energy_rows`: the energy comparison of ``hif4 estimate --energy`` (the modules
  it selects, measured one task each; no table);
* :func:`isofreq_sweep`: the iso-frequency sweep (:mod:`sim.cost.isofreq`, ``hif4 sweep
  isofreq``), each liberty-flow synthesis a ``synth`` task;
* :func:`soak`: seeded chunks of one unit on the fast harness (``hif4 soak``).

The RL precision matrix runs its warm-ups and GRPO runs through :func:`run_tasks` too
(:func:`sim.rl.grpo.run_experiment`), and so does ``benchmarks/liberty_grid.py``.
"""

import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .progress import LOG_INTERVAL_S

__all__ = ["RESOURCES", "VERIFY_TABLE", "ENERGY_TABLE", "Task", "Report", "Interrupted",
           "run_tasks", "UNITS_BUILD", "generate_config", "synth_items", "rtl_items",
           "synth_sweep", "synthesize_sweep", "verify_sweep", "merge_verify", "energy_sweep",
           "energy_rows", "isofreq_modules", "isofreq_sweep", "isofreq_energy",
           "load_json_table", "soak", "SOAK_ROOT"]

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024 ** 3

#: What one task of each kind asks of a Ray node. Synthesis: one Yosys process (the largest
#: single-stage 64-lane units peak at a few GiB); verification: one Verilator build
#: (``make`` runs its compiles one by one under Ray) and one simulation; an RL run: one
#: torch process with the toy model (``rl``) or with SmolLM2-135M, its Adam state and
#: checkpoints (``rl-llm``).
RESOURCES = {
    "synth": {"num_cpus": 1, "memory": 4 * GIB},
    "verify": {"num_cpus": 1, "memory": 2 * GIB},
    "rl": {"num_cpus": 1, "memory": 2 * GIB},
    "rl-llm": {"num_cpus": 1, "memory": 8 * GIB},
    "energy": {"num_cpus": 1, "memory": 4 * GIB},
}

#: The verification table's default place: one entry per verified Verilog text (by its
#: SHA-256), see :func:`verify_sweep`.
VERIFY_TABLE = ROOT / "build" / "sweep" / "verify_table.json"


@dataclass
class Task:
    """One unit of work: ``fn(*args)`` run on a worker; ``fn`` must be a module-level
    function (it is pickled by name) and ``args`` plain data."""

    name: str
    kind: str
    fn: object
    args: tuple = ()


@dataclass
class Report:
    """What a sweep did: names of the tasks finished, skipped (already in the table) and
    failed (with the last error's first line; ``errors``: the exception itself, where it
    came back whole); after Ctrl-C, ``interrupted`` and the tasks ``cancelled`` (every task
    neither finished nor failed)."""

    done: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    cancelled: list = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0
    errors: dict = field(default_factory=dict, repr=False)

    def summary(self, what):
        parts = [f"{len(self.done)} {what} done", f"{len(self.skipped)} already in the table"]
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        if self.interrupted:
            parts.append(f"{len(self.cancelled)} cancelled by Ctrl-C")
        return ", ".join(parts) + f" ({self.seconds:.0f} s)"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`run_tasks`; ``report`` is its :class:`Report` (what finished
    is merged, the rest cancelled)."""

    def __init__(self, report):
        super().__init__(f"interrupted: {len(report.done)} done, "
                         f"{len(report.cancelled)} cancelled")
        self.report = report


class _Sigint:
    """SIGINT as :class:`KeyboardInterrupt`, held back while a result is merged.

    Inside ``with self.merging():`` a SIGINT is only noted, and raised when the block ends,
    so a result that came back is merged whole and counted. After the first, further
    SIGINTs are ignored (:meth:`stop`) until the handler is restored: the cancellation is
    not itself interrupted. Outside the main thread (where Python delivers no signals)
    nothing is installed.
    """

    def __init__(self):
        self.noted = self.shielded = False
        self.previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)

    def _handle(self, signum, frame):
        if self.shielded:
            self.noted = True
        else:
            raise KeyboardInterrupt

    def stop(self):
        if self.previous is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    @contextlib.contextmanager
    def merging(self):
        self.shielded = True
        try:
            yield
        finally:
            self.shielded = False
        if self.noted:
            raise KeyboardInterrupt


def _first_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _worker_init():
    """Make a local pool worker the leader of a process group of its own (see :class:`_Local`)."""
    os.setpgid(0, 0)


class _Local:
    """A process pool (spawned workers: no state of the driver leaks into a task).

    Each worker leads a process group of its own (:func:`_worker_init`), which the
    processes a task starts (Yosys, ``make``, the simulator) join; so a Ctrl-C at the
    terminal reaches only the driver, and :meth:`cancel` ends a worker with everything
    it started.
    """

    def __init__(self, jobs):
        import concurrent.futures as cf
        import multiprocessing

        self.cf = cf
        self.jobs = max(1, jobs)
        self.ctx = multiprocessing.get_context("spawn")
        self.pool = None

    def _new_pool(self):
        return self.cf.ProcessPoolExecutor(self.jobs, mp_context=self.ctx,
                                           initializer=_worker_init)

    def submit(self, task):
        if self.pool is None:
            self.pool = self._new_pool()
        try:
            return self.pool.submit(task.fn, *task.args)
        except self.cf.process.BrokenProcessPool:
            self.pool = self._new_pool()
            return self.pool.submit(task.fn, *task.args)

    def wait(self, handles, timeout):
        """The finished handles among ``handles``, each with (ok, value or error); none
        after ``timeout`` seconds without one."""
        done, _ = self.cf.wait(handles, timeout=timeout, return_when=self.cf.FIRST_COMPLETED)
        out = []
        for fut in done:
            try:
                out.append((fut, True, fut.result()))
            except self.cf.process.BrokenProcessPool as exc:    # a worker died
                self.pool = None
                out.append((fut, False, RuntimeError(f"worker process lost ({exc})")))
            except Exception as exc:
                out.append((fut, False, exc))
        return out

    def cancel(self, handles):
        if self.pool is None:
            return
        # the running tasks too: the executor has no public call for it before Python 3.14
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for sig in (signal.SIGTERM, signal.SIGKILL):    # SIGKILL: whatever ignored SIGTERM
            for proc in procs:
                for kill in (os.killpg, os.kill):   # os.kill: a worker not yet a group leader
                    try:
                        kill(proc.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
            if sig == signal.SIGTERM:
                deadline = time.monotonic() + 5
                for proc in procs:
                    proc.join(max(0.0, deadline - time.monotonic()))
        self.pool = None

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)


class _Ray:
    """Tasks on a Ray cluster; ``ray`` is imported here only."""

    def __init__(self, address):
        try:
            import ray
        except ImportError:
            raise RuntimeError("--cluster needs Ray: pip install 'hif4-toolkit[cluster]'") \
                from None
        import logging

        self.ray = ray
        # Ray Client: the head starts a server process per connection, and that start can
        # fail now and then (seen with Ray 2.60 on a loaded machine: "Initialization failure
        # from server"); a new connection gets a new one
        tries = 3 if address.startswith("ray://") else 1
        for attempt in range(1, tries + 1):
            try:
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
                break
            except ConnectionError as exc:
                ray.shutdown()
                if attempt == tries:
                    raise RuntimeError(f"cannot connect to the Ray cluster at {address} "
                                       f"({tries} tries): {_first_line(exc)}") from None
        self.remotes = {}

    def submit(self, task):
        key = (task.kind, task.fn)
        if key not in self.remotes:
            # our own retry loop counts attempts and names failures: Ray retries nothing
            self.remotes[key] = self.ray.remote(max_retries=0, **RESOURCES[task.kind])(task.fn)
        return self.remotes[key].options(name=task.name).remote(*task.args)

    def wait(self, handles, timeout):
        ready, _ = self.ray.wait(list(handles), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            try:
                out.append((ref, True, self.ray.get(ref)))
            except self.ray.exceptions.RayTaskError as exc:
                out.append((ref, False, exc.cause if exc.cause is not None else exc))
            except self.ray.exceptions.RayError as exc:     # worker or node lost
                out.append((ref, False, exc))
        return out

    def cancel(self, handles):
        for ref in handles:
            self.ray.cancel(ref)

    def close(self):
        self.ray.shutdown()


#: Seconds between two progress lines while no task finishes (as :mod:`sim.progress`
#: writes a log).
HEARTBEAT_S = LOG_INTERVAL_S


def run_tasks(tasks, on_result, *, cluster=None, jobs=1, retries=2, progress=True,
              desc="sweep", report=None):
    """Run ``tasks`` and call ``on_result(task, value)`` in this process as each finishes.

    ``cluster`` None runs them in ``jobs`` local processes; otherwise it is the Ray address
    given to ``ray.init``. A task that raises, or whose worker is lost, is run again up to
    ``retries`` times and then recorded in ``report.failed``. With ``progress``, one line
    per finished task with the count, the elapsed time and the ETA (:mod:`sim.progress`),
    and while none finishes a line every :data:`HEARTBEAT_S` seconds saying how many run
    (a synthesis task can take an hour).
    Ctrl-C (SIGINT) during the run cancels the remaining tasks (a result being handed to
    ``on_result`` is handed over whole first), marks the report ``interrupted`` with the
    tasks ``cancelled`` and raises :class:`Interrupted` carrying it. Returns the
    :class:`Report`.
    """
    from sim.progress import progress as make_bar

    report = report or Report()
    start = time.monotonic()
    tasks = list(tasks)
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError("task names must be unique")
    if not tasks:
        return report
    backend = _Ray(cluster) if cluster else _Local(jobs)
    bar = make_bar(len(tasks), desc, enabled=progress, unit="task")
    attempts = {}
    pending = {}
    sigint = _Sigint()
    with sigint:
        try:
            _drive(tasks, pending, attempts, backend, bar, sigint, on_result, retries, desc,
                   report)
        except KeyboardInterrupt:
            sigint.stop()
            report.interrupted = True
            report.cancelled = [t.name for t in tasks
                                if t.name not in report.done and t.name not in report.failed]
            backend.cancel(list(pending))
            raise Interrupted(report) from None
        finally:
            bar.close()
            backend.close()
            report.seconds += time.monotonic() - start
    return report


def _in_flight(pending, slots):
    """The heartbeat's words for ``pending`` unfinished tasks on ``slots`` workers (None: a
    cluster's, unknown here): ``"2 running, 10 queued"``, ``"12 running or queued"``."""
    if slots is None:
        return f"{pending} running or queued"
    running = min(pending, slots)
    return f"{running} running" + (f", {pending - running} queued" if pending > running else "")


def _drive(tasks, pending, attempts, backend, bar, sigint, on_result, retries, desc, report):
    """:func:`run_tasks`' loop: submit every task, then hand over results as they come."""
    for task in tasks:
        pending[backend.submit(task)] = task
    while pending:
        finished = backend.wait(list(pending), HEARTBEAT_S)
        if not finished:
            bar.set_postfix_str(_in_flight(len(pending), getattr(backend, "jobs", None)),
                                refresh=False)
            bar.refresh()               # the elapsed time moves on: a line in a log
        for handle, ok, value in finished:
            with sigint.merging():      # a result is merged, counted and shown whole
                task = pending.pop(handle)
                if ok:
                    on_result(task, value)
                    report.done.append(task.name)
                    status = f"{task.name} done"
                else:
                    attempts[task.name] = attempts.get(task.name, 0) + 1
                    if attempts[task.name] <= retries:
                        print(f"{desc}: {task.name} failed ({_first_line(value)}); retry "
                              f"{attempts[task.name]} of {retries}", file=sys.stderr)
                        pending[backend.submit(task)] = task
                        continue
                    report.failed[task.name] = _first_line(value)
                    if isinstance(value, BaseException):
                        report.errors[task.name] = value
                    status = f"{task.name} FAILED"
                bar.set_postfix_str(status, refresh=False)
                bar.update(1)
                bar.refresh()           # one line per finished task, with the ETA


# --- tables -----------------------------------------------------------------------------

def load_json_table(path):
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else {}


def _save_json_table(table, path):
    from sim.cost.table import save_table

    save_table(table, path)


# --- generation ---------------------------------------------------------------------------

#: Where the swept configurations are generated (``hif4 sweep synth`` and ``isofreq``).
UNITS_BUILD = ROOT / "build" / "units"


def generate_config(unit, residual, stages, lanes, out_dir=None, accum=None, interleave=None):
    """The Verilog file of one configuration, with back end ``accum`` (default: the
    configuration's default one) and ``interleave`` accumulators (default 1), generated
    (cached, ``sim.bench.runner.generate_cached``) under ``out_dir`` (default
    :data:`UNITS_BUILD`); its manifest lies beside it."""
    from hif4spec import module_name, resolve
    from sim.bench.runner import generate_cached

    params = resolve(unit, residual, stages, lanes, accum, interleave)
    out_dir = Path(out_dir or UNITS_BUILD)
    verilog, _ = generate_cached(unit, params, out_dir / module_name(unit, **params))
    return verilog


# --- synthesis ----------------------------------------------------------------------------

def synth_items(configs, build=None, accum=None):
    """``[(module, verilog_text, manifest), ...]`` of the configurations with back end
    ``accum`` (default: each one's default), generated (cached) under ``build`` (default
    :data:`UNITS_BUILD`)."""
    items = []
    for config in configs:
        verilog = generate_config(*config, build, accum=accum)
        items.append((verilog.stem, verilog.read_text(),
                      json.loads(verilog.with_suffix(".json").read_text())))
    return items


def rtl_items(rtl_dir=None):
    """``[(module, verilog_text, manifest, source), ...]`` of the checked-in modules of
    ``rtl_dir`` (default ``rtl_out/``), each with its path as its table source."""
    rtl_dir = Path(rtl_dir or ROOT / "rtl_out")
    items = []
    for verilog in sorted(rtl_dir.glob("*.v")):
        source = (str(verilog.resolve().relative_to(ROOT))
                  if verilog.resolve().is_relative_to(ROOT) else verilog.name)
        items.append((verilog.stem, verilog.read_text(),
                      json.loads(verilog.with_suffix(".json").read_text()), source))
    return items


def synth_task(text, manifest, source, options):
    """Worker side of :func:`synth_sweep`: the table entry of one Verilog text.

    ``options`` are :func:`sim.cost.table.entry_for_text`'s keywords; a ``cache_dir`` of
    None is the worker's own ``build/synth`` in its installed repository."""
    from sim.cost import table

    options = dict(options)
    if options.get("cache_dir") is None:
        options["cache_dir"] = table.ROOT / "build" / "synth"
    return table.entry_for_text(text, manifest, source=source, **options)


def synth_sweep(items, *, path=None, cluster=None, jobs=1, retries=2, progress=True,
                hierarchical=False, timeout=3600, backend=None, checkpoint=False,
                cache_dir=None):
    """Synthesize ``items`` (:func:`synth_items`, :func:`rtl_items`: ``(module, text,
    manifest)``, with the table's ``source`` as a fourth field where it is not
    ``"generated: <module>"``) into the synthesis table at ``path`` (default
    ``sim/cost/synth_table.json``), in their order; returns the :class:`Report`.

    An item whose Verilog the table holds already (with blocks, for ``hierarchical``) is
    skipped, its entry given the item's manifest (:func:`sim.cost.table.refresh_manifests`).
    Each result is merged into the file as it arrives (:func:`sim.cost.table.merge_into`),
    so an interrupted run keeps what it finished. ``checkpoint`` keeps each flat run's
    design after ``synth`` in the worker's ``cache_dir``, so a task stopped and run again
    there resumes.
    """
    from sim.cost import synth, table

    path = Path(path or table.TABLE_PATH)
    held = table.load_table(path)
    table.refresh_manifests([(item[1], item[2]) for item in items], held, path=path)
    report = Report()
    tasks = []
    options = {"hierarchical": hierarchical, "timeout": timeout, "backend": backend,
               "checkpoint": checkpoint,
               "cache_dir": None if cache_dir is None else str(cache_dir)}
    for name, text, manifest, *source in items:
        if not table.needs_synthesis(held, synth.verilog_sha256(text), hierarchical):
            report.skipped.append(name)
            continue
        source = source[0] if source else "generated: " + name
        tasks.append(Task(name, "synth", synth_task, (text, manifest, source, options)))

    def merge(task, value):
        sha, entry = value
        table.merge_into(path, sha, entry)

    return run_tasks(tasks, merge, cluster=cluster, jobs=jobs, retries=retries,
                     progress=progress, desc="sweep synth", report=report)


def synthesize_sweep(configs=None, *, accum=None, checkpoint=False, **options):
    """Synthesize ``rtl_out/``'s modules and the configurations ``configs`` (default: the
    whole grid of back end ``accum``, :func:`sim.cost.table.sweep_configs`; each
    configuration with its default back end when None) into the synthesis table
    (:func:`synth_sweep`, whose keywords ``options`` are), smallest first by the area model,
    so that an interrupted run has recorded as many configurations as it could. With
    ``checkpoint``, the units a stopped run left checkpointed go first. Returns the
    :class:`Report`."""
    from sim import area_model
    from sim.cost import synth, table

    configs = table.sweep_configs(accum) if configs is None else configs
    items = {}
    for item in rtl_items() + synth_items(configs, accum=accum):
        items.setdefault(item[0], item)

    where = {"cache_dir": options["cache_dir"]} if options.get("cache_dir") else {}

    def order(item):
        name, text, manifest = item[:3]
        resumable = checkpoint and synth.has_checkpoint(text, name, **where)
        return (not resumable, area_model.estimate_manifest(manifest).nand2, name)

    return synth_sweep(sorted(items.values(), key=order), checkpoint=checkpoint, **options)


# --- verification ---------------------------------------------------------------------------

#: The fields of a verification that decide its result (the table's skip key besides the
#: Verilog hash).
VERIFY_SETTINGS = ("sim", "vectors", "seed", "valid_prob", "ready_prob")


def verify_task(unit, params, settings, build_root):
    """Worker side of :func:`verify_sweep`: generate (cached), build (cached) and simulate
    one configuration; returns ``(sha256 of its Verilog, table entry)``. ``build_root``
    None is the worker's own ``build/``."""
    from sim.bench.runner import verify

    result = verify(unit, **params, build_root=build_root, **settings)
    verilog = Path(result["verilog"]).read_bytes()
    manifest = result["manifest"]
    latency_ok = result["latency_min"] is None or result["latency_min"] >= manifest["latency"]
    entry = {
        "module": result["module"], "unit": unit, "parameters": dict(params), **settings,
        "checked": result["checked"], "transferred": result["transferred"],
        "cycles": result["cycles"], "mismatches": result["mismatches"],
        "timeout": result["timeout"], "latency": manifest["latency"],
        "latency_min": result["latency_min"],
        "passed": not result["mismatches"] and not result["timeout"] and latency_ok,
    }
    if result["mismatches"]:
        entry["first_mismatch"] = result["first_mismatch"]
    return hashlib.sha256(verilog).hexdigest(), entry


def merge_verify(path, sha, entry):
    """Merge one verification into the table file at ``path`` (under a lock, re-reading
    the file first): entries of the same module with another Verilog are dropped, as the
    generator no longer makes that Verilog."""
    from sim.cost.table import locked

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        table = load_json_table(path)
        for old in [k for k, v in table.items() if k != sha and v["module"] == entry["module"]]:
            del table[old]
        table[sha] = entry
        _save_json_table(table, path)


def verify_sweep(configs, *, path=None, cluster=None, jobs=1, retries=2, progress=True,
                 vectors=2000, seed=1, sim="verilator", valid_prob=0.9, ready_prob=0.9,
                 build_root=None, accum=None):
    """Verify ``configs`` (``[(unit, residual, stages, lanes)]``, with accumulator back end
    ``accum``, default each one's default) into the verification table at ``path`` (default
    :data:`VERIFY_TABLE`); returns the :class:`Report`.

    The table maps the SHA-256 of each verified Verilog text to its entry: module, unit,
    parameters, the settings (:data:`VERIFY_SETTINGS`), outputs checked, steps transferred,
    cycles, mismatches, timeout, the manifest's latency and the earliest output seen, and
    ``passed``. A configuration whose Verilog (generated here, cached) the table holds with
    the same settings is skipped. A mismatch is a result, not a failure: it is recorded
    and the task is not run again.
    """
    from hif4spec import module_name, resolve
    from sim.bench.runner import generate_cached

    path = Path(path or VERIFY_TABLE)
    held = load_json_table(path)
    settings = {"sim": sim, "vectors": vectors, "seed": seed, "valid_prob": valid_prob,
                "ready_prob": ready_prob}
    report = Report()
    tasks = []
    gen_root = Path(build_root or ROOT / "build") / "rtl"
    for unit, residual, stages, lanes in configs:
        params = resolve(unit, residual, stages, lanes, accum)
        name = module_name(unit, **params)
        verilog, _ = generate_cached(unit, params, gen_root / name)
        entry = held.get(hashlib.sha256(verilog.read_bytes()).hexdigest())
        if entry and all(entry.get(k) == v for k, v in settings.items()):
            report.skipped.append(name)
            continue
        tasks.append(Task(name, "verify", verify_task,
                          (unit, params, settings,
                           None if build_root is None else str(build_root))))

    def merge(task, value):
        merge_verify(path, *value)

    return run_tasks(tasks, merge, cluster=cluster, jobs=jobs, retries=retries,
                     progress=progress, desc="sweep verify", report=report)


# --- energy ---------------------------------------------------------------------------------

#: The energy table's default place: one entry per measured Verilog text (its SHA-256).
ENERGY_TABLE = ROOT / "build" / "sweep" / "energy_table.json"


def energy_task(unit, params, settings, build_root, backend):
    """Worker side of :func:`energy_sweep`: generate (cached), export the netlist (cached),
    simulate every stimulus; returns ``(sha256 of its Verilog, table entry)``.
    ``build_root`` None is the worker's own ``build/``."""
    from hif4spec import module_name
    from sim.bench.runner import generate_cached
    from sim.cost.energy import measure

    name = module_name(unit, **params)
    root = Path(build_root or ROOT / "build")
    verilog, manifest = generate_cached(unit, params, root / "rtl" / name)
    figures = measure(verilog, manifest, settings["stimuli"], steps=settings["steps"],
                      seed=settings["seed"], synth_backend=backend, build_root=root)
    entry = {"module": name, "unit": unit, "parameters": dict(params), **settings,
             "energy": figures}
    return hashlib.sha256(verilog.read_bytes()).hexdigest(), entry


def energy_sweep(configs, *, path=None, cluster=None, jobs=1, retries=2, progress=True,
                 stimuli=None, steps=None, seed=0, build_root=None, backend=None, accum=None):
    """Measure the energy per MAC of ``configs`` (``[(unit, residual, stages, lanes)]``,
    with accumulator back end ``accum``, default each one's default) into the energy table at
    ``path`` (default :data:`ENERGY_TABLE`); returns the :class:`Report`.

    The table maps the SHA-256 of each measured Verilog text to its entry: module, unit,
    parameters, the settings (stimuli, steps, seed, and the netlist flow's version
    ``netlist``) and ``energy``, the figures of :func:`sim.cost.energy.measure` per
    stimulus. A configuration whose Verilog the table holds with the same settings is
    skipped.
    """
    from hif4spec import module_name, resolve
    from sim.bench.runner import generate_cached
    from sim.cost.energy import DEFAULT_STEPS, STIMULI
    from sim.cost.netlist import FLOW_VERSION

    path = Path(path or ENERGY_TABLE)
    held = load_json_table(path)
    settings = {"stimuli": list(stimuli or STIMULI), "steps": steps or DEFAULT_STEPS,
                "seed": seed, "netlist": FLOW_VERSION}
    report = Report()
    tasks = []
    gen_root = Path(build_root or ROOT / "build") / "rtl"
    for unit, residual, stages, lanes in configs:
        params = resolve(unit, residual, stages, lanes, accum)
        name = module_name(unit, **params)
        verilog, _ = generate_cached(unit, params, gen_root / name)
        entry = held.get(hashlib.sha256(verilog.read_bytes()).hexdigest())
        if entry and all(entry.get(k) == v for k, v in settings.items()):
            report.skipped.append(name)
            continue
        tasks.append(Task(name, "energy", energy_task,
                          (unit, params, settings,
                           None if build_root is None else str(build_root), backend)))

    def merge(task, value):
        merge_verify(path, *value)

    return run_tasks(tasks, merge, cluster=cluster, jobs=jobs, retries=retries,
                     progress=progress, desc="sweep energy", report=report)


def measure_task(verilog, manifest, stimuli, steps, seed, backend):
    """Worker side of :func:`energy_rows`: :func:`sim.cost.energy.measure` of one module."""
    from sim.cost.energy import measure

    return measure(verilog, manifest, stimuli, steps=steps, seed=seed, synth_backend=backend)


def energy_rows(units, residuals, stimuli=None, *, stages=None, lanes=None, accum=None,
                steps=None, seed=0, rtl_dir=None, manifests=None, synth_backend=None, jobs=1,
                progress=True, desc="energy"):
    """The energy comparison of ``hif4 estimate --energy``: the modules of
    :func:`sim.cost.energy.energy_selection` (the dot units among ``units`` x
    ``residuals`` and their MXFP4 / NVFP4 baselines, from ``manifests`` or ``rtl_dir``),
    each measured (:func:`sim.cost.energy.measure`) as one ``energy`` task in ``jobs``
    local processes, into :func:`sim.cost.energy.comparison_rows`. ``LookupError`` when
    nothing is selected; a module that cannot be measured raises its error (the first
    one) once the others are done."""
    from sim.cost import energy

    stimuli = list(stimuli or energy.STIMULI)
    steps = energy.DEFAULT_STEPS if steps is None else steps
    chosen, bases, todo = energy.energy_selection(units, residuals, stages=stages,
                                                  lanes=lanes, accum=accum, rtl_dir=rtl_dir,
                                                  manifests=manifests)
    measured = {}
    tasks = [Task(manifest["module"], "energy", measure_task,
                  (str(verilog), manifest, stimuli, steps, seed, synth_backend))
             for verilog, manifest in todo]

    def merge(task, value):
        measured[task.name] = value

    report = run_tasks(tasks, merge, jobs=max(1, min(jobs, len(tasks))), retries=0,
                       progress=progress, desc=desc)
    for name in report.failed:
        raise report.errors.get(name) or RuntimeError(f"{name}: {report.failed[name]}")
    return energy.comparison_rows(chosen, bases, measured, stimuli)


# --- iso-frequency -------------------------------------------------------------------------

def isofreq_modules(configs, stages, lanes, build=None, accum=None, interleaves=(1,)):
    """``{(unit, residual, stages, interleave): (verilog_text, manifest)}`` of every
    configuration (``(unit, residual)``), stage count and interleave (a dot unit's; an
    encoder has 1 only) at ``lanes`` lanes, with back end ``accum`` where the pair has it
    (else its default), generated (cached) under ``build``."""
    from hif4spec import accums_of, unit_spec

    out = {}
    for unit, residual in configs:
        ways = interleaves if unit_spec(unit).kind == "dot" else (1,)
        for s in stages:
            for L in ways:
                acc = accum if accum in accums_of(unit, residual) else None
                verilog = generate_config(unit, residual, s, lanes, build, accum=acc,
                                          interleave=L)
                out[unit, residual, s, L] = (
                    verilog.read_text(), json.loads(verilog.with_suffix(".json").read_text()))
    return out


def isofreq_sweep(configs=None, *, stages=None, lanes=None, targets=None, scripts=None,
                  liberty=None, lib=None, path=None, build=None, accum=None, cluster=None,
                  jobs=1, retries=2, progress=True, backend=None, exhaustive=False,
                  synthesize=True, interleaves=(1,)):
    """The iso-frequency sweep (:mod:`sim.cost.isofreq`) into the table at ``path``
    (default :data:`sim.cost.isofreq.TABLE`); returns ``(runs, report)``: the table's runs
    of this library for ``configs`` (default the standard set, dot units and encoders),
    ``stages`` and ``lanes``, and the :class:`Report` of all rounds. Stage counts go in
    increasing order, each script in turn (:func:`sim.cost.isofreq.plan` prunes), every
    synthesis a ``synth`` task (:func:`sim.cost.isofreq.isofreq_task`). ``targets`` (ps)
    replaces both default lists. :class:`Interrupted` passes through (what finished is in
    the table). ``synthesize`` False runs nothing: the runs the table holds already.
    ``interleaves`` adds the dot units' interleaved accumulators (issue 45) as an axis
    beside the stages: at each stage count, each interleave in increasing order."""
    from sim.cost import isofreq
    from sim.cost.liberty import load_library
    from sim.cost.synth import verilog_sha256

    configs = [tuple(c) for c in (configs or isofreq.DOT_CONFIGS + isofreq.ENCODER_CONFIGS)]
    stages = isofreq.STAGES if stages is None else stages
    lanes = isofreq.LANES if lanes is None else lanes
    scripts = isofreq.DEFAULT_SCRIPTS if scripts is None else scripts
    path = path or isofreq.TABLE
    lib = lib or load_library(liberty)
    interleaves = sorted(set(interleaves))
    modules = isofreq_modules(configs, stages, lanes, build, accum, interleaves)
    shas = {k: verilog_sha256(text) for k, (text, _) in modules.items()}
    report = Report()
    start = time.monotonic()

    def mine(table):
        want = set(shas.values())
        return [r for r in isofreq.runs_of(table, lib.sha256) if r["sha256"] in want]

    rounds = [(stage, L, script) for stage in sorted(stages) for L in interleaves
              for script in scripts] if synthesize else []
    for stage, L, script in rounds:
        table = isofreq.load(path)
        tasks, keys = [], {}
        have = [c for c in configs if (*c, stage, L) in modules]
        for config, t in isofreq.plan(mine(table), have, stage, script,
                                      lambda c: isofreq.default_targets(c, targets),
                                      exhaustive=exhaustive, gate="delay" in scripts,
                                      interleave=L):
            text, manifest = modules[(*config, stage, L)]
            key = isofreq.table_key(lib.sha256, shas[(*config, stage, L)], script, t)
            name = f"{manifest['module']}/{script}/{t:g}"
            if key in table["runs"]:
                report.skipped.append(name)
                continue
            keys[name] = key
            tasks.append(Task(name, "synth", isofreq.isofreq_task,
                              (text, manifest, script, float(t), lib.path, backend)))

        def on_result(task, record, keys=keys):
            isofreq.merge(path, keys[task.name], record)

        run_tasks(tasks, on_result, cluster=cluster, jobs=jobs, retries=retries,
                  progress=progress, desc=f"sweep isofreq: {stage} stage(s)"
                  + (f", {L} accumulators" if L != 1 else "") + f", {script}",
                  report=report)
    report.seconds = time.monotonic() - start
    return mine(isofreq.load(path)), report


def isofreq_energy(rows, lib, clock_ps, build=None, **options):
    """Energy per MAC (pJ) at ``clock_ps`` of each dot row of the sweep's summary that
    meets it, measured on the very netlist of the row (same script and ABC target:
    libsynth's cache) by :func:`sim.cost.libenergy.measure_liberty` on its default
    stimulus (``options`` are its keywords), added to the rows as ``pj_per_mac``."""
    from sim.cost.libenergy import measure_liberty

    for row in rows:
        if row.get("kind") != "dot" or not row.get("meets"):
            continue
        verilog = generate_config(row["unit"], row["residual"], row["stages"], row["lanes"],
                                  build, accum=row["accum"],
                                  interleave=row.get("interleave", 1))
        manifest = json.loads(verilog.with_suffix(".json").read_text())
        (figures,) = measure_liberty(verilog.read_text(), manifest, lib=lib,
                                     clock_ps=clock_ps, script=row["script"],
                                     synth_clock_ps=row["target_ps"], **options).values()
        row["pj_per_mac"] = figures["pj_per_mac"]


# --- soak -----------------------------------------------------------------------------------

#: Where soaks keep their state (one JSON file per soak) and their replay files.
SOAK_ROOT = ROOT / "build" / "soak"

#: Steps (an encoder: groups) per soak chunk: one to two seconds of work on one core (larger
#: chunks are slower per step: the golden model's arrays outgrow the caches).
SOAK_CHUNK = 1 << 18


def _in_ranges(ranges, i):
    """Whether ``i`` lies in one of ``ranges`` (sorted, disjoint ``[first, last]`` pairs)."""
    import bisect
    k = bisect.bisect_right(ranges, [i, float("inf")]) - 1
    return k >= 0 and ranges[k][0] <= i <= ranges[k][1]


def _add_to_ranges(ranges, i):
    """Add index ``i`` to ``ranges`` (in place), merging neighbours."""
    import bisect
    k = bisect.bisect_right(ranges, [i, float("inf")])
    if k and ranges[k - 1][1] >= i - 1:
        ranges[k - 1][1] = max(ranges[k - 1][1], i)
        k -= 1
    else:
        ranges.insert(k, [i, i])
    if k + 1 < len(ranges) and ranges[k + 1][0] <= ranges[k][1] + 1:
        ranges[k][1] = max(ranges[k][1], ranges.pop(k + 1)[1])


#: Totals kept for the passed full chunks of a soak.
_PASSED_TOTALS = ("steps", "outputs", "cycles", "seconds")


def _chunk_passed(rec):
    return not (rec["mismatches"] or rec["timeout"] or rec["late"])


def _record_chunk(state, rec, chunk):
    """Enter a finished chunk into a soak's state: a passed full chunk joins the ranges and
    totals of ``state["passed"]``, anything else (a failure, a shorter last chunk) keeps its
    own record in ``state["chunks"]``."""
    i = rec["index"]
    if _chunk_passed(rec) and rec["steps"] == chunk and "case" not in rec:
        passed = state["passed"]
        if not _in_ranges(passed["chunks"], i):
            _add_to_ranges(passed["chunks"], i)
            for k in _PASSED_TOTALS:
                passed[k] += rec[k]
        state["chunks"].pop(str(i), None)
    else:
        state["chunks"][str(i)] = rec


def load_soak_state(path, settings):
    """The state of a soak (:func:`soak`) from ``path``, or a new one for ``settings``; a
    state whose every chunk has its own record is compacted on the way."""
    state = load_json_table(path)
    if not state:
        state = {"settings": settings, "chunks": {}}
    state.setdefault("passed", {"chunks": [], **{k: 0 for k in _PASSED_TOTALS}})
    chunk = state["settings"]["chunk"]
    for rec in list(state["chunks"].values()):
        _record_chunk(state, rec, chunk)
    return state


def soak_chunk_done(state, i, n):
    """Whether chunk ``i`` of ``n`` steps is in a soak's ``state`` (passed or recorded)."""
    if n == state["settings"]["chunk"] and _in_ranges(state["passed"]["chunks"], i):
        return True
    rec = state["chunks"].get(str(i))
    return rec is not None and rec["steps"] == n


def soak_totals(state, count):
    """``{"chunks", "steps", "outputs", "seconds", "mismatches", "failed"}`` of the first
    ``count`` chunks of a soak's state; ``failed`` lists their failing chunks' records (the
    outputs and seconds of passed full chunks are the state's totals, whatever ``count``)."""
    passed = state["passed"]
    full = sum(max(0, min(b, count - 1) - a + 1) for a, b in passed["chunks"])
    recs = [r for k, r in state["chunks"].items() if int(k) < count]
    return {"chunks": full + len(recs),
            "steps": full * state["settings"]["chunk"] + sum(r["steps"] for r in recs),
            "outputs": passed["outputs"] + sum(r["outputs"] for r in recs),
            "seconds": passed["seconds"] + sum(r["seconds"] for r in recs),
            "mismatches": sum(r["mismatches"] for r in recs),
            "failed": sorted((r for r in recs if not _chunk_passed(r)),
                             key=lambda r: r["index"])}


def soak(unit=None, params=None, *, steps, rtl=None, chunk=SOAK_CHUNK, seed=1, mix=None,
         valid_prob=0.9, ready_prob=0.9, cluster=None, jobs=1, retries=2, progress=True,
         build_root=None, state_dir=None):
    """Check ``steps`` steps (an encoder: groups) of one unit on the fast harness, in
    seeded chunks of ``chunk`` (:func:`sim.bench.soak.soak_chunk`) run as ``verify`` tasks
    locally or on Ray; returns ``(state, report)``.

    The unit is generated from ``unit`` and ``params`` (resolved) or is the Verilog file
    of ``rtl = (path, manifest)``. The soak's state, ``<state_dir>/<module>-<key>.json``
    (default ``<build_root>/soak``; ``key`` covers the Verilog text, seed, chunk size, mix
    and stall probabilities), records each finished chunk as it comes, so a soak that is
    stopped, or run again with more ``steps``, does only the chunks it has not done. Passed
    full chunks are kept as index ranges and totals, so the state stays a few hundred bytes
    however long the soak; a failing (or shorter last) chunk keeps its own record. A failing
    chunk's replay file (shrunk, :func:`sim.bench.soak.shrink`) is written to
    ``<state_dir>/cases/``.
    """
    from hif4spec import module_name, resolve
    from sim.bench.runner import generate_cached
    from sim.bench.soak import DEFAULT_MIX, soak_chunk

    build_root = Path(build_root or ROOT / "build")
    if rtl is None:
        params = resolve(unit, **(params or {}))
        module = module_name(unit, **params)
        verilog, manifest = generate_cached(unit, params, build_root / "rtl" / module)
        folder = module
    else:
        verilog, manifest = Path(rtl[0]), rtl[1]
        unit, params, module = manifest["unit"], dict(manifest["parameters"]), manifest["module"]
    text = Path(verilog).read_text()
    sha = hashlib.sha256(text.encode()).hexdigest()
    if rtl is not None:
        folder = f"{module}-{sha[:12]}"
    mix = dict(DEFAULT_MIX if mix is None else mix)
    settings = {"module": module, "unit": unit, "parameters": params, "verilog_sha256": sha,
                "seed": seed, "chunk": chunk, "mix": mix, "valid_prob": valid_prob,
                "ready_prob": ready_prob}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    root = Path(state_dir) if state_dir is not None else build_root / "soak"
    path = root / f"{module}-{key}.json"
    state = load_soak_state(path, settings)
    state["verilog"] = str(verilog)
    count = -(-steps // chunk)
    report = Report()
    tasks = []
    local_root = None if cluster else str(build_root)
    for i in range(count):
        n = min(chunk, steps - i * chunk)
        if soak_chunk_done(state, i, n):
            report.skipped.append(f"{module}#{i}")
            continue
        tasks.append(Task(f"{module}#{i}", "verify", soak_chunk,
                          (unit, params["residual"], text, manifest, folder, local_root, seed,
                           i, n, mix, valid_prob, ready_prob)))

    def merge(task, value):
        case = value.pop("case", None)
        if case is not None:
            where = root / "cases" / f"{module}-s{seed}-c{value['index']}.npz"
            where.parent.mkdir(parents=True, exist_ok=True)
            tmp = where.with_name(where.name + ".tmp")
            tmp.write_bytes(case)
            tmp.replace(where)
            value["case"] = str(where)
        _record_chunk(state, value, chunk)
        root.mkdir(parents=True, exist_ok=True)
        _save_json_table(state, path)

    state["path"] = str(path)
    report = run_tasks(tasks, merge, cluster=cluster, jobs=jobs, retries=retries,
                       progress=progress, desc=f"soak {module}", report=report)
    return state, report
