#!/usr/bin/env python3
"""The order of the `portcullis` binary's code: the functions `serve` runs, placed together.

The kernel maps a binary's code 64 KB at a time around each page it touches (fault-around),
so the few thousand functions `serve` runs, spread over 14 MB of code, kept about 10 MiB of it
resident. build.rs gives the linker (rust-lld) link/text-order.txt as a symbol ordering file:
the functions listed there come first, together.

  generate --binary BIN [--out FILE]   runs BIN's `serve` under ptrace in a few policy sets,
                                       answers reviews over HTTP/1.1 and HTTP/2, and writes
                                       the functions that ran in the order they first ran,
                                       policy set after policy set
  check --binary BIN [--order FILE] [--min F] [--max-spread S]
                                       fails when fewer than F (0.9) of the listed names are in
                                       BIN (symbol names change with the compiler and the crate
                                       graph, and a stale list orders less), or when the ones
                                       found span over S (1.2) times their own size (the linker
                                       did not place them together)

`generate` puts an int3 on the first byte of every function of BIN (from `nm`), restores the
byte when it is hit and records the function; it needs ptrace of a child (Linux, x86_64),
`nm` and `curl` with HTTP/2. BIN is a release build (`cargo build --release`).
"""
import argparse
import ctypes
import http.client
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ORDER = os.path.join(ROOT, "link", "text-order.txt")

# Policy sets `serve` is traced with, in turn: the benchmarks' standard set (native rules, Pod
# Security, a ValidatingAdmissionPolicy), the built-in defaults and a Gatekeeper template. Each
# adds the functions the ones before it did not run, in the order they first ran, so the code a
# policy set runs lies close together (names sorted instead spread the standard set's code over
# the others': 0.8 MiB more idle RSS).
POLICY_SETS = [
    ["tests/fixtures/bench/policies", "bench/fixtures/vap"],
    [],
    ["tests/fixtures/bench/gatekeeper"],
]
REVIEWS = [
    "bench/fixtures/pod-small-review.json",
    "tests/fixtures/bench/pod-10kb.json",
    "bench/fixtures/configmap-review.json",
]

PTRACE_TRACEME, PTRACE_PEEKTEXT, PTRACE_POKETEXT = 0, 1, 4
PTRACE_CONT, PTRACE_GETREGS, PTRACE_SETREGS, PTRACE_SETOPTIONS = 7, 12, 13, 0x4200
PTRACE_O_TRACECLONE, PTRACE_O_EXITKILL = 0x8, 0x100000
WAIT_ALL_THREADS = 0x40000000
INT3 = 0xCC

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]


class Registers(ctypes.Structure):
    """x86_64 `struct user_regs_struct`."""
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss "
        "fs_base gs_base ds es fs gs").split()]


def sized_functions(binary):
    """(offset in the file's image, size, name) of every function symbol with a size."""
    listing = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True,
                             text=True, check=True).stdout
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] in "tTwW" and int(fields[1], 16) > 0:
            yield int(fields[0], 16), int(fields[1], 16), fields[3]


def code_symbols(binary):
    """Offset in the file's image -> name, one per function (the first alias)."""
    functions = {}
    for offset, _, name in sized_functions(binary):
        functions.setdefault(offset, name)
    return functions


def peek(pid, address):
    ctypes.set_errno(0)
    word = libc.ptrace(PTRACE_PEEKTEXT, pid, ctypes.c_void_p(address), None)
    if word == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"PTRACE_PEEKTEXT {address:#x}")
    return word & 0xFFFFFFFFFFFFFFFF


def poke_byte(pid, address, byte):
    word = (peek(pid, address) & ~0xFF) | byte
    if libc.ptrace(PTRACE_POKETEXT, pid, ctypes.c_void_p(address), ctypes.c_void_p(word)) != 0:
        raise OSError(ctypes.get_errno(), f"PTRACE_POKETEXT {address:#x}")


def image_base(pid, binary):
    path = os.path.realpath(binary)
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == path and fields[2] == "00000000":
                return int(fields[0].split("-")[0], 16)
    raise RuntimeError(f"{binary} is not mapped in process {pid}")


def wait_ready(admin_port, deadline):
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=5)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def drive(pid, port, admin_port, failures):
    """Sends each review to /validate and /mutate over HTTP/1.1 and HTTP/2, reads the admin
    endpoints, then interrupts the server (its graceful shutdown runs too)."""
    try:
        if not wait_ready(admin_port, time.monotonic() + 120):
            failures.append("serve did not become ready")
            return
        context = ssl._create_unverified_context()
        for review in REVIEWS:
            with open(os.path.join(ROOT, review), "rb") as file:
                body = file.read()
            for path in ("/validate", "/mutate"):
                for _ in range(2):
                    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context,
                                                             timeout=60)
                    connection.request("POST", path, body, {"Content-Type": "application/json"})
                    answer = connection.getresponse()
                    answer.read()
                    if answer.status != 200:
                        failures.append(f"{path} {review}: HTTP {answer.status}")
                over_h2 = subprocess.run(
                    ["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                     "-H", "Content-Type: application/json", "--data-binary",
                     f"@{os.path.join(ROOT, review)}", f"https://127.0.0.1:{port}{path}"],
                    capture_output=True, text=True)
                if over_h2.stdout != "200 2":
                    failures.append(f"{path} {review} over HTTP/2: {over_h2.stdout!r}")
        for path in ("/metrics", "/healthz"):
            connection = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=10)
            connection.request("GET", path)
            connection.getresponse().read()
    except OSError as error:
        failures.append(str(error))
    finally:
        os.kill(pid, signal.SIGINT)


def trace_serve(binary, functions, certs, policies, log):
    """Runs `serve` with `policies` under ptrace, with a breakpoint on each of `functions`
    (offset -> name); returns the names of those that ran, in the order they first ran."""
    port = 30000 + (os.getpid() * 7 + len(policies)) % 20000
    argv = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--admin-listen",
            f"127.0.0.1:{port + 1}", "--tls-dir", certs, "--no-cluster"]
    for folder in policies:
        argv += ["--policies", os.path.join(ROOT, folder)]
    pid = os.fork()
    if pid == 0:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        libc.ptrace(PTRACE_TRACEME, 0, None, None)
        os.execv(binary, argv)
    os.waitpid(pid, 0)  # stopped at exec, the binary mapped
    libc.ptrace(PTRACE_SETOPTIONS, pid, None,
                ctypes.c_void_p(PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL))
    base = image_base(pid, binary)
    original = {}
    for offset in functions:
        address = base + offset
        original[address] = peek(pid, address) & 0xFF
        poke_byte(pid, address, INT3)
    failures = []
    driver = threading.Thread(target=drive, args=(pid, port, port + 1, failures), daemon=True)
    driver.start()
    libc.ptrace(PTRACE_CONT, pid, None, None)
    ran, first_ran, registers, threads = set(), [], Registers(), {pid}
    while threads:
        try:
            tid, status = os.waitpid(-1, WAIT_ALL_THREADS)
        except ChildProcessError:
            break
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            threads.discard(tid)
            continue
        if not os.WIFSTOPPED(status):
            continue
        threads.add(tid)
        signal_number, deliver = os.WSTOPSIG(status), 0
        if signal_number == signal.SIGTRAP and status >> 16 == 0:
            libc.ptrace(PTRACE_GETREGS, tid, None, ctypes.byref(registers))
            address = registers.rip - 1
            if address in original:
                if address not in ran:
                    ran.add(address)
                    first_ran.append(address)
                    poke_byte(tid, address, original[address])
                registers.rip = address
                libc.ptrace(PTRACE_SETREGS, tid, None, ctypes.byref(registers))
            else:
                deliver = signal_number
        elif signal_number not in (signal.SIGTRAP, signal.SIGSTOP):
            deliver = signal_number
        libc.ptrace(PTRACE_CONT, tid, None, ctypes.c_void_p(deliver))
    driver.join()
    if failures:
        raise RuntimeError(f"serve with {policies or 'its defaults'}: " + "; ".join(failures))
    return [functions[address - base] for address in first_ran]


def generate(binary, out):
    names, listed = [], set()
    functions = code_symbols(binary)
    with tempfile.TemporaryDirectory() as work:
        certs = os.path.join(work, "certs")
        subprocess.run([binary, "certs", "--out", certs, "--host", "127.0.0.1"], check=True,
                       capture_output=True)
        with open(os.path.join(work, "serve.log"), "wb") as log:
            for policies in POLICY_SETS:
                ran = trace_serve(binary, functions, certs, policies, log)
                print(f"serve with {policies or 'its defaults'}: {len(ran)} functions ran",
                      file=sys.stderr)
                names += [name for name in ran if name not in listed]
                listed.update(ran)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as file:
        file.write("# Functions `portcullis serve` runs, placed first in the binary's code by the\n"
                   "# linker (build.rs). Generated by scripts/text-order.py; `make text-order`.\n")
        for name in names:
            file.write(name + "\n")
    print(f"{len(names)} functions written to {out}", file=sys.stderr)


def listed_names(order):
    with open(order) as file:
        return [line.strip() for line in file if line.strip() and not line.startswith("#")]


def check(binary, order, minimum, max_spread):
    listed = listed_names(order)
    placed = {}
    for offset, size, name in sized_functions(binary):
        placed.setdefault(name, (offset, size))
    found = [placed[name] for name in listed if name in placed]
    share = len(found) / len(listed) if listed else 0.0
    shown = os.path.relpath(order, ROOT)
    print(f"{len(found)} of {len(listed)} functions of {shown} are in {binary} ({share:.1%})")
    if share < minimum:
        print(f"the list is stale (under {minimum:.0%}): run `make text-order` and commit {shown}",
              file=sys.stderr)
        return 1
    # Placed together, the listed functions span little more than their own sizes (alignment);
    # left where the crate graph puts them, about three times as much.
    span = max(offset + size for offset, size in found) - min(offset for offset, _ in found)
    spread = span / sum(size for _, size in found)
    print(f"they span {span / 1e6:.2f} MB, {spread:.2f}x their own size")
    if spread > max_spread:
        print(f"the linker did not place them together (over {max_spread}x): build.rs passes "
              f"{shown} to lld unless PORTCULLIS_TEXT_ORDER=off", file=sys.stderr)
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["generate", "check"])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--order", "--out", dest="order", default=DEFAULT_ORDER)
    parser.add_argument("--min", type=float, default=0.9)
    parser.add_argument("--max-spread", type=float, default=1.2)
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    if args.command == "generate":
        generate(binary, args.order)
        return 0
    return check(binary, args.order, args.min, args.max_spread)


if __name__ == "__main__":
    sys.exit(main())
