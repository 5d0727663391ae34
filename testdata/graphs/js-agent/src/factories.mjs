// Graph factories: the export is a function of the run's config, called
// for each run (and state read), sync or async. The graph built depends on
// configurable.style; GREETING comes from the project's env file.
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";

const State = Annotation.Root({
  name: Annotation(),
  reply: Annotation(),
});

function build(config, how) {
  const style = config?.configurable?.style ?? "plain";
  const greet = (s) => {
    const text = `${process.env.GREETING ?? "(no GREETING)"} ${s.name}`;
    return { reply: `${style === "loud" ? text.toUpperCase() : text} (${how})` };
  };
  return new StateGraph(State).addNode("greet", greet).addEdge(START, "greet").addEdge("greet", END);
}

export function makeSync(config) {
  return build(config, "sync factory");
}

export async function makeAsync(config) {
  await new Promise((r) => setTimeout(r, 5));
  return build(config, "async factory").compile();
}
