-- The agent store's schema (store_pg*.go): a table per resource, keyed as
-- the bbolt store's buckets are, record bodies as the same JSON (bytea:
-- the bytes the engine wrote, decoded by the engine), and SQL indexes for
-- what the bbolt store indexes in buckets. Sort keys are the bbolt index
-- keys (bytea compares bytewise as bbolt does), so searches list in the
-- same order with the same tie-breaks.

create table threads (
	thread_id text collate "C" primary key,
	body bytea not null,
	status text collate "C" not null,
	active text not null default '',
	queue text[] not null default '{}',
	busy boolean not null,
	k_created bytea not null,   -- timeKey(created_at) ‖ id
	k_updated bytea not null,   -- timeKey(updated_at) ‖ id
	k_status bytea not null,    -- status ‖ 0x00 ‖ timeKey(created_at) ‖ id
	metas bytea[] not null      -- metadata posting prefixes (metaPrefix)
);
create index threads_created on threads (k_created);
create index threads_updated on threads (k_updated);
create index threads_status on threads (k_status);
create index threads_busy on threads (thread_id) where busy;
create index threads_metas on threads using gin (metas);

create table runs (
	run_id text collate "C" primary key,
	thread_id text collate "C" not null,
	body bytea not null
);

-- A thread's runs in admission order (idx_thread_runs): ids are UUIDv7,
-- and uuid compares as its 16 bytes do.
create table thread_runs (
	thread_id uuid not null,
	run_id uuid not null,
	primary key (thread_id, run_id)
);

create table checkpoints (
	thread_id uuid not null,
	seq bigint not null,
	checkpoint_id text collate "C" not null,
	body bytea not null,
	primary key (thread_id, seq)
);
create index checkpoints_id on checkpoints (thread_id, checkpoint_id);

-- Language-host checkpoint rows (the lg bucket): keys start with the
-- thread id (lgKey).
create table lg_rows (
	k bytea primary key,
	v bytea not null
);

create table assistants (
	assistant_id text collate "C" primary key,
	body bytea not null,
	graph_id text collate "C" not null,
	k_created bytea not null,
	k_updated bytea not null,
	k_graph bytea not null,     -- sortText(graph_id) ‖ 0x00 ‖ id
	k_name bytea not null,      -- sortText(name) ‖ 0x00 ‖ id
	metas bytea[] not null
);
create index assistants_created on assistants (k_created);
create index assistants_updated on assistants (k_updated);
create index assistants_graphsort on assistants (k_graph);
create index assistants_name on assistants (k_name);
create index assistants_graph on assistants (graph_id, k_created);
create index assistants_metas on assistants using gin (metas);

create table assistant_versions (
	assistant_id text collate "C" not null,
	version integer not null,
	body bytea not null,
	primary key (assistant_id, version)
);

create table items (
	k bytea primary key,        -- itemKey: namespace labels ‖ 0x00 ‖ key
	body bytea not null
);

create table crons (
	cron_id text collate "C" primary key,
	body bytea not null,
	assistant_id text collate "C" not null,
	thread_id text collate "C" not null,
	enabled boolean not null,
	k_c bytea not null,         -- sort text ‖ 0x00 ‖ id, per sort_by field
	k_u bytea not null,
	k_n bytea not null,
	k_e bytea not null,
	k_a bytea not null,
	k_t bytea not null,
	metas bytea[] not null
);
create index crons_created on crons (k_c);
create index crons_updated on crons (k_u);
create index crons_next on crons (k_n);
create index crons_end on crons (k_e);
create index crons_assistant_sort on crons (k_a);
create index crons_thread_sort on crons (k_t);
create index crons_assistant on crons (assistant_id, k_c);
create index crons_thread on crons (thread_id, k_c) where thread_id <> '';
create index crons_metas on crons using gin (metas);

-- Threads with a TTL by the expiry they were indexed under (idx_thread_ttl).
create table thread_ttl (
	at bigint not null,
	thread_id uuid not null,
	primary key (at, thread_id)
);

---- create above / drop below ----

drop table thread_ttl, crons, items, assistant_versions, assistants, lg_rows, checkpoints, thread_runs, runs, threads;
