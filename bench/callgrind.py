#!/usr/bin/env python3
"""Instruction counts under valgrind's callgrind, for bench/callbacks and bench/instructions
(Python stdlib only): deterministic where the wall clock on a shared machine is not.

  drive(...)   one keep-alive connection to a proxy under callgrind: a warm-up callback and plain
               request, then N of a kind
  record(...)  per-object instruction totals of a callgrind file as records (instr.total,
               instr.obj.OBJECT); with a base file, also the selected functions' inclusive
               instructions per request (instr-functions rows)
"""
import os
import re
import socket
import subprocess
import time

from measure import callback_path, write

# Functions worth naming in a callback's instruction count: (label, exact C name after "=", or a
# substring of the mangled Swift name). Inclusive counts, so rows overlap.
FUNCTIONS = [
    ("callback query parsing (`QueryDecoding.decode`)", "13QueryDecodingO6decode"),
    ("client pinning (`ClientPinning.pin`)", "13ClientPinningV3pin"),
    ("replay guard key: SHA-256 of the code (`ReplayGuard.key`)", "11ReplayGuardV3key"),
    ("replay guard write (`MemoryStore.setIfAbsent`)", "11MemoryStoreC11setIfAbsent"),
    ("token request form (`FormEncoding.encode`)", "12FormEncodingO6encode"),
    ("libcurl handle set-up (`CurlTransfer.init`: `curl_easy_init`, options)", "12CurlTransferC_7options3now10completion"),
    ("libcurl I/O (`curl_multi_socket_action`: connect, send, receive, parse)", "=curl_multi_socket_action"),
    ("libcurl handle clean-up (`curl_easy_cleanup`)", "=curl_easy_cleanup"),
    ("token response JSON (`TokenResponseParsing.jsonObject`)", "20TokenResponseParsingO10jsonObject"),
    ("id_token parsing (`JWT.init(compact:)`: base64url + JSON)", "3JWTV7compact"),
    ("id_token check (`JWKSSource.check`: signature + claims)", "10JWKSSourceC5check"),
    ("… RS256 signature (`EVP_DigestVerify`)", "=EVP_DigestVerify"),
    ("… per-verify set-up (`EVP_DigestVerifyInit`: algorithm fetch, context)", "=EVP_DigestVerifyInit"),
    ("… claims (`JWTVerifier.checkClaims`)", "11JWTVerifierV11checkClaims"),
    ("the answer page (`ClientExchange.respondLocal`)", "14ClientExchangeC12respondLocal"),
]
def drive(port, internal_port, prefix, kind=None, n=0, warm=True):
    """`warm`: one callback and one plain request first (JWKS fetch, curl multi, pools), then n requests
    of `kind` (callback or plain), all on one keep-alive connection. Raises RuntimeError unless every
    answer is a 200."""
    for _ in range(600):  # the proxy starts slowly under valgrind
        try:
            socket.create_connection(("127.0.0.1", internal_port)).close()
            break
        except OSError:
            time.sleep(0.05)
    s, buf, statuses = socket.create_connection(("127.0.0.1", port)), b"", {}
    plan = [("callback", f"{prefix}-warm"), ("plain", None)] if warm else []
    plan += [(kind, f"{prefix}-{i}") for i in range(n)] if kind else []
    for kind, code in plan:
        path = callback_path(code) if kind == "callback" else "/"
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n".encode())
        while (i := buf.find(b"\r\n\r\n")) < 0 or len(buf) < i + 4 + (cl := _length(buf[:i])):
            data = s.recv(65536)
            if not data:
                raise RuntimeError("drive: connection closed by the proxy")
            buf += data
        status = int(buf.split(None, 2)[1])
        statuses[status] = statuses.get(status, 0) + 1
        buf = buf[i + 4 + cl:]
    s.close()
    if statuses and set(statuses) != {200}:
        raise RuntimeError(f"drive: unexpected statuses {statuses}")
    return statuses


def _length(head):
    m = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.I)
    return int(m.group(1)) if m else 0


def annotate(path, inclusive):
    """callgrind_annotate's lines (from "/", so no path is shown relative to the cwd)."""
    return subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100",
                           "--auto=no", os.path.abspath(path)], capture_output=True, text=True, check=True,
                          cwd="/").stdout.splitlines()


def objects(path):
    """(program total, {object: instructions}) from `N  file:fn [object]` lines."""
    total, objs = None, {}
    for line in annotate(path, False):
        if m := re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", line):
            total = int(m.group(1).replace(",", ""))
        elif m := re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?\S.*\[(.+)\]\s*$", line):
            obj = os.path.basename(m.group(2))
            objs[obj] = objs.get(obj, 0) + int(m.group(1).replace(",", ""))
    return total, objs


def inclusive(path):
    """{function: inclusive instructions}. A function appears once per source file its code came
    from (inlining); the entries overlap, so the largest is its inclusive cost."""
    fns = {}
    for line in annotate(path, True):
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.*?):(\S.*?)(?:\s+\[(.+)\])?\s*$", line)
        if m and "PROGRAM TOTALS" not in line:
            fns[m.group(3).strip()] = max(fns.get(m.group(3).strip(), 0), int(m.group(1).replace(",", "")))
    return fns


def record(records, bench, variant, path, n=1, base=None):
    total, objs = objects(path)
    key = {"bench": bench, "scenario": "instructions", "variant": variant, "round": None}
    write(records, **key, metric="instr.total", value=total, unit="instructions")
    for obj, v in objs.items():
        write(records, **key, metric=f"instr.obj.{obj}", value=v, unit="instructions")
    if base:
        base, meas = inclusive(base), inclusive(path)
        for label, pat in FUNCTIONS:
            names = ([pat[1:]] if pat[1:] in meas else []) if pat.startswith("=") else [k for k in meas if pat in k]
            if names:
                name = max(names, key=lambda k: meas[k])
                write(records, bench=bench, table="instr-functions", row=[label, (meas[name] - base.get(name, 0)) / n])
