#!/usr/bin/env python3
"""Summarises a kernel_trace CSV (bench/kernel_trace.cpp) of graph-replayed decode steps.

Takes the CUDA graph with the most kernel launches (the decode step the bench replays), splits its
launches into replays, and prints per kernel name: calls per step, the mean kernel duration, and
the mean *added* time, end(kernel) - end(previous kernel in end order): with programmatic
dependent launches a kernel starts before its predecessor ends, so its own duration overlaps;
the added times sum to the step. Usage: kernel_trace_summary.py trace.csv [--skip N] [--layer]
"""
import argparse
import collections
import csv
import re
import statistics


def short(name):
    """The kernel's name (its stem, docs/KERNELS.md) and template arguments, without the return
    type, namespaces and parameter list: bf16_bf16w_gemv<1, InNorm 1, Epilogue 1, true>."""
    name = name.replace("(anonymous namespace)::", "").removeprefix("void ")
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:  # the parameter list; a "(" inside <> is an enum argument's cast
            name = name[:i]
            break
    name = re.sub(r"\b\w+::", "", name)  # mx::cuda::kern::, gemv::, moe_gemv::
    return re.sub(r"\((\w+)\)(-?\d+)", r"\1 \2", name)[:70]  # (InNorm)1 -> InNorm 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--skip", type=int, default=2, help="replays to skip at the start")
    ap.add_argument("--layer", type=int, default=0, help="print the first N kernels of one replay")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv)) if r["graph_id"] != "0"]
    by_graph = collections.defaultdict(list)
    for r in rows:
        by_graph[r["graph_id"]].append(r)
    if not by_graph:
        raise SystemExit("no graph-launched kernels in the trace")
    kernels = max(by_graph.values(), key=len)
    kernels.sort(key=lambda r: int(r["start_ns"]))
    first_node = kernels[0]["graph_node"]
    replays, cur = [], []
    for r in kernels:
        if r["graph_node"] == first_node and cur:
            replays.append(cur)
            cur = []
        cur.append(r)
    replays.append(cur)
    n = len(replays[0])
    replays = [rp for rp in replays[a.skip:] if len(rp) == n]
    if not replays:
        raise SystemExit("too few complete replays")
    steps, added, dur, calls = [], collections.defaultdict(float), collections.defaultdict(float), collections.Counter()
    for rp in replays:
        rp = sorted(rp, key=lambda r: int(r["end_ns"]))
        t0 = int(rp[0]["start_ns"])
        steps.append((int(rp[-1]["end_ns"]) - t0) / 1e3)
        prev = t0
        for r in rp:
            e, s = int(r["end_ns"]), int(r["start_ns"])
            k = short(r["name"])
            added[k] += (e - prev) / 1e3
            dur[k] += (e - s) / 1e3
            prev = e
    for r in replays[0]:
        calls[short(r["name"])] += 1
    R = len(replays)
    step = statistics.mean(steps)
    print(f"{R} replays of a {n}-kernel graph: step {step:.1f} us (sd {statistics.pstdev(steps):.1f})")
    print("| kernel | calls | added us/step | % of step | added us/call | duration us/call |")
    print("|---|--:|--:|--:|--:|--:|")
    for k, v in sorted(added.items(), key=lambda kv: -kv[1]):
        c = calls[k]
        print(f"| {k} | {c} | {v / R:.1f} | {100 * v / R / step:.1f}% | {v / R / c:.2f} | {dur[k] / R / c:.2f} |")
    if a.layer:
        rp = sorted(replays[-1], key=lambda r: int(r["end_ns"]))
        prev = int(rp[0]["start_ns"])
        print("\n| # | kernel | grid | block | regs | smem | start us | duration us | added us |")
        print("|--:|---|---|---|--:|--:|--:|--:|--:|")
        t0 = prev
        for i, r in enumerate(rp[: a.layer]):
            s, e = int(r["start_ns"]), int(r["end_ns"])
            print(f"| {i} | {short(r['name'])} | {r['grid']} | {r['block']} | {r['regs']} | {r['smem']} | "
                  f"{(s - t0) / 1e3:.2f} | {(e - s) / 1e3:.2f} | {(e - prev) / 1e3:.2f} |")
            prev = e


if __name__ == "__main__":
    main()
