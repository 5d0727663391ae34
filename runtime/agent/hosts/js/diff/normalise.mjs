// Normalising what a client saw so two servers' records compare: every
// UUID becomes <id:N>, numbered by first appearance in a walk that visits
// object keys in sorted order (so the servers' key order does not matter
// while the relations between ids — a parent checkpoint, a run's thread —
// still must match); times become <time>; a host's process id <pid>.
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
// Interrupt ids: a hash of the interrupted task's namespace, itself made of
// run-specific ids.
const HEX32 = /\b[0-9a-f]{32}\b/g;
const ISO_TIME = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?/g;
const TIME_KEYS = new Set(["created_at", "updated_at", "timestamp"]);

// drop(path) says whether a path's value leaves the comparison (an allowed
// difference): it is removed before ids are numbered, so that a field one
// server has and the other lacks does not renumber every id after it.
export function normalise(value, drop = () => false) {
  const ids = new Map();
  const walk = (v, key, path) => {
    if (typeof v === "string") {
      if (TIME_KEYS.has(key)) return "<time>";
      return v
        .replace(UUID, (u) => {
          const k = u.toLowerCase();
          if (!ids.has(k)) ids.set(k, `<id:${ids.size + 1}>`);
          return ids.get(k);
        })
        .replace(HEX32, (h) => {
          if (!ids.has(h)) ids.set(h, `<id:${ids.size + 1}>`);
          return ids.get(h);
        })
        .replace(ISO_TIME, "<time>");
    }
    if (typeof v === "number" && (key === "pid" || TIME_KEYS.has(key))) return key === "pid" ? "<pid>" : "<time>";
    const at = (k) => (path ? `${path}.${k}` : String(k));
    if (Array.isArray(v)) return v.map((x, i) => walk(x, undefined, at(i)));
    if (v && typeof v === "object") {
      const out = {};
      for (const k of Object.keys(v).sort()) {
        // A key can be an id too (a thread's interrupts by task id).
        if (!drop(at(k))) out[walk(k, undefined, "")] = walk(v[k], k, at(k));
      }
      return out;
    }
    return v;
  };
  return walk(value, undefined, "");
}

const show = (v) => {
  const s = v === undefined ? "(absent)" : JSON.stringify(v);
  return s.length > 300 ? s.slice(0, 300) + "…" : s;
};

// diff lists where two normalised values differ, as {path, reference,
// slipway}; a path is dot-separated keys and array indexes.
export function diff(ref, got, path = "") {
  if (Object.is(ref, got)) return [];
  const bothObjects = ref && got && typeof ref === "object" && typeof got === "object" && Array.isArray(ref) === Array.isArray(got);
  if (!bothObjects) return [{ path, reference: show(ref), slipway: show(got) }];
  const keys = Array.isArray(ref)
    ? [...Array(Math.max(ref.length, got.length)).keys()]
    : [...new Set([...Object.keys(ref), ...Object.keys(got)])].sort();
  return keys.flatMap((k) => diff(ref[k], got[k], path ? `${path}.${k}` : String(k)));
}
