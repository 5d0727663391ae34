// Module resolution hook of Slipway's JavaScript language host.
//
// The host's own files (and TypeScript graphs Slipway transpiled) live in
// the agent's data directory, outside the user's project. Bare imports of
// LangGraph and LangChain from there, and from the user's code, must reach
// the single copy installed in the project: two copies would mean two
// `Command`, `interrupt` and `Send` classes that do not recognise each
// other's objects.
import { pathToFileURL } from "node:url";
import path from "node:path";

let projectURL;

export async function initialize(data) {
  projectURL = pathToFileURL(path.join(data.projectDir, "package.json")).href;
}

const pinned = /^@langchain\/(langgraph|langgraph-checkpoint|core)(\/|$)/;

export async function resolve(specifier, context, next) {
  const bare = !specifier.startsWith(".") && !specifier.startsWith("/") && !/^[a-z]+:/.test(specifier);
  if (bare && projectURL && (pinned.test(specifier) || !isInside(context.parentURL))) {
    return next(specifier, { ...context, parentURL: projectURL });
  }
  return next(specifier, context);
}

// isInside: is the importing file within the project (then its own
// node_modules lookup is right)?
function isInside(parentURL) {
  if (!parentURL) return false;
  const projectDir = projectURL.slice(0, -"package.json".length);
  return parentURL.startsWith(projectDir);
}
