#!/usr/bin/env python3
"""The README's benchmark table, from one run's JSON (bench.py's output).

    table.py bench-results.json              print the table
    table.py bench-results.json README.md    replace the table in README.md
                                             (between the bench-table markers)

Each row: pi-jail's median (min-max), the alternative a user would pick
instead, and the ratio of the two medians from that same run."""
import json
import sys

BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"

# (work, pi-jail's figure, the alternative's figure and its name, others).
ROWS = [
    ("start-up, `/bin/true`", "true_pi_jail", ("true_bwrap", "bwrap, comparable view"),
     [("true_unshare", "`unshare` floor"), ("true_bare", "bare"), ("true_firejail", "firejail"), ("true_srt", "srt")]),
    ("start-up, `/bin/true`, with 5,000 of Pi's sessions in the agent dir", "true_pi_jail_history",
     ("true_pi_jail_no_history", "pi-jail with none"), []),
    ("100 × `bash -c true`, the whole session in one jail", "loop_inside", ("loop_outside", "no jail"), []),
    ("100 × `bash -c true`, each wrapped separately", "loop_each_pi_jail", ("loop_each_bwrap", "bwrap"),
     [("loop_each_srt", "srt")]),
    ("`pi --version`", "version_pi_jail", ("version_bare", "bare"), [("version_no_cache", "jailed, compile cache off")]),
    ("`pi --version`, first run after an upgrade (warm-up)", "version_first_run", ("version_bare", "bare"), []),
    ("one scripted `pi -p` turn (a bash tool call)", "turn_pi_jail", ("turn_bare", "bare"), []),
    ("256 MiB download from a host loopback service, via the proxy", "download_proxy",
     ("download_direct", "direct"), [("download_forward", "via the forward")]),
    ("200 small requests, one connection each, via the proxy", "requests_proxy", ("requests_direct", "direct"), []),
    ("200 tunnels, 50 at a time, via the proxy", "tunnels_proxy", None, []),
    ("supervisor peak RSS while relaying 3 × 256 MiB", "relay_rss", None, []),
    ("`git status`, 20,000 files", "git_pi_jail", ("git_bare", "bare"),
     [("git_layers_off", "jailed, seccomp+Landlock off")]),
]


def value(fig, with_range=True):
    unit = fig["unit"]

    def one(v):
        if unit == "s":
            return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"
        if unit == "MB/s":
            return f"{v:.0f} MB/s"
        if unit == "MiB":
            return f"{v:.2f} MiB"  # two decimals: 7.96 is not 8.0 (the bound is 8 MiB)
        return f"{v:.3g} {unit}"

    if fig.get("median") is None:
        return "n/a"
    text = one(fig["median"])
    if with_range and fig["runs"] > 1:
        text += f" ({one(fig['min'])}–{one(fig['max'])})"
    return text


def table(results):
    figs = results["by_key"]
    m = results["machine"]
    load = m.get("load_average")
    lines = [f"Measured in one run: {m.get('cpus')} CPUs ({m.get('cpu')}), Linux {m.get('kernel')}, as "
             f"{m.get('user')}" + (f", load average {load[0]:.1f} at the start" if load else "") +
             ". Medians (min–max); the ratio is pi-jail's median over the alternative's (CPU: the same for "
             "user+system time of all processes, steadier on a loaded machine).",
             "",
             "| work | pi-jail | alternative | ratio | also |",
             "|---|---|---|---|---|"]
    for work, mine, alt, others in ROWS:
        if mine not in figs:
            continue
        f = figs[mine]
        alt_text, ratio_text = "", ""
        if alt and alt[0] in figs:
            a = figs[alt[0]]
            alt_text = f"{alt[1]} {value(a)}"
            if a.get("median") and f.get("median") is not None:
                ratio_text = f"**{f['median'] / a['median']:.2f}×**"
                if a.get("cpu_median") and f.get("cpu_median") is not None:
                    ratio_text += f" (CPU {f['cpu_median'] / a['cpu_median']:.2f}×)"
        also = " · ".join(f"{name} {value(figs[k], False)}" for k, name in others if k in figs)
        lines.append(f"| {work} | {value(f)} | {alt_text} | {ratio_text} | {also} |")
    return "\n".join(lines) + "\n"


def main():
    results = json.load(open(sys.argv[1]))
    text = table(results)
    if len(sys.argv) < 3:
        sys.stdout.write(text)
        return
    readme = open(sys.argv[2]).read()
    if BEGIN not in readme or END not in readme:
        sys.exit(f"{sys.argv[2]}: no {BEGIN} ... {END} markers")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(sys.argv[2], "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


if __name__ == "__main__":
    main()
