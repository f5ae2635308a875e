"""The co-inference report says only what its numbers say: the rows of a small study, changed
to either side of each verdict's threshold, flip the verdict's sentence."""

from __future__ import annotations

import pytest

from inferplan.coinference import layers_from_profile, mlp_layers
from inferplan.experiments.coinference import coinference_report, reproduce_coinference
from inferplan.experiments.coinference.report import (
    PAPER_OPTIMALITY,
    SIGNIFICANT_SAVING,
    feature_sentence,
    optimality_verdict,
)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("coinference-report")
    result = reproduce_coinference(out, seed=1, dnns=("alexnet", "mlp-32x3"),
                                   sweeps={"mean_snr": (2.0,)}, simulate=200, jobs=1)  # fmt: skip
    return list(result.outcome.rows)


def _report(rows) -> str:
    from inferplan.experiments.engine import SweepOutcome

    outcome = SweepOutcome(tuple(rows), 4, 0, 4, 0.0)
    return coinference_report(rows, seed=1, outcome=outcome, executor="in process")


def _with(rows, record: str, **change):
    """Copies of ``rows`` with the fields of every ``record`` row for which ``change`` gives a
    function replaced by its value on the row."""
    out = []
    for r in rows:
        r = dict(r)
        if r["record"] == record:
            for key, value in change.items():
                r[key] = value(r)
        out.append(r)
    return out


def test_the_optimality_verdict_switches_at_the_papers_0_9(rows):
    high = _report(_with(rows, "curve", p_1sla_optimal=lambda r: PAPER_OPTIMALITY + 0.01))
    assert "Agrees: at least 0.9 for every M." in high
    dip = _report(_with(rows, "curve", p_1sla_optimal=lambda r: 1.0 if r["M"] != 3 else 0.89))
    assert "Agrees in part: at least 0.9 for M <= 2, below 0.9 at M = 3." in dip


def test_optimality_verdict_on_both_sides():
    assert optimality_verdict([1.0, 0.9]) == "Agrees: at least 0.9 for every M."
    assert optimality_verdict([0.89, 1.0]) == "Disagrees: below 0.9 at M = 0."


def _saving(one_sla: float, fixed: float = 0.5):
    return lambda r: one_sla if r["strategy"] == "1sla" else fixed


def test_the_savings_verdict_counts_the_1sla_plan(rows):
    rows = [r for r in rows if r["profile"] == "alexnet"]
    above = _report(_with(rows, "strategy", saving=_saving(SIGNIFICANT_SAVING + 0.01)))
    assert "Against the 1-sla plan: agrees for AlexNet (median saving at least 5.0 % over " \
           "each)." in above  # fmt: skip
    below = _report(_with(rows, "strategy", saving=_saving(SIGNIFICANT_SAVING - 0.01)))
    assert "Against the 1-sla plan: not for AlexNet, whose median saving over 1-sla placement " \
           "+ splitting is only 4.0 %: the joint plan is no cheaper than it at 0% of the 2 " \
           "points" in below  # fmt: skip
    assert "Against the fixed strategies (edge-only, device-only, full-placement, " \
           "fixed-split, best-fixed-split): agrees for AlexNet" in below  # fmt: skip


def test_the_savings_verdict_on_the_fixed_strategies_flips(rows):
    rows = [r for r in rows if r["profile"] == "alexnet"]

    def saving(r):
        return {"1sla": 0.5, "edge-only": SIGNIFICANT_SAVING - 0.01}.get(r["strategy"], 0.5)

    below = _report(_with(rows, "strategy", saving=saving))
    assert "not for AlexNet, whose median saving over edge-only is only 4.0 %" in below
    assert "Against the 1-sla plan: agrees for AlexNet" in below


@pytest.mark.parametrize(("confidence", "level", "expected"),
                         [(0.99, "99 %", 0.01), (0.999, "99.9 %", 0.001)])  # fmt: skip
def test_the_monte_carlo_check_uses_the_rows_confidence(rows, confidence, level, expected):
    changed = _with(rows, "strategy", sim_confidence=lambda r: confidence)
    simulated = [r for r in changed if r["record"] == "strategy"]
    report = _report(changed)
    assert f"outside the simulated {level} confidence interval in" in report
    assert f"(about {expected * len(simulated):.1f} expected by chance)" in report


def test_the_feature_sentence_follows_the_sizes():
    vgg = feature_sentence("vgg16", layers_from_profile("vgg16"),
                           [{"profile": "vgg16", "placement": 0}], widths=(8, 32))  # fmt: skip
    assert vgg.startswith("Its raw input is 1.204 Mbit (8 bits per element, against 32")
    assert "the first feature smaller than it is the output of layer 13 (802.8 kbit)" in vgg
    assert vgg.endswith("uploads the raw input (M = 0) at 1 of 1 points.")
    flat = feature_sentence("mlp", mlp_layers(64, 3), [{"profile": "mlp", "placement": 2}])
    assert "no feature or output is smaller, so no split inside uploads less" in flat
    assert flat.endswith("at 0 of 1 points.")


def test_the_report_gives_each_dnns_feature_sizes(rows):
    report = _report(rows)
    assert "AlexNet: median saving over" in report
    assert (
        "Its raw input is 1.204 Mbit (8 bits per element, against 32 for every feature)" in report
    )


def test_corollary_4_1_verdict_flips(rows):
    assert "at M = 0 and M = 1 at 8 of 8 (point, M) pairs. Agrees." in _report(rows)
    broken = _report(_with(rows, "curve", p_1sla_optimal=lambda r: 0.99))
    assert "at 0 of 8 (point, M) pairs. Disagrees: see the checks." in broken
    assert "Ours, default system: 0.990–0.990 over M = 0..8 (0.990–0.990 at M <= 1" in broken


def test_lemma_4_3_verdict_flips(rows):
    assert "non-increasing at 2 of 2 MLP points. Agrees." in _report(rows)

    def rising(r):
        return float(r["placement_cost"]) + 1.0 + float(r["M"])

    broken = _report(_with(rows, "curve", z_1sla=rising))
    assert "non-increasing at 0 of 2 MLP points. Disagrees at some points." in broken


def test_closed_form_verdict_flips(rows):
    assert "enumerated 1-sla M* at 2 of 2 MLP points. Agrees." in _report(rows)

    def off(r):
        if r["strategy"] != "1sla" or r["closed_form_placement"] is None:
            return r["closed_form_placement"]
        return int(r["closed_form_placement"]) + 1

    broken = _report(_with(rows, "strategy", closed_form_placement=off))
    assert "enumerated 1-sla M* at 0 of 2 MLP points. Disagrees at some points." in broken
