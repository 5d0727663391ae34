package auth

import (
	"path"
	"strings"
)

// agentQuery reports whether a POST to the agent-relative path p only
// reads: the agent API's searches and counts, a thread's history and its
// state at a checkpoint, an assistant's versions, store searches, and a
// graph's UI bundle. Anything else, an app's custom routes included, is
// taken as a write. The list follows the agent API's routes
// (runtime/agent/agentapi/routes.go).
func agentQuery(p string) bool {
	seg := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	switch len(seg) {
	case 2:
		switch seg[0] + "/" + seg[1] {
		case "assistants/search", "assistants/count", "threads/search", "threads/count",
			"store/namespaces":
			return true
		}
		return seg[0] == "ui" // the UI bundle of a graph
	case 3:
		switch {
		case seg[0] == "assistants" && seg[2] == "versions",
			seg[0] == "threads" && seg[2] == "history",
			seg[0] == "runs" && seg[1] == "crons" && (seg[2] == "search" || seg[2] == "count"),
			seg[0] == "store" && seg[1] == "items" && seg[2] == "search":
			return true
		}
	case 4:
		// The SDK asks for the state at a checkpoint object with POST
		// /threads/{id}/state/checkpoint.
		return seg[0] == "threads" && seg[2] == "state" && seg[3] == "checkpoint"
	}
	return false
}
