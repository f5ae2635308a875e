"""Measured profiles: ``inferplan profile MODEL --measure`` times each block on this machine."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")

from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles import Profile, load_profile  # noqa: E402

from ..cli import app, runner  # noqa: E402
from .pipeline_support import ROOT, model_args  # noqa: E402


def test_measure_writes_seconds_and_flops_per_second_beside_flops(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "mlp.json"
    result = runner.invoke(app, ["profile", *model_args("mlp"), "--measure", "-o", str(out),
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed == json.loads(out.read_text())
    assert len(printed["seconds"]) == len(printed["flops"]) == 4
    assert all(t > 0 for t in printed["seconds"])
    for q, t, rate in zip(printed["flops"], printed["seconds"], printed["flops_per_s"],
                          strict=True):  # fmt: skip
        assert rate == pytest.approx(q / t, rel=1e-12)
    again = load_profile(out)
    assert again.seconds == tuple(printed["seconds"])
    assert again.flops == tuple(printed["flops"])  # the FLOP counts are the unmeasured ones
    plain = runner.invoke(app, ["profile", *model_args("mlp"), "--json"])
    assert json.loads(plain.stdout)["flops"] == printed["flops"]


def test_measure_needs_a_pytorch_model():
    result = runner.invoke(app, ["profile", "vgg16", "--measure"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --measure applies to PyTorch models (module.path:factory) only"
    )


@pytest.mark.parametrize(("seconds", "field"), [((1.0,), "seconds"), ((1.0, -2.0), "seconds[1]")])
def test_profile_seconds_are_one_positive_time_per_block(seconds, field):
    with pytest.raises(InvalidProfile, match=re.escape(f"{field}: ")):
        Profile("p", flops=(1.0, 2.0), activation_bits=(1.0, 1.0, 1.0), seconds=seconds)
