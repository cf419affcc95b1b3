"""Negotiation cases for the acceleration tests (run under the launcher).
usage:
  nego.py nbclient PORT BYTES lt|et|poll
      non-blocking connect to echo.py's server, readiness through epoll (level or
      edge triggered) or poll, SO_ERROR checked, then the echo.py exchange done
      non-blocking; exit 0 when byte-exact.
  nego.py samethread client-first|server-first DELAY_MS
      one thread: listen, connect (blocking), sleep DELAY_MS, accept, then a
      ping/pong in the given order; exit 0 when the bytes are right and the
      exchange took less than 1 s (no negotiation stall).
  nego.py stopserver PORT BYTES SERVER_PID STOP_MS
      connect to echo.py's server, wait until it accepted (its HELLO came), stop
      it (SIGSTOP) for STOP_MS, and meanwhile send: the client's REPLY waits for
      the server's decision longer than any timeout of the negotiation; exit 0
      when the echo is byte-exact and the send really waited."""
import errno
import hashlib
import os
import select
import socket
import sys
import time


def nbclient(port, size, mode):
    data = os.urandom(size)
    want = hashlib.sha256(data).digest() + data[::-1]
    s = socket.socket()
    s.setblocking(False)
    err = s.connect_ex(("127.0.0.1", port))
    if err not in (0, errno.EINPROGRESS):
        print("connect:", os.strerror(err))
        return 1
    if mode == "poll":
        p = select.poll()
        p.register(s.fileno(), select.POLLOUT)

        def wait(ev):
            p.modify(s.fileno(), ev)
            if not p.poll(10000):
                raise TimeoutError("poll timed out")
    else:
        ep = select.epoll()
        flags = select.EPOLLET if mode == "et" else 0
        ep.register(s.fileno(), select.EPOLLOUT | flags)
        registered = [select.EPOLLOUT]

        def wait(ev):
            if mode == "lt" and registered[0] != ev:
                ep.modify(s.fileno(), ev)
                registered[0] = ev
            if not ep.poll(10):
                raise TimeoutError("epoll_wait timed out")
        if mode == "et":
            # both directions once: edges only, every call drains until EAGAIN
            ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLOUT | flags)
            registered[0] = None
    wait(select.POLLOUT if mode == "poll" else select.EPOLLOUT)
    so_error = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if so_error:
        print("SO_ERROR", os.strerror(so_error))
        return 1
    sent = 0
    out_ev = select.POLLOUT if mode == "poll" else select.EPOLLOUT
    in_ev = select.POLLIN if mode == "poll" else select.EPOLLIN
    while sent < size:
        try:
            sent += s.send(data[sent:sent + (1 << 20)])
        except BlockingIOError:
            wait(out_ev)
    back = bytearray()
    while True:
        try:
            chunk = s.recv(1 << 20)
        except BlockingIOError:
            wait(in_ev)
            continue
        if not chunk:
            break
        back += chunk
    s.close()
    ok = bytes(back) == want
    print("nbclient %s: %s (%d bytes each way)" % (mode, "byte-exact" if ok else "MISMATCH", size))
    return 0 if ok else 1


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def samethread(order, delay_ms):
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()
    c = socket.create_connection(lsock.getsockname())
    time.sleep(delay_ms / 1000.0)
    t0 = time.monotonic()
    s, _ = lsock.accept()
    if order == "client-first":
        c.sendall(b"ping")
        got1 = recv_exact(s, 4)
        s.sendall(b"pong")
        got2 = recv_exact(c, 4)
        ok = got1 == b"ping" and got2 == b"pong"
    else:
        s.sendall(b"220 hello\r\n")
        got1 = recv_exact(c, 11)
        c.sendall(b"ping")
        got2 = recv_exact(s, 4)
        ok = got1 == b"220 hello\r\n" and got2 == b"ping"
    # both directions once more, now that the negotiation is over
    c.sendall(b"x" * 100000)
    ok = ok and recv_exact(s, 100000) == b"x" * 100000
    s.sendall(b"y" * 100000)
    ok = ok and recv_exact(c, 100000) == b"y" * 100000
    ms = (time.monotonic() - t0) * 1000
    c.close()
    s.close()
    print("samethread %s: %s, %.1f ms from accept to the end of the exchange"
          % (order, "bytes ok" if ok else "MISMATCH", ms))
    return 0 if ok and ms < 1000 else 1


def stopserver(port, size, spid, stop_ms):
    import signal
    import threading
    data = os.urandom(size)
    s = socket.create_connection(("127.0.0.1", port))
    # the server accepts (and sends its HELLO) at once; untouched by our app,
    # the HELLO waits (polling the socket would answer it)
    time.sleep(0.5)
    os.kill(spid, signal.SIGSTOP)
    timer = threading.Timer(stop_ms / 1000.0, os.kill, (spid, signal.SIGCONT))
    timer.start()
    t0 = time.monotonic()
    s.sendall(data)
    waited = time.monotonic() - t0
    back = bytearray()
    while len(back) < 32 + size:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        back += chunk
    eof = s.recv(1)
    s.close()
    timer.join()
    ok = bytes(back) == hashlib.sha256(data).digest() + data[::-1] and eof == b""
    print("stopserver: %s (%d bytes each way)" % ("byte-exact" if ok else "MISMATCH", size))
    if waited < stop_ms / 2000.0:
        print("stopserver: the send did not wait for the stopped server (%.2f s)" % waited)
        ok = False
    return 0 if ok else 1


if sys.argv[1] == "stopserver":
    sys.exit(stopserver(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
if sys.argv[1] == "nbclient":
    sys.exit(nbclient(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
sys.exit(samethread(sys.argv[2], int(sys.argv[3])))
