"""Connections that stay open while the test looks at the processes.
usage: hold.py server PORT [ADDR [N]] | hold.py client PORT BYTES DONE_FILE [ADDR [N]]
server: accepts N (default 1) connections one after the other on ADDR:PORT
(default 127.0.0.1), echoes each until EOF.
client: N (default 1) connections one after the other, each sends BYTES random
bytes and checks the echo; all but the last are closed (0.5 s apart); prints
"echoed" and keeps the last open until DONE_FILE exists (at most 30 s)."""
import os
import socket
import sys
import time

role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    addr = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(4)
    print("listening", flush=True)
    for _ in range(n):
        c, _ = ls.accept()
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        c.close()
    sys.exit(0)

size, done = int(sys.argv[3]), sys.argv[4]
addr = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
n = int(sys.argv[6]) if len(sys.argv) > 6 else 1
for i in range(n):
    if i:
        s.close()
        time.sleep(0.5)
    data = os.urandom(size)
    s = socket.create_connection((addr, port), timeout=20)
    s.sendall(data)
    got = bytearray()
    while len(got) < size:
        b = s.recv(65536)
        if not b:
            break
        got += b
    if bytes(got) != data:
        print("FAIL: echo %d differs" % i, flush=True)
        sys.exit(1)
print("echoed", flush=True)
end = time.monotonic() + 30
while not os.path.exists(done) and time.monotonic() < end:
    time.sleep(0.05)
s.close()
