"""Coalesced small sends (stk_cork.h) keep the stream exact and never strand
bytes. Usage: cork.py server PORT | cork.py client PORT

Each case is one connection; the client sends a burst of small messages back
to back (so they are coalesced), then does what the case names; the server
checks the bytes (sha256 of what the client says it sent) and reports.
  idle      burst, then time.sleep (no socket call): every byte must reach the
            server while the client sleeps (the flusher's time bound)
  oob       burst, then an urgent byte: in order, and the mark is right
  shut      burst, then shutdown(SHUT_WR): every byte, then EOF
  fork      burst, fork (the child exits at once), burst: both bursts exact
  exit      burst, then the process calls _exit without close: run as its own
            client process ("client-exit")
"""
import hashlib
import os
import socket
import sys
import time

N = 20000        # messages per burst
SLEEP = 2.0      # idle case: the client sleeps this long after the burst


def messages(seed):
    return [(b"%d:%d;" % (seed, i)) * (1 + i % 7) for i in range(N)]


def burst(s, seed):
    # back to back (coalesced when they follow each other closely enough);
    # the second half flagged MSG_MORE (always coalesced)
    ms = messages(seed)
    for m in ms[:N // 2]:
        s.sendall(m)
    for m in ms[N // 2:]:
        s.sendall(m, socket.MSG_MORE)


def recv_until(c, total, deadline):
    got = bytearray()
    while len(got) < total and time.monotonic() < deadline:
        b = c.recv(1 << 16)
        if not b:
            break
        got += b
    return bytes(got)


def server(port):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    print("listening", flush=True)
    ok = True
    for case in ("idle", "oob", "shut", "fork", "exit"):
        try:
            ok = one(ls, case) and ok
        except OSError as e:
            print("%s: %s: BAD" % (case, e), flush=True)
            ok = False
    sys.exit(0 if ok else 1)


def one(ls, case):
    c, _ = ls.accept()
    c.settimeout(30)
    # the client announces the length and digest of a burst in a line sent
    # before the burst
    hdr = b""
    while not hdr.endswith(b"\n"):
        hdr += c.recv(1)
    total, digest = hdr.split()
    total = int(total)
    if case == "idle":
        got = recv_until(c, total, time.monotonic() + 30)
        t_all = time.monotonic()
        sent_at = float(c.recv(64).split()[0])  # sent after the sleep
        # the client stopped sending at sent_at - SLEEP; it slept SLEEP
        late = t_all - (sent_at - SLEEP)
        good = hashlib.sha256(got).hexdigest() == digest.decode() and late < SLEEP / 2
        print("idle: %d/%d bytes, all there %.1f ms after the last send: %s"
              % (len(got), total, late * 1000, "ok" if good else "BAD"), flush=True)
    elif case == "oob":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 0)
        got = recv_until(c, total, time.monotonic() + 30)
        # at the mark now: the urgent byte is pending
        mark = c.recv(1, socket.MSG_OOB)
        tail = c.recv(64)
        good = (hashlib.sha256(got).hexdigest() == digest.decode() and mark == b"!"
                and tail == b"after")
        print("oob: %d/%d bytes, urgent %r, then %r: %s"
              % (len(got), total, mark, tail, "ok" if good else "BAD"), flush=True)
    elif case == "shut":
        got = recv_until(c, total + 1, time.monotonic() + 30)
        good = hashlib.sha256(got).hexdigest() == digest.decode() and len(got) == total
        print("shut: %d/%d bytes then EOF: %s" % (len(got), total, "ok" if good else "BAD"),
              flush=True)
    else:
        got = recv_until(c, total + 1, time.monotonic() + 30)
        good = hashlib.sha256(got).hexdigest() == digest.decode() and len(got) == total
        print("%s: %d/%d bytes then EOF: %s" % (case, len(got), total, "ok" if good else "BAD"),
              flush=True)
    c.close()
    return good


def expected(seeds):
    h = hashlib.sha256()
    total = 0
    for seed in seeds:
        for m in messages(seed):
            h.update(m)
            total += len(m)
    return total, h.hexdigest()


def connect(port, seeds):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    total, digest = expected(seeds)
    s.sendall(b"%d %s\n" % (total, digest.encode()))
    return s


def client(port):
    s = connect(port, [1])
    burst(s, 1)
    time.sleep(SLEEP)  # no socket call: the flusher must send the tail
    s.sendall(b"%f\n" % time.monotonic())
    s.recv(1)  # the server closes
    s.close()

    s = connect(port, [2])
    burst(s, 2)
    s.send(b"!", socket.MSG_OOB)
    s.sendall(b"after")
    s.recv(1)
    s.close()

    s = connect(port, [3])
    burst(s, 3)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()

    s = connect(port, [4, 5])
    burst(s, 4)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    burst(s, 5)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()


def client_exit(port):
    s = connect(port, [6])
    burst(s, 6)
    # _exit with the socket open and bytes staged: no close, no atexit; the
    # kernel closes the socket (FIN), and the peer reads every byte, then EOF
    os._exit(0)


if __name__ == "__main__":
    role, port = sys.argv[1], int(sys.argv[2])
    {"server": server, "client": client, "client-exit": client_exit}[role](port)
