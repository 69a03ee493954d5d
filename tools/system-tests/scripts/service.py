#!/usr/bin/env python3
# A backend: HTTP on one port answering its name to every GET; optionally a line-echo
# "session" service on another port that first sends its name (a long-lived connection), and
# UDP services on the VIP (argv[4], then ports): each datagram is answered from the VIP with
# "NAME LENGTH SHA256" of what arrived (after the kernel reassembled it); a datagram starting
# with "twice" is answered again 0.3 s later. ICMP errors about the flows (IP_RECVERR) are
# logged on stderr: "icmp type T code C about ADDR:PORT".
import hashlib, http.server, select, socket, socketserver, struct, sys, threading
name, http_port, session_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
vip, udp_ports = (sys.argv[4], [int(p) for p in sys.argv[5:]]) if len(sys.argv) > 4 else (None, [])

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        body = (name + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

def echo(conn):
    conn.sendall((name + "\n").encode())
    for line in conn.makefile("rb"):
        conn.sendall(line)

def sessions():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", session_port))
    srv.listen(16)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()

IP_RECVERR = getattr(socket, "IP_RECVERR", 11)

def icmp_errors(s):
    # The error queue says which flow each ICMP error was about and what it was. (The pending
    # error the kernel also reports on the next send or receive says neither, and any thread
    # may consume it: the queue is what counts.)
    while True:
        try:
            _, anc, _, addr = s.recvmsg(2048, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except OSError:
            return
        for level, kind, data in anc:
            if level == socket.SOL_IP and kind == IP_RECVERR:
                _, origin, typ, code = struct.unpack_from("=IBBB", data)
                print("icmp type %d code %d about %s:%d" % (typ, code, addr[0], addr[1]),
                      file=sys.stderr, flush=True)

def send(s, answer, peer):
    # A send fails when it meets the pending error of another flow's ICMP error: send again.
    for _ in range(5):
        try:
            s.sendto(answer, peer)
            return
        except ConnectionRefusedError:
            pass

def udp_service(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
    s.bind((vip, port))
    poll = select.poll()
    poll.register(s, select.POLLIN | select.POLLERR)
    while True:
        poll.poll()
        icmp_errors(s)
        try:
            data, peer = s.recvfrom(65535, socket.MSG_DONTWAIT)
        except (BlockingIOError, ConnectionRefusedError):
            continue
        answer = ("%s %d %s" % (name, len(data), hashlib.sha256(data).hexdigest())).encode()
        send(s, answer, peer)
        if data.startswith(b"twice"):
            threading.Timer(0.3, send, (s, answer, peer)).start()

if session_port:
    threading.Thread(target=sessions, daemon=True).start()
for p in udp_ports:
    threading.Thread(target=udp_service, args=(p,), daemon=True).start()
Server(("0.0.0.0", http_port), Handler).serve_forever()
