"""The results table of bench/README.md, written by bench/run (nobody edits it by hand).

The table lives between two markers. A run replaces the rows of the cases it measured
(every peer of such a case) and keeps the others, so cases measured one at a time on a
quiet machine accumulate into one table; each row says when, at which commit and under
what load it was measured.
"""
import re

BEGIN = "<!-- bench/run writes the table below (driver.py --readme); do not edit by hand -->"
END = "<!-- end of the table bench/run writes -->"

HEADER = ("| case | peer | ours | peer | ratio ours/peer | ours is | ours / peer % of peak | measured (UTC, commit, load) |\n"
          "|---|---|---:|---:|---:|---|---|---|")
INTERNAL_HEADER = ("Internal ratios (ours against ours, no external peer):\n\n"
                   "| case | compared with | ours | other way | ratio | ours is | measured (UTC, commit, load) |\n"
                   "|---|---|---:|---:|---:|---|---|")


# Units of size (peak_rss): ours is smaller or larger, not faster or slower.
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "KB", "MB", "GB")


def _verdict(r):
    s = r["ours_speedup"]
    better, worse = ("smaller", "larger") if r.get("unit") in _SIZE_UNITS else ("faster", "slower")
    return ("%.2fx %s" % (s, better)) if s >= 1 else ("%.2fx %s" % (1 / s, worse))


def _when(r, commit):
    stamp = r["timestamp"].replace("T", " ")[:16]
    return "%s %s, load %s" % (stamp, commit, r.get("load_before", "?").split()[0])


def row(r, fmt, commit):
    frac = ""
    if "ours_peak_fraction" in r:
        frac = "%.0f%% / %.0f%%" % (100 * r["ours_peak_fraction"], 100 * r["peer_peak_fraction"])
    return "| %s | %s | %s %s | %s %s | %s | %s | %s | %s |" % (
        r["case"], r["peer_name"], fmt(r["ours"]), r["unit"], fmt(r["peer"]), r["unit"], fmt(r["ratio"]),
        _verdict(r), frac, _when(r, commit))


def internal_row(r, fmt, commit):
    return "| %s | %s | %s %s | %s %s | %s | %s | %s |" % (
        r["case"], r["peer_name"], fmt(r["ours"]), r["unit"], fmt(r["peer"]), r["unit"], fmt(r["ratio"]),
        _verdict(r), _when(r, commit))


def _rows(block, header):
    """The data rows of the table under `header` in `block`, as (case, line)."""
    start = block.find(header)
    if start < 0:
        return []
    out = []
    for line in block[start + len(header):].lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        out.append((line.split("|")[1].strip(), line))
    return out


def _merge(old, new):
    """Old rows with those of re-measured cases replaced in place; new cases appended."""
    fresh = {}
    for case, line in new:
        fresh.setdefault(case, []).append(line)
    merged, done = [], set()
    for case, line in old:
        if case in fresh:
            if case not in done:
                merged += fresh[case]
                done.add(case)
        else:
            merged.append(line)
    for case, lines in fresh.items():
        if case not in done:
            merged += lines
    return merged


def update(path, results, fmt, commit):
    with open(path) as f:
        text = f.read()
    m = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), text, re.S)
    if not m:
        raise RuntimeError("%s has no bench table markers (%s ... %s)" % (path, BEGIN, END))
    block = m.group(1)
    peers = _merge(_rows(block, HEADER),
                   [(r["case"], row(r, fmt, commit)) for r in results if not r["internal"]])
    internal = _merge(_rows(block, INTERNAL_HEADER),
                      [(r["case"], internal_row(r, fmt, commit)) for r in results if r["internal"]])
    body = "\n" + HEADER + "\n" + "\n".join(peers) + "\n"
    if internal:
        body += "\n" + INTERNAL_HEADER + "\n" + "\n".join(internal) + "\n"
    text = text[:m.start(1)] + body + text[m.end(1):]
    with open(path, "w") as f:
        f.write(text)
