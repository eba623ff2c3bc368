"""``moverkit bench speed``: a suite times the inputs it makes of the pairs."""

from __future__ import annotations


def test_speed_suite_times_its_own_inputs():
    from benchmarks import SpeedSuite
    from benchmarks.speed import format_report, run_suite

    seen = []

    def contender(predictions, references):
        return lambda: seen.append((predictions, references))

    suite = SpeedSuite(
        "joined",
        "joined",
        {"a": contender, "b": contender},
        [("a", "b", "<= 1e9")],
        inputs=lambda p, r: (["".join(p)], ["".join(r)]),
    )
    report = run_suite(suite, ["x", "y"], ["z", "w"], repeats=2)
    assert seen == [(["xy"], ["zw"])] * 4
    assert report["n_pairs"] == 1 and "(1 pairs; median seconds)" in format_report(report)
    assert "target <= 1e9: met" in format_report(report)
