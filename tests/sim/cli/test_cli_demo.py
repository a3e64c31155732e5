"""``hif4 demo`` runs what it says: it verifies every file of the standard set, each once
(each with its ``--accum``), then prints the comparison with the default back ends and with
the full-window reference. The subcommands it calls are recorded, not run;
``generate`` copies the checked-in ``rtl_out/``."""

import shutil

import sim.cli
from hif4spec import REFERENCE_ACCUM, module_name, resolve, standard_set
from sim.bench.runner import REPO


def test_demo_verifies_each_standard_module_once(tmp_path, monkeypatch):
    out = tmp_path / "rtl"
    calls = []

    def fake_main(argv):
        calls.append(list(argv))
        if argv[0] == "generate":
            shutil.copytree(REPO / "rtl_out", out)
        return 0

    monkeypatch.setattr(sim.cli, "main", fake_main)
    assert sim.cli.main.__module__ == __name__
    from sim.cli import build_parser
    args = build_parser().parse_args(["demo", "--out", str(out)])
    assert args.func(args) == 0

    verified = []
    for argv in calls:
        if argv[0] != "verify":
            continue
        opt = dict(zip(argv[1::2], argv[2::2]))
        unit = opt["--unit"]
        params = resolve(unit, opt["--residual"], int(opt["--stages"]), int(opt["--lanes"]),
                         opt.get("--accum"))
        verified.append(module_name(unit, **params))
    assert sorted(verified) == sorted(module_name(u, **p) for u, p in standard_set())
    assert [a[a.index("--accum") + 1] if "--accum" in a else None
            for a in calls if a[0] == "estimate"] == [None, REFERENCE_ACCUM]
