"""Idle connected pair for tests/accel/idle.sh: both ends block waiting for the
other (epoll_wait, poll or a blocking recv) until the client gets SIGUSR1; then
the client runs a bounded byte-checked echo and both exit.
usage: idle.py server PORT MODE [--fork] | idle.py client PORT MODE
MODE: epoll | poll | recv (how each end waits while idle); threads: as recv,
but the client's reader is a second thread, blocked in recv while the main
thread idles and then writes (a doorbell announced by one thread must still
wake it when another thread sends).
--fork: after the first echo the server forks a child that exits at once (the
connection migrates to the kernel, stk_migrate.h) and then idles.
Each end prints "ready PID" once idle (PID: whose /proc counters to read)."""
import os
import select
import signal
import socket
import sys
import time

role, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fork = "--fork" in sys.argv
ROUNDS, SIZE = 200, 4096
IDLE_S = 4.0  # threads mode: how long the client idles (idle.sh measures 2 s of it)


class Go(Exception):
    pass


def go(signum, frame):
    raise Go()


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def wait_readable(sock, ep=None):
    """Block until sock is readable, the way MODE says (epoll set ep given)."""
    if mode == "epoll":
        while not any(fd == sock.fileno() for fd, _ in ep.poll(-1)):
            pass
    elif mode == "poll":
        p = select.poll()
        p.register(sock, select.POLLIN)
        p.poll(-1)
    # recv: the caller's blocking recv waits


def threads_client(conn):
    """Reader thread in recv; the main thread writes one message per reply."""
    import threading
    got = []
    turn = threading.Semaphore(0)

    def reader():
        for _ in range(ROUNDS):
            got.append(recv_exact(conn, SIZE))
            turn.release()

    # The main thread idles by itself: a process-directed signal may be taken
    # by the reader's blocking wait (its signalfd) instead of this thread.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    time.sleep(IDLE_S)
    start = time.monotonic()
    ok = True
    slowest = 0.0
    for i in range(ROUNDS):
        msg = os.urandom(SIZE)
        t0 = time.monotonic()
        conn.sendall(msg)
        if not turn.acquire(timeout=10) or got[i] != msg:
            ok = False
            break
        slowest = max(slowest, time.monotonic() - t0)
    report(conn, ok, start, slowest)
    return 0 if ok else 1


def report(conn, ok, start, slowest):
    elapsed = time.monotonic() - start
    conn.close()
    print("client: echo after idle %s, %d x %d bytes in %.3f s, slowest %.1f ms" %
          ("byte-exact" if ok else "MISMATCH", ROUNDS, SIZE, elapsed, slowest * 1000))


if role == "server":
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen()
    print("listening", flush=True)
    conn, _ = lsock.accept()
    ep = None
    if mode == "epoll":
        ep = select.epoll()
        ep.register(lsock, select.EPOLLIN)  # a kernel fd in the set, as a real server
        ep.register(conn, select.EPOLLIN)
    first = True
    while True:
        wait_readable(conn, ep)
        data = conn.recv(SIZE)
        if not data:
            break
        conn.sendall(data)
        if first:
            first = False
            if fork:
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
            print("ready %d" % os.getpid(), flush=True)
    conn.close()
    sys.exit(0)
else:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"x")
    if recv_exact(conn, 1) != b"x":
        print("client: first echo failed")
        sys.exit(1)
    signal.signal(signal.SIGUSR1, go)
    ep = None
    if mode == "epoll":
        ep = select.epoll()
        ep.register(conn, select.EPOLLIN)
    print("ready %d" % os.getpid(), flush=True)
    if mode == "threads":
        sys.exit(threads_client(conn))
    try:
        wait_readable(conn, ep)
        conn.recv(1)  # mode recv: the idle wait; else never reached (nothing comes)
        print("client: woke without the signal")
        sys.exit(1)
    except Go:
        pass
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    start = time.monotonic()
    ok = True
    slowest = 0.0
    for i in range(ROUNDS):
        msg = os.urandom(SIZE)
        t0 = time.monotonic()
        conn.sendall(msg)
        if recv_exact(conn, SIZE) != msg:
            ok = False
            break
        slowest = max(slowest, time.monotonic() - t0)
    report(conn, ok, start, slowest)
    sys.exit(0 if ok else 1)
