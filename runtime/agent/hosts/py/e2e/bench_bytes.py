"""Bytes written per run: starts `slipway agent` (argv[1], the binary) on
a fresh data directory with the project at argv[2] (a langgraph.json),
warms up, then runs argv[4] runs of graph argv[3], each on a fresh thread
(create thread, POST /threads/{id}/runs/wait) from argv[5] clients
(default 1), and prints the agent
process's write_bytes from /proc/<pid>/io per run, the bytes the data
directory's block device took per run (/sys/dev/block/<dev>/stat: the
whole machine's writes to it, so run it on a quiet machine), the runs'
wall time and the pages agent.db uses. Python and JavaScript graphs alike (the host
is a child process; its own writes, none to the database, are not
counted). Used for BENCHMARKS.md ("Bytes per run").

    python runtime/agent/hosts/py/e2e/bench_bytes.py /tmp/slipway \\
        testdata/graphs/py-agent/bench.json bench 1000 16
"""

import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import httpx


def write_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/<pid>/io")


def device_bytes(path: str) -> int:
    """Bytes written to the block device holding path since boot. Since
    Linux's page cache uses large folios (6.x on ext4), write_bytes counts
    a whole folio, up to 2 MiB, each time a clean one is dirtied: a
    512-byte append and its fdatasync count 2 MiB there, while the device
    takes a few KiB. The device's own count is what reaches the disk,
    ext4's journal included."""
    st = os.stat(path)
    with open(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat") as f:
        return int(f.read().split()[6]) * 512  # sectors written


def used_bytes(path: str) -> int:
    """The database's high-water mark: pages in use or free inside it, from
    bbolt's newer meta page (the file itself grows in 16 MiB steps)."""
    with open(path, "rb") as f:
        head = f.read(8192)
    page_size = struct.unpack_from("<I", head, 24)[0]
    with open(path, "rb") as f:
        metas = [f.read(page_size), f.read(page_size)]
    best = max(metas, key=lambda m: struct.unpack_from("<Q", m, 64)[0])  # txid
    return struct.unpack_from("<Q", best, 56)[0] * page_size  # pgid: high-water mark


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    binary, config, graph, n = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    clients = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    data = tempfile.mkdtemp(prefix="slipway-bytes-")
    port = free_port()
    env = dict(os.environ, SLIPWAY_AGENT_ADDR=f"127.0.0.1:{port}", SLIPWAY_AGENT_DATA_DIR=data,
               SLIPWAY_GRAPH_CONFIG=config, SLIPWAY_LOG_LEVEL="warn")
    if "SLIPWAY_AGENT_PYTHON" not in env:
        env["SLIPWAY_AGENT_PYTHON"] = sys.executable
    agent = subprocess.Popen([binary, "agent"], env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=60) as c:
            for _ in range(600):
                try:
                    if c.get("/ok").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)

            def run() -> None:
                t = c.post("/threads", json={}).json()["thread_id"]
                r = c.post(f"/threads/{t}/runs/wait", json={"assistant_id": graph, "input": {"messages": [{"role": "user", "content": "hi"}]}})
                r.raise_for_status()

            def client(k: int) -> None:
                for _ in range(k):
                    run()

            def concurrently(k: int) -> None:
                workers = [threading.Thread(target=client, args=(k // clients,)) for _ in range(clients)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()

            for _ in range(20):
                run()
            # SLIPWAY_BENCH_WARMUP more runs before measuring: the journal
            # zero-fills its first segments as they grow and reuses retired
            # ones without, so a measure of the steady state starts after
            # two segments (about 1,800 runs of the bench graph).
            warm = int(os.environ.get("SLIPWAY_BENCH_WARMUP", "0"))
            if warm:
                concurrently(warm)
                warm = warm // clients * clients
            time.sleep(1)
            before, dev_before = write_bytes(agent.pid), device_bytes(data)
            t0 = time.perf_counter()
            concurrently(n)
            n = n // clients * clients
            elapsed = time.perf_counter() - t0
            time.sleep(1)
            after, dev_after = write_bytes(agent.pid), device_bytes(data)
        used = used_bytes(os.path.join(data, "agent.db"))
        jdir = os.path.join(data, "agent.db.journal")
        journal = sum(os.path.getsize(os.path.join(jdir, f)) for f in os.listdir(jdir)) if os.path.isdir(jdir) else 0
        print(f"{n} runs, {clients} clients: {(after - before) / n / 1024:.1f} KiB written per run (write_bytes), "
              f"{(dev_after - dev_before) / n / 1024:.1f} KiB per run reached the device, {n / elapsed:.1f} runs/s, agent.db {used / 1024 / 1024:.1f} MiB used after {n + 20 + warm} runs "
              f"({used / (n + 20 + warm) / 1024:.1f} KiB a run), journal {journal / 1024 / 1024:.1f} MiB, "
              f"load {os.getloadavg()[0]:.1f}")
    finally:
        agent.terminate()
        agent.wait()
        if os.environ.get("SLIPWAY_BENCH_KEEP"):
            print("data directory kept:", data)
        else:
            subprocess.run(["rm", "-rf", data])


main()
