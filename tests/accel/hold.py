"""A connection that stays open while the test looks at the processes.
usage: hold.py server PORT | hold.py client PORT BYTES DONE_FILE
server: accepts one connection on 127.0.0.1:PORT, echoes it until EOF.
client: sends BYTES random bytes, checks the echo, prints "echoed", then keeps
the connection open until DONE_FILE exists (at most 30 s) and closes it."""
import os
import socket
import sys
import time

role, port = sys.argv[1], int(sys.argv[2])
if role == "server":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4)
    print("listening", flush=True)
    c, _ = ls.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
    sys.exit(0)

size, done = int(sys.argv[3]), sys.argv[4]
data = os.urandom(size)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(data)
got = bytearray()
while len(got) < size:
    b = s.recv(65536)
    if not b:
        break
    got += b
if bytes(got) != data:
    print("FAIL: echo differs", flush=True)
    sys.exit(1)
print("echoed", flush=True)
end = time.monotonic() + 30
while not os.path.exists(done) and time.monotonic() < end:
    time.sleep(0.05)
s.close()
