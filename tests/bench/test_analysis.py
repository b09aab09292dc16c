"""The benchmark harness's analysis (tools/bench), which turns raw completions into the figures of
docs/benchmarks.md: checked here with numbers worked out by hand, no GPU needed."""
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench"))

import baselines  # noqa: E402
import clear_readings  # noqa: E402
import early_readings  # noqa: E402
from compare import verdict  # noqa: E402
from experiment import percentile, spread, throughput, throughput_from  # noqa: E402
import gpushare_hook  # noqa: E402
from gpushare_hook import Gpushare, build_command, split_build, split_policy  # noqa: E402
from scenario_memory import analyse, parse_gib  # noqa: E402
import capture_swap  # noqa: E402
from scenario_rotation import copy_summary, parse_jobs, rotation_verdict, search_order  # noqa: E402
from scenario_pair import CONTROLS, _nt_spread, _paired, _paired_nt, _production_controls, _total_spread, fold, reaction  # noqa: E402
import loss_by_window  # noqa: E402
import per_rep  # noqa: E402
import s2_tail  # noqa: E402
import settle_drain  # noqa: E402
import period_noise  # noqa: E402
import round_plot  # noqa: E402
import stalls  # noqa: E402
import start_up  # noqa: E402
import tick_shares  # noqa: E402
import workloads  # noqa: E402


class WorkloadNames(unittest.TestCase):
    def test_a_name_gives_model_kind_batch_pause_and_graph(self):
        spec = workloads.parse("resnet50_train_b8_p20_g")
        self.assertEqual((spec.model, spec.training, spec.batch, spec.pause_ms, spec.graph),
                         ("resnet50", True, 8, 20, True))
        self.assertFalse(workloads.parse("resnet50_infer_b8").graph)
        self.assertEqual(workloads.parse("transformer_infer_b8_g").in_flight_depth, 1)

    def test_a_bad_name_says_what_was_expected(self):
        for name in ("resnet50_train_b8_g_p20", "vgg_train_b8", "resnet50_b8", "sleep_train_b1_g"):
            with self.assertRaises(ValueError, msg=name) as caught:
                workloads.parse(name)
            self.assertIn(name, str(caught.exception))


class ClearReadings(unittest.TestCase):
    LOG = "\n".join([
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=?/?:0.60 busy=?",
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=0.020±0.020(3)/80:0.77 busy=1.00",
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=0.020±0.020(3)/80:0.77 busy=1.00",
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=0.010±0.015(4)/80:0.95 busy=1.00",
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=0.030±0.010(8)/80:0.95 busy=1.00",
        "t tick device=0 job1:P:1l budget gated=?/?:0.00 beside=0.070±0.010(9)/80:0.95 busy=1.00",
    ])

    def test_readings_drop_repeats_and_unknown_costs(self):
        self.assertEqual(clear_readings.readings(self.LOG),
                         [(0.02, 0.02, 3), (0.01, 0.015, 4), (0.03, 0.01, 8), (0.07, 0.01, 9)])

    def test_a_reading_rests_on_the_larger_of_its_late_median_and_last(self):
        seq = clear_readings.readings(self.LOG)
        self.assertAlmostEqual(clear_readings.resting_cost(seq), 0.07)
        self.assertIsNone(clear_readings.resting_cost(seq[:2]))

    def test_clear_early_needs_the_pairs_and_the_margin(self):
        seq = clear_readings.readings(self.LOG)
        self.assertTrue(clear_readings.clear_early(seq, 2, 4))     # 0.01 + 0.03 <= 0.0526
        self.assertFalse(clear_readings.clear_early(seq, 3, 4))    # 0.055
        self.assertFalse(clear_readings.clear_early(seq[:1], 1, 4))  # 3 pairs only
        self.assertTrue(clear_readings.clear_early(seq[:1], 1, 3))   # 0.04

    def test_the_doubt_band_is_a_reading_given_the_doubt_above_one_and_a_half_allowances(self):
        self.assertFalse(clear_readings.in_doubt_band(clear_readings.readings(self.LOG)))
        self.assertTrue(clear_readings.in_doubt_band([(0.091, 0.062, 11)]))   # low 0.029 fits
        self.assertFalse(clear_readings.in_doubt_band([(0.091, 0.030, 11)]))  # low 0.061: held
        self.assertFalse(clear_readings.in_doubt_band([(0.091, 0.062, 2)]))   # two pairs
        self.assertFalse(clear_readings.in_doubt_band([(0.070, 0.062, 11)]))  # within 1.5x
        self.assertFalse(clear_readings.in_doubt_band([(0.110, 0.090, 11)]))  # beyond twice


class EarlyReadings(unittest.TestCase):
    @staticmethod
    def line(launches, gate, completed, busy_us=50_000, reading="?/?"):
        return ("t tick device=0 window=50000us job1:O:%dl/0w->inf%s job2:P:%dl/0w/%dc->inf/"
                "%dus-busy/750us-quiet budget gated=?/?:0.00 beside=%s:0.60 busy=?"
                % (launches, gate, completed, completed, busy_us, reading))

    def log(self):
        return "\n".join([
            self.line(0, "(paused)", 2000), self.line(0, "", 2000),        # paused, paused
            self.line(500, "", 1000), self.line(500, "(paused)", 1200),    # beside, beside
            self.line(0, "(paused)", 2000, reading="0.400±0.010(2)/?"),   # paused (reading)
            self.line(0, "", 2100), self.line(0, "", 1000, busy_us=20_000),  # paused, paused
        ])

    def seq(self):
        return early_readings.windows(self.log(), early_readings.FULL)

    def test_launches_per_tick_line(self):
        self.assertEqual(early_readings.launches(self.log()), [0, 0, 500, 500, 0, 0, 0])

    def test_beside_is_set_against_its_paused_neighbours(self):
        got = early_readings.beside_against_paused(self.seq())
        self.assertEqual([i for i, _ in got], [2, 3])
        # paused neighbours 2000, 2000, 2000, 2100 kernels (the last window, in flight 0.4 of
        # it, has no speed): median 2000
        self.assertAlmostEqual(got[0][1], math.log(1000 / 2000))
        self.assertAlmostEqual(got[1][1], math.log(1200 / 2000))
        self.assertIsNone(early_readings.own_cost(got))  # fewer than LEAST windows
        # ten differences, five of each: the median is their mean in log
        self.assertAlmostEqual(early_readings.own_cost(got * 5), 1 - math.sqrt(0.5 * 0.6))

    def test_the_first_reading_counts_only_on_two_pairs(self):
        self.assertEqual(early_readings.first_two_pair_reading(self.log()), (4, 0.4, 0.01))
        three = self.log().replace("(2)/?", "(3)/?")
        self.assertIsNone(early_readings.first_two_pair_reading(three))

    def test_window_noise_from_windows_next_to_each_other_in_one_mode(self):
        # steps: beside 1000 -> 1200, paused 2000 -> 2100; two are too few
        self.assertIsNone(early_readings.window_noise(self.seq(), 6))
        steady = [("paused", 3.0), ("paused", 3.1), ("paused", 3.0), ("paused", 3.2)]
        self.assertAlmostEqual(early_readings.window_noise(steady, 3),
                               1.4826 * 0.1 / math.sqrt(2))

    def test_opp_start_splits_by_the_launch_windows_before(self):
        early, late = early_readings.opp_start(self.seq(), early_readings.launches(self.log()), 1)
        self.assertEqual(len(early), 1)  # the first beside window: no launches before it
        self.assertEqual(len(late), 1)


class SettleDrain(unittest.TestCase):
    line = staticmethod(EarlyReadings.line)

    def log(self, settle, measured):
        # two beside windows (1000 kernels), the gate turns paused; the settling window, the
        # measured one; beside again
        return "\n".join([
            self.line(0, "", 2000),
            self.line(500, "", 1000), self.line(500, "(paused)", 1000),
            self.line(0, "(paused)", settle), self.line(0, "", measured),
            self.line(500, "", 1000),
        ])

    def test_a_change_is_two_beside_windows_then_two_paused(self):
        text = self.log(1600, 2000)
        found = settle_drain.changes(period_noise.windows(text, period_noise.FULL),
                                     early_readings.launches(text))
        self.assertEqual(len(found), 1)
        b, s, m = found[0]
        self.assertAlmostEqual(s - b, math.log(1.6))
        self.assertAlmostEqual(m - b, math.log(2.0))

    def test_no_change_without_opportunistic_launches_before_it(self):
        text = self.log(1600, 2000).replace("job1:O:500l/0w->inf(paused)", "job1:O:0l/0w->inf(paused)")
        self.assertEqual(settle_drain.changes(period_noise.windows(text, period_noise.FULL),
                                              early_readings.launches(text)), [])

    def test_the_drain_is_the_share_of_the_cost_the_settling_window_kept(self):
        # half the way back in log speed: half the window
        half = (0.0, math.log(2) / 2, math.log(2))
        n, s_b, m_b, m_s, drain = settle_drain.summary([half] * 3)
        self.assertEqual(n, 3)
        self.assertAlmostEqual(drain, settle_drain.WINDOW_MS / 2)
        # beside costing too little to tell: no time
        self.assertIsNone(settle_drain.summary([(0.0, 0.01, 0.02)])[4])
        self.assertIsNone(settle_drain.summary([]))

    def test_row_names_drop_the_repetition(self):
        self.assertEqual(settle_drain.row_name("gpushared-harvest:a=1@mps-ext-rep2.log"),
                         "harvest:a=1@mps-ext")
        self.assertEqual(settle_drain.row_name("gpushared-harvest:a=1@mps-ext.log"),
                         "harvest:a=1@mps-ext")


class Statistics(unittest.TestCase):
    def test_percentile_interpolates(self):
        self.assertEqual(percentile([4.0], 99), 4.0)
        self.assertEqual(percentile([1, 2, 3, 4, 5], 50), 3)
        self.assertAlmostEqual(percentile([10, 20], 95), 19.5)
        self.assertEqual(percentile([3, 1, 2], 0), 1)

    def test_spread_ignores_missing_repetitions(self):
        self.assertEqual(spread([3, None, 1, 2]), {"median": 2, "min": 1, "max": 3, "n": 3})
        self.assertIsNone(spread([None]))

    def test_throughput_counts_completions_inside_the_task(self):
        result = {"completions": [0.5, 1.0, 1.5, 2.5]}
        self.assertEqual(throughput(result, task_len=2.0, window_s=4.0), 0.75)
        # --late-s: from 1 s to 3 s, three completions in 2 s.
        self.assertEqual(throughput_from(result, 1.0, 3.0), 1.5)

    def test_verdict_against_the_first_runs_range(self):
        first = {"median": 1.0, "min": 0.9, "max": 1.1}
        self.assertEqual(verdict(first, {"median": 1.05, "min": 1.0, "max": 1.2}), "inside")
        self.assertEqual(verdict(first, {"median": 1.2, "min": 1.05, "max": 1.3}), "overlap")
        self.assertEqual(verdict(first, {"median": 2.0, "min": 1.9, "max": 2.1}), "apart")
        self.assertEqual(verdict(None, first), "–")


class NormalizedThroughput(unittest.TestCase):
    """S1's NT: against the isolated median, with a range that carries the isolated spread."""

    def test_range_divides_by_the_other_end_of_the_isolated_range(self):
        iso = {"median": 10.0, "min": 8.0, "max": 12.5}
        nt = _nt_spread([10.0, 11.0, 12.0], iso)
        self.assertAlmostEqual(nt["median"], 1.1)
        self.assertAlmostEqual(nt["min"], 10.0 / 12.5)
        self.assertAlmostEqual(nt["max"], 12.0 / 8.0)
        self.assertEqual(nt["n"], 3)

    def test_total_adds_both_ranges(self):
        prod = {"median": 0.6, "min": 0.5, "max": 0.7, "n": 2}
        opp = {"median": 0.3, "min": 0.25, "max": 0.4, "n": 3}
        total = _total_spread(prod, opp)
        self.assertAlmostEqual(total["median"], 0.9)
        self.assertAlmostEqual(total["min"], 0.75)
        self.assertAlmostEqual(total["max"], 1.1)
        self.assertEqual(total["n"], 2)
        self.assertIsNone(_total_spread(None, opp))

    def test_no_isolated_windows_gives_no_nt(self):
        self.assertIsNone(_nt_spread([1.0], {"median": float("nan"), "min": float("nan"), "max": float("nan")}))


class ProductionControls(unittest.TestCase):
    """--prod-controls: which control rows a run's shared rows allow."""

    def names(self, shared):
        return [u.name for u in _production_controls(None, shared, {}, 1.0)]

    def test_mps_prio_alone_is_enough_for_the_mps_control(self):
        # Every call of record skips the plain mps row; its production worker runs for MPS-prio too.
        self.assertEqual(self.names(["mps-prio", "gpushare:harvest@mps-ext"]), list(CONTROLS))

    def test_no_mps_row_no_mps_control(self):
        self.assertEqual(self.names(["time-slicing", "gpushare:tgs"]), ["isolated-prod-gs"])


class PairedNt(unittest.TestCase):
    def test_each_repetition_against_its_own_isolated_run(self):
        def run(n):  # n completions in a 1 s window
            return {"completions": [(i + 0.5) / n for i in range(n)]}

        got = {("isolated-prod", 0): {"prod": run(10)}, ("isolated-prod", 1): {"prod": run(20)},
               ("row", 0): {"prod": run(9)}, ("row", 1): {"prod": run(20)}, ("row", 2): {"prod": run(5)}}
        # Repetition 2 has no isolated run: left out. Against the median of 10 and 20 the two
        # repetitions would read 0.6 and 1.33.
        self.assertEqual(_paired_nt(got, "row", 3, 1.0), {"median": 0.95, "min": 0.9, "max": 1.0, "n": 2})
        self.assertIsNone(_paired_nt(got, "other", 3, 1.0))
        # S1 passes rates: a repetition without an isolated rate, or with 0, is left out.
        self.assertEqual(_paired({0: 45.0, 1: 40.0, 2: 9.0}, {0: 50.0, 1: 0.0}),
                         {"median": 0.9, "min": 0.9, "max": 0.9, "n": 1})


class Reaction(unittest.TestCase):
    def test_fold_rates_by_phase(self):
        # Period 1 s in 0.5 s bins over a 2 s window: completions at 0.1 and 1.2 (first half of
        # their periods), 0.7, 0.8 and 1.9 (second half).
        profile = fold([0.1, 0.7, 0.8, 1.2, 1.9], window=2.0, period=1.0, bin_s=0.5)
        self.assertEqual(profile, [2.0, 3.0])

    def test_fold_from_a_later_start(self):
        # --late-s: only the periods from `start` on; 0.1 and 0.7 (the first period) are left out,
        # and the bins are set from the start (1.2 in the first half, 1.9 in the second).
        profile = fold([0.1, 0.7, 0.8, 1.2, 1.9], window=2.0, period=1.0, bin_s=0.5, start=1.0)
        self.assertEqual(profile, [2.0, 2.0])

    def test_give_way_and_take_back(self):
        # Production on for 4 bins then off for 4 (bin 0.05 s); the opportunistic job drops from
        # 10 to 0 one bin after the on-edge and recovers two bins after the off-edge.
        profile = [10, 0, 0, 0, 0, 2, 10, 10]
        out = reaction(profile, on_s=0.2, bin_s=0.05, iso_rate=10)
        self.assertEqual(out["opp_nt_on"], 0.0)
        self.assertEqual(out["opp_nt_off"], 1.0)
        self.assertAlmostEqual(out["give_way_ms"], 100)
        self.assertAlmostEqual(out["take_back_ms"], 150)

    def test_no_edge_when_the_job_never_gives_way(self):
        out = reaction([9.5, 9.5, 10, 10], on_s=0.1, bin_s=0.05, iso_rate=10)  # under 10 % apart
        self.assertIsNone(out["give_way_ms"])


class TickLog(unittest.TestCase):
    @staticmethod
    def tick(gate, done, in_flight_us, launched=1000):
        return (f"2026-11-26 11:54:28.284 gpushared trace: tick device=1 window=50000us "
                f"job1:P:{launched}l/0w/{done}c->inf/{in_flight_us}us-busy job2:O:900l/0w->inf{gate}/q150 "
                "budget gated=0.010±0.030/4:0.05 beside=0.070±0.030/970:0.90")

    def test_speeds_by_mode_leave_out_each_modes_first_window_and_short_ones(self):
        lines = [self.tick("(paused)", 1000, 50000),   # first of its mode: left out
                 self.tick("(paused)", 1600, 50000),   # 32 kernels/ms
                 self.tick("(paused)", 1500, 50000),   # 30
                 self.tick("", 1300, 50000),           # beside, first: left out
                 self.tick("", 1250, 50000),           # 25
                 self.tick("", 600, 20000),            # in flight 40 % of the window: left out
                 self.tick("(gated)", 5, 1000, launched=0)]  # production idle
        busy, idle, last, measured, speeds, states, per_window, first_beside = tick_shares.analyse(
            "\n".join(lines))
        self.assertEqual(busy, {"paused": 3, "gated": 0, "beside": 3})
        self.assertEqual(states, ["paused"] * 3 + ["beside"] * 3)
        self.assertEqual(tick_shares.early_late(states, 4), ("0.25", "1.00"))
        self.assertEqual(tick_shares.early_late(states, 60), ("0.50", "–"))
        self.assertEqual(idle, {"paused": 0, "gated": 1, "beside": 0})
        self.assertEqual(speeds["paused"], [32.0, 30.0])
        self.assertEqual(speeds["beside"], [25.0])
        self.assertEqual(speeds["gated"], [])
        # Kernels per busy window, whatever its in-flight share (each mode's first left out).
        self.assertEqual(per_window, {"paused": [1600, 1500], "gated": [], "beside": [1250, 600]})
        self.assertTrue(measured.startswith("budget gated=0.010"))
        self.assertEqual(first_beside, "beside=0.070±0.030/970:0.90")

    def test_a_start_up_lasts_until_a_full_window_at_most_of_the_steady_speed(self):
        climb = [self.tick("(paused)", done, 50000) for done in (50, 400, 1000)]  # 1, 8, 20 /ms
        steady = [self.tick("(paused)", 1500, 50000)] * 6                        # 30 /ms
        partial = [self.tick("(paused)", 600, 20000)]                            # 30 /ms, 40 %
        self.assertEqual(tick_shares.start_up_windows("\n".join(climb + partial + steady)), 4)
        self.assertIsNone(tick_shares.start_up_windows("\n".join(partial)))

    def test_beside_runs_count_the_windows_in_a_row_that_ran_beside_a_busy_job(self):
        t = self.tick
        lines = [t("(paused)", 1000, 50000),
                 t("", 1000, 50000),          # gives beside: the next window runs beside
                 t("(paused)", 900, 50000),   # beside, 1; gives paused
                 t("", 1000, 50000),          # paused; gives beside
                 t("", 900, 50000),           # beside
                 t("", 900, 50000),           # beside
                 t("(gated)", 900, 50000),    # beside: a run of 3; gives gated
                 t("", 5, 1000, launched=0),  # gated, production idle
                 t("", 0, 0, launched=0),     # beside but production idle: no run
                 t("(paused)", 900, 50000)]   # beside, busy: a run of 1 at the end
        self.assertEqual(tick_shares.beside_runs("\n".join(lines)), {1: 2, 3: 1})
        self.assertEqual(tick_shares.beside_runs(""), {})

    def test_the_first_beside_reading_is_the_first_with_its_cost_known(self):
        line = self.tick("(paused)", 1000, 50000)
        lines = [line.replace("beside=0.070±0.030/970:0.90", "beside=?/?:0.60"),
                 line.replace("beside=0.070±0.030/970:0.90", "beside=0.225±0.289/456:0.05"), line]
        self.assertEqual(tick_shares.analyse("\n".join(lines)).first_beside,
                         "beside=0.225±0.289/456:0.05")


class LossByWindow(unittest.TestCase):
    """tools/bench/loss_by_window.py: each busy window's shortfall against steady paused speed."""

    @staticmethod
    def tick(gate, done, in_flight_us=50000, opportunistic=900):
        return (f"2026-11-27 11:54:28.284 gpushared trace: tick device=1 window=50000us "
                f"job1:P:900l/0w/{done}c->inf/{in_flight_us}us-busy job2:O:{opportunistic}l/0w->inf{gate}")

    def test_each_kind_of_window_is_charged_its_shortfall(self):
        # A line's gate is the next window's. Paused at 1600 (steady: the median), beside at 1200
        # (its first window too), a paused window after beside at 1400 (the drain), idle, then a
        # return in flight half the window at full speed (no loss) and a gated window at 1200.
        lines = [self.tick("(paused)", 1600), self.tick("(paused)", 1600), self.tick("", 1600),
                 self.tick("", 1200), self.tick("(paused)", 1200), self.tick("(paused)", 1400),
                 self.tick("(gated)", 1600), self.tick("(gated)", 0, 0), self.tick("(gated)", 800, 25000),
                 self.tick("(gated)", 1200)]
        entries = loss_by_window.windows(tick_shares.window_text("\n".join(lines)))
        busy, out = loss_by_window.losses(entries)
        self.assertEqual(busy, 8)  # the first line only sets a gate; one window idle
        self.assertEqual(out["paused"], [3, 0.0])
        self.assertEqual(out["beside-first"], [1, 0.25])
        self.assertEqual(out["beside"], [1, 0.25])
        self.assertEqual(out["drain"], [1, 0.125])
        self.assertEqual(out["return"], [1, 0.0])
        self.assertEqual(out["return-beside"], [0, 0.0])
        self.assertEqual(out["gated"], [1, 0.25])

    def test_a_return_not_held_is_its_own_kind(self):
        # Idle with a beside gate (not held): the return at 1200 counts as return-beside.
        lines = [self.tick("(paused)", 1600), self.tick("(paused)", 1600), self.tick("", 1600),
                 self.tick("", 0, 0), self.tick("", 1200)]
        busy, out = loss_by_window.losses(loss_by_window.windows(tick_shares.window_text("\n".join(lines))))
        self.assertEqual(out["return-beside"], [1, 0.25])
        self.assertEqual(out["return"], [0, 0.0])


    def test_logs_pool_by_their_row(self):
        self.assertEqual(loss_by_window.row_of("gpushared-harvest:x=1@mps-ext-rep3.log"), "harvest:x=1@mps-ext")
        self.assertEqual(loss_by_window.row_of("gpushared-harvest:x=1@mps-ext.log"), "harvest:x=1@mps-ext")


class PerRep(unittest.TestCase):
    """tools/bench/per_rep.py: each row's production against its own repetition's isolated run."""

    def test_a_mean_carries_its_standard_error(self):
        mean, error = per_rep.mean_error([0.9, 1.0, 1.1])
        self.assertAlmostEqual(mean, 1.0)
        self.assertAlmostEqual(error, 0.1 / math.sqrt(3))
        self.assertEqual(per_rep.mean_error([0.5]), (0.5, None))
        self.assertEqual(per_rep.mean_error([]), (None, None))
        self.assertEqual(per_rep.with_error(0.9314, 0.0161), "0.931 ± 0.016")
        self.assertEqual(per_rep.with_error(0.5, None), "0.500")
        self.assertEqual(per_rep.with_error(None, None), "–")

    def test_a_ratio_of_means_adds_the_relative_errors(self):
        ratio, error = per_rep.ratio_error([0.6, 0.8], [0.8, 0.8])
        self.assertAlmostEqual(ratio, 0.875)
        self.assertAlmostEqual(error, 0.1 / 0.8)  # the denominator's error is 0
        ratio, error = per_rep.ratio_error([0.7, 0.7], [0.6, 1.0])
        self.assertAlmostEqual(ratio, 0.875)
        self.assertAlmostEqual(error, 0.7 * 0.2 / 0.8 ** 2)
        ratio, error = per_rep.ratio_error([0.7], [0.8])
        self.assertAlmostEqual(ratio, 0.875)
        self.assertIsNone(error)
        self.assertIsNone(per_rep.ratio_error([], [0.8]))
        self.assertIsNone(per_rep.ratio_error([0.7], [0.0, 0.0]))

    def test_each_repetition_against_its_own_isolated_run(self):
        runs = [{"config": "isolated-prod", "rep": 0, "results": {"prod": {"completions": [0.1, 0.2, 0.3, 0.4]}}},
                {"config": "isolated-prod", "rep": 1, "results": {"prod": {"completions": [0.1, 0.3]}}},
                {"config": "row", "rep": 0, "results": {"prod": {"completions": [0.1, 0.3, 1.5]}}},
                {"config": "row", "rep": 1, "results": {"prod": {"completions": [0.1, 0.2, 0.7]}}},
                {"config": "isolated-opp", "rep": 0, "results": None}]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "S5-raw.json.gz")
            with gzip.open(path, "wt") as f:
                json.dump(runs, f)
            rows = per_rep.production_runs(path)
            kept = os.path.join(d, "prod.json.gz")
            per_rep.extract(path, kept)
            self.assertEqual(per_rep.production_runs(kept), rows)
        self.assertEqual(sorted(rows), ["isolated-prod", "row"])
        # A 1 s window (the completion at 1.5 s is outside), 0.5 s on and 0.5 s off.
        self.assertEqual(len(per_rep.in_window(rows["row"][0], 1.0)), 2)
        # Repetition 0: 2 of the isolated run's 4; repetition 1: 3 (0.7 s included) of 2.
        self.assertEqual(per_rep.paired(rows, 1.0)["row"], [0.5, 1.5])
        # 0.1 s and 0.2 s fall in tenths 2 and 4 of the 0.5 s on-phase, 0.7 s in the off-phase.
        self.assertEqual(per_rep.by_tenth(rows["row"][1], 1.0, 0.5, 0.5), [0, 0, 1, 0, 1, 0, 0, 0, 0, 0])

    def test_the_opportunistic_jobs_whole_on_phases(self):
        runs = [{"config": "isolated-opp", "rep": 0, "results": {"opp": {"completions": [0.1 * i for i in range(1, 21)]}}},
                {"config": "isolated-prod", "rep": 0, "results": {"prod": {"completions": [0.5, 1.5]}}},
                # In the on-phases [0, 0.5) and [1, 1.5): 0.05 (its return), 0.3, 1.2; 0.7 is off.
                {"config": "row", "rep": 0, "results": {"prod": {"completions": [0.5]},
                                                        "opp": {"completions": [0.05, 0.3, 0.7, 1.2, 2.5]}}},
                {"config": "row", "rep": 1, "results": {"opp": {"completions": [0.1]}}}]  # no isolated run
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "S5-raw.json.gz")
            with gzip.open(path, "wt") as f:
                json.dump(runs, f)
            kept = os.path.join(d, "kept.json.gz")
            per_rep.extract(path, kept)
            for p in (path, kept):
                opp = per_rep.production_runs(p, "opp")
                # Alone it completes 10 per second: 10 in the two windows' 1 s of on-phases; 3 here.
                self.assertEqual(per_rep.harvest_on(opp, 2.0, 0.5, 0.5), {"row": [0.3]})
                # Its first 0.1 s after each on-edge (0.2 s in all): 0.05 alone, of 2.
                self.assertAlmostEqual(per_rep.harvest_in(opp, 2.0, 0.5, 0.5, 0, 0.1)["row"][0], 0.5)
                # While production idles (1 s in all): 0.7 alone, of 10.
                self.assertAlmostEqual(per_rep.harvest_in(opp, 2.0, 0.5, 0.5, 0.5, 1.0)["row"][0], 0.1)
                self.assertEqual(per_rep.production_runs(p)["row"], {0: [0.5]})


class S2Tail(unittest.TestCase):
    """tools/bench/s2_tail.py: S2's tail pooled over repetitions and files, and paired by arrivals."""

    @staticmethod
    def one(config, rep, latencies_s, opp=None):
        results = {"prod": {"latencies": latencies_s, "arrivals": len(latencies_s)}}
        if opp is not None:
            results["opp"] = {"completions": opp}
        return {"config": config, "rep": rep, "results": results}

    def write(self, d, name, runs):
        path = os.path.join(d, name)
        with gzip.open(path, "wt") as f:
            json.dump(runs, f)
        return path

    def test_pooled_paired_and_opportunistic(self):
        iso0 = [0.001] * 99 + [0.010]   # p99 (interpolated) 9.91 ms
        iso1 = [0.001] * 100             # p99 1 ms
        row0 = [0.002] * 99 + [0.020]   # twice iso0 everywhere
        row1 = [0.003] * 100             # three times iso1
        first = [self.one("isolated-opp", 0, [], opp=[0.5, 1.0, 1.5, 2.0, 5.0]),  # 4 in a 4 s window
                 self.one("isolated-opp", 1, [], opp=[1.0, 2.0]),
                 self.one("isolated-prod@0.3", 0, iso0), self.one("isolated-prod@0.3", 1, iso1),
                 self.one("gs@0.3", 0, row0, opp=[1.0, 3.0]), self.one("gs@0.3", 1, row1, opp=[1.0]),
                 {"config": "gs@0.5", "rep": 0, "results": None}]
        # A second file (another lane): its repetition 0 is paired with its own isolated run only.
        second = [self.one("isolated-prod@0.3", 0, iso1), self.one("gs@0.3", 0, iso1)]
        with tempfile.TemporaryDirectory() as d:
            paths = [self.write(d, "a.json.gz", first), self.write(d, "b.json.gz", second)]
            rows = s2_tail.table(paths)
            kept = os.path.join(d, "kept.json.gz")
            s2_tail.extract(paths[0], kept)
            self.assertEqual(s2_tail.table([kept, paths[1]]), rows)  # the extract reads the same
        self.assertEqual([(r["row"], r["load"]) for r in rows], [("isolated-prod", 0.3), ("gs", 0.3)])
        iso, gs = rows
        self.assertEqual((iso["n"], gs["n"]), (300, 300))
        self.assertAlmostEqual(iso["p99_x"], 1.0)
        # Pooled: every file's requests together.
        every = row0 + row1 + iso1
        self.assertAlmostEqual(gs["p99"], percentile([x * 1000 for x in every], 99))
        # Paired: 2, 3 and 1 (the second file's row against its own isolated run).
        self.assertEqual(gs["reps"], 3)
        self.assertAlmostEqual(gs["p99_paired"], 2.0)
        # Opportunistic: 2 of 4, 1 of 2; the second file has none.
        self.assertAlmostEqual(gs["opp_nt"], 0.5)
        self.assertIsNone(iso["opp_nt"])

    def test_from_keeps_the_requests_that_arrived_that_late_in_the_window(self):
        def run(config, pairs):  # (arrival s, latency s) per request
            r = self.one(config, 0, [lat for _, lat in pairs])
            r["results"]["prod"]["completions"] = [at + lat for at, lat in pairs]
            return r
        early_slow = [(0.1 * i, 0.050) for i in range(10)]      # 0-0.9 s: 50 ms each
        late = [(1.0 + 0.1 * i, 0.002) for i in range(20)]      # 1-2.9 s: 2 ms each
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, "a.json.gz", [run("isolated-prod@0.3", late), run("gs@0.3", early_slow + late)])
            whole = {r["row"]: r for r in s2_tail.table([path])}
            after = {r["row"]: r for r in s2_tail.table([path], since=1.0)}
            kept = os.path.join(d, "kept.json.gz")
            s2_tail.extract(path, kept)
            self.assertEqual(s2_tail.table([kept], since=1.0), s2_tail.table([path], since=1.0))
        self.assertEqual((whole["gs"]["n"], after["gs"]["n"]), (30, 20))
        self.assertGreater(whole["gs"]["p99_x"], 10)
        self.assertAlmostEqual(after["gs"]["p99_x"], 1.0)
        # Serving: 10 x 50 ms and 20 x 2 ms of a 4 s window, whatever --from keeps.
        self.assertAlmostEqual(whole["gs"]["serving"], 0.54 / 4)
        self.assertAlmostEqual(after["gs"]["serving"], 0.54 / 4)
        self.assertAlmostEqual(whole["isolated-prod"]["serving"], 0.04 / 4)

    def test_serving_counts_a_queued_request_from_the_previous_completion(self):
        # Arrivals at 0, 0.01 and 1.0 s, 20 ms of service each: the second waits 10 ms in the
        # queue (latency 30 ms) and is served from 0.02 to 0.04.
        completions = [0.02, 0.04, 1.02]
        latencies = [0.02, 0.03, 0.02]
        self.assertAlmostEqual(s2_tail.serving_share(latencies, completions, 1.0), 0.06)
        self.assertIsNone(s2_tail.serving_share(latencies, [], 1.0))


class WindowText(unittest.TestCase):
    """tools/bench/tick_shares.py window_text: a daemon log's benchmark window."""

    tick = staticmethod(LossByWindow.tick)

    def test_the_window_is_the_longest_piece_between_long_idles(self):
        def busy(text):
            return sum(1 for t in tick_shares.ticks(text) if int(t.production[0][2]) > 0)

        warm_up = [self.tick("(paused)", 100)] * 2
        idle = [self.tick("(gated)", 0, 0).replace("job1:P:900l", "job1:P:0l")] * 4
        window = [self.tick("(paused)", 1600)] * 3
        log = "\n".join(warm_up + idle + window)
        self.assertEqual(tick_shares.window_text(log, 4), "\n".join(window))
        self.assertEqual(busy(tick_shares.window_text(log, 5)), 5)  # no idle stretch long enough
        # A production control (the opportunistic job idle throughout) before or after the row's
        # window: its periods are left out, the row's (a paused phase, then the job launching
        # while production idles) kept.
        control = ([self.tick("", 1600, opportunistic=0)] * 4
                   + [i.replace("job2:O:900l", "job2:O:0l") for i in idle[:2]])
        row = [self.tick("(paused)", 1600, opportunistic=0)] * 2 + idle[:1] + [self.tick("(paused)", 1600)] + idle[:1]
        for parts in (control + row, row + control, row + idle + control):
            self.assertEqual(busy(tick_shares.window_text("\n".join(warm_up + idle + parts), 4)), 3)


class PeriodNoise(unittest.TestCase):
    """tools/bench/period_noise.py: pairs of adjacent paused and beside runs, k windows a side."""

    @staticmethod
    def tick(gate, done, in_flight_us=50000):
        return (f"2026-11-26 11:54:28.284 gpushared trace: tick device=1 window=50000us "
                f"job1:P:900l/0w/{done}c->inf/{in_flight_us}us-busy job2:O:900l/0w->inf{gate}")

    def test_each_window_takes_the_gate_of_the_tick_before(self):
        entries = period_noise.windows("\n".join(
            [self.tick("(paused)", 1000), self.tick("", 2000), self.tick("", 1500, 10000)]))
        self.assertIsNone(entries[0])  # no gate known before the first tick
        self.assertEqual(entries[1], ("paused", math.log(40)))
        self.assertIsNone(entries[2])  # in flight a fifth of the window: left out

    def test_differences_leave_out_each_runs_first_window(self):
        # Windows paused at 40, 32, 32, 32 kernels/ms, then beside at 40, 16, 24, 16 (each run's
        # first left out): beside less paused over one window a side log(16/32); over two and
        # three, the mean logs of the windows nearest the boundary. A line's gate is the next
        # window's; the first line only sets it.
        gates = ["(paused)"] * 4 + [""] * 4 + ["(paused)"]
        done = [1000, 2000, 1600, 1600, 1600, 2000, 800, 1200, 800]
        lines = [self.tick(g, d) for g, d in zip(gates, done)]
        entries = period_noise.windows("\n".join(lines))
        one = period_noise.differences(entries, 1)
        two = period_noise.differences(entries, 2)
        three = period_noise.differences(entries, 3)
        self.assertEqual(len(one), 1)
        self.assertAlmostEqual(one[0], math.log(16 / 32))
        self.assertAlmostEqual(two[0], (math.log(16) + math.log(24)) / 2 - math.log(32))
        self.assertAlmostEqual(three[0], (math.log(16) + math.log(24) + math.log(16)) / 3 - math.log(32))

    def test_a_launch_bound_jobs_windows_count_below_the_in_flight_floor_when_asked(self):
        lines = [self.tick("(paused)", 1000, 30000), self.tick("", 1000, 30000)]
        self.assertIsNone(period_noise.windows("\n".join(lines))[1])  # default: 0.9 of the window
        self.assertEqual(period_noise.windows("\n".join(lines), 0.5)[1], ("paused", math.log(1000 / 30)))

    def test_paced_is_kernels_per_ms_of_the_time_the_completions_took(self):
        # A graph a window: 4 completions, the time since the last one 40 ms, in flight all 50 ms.
        line = self.tick("", 4).replace("us-busy", "us-busy/40000us-paced")
        lines = [self.tick("(paused)", 5), line, self.tick("", 4)]
        entries = period_noise.windows("\n".join(lines), by_pace=True)
        self.assertEqual(entries[1], ("paused", math.log(4 / 40)))
        self.assertIsNone(entries[2])  # no paced time logged: an older daemon's line
        self.assertEqual(period_noise.windows("\n".join(lines))[1], ("paused", math.log(4 / 50)))

    def test_throughput_is_kernels_per_window(self):
        lines = [self.tick("(paused)", 1000, 30000), self.tick("", 1000, 30000)]
        self.assertEqual(period_noise.windows("\n".join(lines), 0, True)[1], ("paused", math.log(1000 / 50)))

    def test_a_beside_window_with_the_opportunistic_job_idle_is_not_beside(self):
        # S5's production controls run the opportunistic job registered and idle: its beside
        # windows launched nothing and pair with paused ones at no cost.
        idle = self.tick("(paused)", 1600).replace("job2:O:900l", "job2:O:0l")
        lines = [self.tick("", 1600), self.tick("", 1600), idle, self.tick("(paused)", 1600)]
        entries = period_noise.windows("\n".join(lines))
        self.assertEqual(entries[1], ("beside", math.log(32)))  # the job launched in the window
        self.assertIsNone(entries[2])  # a beside window in which it launched nothing
        self.assertEqual(entries[3], ("paused", math.log(32)))  # paused: it launches nothing anyway

    def test_triplets_measure_how_far_the_paused_reference_moved(self):
        # Paused at 32 (first window left out), beside at 16, paused at 64: the reference moved by
        # log 2, and the beside run reads log(1/2) against the run before, log(1/4) after.
        gates = ["(paused)"] * 3 + [""] * 3 + ["(paused)"] * 3 + [""]
        done = [1000, 1600, 1600, 1600, 800, 800, 800, 3200, 3200, 3200]
        entries = period_noise.windows("\n".join(self.tick(g, d) for g, d in zip(gates, done)))
        (moved, before, after), = period_noise.triplets(entries)
        self.assertAlmostEqual(moved, math.log(2))
        self.assertAlmostEqual(before, math.log(0.5))
        self.assertAlmostEqual(after, math.log(0.25))

    def test_a_gap_breaks_the_pair(self):
        gates = ["(paused)"] * 4 + [""] * 4
        lines = [self.tick(g, 1600) for g in gates]
        lines.insert(4, self.tick("", 0, 0))  # production idle between the runs
        self.assertEqual(period_noise.differences(period_noise.windows("\n".join(lines)), 1), [])


class Stalls(unittest.TestCase):
    """tools/bench/stalls.py: stalls by mode, beside windows after pauses, robust readings."""

    def test_a_window_below_06_of_the_three_before_in_its_run_is_a_stall(self):
        entries = [("paused", math.log(40))] * 3 + [("paused", math.log(20)), ("paused", math.log(39)),
                                                    None, ("beside", math.log(10))]
        # The 4th paused window (half of the three before) stalls; the 5th is set against 40, 40, 20.
        # The beside window follows no three of its mode: not counted.
        self.assertEqual(stalls.stalls_by_mode(entries), {"paused": (2, 1)})

    def test_beside_windows_after_a_pause_are_set_against_the_paused_ones_before(self):
        long_run = [("paused", math.log(40))] * 6
        entries = long_run + [("beside", math.log(20)), ("beside", math.log(40)), ("paused", math.log(40)),
                              ("beside", math.log(40))]
        changes = stalls.resumed(entries, 6)
        self.assertAlmostEqual(changes[("long", 0)][0], math.log(0.5))
        self.assertAlmostEqual(changes[("long", 1)][0], 0.0)
        self.assertEqual(changes[("short", 0)], [0.0])  # after one paused window

    def test_the_robust_reading_winsorizes_as_the_budget_does(self):
        # Four differences: too few to winsorize, only clipped to 1 (the budget's kRobustSamples).
        self.assertEqual(stalls.winsorized([-1.3, 0.02, -0.01, 0.03]), [-1.0, 0.02, -0.01, 0.03])
        # Six: the median is -0.005, the median absolute deviation 0.02 (above the floor of 0.02
        # once scaled by 1.4826), so the stall is taken 3 x 1.4826 x 0.02 below the median.
        # ModeCosts.RobustCostsTakeAStallAtTheEdgeOfTheSpread (tests/policies) reads the same
        # differences.
        values = [-1.3, 0.02, -0.01, 0.03, 0.0, -0.02]
        fitted = stalls.winsorized(values)
        self.assertAlmostEqual(fitted[0], -0.005 - 3 * 1.4826 * 0.02)
        self.assertEqual(fitted[1:], values[1:])
        self.assertGreater(stalls.cost(values, False), 0.14)
        self.assertLess(stalls.cost(values, True), 0.03)


class StartUp(unittest.TestCase):
    """tools/bench/start_up.py: windows before production runs at its steady speed."""

    def test_speeds_are_kernels_per_ms_in_flight_of_windows_with_completions(self):
        lines = [PeriodNoise.tick("(paused)", 1000), PeriodNoise.tick("", 0, 0),
                 PeriodNoise.tick("", 500, 25000)]
        self.assertEqual(start_up.speeds("\n".join(lines)), [20.0, 20.0])

    def test_the_first_run_at_steady_speed_ends_the_start_up(self):
        # Climbing for 12 windows, one of them already fast, then steady at 30 with one dip.
        values = [3, 6, 9, 30, 12, 15, 18, 21, 21, 21, 21, 21] + [30] * 20 + [10] + [30] * 20
        self.assertEqual(start_up.windows_to_steady(values), 7)  # 21 >= 0.7 x 30 from window 7
        self.assertIsNone(start_up.windows_to_steady([30] * 10))  # too short to know its speed
        self.assertIsNone(start_up.windows_to_steady([30, 1] * 30))  # never five in a row


class RoundPlot(unittest.TestCase):
    """tools/bench/round_plot.py: the harness's tables, read back for a round's plot."""

    S5 = """### S5
| configuration | prod it/s | prod NT | opp NT (prod on) | opp NT (prod off) |
|---|---|---|---|---|
| isolated-prod | 21.3 [21.2–23.3] | – | – | – |
| mps-prio | 20.7 [20.0–22.0] | 0.969 [0.938–1.031] | 0.850 [0.850–0.850] | 1.005 [1.005–1.005] |
| gpushare:harvest:x@mps-ext | 21.3 [21.0–22.2] | 1.000 [0.984–1.039] | 0.522 [0.213–0.715] | 0.928 [0.928–0.986] |

| another | table |
|---|---|
| mps-prio | 9 [9–9] |
"""

    def test_cells_and_rows(self):
        self.assertEqual(round_plot.cell("0.522 [0.213–0.715]"), (0.522, 0.213, 0.715))
        self.assertIsNone(round_plot.cell("–"))
        rows = round_plot.table(self.S5)
        self.assertEqual(set(rows), {"isolated-prod", "mps-prio", "gpushare:harvest:x@mps-ext"})
        self.assertEqual(rows["mps-prio"]["opp NT (prod on)"], "0.850 [0.850–0.850]")

    def test_measures_take_busy_columns_and_name_a_missing_row(self):
        got = round_plot.measures(self.S5, [("new", "gpushare:harvest"), ("old", "gpushare:old+")])
        self.assertEqual(got[0], ("new", ((1.0, 0.984, 1.039), (0.522, 0.213, 0.715))))
        self.assertEqual(got[1], ("old", (None, None)))  # not run: no bars, no failure
        picture = round_plot.svg([("S5 gappy", got)], ["new", "old"])
        self.assertEqual(picture.count("<rect "), 2 + 2)  # two bars, two legend keys
        self.assertIn("S5 gappy", picture)

    def test_late_columns(self):
        # run.py --late-s adds "after X s" columns: #late draws those, else the whole window's.
        late = """| configuration | prod NT | opp NT (prod on) | prod NT after 6 s | opp NT (prod on) after 6 s |
|---|---|---|---|---|
| mps-prio | 1.034 [0.923–1.070] | 0.784 [0.784–0.805] | 1.113 [1.000–1.146] | 0.780 [0.780–0.791] |
"""
        whole = round_plot.measures(late, [("MPS-prio", "mps-prio")])
        after = round_plot.measures(late, [("MPS-prio", "mps-prio")], late=True)
        self.assertEqual(whole[0][1], ((1.034, 0.923, 1.07), (0.784, 0.784, 0.805)))
        self.assertEqual(after[0][1], ((1.113, 1.0, 1.146), (0.78, 0.78, 0.791)))
        # S1's column is "opp NT", and its late form "opp NT after 6 s".
        s1 = "| configuration | prod NT | opp NT | prod NT after 6 s | opp NT after 6 s |\n|---|---|---|---|---|\n" \
             "| x | 1.0 [1.0–1.0] | 0.5 [0.5–0.5] | 0.9 [0.9–0.9] | 0.7 [0.7–0.7] |\n"
        self.assertEqual(round_plot.measures(s1, [("x", "x")], late=True)[0][1],
                         ((0.9, 0.9, 0.9), (0.7, 0.7, 0.7)))
        self.assertEqual(round_plot.measures(self.S5, [("new", "gpushare")], late=True)[0][1], (None, None))


class QuitMps(unittest.TestCase):
    """tools/bench/quit_mps.sh: what a lane stopped by its limit leaves, quit (gpu_lanes.sh)."""

    SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench", "quit_mps.sh")

    def run_script(self, root, path):
        return subprocess.run(["bash", self.SCRIPT, root], env=dict(os.environ, PATH=path),
                              capture_output=True, text=True, timeout=60)

    def test_each_control_daemon_under_the_lane_is_told_to_quit(self):
        with tempfile.TemporaryDirectory() as tmp:
            lane, bin_dir = os.path.join(tmp, "bmps0"), os.path.join(tmp, "bin")
            record = os.path.join(tmp, "record")
            for pipes in ("mps-pipe", "mps/pipe"):  # the harness's; gpushared's with mps: auto
                os.makedirs(os.path.join(lane, pipes))
                os.mkfifo(os.path.join(lane, pipes, "control"))
            os.makedirs(os.path.join(lane, "mps-log"))  # a log directory has no control pipe
            os.makedirs(bin_dir)
            ctl = os.path.join(bin_dir, "nvidia-cuda-mps-control")
            with open(ctl, "w") as f:  # a stand-in: records where it was pointed and what it read
                f.write(f'#!/bin/sh\necho "$CUDA_MPS_PIPE_DIRECTORY:$(cat)" >> {record}\n')
            os.chmod(ctl, 0o755)
            out = self.run_script(lane, f"{bin_dir}:{os.environ['PATH']}")
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(record) as f:
                told = sorted(f.read().split())
            self.assertEqual(told, sorted([f"{lane}/mps-pipe:quit", f"{lane}/mps/pipe:quit"]))

    def test_nothing_to_do_without_mps(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = self.run_script(os.path.join(tmp, "absent"), "/usr/bin:/bin")
            self.assertEqual((out.returncode, out.stderr), (0, ""))

    def test_a_lane_stopped_by_its_limit_quits_its_control_daemons_and_still_archives(self):
        # gpu_lanes.sh with a stand-in nvidia-smi (one GPU) and a stand-in gpu_round.sh that starts
        # "its" MPS control daemon (a control pipe under the lane's folder), writes a table row and
        # then outlasts LANE_S, as a part cut by the limit does.
        bench = os.path.join(os.path.dirname(self.SCRIPT))
        with tempfile.TemporaryDirectory() as tmp:
            tools, bin_dir = os.path.join(tmp, "repo", "tools", "bench"), os.path.join(tmp, "bin")
            os.makedirs(tools)
            os.makedirs(bin_dir)
            for name in ("gpu_lanes.sh", "quit_mps.sh"):
                shutil.copy(os.path.join(bench, name), tools)
            with open(os.path.join(tools, "gpu_round.sh"), "w") as f:
                f.write('mkdir -p "$BENCH_TMP/mps-pipe" "$OUT/s5g1/logs"\n'
                        'mkfifo "$BENCH_TMP/mps-pipe/control"\n'
                        'echo "daemon log" > "$OUT/s5g1/logs/gpushared-x.log"\n'
                        'echo "| row | ${LANE_SETTING:-unset} | $* |"\n'
                        'exec sleep 30\n')
            record = os.path.join(tmp, "record")
            stand_ins = {
                "nvidia-smi": 'case "$*" in -L) echo "GPU 0: H100 (UUID: GPU-test)";; '
                              '*uuid*) echo GPU-test;; *) echo "index, name";; esac',
                "nvidia-cuda-mps-control": f'echo "$CUDA_MPS_PIPE_DIRECTORY:$(cat)" >> {record}',
            }
            for name, body in stand_ins.items():
                with open(os.path.join(bin_dir, name), "w") as f:
                    f.write(f"#!/bin/sh\n{body}\n")
                os.chmod(os.path.join(bin_dir, name), 0o755)
            out_dir, lanes_root = os.path.join(tmp, "out"), os.path.join(tmp, "lane")
            env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OUT=out_dir, LANE_S="2",
                       LANE_CPUS="0", BENCH_TMP_ROOT=lanes_root)
            # A NAME=value word is the lane's own setting, not a part.
            run = subprocess.run(["bash", os.path.join(tools, "gpu_lanes.sh"), "LANE_SETTING=7 s5-gappy-1s"],
                                 env=env, capture_output=True, text=True, timeout=60)
            self.assertNotEqual(run.returncode, 0)  # the lane was stopped: its status says so
            self.assertIn("lane 0 | row | 7 | s5-gappy-1s |", run.stdout)
            with open(record) as f:
                self.assertEqual(f.read().split(), [f"{lanes_root}0/mps-pipe:quit"])
            with tarfile.open(os.path.join(out_dir, "lane0.tgz")) as tar:
                names = tar.getnames()
            self.assertIn("./s5g1-logs.tgz", names)  # the stopped part's daemon logs, archived
            self.assertIn("./lane.log", names)


class MemoryScenario(unittest.TestCase):
    """S4's verdicts: production NT from step times, the opportunistic job's pause, and weights."""

    @staticmethod
    def run_result(step_s, steps, digest, pause_after=None, pause_s=0.0, first_step_s=None):
        ends, t = [], 0.0
        for i in range(steps):
            t += first_step_s if (i == 0 and first_step_s) else step_s
            if pause_after is not None and i == pause_after + 1:
                t += pause_s
            ends.append(t)
        return {"outcome": "completed", "step_end_s": ends, "weights_sha256": digest,
                "max_memory_reserved": 10 * 2**30, "mem_get_info_at_start": {"total": 16 * 2**30, "free": 1}}

    def test_production_slower_by_a_quarter_and_a_swap_pause(self):
        iso = {"prod": self.run_result(0.06, 20, "p"), "opp": self.run_result(0.06, 20, "o")}
        shared = {"prod": self.run_result(0.08, 20, "p", first_step_s=0.5),
                  "opp": self.run_result(0.06, 20, "o-changed", pause_after=5, pause_s=3.0)}
        got = analyse(iso, shared)
        self.assertAlmostEqual(got["prod_nt_steady"], 0.75, places=3)
        # All steps: 20 x 0.06 = 1.2 s alone, 0.5 + 19 x 0.08 = 2.02 s shared.
        self.assertAlmostEqual(got["prod_nt_wall"], round(1.2 / 2.02, 3))
        self.assertTrue(got["prod_weights_equal"])
        self.assertFalse(got["opp_weights_equal"])
        self.assertAlmostEqual(got["opp_longest_gap_s"], 3.06, places=3)
        self.assertEqual(got["opp_view_total_gib"], 16.0)
        self.assertEqual(got["prod_peak_reserved_gib"], 10.0)

    def test_a_job_that_ran_out_of_memory_has_no_nt_and_says_where(self):
        iso = {"prod": self.run_result(0.06, 20, "p"), "opp": self.run_result(0.06, 20, "o")}
        shared = {"prod": {"outcome": "oom", "failed_step": 0, "error": "CUDA out of memory"},
                  "opp": self.run_result(0.06, 20, "o")}
        got = analyse(iso, shared)
        self.assertEqual(got["prod_outcome"], "oom at step 0: CUDA out of memory")
        self.assertNotIn("prod_nt_wall", got)
        self.assertTrue(got["opp_weights_equal"])

    def test_capacity_parsing(self):
        self.assertEqual(parse_gib("16G"), 16.0)
        self.assertEqual(parse_gib("16GiB"), 16.0)
        self.assertEqual(parse_gib("7.5"), 7.5)
        for bad in ("0", "-1G", "lots"):
            with self.assertRaises(ValueError):
                parse_gib(bad)


class CaptureSwapRows(unittest.TestCase):
    """capture_swap.py's row: the opportunistic job's captures and production's waits for room."""

    def test_a_row_from_both_jobs(self):
        opp = {"captures_ok": 40, "captures_failed": 2, "held_intact": True, "capture_ms_median": 3.5,
               "errors": ["1.20 s: RuntimeError: operation failed due to a previous error during capture"]}
        prod = {"allocations": 3, "alloc_ms": [900.0, 40.0, 120.0]}
        row = capture_swap.summarise("old", opp, prod)
        self.assertEqual((row["captures_ok"], row["captures_failed"], row["held_intact"]), (40, 2, True))
        self.assertEqual(row["prod_allocations"], 3)
        self.assertEqual(row["prod_alloc_ms_median"], 120.0)
        self.assertEqual(row["prod_alloc_ms_max"], 900.0)
        self.assertNotIn("prod_outcome", row)

    def test_a_job_that_died_says_so(self):
        row = capture_swap.summarise("new", {"outcome": "no result (exit status -11)"},
                                     {"outcome": "no result (exit status 1)"})
        self.assertEqual(row["outcome"], "no result (exit status -11)")
        self.assertIsNone(row["captures_ok"])
        self.assertEqual(row["prod_allocations"], 0)
        self.assertIsNone(row["prod_alloc_ms_median"])
        self.assertEqual(row["prod_outcome"], "no result (exit status 1)")


class RotationScenario(unittest.TestCase):
    """S7's figures: the search's job order, the copies the daemon's log acknowledges, the verdicts."""

    SIM = """thesis-shaped case (time units: 1 MiB copied): 4 jobs, 1.07 GiB of working sets in 0.59 GiB left
  schedule               makespan   compute      copy    hidden swap-ins  order
  fifo, no prefetch        4000.0    1800.0    2200.0       0.0        8  A B C D A B C D
  weight, prefetch         2750.0    1800.0    2050.0    1100.0        7  D B C A D B C A
  search from weight       2100.0    1800.0    1100.0     950.0        4  D B#7 B#7 D C A C A
  search from random       2100.0    1800.0    1250.0    1100.0        5  D A C A C D B B
"""

    def test_the_searched_step_order_becomes_a_job_cycle(self):
        # Each job where it first appears; a name made unique with #id is the job's name.
        self.assertEqual(search_order(self.SIM), ["D", "B", "C", "A"])
        self.assertIsNone(search_order("gpushare-sim: the trace names no capacity for the device"))

    def test_copies_are_summed_per_kind_from_the_acknowledgements(self):
        log = ("[info] prefetched pid=7 job=B id=2 bytes=1000 in 12.5 ms\n"
               "[info] swapped-out pid=6 job=A id=1 bytes=3000 in 100.0 ms\n"
               "[info] swap-out job=A id=1 device=0 bytes=3000: rotation, turn of job=B id=2\n"
               "[info] swapped-in pid=7 job=B id=2 bytes=2000 in 50.0 ms\n"
               "[info] prefetched pid=6 job=A id=1 bytes=500 in 7.5 ms\n")
        got = copy_summary(log)
        self.assertEqual(got["prefetched"], {"bytes": 1500, "ms": 20.0, "count": 2})
        self.assertEqual(got["swapped-out"], {"bytes": 3000, "ms": 100.0, "count": 1})
        self.assertEqual(got["swapped-in"], {"bytes": 2000, "ms": 50.0, "count": 1})

    def test_job_specs(self):
        self.assertEqual(parse_jobs("resnet50:96:120, mobilenet_v2:64:10"),
                         [("resnet50", 96, 120), ("mobilenet_v2", 64, 10)])
        for bad in ("", "resnet50:96", "resnet50:big:10"):
            with self.assertRaises(ValueError):
                parse_jobs(bad)

    def test_makespan_nt_and_weights(self):
        def done(elapsed, digest, steps):
            return {"outcome": "completed", "elapsed_s": elapsed, "weights_sha256": digest,
                    "step_end_s": [0.1 * (i + 1) for i in range(steps)]}

        iso = {"A": done(10.0, "a", 5), "B": done(20.0, "b", 5), "prod": done(5.0, "p", 12)}
        got = {"A": done(25.0, "a", 5), "B": done(40.0, "b-other", 5),
               "prod": {"outcome": "completed", "step_end_s": [0.125 * (i + 1) for i in range(12)]}}
        started, last = {"A": 100.0, "B": 101.0}, {"A": 125.0, "B": 141.0}
        r = rotation_verdict(iso, got, started, last, got["prod"], iso["prod"])
        self.assertEqual(r["makespan_s"], 41.0)
        self.assertEqual((r["A_nt_wall"], r["B_nt_wall"]), (0.4, 0.5))
        self.assertTrue(r["A_weights_equal"])
        self.assertFalse(r["B_weights_equal"])
        self.assertEqual(r["prod_nt_steady"], 0.8)
        # A job that did not finish leaves the row without a makespan.
        got["B"] = {"outcome": "oom", "failed_step": 0}
        self.assertNotIn("makespan_s", rotation_verdict(iso, got, started, last, None, iso["prod"]))


class GpushareRows(unittest.TestCase):
    def test_policy_with_parameters_under_mps_gets_its_own_config(self):
        with tempfile.TemporaryDirectory() as d:
            daemon = os.path.join(d, "fake-gpushared")
            with open(daemon, "w") as f:  # stands in for gpushared: creates the socket file
                f.write("#!/bin/sh\npython3 -c \"import json,sys; c=json.load(open(sys.argv[1])); "
                        "open(c['socket']['path'],'w')\" \"$2\"\nsleep 30\n")
            os.chmod(daemon, 0o755)
            shim = os.path.join(d, "libgpushare.so")
            open(shim, "w").close()
            gs = Gpushare(shim, daemon + " --config {config}", ["tgs:target=0.9@mps"], d)
            gs.start_daemons(d)
            try:
                self.assertIsNone(gs.reason("gpushare:tgs:target=0.9@mps"))
                config = json.load(open(os.path.join(d, "gpushared-tgs_target=0.9@mps.json")))
                self.assertEqual(config["policy"], {"default": "tgs",
                                                    "parameters": {"tgs": {"target": 0.9}}})
                prod, opp = gs.worker_specs("gpushare:tgs:target=0.9@mps", "p", "o")
                self.assertTrue(prod.mps and opp.mps)
                self.assertIn(("GPUSHARE_PRIORITY", "production"), prod.env)
                self.assertFalse(any(k == "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" for k, _ in opp.env))
            finally:
                gs.stop()

    def test_a_run_with_more_workers_than_fit_is_warned_about(self):
        specs = baselines.worker_specs("p", "o", ["time-slicing", "mps", "mps-thr30", "mps-thr10"])
        self.assertIsNone(baselines.worker_count_warning(specs))  # 2 plain + 2 MPS + 2 limited
        many = specs * 3
        warning = baselines.worker_count_warning(many)
        self.assertIn(f"{len(many)} worker processes", warning)
        self.assertIn("split the configurations", warning)

    def test_mps_thread_suffix_confines_only_the_opportunistic_job(self):
        gs = Gpushare(None, None, [], "/nonexistent")
        prod, opp = gs.worker_specs("gpushare:tgs:target=0.9@mps-thr30", "p", "o")
        self.assertTrue(prod.mps and opp.mps)
        self.assertIn(("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"), opp.env)
        self.assertFalse(any(k == "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" for k, _ in prod.env))
        self.assertEqual(split_policy("tgs:target=0.9@mps-thr30"), ("tgs", "target=0.9", True, 30))
        self.assertEqual(split_policy("fair"), ("fair", "", False, None))
        self.assertEqual(split_policy("harvest@mps-prio"), ("harvest", "", True, "prio"))
        with self.assertRaises(ValueError):
            split_policy("tgs@mps-thr0")

    def test_mps_auto_suffix_leaves_mps_to_the_daemon(self):
        # gpushared runs its own MPS and its shim sets the client variables: the harness sets no
        # CUDA_MPS_* variable of its own (it once set CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=auto) and
        # does not make the jobs clients of its MPS daemon.
        self.assertEqual(split_policy("harvest:concurrency=1@mps-auto"),
                         ("harvest", "concurrency=1", False, "auto"))
        gs = Gpushare(None, None, [], "/nonexistent")
        prod, opp = gs.worker_specs("gpushare:harvest@mps-auto", "p", "o")
        self.assertFalse(prod.mps or opp.mps)
        for spec in (prod, opp):
            self.assertFalse([k for k, _ in spec.env if k.startswith("CUDA_MPS_")], spec.env)

    def test_mps_ext_suffix_puts_gpushared_on_the_harnesss_mps(self):
        # One MPS server on the GPU: gpushared with "mps": "external" on the harness's control
        # daemon; the jobs get the harness's pipe directory and gpushared's shim sets the priority.
        self.assertEqual(split_policy("harvest:concurrency=2@mps-ext"),
                         ("harvest", "concurrency=2", True, "ext"))
        gs = Gpushare(None, None, [], "/nonexistent")
        prod, opp = gs.worker_specs("gpushare:harvest@mps-ext", "p", "o")
        self.assertTrue(prod.mps and opp.mps)
        for spec in (prod, opp):
            self.assertFalse([k for k, _ in spec.env if k.startswith("CUDA_MPS_")], spec.env)
        with tempfile.TemporaryDirectory() as run_dir:
            seen = {}

            def fake_start(cmd, config, config_path, log_path):
                seen.update(config)
                return None, "not started in this test"

            original = gpushare_hook.start_daemon
            gpushare_hook.start_daemon = fake_start
            try:
                gs = Gpushare("/bin/true", "gpushared --config {config}", ["harvest@mps-ext"], run_dir)
                gs.start_daemons(run_dir)
            finally:
                gpushare_hook.start_daemon = original
        self.assertEqual(seen["mps"], "external")
        self.assertEqual(seen["mps_pipe_directory"], os.path.join(run_dir, "mps-pipe"))

    def test_every_row_gets_its_own_socket_within_a_unix_socket_path(self):
        long = "harvest:kernel_gating=1,in_flight=4,concurrency=2,learning_period_ms=400,control_period_ms=400@mps-ext"
        gs = Gpushare("/bin/true", "gpushared --config {config}", ["harvest@mps-ext", long], "/tmp/bmps0")
        paths = [gs.socket(p) for p in gs.policies]
        self.assertEqual(len(set(paths)), 2)
        self.assertTrue(all(len(p.encode()) <= 107 for p in paths), paths)  # sockaddr_un's sun_path

    def test_a_build_prefix_runs_the_row_on_that_build(self):
        # "old+POLICY": the same policy on .carry/bin/gpushared-old, a row of the same call.
        self.assertEqual(split_build("old+harvest:concurrency=2@mps-ext"),
                         ("old", "harvest:concurrency=2@mps-ext"))
        self.assertEqual(split_build("harvest@mps-ext"), (None, "harvest@mps-ext"))
        self.assertEqual(split_policy("old+harvest:concurrency=2@mps-ext"),
                         ("harvest", "concurrency=2", True, "ext"))
        cmd = "LD_LIBRARY_PATH=/c/lib /c/bin/gpushared --config {config}"
        self.assertEqual(build_command(cmd, "old"),
                         "LD_LIBRARY_PATH=/c/lib /c/bin/gpushared-old --config {config}")
        self.assertEqual(build_command(cmd, None), cmd)
        with self.assertRaises(ValueError):
            build_command("/c/bin/daemon --config {config}", "old")
        with tempfile.TemporaryDirectory() as run_dir:
            started = []

            def fake_start(cmd, config, config_path, log_path):
                started.append((cmd, config["policy"], os.path.basename(log_path)))
                return None, "not started in this test"

            original = gpushare_hook.start_daemon
            gpushare_hook.start_daemon = fake_start
            try:
                gs = Gpushare("/bin/true", cmd, ["old+harvest:target=0.9", "harvest:target=0.9"],
                              run_dir)
                gs.start_daemons(run_dir)
                refused = Gpushare("/bin/true", "/c/bin/daemon --config {config}",
                                   ["old+harvest"], run_dir)
                refused.start_daemons(run_dir)
            finally:
                gpushare_hook.start_daemon = original
        self.assertEqual([c for c, _, _ in started],
                         [cmd.replace("gpushared ", "gpushared-old "), cmd])
        self.assertEqual(started[0][1],
                         {"default": "harvest", "parameters": {"harvest": {"target": 0.9}}})
        self.assertEqual(started[0][2], "gpushared-old+harvest:target=0.9.log")
        self.assertIn("gpushared-old", refused.reason("gpushare:old+harvest"))


if __name__ == "__main__":
    unittest.main()
