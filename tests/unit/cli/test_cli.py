"""The `rackwise` command line as a user runs it: a subprocess, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[3]
LINGJUN = REPO / "simulations" / "traces" / "lingjun-topo.csv"
GANGS = """
- {name: llm, pods: 4, gpus_per_pod: 8, shape: {dp: 4, tp: 8}}
- {name: pair, pods: 2, gpus_per_pod: 4, required_level: host}
- {name: huge, pods: 500, gpus_per_pod: 8, required_level: rack}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    gangs = tmp_path / "gangs.yaml"
    gangs.write_text(GANGS)
    topology = tmp_path / "fabric.yaml"
    done = run_cli(
        "topology",
        "generate",
        "-o",
        str(topology),
        "--blocks",
        "2",
        "--racks",
        "2",
        "--hosts",
        "2",
        "--nvlink",
        "2",
    )
    assert done.returncode == 0, done.stderr
    generated = tmp_path / "gen.yaml"
    generated.write_text("generate: {blocks: 2, racks: 3, hosts: 2, gpus: 8}\n")
    return {"gangs": gangs, "yaml": topology, "generate": generated, "lingjun": LINGJUN}


@pytest.mark.parametrize("kind", ["yaml", "generate", "lingjun"])
def test_place_json_on_every_topology_source(files, kind):
    done = run_cli(
        "place", "--topology", str(files[kind]), "--gangs", str(files["gangs"]), "--json"
    )
    assert done.returncode == 1, done.stderr  # "huge" is unplaceable: as with the table
    result = {p["gang"]: p for p in json.loads(done.stdout)["placements"]}
    assert result["llm"]["status"] == "placed"
    assert sorted(p["rank"] for p in result["llm"]["pods"]) == [0, 1, 2, 3]
    assert result["pair"]["domains"]["host"] == 1
    assert result["huge"]["status"] == "unplaceable"
    # the pool or, on Lingjun, the largest rack is the binding constraint
    assert result["huge"]["reason"].startswith("needs 500 pods")


def test_place_table_shows_ranks_cost_and_exit_1_when_a_gang_waits(files):
    done = run_cli("place", "--topology", str(files["yaml"]), "--gangs", str(files["gangs"]))
    assert done.returncode == 1  # one gang could not be placed
    assert "ranks 0-" in done.stdout
    assert "optimal" in done.stdout
    assert "unplaceable" in done.stdout
    assert "objective: J, lower is better" in " ".join(done.stdout.split())
    helped = run_cli("place", "--help")
    assert "proven lower bound on J" in " ".join(helped.stdout.split())


def test_topology_show_counts_down_hosts_as_offering_nothing(files, tmp_path):
    state = tmp_path / "state.yaml"
    state.write_text("used: [{host: h0-0, gpus: 4}]\ndown: [h0-1]\n")
    done = run_cli("topology", "show", str(files["generate"]), "--state", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fabric: 84/96 GPUs free, 1 host down")
    assert "rack r0: 4/16 free, 1 host down" in done.stdout


def test_topology_show_prints_free_capacity(files):
    done = run_cli("topology", "show", str(files["lingjun"]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fabric: 6776/6776 GPUs free")
    assert "spine P10" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["place", "--topology", "missing.yaml", "--gangs", "x"], "missing.yaml: No such file"),
        (
            ["place", "--topology", "{yaml}", "--gangs", "{gangs}", "--policy", "magic"],
            "--policy: unknown 'magic'",
        ),
        (
            ["place", "--topology", "{gangs}", "--gangs", "{gangs}"],
            "Input should be a valid dictionary",
        ),
        (["place", "--topology", "{yaml}", "--gangs", "{yaml}"], "expected a list of gangs"),
        (["place", "--bogus"], "No such option: --bogus"),
        (["topology", "generate", "-o", "x.yaml", "--pools", "training"], "is not POOL=SHARE"),
        (["topology", "show", "{yaml}", "--depth", "pod"], "unknown level 'pod'"),
    ],
)
def test_bad_input_one_line_exit_2(files, args, message):
    done = run_cli(*(a.format(yaml=files["yaml"], gangs=files["gangs"]) for a in args))
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_bad_gang_field_names_file_and_field(tmp_path, files):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: a, pods: 2, pool: gpu-pool}\n")
    done = run_cli("place", "--topology", str(files["yaml"]), "--gangs", str(bad))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"rackwise: error: {bad}: gangs[0].pool: unknown pool 'gpu-pool'; "
        "pools are training, batch-inference, online-inference"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00binary", "not a text file (byte 0 is not UTF-8)"),
        (b"- {name: a, pods: 1, required_level: raq}\n", "gang a: unknown level 'raq'"),
        (
            b"- {name: a, pods: 1, roles: [{name: ps, pods: 1, required_level: pod}]}\n",
            "gang a: role ps: unknown level 'pod'",
        ),
    ],
)
def test_a_gangs_file_that_cannot_be_read_is_an_input_error_naming_it(
    tmp_path, files, content, message
):
    gangs = tmp_path / "gangs.yaml"
    gangs.write_bytes(content)
    for extra in ([], ["--json"]):
        done = run_cli("place", "--topology", str(files["yaml"]), "--gangs", str(gangs), *extra)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"rackwise: error: {gangs}: ")
        assert message in done.stderr


def test_place_lists_every_role_with_its_exact_ranks(tmp_path, files):
    gangs = tmp_path / "gangs.yaml"
    gangs.write_text(
        "- {name: a, pods: 2, roles: [{name: ps, pods: 1, gpus_per_pod: 0, "
        "cpu_milli_per_pod: 100}]}\n"
    )
    done = run_cli("place", "--topology", str(files["yaml"]), "--gangs", str(gangs))
    assert done.returncode == 0, done.stderr
    assert "workers" in done.stdout
    assert "role ps" in done.stdout
    assert "(ranks 2)" in done.stdout


def test_samples_are_written_out_and_never_overwritten_unasked(tmp_path):
    done = run_cli("samples", str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(
        p.name for p in (REPO / "manifests" / "samples").glob("*.yaml")
    )
    assert run_cli("samples", str(tmp_path / "s")).returncode == 2
    assert run_cli("samples", str(tmp_path / "s"), "--force").returncode == 0


def test_state_file_marks_usage_and_down_hosts(tmp_path, files):
    state = tmp_path / "state.yaml"
    state.write_text("used: [{host: h0-0, gpus: 8}]\ndown: [h0-1]\n")
    gangs = tmp_path / "one.yaml"
    gangs.write_text("- {name: one, pods: 1, gpus_per_pod: 8}\n")
    done = run_cli(
        "place",
        "--topology",
        str(files["yaml"]),
        "--gangs",
        str(gangs),
        "--state",
        str(state),
        "--json",
    )
    [placement] = json.loads(done.stdout)["placements"]
    assert placement["pods"][0]["host"] not in ("h0-0", "h0-1")


def test_rank_lists_are_exact():
    from scheduler.cli.place_cmd import _span

    assert _span([0, 2]) == "0,2"
    assert _span([3, 0, 1, 2]) == "0-3"
    assert _span([0, 1, 4, 6, 7]) == "0-1,4,6-7"
    assert _span([5]) == "5"


def test_generate_refuses_pools_place_would_refuse_and_shares_not_summing_to_one(tmp_path):
    out = str(tmp_path / "f.yaml")
    for pools, why in (
        ("training=0.5,batch=0.5", "unknown pool 'batch'"),
        ("training=0.9,online-inference=0.9", "sum to 1"),
        ("training=x", "could not convert"),
    ):
        done = run_cli("topology", "generate", "-o", out, "--pools", pools)
        assert done.returncode == 2, pools
        assert why in done.stderr, done.stderr
    done = run_cli("topology", "generate", "-o", out, "--pools", "training=0.5,batch-inference=0.5")
    assert done.returncode == 0, done.stderr


def test_the_help_listing_is_each_commands_own_first_paragraph():
    from scheduler.cli.main import COMMANDS, load

    for name, (_, _, listed) in COMMANDS.items():
        own = " ".join((load(name).help or "").strip().split("\n\n")[0].split())
        assert listed == own, name


def test_help_and_version_load_no_command_module_nor_the_solver():
    """What keeps `rackwise --help` and `--version` fast (a wall-clock limit would be noise on
    a busy machine): neither imports a command's module, OR-Tools, pandas or matplotlib."""
    probe = (
        "import sys\n"
        "from scheduler.cli.main import main\n"
        "sys.argv = ['rackwise', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('ortools', 'pandas', 'matplotlib',"
        " 'numpy') or m.endswith('_cmd')]\n"
        "print('HEAVY', heavy)\n"
    )
    import subprocess
    import sys

    for args in (["--help"], ["--version"], []):
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=REPO
        )
        assert "HEAVY []" in done.stdout, (args, done.stdout[-300:], done.stderr[-300:])


def test_place_keeps_each_nvlink_domains_spare_trays_idle(tmp_path):
    topology = tmp_path / "nvl.yaml"
    args = ["--blocks", "1", "--racks", "1", "--hosts", "4", "--gpus", "4", "--nvlink", "4"]
    done = run_cli("topology", "generate", "-o", str(topology), *args, "--spares", "1")
    assert done.returncode == 0, done.stderr
    gangs = tmp_path / "gangs.yaml"
    gangs.write_text(
        "- {name: fits, pods: 3, gpus_per_pod: 4, required_level: nvlink}\n"
        "- {name: over, pods: 1, gpus_per_pod: 4}\n"
    )
    done = run_cli("place", "--topology", str(topology), "--gangs", str(gangs), "--json")
    assert done.returncode == 1, done.stderr  # the fourth tray is the spare
    result = {p["gang"]: p for p in json.loads(done.stdout)["placements"]}
    assert len({p["host"] for p in result["fits"]["pods"]}) == 3
    assert result["over"]["status"] == "unplaceable"
    wrong = run_cli("topology", "generate", "-o", str(topology), "--spares", "1")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        "rackwise: error: --spares: only NVLink domains keep spare hosts: set nvlink too"
    )


def test_topology_show_counts_held_spares_as_offering_nothing(tmp_path):
    topology = tmp_path / "nvl.yaml"
    topology.write_text(
        "generate: {blocks: 1, racks: 1, hosts: 4, gpus: 4, nvlink: 4, spares: 1}\n"
    )
    state = tmp_path / "state.yaml"
    state.write_text("down: [h0-0]\n")  # the down tray is the domain's spare: none held
    done = run_cli("topology", "show", str(topology), "--depth", "nvlink")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fabric: 12/16 GPUs free, 1 held as spare")
    done = run_cli("topology", "show", str(topology), "--depth", "nvlink", "--state", str(state))
    assert done.stdout.startswith("fabric: 12/16 GPUs free, 1 host down\n")
