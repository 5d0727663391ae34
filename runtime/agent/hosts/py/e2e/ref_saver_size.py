"""What the reference's own durable checkpointers store per run of the bench
graph (testdata/graphs/py-agent/bench.py), to set beside the pages Slipway's
agent.db uses per run (bench_bytes.py). Compiles the graph's builder with
langgraph-checkpoint-postgres's AsyncPostgresSaver, then with
langgraph-checkpoint-sqlite's AsyncSqliteSaver, runs argv[1] runs on each,
every one on a fresh thread_id with input {"messages": [{"role": "user",
"content": "hi"}]} and the default durability, and prints per run: rows per
table; for Postgres, after VACUUM (and again after VACUUM FULL), each
checkpoint table's pg_total_relation_size (heap + TOAST + indexes),
pg_relation_size (the heap alone), pg_indexes_size and the rows' own bytes
(sum of pg_column_size of the rows); for SQLite the file's size after a
TRUNCATE checkpoint of its WAL, and again after VACUUM. Used for
BENCHMARKS.md ("Admission and bytes per run: the write-behind journal").

Needs a PostgreSQL server whose database it may write (it drops and recreates
the saver's tables) and a virtualenv with the graph's requirements and the
two savers:

    apt-get install -y postgresql && pg_ctlcluster 15 main start
    su postgres -c "psql -c \\"create user pgsize superuser password 'pgsize'\\" \\
        -c 'create database pgsize owner pgsize'"
    python3 -m venv /tmp/pgsize-venv
    grep -v '^#' testdata/graphs/py-agent/requirements.txt > /tmp/pgsize-constraints.txt
    /tmp/pgsize-venv/bin/pip install -r testdata/graphs/py-agent/requirements.txt
    /tmp/pgsize-venv/bin/pip install -c /tmp/pgsize-constraints.txt \\
        langgraph-checkpoint-postgres==3.2.0 langgraph-checkpoint-sqlite==3.1.2 \\
        'psycopg[binary]==3.3.9'
    /tmp/pgsize-venv/bin/python runtime/agent/hosts/py/e2e/ref_saver_size.py 2000 \\
        postgresql://pgsize:pgsize@127.0.0.1:5432/pgsize

argv[2] (the DSN) defaults to the one above; the SQLite file goes to a fresh
temporary directory. Only the checkpoint tables are counted (not the savers'
migrations table, nor anything a server keeps about threads and runs).
"""

import asyncio
import importlib.metadata
import importlib.util
import os
import sqlite3
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "..", "..", "testdata", "graphs", "py-agent", "bench.py")
INPUT = {"messages": [{"role": "user", "content": "hi"}]}
PG_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
SQLITE_TABLES = ["checkpoints", "writes"]


def load_builder():
    spec = importlib.util.spec_from_file_location("bench", os.path.normpath(BENCH))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.builder


async def run_all(graph, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        out = await graph.ainvoke(INPUT, {"configurable": {"thread_id": str(uuid.uuid4())}})
        assert len(out["messages"]) == 3, out
    return time.perf_counter() - t0


def kib(b: float) -> str:
    return f"{b / 1024:.2f}"


async def measure_postgres(builder, n: int, dsn: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        for t in PG_TABLES + ["checkpoint_migrations"]:
            await c.execute(f"DROP TABLE IF EXISTS {t}")
        version = (await (await c.execute("SHOW server_version")).fetchone())[0]
    print(f"postgres: server {version}")
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)
        secs = await run_all(graph, n)
    print(f"postgres: {n} runs in {secs:.1f} s")

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as c:
        for vacuum in ["VACUUM (ANALYZE)", "VACUUM (FULL, ANALYZE)"]:
            for t in PG_TABLES:
                await c.execute(f"{vacuum} {t}")
            await c.execute("CHECKPOINT")
            print(f"postgres after {vacuum}, per run (KiB):")
            print(f"  {'table':<18} {'rows':>6} {'total':>7} {'heap':>7} {'toast+':>7} {'indexes':>7} {'row bytes':>9}")
            sums = [0] * 6
            for t in PG_TABLES:
                row = await (await c.execute(
                    f"SELECT count(*), pg_total_relation_size('{t}'), pg_relation_size('{t}'),"
                    f" pg_table_size('{t}') - pg_relation_size('{t}'), pg_indexes_size('{t}'),"
                    f" coalesce(sum(pg_column_size(x.*)), 0) FROM {t} x")).fetchone()
                row = [int(v) for v in row]
                sums = [a + b for a, b in zip(sums, row)]
                rows, total, heap, toast, idx, data = row
                print(f"  {t:<18} {rows / n:>6.2f} {kib(total / n):>7} {kib(heap / n):>7} {kib(toast / n):>7}"
                      f" {kib(idx / n):>7} {kib(data / n):>9}")
            rows, total, heap, toast, idx, data = sums
            print(f"  {'all':<18} {rows / n:>6.2f} {kib(total / n):>7} {kib(heap / n):>7} {kib(toast / n):>7}"
                  f" {kib(idx / n):>7} {kib(data / n):>9}")
    print("  (toast+ = pg_table_size - pg_relation_size: TOAST with its index, free space and visibility maps;"
          " row bytes = sum(pg_column_size(row)))")


async def measure_sqlite(builder, n: int) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = os.path.join(tempfile.mkdtemp(prefix="ref-saver-size-"), "checkpoints.sqlite")
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)
        secs = await run_all(graph, n)
    print(f"sqlite: {n} runs in {secs:.1f} s ({path})")

    db = sqlite3.connect(path, isolation_level=None)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    print(f"sqlite: library {sqlite3.sqlite_version}, page size {page_size}, journal_mode "
          f"{db.execute('PRAGMA journal_mode').fetchone()[0]}")
    for t in SQLITE_TABLES:
        rows = db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        print(f"  {t:<12} rows per run {rows / n:.2f}")
    for step in ["wal_checkpoint(TRUNCATE)", "VACUUM"]:
        db.execute("VACUUM" if step == "VACUUM" else f"PRAGMA {step}")
        if step == "VACUUM":
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(path)
        free = db.execute("PRAGMA freelist_count").fetchone()[0] * page_size
        wal = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
        print(f"sqlite after {step}: file {kib(size / n)} KiB per run ({size} bytes, free pages {free},"
              f" wal {wal})")
        try:  # per table and index, where the library has the dbstat table
            parts = db.execute("SELECT name, sum(pgsize), sum(pgsize - unused) FROM dbstat GROUP BY name"
                               " ORDER BY name").fetchall()
            for name, pg, used in parts:
                print(f"  {name:<30} pages {kib(pg / n):>6} KiB per run, in use {kib(used / n):>6}")
        except sqlite3.OperationalError:
            pass
    db.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    dsn = sys.argv[2] if len(sys.argv) > 2 else "postgresql://pgsize:pgsize@127.0.0.1:5432/pgsize"
    for pkg in ["langgraph", "langgraph-checkpoint", "langchain-core", "langgraph-checkpoint-postgres",
                "psycopg", "psycopg-binary", "langgraph-checkpoint-sqlite", "aiosqlite"]:
        try:
            print(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            print(f"{pkg}: not installed")
    print(f"python {sys.version.split()[0]}, runs {n}, input {INPUT}")
    builder = load_builder()
    asyncio.run(measure_postgres(builder, n, dsn))
    asyncio.run(measure_sqlite(builder, n))


if __name__ == "__main__":
    main()
