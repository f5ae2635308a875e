"""``inferplan run --testbed --rate``: inputs fed open loop at the plan's throughput, in the
run's dilated time, and the latency reported beside the plan's (as root, with network
namespaces and a CPU controller)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from inferplan.runtime.testbed.linux import missing  # noqa: E402

from .pipeline_support import finish, processes_marked, start, write  # noqa: E402
from .test_testbed_run import WIDE, _wide_case  # noqa: E402
from .testbed_support import WIDE_SHAPE, left_by  # noqa: E402

LACKS = missing()
pytestmark = pytest.mark.skipif(bool(LACKS), reason="testbed: " + "; ".join(LACKS))


def test_inputs_fed_on_the_testbed_come_every_dilated_target_interval(tmp_path):
    net, plan, planned = _wide_case(tmp_path)  # stages of 25 to 40 ms
    data = json.loads(plan.read_text())
    data["target_interval"] = 0.06  # 1.5 times the slowest stage
    write(plan, data)
    torch.save(torch.randn(16, *WIDE_SHAPE, generator=torch.Generator().manual_seed(3)),
               tmp_path / "in.pt")  # fmt: skip
    proc, mark = start(
        [
            "run",
            str(net),
            *WIDE,
            "--plan",
            str(plan),
            "--testbed",
            "--rate",
            "--inputs",
            str(tmp_path / "in.pt"),
            "--warmup",
            "3",
            "--json",
        ]
    )
    code, out, err = finish(proc)
    assert code == 0, err
    report = json.loads(out)
    k = report["dilation"]
    assert report["mode"] == "testbed" and report["outputs_match"] is True
    assert report["feed_interval_s"] == pytest.approx(k * 0.06, rel=1e-12)
    # outputs leave as the inputs came (a run the kernel cannot keep up with only slows them)
    assert report["measured_interval"] >= 0.85 * report["feed_interval_s"], out
    assert report["latency_s"]["predicted"] == pytest.approx(k * sum(planned), rel=1e-9)
    assert report["queueing"]["says"].startswith("fed at the plan's throughput")
    assert left_by(proc.pid) == [] and processes_marked(mark) == []
