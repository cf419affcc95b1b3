#!/usr/bin/env python3
"""fork/exec/fd passing with accelerated connections (run under the launcher
with FABSOCK_TCP_ACCEL=1 on both ends; see fork.sh).

usage: fork.py server SCENARIO PORT | client SCENARIO PORT | exec-child FD

Every scenario checks exact bytes on both ends; the server checks that the
connection was accelerated before the fork/exec/pass and that no migration
ended without the peer's answer (libfabsock's counters through fsk_counter).
Exit status 0 = pass."""
import ctypes
import os
import select
import socket
import sys
import threading
import time

MIB = 1 << 20
lib = ctypes.CDLL(None)


def counter(name):
    v = ctypes.c_ulonglong(0)
    if lib.fsk_counter(name.encode(), ctypes.byref(v)) != 0:
        return -1
    return v.value


def fail(msg):
    sys.stderr.write("FAIL: %s (pid %d)\n" % (msg, os.getpid()))
    sys.stderr.flush()
    os._exit(1)


def pattern(n, seed):
    # deterministic, position-dependent bytes (a shift or a duplicate shows)
    block = bytes((i * 131 + seed * 17 + (i >> 8)) & 0xFF for i in range(65536 + 251))
    out = bytearray()
    off = 0
    while len(out) < n:
        out += block[off % 251:]
        off += 1
    return bytes(out[:n])


def recv_exact(s, n, timeout=30):
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while len(buf) < n:
        if time.monotonic() > deadline:
            fail("recv_exact: timeout after %d of %d bytes" % (len(buf), n))
        chunk = s.recv(min(n - len(buf), 65536))
        if not chunk:
            fail("recv_exact: EOF after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def expect(got, want, what):
    if got != want:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                     min(len(got), len(want)))
        fail("%s: %d bytes, want %d; first difference at byte %d" %
             (what, len(got), len(want), first))


def accel_check(conn, what):
    # accept() returns before the negotiation ends (it completes in the
    # background or in the ends' next calls): poll drives it, bounded
    p = select.poll()
    p.register(conn.fileno(), select.POLLPRI)
    deadline = time.monotonic() + 5
    while lib.fsk_fd_accelerated(conn.fileno()) != 1:
        if time.monotonic() > deadline:
            fail("%s: the connection is not accelerated (nothing to migrate)" % what)
        p.poll(10)


def wait_child(pid):
    _, st = os.waitpid(pid, 0)
    if not os.WIFEXITED(st) or os.WEXITSTATUS(st) != 0:
        fail("child %d: status %#x" % (pid, st))


def server_done(scen):
    gone = counter("migrate_peer_gone")
    if gone != 0:
        fail("migrate_peer_gone = %d, want 0 (every peer is alive)" % gone)


# ---- server side of each scenario (the process that forks / execs / passes) ----

def srv_perconn(lsock):
    pids = []
    for i in range(3):
        conn, _ = lsock.accept()
        accel_check(conn, "perconn")
        pid = os.fork()
        if pid == 0:
            lsock.close()
            total = 0
            while total < MIB:
                chunk = conn.recv(65536)
                if not chunk:
                    fail("perconn child: EOF after %d" % total)
                conn.sendall(chunk)
                total += len(chunk)
            conn.close()
            os._exit(0)
        conn.close()  # the child's copy keeps the connection open
        pids.append(pid)
    for pid in pids:
        wait_child(pid)
    if counter("migrate_fork") < 3:
        fail("perconn: migrate_fork = %d, want >= 3" % counter("migrate_fork"))


def srv_shared(lsock):
    conn, _ = lsock.accept()
    accel_check(conn, "shared")
    expect(recv_exact(conn, 5), b"hello", "shared: hello")
    pid = os.fork()
    if pid == 0:
        conn.sendall(b"C" * 100000)
        expect(recv_exact(conn, 50000), pattern(100000, 3)[:50000], "shared: child's half")
        os._exit(0)
    wait_child(pid)
    conn.sendall(b"P" * 100000)
    expect(recv_exact(conn, 50000), pattern(100000, 3)[50000:], "shared: parent's half")
    conn.sendall(b"done")
    expect(conn.recv(1), b"", "shared: EOF")
    conn.close()


def srv_inflight(lsock):
    conn, _ = lsock.accept()
    accel_check(conn, "inflight")
    time.sleep(0.3)  # the client's bytes arrive meanwhile; nobody reads them
    want = pattern(MIB, 5)
    pid = os.fork()
    if pid == 0:
        expect(recv_exact(conn, 300000), want[:300000], "inflight: child's part")
        conn.sendall(b"child-ok")
        os._exit(0)
    wait_child(pid)
    expect(recv_exact(conn, MIB - 300000), want[300000:], "inflight: parent's part")
    conn.sendall(b"parent-ok")
    conn.close()


def srv_sendfork(lsock):
    # 1 MiB sent on the fabric just before the fork: the sends still in flight
    # complete in the parent (its close does not wait for the linger bound)
    conn, _ = lsock.accept()
    accel_check(conn, "sendfork")
    conn.sendall(pattern(MIB, 11))
    pid = os.fork()
    if pid == 0:
        conn.sendall(b"child")
        os._exit(0)
    wait_child(pid)
    t0 = time.monotonic()
    conn.close()
    took = time.monotonic() - t0
    if took > 2:
        fail("sendfork: close took %.2f s" % took)


def srv_blocked(lsock):
    # the client waits (recv, epoll_wait or poll) when we fork
    conn, _ = lsock.accept()
    accel_check(conn, "blocked")
    expect(recv_exact(conn, 1), b"w", "blocked: ready byte")
    time.sleep(0.3)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        conn.sendall(b"child")
        os._exit(0)
    took = time.monotonic() - t0
    wait_child(pid)
    if took > 0.9:
        fail("blocked: fork took %.2f s (the peer answered late)" % took)
    expect(recv_exact(conn, 3), b"ack", "blocked: ack")
    conn.sendall(b"bye")
    conn.close()


def srv_prefork(lsock):
    # workers forked before any connection accept on the inherited listener:
    # their connections are accelerated on endpoints of their own
    pids = []
    for w in range(2):
        pid = os.fork()
        if pid == 0:
            conn, _ = lsock.accept()
            accel_check(conn, "prefork worker %d" % w)
            data = recv_exact(conn, 65536)
            conn.sendall(data)
            expect(conn.recv(1), b"", "prefork: EOF")
            conn.close()
            os._exit(0)
        pids.append(pid)
    lsock.close()
    for pid in pids:
        wait_child(pid)


def srv_idle(lsock):
    # the peer makes no libfabsock call for 1.5 s: its negotiation thread
    # answers the migration; the connection goes on on the kernel
    conn, _ = lsock.accept()
    accel_check(conn, "idle")
    # the client is out of connect() (whose handshake would answer) and sleeps
    expect(recv_exact(conn, 1), b"r", "idle: ready byte")
    pid = os.fork()
    if pid == 0:
        conn.sendall(b"child")
        os._exit(0)
    wait_child(pid)
    expect(recv_exact(conn, 3), b"ack", "idle: ack")
    conn.sendall(b"bye")
    conn.close()


BUSY_ROUNDS = 6
BUSY_BYTES = 300000
BUSY_S = 2.5
# a file the busy peer creates when its busy time of round N ends
# (BUSY_FLAG.N): the migration must be over before it appears
BUSY_FLAG = os.environ.get("FSK_BUSY_FLAG", "")


def busy_conns(rnd):
    # in turn: one connection while the peer's app sleeps (its thread wakes
    # at once on the MIGRATE's doorbell, which comes before the message), and
    # four while the peer's app computes
    return 1 if rnd % 2 == 0 else 4


BUSY_TOTAL = sum(busy_conns(r) for r in range(BUSY_ROUNDS))


def srv_busy(lsock):
    # The peer's app makes no libfabsock call for 2.5 s (asleep or computing)
    # while this process forks and writes on each connection; then the peer
    # sends at once, before reading anything. Its negotiation thread answers
    # the migrations meanwhile: the fork returns while the peer is still busy
    # (BUSY_FLAG), and every byte arrives (a migration that gave up on the
    # busy peer would let its bytes go to the fabric, lost).
    for rnd in range(BUSY_ROUNDS):
        conns = []
        for i in range(busy_conns(rnd)):
            conn, _ = lsock.accept()
            accel_check(conn, "busy")
            conns.append(conn)
        for conn in conns:
            expect(recv_exact(conn, 1), b"r", "busy: ready byte")
        if rnd % 2 == 0:
            time.sleep(0.3)  # both ends idle: the peer's thread sleeps too
        pid = os.fork()
        if pid == 0:
            # odd rounds: the child writes. Even rounds: nothing reaches the
            # peer's kernel socket after the MIGRATE's doorbell until the
            # migration is over (the parent writes after the fork returned):
            # the doorbell alone must get the answer
            if rnd % 2:
                for i, conn in enumerate(conns):
                    conn.sendall(b"fork%d" % i)
            os._exit(0)
        wait_child(pid)
        if BUSY_FLAG and os.path.exists("%s.%d" % (BUSY_FLAG, rnd)):
            fail("busy: round %d: the fork returned only after the peer's app was "
                 "busy no more (its thread did not answer the migration)" % rnd)
        if rnd % 2 == 0:
            for i, conn in enumerate(conns):
                conn.sendall(b"fork%d" % i)
        for i, conn in enumerate(conns):
            expect(recv_exact(conn, BUSY_BYTES, 10), pattern(BUSY_BYTES, 40 + i),
                   "busy: round %d connection %d" % (rnd, i))
            conn.sendall(b"bye")
            conn.close()
    if counter("migrate_fork") < BUSY_TOTAL:
        fail("busy: migrate_fork = %d, want >= %d" % (counter("migrate_fork"), BUSY_TOTAL))


def cli_busy(port):
    for rnd in range(BUSY_ROUNDS):
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(busy_conns(rnd))]
        for s in socks:
            s.sendall(b"r")
        # no libfabsock call while the server forks
        if rnd % 2 == 0:
            time.sleep(BUSY_S)
        else:
            end = time.monotonic() + BUSY_S
            while time.monotonic() < end:
                sum(range(1000))
        if BUSY_FLAG:
            open("%s.%d" % (BUSY_FLAG, rnd), "w").close()
        for i, s in enumerate(socks):
            s.sendall(pattern(BUSY_BYTES, 40 + i))
        for i, s in enumerate(socks):
            expect(recv_exact(s, 5, 10), b"fork%d" % i, "busy: bytes written after the fork")
            expect(recv_exact(s, 3, 10), b"bye", "busy: bye")
            s.close()
    if counter("migrate_peer") < BUSY_TOTAL:
        fail("busy: migrate_peer = %d, want >= %d" % (counter("migrate_peer"), BUSY_TOTAL))


def srv_exec(lsock):
    # the client's first bytes are received (unread) before the exec: the new
    # image must read them first
    conn, _ = lsock.accept()
    accel_check(conn, "exec")
    time.sleep(0.3)
    os.set_inheritable(conn.fileno(), True)
    os.execv(sys.executable, [sys.executable, __file__, "exec-child", str(conn.fileno())])


def srv_inetd(lsock):
    # inetd style: fork per connection, the child puts the socket on stdin and
    # execs the handler; the request arrived before the fork and is unread
    pids = []
    for i in range(2):
        conn, _ = lsock.accept()
        accel_check(conn, "inetd")
        time.sleep(0.3)
        pid = os.fork()
        if pid == 0:
            lsock.close()
            os.dup2(conn.fileno(), 0)
            conn.close()
            os.execv(sys.executable, [sys.executable, __file__, "exec-child", "0"])
        conn.close()
        pids.append(pid)
    for pid in pids:
        wait_child(pid)


def exec_child(fd):
    conn = socket.socket(fileno=fd)
    expect(recv_exact(conn, 5), b"hello", "exec child: the bytes received before the exec")
    conn.sendall(b"from-exec")
    data = recv_exact(conn, 65536)
    expect(data, pattern(65536, 7), "exec child: data")
    conn.sendall(data)
    conn.close()
    return 0


def srv_pass(lsock):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()  # before any accelerated connection exists
    if pid == 0:
        a.close()
        lsock.close()
        _, fds, _, _ = socket.recv_fds(b, 1, 1)
        conn = socket.socket(fileno=fds[0])
        conn.sendall(b"from-helper")
        data = recv_exact(conn, 65536)
        expect(data, pattern(65536, 9), "pass: helper data")
        conn.sendall(data)
        conn.close()
        os._exit(0)
    b.close()
    conn, _ = lsock.accept()
    accel_check(conn, "pass")
    expect(recv_exact(conn, 5), b"hello", "pass: hello")
    socket.send_fds(a, [b"x"], [conn.fileno()])
    conn.close()
    wait_child(pid)
    if counter("migrate_pass") < 1:
        fail("pass: migrate_pass = %d" % counter("migrate_pass"))


SERVERS = {
    "perconn": srv_perconn, "shared": srv_shared, "inflight": srv_inflight,
    "sendfork": srv_sendfork, "prefork": srv_prefork,
    "recvblock": srv_blocked, "epollblock": srv_blocked, "pollblock": srv_blocked,
    "idle": srv_idle, "busy": srv_busy, "exec": srv_exec, "inetd": srv_inetd, "pass": srv_pass,
}


# ---- client side (the peer: answers the migration from whatever call it is in) ----

def sender(s, data):
    def run():
        try:
            s.sendall(data)
        except OSError as e:
            fail("sender: %s" % e)
    t = threading.Thread(target=run)
    t.start()
    return t


def cli_perconn(port):
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", port))
        data = pattern(MIB, 20 + i)
        t = sender(s, data)
        expect(recv_exact(s, MIB), data, "perconn: echo %d" % i)
        t.join()
        s.close()


def cli_shared(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"hello")
    expect(recv_exact(s, 100000), b"C" * 100000, "shared: child's bytes")
    s.sendall(pattern(100000, 3)[:50000])
    expect(recv_exact(s, 100000), b"P" * 100000, "shared: parent's bytes")
    s.sendall(pattern(100000, 3)[50000:])
    expect(recv_exact(s, 4), b"done", "shared: done")
    s.close()


def cli_inflight(port):
    s = socket.create_connection(("127.0.0.1", port))
    t = sender(s, pattern(MIB, 5))
    expect(recv_exact(s, 17), b"child-okparent-ok", "inflight: verdicts")
    t.join()
    s.close()


def cli_blocked(port, how):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"w")
    if how == "epollblock":
        ep = select.epoll()
        ep.register(s.fileno(), select.EPOLLIN)
        if not ep.poll(10):
            fail("epoll_wait: nothing within 10 s")
    elif how == "pollblock":
        p = select.poll()
        p.register(s.fileno(), select.POLLIN)
        if not p.poll(10000):
            fail("poll: nothing within 10 s")
    expect(recv_exact(s, 5), b"child", "blocked (%s): child's bytes" % how)
    s.sendall(b"ack")
    expect(recv_exact(s, 3), b"bye", "blocked: bye")
    s.close()


def cli_echo_via(port, greeting, seed):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"hello")
    expect(recv_exact(s, len(greeting)), greeting, "greeting")
    data = pattern(65536, seed)
    s.sendall(data)
    expect(recv_exact(s, 65536), data, "echo")
    s.close()


def client(scen, port):
    if scen == "perconn":
        cli_perconn(port)
    elif scen == "shared":
        cli_shared(port)
    elif scen == "inflight":
        cli_inflight(port)
    elif scen == "sendfork":
        s = socket.create_connection(("127.0.0.1", port))
        expect(recv_exact(s, MIB + 5), pattern(MIB, 11) + b"child", "sendfork: bytes")
        expect(s.recv(1), b"", "sendfork: EOF")
        s.close()
    elif scen in ("recvblock", "epollblock", "pollblock"):
        cli_blocked(port, scen)
    elif scen == "prefork":
        for i in range(2):
            s = socket.create_connection(("127.0.0.1", port))
            data = pattern(65536, 30 + i)
            s.sendall(data)
            expect(recv_exact(s, 65536), data, "prefork: echo %d" % i)
            s.close()
        return 0  # nothing was migrated: the connections were made after the forks
    elif scen == "idle":
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"r")
        time.sleep(1.5)
        expect(recv_exact(s, 5), b"child", "idle: child's bytes")
        s.sendall(b"ack")
        expect(recv_exact(s, 3), b"bye", "idle: bye")
        s.close()
    elif scen == "busy":
        cli_busy(port)
    elif scen == "exec":
        cli_echo_via(port, b"from-exec", 7)
    elif scen == "inetd":
        for _ in range(2):
            cli_echo_via(port, b"from-exec", 7)
    elif scen == "pass":
        cli_echo_via(port, b"from-helper", 9)
    if counter("migrate_peer") < 1:
        fail("client: migrate_peer = %d (the peer's migration was not seen)" %
             counter("migrate_peer"))
    if counter("migrate_peer_gone") != 0:
        fail("client: migrate_peer_gone = %d, want 0" % counter("migrate_peer_gone"))
    return 0


def main():
    if sys.argv[1] == "exec-child":
        return exec_child(int(sys.argv[2]))
    role, scen, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "client":
        return client(scen, port)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(16)
    print("listening", flush=True)
    SERVERS[scen](lsock)
    server_done(scen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
