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
const checkpointPkg = /^@langchain\/langgraph-checkpoint(\/|$)/;

// langgraphEntry is where the project's @langchain/langgraph resolves to:
// the checkpoint package must be the copy it imports, which npm may have
// nested under it (a newer one than the copy hoisted to the project's
// node_modules for another dependency, such as @langchain/langgraph-cli).
let langgraphEntry;

export async function resolve(specifier, context, next) {
  const bare = !specifier.startsWith(".") && !specifier.startsWith("/") && !/^[a-z]+:/.test(specifier);
  // A package's own imports are npm's business: its node_modules layout
  // already names the copy each package was installed with.
  if (!bare || !projectURL || inPackage(context.parentURL)) {
    return next(specifier, context);
  }
  if (checkpointPkg.test(specifier)) {
    if (langgraphEntry === undefined) {
      try {
        langgraphEntry = (await next("@langchain/langgraph", { ...context, parentURL: projectURL })).url;
      } catch {
        langgraphEntry = projectURL; // no LangGraph in the project: the import fails as it would
      }
    }
    return next(specifier, { ...context, parentURL: langgraphEntry });
  }
  if (pinned.test(specifier) || !isInside(context.parentURL)) {
    return next(specifier, { ...context, parentURL: projectURL });
  }
  return next(specifier, context);
}

// inPackage: is the importing file part of an installed package (inside the
// project's node_modules)?
function inPackage(parentURL) {
  return isInside(parentURL) && parentURL.includes("/node_modules/");
}

// isInside: is the importing file within the project (then its own
// node_modules lookup is right)?
function isInside(parentURL) {
  if (!parentURL) return false;
  const projectDir = projectURL.slice(0, -"package.json".length);
  return parentURL.startsWith(projectDir);
}
