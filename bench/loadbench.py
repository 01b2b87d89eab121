#!/usr/bin/env python3
"""Side-by-side load benchmark of admission webhooks on loopback, driven by oha.

Called by bench/run.sh, which installs oha and builds the servers; this file starts them,
loads them and prints markdown. Servers:

  floor     Portcullis with an empty policy folder: the cost of TLS + HTTP + JSON
  standard  Portcullis with tests/fixtures/bench/policies (Pod Security restricted, 10 native
            validations, 5 defaults), plus bench/fixtures/vap when `portcullis check` accepts it
  go-peer   bench/peers/go-webhook: controller-runtime, the same rules written in Go

Section "Small Pod": the floor and Pod Security restricted + bench/fixtures/vap-small (four CEL
validations) on bench/fixtures/pod-small-review.json, in alternating rounds at c=16.
Section "Alternating rounds": the 10 KB Pod and the ConfigMap against the floor, the standard
set and the Go peer (and, with --baseline, an earlier build's floor and standard set), in
alternating rounds at c=16.
Section "Gatekeeper": the 10 KB Pod against the floor, bench/fixtures/vap alone and
tests/fixtures/bench/gatekeeper (a ConstraintTemplate making the VAP's 10 checks in Rego, and its
constraint), in alternating rounds at c=16, each round beside `gator bench` (--gator) of the same
template, constraint and Pod: its CPU per review from its process's rusage.

Section "Instructions": the same servers under valgrind's callgrind, which counts the
instructions `serve` executes for a fixed number of reviews (callgrind_control zeroes the count
after a warm-up and dumps it after the reviews): a figure that does not move with the machine's
load, for changes smaller than its noise.

Figures come from oha's JSON output (latency, throughput, errors) and /proc/PID (CPU, memory).
Everything goes to 127.0.0.1 only. `--smoke` runs the floor server with one body at c=1 and c=4
and exits 1 unless every request got a 200.
"""
import argparse
import json
import os
import pathlib
import resource
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
BODIES = {
    "pod-10kb": ROOT / "tests/fixtures/bench/pod-10kb.json",
    "configmap": ROOT / "bench/fixtures/configmap-review.json",
    "pod-100kb": ROOT / "bench/fixtures/pod-100kb-review.json",
}
# Requests per oha run, per body, at scale 1 (BENCH_SCALE multiplies them).
REQUESTS = {"pod-10kb": 5000, "configmap": 10000, "pod-100kb": 1000}
# At least this many requests per connection, so TLS handshakes (in the first request of each
# of oha's connections) stay out of p99 at high concurrency.
PER_CONNECTION = 20
CONCURRENCY = [1, 16, 64, 256]
# Length of the half-of-peak-load run, in seconds at scale 1.
HALF_LOAD_SECONDS = 20
STANDARD_POLICIES = ROOT / "tests/fixtures/bench/policies"
VAP = ROOT / "bench/fixtures/vap"
HEAVY_POLICY = ROOT / "bench/fixtures/heavy"
# Small-Pod section: Pod Security restricted (the standard set's configuration) and four CEL
# validations, on a 1.5 KB Pod, against the floor in alternating rounds.
SMALL_POD_BODY = ROOT / "bench/fixtures/pod-small-review.json"
SMALL_POD_POLICIES = [STANDARD_POLICIES / "pod-security.yaml", ROOT / "bench/fixtures/vap-small"]
SMALL_POD_ROUNDS = int(os.environ.get("BENCH_SMALL_POD_ROUNDS", "5"))
# Rounds section: the floor, the standard set and the Go peer (and a baseline build's floor and
# standard set) take turns on each body, BENCH_ROUNDS rounds of c=16.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
ROUND_REQUESTS = {"pod-10kb": 10000, "configmap": 20000}
# BENCH_ROUNDS_H2=0 leaves out the rounds over HTTP/2.
ROUNDS_H2 = os.environ.get("BENCH_ROUNDS_H2", "1") != "0"
# Gatekeeper section: the template + constraint, the VAP making the same checks, and the floor
# take turns on the 10 KB Pod, BENCH_GATEKEEPER_ROUNDS rounds of c=16, each round followed by a
# `gator bench` run of the same template, constraint and Pod (GATOR_ITERATIONS reviews, and once
# GATOR_BASE_ITERATIONS, whose CPU is subtracted: process start, setup, warm-up).
GATEKEEPER = ROOT / "tests/fixtures/bench/gatekeeper"
GATEKEEPER_ROUNDS = int(os.environ.get("BENCH_GATEKEEPER_ROUNDS", "5"))
GATEKEEPER_REQUESTS = 10000
GATOR_ITERATIONS = 3000
GATOR_BASE_ITERATIONS = 100
HEAVY_BODY = ROOT / "bench/fixtures/pod-44-containers-review.json"
# Section "Instructions": reviews counted after a warm-up, at c=2, per server and body.
INSTRUCTION_WARMUP = 200
INSTRUCTION_REQUESTS = int(os.environ.get("BENCH_INSTRUCTION_REQUESTS", "1000"))
TRIVIAL_VAPS = {count: ROOT / f"bench/fixtures/vap-trivial-{count}" for count in (1, 21)}
# Isolation run: heavy requests kept in flight, and the cheap requests' rate and count.
HEAVY_IN_FLIGHT = 8
CHEAP_QPS = 50
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Failed requests of the sections that report them in their markdown (small Pod).
SECTION_FAILURES = []

# The 10 rule families of native.yaml, one per generated policy, in turn (policy scale).
RULE_TEMPLATES = [
    '{name: team, requiredLabels: {team: "^[a-z][a-z0-9-]*$"}}',
    "{name: version, requiredLabels: {app.kubernetes.io/version: null}}",
    '{name: owner, requiredAnnotations: {example.com/owner: "@example\\\\.com$"}}',
    "{name: registries, images: {allowedRegistries: [registry.example.com, ghcr.io/example]}}",
    "{name: pinned, images: {forbidLatest: true}}",
    "{name: requests, resources: {requireRequests: [cpu, memory], requireLimits: [memory]}}",
    "{name: bounds, resources: {maxLimits: {memory: 4Gi}, minRequests: {cpu: 10m}}}",
    "{name: probes, probes: {require: [readiness, liveness]}}",
    "{name: host, host: {forbidNamespaces: true, forbidPorts: true}}",
    "{name: host-paths, host: {forbidHostPath: true, allowedHostPaths: [/var/log]}}",
]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- /proc -----------------------------------------------------------------------------------

def cpu_seconds(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def listen_drops():
    """TcpExt ListenDrops: SYNs dropped because a listen queue was full, machine-wide (the
    client retries after 1 s, which shows as 1 s latencies at high concurrency)."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        if head.startswith("TcpExt:"):
            return int(dict(zip(head.split(), values.split()))["ListenDrops"])
    return 0


def memory_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


# ---- servers ---------------------------------------------------------------------------------

class Server:
    """A webhook process on loopback ports of its own, with its log in the work dir."""

    def __init__(self, name, argv, port, ready_url, workdir, env=None):
        self.name, self.argv, self.port, self.ready_url = name, argv, port, ready_url
        self.log_path = workdir / f"{name}.log"
        self.env = env
        self.proc = None
        self.ready_seconds = None

    def start(self, deadline=60.0):
        log(f"start {self.name}: {' '.join(map(str, self.argv))}")
        logf = open(self.log_path, "wb")
        started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        logf.close()
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode} before ready; "
                                 f"log: {self.log_path}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.ready_url, timeout=1) as r:
                    if r.status == 200:
                        self.ready_seconds = time.monotonic() - started
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() - started > deadline:
                self.stop()
                raise SystemExit(f"{self.name} not ready after {deadline:.0f} s; log: {self.log_path}")
            time.sleep(0.002)

    @property
    def pid(self):
        return self.proc.pid

    def log_tail(self, lines=20):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


RUNNING = []


def stop_all(*_):
    for server in RUNNING:
        server.stop()


def portcullis(binary, name, policies, workdir, certs):
    port, admin = free_port(), free_port()
    argv = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--tls-dir", certs, "--no-cluster", "--shutdown-grace", "1s"]
    for p in policies:
        argv += ["--policies", p]
    server = Server(name, argv, port, f"http://127.0.0.1:{admin}/readyz", workdir)
    server.admin = admin
    return server


def go_peer(binary, workdir, certs):
    port, health = free_port(), free_port()
    argv = [binary, "-listen", f"127.0.0.1:{port}", "-health-addr", f"127.0.0.1:{health}",
            "-cert-dir", certs]
    return Server("go-peer", argv, port, f"http://127.0.0.1:{health}/readyz", workdir)


# ---- load ------------------------------------------------------------------------------------

class Oha:
    def __init__(self, binary, ca):
        self.binary, self.ca = binary, ca

    def argv(self, server, path, body, n, c, qps=None, h2=False):
        """oha's command line: c HTTP/1.1 connections, or with `h2` one HTTP/2 connection that
        carries c requests at a time, as the kube-apiserver calls a webhook."""
        connections = ["--http2", "-c", "1", "-p", str(c)] if h2 else ["-c", str(c)]
        argv = [self.binary, "--no-tui", "--output-format", "json", "-n", str(n), *connections,
                "-m", "POST", "-T", "application/json", "-D", str(body), "--cacert", str(self.ca),
                "-t", "10s"]
        if qps:
            argv += ["-q", f"{qps:.0f}", "--latency-correction"]
        return argv + [f"https://127.0.0.1:{server.port}{path}"]

    def start(self, server, path, body, n, c, qps=None, h2=False):
        return subprocess.Popen(self.argv(server, path, body, n, c, qps, h2), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    @staticmethod
    def finish(proc, n):
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"oha failed ({proc.returncode}): {err.decode(errors='replace')}")
        return summarize(json.loads(out), n)

    def run(self, server, path, body, n, c, qps=None, h2=False):
        before, drops = cpu_seconds(server.pid), listen_drops()
        result = self.finish(self.start(server, path, body, n, c, qps, h2), n)
        result["cpu_per_1000"] = (cpu_seconds(server.pid) - before) * 1000 / n
        result["syn_drops"] = listen_drops() - drops
        return result


def summarize(report, n):
    statuses = {int(k): v for k, v in report.get("statusCodeDistribution", {}).items()}
    errors = sum(report.get("errorDistribution", {}).values())
    non_200 = sum(v for k, v in statuses.items() if k != 200)
    pct = report.get("latencyPercentiles", {})
    ms = lambda v: None if v is None else v * 1000  # noqa: E731
    return {
        "n": n,
        "rps": report["summary"]["requestsPerSec"],
        "p50": ms(pct.get("p50")), "p90": ms(pct.get("p90")), "p99": ms(pct.get("p99")),
        "max": ms(report["summary"]["slowest"]),
        "statuses": statuses,
        "errors": errors,
        "error_kinds": report.get("errorDistribution", {}),
        "failed": errors + non_200 + max(0, n - errors - sum(statuses.values())),
    }


# ---- idle connections ------------------------------------------------------------------------

def idle_connections(server, ca, body, count, deadline=60.0):
    """Opens `count` keep-alive TLS connections, each after one request, and holds them idle.
    Returns (opened, still open after 1 s, VmRSS kB with them open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    ctx = ssl.create_default_context(cafile=str(ca))
    payload = pathlib.Path(body).read_bytes()
    request = (f"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload
    conns = []
    started = time.monotonic()
    try:
        while len(conns) < count and time.monotonic() - started < deadline:
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            conn = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            conn.sendall(request)
            read_response(conn)
            conns.append(conn)
        time.sleep(1.0)
        rss = memory_kb(server.pid)["VmRSS"]
        open_now = 0
        for conn in conns:
            readable, _, _ = select.select([conn], [], [], 0)
            open_now += 0 if readable else 1  # readable while idle = closed by the server
        return len(conns), open_now, rss
    finally:
        for conn in conns:
            try:
                conn.close()
            except OSError:
                pass


def read_response(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the body")
        rest += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(head.split(b"\r\n")[0].decode(errors="replace"))


# ---- policies --------------------------------------------------------------------------------

def write_policies(path, count, generation):
    """`count` Policy documents in one file, each with one validation rule (native.yaml's 10
    families in turn), all matching Pods; `generation` changes every rule's name."""
    docs = []
    for i in range(count):
        rule = RULE_TEMPLATES[i % len(RULE_TEMPLATES)].replace("{name: ", f"{{name: g{generation}-", 1)
        docs.append(f"apiVersion: portcullis.dev/v1alpha1\nkind: Policy\n"
                    f"metadata: {{name: bench-{i:04d}}}\nspec:\n  match:\n"
                    f"    resources: [{{kinds: [Pod]}}]\n  validate:\n    - {rule}\n")
    path.write_text("---\n".join(docs))


def handler_buckets(server):
    """Cumulative counts of portcullis_admission_duration_seconds for /validate, by bucket
    bound (seconds): the server's own time per request, body read to answer written. None for
    a server without an admin listener (the Go peer)."""
    if not getattr(server, "admin", None):
        return None
    with urllib.request.urlopen(f"http://127.0.0.1:{server.admin}/metrics", timeout=2) as r:
        text = r.read().decode()
    buckets = {}
    for line in text.splitlines():
        if line.startswith("portcullis_admission_duration_seconds_bucket{") and 'endpoint="validate"' in line:
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if bound == "+Inf" else float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def handler_quantile(before, after, q):
    """The bucket bound (ms) under which a fraction q of the requests between two scrapes of
    handler_buckets fell."""
    if before is None or after is None:
        return None
    bounds = sorted(after)
    total = after[bounds[-1]] - before.get(bounds[-1], 0)
    for bound in bounds:
        if total and after[bound] - before.get(bound, 0) >= q * total:
            return bound * 1000
    return None


def reload_successes(server):
    """portcullis_reloads_total{component="policies"} by result."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.admin}/metrics", timeout=2) as r:
        text = r.read().decode()
    counts = {"success": 0.0, "failure": 0.0}
    for line in text.splitlines():
        if line.startswith("portcullis_reloads_total{") and 'component="policies"' in line:
            for result in counts:
                if f'result="{result}"' in line:
                    counts[result] = float(line.rsplit(" ", 1)[1])
    return counts


# ---- markdown --------------------------------------------------------------------------------

def fmt(v, digits=2):
    if v is None:
        return "–"
    if isinstance(v, float):
        if v >= 1000:
            return f"{v:,.0f}"
        if v >= 100:
            return f"{v:.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def throughput_svg(results, names, body):
    """A grouped bar chart (SVG, no dependencies): req/s per server at each concurrency."""
    colours = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2"]
    levels = sorted({c for n in names for c in results.get((n, body, "/validate"), {})})
    peak = max((r["rps"] for n in names for r in results.get((n, body, "/validate"), {}).values()),
               default=1) or 1
    width, height, left, bottom, top = 760, 360, 70, 50, 40
    group = (width - left - 20) / max(len(levels), 1)
    bar = group * 0.8 / max(len(names), 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20" font-size="14">/validate, {body}: requests per second '
           f'(higher is better)</text>']
    plot = height - bottom - top
    for i in range(5):
        value = peak * i / 4
        y = height - bottom - plot * i / 4
        out.append(f'<line x1="{left}" x2="{width - 20}" y1="{y:.0f}" y2="{y:.0f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end">{value:,.0f}</text>')
    for g, c in enumerate(levels):
        x0 = left + g * group + group * 0.1
        out.append(f'<text x="{x0 + group * 0.4:.0f}" y="{height - bottom + 18}" '
                   f'text-anchor="middle">c={c}</text>')
        for k, name in enumerate(names):
            r = results.get((name, body, "/validate"), {}).get(c)
            if not r:
                continue
            h = plot * r["rps"] / peak
            out.append(f'<rect x="{x0 + k * bar:.1f}" y="{height - bottom - h:.1f}" '
                       f'width="{bar * 0.9:.1f}" height="{h:.1f}" fill="{colours[k % 5]}">'
                       f'<title>{name} c={c}: {r["rps"]:,.0f} req/s</title></rect>')
    for k, name in enumerate(names):
        x = left + k * 150
        out.append(f'<rect x="{x}" y="{height - 18}" width="12" height="12" fill="{colours[k % 5]}"/>')
        out.append(f'<text x="{x + 16}" y="{height - 8}">{name}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def load_rows(results, servers, body, path="/validate"):
    rows = []
    for name in servers:
        for c, r in sorted(results.get((name, body, path), {}).items()):
            rows.append([name, c, r["rps"], r["p50"], r["p90"], r["p99"], r["max"],
                         f'{r["cpu_per_1000"]:.3f}', r["syn_drops"], r["failed"]])
    return rows


LOAD_HEADERS = ["server", "c", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
                "CPU s / 1000", "SYN drops", "failed"]


# ---- main ------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--portcullis", required=True)
    ap.add_argument("--oha", required=True)
    ap.add_argument("--go-webhook", help="the Go peer binary; without it the peer is skipped")
    ap.add_argument("--out", help="also write the markdown here")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--scale", type=float, default=float(os.environ.get("BENCH_SCALE", "1")))
    ap.add_argument("--note", action="append", default=[], help="a line for the notes")
    ap.add_argument("--baseline", help="another Portcullis binary (an earlier build): the rounds "
                    "and small-Pod sections also run its servers, in the same rounds")
    ap.add_argument("--gator", help="Gatekeeper's gator binary (e2e/build-gator.sh): the Gatekeeper "
                    "section runs `gator bench` beside the servers; without it, that part is skipped")
    ap.add_argument("--only", choices=["isolation", "small-pod", "rounds", "gatekeeper",
                                       "instructions"],
                    help="run one section only (its markdown is printed, not written to --out)")
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: (stop_all(), sys.exit(143)))
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="portcullis-bench-"))
    try:
        code = run(args, workdir)
    finally:
        stop_all()
    if code == 0 and not os.environ.get("BENCH_KEEP"):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log(f"work dir kept: {workdir}")
    return code


def run(args, workdir):
    certs = workdir / "certs"
    subprocess.run([args.portcullis, "certs", "--out", certs, "--host", "127.0.0.1",
                    "--host", "localhost"], check=True, stdout=subprocess.DEVNULL)
    oha = Oha(args.oha, certs / "ca.crt")
    empty = workdir / "empty"
    empty.mkdir()
    md = []
    notes = list(args.note)

    if args.smoke:
        server = portcullis(args.portcullis, "floor", [empty], workdir, certs)
        RUNNING.append(server.start())
        results = {}
        for c in (1, 4):
            results[c] = oha.run(server, "/validate", BODIES["pod-10kb"], 100, c)
        server.stop()
        md.append("### bench-smoke: Portcullis floor, 10 KB Pod review, `/validate`\n")
        md.append(table(LOAD_HEADERS, [["floor", c, r["rps"], r["p50"], r["p90"], r["p99"], r["max"],
                                        f'{r["cpu_per_1000"]:.3f}', r["syn_drops"], r["failed"]]
                                       for c, r in results.items()]))
        print("\n".join(md))
        bad = {c: (r["statuses"], r["error_kinds"]) for c, r in results.items() if r["failed"]}
        if bad:
            print(f"bench-smoke: FAILED: requests without a 200: {bad}; log: {server.log_path}",
                  file=sys.stderr)
            return 1
        print("bench-smoke: ok (200 requests, all 200)", file=sys.stderr)
        return 0

    scale = args.scale
    if args.only:
        section = {"isolation": isolation, "small-pod": small_pod, "rounds": rounds,
                   "gatekeeper": gatekeeper, "instructions": instructions}[args.only]
        md.extend(section(args, oha, workdir, certs, scale))
        md.append("## Notes\n")
        md.extend(f"- {n}" for n in notes)
        print("\n".join(md) + "\n")
        return 1 if sum(SECTION_FAILURES) else 0
    requests = {b: max(256, int(n * scale)) for b, n in REQUESTS.items()}

    # The standard set, with the VAP when this build accepts it.
    standard = [STANDARD_POLICIES]
    check = subprocess.run([args.portcullis, "check", "--policies", STANDARD_POLICIES, "--policies",
                            VAP, BODIES["pod-10kb"]], capture_output=True, text=True)
    if check.returncode == 0 and "ALLOWED" in check.stdout:
        standard.append(VAP)
        notes.append("`standard` includes bench/fixtures/vap (ValidatingAdmissionPolicy, 10 CEL "
                     "validations): `portcullis check` accepts it.")
    else:
        reason = (check.stderr or check.stdout).strip().splitlines()
        notes.append("`standard` runs **without** bench/fixtures/vap: `portcullis check` refused it "
                     f"(`{reason[-1] if reason else check.returncode}`); the Go peer still runs its "
                     "10 VAP checks, so the comparison is tilted against the peer by those checks.")

    servers = [("floor", lambda: portcullis(args.portcullis, "floor", [empty], workdir, certs))]
    if len(standard) > 1:
        # The same set without the VAP, to split the standard set's cost.
        servers.append(("std-no-vap", lambda: portcullis(args.portcullis, "std-no-vap",
                                                         [STANDARD_POLICIES], workdir, certs)))
        notes.append("`std-no-vap`: the standard set without bench/fixtures/vap (Pod Security + "
                     "native rules only).")
    servers.append(("standard", lambda: portcullis(args.portcullis, "standard", standard, workdir, certs)))
    if args.go_webhook:
        servers.append(("go-peer", lambda: go_peer(args.go_webhook, workdir, certs)))
    else:
        notes.append("Go peer skipped (no Go toolchain or `BENCH_SKIP_PEER`).")

    results, memory, half = {}, {}, {}
    for name, make in servers:
        server = make()
        RUNNING.append(server.start())
        time.sleep(0.5)
        idle = memory_kb(server.pid)["VmRSS"]
        log(f"{name}: warm-up")
        oha.run(server, "/validate", BODIES["pod-10kb"], max(256, int(2000 * scale)), 16)
        for body in BODIES:
            for c in CONCURRENCY:
                n = max(requests[body], int(PER_CONNECTION * c * min(scale, 1)), c)
                r = oha.run(server, "/validate", BODIES[body], n, c)
                results.setdefault((name, body, "/validate"), {})[c] = r
                log(f"{name} {body} c={c}: {r['rps']:.0f} req/s p99 {r['p99']:.2f} ms failed {r['failed']}")
        for c in (1, 64):
            r = oha.run(server, "/mutate", BODIES["pod-10kb"], requests["pod-10kb"], c)
            results.setdefault((name, "pod-10kb", "/mutate"), {})[c] = r
        # p99 at half of the peak throughput (10 KB Pod), open loop at c=64, for 20 s: the
        # first ~30 ms open 64 TLS connections at once while requests queue behind them
        # (latency correction counts that wait), which alone is 0.7% of a 5 s run.
        peak = max(r["rps"] for r in results[(name, "pod-10kb", "/validate")].values())
        n_half = max(500, int(peak / 2 * HALF_LOAD_SECONDS * min(scale, 1)))
        before = handler_buckets(server)
        r = oha.run(server, "/validate", BODIES["pod-10kb"], n_half, 64, qps=peak / 2)
        r["handler_p99"] = handler_quantile(before, handler_buckets(server), 0.99)
        half[name] = (peak, r)
        peak_rss = memory_kb(server.pid)["VmHWM"]
        opened, still, rss_conns = idle_connections(server, certs / "ca.crt", BODIES["configmap"], 1000)
        memory[name] = (idle, peak_rss, rss_conns, opened, still)
        server.stop()
        RUNNING.remove(server)

    names = [n for n, _ in servers]
    md.append("## Load: servers side by side\n")
    md.append(f"oha, HTTPS/1.1 keep-alive on 127.0.0.1, `-n` per run: "
              + ", ".join(f"{b} {n}" for b, n in requests.items())
              + f" (at least {PER_CONNECTION} per connection at full scale: the first request of "
              "each connection carries its TLS handshake). `CPU s / 1000`: server CPU (user+system, /proc/PID/stat) per 1000 reviews. "
              "`SYN drops`: "
              "connection attempts dropped by a full listen queue during the run (/proc/net/netstat "
              "ListenDrops; each costs the client a 1 s SYN retry). `failed`: oha errors plus "
              "non-200 answers.\n")
    for body in BODIES:
        size = BODIES[body].stat().st_size
        md.append(f"### `/validate`, {body} ({size / 1024:.1f} KiB)\n")
        md.append(table(LOAD_HEADERS, load_rows(results, names, body)) + "\n")
    md.append("### `/mutate`, pod-10kb\n")
    md.append(table(LOAD_HEADERS, load_rows(results, names, "pod-10kb", "/mutate")) + "\n")

    if args.out:
        chart = pathlib.Path(args.out).with_name("throughput.svg")
        chart.write_text(throughput_svg(results, names, "pod-10kb"))
        md.append(f"Chart: `{chart}` (throughput by concurrency, pod-10kb `/validate`).\n")

    md.append("### Memory\n")
    md.append(table(["server", "idle RSS MiB", "peak RSS MiB (VmHWM, after the load)",
                     "RSS MiB with 1000 idle TLS connections", "connections opened / still open"],
                    [[n, i / 1024, p / 1024, r / 1024, f"{o} / {s}"] for n, (i, p, r, o, s) in memory.items()]) + "\n")

    md.append("### Ratios\n")
    rows = []
    for body in BODIES:
        floor = results[("floor", body, "/validate")][64]
        std = results[("standard", body, "/validate")][64]
        rows.append([f"standard / floor throughput, {body}, c=64", std["rps"] / floor["rps"]])
        if ("std-no-vap", body, "/validate") in results:
            novap = results[("std-no-vap", body, "/validate")][64]
            rows.append([f"std-no-vap / floor throughput, {body}, c=64", novap["rps"] / floor["rps"]])
        if ("go-peer", body, "/validate") in results:
            go = results[("go-peer", body, "/validate")][64]
            rows.append([f"standard / go-peer throughput, {body}, c=64", std["rps"] / go["rps"]])
            rows.append([f"go-peer / standard CPU per review, {body}, c=64",
                         go["cpu_per_1000"] / std["cpu_per_1000"] if std["cpu_per_1000"] else None])
            rows.append([f"go-peer / standard p99, {body}, c=64", go["p99"] / std["p99"]])
    md.append(table(["ratio", "value"], rows) + "\n")

    md.append(f"### p99 at half of peak load (pod-10kb, `/validate`, c=64, oha `-q` with latency correction, {HALF_LOAD_SECONDS} s)\n")
    md.append("`handler p99 ≤ ms`: the server's own time (body read to answer written, Portcullis's "
              "`portcullis_admission_duration_seconds` histogram over the same run): the bucket bound "
              "under which 99% of the requests fell. The rest of the client's p99 is outside the "
              "handler: TLS, the kernel, scheduling, and oha itself on the same two cores.\n")
    md.append(table(["server", "peak req/s", "offered req/s", "achieved req/s", "p50 ms", "p99 ms",
                     "handler p99 ≤ ms", "failed"],
                    [[n, peak, peak / 2, r["rps"], r["p50"], r["p99"], r["handler_p99"], r["failed"]]
                     for n, (peak, r) in half.items()]) + "\n")

    # ---- policy scale ----
    md.append("## Policy scale (Portcullis)\n")
    md.append("N generated Policy documents in one file, one validation rule each (native.yaml's 10 "
              "families in turn), all matching Pods. Load time: process start until /readyz "
              "answers 200. Per-request cost: pod-10kb `/validate`, c=16.\n")
    rows = []
    n_scale = requests["pod-10kb"]
    for count in (0, 10, 100, 1000):
        folder = workdir / f"policies-{count}"
        folder.mkdir()
        if count:
            write_policies(folder / "policies.yaml", count, 1)
        server = portcullis(args.portcullis, f"scale-{count}", [folder], workdir, certs)
        RUNNING.append(server.start())
        load_ms = server.ready_seconds * 1000
        oha.run(server, "/validate", BODIES["pod-10kb"], max(256, int(1000 * scale)), 16)
        r = oha.run(server, "/validate", BODIES["pod-10kb"], n_scale, 16)
        rows.append([count, load_ms, r["rps"], r["p50"], r["p99"], r["cpu_per_1000"] * 1000,
                     memory_kb(server.pid)["VmRSS"] / 1024, r["failed"]])
        if count == 1000:
            reload_row = reload_under_load(server, oha, folder, workdir, r["rps"])
        server.stop()
        RUNNING.remove(server)
    md.append(table(["policies", "load ms", "req/s", "p50 ms", "p99 ms", "CPU µs / review",
                     "RSS MiB", "failed"], rows) + "\n")
    md.append("### Reload of 1000 policies under load\n")
    md.append("While oha sends pod-10kb to `/validate` (c=16), `policies.yaml` is replaced by a new "
              "generation (rename into the watched folder); reload time runs from the rename until "
              "`portcullis_reloads_total{component=\"policies\",result=\"success\"}` increments.\n")
    md.append(table(["reload ms", "reload failures", "requests during the run", "req/s", "p99 ms",
                     "max ms", "failed"], [reload_row]) + "\n")

    md.extend(small_pod(args, oha, workdir, certs, scale))
    md.extend(rounds(args, oha, workdir, certs, scale))
    md.extend(gatekeeper(args, oha, workdir, certs, scale))
    md.extend(isolation(args, oha, workdir, certs, scale))
    md.extend(instructions(args, oha, workdir, certs, scale))

    md.append("## Notes\n")
    md.extend(f"- {n}" for n in notes)
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)
        log(f"written: {args.out}")
    failed = sum(r["failed"] for per_c in results.values() for r in per_c.values())
    failed += reload_row[-1] + sum(SECTION_FAILURES)
    if failed:
        log(f"{failed} requests failed")
        return 1
    return 0


def callgrind_control(*argv):
    subprocess.run(["callgrind_control", *map(str, argv)], check=True, stdout=subprocess.DEVNULL)


def counted_instructions(server, oha, body, n):
    """The instructions `server` (running under callgrind) executes while it answers `n`
    reviews of `body` at c=2, after a warm-up; and the failed requests."""
    oha.run(server, "/validate", body, INSTRUCTION_WARMUP, 2)
    callgrind_control("-z", server.pid)
    result = oha.run(server, "/validate", body, n, 2)
    dumps = set(server.callgrind_out.parent.glob(f"{server.callgrind_out.name}.{server.pid}.*"))
    callgrind_control("-d", server.pid)
    new = set(server.callgrind_out.parent.glob(f"{server.callgrind_out.name}.{server.pid}.*"))
    if len(new - dumps) != 1:
        raise SystemExit(f"callgrind_control -d {server.pid} wrote {len(new - dumps)} dumps, "
                         f"not one; log: {server.log_path}")
    (dump,) = new - dumps
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]), result["failed"]
    raise SystemExit(f"no instruction total in {dump}")


def instructions(args, oha, workdir, certs, scale):
    """Instructions `serve` executes per review, counted by callgrind: the floor and the
    standard set on the 10 KB Pod and the ConfigMap, the small-Pod servers on the small Pod, and
    a ValidatingAdmissionPolicy with 1 and with 21 trivial validations on the small Pod (the
    difference / 20 is one more validation); with --baseline, that build's floor, standard and
    small-Pod servers too. The same binary and input give the same count within 0.3% whatever
    the machine is doing: for A/B comparisons below the noise of the CPU figures."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        log("valgrind not found: the instructions section is skipped")
        return ["## Instructions per review\n", "Skipped: valgrind (callgrind) is not installed.\n"]
    empty = workdir / "empty"
    n = max(200, int(INSTRUCTION_REQUESTS * scale))
    configmap, pod, small = BODIES["configmap"], BODIES["pod-10kb"], SMALL_POD_BODY
    cases = [("floor", [empty], [configmap, small, pod]),
             ("standard", [STANDARD_POLICIES, VAP], [configmap, pod]),
             ("small-pss-cel", SMALL_POD_POLICIES, [small]),
             ("vap-trivial-1", [TRIVIAL_VAPS[1]], [small]),
             ("vap-trivial-21", [TRIVIAL_VAPS[21]], [small])]
    builds = [("", args.portcullis)] + ([("baseline-", args.baseline)] if args.baseline else [])
    counts, failed = {}, 0
    for prefix, binary in builds:
        for name, policies, bodies in cases:
            if prefix and name.startswith("vap-trivial"):
                continue
            server = portcullis(binary, prefix + name, policies, workdir, certs)
            server.callgrind_out = workdir / f"{server.name}.callgrind"
            server.argv = ["valgrind", "--tool=callgrind",
                           f"--callgrind-out-file={server.callgrind_out}.%p", *server.argv]
            RUNNING.append(server.start(deadline=300.0))
            for body in bodies:
                total, failures = counted_instructions(server, oha, body, n)
                counts[(server.name, body.name)] = total / n
                failed += failures
                log(f"{server.name} {body.name}: {total / n / 1000:.1f}k instructions per review")
            server.stop()
            RUNNING.remove(server)
    per_review = lambda name, body: counts[(name, body.name)]  # noqa: E731
    rows = [[name, body, f"{value / 1000:.1f}"] for (name, body), value in counts.items()]
    ratios = [["floor / standard, 10 KB Pod", per_review("floor", pod) / per_review("standard", pod)],
              ["floor / small-pss-cel, small Pod",
               per_review("floor", small) / per_review("small-pss-cel", small)],
              ["one more trivial validation, small Pod (instructions)",
               (per_review("vap-trivial-21", small) - per_review("vap-trivial-1", small)) / 20]]
    if args.baseline:
        ratios += [[f"{name}, {body.name}: this build / baseline",
                    per_review(name, body) / per_review("baseline-" + name, body)]
                   for name, _, bodies in cases[:3] for body in bodies]
    md = ["## Instructions per review\n",
          f"`serve` under callgrind (valgrind), HTTP/1.1, c=2: {INSTRUCTION_WARMUP} reviews to warm "
          f"up, then the instructions of {n} reviews, counted from a zeroed count to a dump "
          "(callgrind_control); per review, in thousands. `vap-trivial-N`: "
          "bench/fixtures/vap-trivial-N, a ValidatingAdmissionPolicy with N validations like "
          "issue 36's trivial one." + (f" `baseline-*`: {args.baseline}." if args.baseline else "")
          + "\n",
          table(["server", "body", "k instructions per review"], rows) + "\n",
          table(["ratio", "value"], ratios) + "\n"]
    if failed:
        md.append(f"**{failed} requests failed.**\n")
    SECTION_FAILURES.append(failed)
    return md


def alternating_rounds(oha, servers, bodies, rounds):
    """Warms every server up on every body (a tenth of its requests), then runs `rounds` rounds
    of c=16 in which each server takes its turn on each body, so that the machine's drift falls
    on all. `bodies` maps a name to (review file, requests per run, HTTP/2 on one connection
    or HTTP/1.1 on 16); returns the oha results by (server name, body name)."""
    runs = {(server.name, name): [] for server in servers for name in bodies}
    for path, n, h2 in bodies.values():
        for server in servers:
            oha.run(server, "/validate", path, max(256, n // 10), 16, h2=h2)
    for _ in range(rounds):
        for name, (path, n, h2) in bodies.items():
            for server in servers:
                r = oha.run(server, "/validate", path, n, 16, h2=h2)
                runs[(server.name, name)].append(r)
                log(f"{server.name} {name} c=16: {r['rps']:.0f} req/s, "
                    f"{r['cpu_per_1000']:.4f} CPU s / 1000, failed {r['failed']}")
    return runs


def small_pod(args, oha, workdir, certs, scale):
    """The floor and Pod Security restricted + four CEL validations on a small Pod: both servers
    run side by side and take turns, SMALL_POD_ROUNDS rounds of c=16 each, so that the machine's
    drift falls on both; the ratio is of the medians."""
    import statistics

    servers = [portcullis(args.portcullis, "small-floor", [workdir / "empty"], workdir, certs),
               portcullis(args.portcullis, "small-pss-cel", SMALL_POD_POLICIES, workdir, certs)]
    if args.baseline:
        servers += [portcullis(args.baseline, "baseline-small-floor", [workdir / "empty"],
                               workdir, certs),
                    portcullis(args.baseline, "baseline-small-pss-cel", SMALL_POD_POLICIES,
                               workdir, certs)]
    for server in servers:
        RUNNING.append(server.start())
    n = max(1000, int(20000 * scale))
    transports = {"HTTP/1.1": False}
    if os.environ.get("BENCH_ROUNDS_H2", "1") != "0":
        transports["HTTP/2"] = True
    by_body = alternating_rounds(oha, servers, {t: (SMALL_POD_BODY, n, h2)
                                                for t, h2 in transports.items()}, SMALL_POD_ROUNDS)
    for server in servers:
        server.stop()
        RUNNING.remove(server)
    failed = sum(r["failed"] for rs in by_body.values() for r in rs)
    size = SMALL_POD_BODY.stat().st_size
    md = ["## Small Pod: Pod Security restricted + four CEL validations\n",
          f"`/validate`, {SMALL_POD_BODY.name} ({size / 1024:.1f} KiB review), c=16, {n} requests "
          f"per round, {SMALL_POD_ROUNDS} rounds, the servers in turn; HTTP/1.1 on 16 connections"
          + (" and HTTP/2 on one connection with 16 streams" if "HTTP/2" in transports else "")
          + ". `small-pss-cel`: tests/fixtures/bench/policies/pod-security.yaml (restricted) and "
          "bench/fixtures/vap-small (a ValidatingAdmissionPolicy with four validations)."
          + (f" `baseline-*`: {args.baseline}." if args.baseline else "") + "\n"]
    for transport in transports:
        runs = {name: rs for (name, body), rs in by_body.items() if body == transport}
        median = lambda name, key: statistics.median(r[key] for r in runs[name])  # noqa: E731
        rows = []
        for name in runs:
            rows.append([name, median(name, "rps"), median(name, "cpu_per_1000") * 1000,
                         " / ".join(f"{r['rps']:.0f}" for r in runs[name]),
                         sum(r["failed"] for r in runs[name])])
        md.append(f"{transport}:\n")
        md.append(table(["server", "median req/s", "median CPU ms / 1000", "req/s per round",
                         "failed"], rows) + "\n")
        md.append(table(["ratio", "value"], [
            ["small-pss-cel / floor throughput (medians)",
             median("small-pss-cel", "rps") / median("small-floor", "rps")],
            ["floor / small-pss-cel CPU per review (medians)",
             median("small-floor", "cpu_per_1000") / median("small-pss-cel", "cpu_per_1000")],
        ] + ([
            ["small-pss-cel / baseline-small-pss-cel throughput (medians)",
             median("small-pss-cel", "rps") / median("baseline-small-pss-cel", "rps")],
            ["baseline-small-pss-cel / small-pss-cel CPU per review (medians)",
             median("baseline-small-pss-cel", "cpu_per_1000")
             / median("small-pss-cel", "cpu_per_1000")],
        ] if args.baseline else [])) + "\n")
    if failed:
        md.append(f"**{failed} requests failed.**\n")
    SECTION_FAILURES.append(failed)
    return md


def rounds(args, oha, workdir, certs, scale):
    """The 10 KB Pod and the ConfigMap, each against the floor, the standard set (with the VAP)
    and the Go peer, and, with --baseline, that build's floor and standard set: all run side by
    side and take turns, ROUNDS rounds of c=16 per body, so that the machine's drift falls on
    all; the ratios are of the medians."""
    import statistics

    empty = workdir / "empty"
    standard = [STANDARD_POLICIES, VAP]
    servers = [portcullis(args.portcullis, "floor", [empty], workdir, certs),
               portcullis(args.portcullis, "standard", standard, workdir, certs)]
    if args.baseline:
        servers += [portcullis(args.baseline, "baseline-floor", [empty], workdir, certs),
                    portcullis(args.baseline, "baseline-standard", standard, workdir, certs)]
    if args.go_webhook:
        servers.append(go_peer(args.go_webhook, workdir, certs))
    for server in servers:
        RUNNING.append(server.start())
    counts = {body: max(1000, int(n * scale)) for body, n in ROUND_REQUESTS.items()}
    # HTTP/1.1 on 16 connections, and HTTP/2 on one connection as the kube-apiserver calls
    # webhooks (client-go's transport negotiates h2 and multiplexes its requests).
    bodies = {body: (BODIES[body], n, False) for body, n in counts.items()}
    if ROUNDS_H2:
        bodies.update({f"{body} (h2)": (BODIES[body], n, True) for body, n in counts.items()})
    runs = alternating_rounds(oha, servers, bodies, ROUNDS)
    for server in servers:
        server.stop()
        RUNNING.remove(server)
    failed = sum(r["failed"] for rs in runs.values() for r in rs)
    median = lambda name, body, key: statistics.median(r[key] for r in runs[(name, body)])  # noqa: E731
    md = ["## Alternating rounds: the 10 KB Pod and the ConfigMap\n",
          f"`/validate`, c=16, {' and '.join(f'{n} requests of {b}' for b, n in counts.items())} "
          f"per round, {ROUNDS} rounds, the servers in turn; each body over HTTP/1.1 on 16 "
          "connections and, marked `(h2)`, over HTTP/2 on one connection carrying 16 requests "
          "at a time (as the kube-apiserver calls webhooks). `standard`: "
          "tests/fixtures/bench/policies and bench/fixtures/vap."
          + (f" `baseline-*`: {args.baseline}." if args.baseline else "") + "\n"]
    rows = []
    for (name, body), rs in runs.items():
        rows.append([name, body, median(name, body, "rps"),
                     median(name, body, "cpu_per_1000") * 1000,
                     " / ".join(f"{r['rps']:.0f}" for r in rs),
                     " / ".join(f"{r['cpu_per_1000'] * 1000:.1f}" for r in rs),
                     sum(r["failed"] for r in rs)])
    md.append(table(["server", "body", "median req/s", "median CPU ms / 1000", "req/s per round",
                     "CPU ms / 1000 per round", "failed"], rows) + "\n")
    ratios = []
    names = [server.name for server in servers]
    for body in bodies:
        pairs = [("standard", "floor"), ("baseline-standard", "baseline-floor"),
                 ("standard", "baseline-standard"), ("floor", "baseline-floor"),
                 ("standard", "go-peer")]
        for a, b in pairs:
            if a in names and b in names:
                ratios.append([f"{body}: {a} / {b} throughput",
                               median(a, body, "rps") / median(b, body, "rps")])
                ratios.append([f"{body}: {b} / {a} CPU per review",
                               median(b, body, "cpu_per_1000") / median(a, body, "cpu_per_1000")])
    md.append(table(["ratio (medians)", "value"], ratios) + "\n")
    if failed:
        md.append(f"**{failed} requests failed.**\n")
    SECTION_FAILURES.append(failed)
    return md


def go_duration_us(text):
    """A Go duration as gator prints it (`833.309µs`, `5.02ms`, `1m2.5s`), in µs."""
    import re

    units = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6, "m": 6e7, "h": 3.6e9}
    parts = re.findall(r"([0-9.]+)(ns|us|µs|μs|ms|s|m|h)", text or "")
    return sum(float(number) * units[unit] for number, unit in parts) if parts else None


def gator_bench(gator, files, iterations):
    """One `gator bench` run (Rego engine, sequential, with --memory) of `files`: its JSON result
    for the Rego engine, with `cpu_seconds`, the process's user + system CPU (rusage)."""
    argv = [gator, "bench", "--engine", "rego", "--iterations", str(iterations), "--memory",
            "--output", "json"]
    for f in files:
        argv += ["--filename", str(f)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"gator bench failed ({run.returncode}): {run.stderr.strip()}")
    # Warnings (fewer than 1000 iterations) come before the JSON.
    results = json.loads(run.stdout[run.stdout.index("["):])
    result = next(r for r in results if r.get("engine") == "rego")
    result["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def gatekeeper(args, oha, workdir, certs, scale):
    """Gatekeeper's ConstraintTemplates (issue 34): the 10 KB Pod against the floor, the VAP and
    the template + constraint making the same checks, side by side in alternating rounds of c=16
    (HTTP/1.1, and HTTP/2 unless BENCH_ROUNDS_H2=0); after each round, `gator bench` of the same
    template, constraint and Pod in-process, whose CPU per review is its process's CPU over
    GATOR_ITERATIONS reviews less that of a GATOR_BASE_ITERATIONS run (start, setup, warm-up)."""
    import statistics

    body = BODIES["pod-10kb"]
    check = subprocess.run([args.portcullis, "check", "--policies", GATEKEEPER, body],
                           capture_output=True, text=True)
    if check.returncode != 0 or "ALLOWED" not in check.stdout:
        reason = (check.stderr or check.stdout).strip().splitlines()
        return ["## Gatekeeper: a Rego ConstraintTemplate beside the same checks as a VAP\n",
                "Skipped: `portcullis check` does not admit the 10 KB Pod under "
                f"tests/fixtures/bench/gatekeeper (`{reason[-1] if reason else check.returncode}`).\n"]
    empty = workdir / "empty"
    servers = [portcullis(args.portcullis, "floor", [empty], workdir, certs),
               portcullis(args.portcullis, "vap", [VAP], workdir, certs),
               portcullis(args.portcullis, "gatekeeper", [GATEKEEPER], workdir, certs)]
    baseline_note = ""
    if args.baseline:
        check = subprocess.run([args.baseline, "check", "--policies", GATEKEEPER, body],
                               capture_output=True, text=True)
        if check.returncode == 0 and "ALLOWED" in check.stdout:
            servers.append(portcullis(args.baseline, "baseline-gatekeeper", [GATEKEEPER],
                                      workdir, certs))
            baseline_note = f" `baseline-gatekeeper`: {args.baseline}."
        else:
            baseline_note = f" The baseline ({args.baseline}) does not admit the Pod under the template: not run."
    for server in servers:
        RUNNING.append(server.start())
    n = max(1000, int(GATEKEEPER_REQUESTS * scale))
    transports = {"HTTP/1.1": False}
    if ROUNDS_H2:
        transports["HTTP/2"] = True
    bodies = {t: (body, n, h2) for t, h2 in transports.items()}
    runs = {(server.name, t): [] for server in servers for t in bodies}
    gator_runs, gator_base = [], None
    if args.gator:
        # The object alone, as gator reads its inputs (it reviews every non-policy document).
        pod = workdir / "gator" / "pod-10kb.json"
        pod.parent.mkdir(exist_ok=True)
        pod.write_text(json.dumps(json.loads(body.read_text())["request"]["object"]))
        gator_files = [GATEKEEPER / "template.yaml", GATEKEEPER / "constraint.yaml", pod]
        gator_n = max(GATOR_BASE_ITERATIONS * 2, int(GATOR_ITERATIONS * scale))
        gator_base = gator_bench(args.gator, gator_files, GATOR_BASE_ITERATIONS)
        if gator_base["violationCount"]:
            raise SystemExit("gator bench: the 10 KB Pod violates the bench template")
    for path, count, h2 in bodies.values():
        for server in servers:
            oha.run(server, "/validate", path, max(256, count // 10), 16, h2=h2)
    for _ in range(GATEKEEPER_ROUNDS):
        for t, (path, count, h2) in bodies.items():
            for server in servers:
                r = oha.run(server, "/validate", path, count, 16, h2=h2)
                runs[(server.name, t)].append(r)
                log(f"{server.name} {t} c=16: {r['rps']:.0f} req/s, "
                    f"{r['cpu_per_1000']:.4f} CPU s / 1000, failed {r['failed']}")
        if args.gator:
            g = gator_bench(args.gator, gator_files, gator_n)
            g["cpu_us_per_review"] = ((g["cpu_seconds"] - gator_base["cpu_seconds"]) * 1e6
                                      / (gator_n - GATOR_BASE_ITERATIONS))
            gator_runs.append(g)
            log(f"gator bench {gator_n} reviews: {g['cpu_us_per_review']:.0f} µs CPU per review, "
                f"mean {g['latencies']['mean']}")
    for server in servers:
        server.stop()
        RUNNING.remove(server)
    failed = sum(r["failed"] for rs in runs.values() for r in rs)
    median = lambda name, t, key: statistics.median(r[key] for r in runs[(name, t)])  # noqa: E731
    cpu = lambda name, t: median(name, t, "cpu_per_1000") * 1000  # noqa: E731
    md = ["## Gatekeeper: a Rego ConstraintTemplate beside the same checks as a VAP\n",
          f"`/validate` with the 10 KB Pod, c=16, {n} requests per round, {GATEKEEPER_ROUNDS} rounds, "
          "the servers in turn; HTTP/1.1 on 16 connections"
          + (" and HTTP/2 on one connection carrying 16 requests at a time" if ROUNDS_H2 else "")
          + ". `vap`: bench/fixtures/vap alone (10 CEL validations); `gatekeeper`: "
          "tests/fixtures/bench/gatekeeper alone (a ConstraintTemplate whose Rego makes the same "
          "10 checks, and its constraint); `floor`: no policies. Server CPU per review in µs "
          "(ms per 1,000)." + baseline_note + "\n"]
    rows = []
    for (name, t), rs in runs.items():
        rows.append([name, t, median(name, t, "rps"), cpu(name, t),
                     " / ".join(f"{r['rps']:.0f}" for r in rs),
                     " / ".join(f"{r['cpu_per_1000'] * 1000:.1f}" for r in rs),
                     sum(r["failed"] for r in rs)])
    md.append(table(["server", "transport", "median req/s", "median CPU µs / review",
                     "req/s per round", "CPU µs / review per round", "failed"], rows) + "\n")
    ratios = []
    for t in bodies:
        ratios += [
            [f"{t}: gatekeeper / vap CPU per review", cpu("gatekeeper", t) / cpu("vap", t)],
            [f"{t}: gatekeeper / vap CPU per review above the floor",
             (cpu("gatekeeper", t) - cpu("floor", t)) / max(cpu("vap", t) - cpu("floor", t), 1e-9)],
            [f"{t}: gatekeeper / floor throughput", median("gatekeeper", t, "rps") / median("floor", t, "rps")],
            [f"{t}: vap / floor throughput", median("vap", t, "rps") / median("floor", t, "rps")],
        ]
        if ("baseline-gatekeeper", t) in runs:
            ratios.append([f"{t}: baseline-gatekeeper / gatekeeper CPU per review",
                           cpu("baseline-gatekeeper", t) / cpu("gatekeeper", t)])
    if gator_runs:
        gator_cpu = statistics.median(g["cpu_us_per_review"] for g in gator_runs)
        for t in bodies:
            ratios += [
                [f"{t}: gator bench CPU per review / gatekeeper server CPU per review",
                 gator_cpu / cpu("gatekeeper", t)],
                [f"{t}: gator bench CPU per review / gatekeeper server CPU per review above the floor",
                 gator_cpu / max(cpu("gatekeeper", t) - cpu("floor", t), 1e-9)],
            ]
    md.append(table(["ratio (medians)", "value"], ratios) + "\n")
    if gator_runs:
        version = subprocess.run([args.gator, "--version"], capture_output=True, text=True).stdout.strip()
        md.append(f"`gator bench --engine rego --memory` ({version.split(' (')[0]}): the same template, "
                  f"constraint and Pod (the object alone, as gator reads it), {gator_n} reviews per "
                  f"round, one review at a time, in one process; CPU per review = (its CPU − the "
                  f"CPU of a {GATOR_BASE_ITERATIONS}-review run: {gator_base['cpu_seconds']:.2f} s) / "
                  f"{gator_n - GATOR_BASE_ITERATIONS}. Its own figures are wall time per review "
                  "(mean, p50, p99) and Go's allocations per review.\n")
        md.append(table(["round", "CPU µs / review", "mean µs", "p50 µs", "p99 µs", "reviews/s",
                         "allocs / review", "bytes / review", "violations"],
                        [[i + 1, g["cpu_us_per_review"], go_duration_us(g["latencies"]["mean"]),
                          go_duration_us(g["latencies"]["p50"]), go_duration_us(g["latencies"]["p99"]),
                          g["reviewsPerSecond"], (g.get("memoryStats") or {}).get("allocsPerReview"),
                          (g.get("memoryStats") or {}).get("bytesPerReview"), g["violationCount"]]
                         for i, g in enumerate(gator_runs)]) + "\n")
        md.append(f"gator bench, median of the rounds: {gator_cpu:.0f} µs of CPU per review.\n")
    else:
        md.append("`gator bench` skipped: no gator binary (`--gator`; bench/run.sh builds it with "
                  "e2e/build-gator.sh when Go is present).\n")
    if failed:
        md.append(f"**{failed} requests failed.**\n")
    SECTION_FAILURES.append(failed)
    return md


def denials(server):
    """Reviews answered allowed=false so far (portcullis_admission_requests_total)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{server.admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("portcullis_admission_requests_total{") and 'allowed="false"' in line)


def poll_readyz(server, stop, latencies):
    """Asks /readyz every 20 ms until `stop` is set, recording each answer's time in ms."""
    url = f"http://127.0.0.1:{server.admin}/readyz"
    while not stop.is_set():
        started = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
            latencies.append((time.monotonic() - started) * 1000)
        except (urllib.error.URLError, ConnectionError, OSError):
            latencies.append(float("inf"))
        stop.wait(0.02)


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def isolation(args, oha, workdir, certs, scale):
    """Cheap requests and probes while heavy ones run: a ConfigMap review (no rule matches it)
    at a fixed rate and /readyz every 20 ms, first alone, then with HEAVY_IN_FLIGHT requests
    under bench/fixtures/heavy kept in flight."""
    import threading

    # The heavy policy alone: a denial of a heavy review is then an evaluation error (a CEL
    # limit hit), not one of the standard set's rules, which the fan-out Pod breaks.
    server = portcullis(args.portcullis, "isolation", [HEAVY_POLICY], workdir, certs)
    RUNNING.append(server.start())
    n_cheap = max(100, int(CHEAP_QPS * 10 * min(scale, 1)))
    rows = []
    for condition in ("idle", f"{HEAVY_IN_FLIGHT} heavy in flight"):
        heavy, denied_before = None, denials(server)
        if condition != "idle":
            seconds = n_cheap / CHEAP_QPS + 5
            heavy = subprocess.Popen(
                [args.oha, "--no-tui", "--output-format", "json", "-z", f"{seconds:.0f}s",
                 "-c", str(HEAVY_IN_FLIGHT), "-m", "POST", "-T", "application/json",
                 "-D", str(HEAVY_BODY), "--cacert", str(oha.ca), "-t", "10s",
                 f"https://127.0.0.1:{server.port}/validate"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            time.sleep(1.0)  # let the heavy requests fill the server first
        stop, readyz = threading.Event(), []
        poller = threading.Thread(target=poll_readyz, args=(server, stop, readyz))
        poller.start()
        cheap = oha.run(server, "/validate", BODIES["configmap"], n_cheap, 1, qps=CHEAP_QPS)
        stop.set()
        poller.join()
        heavy_row = ["", "", "", ""]
        if heavy:
            out, err = heavy.communicate()
            report = summarize(json.loads(out), 0)
            answered = sum(report["statuses"].values())
            heavy_row = [answered, int(denials(server) - denied_before), report["rps"], report["p50"]]
        rows.append([condition, cheap["p50"], cheap["p99"], cheap["max"], cheap["failed"],
                     quantile(readyz, 0.5), quantile(readyz, 0.99), max(readyz, default=None),
                     *heavy_row])
        log(f"isolation {condition}: configmap p99 {cheap['p99']:.2f} ms, readyz max "
            f"{max(readyz, default=0):.2f} ms")
    server.stop()
    RUNNING.remove(server)
    return [
        "## Isolation: cheap requests beside heavy ones (Portcullis)\n",
        f"bench/fixtures/heavy alone (a triple comprehension over a Pod's containers)."
        f" A ConfigMap review (no rule matches it) at {CHEAP_QPS} req/s, c=1, "
        f"{n_cheap} requests (oha `-q` with latency correction), and `/readyz` asked every 20 ms; "
        f"first alone, then while oha keeps {HEAVY_IN_FLIGHT} reviews of "
        "bench/fixtures/pod-44-containers-review.json (44 containers: about 85,000 innermost "
        "iterations, within the apiserver's cost limit) in flight. `heavy` columns: answers "
        "(any status) during the run, how many were denials (the policy admits the Pod: a "
        "denial is a CEL limit hit), their rate and p50.\n",
        table(["condition", "ConfigMap p50 ms", "p99 ms", "max ms", "failed", "/readyz p50 ms",
               "p99 ms", "max ms", "heavy answered", "heavy denied", "heavy req/s", "heavy p50 ms"], rows) + "\n",
    ]


def reload_under_load(server, oha, folder, workdir, rps):
    n = max(2000, int(rps * 6))
    proc = oha.start(server, "/validate", BODIES["pod-10kb"], n, 16)
    time.sleep(1.5)
    before = reload_successes(server)
    staged = workdir / "policies-next.yaml"
    write_policies(staged, 1000, 2)
    started = time.monotonic()
    os.replace(staged, folder / "policies.yaml")
    reload_ms = None
    while time.monotonic() - started < 60:
        now = reload_successes(server)
        if now["success"] > before["success"]:
            reload_ms = (time.monotonic() - started) * 1000
            break
        time.sleep(0.005)
    failures = now["failure"] - before["failure"]
    overlapped = proc.poll() is None
    r = Oha.finish(proc, n)
    if reload_ms is None:
        log("reload: no successful reload within 60 s")
    elif not overlapped:
        log("reload: the load ended before the reload completed; raise BENCH_SCALE")
    return [reload_ms, failures, n, r["rps"], r["p99"], r["max"], r["failed"]]


if __name__ == "__main__":
    sys.exit(main())
