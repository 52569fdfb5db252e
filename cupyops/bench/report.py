"""The parts of the benchmark's report that read it for the user: the legend of the case names
(from the operators' descriptors, ``Bench.legend``), the line naming the peers that are not
installed, and the closing verdict (how many cases beat each peer, the worst case, and whether
the machine was quiet enough to judge).

A ratio's noise is the spread of its interleaved rounds (bench.ratio_noise): half their
interquartile range over their median. The machine is **too busy to judge** when the median
noise of the run's cases passes :data:`BUSY_NOISE`, or when an overhead goal was too close to
call (cupyops/bench/overhead.py).
"""
from __future__ import annotations

import statistics

from .cases import benchmarked

__all__ = ["BUSY_NOISE", "legend_lines", "missing_peers_line", "verdict_line"]

#: the median noise of the cases' ratios above which a run cannot be judged
BUSY_NOISE = 0.10


def _uses(word: str, used: set) -> bool:
    return any(u.startswith(word) for u in used) if word.endswith("=") else word in used


def legend_lines(names, columns=()) -> list:
    """``legend:`` and a line per group of words the case names use, each with its meaning
    from the operators' descriptors; where operators mean different things by the same words,
    each one's. ``names``: the run's ``(operator, case name)`` pairs; ``columns``: ``(column,
    meaning)`` of the table's columns, after them."""
    names = set(names)
    meanings: dict = {}            # words -> {meaning: [operators]}
    for op in benchmarked():
        used = {w for o, case in names if o == op.name for w in case.split()}
        for words, meaning in op.bench.legend:
            if any(_uses(w.strip(), used) for w in words.split(",")):
                meanings.setdefault(words, {}).setdefault(meaning, []).append(op.name)
    rows = []
    for words, by_meaning in meanings.items():
        if len(by_meaning) == 1:
            rows.append((words, next(iter(by_meaning))))
        else:
            rows.append((words, "; ".join(f"{', '.join(ops)}: {m}"
                                          for m, ops in by_meaning.items())))
    rows += list(columns)
    if not rows:
        return []
    width = max(len(w) for w, _ in rows)
    return ["legend:"] + [f"  {w:<{width}}  {m}" for w, m in rows]


def missing_peers_line(missing: dict) -> list:
    """One line naming the peers that are not installed (never timed), or none."""
    if not missing:
        return []
    return ["not installed, so not timed: " + ", ".join(
        f"{p} ({how})" if how else p for p, how in missing.items())]


def _case(r) -> str:
    return f"{r['op']} {r['case']} {r['dtype']} {'x'.join(map(str, r['shape']))}"


def noise_of(records):
    """The median noise of the records' (or overhead rows') ratios, or None where none was
    measured."""
    noise = [r["noise"] for r in records if r.get("noise") is not None]
    return statistics.median(noise) if noise else None


def verdict_line(records, peer_names, overhead_rows=(), traffic=False) -> str:
    """``verdict: ...``: per peer, the cases cupyops is faster in (and on one thread, where
    timed); the worst case against the first peer; the overhead goals; and whether the machine
    was quiet enough to judge. ``traffic``: a simt run (its goals are the traffic model's)."""
    parts = _traffic_parts(records) if traffic else _peer_parts(records, peer_names)
    busy = [r for r in overhead_rows if r.get("verdict") == "busy"]
    missed = [r for r in overhead_rows if r.get("verdict") == "missed"]
    if overhead_rows:
        parts.append(f"overhead goals met {len(overhead_rows) - len(busy) - len(missed)} of "
                     f"{len(overhead_rows)}" + (f", {len(missed)} missed" if missed else ""))
    noise = noise_of(records)
    if noise is None:          # (simt: only the overhead section is timed)
        noise = noise_of(overhead_rows)
    judged = "" if noise is None else f"timing noise ±{noise:.0%}"
    if (noise is not None and noise > BUSY_NOISE) or busy:
        why = [judged] if noise is not None and noise > BUSY_NOISE else []
        why += [f"{len(busy)} overhead goal{'s' if len(busy) > 1 else ''} within the noise"] \
            if busy else []
        parts.append(f"the machine was too busy to judge ({', '.join(why)}): run it again "
                     "when it is quieter, or with --repeat 3")
    elif judged:
        parts.append(f"{judged}: quiet enough to judge")
    return "verdict: " + "; ".join(parts)


def _peer_parts(records, peer_names) -> list:
    parts = []
    for p in peer_names:
        mine = [r for r in records if r.get("peer") == p and r.get("ratio")]
        if not mine:
            continue
        text = f"faster than {p} in {sum(r['ratio'] > 1 for r in mine)} of {len(mine)} cases"
        one = [r for r in mine if r.get("ratio_1t")]
        if one:
            text += f" ({sum(r['ratio_1t'] > 1 for r in one)} on one thread)"
        parts.append(text)
    first = next((p for p in peer_names if any(r.get("peer") == p and r.get("ratio")
                                               for r in records)), None)
    if first is not None:
        worst = min((r for r in records if r.get("peer") == first and r.get("ratio")),
                    key=lambda r: r["ratio"])
        noise = worst.get("noise")
        parts.append(f"worst: {_case(worst)} at {worst['ratio']:.2f}x {first}"
                     + (f" (±{noise:.0%})" if noise is not None else ""))
    wrong = sum(1 for r in _firsts(records) if r.get("ok") is False)
    if wrong:
        parts.insert(0, f"{wrong} cases WRONG")
    return parts or ["no peer timed"]


def _firsts(records):
    seen, out = set(), []
    for r in records:
        k = (r["op"], r["case"], r["dtype"])
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _traffic_parts(records) -> list:
    cases = _firsts(records)
    goals = [r for r in cases if r.get("goal") is not None and r.get("sectors_ratio")]
    parts = [f"traffic goals met in {sum(1 for r in goals if r.get('goal_met'))} of "
             f"{len(goals)} cases"] if goals else []
    if goals:
        worst = max(goals, key=lambda r: r["sectors_ratio"] / r["goal"])
        parts.append(f"worst: {_case(worst)} at {worst['sectors_ratio']:.2f}x the minimum "
                     f"sectors (goal {worst['goal']:.2f})")
    wrong = sum(1 for r in cases if r.get("ok") is False)
    if wrong:
        parts.insert(0, f"{wrong} cases WRONG")
    return parts or ["no traffic recorded"]
