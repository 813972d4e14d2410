#!/usr/bin/env python3
"""The examples/ files, checked: both YAML files parse; the workflow has
the shape examples/README.md describes and its shell steps pass `bash -n`;
the Kubernetes objects pass a structural check of our own (no Kubernetes
schema validator is in Debian's archive: kubeconform and kubeval are not
packaged); merge-reports.py merges real reports of jailed runs (PJ_BIN)
and refuses what is not one.

Run by tests/examples/run, which prints the doctest-style result line."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
WORKFLOW = os.path.join(EXAMPLES, "github-actions", "pi-jail-matrix.yml")
MERGE = os.path.join(EXAMPLES, "github-actions", "merge-reports.py")
JOB = os.path.join(EXAMPLES, "kubernetes", "pi-jail-job.yaml")


def load_all(path):
    with open(path) as f:
        return list(yaml.safe_load_all(f))


def shell_ok(text, shell="bash"):
    """`shell -n` on a run: block, GitHub's ${{ }} expressions replaced by a word."""
    text = re.sub(r"\$\{\{.*?\}\}", "EXPR", text)
    r = subprocess.run([shell, "-n"], input=text, text=True, capture_output=True)
    return r.returncode == 0, r.stderr


# ---- a structural check of the Kubernetes objects in pi-jail-job.yaml:
# for each object, its allowed fields and their types (a nested dict is an
# object, [x] a list of x, a set an enum); "!" marks a required field. An
# unknown field is an error (a misspelt hostUsers would otherwise be
# silently dropped by the API server's pruning... or refused: either way,
# not what the comments promise). Field names and enums from the
# Kubernetes API reference (batch/v1 Job, core/v1 PodSpec, Container,
# SecurityContext, PodSecurityContext).
PROFILE = {"!type": {"RuntimeDefault", "Unconfined", "Localhost"}, "localhostProfile": str}
CONTAINER = {
    "!name": str, "!image": str, "command": [str], "args": [str], "workingDir": str,
    "env": [{"!name": str, "value": str,
             "valueFrom": {"secretKeyRef": {"!name": str, "!key": str, "optional": bool},
                           "configMapKeyRef": {"!name": str, "!key": str, "optional": bool},
                           "fieldRef": {"!fieldPath": str}}}],
    "securityContext": {"allowPrivilegeEscalation": bool, "privileged": bool, "readOnlyRootFilesystem": bool,
                        "runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int,
                        "capabilities": {"add": [str], "drop": [str]},
                        "procMount": {"Default", "Unmasked"},
                        "seccompProfile": PROFILE, "appArmorProfile": PROFILE},
    "resources": {"requests": {"cpu": str, "memory": str}, "limits": {"cpu": str, "memory": str}},
    "readinessProbe": {"exec": {"!command": [str]}, "periodSeconds": int, "timeoutSeconds": int,
                       "initialDelaySeconds": int, "failureThreshold": int},
    "volumeMounts": [{"!name": str, "!mountPath": str, "readOnly": bool, "subPath": str}],
}
POD_SPEC = {
    "hostUsers": bool, "restartPolicy": {"Always", "OnFailure", "Never"},
    "securityContext": {"runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int, "fsGroup": int,
                        "seccompProfile": PROFILE, "appArmorProfile": PROFILE},
    "initContainers": [CONTAINER], "!containers": [CONTAINER],
    "volumes": [{"!name": str, "emptyDir": {"medium": str, "sizeLimit": str},
                 "configMap": {"!name": str, "defaultMode": int},
                 "persistentVolumeClaim": {"!claimName": str, "readOnly": bool}}],
}
METADATA = {"!name": str, "namespace": str, "labels": {str: str}}
KINDS = {
    ("v1", "Namespace"): {"!apiVersion": str, "!kind": str, "!metadata": METADATA},
    ("v1", "ConfigMap"): {"!apiVersion": str, "!kind": str, "!metadata": METADATA, "data": {str: str}},
    ("batch/v1", "Job"): {
        "!apiVersion": str, "!kind": str, "!metadata": METADATA,
        "!spec": {"completionMode": {"NonIndexed", "Indexed"}, "completions": int, "parallelism": int,
                  "backoffLimit": int, "backoffLimitPerIndex": int, "maxFailedIndexes": int,
                  "activeDeadlineSeconds": int, "ttlSecondsAfterFinished": int,
                  "!template": {"metadata": {"labels": {str: str}}, "!spec": POD_SPEC}},
    },
}


def check_shape(value, shape, where, errors):
    if isinstance(shape, set):
        if value not in shape:
            errors.append(f"{where}: {value!r} is not one of {sorted(shape)}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            errors.append(f"{where}: not a list")
        else:
            for i, v in enumerate(value):
                check_shape(v, shape[0], f"{where}[{i}]", errors)
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            errors.append(f"{where}: not an object")
            return
        if str in shape:  # a map of free keys (labels, data)
            for k, v in value.items():
                check_shape(k, str, f"{where} key", errors)
                check_shape(v, shape[str], f"{where}.{k}", errors)
            return
        fields = {k.lstrip("!"): s for k, s in shape.items()}
        for k in (k[1:] for k in shape if k.startswith("!")):
            if k not in value:
                errors.append(f"{where}.{k}: required, missing")
        for k, v in value.items():
            if k not in fields:
                errors.append(f"{where}.{k}: not a field here")
            else:
                check_shape(v, fields[k], f"{where}.{k}", errors)
    elif shape is int:
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{where}: not an integer")
    elif not isinstance(value, shape):
        errors.append(f"{where}: not {shape.__name__}")


def check_job_rules(docs):
    """The API server's cross-field rules this Job relies on, and ours."""
    errors = []
    by_kind = {d["kind"]: d for d in docs}
    job, pod = by_kind["Job"], by_kind["Job"]["spec"]["template"]["spec"]
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        errors.append("Job: completionMode is not Indexed")
    if "completions" not in spec:
        errors.append("Job: an Indexed Job needs completions")
    if "backoffLimitPerIndex" in spec and spec.get("completionMode") != "Indexed":
        errors.append("Job: backoffLimitPerIndex needs completionMode Indexed")
    if "maxFailedIndexes" in spec and ("backoffLimitPerIndex" not in spec or
                                      spec["maxFailedIndexes"] > spec.get("completions", 0)):
        errors.append("Job: maxFailedIndexes needs backoffLimitPerIndex and at most completions")
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        errors.append("Job: a Job's pods restart Never or OnFailure")
    if pod.get("hostUsers") is not False:
        errors.append("Job: hostUsers is not false")
    tasks = [k for k in by_kind["ConfigMap"].get("data", {}) if k.startswith("task-")]
    if sorted(tasks) != [f"task-{i}" for i in range(spec.get("completions", 0))]:
        errors.append(f"Job: completions {spec.get('completions')} but tasks {sorted(tasks)}")
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for c in pod.get("initContainers", []) + pod["containers"]:
        sc = c.get("securityContext", {})
        if sc.get("procMount") == "Unmasked" and pod.get("hostUsers") is not False:
            errors.append(f"{c['name']}: procMount Unmasked needs hostUsers: false")
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                errors.append(f"{c['name']}: volumeMount {m['name']} names no volume")
        names = set()
        for e in c.get("env", []):
            if e["name"] in names:
                errors.append(f"{c['name']}: env {e['name']} twice")
            names.add(e["name"])
    for p in (pod["securityContext"].get("seccompProfile"), pod["securityContext"].get("appArmorProfile")):
        if p and (p["type"] == "Localhost") != ("localhostProfile" in p):
            errors.append("a Localhost profile needs localhostProfile, and only it")
    for d in docs:
        if d["kind"] != "Namespace" and d["metadata"].get("namespace") != by_kind["Namespace"]["metadata"]["name"]:
            errors.append(f"{d['kind']}: not in the Namespace the file makes")
    return errors


class YamlFiles(unittest.TestCase):
    def test_both_files_parse_as_yaml_and_every_document_is_a_mapping(self):
        for path in (WORKFLOW, JOB):
            with self.subTest(path=path):
                docs = load_all(path)
                self.assertTrue(docs)
                for d in docs:
                    self.assertIsInstance(d, dict)

    def test_a_broken_file_would_fail_the_parse(self):
        # the control: the same loader refuses bad YAML
        with self.assertRaises(yaml.YAMLError):
            list(yaml.safe_load_all("a: [1, 2\nb: c\n"))


class Workflow(unittest.TestCase):
    def setUp(self):
        (self.w,) = load_all(WORKFLOW)
        self.on = self.w.get("on", self.w.get(True))  # YAML 1.1 reads a bare `on` as true

    def steps(self, job):
        return self.w["jobs"][job]["steps"]

    def test_matrix_shards_and_every_shard_runs_pi_jail_with_a_report(self):
        self.assertIn("workflow_dispatch", self.on)
        run = self.w["jobs"]["run"]
        shards = run["strategy"]["matrix"]["shard"]
        self.assertEqual(shards, list(range(len(shards))))
        self.assertGreater(len(shards), 1)
        self.assertIs(run["strategy"]["fail-fast"], False)
        script = "\n".join(s.get("run", "") for s in self.steps("run"))
        self.assertRegex(script, r"pi-jail --report \S*report-\$n\.json")
        self.assertIn("pi -p", script)
        self.assertIn("pi-jail doctor", script)
        uploads = [s for s in self.steps("run") if s.get("uses", "").startswith("actions/upload-artifact@")]
        self.assertEqual(len(uploads), 1)
        self.assertEqual(uploads[0]["if"], "always()")
        self.assertEqual(uploads[0]["with"]["name"], "pi-jail-reports-${{ matrix.shard }}")

    def test_the_merge_job_downloads_every_shards_reports_and_merges_them(self):
        merge = self.w["jobs"]["merge"]
        self.assertEqual(merge["needs"], "run")
        self.assertEqual(merge["if"], "always()")
        downloads = [s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
        self.assertEqual(len(downloads), 1)
        self.assertEqual(downloads[0]["with"]["pattern"], "pi-jail-reports-*")
        script = "\n".join(s.get("run", "") for s in merge["steps"])
        self.assertIn("merge-reports.py --strict", script)
        self.assertIn("$GITHUB_STEP_SUMMARY", script)

    def test_every_step_is_one_of_uses_or_run_actions_are_pinned_and_shell_parses(self):
        for job, body in self.w["jobs"].items():
            self.assertIn("runs-on", body)
            for i, s in enumerate(body["steps"]):
                with self.subTest(job=job, step=i):
                    self.assertEqual(("uses" in s) + ("run" in s), 1)
                    if "uses" in s:
                        self.assertRegex(s["uses"], r"^[\w.-]+/[\w.-]+@v\d+$")
                    else:
                        ok, err = shell_ok(s["run"])
                        self.assertTrue(ok, err)

    def test_shell_check_control_a_broken_step_fails(self):
        self.assertFalse(shell_ok("if true; then echo ${{ matrix.shard }}\n")[0])


class KubernetesJob(unittest.TestCase):
    def setUp(self):
        self.docs = load_all(JOB)

    def test_every_object_has_the_fields_of_its_kind_and_no_others(self):
        for d in self.docs:
            with self.subTest(kind=d.get("kind")):
                shape = KINDS.get((d.get("apiVersion"), d.get("kind")))
                self.assertIsNotNone(shape, f"unexpected {d.get('apiVersion')} {d.get('kind')}")
                errors = []
                check_shape(d, shape, d["kind"], errors)
                self.assertEqual(errors, [])

    def test_the_job_is_indexed_in_a_user_namespace_and_cross_field_rules_hold(self):
        self.assertEqual(check_job_rules(self.docs), [])

    def test_pi_jail_doctor_gates_the_pod_and_pi_runs_jailed_with_its_own_report(self):
        pod = next(d for d in self.docs if d["kind"] == "Job")["spec"]["template"]["spec"]
        self.assertEqual(pod["initContainers"][0]["command"], ["pi-jail", "doctor"])
        (pi,) = pod["containers"]
        self.assertIn("doctor", pi["readinessProbe"]["exec"]["command"])
        script = pi["args"][0]
        self.assertIn('pi-jail --report "/reports/report-$JOB_COMPLETION_INDEX.json"', script)
        ok, err = shell_ok(script, "sh")
        self.assertTrue(ok, err)
        for c in pod["initContainers"][:1] + pod["containers"]:
            sc = c["securityContext"]
            self.assertEqual(sc["procMount"], "Unmasked")
            self.assertIs(sc["allowPrivilegeEscalation"], False)
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        for key in ("seccompProfile", "appArmorProfile"):
            self.assertIn(pod["securityContext"][key]["type"], ("Unconfined", "Localhost"))

    def test_the_check_catches_a_misspelt_field_a_bad_enum_and_unmasked_without_user_namespaces(self):
        docs = load_all(JOB)
        job = next(d for d in docs if d["kind"] == "Job")
        pod = job["spec"]["template"]["spec"]
        pod["hostUser"] = pod.pop("hostUsers")
        pod["securityContext"]["seccompProfile"]["type"] = "unconfined"
        errors = []
        check_shape(job, KINDS[("batch/v1", "Job")], "Job", errors)
        self.assertIn("Job.spec.template.spec.hostUser: not a field here", errors)
        self.assertTrue(any("seccompProfile.type: 'unconfined' is not one of" in e for e in errors), errors)
        rules = check_job_rules(docs)
        self.assertIn("Job: hostUsers is not false", rules)
        self.assertIn("pi-jail-doctor: procMount Unmasked needs hostUsers: false", rules)


class MergeReports(unittest.TestCase):
    """merge-reports.py on reports real jailed runs wrote."""

    @classmethod
    def setUpClass(cls):
        cls.pi_jail = os.environ.get("PJ_BIN")
        if not cls.pi_jail:
            raise RuntimeError("PJ_BIN is not set (run through tests/run or tests/examples/run)")
        cls.tmp = tempfile.mkdtemp(prefix="pj-examples.")
        os.chmod(cls.tmp, 0o755)
        cls.home = os.path.join(cls.tmp, "home")
        cls.reports = os.path.join(cls.tmp, "reports")
        os.makedirs(cls.home)
        os.makedirs(cls.reports)
        hostile = ('exec 3<>/dev/tcp/127.0.0.1/3128; '
                   'printf "GET http://x<b>|y\\`z.example/ HTTP/1.1\\r\\nHost: q\\r\\n\\r\\n" >&3; head -c 1 <&3')
        runs = {
            "ok": ["--", "/bin/true"],
            "refused": ["--", "/bin/sh", "-c",
                        "env -u NO_PROXY -u no_proxy curl -s -o /dev/null -x http://127.0.0.1:3128 "
                        "http://evil.example/; exit 3"],
            "refused-again": ["--", "/bin/bash", "-c",
                              "env -u NO_PROXY -u no_proxy curl -s -o /dev/null -x http://127.0.0.1:3128 "
                              "http://evil.example/; " + hostile],
            "setup-failed": ["--config", os.path.join(cls.tmp, "missing.toml"), "--", "/bin/true"],
            "hook": ["--", "/bin/sh", "-c", "git init -q . && printf '#!/bin/sh\\nid\\n' > .git/hooks/post-checkout"
                     " && chmod +x .git/hooks/post-checkout"],
        }
        cls.status = {}
        for name, args in runs.items():
            ws = os.path.join(cls.tmp, "ws-" + name)
            os.makedirs(ws)
            r = subprocess.run([cls.pi_jail, "-q", "-w", ws, "--report", os.path.join(cls.reports, f"report-{name}.json")]
                               + args, env=dict(os.environ, HOME=cls.home), cwd=ws, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
            cls.status[name] = (r.returncode, r.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def merge(self, *args):
        return subprocess.run([sys.executable, MERGE, *args], capture_output=True, text=True, timeout=60)

    def test_the_jailed_runs_ended_as_intended(self):
        self.assertEqual({k: v[0] for k, v in self.status.items()},
                         {"ok": 0, "refused": 3, "refused-again": 0, "setup-failed": 125, "hook": 0},
                         self.status)

    def test_merged_counts_endings_failures_network_and_audit_across_reports(self):
        out = os.path.join(self.tmp, "summary.json")
        r = self.merge("--json", out, self.reports)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            s = json.load(f)
        self.assertEqual(s["runs"], 5)
        self.assertEqual(s["succeeded"], 3)
        self.assertEqual(s["endings"], {"exited": 4, "setup_failed": 1})
        self.assertEqual(sorted((os.path.basename(f["report"]), f["code"]) for f in s["failed"]),
                         [("report-refused.json", 3), ("report-setup-failed.json", 125)])
        setup = next(f for f in s["failed"] if f["code"] == 125)
        self.assertIn("missing.toml", setup["failure"])
        evil = [e for e in s["network"]["refused"] if e["host"] == "evil.example"]
        self.assertEqual(len(evil), 1)
        self.assertEqual((evil[0]["runs"], evil[0]["connections"], evil[0]["port"]), (2, 2, 80))
        self.assertTrue(any(e["host"].startswith("x<b>|y") for e in s["network"]["refused"]), s["network"])
        self.assertEqual({os.path.basename(a["report"]) for a in s["repository_audit"]}, {"report-hook.json"})
        self.assertIn(".git/hooks/post-checkout", [a["path"] for a in s["repository_audit"]])
        self.assertEqual(s["duration_ms"]["total"], sum(json.load(open(os.path.join(self.reports, n)))["duration_ms"]
                                                         for n in os.listdir(self.reports)))

    def test_markdown_shows_every_string_from_a_report_inert(self):
        r = self.merge(self.reports)
        self.assertEqual(r.returncode, 0, r.stderr)
        md = r.stdout
        self.assertIn("## pi-jail: 5 runs, 3 succeeded, 2 failed", md)
        self.assertIn("| evil.example:80 | http | 2 | 2 |", md)
        self.assertIn("x&#60;b&#62;\\|y\\`z.example", md)  # no tag, no cell break, no code span
        self.assertNotIn("<b>", md)
        for line in md.splitlines():
            if line.startswith("| x&#60;b"):
                self.assertEqual(len(re.findall(r"(?<!\\)\|", line)), 6, line)  # five cells, as the header

    def test_strict_fails_on_a_failed_run_or_an_audit_finding_and_not_otherwise(self):
        self.assertEqual(self.merge("--strict", self.reports).returncode, 1)
        self.assertEqual(self.merge("--strict", os.path.join(self.reports, "report-hook.json")).returncode, 1)
        r = self.merge("--strict", os.path.join(self.reports, "report-ok.json"),
                       os.path.join(self.reports, "report-refused-again.json"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_what_is_not_a_report_is_refused_by_name_and_nothing_hangs(self):
        bad = os.path.join(self.tmp, "bad")
        os.makedirs(bad)
        cases = {}
        with open(os.path.join(bad, "not-json.json"), "w") as f:
            f.write("{")
        cases["not-json.json"] = "not JSON"
        with open(os.path.join(bad, "other.json"), "w") as f:
            json.dump({"schema": "something-else"}, f)
        cases["other.json"] = 'not a pi-jail report ("schema" is not "pi-jail-report/1")'
        with open(os.path.join(self.reports, "report-ok.json")) as f:
            broken = json.load(f)
        broken["exit"]["code"] = "0"
        with open(os.path.join(bad, "wrong-type.json"), "w") as f:
            json.dump(broken, f)
        cases["wrong-type.json"] = "exit.code: missing or not int"
        os.symlink(os.path.join(self.reports, "report-ok.json"), os.path.join(bad, "link.json"))
        cases["link.json"] = "cannot open"
        os.mkfifo(os.path.join(bad, "fifo.json"))
        cases["fifo.json"] = "not a regular file"
        for name, words in cases.items():
            with self.subTest(name=name):
                r = self.merge(os.path.join(bad, name))  # a hang would hit the 60 s guard
                self.assertEqual(r.returncode, 2)
                self.assertIn(f"{name}: {words}", r.stderr)
                self.assertEqual(r.stdout, "")
        # A directory with one bad file among good ones is refused whole, naming it.
        mixed = os.path.join(self.tmp, "mixed")
        shutil.copytree(self.reports, mixed)
        shutil.copy(os.path.join(bad, "other.json"), mixed)
        r = self.merge(mixed)
        self.assertEqual(r.returncode, 2)
        self.assertIn("other.json: not a pi-jail report", r.stderr)

    def test_a_symlinked_directory_is_not_followed(self):
        top = os.path.join(self.tmp, "linked")
        os.makedirs(top)
        shutil.copy(os.path.join(self.reports, "report-ok.json"), top)
        os.symlink(self.reports, os.path.join(top, "elsewhere"))
        out = os.path.join(self.tmp, "linked-summary.json")
        r = self.merge("--json", out, top)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertEqual(json.load(f)["runs"], 1)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print(f"[doctest] test cases: {result.testsRun} | {passed} passed | {failed} failed | {skipped} skipped")
    sys.exit(1 if failed else 0)
