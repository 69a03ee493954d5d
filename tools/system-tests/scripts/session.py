#!/usr/bin/env python3
# The long-lived client: connects to VIP:9000, prints the backend's name and its own port,
# then one echo round trip per line read from stdin ("ok N"); any failure prints "error ..."
# and exits 1.
import socket, sys
s = socket.create_connection((sys.argv[1], 9000), timeout=10)
f = s.makefile("rb")
print("backend", f.readline().decode().strip(), s.getsockname()[1], flush=True)
n = 0
for _ in sys.stdin:
    n += 1
    try:
        s.sendall(b"ping %d\n" % n)
        back = f.readline()
    except OSError as e:
        print("error", e, flush=True)
        sys.exit(1)
    if back != b"ping %d\n" % n:
        print("error", back, flush=True)
        sys.exit(1)
    print("ok", n, flush=True)
