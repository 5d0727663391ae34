// The checkpointer of Slipway's JavaScript language host: a
// BaseCheckpointSaver whose storage is Slipway's database, reached over the
// host channel. Values travel as the serializer's opaque typed bytes
// ({t: type, b: base64}); Slipway never interprets them. A checkpoint
// travels without its channel values; each channel value travels once per
// version, as a blob keyed by (channel, version).
//
// `lib` is the project's @langchain/langgraph-checkpoint module (so the
// saver is the project's own BaseCheckpointSaver), `call(method, params)`
// sends a request to Slipway.
export function createSaver(lib, call) {
  const { BaseCheckpointSaver, TASKS, maxChannelVersion } = lib;
  // Older @langchain/langgraph-checkpoint releases (0.0.x, pinned by the
  // official templates' lock files) lack these helpers: the same rules,
  // as the library states them, stand in.
  const WRITES_IDX_MAP = lib.WRITES_IDX_MAP ?? { __error__: -1, __scheduled__: -2, __interrupt__: -3, __resume__: -4 };
  const getCheckpointId = lib.getCheckpointId ?? ((config) => config.configurable?.checkpoint_id || config.configurable?.thread_ts || "");
  const writesSortKey = lib.writesSortKey ?? ((taskPath, taskId, idx) => [taskPath, taskId ?? "", idx ?? 0]);
  const byCodePoint = (x, y) => {
    const a = [...x];
    const b = [...y];
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = a[i].codePointAt(0) - b[i].codePointAt(0);
      if (d !== 0) return d;
    }
    return a.length - b.length;
  };
  const compareWritesSortKeys = lib.compareWritesSortKeys ?? ((a, b) => byCodePoint(a[0], b[0]) || byCodePoint(a[1], b[1]) || a[2] - b[2]);

  const enc = ([t, b]) => ({ t, b: Buffer.from(b).toString("base64") });

  class SlipwaySaver extends BaseCheckpointSaver {
    async _dump(v) {
      return enc(await this.serde.dumpsTyped(v));
    }

    async _load(x) {
      return this.serde.loadsTyped(x.t, new Uint8Array(Buffer.from(x.b, "base64")));
    }

    async _tuple(row) {
      const checkpoint = await this._load(row.checkpoint);
      checkpoint.channel_values = {};
      for (const blob of row.blobs ?? []) {
        if (blob.t === "empty") continue;
        checkpoint.channel_values[blob.channel] = await this._load(blob);
      }
      const writes = sortedWrites(row.writes);
      if (checkpoint.v < 4 && row.parent_checkpoint_id) await this._migratePendingSends(checkpoint, row);
      const tuple = {
        config: { configurable: { thread_id: row.thread_id, checkpoint_ns: row.checkpoint_ns, checkpoint_id: row.checkpoint_id } },
        checkpoint,
        metadata: await this._load(row.metadata),
        pendingWrites: await Promise.all(writes.map(async (w) => [w.task_id, w.channel, await this._load(w)])),
      };
      if (row.parent_checkpoint_id) {
        tuple.parentConfig = {
          configurable: { thread_id: row.thread_id, checkpoint_ns: row.checkpoint_ns, checkpoint_id: row.parent_checkpoint_id },
        };
      }
      return tuple;
    }

    // Checkpoints before format 4 kept pending sends as the parent's
    // writes to TASKS rather than as a channel: read them as the channel,
    // as every LangGraph saver does, so an old thread resumes its sends.
    async _migratePendingSends(checkpoint, row) {
      const parent = await call("cp.getTuple", {
        thread_id: row.thread_id,
        checkpoint_ns: row.checkpoint_ns,
        checkpoint_id: row.parent_checkpoint_id,
      });
      const sends = await Promise.all(sortedWrites(parent?.writes).filter((w) => w.channel === TASKS).map((w) => this._load(w)));
      checkpoint.channel_values[TASKS] = sends;
      checkpoint.channel_versions ??= {};
      const versions = Object.values(checkpoint.channel_versions);
      checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
    }

    async getTuple(config) {
      const c = config.configurable ?? {};
      const row = await call("cp.getTuple", {
        thread_id: str(c.thread_id),
        checkpoint_ns: c.checkpoint_ns ?? "",
        checkpoint_id: getCheckpointId(config) || "",
      });
      return row ? this._tuple(row) : undefined;
    }

    async *list(config, options = {}) {
      const c = config?.configurable ?? {};
      const { limit, before, filter } = options;
      const rows = await call("cp.list", {
        thread_id: c.thread_id === undefined ? null : str(c.thread_id),
        checkpoint_ns: c.checkpoint_ns ?? null,
        checkpoint_id: c.checkpoint_id || "",
        before: before?.configurable?.checkpoint_id || "",
        filter: filter ?? null,
        limit: limit ?? 0,
      });
      for (const row of rows) yield await this._tuple(row);
    }

    async put(config, checkpoint, metadata, newVersions) {
      const c = config.configurable ?? {};
      if (c.thread_id === undefined) throw new Error('Failed to put checkpoint: the config has no "thread_id" in "configurable".');
      const { channel_values: values, ...skeleton } = checkpoint;
      const blobs = [];
      for (const [channel, version] of Object.entries(newVersions ?? {})) {
        const blob = channel in (values ?? {}) ? await this._dump(values[channel]) : { t: "empty", b: "" };
        blobs.push({ channel, version: String(version), ...blob });
      }
      const versions = Object.fromEntries(Object.entries(checkpoint.channel_versions ?? {}).map(([k, v]) => [k, String(v)]));
      const ns = c.checkpoint_ns ?? "";
      await call("cp.put", {
        run_id: c.run_id ?? "",
        thread_id: str(c.thread_id),
        checkpoint_ns: ns,
        checkpoint_id: checkpoint.id,
        parent_checkpoint_id: c.checkpoint_id || "",
        checkpoint: await this._dump({ ...skeleton, channel_values: {} }),
        metadata: await this._dump(metadata),
        metadata_json: plain(metadata),
        channel_versions: versions,
        blobs,
      });
      return { configurable: { thread_id: c.thread_id, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    }

    async putWrites(config, writes, taskId, taskPath) {
      const c = config.configurable ?? {};
      if (c.thread_id === undefined) throw new Error('Failed to put writes: the config has no "thread_id" in "configurable".');
      if (c.checkpoint_id === undefined) throw new Error('Failed to put writes: the config has no "checkpoint_id" in "configurable".');
      const rows = await Promise.all(
        writes.map(async ([channel, value], idx) => ({ channel, idx: WRITES_IDX_MAP[channel] || idx, ...(await this._dump(value)) })),
      );
      await call("cp.putWrites", {
        run_id: c.run_id ?? "",
        thread_id: str(c.thread_id),
        checkpoint_ns: c.checkpoint_ns ?? "",
        checkpoint_id: c.checkpoint_id,
        task_id: taskId,
        task_path: taskPath ?? "",
        writes: rows,
      });
    }

    async deleteThread(threadId) {
      await call("cp.deleteThread", { thread_id: str(threadId) });
    }
  }

  // sortedWrites orders a checkpoint's pending writes as LangGraph does (by task path, task id, index).
  function sortedWrites(writes) {
    return (writes ?? [])
      .slice()
      .sort((a, b) => compareWritesSortKeys(writesSortKey(a.task_path ?? "", a.task_id, a.idx), writesSortKey(b.task_path ?? "", b.task_id, b.idx)));
  }

  return new SlipwaySaver();
}

function str(v) {
  return typeof v === "string" ? v : String(v);
}

// plain is the metadata as JSON, for Slipway's list filters.
function plain(v) {
  try {
    return JSON.parse(JSON.stringify(v ?? {}));
  } catch {
    return {};
  }
}
