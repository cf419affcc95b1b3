"""A client that speaks libfabsock's negotiation (stk_nego.h) as an attacker
would, against a launched server on 127.0.0.1 (tests/accel/hostile.sh).

usage: hostile.py MODE PORT [ARGS]
  server            the victim: a single-threaded epoll echo server on PORT that
                    survives whatever its peers do (resets, half closes); it
                    echoes every byte and closes when the peer did. Runs until
                    killed; prints "listening".
  good N SIZE       a well-behaved client: N sequential connections, SIZE
                    random bytes each, echo compared byte for byte.
  mutate N PAR      N marked connections, PAR at a time: answer the HELLO with
                    a valid REPLY ACCEPT (the server's own address for one of
                    the providers it offered) with 1-4 random bytes changed,
                    then data, then close. Fails when the server stops
                    accepting.
  truncate N        N marked connections, one at a time: a prefix of a valid
                    REPLY, then app data (together short of the record's
                    length; the first: 40 bytes of it), then SHUT_WR; the
                    server app (an echo server) must echo every byte and close
                    within BOUND_S: the connection went to the kernel intact.
  steer             marked connections whose REPLY chooses tcp with the address
                    of a listener of ours (the kernel peer's IP, 127.0.0.1), or
                    another IP: the server must never connect to it (no fabric
                    message of ours ever proves the address).
  silent N          N marked connections that never answer the HELLO, held open
                    HOLD_S seconds, then closed.
  halfopen N        N marked connections that send a third of a REPLY and stall,
                    held open HOLD_S seconds, then closed.
  hserver N        the other side: a server that greets each of N connections
                    with a HELLO (this host's identity, an shm name of no
                    process, a tcp address of nobody) with 1-4 random bytes
                    changed, strips the client's REPLY (answering an ACCEPT
                    with CANCEL), and echoes the rest; prints "listening".
  hclient N         a client for hserver (run launched): N connections, each
                    sends its bytes and SHUT_WR, and must get the end of stream
                    within BOUND_S with its bytes echoed at the end of what it
                    read (a mutated HELLO the client could not parse is the
                    server's bytes: the kernel delivers them).
Every wait is bounded; prints one line per mode, exits 0 when the server
behaved, 1 otherwise. Random choices are seeded (HOSTILE_SEED) so a failure
can be replayed."""
import os
import random
import select
import socket
import struct
import sys
import threading
import time

MAGIC = b"\x7ffskNEGO"
VERSION = 5
HELLO, REPLY, CANCEL, READY = 1, 2, 4, 5
TOS = 0x2c
BOUND_S = float(os.environ.get("HOSTILE_BOUND_S", "6"))
HOLD_S = float(os.environ.get("HOSTILE_HOLD_S", "3"))
rng = random.Random(int(os.environ.get("HOSTILE_SEED", "1")))
rng_lock = threading.Lock()


def marked(port):
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, TOS)
    s.settimeout(BOUND_S)
    s.connect(("127.0.0.1", port))
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def read_hello(s):
    hdr = recv_exact(s, 16)
    if len(hdr) < 16 or hdr[:8] != MAGIC:
        return None
    _, typ, length = struct.unpack("<HHI", hdr[8:16])
    body = recv_exact(s, length - 16)
    if typ != HELLO or len(body) != length - 16:
        return None
    boot, netns, conn_id, slot, credits, nprov = struct.unpack("<16sQQIIB", body[:41])
    provs, pos = [], 41
    for _ in range(nprov):
        n = body[pos]
        name = body[pos + 1:pos + 1 + n].decode()
        pos += 1 + n
        alen = struct.unpack("<H", body[pos:pos + 2])[0]
        provs.append((name, body[pos + 2:pos + 2 + alen]))
        pos += 2 + alen
    return {"boot": boot, "netns": netns, "conn_id": conn_id, "slot": slot, "provs": provs}


def record(typ, body):
    return MAGIC + struct.pack("<HHI", VERSION, typ, 16 + len(body)) + body


def reply(hello, name, addr, conn_id=None, slot=7):
    nb = name.encode()
    body = struct.pack("<H16sQQII", 0, hello["boot"], hello["netns"],
                       conn_id if conn_id is not None else rng.getrandbits(64) | 1, slot, 262144)
    body += struct.pack("<B", len(nb)) + nb + struct.pack("<H", len(addr)) + addr
    return record(REPLY, body)


def sockaddr_in(ip, port):
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + \
        socket.inet_aton(ip) + bytes(8)


def mutate_one(port, idx, errors):
    try:
        s = marked(port)
        hello = read_hello(s)
        if hello is None or not hello["provs"]:
            errors.append("no HELLO on connection %d" % idx)
            s.close()
            return
        with rng_lock:
            name, addr = hello["provs"][rng.randrange(len(hello["provs"]))]
            rec = bytearray(reply(hello, name, addr))
            for _ in range(rng.randint(1, 4)):
                # mostly the body (where the names are), sometimes the header
                pos = rng.randrange(16 if rng.random() < 0.1 else 18, len(rec))
                rec[pos] = rng.randrange(256)
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        s.sendall(bytes(rec) + data)
        s.settimeout(0.3)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    except (OSError, ValueError, IndexError, struct.error) as e:
        errors.append("connection %d: %s" % (idx, e))


def run_parallel(fn, n, par, *args):
    errors = []
    for base in range(0, n, par):
        ts = [threading.Thread(target=fn, args=(args + (base + i, errors)))
              for i in range(min(par, n - base))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(BOUND_S * 3)
    return errors


def mode_mutate(port, n, par):
    errors = run_parallel(mutate_one, n, par, port)
    # a few connection failures are the server's right; all of them are not
    print("mutate: %d connections, %d errors%s" % (n, len(errors),
          ": " + errors[0] if errors else ""))
    return len(errors) <= n // 10


def mode_truncate(port, n):
    bad = 0
    for i in range(n):
        s = marked(port)
        hello = read_hello(s)
        if hello is None or not hello["provs"]:
            print("truncate: no HELLO")
            return False
        name, addr = hello["provs"][i % len(hello["provs"])]
        rec = reply(hello, name, addr)
        data = b"app bytes %d\n" % i
        # the record stays short of its length (data included): a record
        # cut short, not a whole one with the data inside
        cut = rng.randrange(1, len(rec) - len(data)) if i else 40
        sent = rec[:cut] + data
        s.sendall(sent)
        s.shutdown(socket.SHUT_WR)
        start = time.monotonic()
        got = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except OSError as e:
            print("truncate: connection %d (cut %d of %d): %s after %.1f s, got %d of %d bytes"
                  % (i, cut, len(rec), e, time.monotonic() - start, len(got), len(sent)))
            bad += 1
            s.close()
            continue
        s.close()
        if got != sent:
            print("truncate: connection %d (cut %d of %d): echo %d bytes, sent %d"
                  % (i, cut, len(rec), len(got), len(sent)))
            bad += 1
    print("truncate: %d connections, %d not returned intact within %.0f s" % (n, bad, BOUND_S))
    return bad == 0


def mode_steer(port):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(16)
    lst.setblocking(False)
    trap = lst.getsockname()[1]
    conns = []
    for ip in ("127.0.0.1", "127.0.0.2"):
        for i in range(3):
            s = marked(port)
            hello = read_hello(s)
            names = [p[0] for p in hello["provs"]] if hello else []
            if "tcp" not in names:
                print("steer: the server offers no tcp (%s): nothing to steer" % names)
                return True
            s.sendall(reply(hello, "tcp", sockaddr_in(ip, trap)))
            conns.append(s)
    # the server's handshake wait (STK_NEGO_HANDSHAKE_MS) and then some
    end = time.monotonic() + 3.0
    touched = 0
    while time.monotonic() < end:
        r, _, _ = select.select([lst], [], [], 0.1)
        if r:
            c, _ = lst.accept()
            c.settimeout(0.5)
            try:
                got = c.recv(4096)
            except OSError:
                got = b""
            print("steer: the server connected to our port and sent %d bytes" % len(got))
            touched += 1
            c.close()
    verdicts = []
    for s in conns:
        s.settimeout(1.0)
        try:
            verdicts.append(s.recv(64)[:16][10:12])
        except OSError:
            verdicts.append(b"")
        s.close()
    lst.close()
    print("steer: %d connection(s) to the steered address" % touched)
    return touched == 0


def hold(port, n, partial):
    socks = []
    for i in range(n):
        try:
            s = marked(port)
        except OSError as e:
            print("%s: connection %d: %s" % ("halfopen" if partial else "silent", i, e))
            break
        if partial:
            hello = read_hello(s)
            if hello and hello["provs"]:
                name, addr = hello["provs"][0]
                rec = reply(hello, name, addr)
                s.sendall(rec[:len(rec) // 3])
        socks.append(s)
    time.sleep(HOLD_S)
    for s in socks:
        s.close()
    print("%s: held %d connections %.0f s" % ("halfopen" if partial else "silent", len(socks),
                                               HOLD_S))
    return len(socks) == n


def mode_server(port):
    import selectors
    sel = selectors.DefaultSelector()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(4096)
    lst.setblocking(False)
    sel.register(lst, selectors.EVENT_READ, None)
    print("listening", flush=True)
    pending = {}

    def drop(c):
        if c.fileno() >= 0:
            sel.unregister(c)
        pending.pop(c, None)
        c.close()

    while True:
        for key, ev in sel.select():
            if key.data is None:
                try:
                    c, _ = lst.accept()
                except OSError:
                    continue
                c.setblocking(False)
                pending[c] = b""
                sel.register(c, selectors.EVENT_READ, "c")
                continue
            c = key.fileobj
            if c.fileno() < 0:
                continue  # dropped earlier in this batch
            try:
                if ev & selectors.EVENT_WRITE and pending[c]:
                    n = c.send(pending[c])
                    pending[c] = pending[c][n:]
                if ev & selectors.EVENT_READ:
                    data = c.recv(65536)
                    if not data:
                        if pending[c]:
                            c.setblocking(True)
                            c.settimeout(BOUND_S)
                            c.sendall(pending[c])
                        drop(c)
                        continue
                    pending[c] += data
                    n = c.send(pending[c])
                    pending[c] = pending[c][n:]
                sel.modify(c, selectors.EVENT_READ |
                           (selectors.EVENT_WRITE if pending[c] else 0), "c")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                drop(c)


def mode_good(port, n, size):
    for i in range(n):
        data = os.urandom(size)
        s = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        back = recv_exact(s, size + 1)
        s.close()
        if back != data:
            print("good: connection %d: echo of %d bytes, sent %d%s" %
                  (i, len(back), size, "" if len(back) != size else " (different)"))
            return False
    print("good: %d connections, %d bytes each, byte-exact" % (n, size))
    return True


def host_identity():
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = bytes.fromhex(f.read().strip().replace("-", ""))
    return boot, os.stat("/proc/self/ns/net").st_ino


def hello_record():
    boot, netns = host_identity()
    provs = [(b"shm", b"fi_shm://%d:9:9\x00" % (4000000 + rng.randrange(100000))),
             (b"tcp", sockaddr_in("127.0.0.1", 9))]
    body = struct.pack("<16sQQIIB", boot, netns, rng.getrandbits(64) | 1, 5, 262144, len(provs))
    for name, addr in provs:
        body += struct.pack("<B", len(name)) + name + struct.pack("<H", len(addr)) + addr
    return record(HELLO, body)


def serve_hostile(c):
    c.settimeout(BOUND_S)
    rec = bytearray(hello_record())
    for _ in range(rng.randint(1, 4)):
        rec[rng.randrange(16 if rng.random() < 0.1 else 18, len(rec))] = rng.randrange(256)
    c.sendall(bytes(rec))
    buf = b""
    end = time.monotonic() + BOUND_S
    eof = False
    # the client's records first (HOLD, then a REPLY), then its app's bytes
    while time.monotonic() < end and not eof:
        if buf[:1] and buf[:len(MAGIC)] != MAGIC[:len(buf)]:
            break  # the app's bytes
        if len(buf) >= 16 and buf[:8] == MAGIC:
            length = struct.unpack("<I", buf[12:16])[0]
            if len(buf) >= length >= 18:
                status = struct.unpack("<H", buf[16:18])[0]
                buf = buf[length:]
                if status == 8:
                    continue  # HOLD: the real REPLY follows
                if status == 0:
                    c.sendall(record(CANCEL, struct.pack("<H", 7)))
                break
        chunk = c.recv(65536)
        eof = not chunk
        buf += chunk
    c.sendall(buf)
    while not eof:
        chunk = c.recv(65536)
        eof = not chunk
        c.sendall(chunk)
    c.close()


def mode_hserver(port, n):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(64)
    lst.settimeout(60)
    print("listening", flush=True)
    bad = 0
    for _ in range(n):
        c, _ = lst.accept()
        try:
            serve_hostile(c)
        except OSError:
            bad += 1
            c.close()
    print("hserver: %d connections, %d failed" % (n, bad))
    return True


def mode_hclient(port, n):
    bad = 0
    for i in range(n):
        data = b"client bytes %d " % i * 50
        s = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S)
        got = b""
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except OSError as e:
            print("hclient: connection %d: %s" % (i, e))
            bad += 1
            s.close()
            continue
        s.close()
        if not got.endswith(data):
            print("hclient: connection %d: read %d bytes, not ending with its %d" %
                  (i, len(got), len(data)))
            bad += 1
    print("hclient: %d connections, %d not served" % (n, bad))
    return bad == 0


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "server":
        mode_server(port)
    if mode == "good":
        ok = mode_good(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "mutate":
        ok = mode_mutate(port, int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "truncate":
        ok = mode_truncate(port, int(sys.argv[3]))
    elif mode == "hserver":
        ok = mode_hserver(port, int(sys.argv[3]))
    elif mode == "hclient":
        ok = mode_hclient(port, int(sys.argv[3]))
    elif mode == "steer":
        ok = mode_steer(port)
    elif mode == "silent":
        ok = hold(port, int(sys.argv[3]), False)
    elif mode == "halfopen":
        ok = hold(port, int(sys.argv[3]), True)
    else:
        print(__doc__)
        ok = False
    sys.exit(0 if ok else 1)


main()
