package agent

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"slipway/storage"
	"slipway/storage/errs"
)

// pgStore is the Store over PostgreSQL (store.go's contract; schema in
// pgmigrations/). Units of work are SERIALIZABLE transactions, retried
// on a serialization failure or a deadlock; reads are REPEATABLE READ
// snapshots. There is no journal: UpdateThread is an Update, because a
// PostgreSQL commit is already a group commit of one WAL flush, and a
// journal in front of it would be another process's invisible state
// (replicas read the database, not this process's memory).
type pgStore struct {
	pool *pgxpool.Pool
	// origin tells this store's notifications from other replicas'.
	origin string
	// channel is the LISTEN/NOTIFY channel of this store's schema
	// (pgChannelOf): stores of other schemas in the same database are
	// not replicas of this one.
	channel string
	subscribers
	stopListen context.CancelFunc
	listenDone chan struct{}
	// listenInPool: the listener holds one of the pool's connections
	// (listenConn).
	listenInPool bool
}

// pgTx is a PostgreSQL transaction as a Tx. err is the first database
// error of the unit (methods without an error result record theirs here):
// after it the transaction is aborted, so the unit fails with it.
type pgTx struct {
	ctx      context.Context
	tx       pgx.Tx
	confined bool // an UpdateThread: writes outside the thread's rows are refused
	locked   bool // a READ COMMITTED unit (pgIsoLocked): it locks the rows it depends on before it reads them
	origin   string
	channel  string
	events   []storeEvent
	err      error
}

//go:embed pgmigrations/*.sql
var pgMigrations embed.FS

// pgMigrationLock is the advisory lock that serializes opening stores on
// one database (tern's own lock covers the migration, not the creation
// of its version table).
const pgMigrationLock = int64(0x736c6970_77617900) // "slipway\0"

// pgMaxAttempts bounds the runs of a unit of work that keeps failing to
// serialize; pgRetryCap bounds the pause before one (pgRetryPause).
const (
	pgMaxAttempts = 20
	pgRetryCap    = 250 * time.Millisecond
)

// pgRetryPause is the pause after a unit's attempt failed to serialize:
// random up to a bound that doubles from 2 ms to pgRetryCap. Random, so
// units that collided do not run again in step and collide again; long
// enough in all (about 2 s expected over every attempt) to outlast the
// units it collided with on a loaded machine. (A fixed attempt² ms, 0.4 s
// in all, gave up under API + 2 workers at a load average of 5 to 7:
// BENCHMARKS.md, "Slipway on PostgreSQL against Aegra".)
func pgRetryPause(attempt int) time.Duration {
	bound := min(pgRetryCap, time.Millisecond<<min(attempt, 16))
	return rand.N(bound) + 1
}

// openPGStore connects to the database cfg names, applies the schema's
// migrations under an advisory lock, and starts listening for other
// replicas' notifications.
func openPGStore(ctx context.Context, cfg *pgxpool.Config) (*pgStore, error) {
	return openPGStoreBounded(ctx, cfg, false)
}

// openPGStoreBounded is openPGStore where bounded says cfg.MaxConns bounds
// every connection of the store, its listener's included (see listenConn).
func openPGStoreBounded(ctx context.Context, cfg *pgxpool.Config, bounded bool) (*pgStore, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the agent's PostgreSQL: %w", redactPG(err))
	}
	if err := migratePG(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &pgStore{pool: pool, origin: storage.NewID().String(), listenInPool: bounded && cfg.MaxConns >= 2}
	var schema string
	if err := pool.QueryRow(ctx, "select current_schema()").Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read the agent store's schema: %w", redactPG(err))
	}
	s.channel = pgChannelOf(schema)
	if err := s.listen(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// parsePGConfig parses a connection string (URL or key=value) without
// quoting it in its error: it holds a password.
func parsePGConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("the agent's PostgreSQL connection string does not parse")
	}
	return cfg, nil
}

// redactPG keeps a connection error's kind without its text, which may
// name the host, the user or the connection string.
func redactPG(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return errors.New("cannot reach the server")
	}
	return errors.New("connection failed")
}

// unavailablePG words, as errs.Unavailable, a failure to begin a unit of
// work that sending the request again may not meet: the role has no
// connection left (its CONNECTION LIMIT, which db_max_connections sets,
// taken by the replicas, or by a lost replica's connections the server has
// not noticed yet), or the server does not take connections now (it is
// starting or shutting down). Nothing was done yet. Other failures: nil.
func unavailablePG(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	switch pe.Code {
	case "53300": // too_many_connections
		return errs.New(errs.Unavailable, "The deployment's database has no connection free for this request (its role's connections, db_max_connections, are all in use); send it again.")
	case "57P03": // cannot_connect_now
		return errs.New(errs.Unavailable, "The deployment's database does not take connections now (it is starting or stopping); send the request again.")
	}
	return nil
}

// migratePG brings the schema to the newest version (tern, versions in
// pgmigrations/), one opener at a time.
func migratePG(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to the agent's PostgreSQL: %w", redactPG(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", pgMigrationLock); err != nil {
		return fmt.Errorf("lock the agent schema's migrations: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "select pg_advisory_unlock($1)", pgMigrationLock) }()
	m, err := migrate.NewMigrator(ctx, conn.Conn(), "agent_schema_version")
	if err != nil {
		return fmt.Errorf("agent schema migrations: %w", err)
	}
	sub, err := fs.Sub(pgMigrations, "pgmigrations")
	if err != nil {
		return err
	}
	if err := m.LoadMigrations(sub); err != nil {
		return fmt.Errorf("load the agent schema's migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate the agent schema: %w", err)
	}
	return nil
}

// Close stops the listener and closes the pool.
func (s *pgStore) Close() {
	if s.stopListen != nil {
		s.stopListen()
		<-s.listenDone
	}
	s.pool.Close()
}

// retryable reports a failure that running the unit again may not meet.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// pgIsoSerializable runs units of work: SERIALIZABLE gives them the
// contract's serializability without locking every row read.
var pgIsoSerializable = pgx.TxOptions{IsoLevel: pgx.Serializable}

// pgIsoLocked runs the units that order themselves with row locks
// instead (PutCheckpointRows, updateLocked): each statement sees what is
// committed.
var pgIsoLocked = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// pgIsoSnapshot runs reads: one snapshot of everything committed when
// the read began.
var pgIsoSnapshot = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// unit runs fn in a transaction, again on a serialization failure, at
// most pgMaxAttempts times; it returns the committed attempt's Tx.
func (s *pgStore) unit(ctx context.Context, opts pgx.TxOptions, confined bool, fn func(*pgTx) error) (*pgTx, error) {
	var last error
	for attempt := 1; attempt <= pgMaxAttempts; attempt++ {
		t, err := s.attempt(ctx, opts, confined, fn)
		if err == nil {
			return t, nil
		}
		if !retryable(err) {
			return nil, err
		}
		last = err
		// A growing, random pause lets the transaction it collided with
		// finish.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pgRetryPause(attempt)):
		}
	}
	return nil, fmt.Errorf("agent store: gave up after %d attempts: %w", pgMaxAttempts, last)
}

func (s *pgStore) attempt(ctx context.Context, opts pgx.TxOptions, confined bool, fn func(*pgTx) error) (*pgTx, error) {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		if u := unavailablePG(err); u != nil {
			return nil, u
		}
		return nil, fmt.Errorf("agent store: begin: %w", redactPG(err))
	}
	t := &pgTx{ctx: ctx, tx: tx, confined: confined, locked: opts.IsoLevel == pgx.ReadCommitted, origin: s.origin, channel: s.channel}
	ferr := fn(t)
	if t.err != nil {
		// The database failed first: what fn made of it (or of the
		// aborted transaction after it) is not the cause.
		ferr = t.err
	}
	if ferr != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, ferr
	}
	if err := t.notify(); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("agent store: commit: %w", err)
	}
	return t, nil
}

func (s *pgStore) Update(ctx context.Context, fn func(Tx) error) error {
	t, err := s.unit(ctx, pgIsoSerializable, false, func(t *pgTx) error { return fn(t) })
	if err == nil {
		s.publish(t.events)
	}
	return err
}

// UpdateThread is an Update that refuses writes outside the thread's own
// rows (errNotHot), as the contract says: nothing is journaled (see
// pgStore), and end has nothing to end (OpenFence is a no-op).
func (s *pgStore) UpdateThread(ctx context.Context, _ string, _ bool, fn func(Tx) error) error {
	t, err := s.unit(ctx, pgIsoSerializable, true, func(t *pgTx) error { return fn(t) })
	if err == nil {
		s.publish(t.events)
	}
	return err
}

// updateLocked is Update for a worker's claim (claimLeased), under READ
// COMMITTED: ClaimNextRun locks the thread's row and the row of the run
// it may claim before it reads them, so a unit that changes either
// commits before (and the claim sees it) or waits for the claim; a
// SERIALIZABLE unit that read them before then fails to serialize
// ("concurrent update") and runs again. See PutCheckpointRows for why.
func (s *pgStore) updateLocked(ctx context.Context, fn func(Tx) error) error {
	t, err := s.unit(ctx, pgIsoLocked, false, func(t *pgTx) error { return fn(t) })
	if err == nil {
		s.publish(t.events)
	}
	return err
}

func (s *pgStore) View(ctx context.Context, fn func(ReadTx) error) error {
	_, err := s.unit(ctx, pgIsoSnapshot, false, func(t *pgTx) error { return fn(t) })
	return err
}

func (s *pgStore) ViewThread(ctx context.Context, _ string, fn func(ReadTx) error) error {
	return s.View(ctx, fn)
}

func (s *pgStore) ViewCommitted(ctx context.Context, fn func(ReadTx) error) error {
	return s.View(ctx, fn)
}

// unconfined refuses, with errNotHot, a write outside the thread's own
// rows in an UpdateThread (as boltTx.unconfined).
func (t *pgTx) unconfined() error {
	if t.confined {
		return errNotHot
	}
	return nil
}

func (t *pgTx) note(ev storeEvent) { t.events = append(t.events, ev) }

// fail records the unit's first database error and returns err wrapped
// with what was being done.
func (t *pgTx) fail(what string, err error) error {
	if err == nil {
		return nil
	}
	if t.err == nil {
		t.err = fmt.Errorf("agent store: %s: %w", what, err)
	}
	return fmt.Errorf("agent store: %s: %w", what, err)
}

// exec runs a statement of the unit.
func (t *pgTx) exec(what, sql string, args ...any) error {
	if t.err != nil {
		return t.err
	}
	_, err := t.tx.Exec(t.ctx, sql, args...)
	return t.fail(what, err)
}

// one reads a single row into dst; ErrNotFound (not a database error)
// when there is none.
func (t *pgTx) one(what, sql string, args []any, dst ...any) error {
	if t.err != nil {
		return t.err
	}
	err := t.tx.QueryRow(t.ctx, sql, args...).Scan(dst...)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return t.fail(what, err)
}

// body reads one record's bytes; ErrNotFound when missing.
func (t *pgTx) body(what, sql string, args ...any) ([]byte, error) {
	var b []byte
	if err := t.one(what, sql, args, &b); err != nil {
		return nil, err
	}
	return b, nil
}

// bodies reads a query's rows, (key, body) pairs, all at once: the
// connection serves one query at a time, and fn may query the unit.
func (t *pgTx) pairs(what, sql string, args ...any) (keys []string, bodies [][]byte, err error) {
	if t.err != nil {
		return nil, nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, nil, t.fail(what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var b []byte
		if err := rows.Scan(&k, &b); err != nil {
			return nil, nil, t.fail(what, err)
		}
		keys, bodies = append(keys, k), append(bodies, b)
	}
	return keys, bodies, t.fail(what, rows.Err())
}

// strings reads a query's single text column.
func (t *pgTx) strs(what, sql string, args ...any) ([]string, error) {
	if t.err != nil {
		return nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, t.fail(what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, t.fail(what, err)
}

// pgBatch is how many records a lazy walk (newest runs, checkpoints,
// checkpoint rows) reads per query: what fn does not ask for is not read
// beyond one batch.
const pgBatch = 32

var (
	_ Store = (*pgStore)(nil)
	_ Tx    = (*pgTx)(nil)
)

// OpenPostgresStore opens the agent store on the PostgreSQL database url
// names (a URL or key=value connection string; SLIPWAY_AGENT_POSTGRES_URL)
// for Engine.Store, migrating its schema; close releases it once the
// engine has stopped. Errors never quote url, which holds a password.
func OpenPostgresStore(ctx context.Context, url string) (store Store, close func(), err error) {
	return OpenPostgresStoreMax(ctx, url, 0)
}

// OpenPostgresStoreMax is OpenPostgresStore with the store's connections
// bounded to maxConns (SLIPWAY_AGENT_DB_MAX_CONNECTIONS; 0: url's
// pool_max_conns if it has one, else pgx's default pool and one
// connection more for the listener of other replicas' notifications). A
// bound, from either, covers the listener too (but for a bound of 1, which
// it exceeds by one): a deployment's replicas share the role's connection
// limit out between them.
func OpenPostgresStoreMax(ctx context.Context, url string, maxConns int) (store Store, close func(), err error) {
	return OpenPostgresStoreAs(ctx, url, maxConns, "")
}

// AppNamePrefix begins the application_name of a replica's connections,
// followed by its worker id: the control plane ends the connections of
// workers that are gone (a lost node's), which the server may otherwise
// hold, against the role's connection limit, until TCP gives up on them.
const AppNamePrefix = "slipway-agent/"

// OpenPostgresStoreAs is OpenPostgresStoreMax whose connections carry
// application_name AppNamePrefix+worker (SLIPWAY_AGENT_WORKER_ID), unless
// url sets one or worker is "".
func OpenPostgresStoreAs(ctx context.Context, url string, maxConns int, worker string) (store Store, close func(), err error) {
	cfg, err := parsePGConfig(url)
	if err != nil {
		return nil, nil, err
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set && worker != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = AppNamePrefix + worker
	}
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	s, err := openPGStoreBounded(ctx, cfg, maxConns > 0 || hasPoolMaxConns(url))
	if err != nil {
		return nil, nil, err
	}
	return s, s.Close, nil
}
