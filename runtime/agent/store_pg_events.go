package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect the agent store's listener: %w", redactPG(err))
	}
	if _, err := conn.Exec(ctx, "listen "+s.channel); err != nil {
		_ = conn.Close(ctx)
		return fmt.Errorf("listen for run events: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stopListen, s.listenDone = stop, make(chan struct{})
	go func() {
		defer close(s.listenDone)
		for {
			err := s.deliver(lctx, conn)
			_ = conn.Close(context.Background())
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
				if conn, err = pgx.ConnectConfig(lctx, cfg); err == nil {
					if _, err = conn.Exec(lctx, "listen "+s.channel); err == nil {
						break
					}
					_ = conn.Close(context.Background())
				}
			}
		}
	}()
	return nil
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
