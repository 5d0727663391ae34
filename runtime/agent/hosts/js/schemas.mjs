// JSON schemas of a graph's state, input, output and context, for
// GET /assistants/{id}/schemas and /subgraphs, found at run time as the
// reference server finds them, in order:
//  1. the project's LangGraph (@langchain/langgraph/zod/schema): StateSchema
//     states and zod states with LangGraph's registry (reducers, defaults,
//     jsonSchemaExtra);
//  2. the zod schemas themselves, through @langchain/core's converter: a
//     LangGraph without zod/schema (0.2.x, which the official templates
//     pin) or one that cannot convert a schema still has a typed state;
//  3. the graph's channels: an Annotation state has no runtime types, so
//     each key (of the state, the input and the output) is listed with any
//     value. A context given as an Annotation
//     (LangGraph 0.2.x keeps its channels on the builder) is listed so too:
//     clients see which keys a run's context (config_schema and
//     context_schema) takes.

// schemasOf returns {state, input, output, config}, null for a schema the
// graph does not define. libs: {schema: the zod/schema module or null,
// core: {toJsonSchema, isZodSchemaV3, isZodSchemaV4} or null}.
export function schemasOf(graph, libs) {
  const b = graph?.builder;
  const typed = (b && fromLibrary(graph, libs?.schema)) || (b && fromZod(b, libs?.core)) || null;
  if (typed) {
    if (typed.config == null) typed.config = annotationContext(b);
    return typed;
  }
  // A StateGraph's input and output are its builder's definitions (a
  // compiled graph's input channel is only __start__).
  return {
    state: channelSchema(Object.keys(b?.channels ?? graph?.channels ?? {}), "State"),
    input: channelSchema(specKeys(b?._inputDefinition) ?? channelKeys(graph?.inputChannels), "Input"),
    output: channelSchema(specKeys(b?._outputDefinition) ?? channelKeys(graph?.outputChannels), "Output"),
    config: annotationContext(b),
  };
}

// fromLibrary: LangGraph's own conversion. The state schema is the update
// schema (every key optional, reducers' input types), as the reference
// shows it. One failing conversion fails the tier (as the reference's), so
// the next tier answers for the whole graph.
function fromLibrary(graph, lib) {
  if (!lib) return null;
  try {
    const out = {
      state: lib.getUpdateTypeSchema?.(graph) ?? null,
      input: lib.getInputTypeSchema?.(graph) ?? null,
      output: lib.getOutputTypeSchema?.(graph) ?? null,
      config: lib.getConfigTypeSchema?.(graph) ?? null,
    };
    return Object.values(out).some((v) => v != null) ? out : null;
  } catch {
    return null;
  }
}

// fromZod converts the builder's zod schemas directly (no registry
// metadata); the input defaults to the state with nothing required.
function fromZod(b, core) {
  if (!core?.toJsonSchema) return null;
  const convert = (schema) => {
    if (!schema || typeof schema !== "object") return null;
    if (!(core.isZodSchemaV4?.(schema) || core.isZodSchemaV3?.(schema))) return null;
    try {
      return core.toJsonSchema(schema) ?? null;
    } catch {
      return null;
    }
  };
  const state = convert(b._schemaRuntimeDefinition);
  const input = convert(b._inputRuntimeDefinition) ?? (state ? { ...state, required: undefined } : null);
  const output = convert(b._outputRuntimeDefinition);
  const config = convert(b._configRuntimeSchema);
  if (!state && !input && !output && !config) return null;
  return { state, input, output, config };
}

// annotationContext: LangGraph 0.2.x keeps an Annotation context's
// channels as the builder's _configSchema (later versions keep only zod
// contexts, which the tiers above convert).
function annotationContext(b) {
  const spec = b?._configSchema;
  if (!spec || typeof spec !== "object" || Object.keys(spec).length === 0) return null;
  return channelSchema(Object.keys(spec), "Configuration");
}

// channelSchema describes channels without runtime types: an object with
// one property per channel, as loose as the types the runtime knows.
export function channelSchema(keys, title) {
  const properties = {};
  for (const k of keys) if (!k.startsWith("__")) properties[k] = {};
  return { type: "object", title, properties };
}

function specKeys(spec) {
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) return null;
  const keys = Object.keys(spec);
  return keys.length ? keys : null;
}

function channelKeys(channels) {
  if (Array.isArray(channels)) return channels;
  if (typeof channels === "string") return [channels];
  return Object.keys(channels ?? {});
}
