// The long-term memory store of Slipway's JavaScript language host: a
// BaseStore whose items live in Slipway's store (the one the /store API
// serves), reached over the host channel. A graph's `config.store` (and
// `getStore()`) is this store, so an item a node puts is visible through
// the API at once, and an item put through the API is read by the node.
//
// `lib` is the project's @langchain/langgraph-checkpoint module (so the
// store is an instance of the user's own BaseStore), `call(method, params)`
// sends a request to Slipway.
export function createStore(lib, call) {
  const { BaseStore } = lib;
  // @langchain/langgraph-checkpoint before 0.0.9 (the official templates'
  // older lock files) has no store: its graphs cannot take one.
  if (typeof BaseStore !== "function") return undefined;

  const item = (it) =>
    it && {
      namespace: it.namespace,
      key: it.key,
      value: it.value,
      createdAt: new Date(it.created_at),
      updatedAt: new Date(it.updated_at),
    };

  class SlipwayStore extends BaseStore {
    // batch is the one method a BaseStore must implement; get, search,
    // put, delete and listNamespaces are built on it. Operations run in
    // order, each a request to Slipway.
    async batch(operations) {
      const out = [];
      for (const op of operations) out.push(await this._one(op));
      return out;
    }

    async _one(op) {
      if ("namespacePrefix" in op) {
        const items = await call("store.search", {
          namespace_prefix: op.namespacePrefix,
          filter: op.filter ?? null,
          query: op.query ?? "",
          limit: op.limit ?? 10,
          offset: op.offset ?? 0,
        });
        return items.map(item);
      }
      if ("matchConditions" in op || "maxDepth" in op) {
        const prefix = op.matchConditions?.find((c) => c.matchType === "prefix")?.path ?? [];
        const suffix = op.matchConditions?.find((c) => c.matchType === "suffix")?.path;
        const limit = op.limit ?? 100;
        const offset = op.offset ?? 0;
        // Slipway filters by prefix; a suffix (rare) is filtered here,
        // before paging.
        let spaces = await call("store.listNamespaces", {
          prefix,
          max_depth: op.maxDepth ?? 0,
          limit: suffix ? 1 << 20 : limit,
          offset: suffix ? 0 : offset,
        });
        if (suffix) {
          spaces = spaces.filter((ns) => suffix.every((l, i) => l === "*" || ns[ns.length - suffix.length + i] === l)).slice(offset, offset + limit);
        }
        return spaces;
      }
      if ("value" in op) {
        if (op.value === null || op.value === undefined) {
          await call("store.delete", { namespace: op.namespace, key: op.key });
        } else {
          await call("store.put", { namespace: op.namespace, key: op.key, value: op.value });
        }
        return undefined;
      }
      return item(await call("store.get", { namespace: op.namespace, key: op.key })) ?? null;
    }
  }

  return new SlipwayStore();
}
