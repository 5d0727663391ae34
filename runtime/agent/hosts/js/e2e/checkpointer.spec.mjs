// Runs @langchain/langgraph-checkpoint-validation against the JavaScript
// host's checkpointer, talking to a real `slipway agent`.
//
// The saver under test lives in the host process `slipway agent` started
// (its storage is the agent's database, reached over the host channel); the
// agent serves testdata/graphs/js-agent/conformance.json, whose one graph
// relays the host saver's methods on the Unix socket SAVER_RELAY. The
// checkpointer handed to the suite forwards each call there, arguments and
// results as the serializer's typed bytes.
import net from "node:net";
import { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { validate } from "@langchain/langgraph-checkpoint-validation";

const socketPath = process.env.SAVER_RELAY;
if (!socketPath) throw new Error("SAVER_RELAY (the relay's socket path) is not set");

class Relay {
  constructor(path) {
    this.next = 0;
    this.pending = new Map();
    this.conn = net.createConnection(path);
    this.conn.setEncoding("utf8");
    let buf = "";
    this.conn.on("data", (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        const p = this.pending.get(msg.id);
        this.pending.delete(msg.id);
        if (msg.e) p.reject(Object.assign(new Error(msg.e.message), { name: msg.e.type }));
        else p.resolve(msg.r);
      }
    });
    this.conn.on("error", (err) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    });
  }

  call(m, a) {
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.conn.write(JSON.stringify({ id, m, a }) + "\n");
    });
  }

  close() {
    this.conn.end();
  }
}

// RelayedSaver is the host's saver, seen from this process.
class RelayedSaver extends BaseCheckpointSaver {
  constructor(relay) {
    super();
    this.relay = relay;
  }

  async _call(m, ...args) {
    const [t, b] = await this.serde.dumpsTyped(args);
    const r = await this.relay.call(m, { t, b: Buffer.from(b).toString("base64") });
    const out = await this.serde.loadsTyped(r.t, new Uint8Array(Buffer.from(r.b, "base64")));
    return out.undefined ? undefined : out.value;
  }

  getTuple(config) {
    return this._call("getTuple", config);
  }

  async *list(config, options) {
    for (const tuple of await this._call("list", config, options)) yield tuple;
  }

  put(config, checkpoint, metadata, newVersions) {
    return this._call("put", config, checkpoint, metadata, newVersions);
  }

  putWrites(config, writes, taskId, taskPath) {
    return this._call("putWrites", config, writes, taskId, taskPath);
  }

  deleteThread(threadId) {
    return this._call("deleteThread", threadId);
  }
}

let relay;

validate({
  checkpointerName: "slipway-js-host",
  beforeAll() {
    relay = new Relay(socketPath);
  },
  afterAll() {
    relay?.close();
  },
  // The agent's database is shared by every checkpointer the suite
  // creates, so each starts from an empty one: the suite's list tests
  // read across threads.
  async createCheckpointer() {
    const saver = new RelayedSaver(relay);
    const threads = new Set();
    for await (const tuple of saver.list({})) threads.add(tuple.config.configurable.thread_id);
    for (const thread of threads) await saver.deleteThread(thread);
    return saver;
  },
});
