#!/usr/bin/python3
"""router_study.py SWEEP_DIR [SWEEP_DIR ...] — the table of the router study (issue #33).

For every configuration of one or more sweeps over the same grid (a sweep and its --seed-from
rerun), reads the sweep's summary.csv and runs.csv and each run's live.h5 and prints:
  acc      mean final test accuracy (%) over the runs
  gap      final gap to the matching dense configuration (pp) and its 95% CI, per sweep
  H_gate   mean per-sample gate entropy / log E over the last epoch's logged steps
  agree    first_agree (noisy first choice = clean first choice) over the last epoch
  I(c;e)   mutual information of class and first-choice expert at the final evaluation (nats)
  dH       H_gate at the end minus H_gate over the first logged tenth of training (< 0: the
           router's gates sharpen)
  dead     mean dead experts at the final evaluation
  C/W/D    collapse episodes, warning episodes (the clean-router warning and the idle router),
           expert deaths, summed over the runs
  idle     runs with an idle-router warning among their events

Only numbers the sessions recorded; nothing is recomputed from weights. Needs h5py.
"""
import csv
import math
import os
import sys

import h5py
import numpy as np


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def run_figures(path):
    with h5py.File(path, "r") as f:
        if "steps" not in f or "gate_entropy" not in f["steps"]:
            return None
        st = f["steps"]
        ep = st["epoch"][:]
        last = ep == ep.max()
        ge = st["gate_entropy"][:]
        fa = st["first_agree"][:]
        n = len(ge)
        head = ge[: max(1, n // 10)]
        ev = f["evals"]
        mi = float(ev["mutual_info"][-1]) if "mutual_info" in ev else math.nan
        dead = float(ev["dead_experts"][-1]) if "dead_experts" in ev else math.nan
        # the idle router is the yellow warning whose text names it; the alarm column holds the
        # severity, the events hold the words
        idle = 0
        if "events" in f:
            txt = [t.decode(errors="replace") for t in f["events"]["text"][:]]
            idle = int(any("idle router" in t for t in txt))
        return dict(H=float(np.nanmean(ge[last])), agree=float(np.nanmean(fa[last])),
                    dH=float(np.nanmean(ge[last]) - np.nanmean(head)), mi=mi, dead=dead, idle=idle)


def main(dirs):
    rows = {}
    order = []
    for d in dirs:
        summ = {r["config"]: r for r in read_csv(os.path.join(d, "summary.csv"))}
        for r in read_csv(os.path.join(d, "runs.csv")):
            cfg = r["config"]
            if cfg not in rows:
                rows[cfg] = dict(acc=[], fig=[], C=0, W=0, D=0, gaps=[], head=summ.get(cfg, {}).get("head_kind", ""))
                order.append(cfg)
            e = rows[cfg]
            if r["status"] != "finished":
                continue
            e["acc"].append(float(r["final_acc"]))
            for k, col in (("C", "collapse_episodes"), ("W", "warning_episodes"), ("D", "expert_deaths")):
                try:
                    e[k] += int(float(r[col]))
                except (ValueError, KeyError):
                    pass
            if e["head"] != "dense":
                fig = run_figures(os.path.join(d, r["name"], "live.h5"))
                if fig:
                    e["fig"].append(fig)
        for cfg, s in summ.items():
            if cfg in rows and s.get("gap", "") not in ("", "nan"):
                g, lo, hi = (100 * float(s[k]) for k in ("gap", "gap_ci_lo", "gap_ci_hi"))
                rows[cfg]["gaps"].append("%+.2f [%+.2f,%+.2f]" % (g, lo, hi))

    def m(e, k):
        v = [x[k] for x in e["fig"] if not math.isnan(x[k])]
        return "%.2f" % (sum(v) / len(v)) if v else "-"

    w = max(len(c) for c in order)
    print("%-*s %3s %7s  %-40s %6s %6s %6s %6s %5s %8s %4s" % (w, "configuration", "n", "acc", "gap (pp) [95% CI] per sweep",
                                                               "H_gate", "dH", "agree", "I(c;e)", "dead", "C/W/D", "idle"))
    for cfg in order:
        e = rows[cfg]
        acc = "%.2f" % (100 * sum(e["acc"]) / len(e["acc"])) if e["acc"] else "-"
        idle = "%d/%d" % (sum(x["idle"] for x in e["fig"]), len(e["fig"])) if e["fig"] else "-"
        print("%-*s %3d %7s  %-40s %6s %6s %6s %6s %5s %8s %4s" % (
            w, cfg, len(e["acc"]), acc, "  ".join(e["gaps"]), m(e, "H"), m(e, "dH"), m(e, "agree"), m(e, "mi"),
            m(e, "dead"), "%d/%d/%d" % (e["C"], e["W"], e["D"]) if e["head"] != "dense" else "-", idle))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
