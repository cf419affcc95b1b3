"""Many TCP echo streams with half-close, for the acceleration tests.

usage: streams.py server PORT CONNS
       streams.py client PORT CONNS PARALLEL SEED

The server echoes every byte of each connection as it arrives; at the
client's half-close (EOF) it half-closes too, after the last byte, and exits
once CONNS connections ended. The client opens CONNS connections, PARALLEL at
a time; each sends a random number of random bytes (1 B .. 1 MiB; the first
two connections exactly 1 B and 1 MiB) from one thread while another reads
the echo, half-closes after its last byte and checks that the echo is
byte-exact and ends with EOF. Every socket operation has a timeout; the
client prints one line per failure and a summary, and exits non-zero on any."""
import os
import random
import socket
import sys
import threading

TIMEOUT = 30.0
MAX = 1 << 20


def serve_one(conn, failures):
    try:
        conn.settimeout(TIMEOUT)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            conn.sendall(chunk)
        conn.shutdown(socket.SHUT_WR)
    except OSError as e:
        failures.append("server: %s" % e)
    finally:
        conn.close()


def server(port, conns):
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(64)
    lsock.settimeout(TIMEOUT)
    print("listening", flush=True)
    failures, threads = [], []
    for _ in range(conns):
        conn, _ = lsock.accept()
        t = threading.Thread(target=serve_one, args=(conn, failures))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(TIMEOUT)
    for f in failures:
        print(f, flush=True)
    sys.exit(1 if failures or any(t.is_alive() for t in threads) else 0)


def one_stream(port, size, results, i):
    data = os.urandom(size)
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    err = []

    def send():
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError as e:
            err.append("send: %s" % e)

    t = threading.Thread(target=send)
    t.start()
    back = bytearray()
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            back += chunk
    except OSError as e:
        err.append("recv: %s" % e)
    t.join(TIMEOUT)
    sock.close()
    if t.is_alive():
        err.append("sender stuck")
    if not err and bytes(back) != data:
        err.append("echo differs: sent %d bytes, got %d back" % (size, len(back)))
    results[i] = (size, err)


def client(port, conns, parallel, seed):
    rng = random.Random(seed)
    sizes = [1, MAX] + [rng.randint(1, MAX) for _ in range(conns - 2)]
    sizes = sizes[:conns]
    results = [None] * conns
    for base in range(0, conns, parallel):
        batch = [threading.Thread(target=one_stream, args=(port, sizes[i], results, i))
                 for i in range(base, min(base + parallel, conns))]
        for t in batch:
            t.start()
        for t in batch:
            t.join(2 * TIMEOUT)
    bad = 0
    for i, r in enumerate(results):
        if r is None or r[1]:
            bad += 1
            print("stream %d (%s bytes): %s" % (i, sizes[i], "did not finish" if r is None
                                                else "; ".join(r[1])))
    print("client: %d streams, %d bytes each way, %d failed (seed %d)" %
          (conns, sum(sizes), bad, seed), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), int(sys.argv[3]))
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
