"""The co-design report says only what its numbers say: each verdict and explanation, fed
synthetic rows on both sides of its threshold, flips with them; and ``--repeats``."""

from __future__ import annotations

import csv
from collections.abc import Callable

import pytest

from inferplan.experiments.codesign import (
    AGREE_RTOL,
    CODESIGN_METHODS,
    PAPER,
    codesign_report,
    deviation,
    summarize,
    verdict,
)
from inferplan.experiments.engine import SweepOutcome
from tests.cli import app, runner

ALPHAS = (0.25, 0.4, 0.6, 0.8)
Ratio = Callable[[int, str, float, str], float]


def _rows(ratio: Ratio, *, draws: int = 1, ties: float = 3.0, engine: str = "compiled"):
    """One instance per draw x DNN x alpha; every method's cost ratio from ``ratio``."""
    rows = []
    for draw in range(draws):
        for dnn in ("vgg16", "resnet50"):
            for alpha in ALPHAS:
                for method in CODESIGN_METHODS:
                    value = 1.0 if method == "psg" else ratio(draw, dnn, alpha, method)
                    rows.append({"point": f"{draw}/{dnn}/{alpha}", "draw": draw,
                                 "topology": draw, "dnn": dnn, "alpha": alpha,
                                 "method": method, "ratio": value, "cost": value,
                                 "runtime_s": 1e-3, "engine": engine, "t_star_ties": ties,
                                 "status": "optimal" if method == "psg" else "heuristic",
                                 "interval": 1.0, "target_interval": 1.0})  # fmt: skip
    return rows


def _report(rows) -> str:
    outcome = SweepOutcome(tuple(rows), len(rows), 0, len(rows), 0.0)
    return codesign_report(summarize(rows), rows, seed=0, topologies=1, outcome=outcome,
                           executor="in process")  # fmt: skip


def _line(report: str, start: str) -> str:
    found = [line for line in report.splitlines() if line.startswith(start)]
    assert len(found) == 1, (start, report)
    return found[0]


def _flat(value: float) -> Ratio:
    return lambda draw, dnn, alpha, method: value


@pytest.mark.parametrize(
    ("factor", "expected"),
    [(1 + AGREE_RTOL * 0.9, "agrees (within 25 %)"), (1 + AGREE_RTOL * 1.1, "above"),
     (1 - AGREE_RTOL * 0.9, "agrees (within 25 %)"), (1 - AGREE_RTOL * 1.1, "below")],
)  # fmt: skip
def test_each_end_of_a_median_range_gets_its_own_deviation_and_verdict(factor, expected):
    paper_low = PAPER["median_range"]["pfp", "vgg16"][0]
    report = _report(_rows(_flat(paper_low * factor)))
    line = _line(report, "| VGG-16 PFP median ratio, lowest over alpha |")
    assert line.endswith(f"| {deviation([factor * paper_low], paper_low)} | {expected} |")
    assert f"{100 * (factor - 1):+.0f} %" in line


def test_the_issues_examples_no_longer_read_agree():
    # VGG-16 PWF 6.63-10.1 against 4.1-9.4, ResNet-50 PFP 11.6 against 6.5 at the low end.
    medians = {
        ("vgg16", "pwf"): dict(zip(ALPHAS, (10.1, 8.0, 7.0, 6.63), strict=True)),
        ("resnet50", "pfp"): dict(zip(ALPHAS, (11.6, 13.0, 20.0, 12.0), strict=True)),
    }
    report = _report(_rows(lambda d, dnn, a, m: medians.get((dnn, m), {}).get(a, 5.0)))
    low = _line(report, "| VGG-16 PWF median ratio, lowest over alpha |")
    assert "| +62 % | above |" in low
    high = _line(report, "| VGG-16 PWF median ratio, highest over alpha |")
    assert "| +7 % | agrees (within 25 %) |" in high
    assert "| +78 % | above |" in _line(report, "| ResNet-50 PFP median ratio, lowest over alpha |")


def test_with_several_draws_the_verdict_weighs_the_spread():
    paper = PAPER["median_range"]["pfp", "vgg16"][1]  # 8.6
    assert verdict([paper * 0.8, paper * 1.2], paper) == "agrees (within 25 %) on every draw"
    assert (
        verdict([paper * 0.5, paper * 1.5], paper)
        == "the paper's value lies inside our draws' spread"
    )
    assert verdict([paper * 1.3, paper * 1.5], paper) == "above on every draw"
    spread = _report(_rows(lambda d, dnn, a, m: paper * (0.5 if d == 0 else 1.5), draws=2))
    line = _line(spread, "| VGG-16 PFP median ratio, highest over alpha |")
    assert "| 8.6 | 8.6 (4.3–12.9) | -50 % to +50 % | the paper's value lies inside" in line
    assert "(median and range over 2 draws)" in spread


def _gap_rows(tie_factor: float, draw_factor: float) -> list[dict]:
    # ResNet-50 PFP at 13 on draw 0 and 13 * draw_factor on draw 1 at alpha 0.8, PFP (random)
    # tie_factor times lower (higher for a factor below 1); everything else flat.
    def ratio(draw, dnn, alpha, method):
        base = 13.0 * (draw_factor if draw == 1 else 1.0) if alpha == 0.8 else 13.0
        return base / tie_factor if method == "pfp-random" else base

    return _rows(ratio, draws=2)


def _gap(report: str) -> str:
    return _line(report, "- ResNet-50 PFP:")


# Our medians 13 against the paper's 6.5-25.3: a factor 2 at the low end (ours above), 1.95 at
# the high; PFP (random) is tie_factor times lower (higher below 1), draw 1 draw_factor times
# higher at alpha 0.8.
GAP_CASES = [
    (7.0, 1.2, ["by up to a factor 7 (alpha =", "towards the paper's value",
                "The tie-break moves it more than the draw of networks.",
                "within what the tie-break alone moves"]),
    (1.1, 3.0, ["The draw of networks moves it more than the tie-break.",
                "(alpha = 0.8: 13 to 39)", "within what the draw of networks alone moves"]),
    (2.5, 1.0, ["up to a factor 2 from the paper's range ends (13 against 6.5)",
                "The gap to the paper is within what the tie-break alone moves."]),
    (1.5, 1.2, ["The gap to the paper is larger than the tie-break or the draw of networks "
                "moves the median towards it here: neither explains it alone."]),
    (1 / 3, 1.0, ["-> 39), away from the paper's value.", "neither explains it alone"]),
]  # fmt: skip


@pytest.mark.parametrize(("tie_factor", "draw_factor", "sentences"), GAP_CASES)
def test_the_gap_explanation_follows_the_measured_effects(tie_factor, draw_factor, sentences):
    line = _gap(_report(_gap_rows(tie_factor=tie_factor, draw_factor=draw_factor)))
    for sentence in sentences:
        assert sentence in line
    assert ("within what" in line) != ("neither explains" in line)


def test_one_draw_does_not_claim_the_draws_effect():
    line = _gap(_report(_rows(_flat(12.0))))
    assert "the draws' effect is not measured (--repeats)" in line
    assert "moves it more than" not in line


@pytest.mark.parametrize("ties", [2.0, 614.0])
def test_the_report_counts_the_tied_deployments(ties):
    report = _report(_rows(_flat(5.0), ties=ties))
    assert f"VGG-16 median {ties:g} (from {ties:g} to {ties:g} over 4 instances)" in report
    assert "Hundreds" not in report


def test_tie_break_against_method_flips_with_the_data():
    def tie_big(d, dnn, a, m):
        return 13.0 if m in ("pfp", "pwf", "pwf-keep") else 1.0

    def method_big(d, dnn, a, m):
        return {"pfp": 9.0, "pfp-random": 9.0}.get(m, 3.0)

    assert "matters more than the choice between PFP and PWF" in _report(_rows(tie_big))
    assert "matters less than the choice between PFP and PWF" in _report(_rows(method_big))


@pytest.mark.parametrize(("engine", "words"), [("compiled", "as numba-compiled kernels"),
                                               ("numpy", "as vectorised numpy code")])  # fmt: skip
def test_the_runtime_section_says_how_ours_ran(engine, words):
    report = _report(_rows(_flat(5.0), engine=engine))
    assert f"Here PSG and T* ran {words}" in report
    assert "authors' pure-Python implementation" in report
    assert "| PSG | 1 ms | 0.25 ms | 0.25 |" in report


def test_repeats_draws_independent_networks_and_resumes(tmp_path):
    out = tmp_path / "study"
    args = ["reproduce", "codesign", "--out", str(out), "--topologies", "1", "--jobs", "1",
            "--quiet"]  # fmt: skip
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.stderr
    second = runner.invoke(app, [*args, "--repeats", "2", "--json"])
    assert second.exit_code == 0, second.stderr
    assert '"resumed": 8, "ran": 8' in second.stdout
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    seeds = {r["draw"]: r["seed"] for r in rows}
    assert sorted(seeds) == ["0", "1"] and seeds["0"] != seeds["1"]
    report = (out / "report.md").read_text()
    assert report.startswith("# Co-design") and "2 draws of 1 tiered networks" in report
    assert "(median and range over 2 draws)" in report


def test_repeats_must_be_positive(tmp_path):
    result = runner.invoke(app, ["reproduce", "codesign", "--out", str(tmp_path / "o"),
                                 "--repeats", "0"])  # fmt: skip
    assert result.exit_code == 2
    assert "--repeats" in result.stderr


def _finding(report: str) -> str:
    return _line(report, "VGG-16 PFP at alpha = 0.25, where the paper reports 8.6")


def test_the_vgg_low_alpha_finding_weighs_the_gap_against_the_draws():
    def per_draw(*medians):
        return lambda d, dnn, a, m: medians[d]

    inside = _finding(_report(_rows(per_draw(7.0, 10.0), draws=2)))
    assert "above 8.6 on 1 of them" in inside
    assert "lies inside the spread of our draws" in inside
    above = _finding(_report(_rows(per_draw(9.0, 10.0), draws=2)))
    assert "Ours is above it on every draw: the gap is larger than the draw noise." in above
    below = _finding(_report(_rows(per_draw(5.0, 6.0), draws=2)))
    assert "Ours is below it on every draw" in below
    one = _finding(_report(_rows(per_draw(10.0))))
    assert "One draw of networks cannot tell a gap from draw noise" in one


@pytest.mark.parametrize("field", ["topologies", "repeats"])
def test_the_api_refuses_fewer_than_one_draw_or_network(tmp_path, field):
    from inferplan.errors import InvalidArgument
    from inferplan.experiments import reproduce_codesign

    with pytest.raises(InvalidArgument, match=f"{field}: must be at least 1, got 0"):
        reproduce_codesign(tmp_path / "out", **{field: 0})
    assert not (tmp_path / "out").exists()
