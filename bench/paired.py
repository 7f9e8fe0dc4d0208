"""bench/paired.py: one command against a baseline, in interleaved pairs.

A machine's speed drifts by ±20 % within minutes on these two-core VMs, so a
ratio of two separate series means little.  This runs the baseline and the
command alternately (which of the two goes first alternates too), N pairs,
each as a whole process through ``sh -c``, and prints both times and the
ratio of each pair, then the median ratio and its spread.  Output of the
commands is discarded; a command that fails stops the run.

    python bench/paired.py -n 5 --vs "python floor.py M" -- "python -m govsync plan M"
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time


def timed(command: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(["sh", "-c", command], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"exit {done.returncode}: {command}\n{done.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--pairs", type=int, default=5)
    parser.add_argument("--vs", required=True, help="the baseline command")
    parser.add_argument("command", nargs="+", help="the command measured (after --)")
    args = parser.parse_args(argv)
    command = " ".join(args.command)
    ratios = []
    for i in range(args.pairs):
        if i % 2:
            took, base = timed(command), timed(args.vs)
        else:
            base, took = timed(args.vs), timed(command)
        ratios.append(took / base)
        print(f"pair {i + 1}: baseline {base:.3f} s, command {took:.3f} s, ratio {took / base:.3f}")
    print(f"ratio: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {len(ratios)} pairs)")


if __name__ == "__main__":
    main()
