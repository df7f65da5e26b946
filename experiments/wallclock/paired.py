"""Every row of several bench JSON files of one puzzle set, paired against the sequential
(``confidence``) row found among them: solved %, gained/lost puzzles, passes, wall-clock.

    python experiments/wallclock/paired.py FILE [FILE ...]

The first file holding a ``confidence`` row gives the reference; a label met twice keeps its
first row. All files must be of the same set (same ``set`` and ``puzzles``).
"""

import json
import sys


def main(paths: list[str]) -> None:
    rows, seen, ref, sets = [], set(), None, set()
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        sets.add((data["set"], data["puzzles"]))
        for row in data["rows"]:
            if row["label"] in seen:
                continue
            seen.add(row["label"])
            rows.append((path, row))
            if ref is None and row["label"] == "confidence":
                ref = row["solved_each"]
    if len(sets) != 1:
        sys.exit(f"paired.py: the files hold different sets: {sorted(sets)}")
    if ref is None:
        sys.exit("paired.py: no 'confidence' row among the files")
    print(f"set {sets.pop()[0]}; sequential solved {ref.count('1') / len(ref):.1%}")
    print(f"{'rule':<86} {'solved':>7} {'+':>4} {'-':>4} {'passes':>7} {'wall s':>7}")
    for _, row in rows:
        each = row["solved_each"]
        gained = sum(a == "1" and b == "0" for a, b in zip(each, ref, strict=True))
        lost = sum(a == "0" and b == "1" for a, b in zip(each, ref, strict=True))
        print(f"{row['label']:<86} {row['solved']:>7.1%} {gained:>4} {lost:>4} "
              f"{row['nfe']:>7.2f} {row['wall_s']:>7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
