"""Quick runs/s of the "steps" graph (three nodes, one checkpoint per
superstep, every checkpoint durable in Slipway) on an agent at argv[1]:
sequential runs on one thread, then 16 clients each on its own thread.
Used for BENCHMARKS.md (Python host vs JavaScript host)."""

import asyncio
import statistics
import sys
import time

import httpx

URL = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100


async def one(c: httpx.AsyncClient, thread: str, lat: list) -> None:
    t0 = time.perf_counter()
    r = await c.post(f"/threads/{thread}/runs/wait", json={"assistant_id": "steps", "input": {"steps": []}})
    r.raise_for_status()
    assert r.json()["steps"][-1] == "three", r.text
    lat.append(time.perf_counter() - t0)


async def main() -> None:
    async with httpx.AsyncClient(base_url=URL, timeout=60) as c:
        threads = [(await c.post("/threads", json={})).json()["thread_id"] for _ in range(16)]
        for _ in range(5):  # warm-up
            await one(c, threads[0], [])
        lat: list = []
        t0 = time.perf_counter()
        for _ in range(N):
            await one(c, threads[0], lat)
        seq = N / (time.perf_counter() - t0)
        p50 = statistics.median(lat) * 1000
        lat16: list = []

        async def client(th: str) -> None:
            for _ in range(N // 16 + 1):
                await one(c, th, lat16)

        t0 = time.perf_counter()
        await asyncio.gather(*(client(th) for th in threads))
        par = len(lat16) / (time.perf_counter() - t0)
        print(f"sequential {seq:.1f} runs/s (p50 {p50:.1f} ms), 16 clients {par:.1f} runs/s")


asyncio.run(main())
