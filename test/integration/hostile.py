#!/usr/bin/env python3
"""hostile.py BINARY - the hostile-input suite behind test_hostile.sh.

Starts `agentsched serve` on a free port, sends every case of
test/integration/data/hostile/*.json (a request and what the answer must
be), checks after each that /healthz still answers 200, then checks the
slowloris deadline, the server's RSS against the bound below after two
passes of every case (LeakSanitizer checks the exit in the ASan build) and that no request took
longer than MAX_CASE_S.

A case: {"name", "method", "path", "headers": {}, "body": "text" |
"body_hex": "..." | "gen": NAME with "args": {}, "chunked": bool,
"expect": {"status": [codes] | "closed", "names": "text the JSON error
must contain", "error_member": "Error" (a protocol member that must be a
non-empty string), "header": "Name", "mhd_html": true (a 414/431 from
libmicrohttpd itself, in its HTML)}}. A 4xx/5xx answer must be a JSON
object with a non-empty "error" (or the protocol's own error member).
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "test", "integration", "data", "hostile")
CLUSTER = os.path.join(ROOT, "test", "unit", "data", "extender", "cluster.yaml")
MAX_BODY = 16 << 20          # the server's default --max-body
BUDGET = 512 << 20           # the server's request memory budget (http.c)
HTTP_TIMEOUT_S = 2           # --http-timeout given to the server below
HTTP_THREADS = 2             # --http-threads given to the server below
MAX_CASE_S = 10.0            # no single case may take longer
SLOWLORIS_CUT_S = 3 * HTTP_TIMEOUT_S + 2  # deadline (2x timeout) plus slack

FAILS = 0
CHECKS = 0


def ok(what):
    global CHECKS
    CHECKS += 1
    print("ok   - " + what, flush=True)


def fail(what):
    global CHECKS, FAILS
    CHECKS += 1
    FAILS += 1
    print("FAIL - " + what, flush=True)


# ---- generators for inputs too big to keep as files -----------------------
def gen_nest(a):
    d = a.get("depth", 100000)
    return ("[" * d + "]" * d).encode() if a.get("array", True) else \
        ('{"a":' * d + "1" + "}" * d).encode()


def gen_nest_in(a):
    d = a.get("depth", 100000)
    return a["prefix"].encode() + b"[" * d + b"]" * d + a["suffix"].encode()


def gen_nodenames(a):
    n = a.get("count", 100000)
    names = ",".join('"n-%d"' % i for i in range(n))
    pod = json.load(open(os.path.join(ROOT, a.get("pod_from",
        "test/unit/data/extender/filter/names_mixed/request.json"))))["Pod"]
    return ('{"Pod":%s,"NodeNames":[%s]}' % (json.dumps(pod), names)).encode()


def gen_zeros(a):
    return b"0" * a["size"]


def gen_long_string(a):
    return a["prefix"].encode() + b"x" * a["size"] + a["suffix"].encode()


def gen_repeat(a):
    return a.get("prefix", "").encode() + a["item"].encode() * a["count"] + \
        a.get("suffix", "").encode()


def gen_many_pods(a):
    pod = {"metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return json.dumps({"pods": [pod] * a["count"]}).encode()


GENS = {"nest": gen_nest, "nest_in": gen_nest_in, "nodenames": gen_nodenames,
        "zeros": gen_zeros, "repeat": gen_repeat, "long_string": gen_long_string, "many_pods": gen_many_pods}


# ---- a minimal HTTP/1.1 client: the cases need bytes urllib will not send --
def recv_response(s, deadline):
    data = b""
    while b"\r\n\r\n" not in data:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionError, OSError):
            return None
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        return None
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "-1"))
    while n < 0 or len(body) < n:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionError, OSError):
            break
        if not chunk:
            break
        body += chunk
    return int(m.group(1)), headers, body[:n] if n >= 0 else body


def request(port, method, path, headers=None, body=b"", chunked=False, timeout=MAX_CASE_S + 20):
    """Returns (status or None when the server closed without answering,
    headers, body, seconds)."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    hdrs = {"Host": "127.0.0.1:%d" % port, "Connection": "close"}
    if body or method in ("POST", "PUT"):
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    if chunked:
        hdrs["Transfer-Encoding"] = "chunked"
    elif body or method in ("POST", "PUT"):
        hdrs.setdefault("Content-Length", str(len(body)))
    head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join(
        "%s: %s\r\n" % kv for kv in hdrs.items() if kv[1] is not None) + "\r\n"
    resp = None
    try:
        s.sendall(head.encode("latin-1"))
        if body:
            # The server may answer (413) from the headers alone: look first.
            s.settimeout(0.2)
            try:
                peek = s.recv(65536, socket.MSG_PEEK)
            except (socket.timeout, BlockingIOError):
                peek = None
            if not peek:
                s.settimeout(5)
                step = 1 << 20
                for i in range(0, len(body), step):
                    part = body[i:i + step]
                    if chunked:
                        part = b"%x\r\n" % len(part) + part + b"\r\n"
                    s.sendall(part)
                if chunked:
                    s.sendall(b"0\r\n\r\n")
    except (ConnectionError, OSError, socket.timeout):
        pass
    resp = recv_response(s, deadline)
    s.close()
    el = time.monotonic() - t0
    if resp is None:
        return None, {}, b"", el
    return resp[0], resp[1], resp[2], el


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return 0


def load_cases():
    cases = []
    for fn in sorted(glob.glob(os.path.join(DATA, "*.json"))):
        for c in json.load(open(fn)):
            c["_file"] = os.path.basename(fn)
            cases.append(c)
    return cases


def case_body(c):
    if "gen" in c:
        return GENS[c["gen"]](c.get("args", {}))
    if "body_hex" in c:
        return bytes.fromhex(c["body_hex"])
    b = c.get("body", "")
    return b if isinstance(b, bytes) else json.dumps(b).encode() if not isinstance(b, str) \
        else b.encode("utf-8", "surrogateescape")


def check_case(port, c):
    name = "%s: %s" % (c["_file"], c["name"])
    body = case_body(c)
    st, hd, rb, el = request(port, c.get("method", "POST"), c["path"], c.get("headers"), body,
                             c.get("chunked", False))
    exp = c["expect"]
    want = exp["status"]
    problems = []
    if want == "closed":
        if st is not None and not (400 <= st < 500):
            problems.append("answered %s, want the connection closed or a 4xx" % st)
    elif st not in want:
        problems.append("status %s, want %s" % (st, want))
    # libmicrohttpd answers what it refuses itself (431, 414) in HTML.
    mhd_own = exp.get("mhd_html") and st in (414, 431)
    if not mhd_own and (st is not None and st >= 400 and want != "closed"
                        or (st is not None and "error_member" in exp)):
        try:
            doc = json.loads(rb.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = None
            problems.append("answer is not JSON: %r" % rb[:120])
        if doc is not None:
            member = exp.get("error_member")
            if member:
                v = doc.get(member) if isinstance(doc, dict) else None
                if not (isinstance(v, str) and v) and not (isinstance(doc, dict) and doc.get("error")):
                    problems.append("no non-empty %s or error: %r" % (member, rb[:160]))
            elif not (isinstance(doc, dict) and isinstance(doc.get("error"), str) and doc["error"]):
                if not (isinstance(doc, dict) and (doc.get("Error") or doc.get("status"))):
                    problems.append("4xx answer without a JSON error: %r" % rb[:160])
            names = exp.get("names")
            if names and names.lower() not in rb.decode("utf-8", "replace").lower():
                problems.append("error does not name %r: %r" % (names, rb[:200]))
    if exp.get("header") and exp["header"].lower() not in hd:
        problems.append("no %s header" % exp["header"])
    if el > MAX_CASE_S:
        problems.append("took %.1f s (bound %.0f s)" % (el, MAX_CASE_S))
    if problems:
        fail("%s (%s %s): %s" % (name, c.get("method", "POST"), c["path"], "; ".join(problems)))
    else:
        ok("%s -> %s in %.3f s" % (name, st if st is not None else "closed", el))
    return el


def slowloris(port):
    """Headers, then one body byte a second: the whole-request deadline
    must close it though the idle timeout never fires, and other clients
    must be answered meanwhile."""
    result = {}

    def trickle():
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        t0 = time.monotonic()
        closed = None
        for _ in range(60):
            try:
                s.sendall(b" ")
                s.settimeout(1.0)
                got = s.recv(4096)
                if not got or got.startswith(b"HTTP/1.1 "):
                    closed = time.monotonic() - t0
                    break
            except socket.timeout:
                continue
            except (ConnectionError, OSError):
                closed = time.monotonic() - t0
                break
        s.close()
        result["closed"] = closed

    th = threading.Thread(target=trickle)
    th.start()
    served = worst = 0
    while th.is_alive():
        st, _, _, el = request(port, "GET", "/healthz", timeout=5)
        served += st == 200
        worst = max(worst, el)
        time.sleep(0.25)
    th.join()
    cut = result.get("closed")
    if cut is not None and cut <= SLOWLORIS_CUT_S:
        ok("slowloris (1 byte/s body) closed after %.1f s (bound %d s)" % (cut, SLOWLORIS_CUT_S))
    else:
        fail("slowloris not closed within %d s (closed after %s)" % (SLOWLORIS_CUT_S, cut))
    if served > 0 and worst < 1.0:
        ok("%d /healthz answered during the slowloris, slowest %.3f s" % (served, worst))
    else:
        fail("during the slowloris: %d /healthz answered, slowest %.3f s" % (served, worst))


def start_server(binary, work, tag, extra):
    errpath = os.path.join(work, tag + ".err")
    env = dict(os.environ)
    # ASan's quarantine keeps freed memory resident: bound it so that RSS
    # measures the server, not the sanitizer.
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16:detect_leaks=1"
    proc = subprocess.Popen([binary, "serve", "--cluster", CLUSTER, "--listen", "127.0.0.1:0"]
                            + extra, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(errpath, "w"), env=env)
    for _ in range(300):
        m = re.search(r'msg="agentsched serving".* listen=[^ ]*:(\d+) ', open(errpath).read())
        if m:
            return proc, int(m.group(1)), errpath
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    fail("serve %s did not start" % tag)
    print(open(errpath).read())
    proc.kill()
    proc.wait()
    return None, None, errpath


def rate_limit(binary, work):
    """--placement-qps 1: a burst of 2 dry runs, then 429 with Retry-After
    and a JSON error naming the flag; other endpoints are not limited."""
    proc, port, _ = start_server(binary, work, "qps", ["--placement-qps", "1"])
    if not proc:
        return
    try:
        body = json.dumps({"pods": []}).encode()
        got = [request(port, "POST", "/v1/placements", body=body) for _ in range(4)]
        codes = [g[0] for g in got]
        if codes[:2] == [200, 200] and codes[2:] == [429, 429]:
            ok("--placement-qps 1: %s" % codes)
        else:
            fail("--placement-qps 1: statuses %s, want [200, 200, 429, 429]" % codes)
        st, hd, rb, _ = got[3]
        if (st == 429 and hd.get("retry-after", "").isdigit() and b"--placement-qps" in rb
                and b"127.0.0.1" in rb):
            ok("429 has Retry-After: %s, names --placement-qps and the caller" % hd["retry-after"])
        else:
            fail("429 lacks Retry-After or the flag: %s %r" % (hd, rb[:200]))
        st, _, _, _ = request(port, "POST", "/scheduler/filter", body=b"{}")
        if st == 400:
            ok("the extender is not limited by --placement-qps")
        else:
            fail("filter answered %s under --placement-qps" % st)
        time.sleep(1.1)
        st, _, _, _ = request(port, "POST", "/v1/placements", body=body)
        if st == 200:
            ok("a second later the caller has a token again")
        else:
            fail("a second later: %s, want 200" % st)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def body_budget(port):
    """Uploads declaring the 16 MiB cap until they hold the server's 512
    MiB request budget: one more request with a body is refused at once with 503 and
    Retry-After, healthz still answers, and once they go it is served."""
    held = []
    for _ in range(BUDGET // MAX_BODY):
        h = socket.create_connection(("127.0.0.1", port), timeout=5)
        h.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: %d\r\n\r\n{" % MAX_BODY)
        held.append(h)
    time.sleep(0.3)
    st, hd, rb, el = request(port, "POST", "/scheduler/filter", body=b"{}" * 1000)
    if st == 503 and hd.get("retry-after") and b"error" in rb:
        ok("body budget full: 503 with Retry-After %s in %.3f s" % (hd["retry-after"], el))
    else:
        fail("body budget full: %s %s %r, want 503 with Retry-After" % (st, hd, rb[:200]))
    st, _, _, _ = request(port, "GET", "/healthz")
    if st == 200:
        ok("bodyless requests are served while the budget is full")
    else:
        fail("/healthz %s while the budget is full" % st)
    for h in held:
        h.close()
    time.sleep(0.3)
    st, _, _, _ = request(port, "POST", "/scheduler/filter", body=b"{}" * 1000)
    if st == 400:
        ok("once the uploads are gone the same request is answered (400)")
    else:
        fail("after the uploads went: %s, want 400" % st)


def main():
    binary = sys.argv[1]
    work = tempfile.mkdtemp()
    proc, port, errpath = start_server(
        binary, work, "serve", ["--http-timeout", str(HTTP_TIMEOUT_S), "--http-threads",
                                str(HTTP_THREADS), "--placement-qps", "0"])
    if not proc:
        return 1
    try:
        ok("serve started on port %d" % port)
        cases = load_cases()
        paths = {c["path"] for c in cases}
        # Warm up: every route once with a valid request, so RSS includes
        # the steady state (pools, caches) before the hostile part.
        for c in cases:
            if c.get("warmup"):
                request(port, c.get("method", "POST"), c["path"], c.get("headers"), case_body(c))
        rss0 = rss_kb(proc.pid)
        ok("RSS after warm-up %d KiB, %d cases over %d paths" % (rss0, len(cases), len(paths)))
        worst = 0.0
        rss = []
        # Twice: the first pass bounds what one hostile request at a time
        # can make resident, the second shows nothing accumulates.
        for npass in (1, 2):
            for c in cases:
                worst = max(worst, check_case(port, c))
                st, _, _, _ = request(port, "GET", "/healthz", timeout=10)
                if st != 200 or proc.poll() is not None:
                    fail("server not alive after %s: /healthz %s" % (c["name"], st))
                    print(open(errpath).read()[-3000:])
                    return 1
            rss.append(rss_kb(proc.pid))
            ok("pass %d: alive after every case, RSS %d KiB" % (npass, rss[-1]))
        ok("slowest case %.3f s (bound %.0f s)" % (worst, MAX_CASE_S))
        slowloris(port)
        body_budget(port)
        rss.append(rss_kb(proc.pid))
        # One request at a time: a body of up to the cap, the smaller buffer
        # it grew from, libmicrohttpd's read buffer and what decoding takes
        # before the value budget refuses it; malloc keeps that in each HTTP
        # thread's arena for the next request. The server-wide invariant is
        # the request budget (BUDGET); sequentially it is this much less.
        bound = rss0 + HTTP_THREADS * 4 * MAX_BODY // 1024
        if max(rss) < bound:
            ok("RSS %d KiB < bound %d KiB (warm-up + %d threads x 4 x body cap)"
               % (max(rss), bound, HTTP_THREADS))
        else:
            fail("RSS %d KiB >= bound %d KiB (warm-up + %d threads x 4 x body cap)"
                 % (max(rss), bound, HTTP_THREADS))
        proc.terminate()
        rc = proc.wait(timeout=30)
        if rc == 0:
            ok("SIGTERM stops cleanly")
        else:
            fail("server exit %d after SIGTERM" % rc)
            print(open(errpath).read()[-3000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rate_limit(binary, work)
    shutil.rmtree(work, ignore_errors=True)
    print("# %d checks, %d failed" % (CHECKS, FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
