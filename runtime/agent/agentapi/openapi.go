package agentapi

import (
	"slipway/runtime/agent"
	"slipway/server/apidoc"
)

// Response shapes the handlers write as maps, named for the document.
type (
	// StateUpdated is the answer of POST /threads/{id}/state.
	StateUpdated struct {
		Checkpoint agent.CheckpointRef `json:"checkpoint"`
	}
	// StoreItems is the answer of POST /store/items/search.
	StoreItems struct {
		Items []agent.Item `json:"items"`
	}
	// StoreNamespaces is the answer of POST /store/namespaces.
	StoreNamespaces struct {
		Namespaces [][]string `json:"namespaces"`
	}
)

// OpenAPIDoc is the document of `slipway agent`'s API.
func OpenAPIDoc(version string) *apidoc.Doc {
	anyV := apidoc.Schema{}
	ok := func(body any) []apidoc.Resp { return []apidoc.Resp{{Status: 200, Body: body}} }
	stream := []apidoc.Resp{{Status: 200, Body: anyV, Stream: true,
		Description: "A run (create), its final values (wait), or with /stream a text/event-stream of the run's events (`metadata`, `values`, `updates`, `messages`..., `end`)."}}
	as, th, runs, st, srv, cr, ui := "Assistants", "Threads", "Runs", "Store", "Server", "Crons", "UI"
	pub := true
	op := func(method, path, id, summary, tag string, body any, resps []apidoc.Resp) apidoc.Op {
		return apidoc.Op{Method: method, Path: path, ID: id, Summary: summary, Tag: tag, Public: pub, Body: body, BodyOptional: true, Responses: resps}
	}
	// query documents an op's query parameters; their 422s are field
	// errors at ["query", name] (httpx.QueryInt, LimitOffset, QueryBool).
	query := func(o apidoc.Op, params ...apidoc.Param) apidoc.Op { o.Query = params; return o }
	flag := func(name, desc string) apidoc.Param {
		return apidoc.Param{Name: name, Description: desc, Schema: apidoc.Schema{"type": "boolean"}}
	}
	limit := apidoc.Param{Name: "limit", Description: "1 to 1000 (default 10).", Schema: apidoc.Schema{"type": "integer", "minimum": 1, "maximum": maxLimit}}
	offset := apidoc.Param{Name: "offset", Schema: apidoc.Schema{"type": "integer", "minimum": 0}}
	ops := []apidoc.Op{
		op("GET", "/ok", "ok", "Liveness", srv, nil, ok(apidoc.Schema{"type": "object", "properties": apidoc.Schema{"ok": apidoc.Schema{"type": "boolean"}}})),
		op("GET", "/info", "info", "Version and features", srv, nil, ok(apidoc.JSON)),
		op("GET", "/openapi.json", "openapi", "This document", srv, nil, ok(apidoc.JSON)),
		op("GET", "/docs", "docs", "This document as a page", srv, nil, []apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "text/html"}}),
		op("POST", "/assistants", "create_assistant", "Create an assistant", as, apidoc.JSON, ok(agent.Assistant{})),
		op("POST", "/assistants/:assistant_id", "search_assistants", "Search (assistant_id: search) or count (count) assistants", as, apidoc.JSON, ok(anyV)),
		op("GET", "/assistants/:assistant_id", "get_assistant", "Get an assistant (or a graph id's default assistant)", as, nil, ok(agent.Assistant{})),
		op("PATCH", "/assistants/:assistant_id", "patch_assistant", "Update an assistant (a new version)", as, apidoc.JSON, ok(agent.Assistant{})),
		op("DELETE", "/assistants/:assistant_id", "delete_assistant", "Delete an assistant", as, nil, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		op("GET", "/assistants/:assistant_id/graph", "get_assistant_graph", "The assistant's graph (nodes and edges)", as, nil, ok(apidoc.JSON)),
		op("GET", "/assistants/:assistant_id/schemas", "get_assistant_schemas", "The assistant's input, output, state and config schemas", as, nil, ok(apidoc.JSON)),
		query(op("GET", "/assistants/:assistant_id/subgraphs", "get_assistant_subgraphs", "The schemas of the assistant's subgraphs by namespace (recurse: nested ones too)", as, nil, ok(apidoc.JSON)),
			flag("recurse", "Nested subgraphs too.")),
		query(op("GET", "/assistants/:assistant_id/subgraphs/:namespace", "get_assistant_subgraphs_by_namespace", "The schemas of one subgraph (recurse: and its nested ones)", as, nil, ok(apidoc.JSON)),
			flag("recurse", "Nested subgraphs too.")),
		op("POST", "/assistants/:assistant_id/versions", "list_assistant_versions", "List an assistant's versions", as, apidoc.JSON, ok([]agent.Assistant{})),
		op("POST", "/assistants/:assistant_id/latest", "set_latest_assistant_version", "Make a version the current one", as, apidoc.JSON, ok(agent.Assistant{})),
		op("POST", "/threads", "create_thread", "Create a thread; supersteps (with metadata.graph_id) apply state updates to it, each superstep one checkpoint, all or nothing", th, ThreadCreate{}, ok(agent.Thread{})),
		op("POST", "/threads/:thread_id", "search_threads", "Search (thread_id: search) or count (count) threads; prune: apply a TTL strategy now (body ThreadPrune, answer PruneResult)", th, apidoc.JSON, ok(anyV)),
		query(op("GET", "/threads/:thread_id", "get_thread", "Get a thread (include=ttl: with its TTL)", th, nil, ok(agent.Thread{})),
			apidoc.Param{Name: "include", Description: "ttl: add the thread's ttl {strategy, ttl_minutes, expires_at} when it has one.", Schema: apidoc.Schema{"type": "string"}}),
		op("PATCH", "/threads/:thread_id", "patch_thread", "Update a thread's metadata (and ttl: its time-to-live, from now)", th, apidoc.JSON, ok(agent.Thread{})),
		op("DELETE", "/threads/:thread_id", "delete_thread", "Delete a thread", th, nil, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		query(op("GET", "/threads/:thread_id/state", "get_thread_state", "A thread's current state", th, nil, ok(threadState{})),
			flag("subgraphs", "Include the subgraphs' states.")),
		query(op("GET", "/threads/:thread_id/state/:checkpoint_id", "get_thread_state_at", "A thread's state at a checkpoint", th, nil, ok(threadState{})),
			flag("subgraphs", "Include the subgraphs' states.")),
		op("POST", "/threads/:thread_id/state", "update_thread_state", "Update a thread's state (a new checkpoint)", th, apidoc.JSON, ok(StateUpdated{})),
		op("POST", "/threads/:thread_id/state/:checkpoint_id", "get_thread_state_at_post", "A thread's state at a checkpoint (POST form)", th, apidoc.JSON, ok(threadState{})),
		query(op("GET", "/threads/:thread_id/history", "get_thread_history", "A thread's checkpoints, newest first", th, nil, ok([]agent.Checkpoint{})), limit),
		op("POST", "/threads/:thread_id/history", "search_thread_history", "A thread's checkpoints, filtered", th, apidoc.JSON, ok([]agent.Checkpoint{})),
		op("POST", "/threads/:thread_id/copy", "copy_thread", "Copy a thread with its checkpoints", th, nil, ok(agent.Thread{})),
		op("POST", "/runs", "create_stateless_run", "Start a run on a temporary thread", runs, agent.RunCreate{}, stream),
		op("POST", "/runs/:action", "stateless_run_action", "Stateless runs: stream, wait, or batch; crons: create a stateless cron; cancel: cancel runs (body RunsCancel, query action=interrupt|rollback; 204, or 404 when none could be)", runs, anyV, append(stream, apidoc.Resp{Status: 204, Description: "cancel: the runs are cancelled (running ones already recorded interrupted)."})),
		op("POST", "/threads/:thread_id/runs", "create_run", "Start a run on a thread", runs, agent.RunCreate{}, stream),
		query(op("GET", "/threads/:thread_id/runs", "list_runs", "List a thread's runs", runs, nil, ok([]agent.Run{})), limit, offset,
			apidoc.Param{Name: "status", Schema: apidoc.Schema{"type": "string"}}),
		op("POST", "/threads/:thread_id/runs/:run_id", "run_action", "Start a run and stream (run_id: stream) or wait for it (wait); crons: create a cron on the thread", runs, agent.RunCreate{}, stream),
		op("GET", "/threads/:thread_id/runs/:run_id", "get_run", "Get a run", runs, nil, ok(agent.Run{})),
		op("DELETE", "/threads/:thread_id/runs/:run_id", "delete_run", "Delete a run", runs, nil, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		op("GET", "/threads/:thread_id/runs/:run_id/join", "join_run", "Wait for a run and get the thread's values", runs, nil, ok(anyV)),
		op("GET", "/threads/:thread_id/runs/:run_id/stream", "join_run_stream", "Follow a run's events", runs, nil, []apidoc.Resp{{Status: 200, Body: apidoc.SSE, ContentType: "text/event-stream"}}),
		op("POST", "/threads/:thread_id/runs/:run_id/cancel", "cancel_run", "Cancel a run", runs, nil, []apidoc.Resp{{Status: 200, Body: anyV}, {Status: 202, Description: "Cancelled: the run is recorded interrupted (or, pending with action=rollback, deleted) already; a running one stops at its next step, and a rollback deletes it then."}, {Status: 204}}),
		op("POST", "/runs/:action/:cron_id", "search_crons", "Search (action: crons, cron_id: search) or count (count) crons", cr, apidoc.JSON, ok(anyV)),
		op("GET", "/runs/:action/:cron_id", "get_cron", "Get a cron (action: crons)", cr, nil, ok(agent.Cron{})),
		op("PATCH", "/runs/:action/:cron_id", "update_cron", "Update a cron (action: crons): its schedule, timezone, end_time, enabled, on_run_completed, metadata, and its run request's fields", cr, apidoc.JSON, ok(agent.Cron{})),
		op("DELETE", "/runs/:action/:cron_id", "delete_cron", "Delete a cron (action: crons)", cr, nil, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		op("POST", "/ui/:graph_id", "get_ui", "The HTML that loads a graph's generative UI component (its stylesheet, and its script rendering the named component)", ui, uiRequest{},
			[]apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "text/html"}}),
		op("GET", "/ui/:graph_id/:file", "get_ui_file", "A file of a graph's generative UI bundle (no credential needed behind Slipway's proxy, at the URL POST /ui/{graph_id} names)", ui, nil,
			[]apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "text/javascript"}}),
		op("PUT", "/store/items", "put_store_item", "Store an item", st, apidoc.JSON, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		{Method: "GET", Path: "/store/items", ID: "get_store_item", Summary: "Get an item", Tag: st, Public: true,
			Query:     []apidoc.Param{{Name: "key", Required: true}, {Name: "namespace", Description: "Dot-separated namespace.", Schema: apidoc.Schema{"type": "string"}}},
			Responses: ok(agent.Item{})},
		op("DELETE", "/store/items", "delete_store_item", "Delete an item", st, apidoc.JSON, []apidoc.Resp{{Status: 204}, {Status: 200, Body: anyV}}),
		op("POST", "/store/items/search", "search_store_items", "Search items", st, apidoc.JSON, ok(StoreItems{})),
		op("POST", "/store/namespaces", "list_store_namespaces", "List namespaces", st, apidoc.JSON, ok(StoreNamespaces{})),
	}
	return &apidoc.Doc{
		Title:   "Slipway agent server",
		Version: version,
		Description: "The LangGraph agent API a deployment serves (assistants, threads, runs, store). Behind Slipway's proxy it is /agents/{name}/..., with Slipway's credentials; " +
			"the agent itself checks none, so it listens only where the proxy reaches it. Errors are {\"detail\": \"...\"}, and 422 is an HTTPValidationError.",
		Ops:             ops,
		StringDetail422: true,
		Enums: map[string][]string{
			"Run.status":             {agent.RunPending, agent.RunRunning, agent.RunSuccess, agent.RunError, agent.RunTimeout, agent.RunInterrupted},
			"Thread.status":          {agent.ThreadIdle, agent.ThreadBusy, agent.ThreadInterrupted, agent.ThreadError},
			"Run.multitask_strategy": {agent.StrategyReject, agent.StrategyInterrupt, agent.StrategyRollback, agent.StrategyEnqueue},
		},
	}
}
