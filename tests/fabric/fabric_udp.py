#!/usr/bin/env python3
"""fabric_udp.py - the kernel side of fabric_udp.sh (run inside the peer
namespace): drives tests/fabric/fdp_udp (the dpdk provider's FI_PROTO_UDP
endpoint, in the other namespace) over its stdin/stdout, and talks to it
with plain kernel UDP sockets. Every wait is bounded; the first failed
check ends the run with "FAIL: ..." and exit 1.

usage: fabric_udp.py NS_A PROG PEER_IFACE PEER_IP DPDK_IP LOG (env for PROG
in FDP_UDP_ENV, "VAR=value ...")
"""
import array
import fcntl
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

NS_A, PROG, IFACE, PEER_IP, DPDK_IP, LOG = sys.argv[1:7]
PORT0, PORT1 = 7000, 7001
GROUP, GPORT = "239.1.2.3", 5000
FI_ETRUNC, FI_EMSGSIZE = 265, 90
N_UNICAST = int(os.environ.get("FDP_UDP_COUNT", "300"))


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def fill(n, seed):
    x, out = seed, bytearray(n)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out[i] = x >> 56
    return bytes(out)


def fnv(b):
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def udp_in(ns):
    """Udp InDatagrams of namespace ns (None: this one)."""
    cmd = ["cat", "/proc/net/snmp"] if ns is None else ["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"]
    lines = [l.split() for l in subprocess.check_output(cmd, text=True).splitlines() if l.startswith("Udp:")]
    return int(lines[1][lines[0].index("InDatagrams")])


class Prog:
    def __init__(self):
        env = os.environ.get("FDP_UDP_ENV", "").split()
        self.err = open(LOG, "w")
        self.p = subprocess.Popen(["ip", "netns", "exec", NS_A, "env"] + env +
                                  ["timeout", "300", PROG, str(PORT0), str(PORT1)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1)
        self.buf = ""

    def line(self, timeout=20.0):
        end = time.monotonic() + timeout
        while "\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                fail("fdp_udp said nothing for %.0f s (exit status %s)" % (timeout, self.p.poll()))
            chunk = os.read(self.p.stdout.fileno(), 65536).decode()
            if not chunk:
                fail("fdp_udp ended (status %s); its log: %s" % (self.p.wait(), LOG))
            self.buf += chunk
        l, self.buf = self.buf.split("\n", 1)
        if os.environ.get("FDP_UDP_DEBUG"):
            print("  fdp_udp: " + l, flush=True)
        if l.startswith("error") or l.startswith("bad command"):
            fail("fdp_udp: " + l)
        return l

    def cmd(self, c):
        try:
            self.p.stdin.write(c + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            self.gone()

    def gone(self):
        """fdp_udp has ended: fail with what it said last."""
        rest = self.buf + self.p.stdout.read()
        last = [l for l in rest.splitlines() if l][-3:]
        fail("fdp_udp ended (status %s), its last words: %s" % (self.p.wait(), " | ".join(last)))

    def expect(self, prefix, timeout=20.0):
        l = self.line(timeout)
        if not l.startswith(prefix):
            fail("fdp_udp: expected '%s...', got '%s'" % (prefix, l))
        return l.split()


def tx_checksum_off(ifname):
    """ethtool -K IFACE tx off, by ioctl (ETHTOOL_STXCSUM): a veth hands
    its kernel's UDP datagrams over with the checksum not yet computed
    (CHECKSUM_PARTIAL), which an AF_PACKET reader (net_af_packet) sees as a
    bad checksum; a real NIC computes it on the wire."""
    ev = array.array("I", [0x17, 0])
    ifr = struct.pack("16sP", ifname.encode(), ev.buffer_info()[0]) + bytes(16)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8946, ifr)


def sock(bind_port=0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((PEER_IP, bind_port))
    s.settimeout(3.0)
    return s


def check_rx(l, e, data, src):
    want = ["rx", str(e), str(len(data)), fnv(data), src[0], str(src[1])]
    if l.split() != want:
        fail("provider received '%s', expected '%s'" % (l, " ".join(want)))


def unicast(prog):
    """Kernel -> provider -> kernel echo: random sizes, 0 and the maximum;
    the first datagram's source is unknown (FI_SOURCE_ERR)."""
    maxlen = prog.max_msg
    rng = random.Random(7)
    sizes = [0, maxlen, 1] + [rng.randint(0, maxlen) for _ in range(N_UNICAST - 3)]
    s = sock()
    prog.cmd("recv 0 %d 120000 1" % len(sizes))
    prog.expect("posted")
    for i, n in enumerate(sizes):
        data = fill(n, i + 1)
        s.sendto(data, (DPDK_IP, PORT0))
        try:
            echo, frm = s.recvfrom(65536)
        except socket.timeout:
            if prog.p.poll() is not None:
                prog.gone()
            fail("no echo of datagram %d (%d bytes)" % (i, n))
        if echo != data or frm != (DPDK_IP, PORT0):
            fail("echo %d differs: %d bytes from %s, sent %d" % (i, len(echo), frm, n))
    me = s.getsockname()
    l = prog.line()
    if l.split() != ["unknown", me[0], str(me[1])]:
        fail("first datagram: expected FI_SOURCE_ERR 'unknown %s %d', got '%s'" % (me[0], me[1], l))
    for i, n in enumerate(sizes):
        check_rx(prog.line(), 0, fill(n, i + 1), me)
    l = prog.line()
    if l.split() != ["done", str(len(sizes)), str(len(sizes))]:
        fail("recv: '%s'" % l)
    print("unicast: %d datagrams (0..%d bytes) echoed byte-exact; unknown source %s:%d "
          "reported by FI_SOURCE_ERR" % (len(sizes), maxlen, me[0], me[1]), flush=True)
    return s


def provider_sends(prog):
    """Provider -> kernel only: exact bytes, 0 and maximum sizes, oversize refused."""
    r = sock()
    port = r.getsockname()[1]
    for i, n in enumerate([0, 1, 100, 1000, prog.max_msg]):
        prog.cmd("send 0 %s %d %d %d" % (PEER_IP, port, n, 1000 + i))
        if prog.expect("sent") != ["sent", "0"]:
            fail("fi_send of %d bytes failed" % n)
        data, frm = r.recvfrom(65536)
        if data != fill(n, 1000 + i) or frm != (DPDK_IP, PORT0):
            fail("kernel received %d bytes from %s, expected %d from %s:%d" %
                 (len(data), frm, n, DPDK_IP, PORT0))
    prog.cmd("big 0 %s %d" % (PEER_IP, port))
    b = prog.expect("big")
    if b != ["big", str(prog.max_msg), "0", str(-FI_EMSGSIZE)]:
        fail("largest datagram / one byte more: '%s' (want sent, then -FI_EMSGSIZE)" % " ".join(b))
    data, _ = r.recvfrom(65536)
    if data != fill(prog.max_msg, 99):
        fail("largest datagram differs")
    try:
        extra = r.recv(65536)
        fail("the refused oversize datagram arrived (%d bytes)" % len(extra))
    except socket.timeout:
        pass
    print("provider -> kernel: exact bytes (0..%d); %d bytes refused with -FI_EMSGSIZE"
          % (prog.max_msg, prog.max_msg + 1), flush=True)


def truncation(prog, s):
    prog.cmd("trunc 0 100 10000")
    prog.expect("posted")
    s.sendto(fill(500, 5), (DPDK_IP, PORT0))
    t = prog.expect("trunc")
    if t != ["trunc", str(FI_ETRUNC), "100", "400"]:
        fail("truncation: '%s' (want FI_ETRUNC, len 100, olen 400)" % " ".join(t))
    print("truncation: FI_ETRUNC len 100 olen 400", flush=True)


def eth_frame(dst_mac, src_mac, ip_bytes):
    return dst_mac + src_mac + b"\x08\x00" + ip_bytes


def ip_csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(total_len, frag, proto, src, dst, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total_len, 1, frag, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", ip_csum(h)) + h[12:]
    return h + payload


def bad_csum(ip):
    return ip[:10] + bytes([ip[10] ^ 0x55]) + ip[11:]


def malformed(prog, s):
    """Raw frames the provider must drop and count, then it still works.
    (No lone IP fragment: on net_af_packet the kernel's AF_PACKET socket
    holds fragments for reassembly, so one never reaches the provider.)"""
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind((IFACE, 0))
    mine = raw.getsockname()[4]
    bcast = b"\xff" * 6
    udp_ok = struct.pack("!HHHH", 9999, PORT0, 8 + 10, 0) + b"x" * 10
    udp_badlen = struct.pack("!HHHH", 9999, PORT0, 1000, 0) + b"x" * 10
    frames = {
        "udp-length": eth_frame(bcast, mine, ipv4(20 + len(udp_badlen), 0, 17, PEER_IP, DPDK_IP, udp_badlen)),
        "ip-length": eth_frame(bcast, mine, ipv4(1000, 0, 17, PEER_IP, DPDK_IP, udp_ok)),
        "ip-checksum": eth_frame(bcast, mine, bad_csum(ipv4(20 + len(udp_ok), 0, 17, PEER_IP, DPDK_IP, udp_ok))),
        "short": eth_frame(bcast, mine, b"\x45\x00"),
    }
    prog.cmd("recv 0 1 10000 1")
    prog.expect("posted")
    for _ in range(5):
        for f in frames.values():
            raw.send(f)
    time.sleep(0.2)
    s.sendto(b"still alive", (DPDK_IP, PORT0))
    if s.recv(65536) != b"still alive":
        fail("no echo after malformed frames")
    prog.line()
    if prog.expect("done") != ["done", "1", "1"]:
        fail("recv after malformed frames")
    raw.close()
    return list(frames)


class Capture:
    """Frames seen on the peer's veth (AF_PACKET), for IGMP and TTL checks."""

    def __init__(self):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.s.bind((IFACE, 0))

    def find(self, pred, timeout=3.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not select.select([self.s], [], [], end - time.monotonic())[0]:
                break
            f = self.s.recv(65536)
            if len(f) >= 34 and f[12:14] == b"\x08\x00" and pred(f, 14 + (f[14] & 0xF) * 4):
                return f
        return None


def igmp_pred(type_, group, dst_ip):
    def pred(f, l4):
        return (f[23] == 2 and len(f) >= l4 + 8 and f[l4] == type_ and
                f[l4 + 4:l4 + 8] == socket.inet_aton(group) and
                f[30:34] == socket.inet_aton(dst_ip) and f[0:3] == b"\x01\x00\x5e")
    return pred


def multicast(prog):
    cap = Capture()
    prog.cmd("join 0 %s %d" % (GROUP, GPORT))
    prog.expect("joined")
    if not cap.find(igmp_pred(0x16, GROUP, GROUP)):
        fail("no IGMPv2 membership report for %s left the port after fi_join" % GROUP)
    prog.cmd("join 1 %s %d" % (GROUP, GPORT))
    prog.expect("joined")
    # kernel -> group: both endpoints get every datagram
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(PEER_IP))
    tx.bind((PEER_IP, 0))
    me = tx.getsockname()
    count = 12
    prog.cmd("recv 2 %d 10000 0" % count)
    prog.expect("posted")
    sent = [fill(17 * i, 500 + i) for i in range(count)]
    for d in sent:
        tx.sendto(d, (GROUP, GPORT))
        time.sleep(0.002)
    got = {0: [], 1: []}
    while True:
        l = prog.line()
        if l.startswith("done"):
            break
        if l.startswith("unknown"):
            continue
        w = l.split()
        got[int(w[1])].append(w)
    for e in (0, 1):
        want = [["rx", str(e), str(len(d)), fnv(d), me[0], str(me[1])] for d in sent]
        if got[e] != want:
            fail("endpoint %d received %d of %d group datagrams (or other bytes): %s"
                 % (e, len(got[e]), count, got[e][:3]))
    print("multicast: 2 endpoints joined %s:%d, each received all %d datagrams a kernel "
          "socket sent to the group; IGMPv2 report seen" % (GROUP, GPORT, count), flush=True)
    # provider -> group: a kernel member receives; TTL 1, group MAC
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.bind(("", GPORT))
    rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                  socket.inet_aton(GROUP) + socket.inet_aton(PEER_IP))
    rx.settimeout(3.0)
    for i, n in enumerate([0, 64, prog.max_msg]):
        prog.cmd("mcsend 0 %d %d" % (n, 700 + i))
        if prog.expect("sent") != ["sent", "0"]:
            fail("fi_send to fi_mc_addr failed")
        data, frm = rx.recvfrom(65536)
        if data != fill(n, 700 + i) or frm != (DPDK_IP, PORT0):
            fail("group member got %d bytes from %s" % (len(data), frm))
    f = cap.find(lambda f, l4: f[23] == 17 and f[30:34] == socket.inet_aton(GROUP), 0.5)
    # the capture may have read past the frames already: send one more
    if f is None:
        prog.cmd("mcsend 0 8 1")
        prog.expect("sent")
        f = cap.find(lambda f, l4: f[23] == 17 and f[30:34] == socket.inet_aton(GROUP))
    if f is None or f[22] != 1 or f[0:6] != b"\x01\x00\x5e\x01\x02\x03":
        fail("datagram to the group: not seen with TTL 1 and MAC 01:00:5e:01:02:03")
    print("multicast: fi_send to fi_mc_addr reached a kernel member (IP_ADD_MEMBERSHIP); "
          "TTL 1, group MAC", flush=True)
    # leave: a leave message after the last member, and no more delivery
    prog.cmd("leave 0")
    prog.expect("left")
    prog.cmd("leave 1")
    prog.expect("left")
    if not cap.find(igmp_pred(0x17, GROUP, "224.0.0.2")):
        fail("no IGMPv2 leave for %s after the last fi_close(mc)" % GROUP)
    prog.cmd("recv 2 1 1500 0")
    prog.expect("posted")
    for d in sent[:3]:
        tx.sendto(d, (GROUP, GPORT))
    l = prog.line()
    if l != "done 0 0":
        fail("after leaving, the group still reaches the endpoints: '%s'" % l)
    print("multicast: after fi_close(mc) an IGMPv2 leave is sent and nothing is delivered",
          flush=True)


def main():
    tx_checksum_off(IFACE)
    a_before, b_before = udp_in(NS_A), udp_in(None)
    prog = Prog()
    r = prog.expect("ready", 60)
    if r[1] != DPDK_IP or r[2:4] != [str(PORT0), str(PORT1)]:
        fail("fdp_udp: '%s'" % " ".join(r))
    prog.max_msg = int(r[4])
    # provider -> kernel first: its ARP request teaches the peer our MAC, so
    # no datagram of the echo test waits for ARP
    provider_sends(prog)
    s = unicast(prog)
    truncation(prog, s)
    reasons = malformed(prog, s)
    if os.environ.get("FDP_UDP_MULTICAST", "1") == "1":
        multicast(prog)
    prog.cmd("quit")
    prog.expect("bye")
    if prog.p.wait(timeout=30) != 0:
        fail("fdp_udp exit status %d" % prog.p.returncode)
    log = open(LOG).read()
    for reason in reasons:
        if not any(("rx dropped (%s): " % reason) in l and int(l.split()[-1]) >= 5
                   for l in log.splitlines()):
            fail("the provider did not count 5 '%s' drops (log %s)" % (reason, LOG))
    print("malformed frames (%s) dropped and counted" % ", ".join(reasons), flush=True)
    a_after, b_after = udp_in(NS_A), udp_in(None)
    if a_after != a_before:
        fail("the provider's namespace's kernel counted %d UDP datagrams: they should bypass it"
             % (a_after - a_before))
    if b_after - b_before < N_UNICAST:
        fail("the peer's kernel counted only %d UDP datagrams" % (b_after - b_before))
    print("kernel Udp InDatagrams: provider's namespace +0, peer's +%d" % (b_after - b_before))
    print("PASS")


main()
