#!/usr/bin/env python3
"""Merge pi-jail reports (pi-jail --report FILE) into one summary.

    merge-reports.py [--json OUT.json] [--markdown OUT.md] [--strict] PATH...

PATH is a report file or a directory searched for *.json (as
actions/download-artifact leaves them: one directory per artifact).
Prints a Markdown summary on stdout (or to --markdown, e.g.
$GITHUB_STEP_SUMMARY) and writes the merged figures as JSON to --json.

Exit status: 0; 1 with --strict when a run did not exit 0 or left
something in its repository for the host's git to run (repository_audit);
2 when an input is not a readable pi-jail report (the file is named).

Reports are written by pi-jail, but much of what they hold came from the
jailed run (host names, commands, paths): every such string is shown
escaped, never as Markdown or HTML. Only regular files are read (no
symlinks, no FIFOs), at most 64 MiB each. Python 3.9+, standard library
only."""
import argparse
import json
import os
import stat
import sys

SCHEMA = "pi-jail-report/1"
MAX_BYTES = 64 << 20


class BadReport(Exception):
    pass


def read_report(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise BadReport(f"{path}: cannot open: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadReport(f"{path}: not a regular file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise BadReport(f"{path}: larger than {MAX_BYTES >> 20} MiB")
    try:
        report = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadReport(f"{path}: not JSON: {e}") from None
    check_report(path, report)
    return report


def check_report(path, r):
    """The fields this script uses, with their types (the full schema is
    man/pi-jail-report.schema.json)."""
    def need(obj, key, t, where):
        v = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
            raise BadReport(f"{path}: {where}{key}: missing or not {t.__name__}")
        return v
    if not isinstance(r, dict) or r.get("schema") != SCHEMA:
        raise BadReport(f"{path}: not a pi-jail report (\"schema\" is not \"{SCHEMA}\")")
    need(r, "command", list, "")
    need(r, "duration_ms", int, "")
    ex = need(r, "exit", dict, "")
    need(ex, "code", int, "exit.")
    need(ex, "ending", str, "exit.")
    net = need(r, "network", dict, "")
    for d in need(net, "decisions", list, "network."):
        for k, t in (("protocol", str), ("host", str), ("port", int), ("allowed", bool), ("reason", str),
                     ("count", int), ("bytes_up", int), ("bytes_down", int)):
            need(d, k, t, "network.decisions[].")
    unlisted = need(net, "unlisted", dict, "network.")
    for k in ("allowed", "refused", "bytes_up", "bytes_down"):
        need(unlisted, k, int, "network.unlisted.")
    for q in need(r, "refused_requests", list, ""):
        for k in ("what", "reason", "by"):
            need(q, k, str, "refused_requests[].")
    for a in need(r, "repository_audit", list, ""):
        for k in ("path", "what"):
            need(a, k, str, "repository_audit[].")
    for w in need(r, "write_back", list, ""):
        if not isinstance(w, str):
            raise BadReport(f"{path}: write_back[]: not a string")


def find_reports(paths):
    found = []
    for p in paths:
        try:
            st = os.lstat(p)
        except OSError as e:
            raise BadReport(f"{p}: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            for top, dirs, files in os.walk(p):  # never into a symlinked directory
                dirs.sort()
                found += [os.path.join(top, f) for f in sorted(files) if f.endswith(".json")]
        else:
            found.append(p)
    if not found:
        raise BadReport("no report found in " + " ".join(paths))
    return found


def merge(named):
    """named: [(path, report)] -> the summary (a dict, JSON-ready)."""
    s = {"schema": "pi-jail-summary/1", "runs": len(named), "succeeded": 0, "endings": {}, "failed": [],
         "duration_ms": {"total": 0, "longest": 0},
         "network": {"allowed": [], "refused": [], "unlisted": {"allowed": 0, "refused": 0, "bytes_up": 0,
                                                                  "bytes_down": 0}, "log_suppressed": 0},
         "refused_requests": [], "repository_audit": [], "write_back": {"applied": 0, "refused": [], "kept": []},
         "runs_list": []}
    net = {}
    reqs = {}
    for path, r in named:
        ex = r["exit"]
        s["endings"][ex["ending"]] = s["endings"].get(ex["ending"], 0) + 1
        s["duration_ms"]["total"] += r["duration_ms"]
        s["duration_ms"]["longest"] = max(s["duration_ms"]["longest"], r["duration_ms"])
        s["runs_list"].append({"report": path, "code": ex["code"], "ending": ex["ending"],
                               "duration_ms": r["duration_ms"]})
        if ex["code"] == 0:
            s["succeeded"] += 1
        else:
            s["failed"].append({"report": path, "command": r["command"], "code": ex["code"],
                                "ending": ex["ending"], "failure": ex.get("failure")})
        for d in r["network"]["decisions"]:
            key = (d["allowed"], d["protocol"], d["host"], d["port"])
            e = net.setdefault(key, {"protocol": d["protocol"], "host": d["host"], "port": d["port"],
                                     "reason": d["reason"], "connections": 0, "bytes_up": 0, "bytes_down": 0,
                                     "runs": 0})
            e["connections"] += d["count"]
            e["bytes_up"] += d["bytes_up"]
            e["bytes_down"] += d["bytes_down"]
            e["runs"] += 1
        for k in s["network"]["unlisted"]:
            s["network"]["unlisted"][k] += r["network"]["unlisted"][k]
        s["network"]["log_suppressed"] += r["network"].get("log_suppressed", 0) \
            if isinstance(r["network"].get("log_suppressed"), int) else 0
        for q in r["refused_requests"]:
            e = reqs.setdefault((q["what"], q["reason"], q["by"]),
                                {"what": q["what"], "reason": q["reason"], "by": q["by"], "runs": 0})
            e["runs"] += 1
        for a in r["repository_audit"]:
            s["repository_audit"].append({"report": path, **{k: a[k] for k in ("path", "line", "key", "what")
                                                              if k in a}})
        for w in r["write_back"]:
            if w.startswith("applied:"):
                s["write_back"]["applied"] += 1
            elif w.startswith("kept:"):
                s["write_back"]["kept"].append({"report": path, "note": w})
            else:
                s["write_back"]["refused"].append({"report": path, "note": w})
        # What the run used (pi-jail's [limits] usage), when the report has it.
        usage = r.get("usage")
        if isinstance(usage, dict):
            u = s.setdefault("usage", {})
            for k, v in usage.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    m = u.setdefault(k, {"max": v, "total": 0})
                    m["max"] = max(m["max"], v)
                    m["total"] += v
    order = lambda e: (-e["connections"], e["host"], e["port"], e["protocol"])
    s["network"]["allowed"] = sorted((e for (ok, *_), e in net.items() if ok), key=order)
    s["network"]["refused"] = sorted((e for (ok, *_), e in net.items() if not ok), key=order)
    s["refused_requests"] = sorted(reqs.values(), key=lambda e: (-e["runs"], e["what"]))
    return s


def printable(text):
    """Control and non-ASCII characters as \\xNN / \\uNNNN."""
    out = []
    for c in str(text):
        o = ord(c)
        if o < 0x20 or o == 0x7f:
            out.append(f"\\x{o:02x}")
        elif o > 0x7e:
            out.append(f"\\u{o:04x}" if o <= 0xffff else f"\\U{o:08x}")
        else:
            out.append(c)
    return "".join(out)


def esc(text):
    """A string from a report as inert Markdown: printable(), then HTML's
    < > & as entities and Markdown's punctuation backslash-escaped, so it
    is never a tag, a link or image, emphasis, a code span or a table cell
    break."""
    out = []
    for c in printable(text):
        if c in "<>&":
            out.append(f"&#{ord(c)};")
        elif c in "\\`*_[]|~!":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def markdown(s):
    lines = [f"## pi-jail: {s['runs']} runs, {s['succeeded']} succeeded, {len(s['failed'])} failed", ""]
    lines.append("Endings: " + ", ".join(f"{esc(k)} {v}" for k, v in sorted(s["endings"].items())) + ".")
    lines += ["", f"Time in jails: {s['duration_ms']['total'] / 1000:.1f} s in all, "
                  f"the longest run {s['duration_ms']['longest'] / 1000:.1f} s.", ""]
    if s["failed"]:
        lines += ["### Runs that did not exit 0", "", "| report | exit | ending | command | failure |",
                  "|---|---|---|---|---|"]
        for f in s["failed"]:
            lines.append(f"| {esc(f['report'])} | {f['code']} | {esc(f['ending'])} | "
                         f"{esc(' '.join(map(str, f['command'])))} | {esc(f['failure'] or '')} |")
        lines.append("")
    for title, key in (("Network: refused", "refused"), ("Network: allowed", "allowed")):
        if s["network"][key]:
            lines += [f"### {title}", "", "| destination | protocol | connections | runs | reason |",
                      "|---|---|---|---|---|"]
            for e in s["network"][key]:
                lines.append(f"| {esc(e['host'])}:{e['port']} | {esc(e['protocol'])} | {e['connections']} | "
                             f"{e['runs']} | {esc(e['reason'])} |")
            lines.append("")
    if s["refused_requests"]:
        lines += ["### Requests the policy refused", "", "| what | reason | by | runs |", "|---|---|---|---|"]
        lines += [f"| {esc(q['what'])} | {esc(q['reason'])} | {esc(q['by'])} | {q['runs']} |"
                  for q in s["refused_requests"]]
        lines.append("")
    if s["repository_audit"]:
        lines += ["### Left in the repository for the host's git (review before using it)", "",
                  "| report | path | what |", "|---|---|---|"]
        lines += [f"| {esc(a['report'])} | {esc(a['path'])} | {esc(a['what'])} |" for a in s["repository_audit"]]
        lines.append("")
    wb = s["write_back"]
    if wb["refused"] or wb["kept"]:
        lines += ["### Agent-dir write-back", ""]
        lines += [f"- {esc(w['report'])}: {esc(w['note'])}" for w in wb["refused"] + wb["kept"]]
        lines.append("")
    if "usage" in s:
        lines += ["### Usage", "", "| figure | most in one run | all runs |", "|---|---|---|"]
        lines += [f"| {esc(k)} | {v['max']} | {v['total']} |" for k, v in sorted(s["usage"].items())]
        lines.append("")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description="Merge pi-jail reports into one summary.")
    ap.add_argument("paths", nargs="+", metavar="PATH", help="a report, or a directory of them")
    ap.add_argument("--json", metavar="OUT", help="write the merged summary as JSON")
    ap.add_argument("--markdown", metavar="OUT", help="append the Markdown summary here, not to stdout")
    ap.add_argument("--strict", action="store_true",
                    help="exit 1 when a run did not exit 0 or left repository_audit findings")
    a = ap.parse_args(argv)
    try:
        named = [(p, read_report(p)) for p in find_reports(a.paths)]
    except BadReport as e:
        print(f"merge-reports: {printable(e)}", file=sys.stderr)
        return 2
    s = merge(named)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=2)
            f.write("\n")
    text = markdown(s) + "\n"
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if a.strict and (s["failed"] or s["repository_audit"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
