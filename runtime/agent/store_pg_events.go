package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgChannelOf is the LISTEN/NOTIFY channel of the run events of the
// stores on schema. Notifications are per database, not per schema, and
// deployments (or tests) may keep their agents' tables in schemas of one
// database: a store hears only its own schema's. The schema's hash keeps
// the name a short identifier whatever the schema is called.
func pgChannelOf(schema string) string {
	h := sha256.Sum256([]byte(schema))
	return "slipway_agent_runs_" + hex.EncodeToString(h[:8])
}

// pgMaxPayload keeps a notification under PostgreSQL's 8000-byte limit.
const pgMaxPayload = 7000

// pgNotice is a notification: the unit's events and the store that
// committed it (whose own subscribers heard them already).
type pgNotice struct {
	Origin string       `json:"o"`
	Events []storeEvent `json:"e"`
}

// notify queues the unit's events as notifications of its transaction:
// PostgreSQL delivers them when it commits, never when it fails.
func (t *pgTx) notify() error {
	var chunk []storeEvent
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		raw, err := json.Marshal(pgNotice{Origin: t.origin, Events: chunk})
		if err != nil {
			return fmt.Errorf("agent store: encode notification: %w", err)
		}
		chunk, size = nil, 0
		return t.exec("notify", "select pg_notify($1, $2)", t.channel, string(raw))
	}
	for _, ev := range t.events {
		n := len(ev.Kind) + len(ev.Thread) + len(ev.Run) + len(ev.Status) + 64
		if size+n > pgMaxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk, size = append(chunk, ev), size+n
	}
	return flush()
}

// listen starts delivering other stores' (replicas') notifications to
// this store's subscribers, on a connection of its own, reconnecting
// when it drops.
func (s *pgStore) listen(ctx context.Context) error {
	conn, done, err := s.listenConn(ctx)
	if err != nil {
		return fmt.Errorf("connect the agent store's listener: %w", redactPG(err))
	}
	if _, err := conn.Exec(ctx, "listen "+s.channel); err != nil {
		done()
		return fmt.Errorf("listen for run events: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stopListen, s.listenDone = stop, make(chan struct{})
	go func() {
		defer close(s.listenDone)
		for {
			err := s.deliver(lctx, conn)
			done()
			if lctx.Err() != nil {
				return
			}
			_ = err // the connection dropped: reconnect
			for {
				select {
				case <-lctx.Done():
					return
				case <-time.After(time.Second):
				}
				if conn, done, err = s.listenConn(lctx); err == nil {
					if _, err = conn.Exec(lctx, "listen "+s.channel); err == nil {
						break
					}
					done()
				}
			}
		}
	}()
	return nil
}

// listenConn opens a connection for the listener; done closes it. With a
// bounded pool (listenInPool) it is one of the pool's, held for as long as
// it listens, so that the store never has more connections than its
// bound: a deployment's replicas share its role's CONNECTION LIMIT out
// between them, and one more each went over it (PostgreSQL refusing the
// next query with "too many connections for role"). A bound of 1 would
// leave no connection to query with: the listener then has one of its
// own, as with pgx's default pool.
func (s *pgStore) listenConn(ctx context.Context) (conn *pgx.Conn, done func(), err error) {
	if s.listenInPool {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		// Closed before its release: a listening connection never goes
		// back to the pool, which opens another in its place.
		return pc.Conn(), func() { _ = pc.Conn().Close(context.Background()); pc.Release() }, nil
	}
	conn, err = pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { _ = conn.Close(context.Background()) }, nil
}

// poolMaxConnsRE finds pool_max_conns in a key=value connection string.
var poolMaxConnsRE = regexp.MustCompile(`(^|\s)pool_max_conns\s*=`)

// hasPoolMaxConns says whether connString (a URL or key=value) bounds the
// pool with pool_max_conns, as the control plane's URL for a deployment
// with db_max_connections does.
func hasPoolMaxConns(connString string) bool {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		return err == nil && u.Query().Has("pool_max_conns")
	}
	return poolMaxConnsRE.MatchString(connString)
}

// deliver hands notifications from other stores to subscribers until the
// connection fails or ctx ends.
func (s *pgStore) deliver(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var notice pgNotice
		if json.Unmarshal([]byte(n.Payload), &notice) != nil || notice.Origin == s.origin {
			continue
		}
		s.publish(notice.Events)
	}
}
