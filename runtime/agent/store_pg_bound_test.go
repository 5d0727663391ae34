package agent

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slipway/server/httpx"
	"slipway/storage"
	"slipway/storage/errs"
)

// TestPostgresStoreStaysWithinItsBound: a bounded store (the deployment's
// share of its role's CONNECTION LIMIT, from SLIPWAY_AGENT_DB_MAX_CONNECTIONS
// or the URL's pool_max_conns) never has more connections than its bound,
// its listener's included, with its pool full; replicas so bounded still
// hear each other's events. A bound of 1 leaves the listener a connection
// of its own, and so does pgx's default pool. Counted by application_name
// in pg_stat_activity.
func TestPostgresStoreStaysWithinItsBound(t *testing.T) {
	base := pgTestURL(t)
	def, err := parsePGConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		maxConns int
		query    string
		want     int
	}{
		{name: "SLIPWAY_AGENT_DB_MAX_CONNECTIONS", maxConns: 3, want: 3},
		{name: "pool_max_conns in the URL", query: "pool_max_conns=3", want: 3},
		{name: "both, the variable first", maxConns: 2, query: "pool_max_conns=5", want: 2},
		{name: "a bound of 1", maxConns: 1, want: 2},
		{name: "unbounded", want: int(def.MaxConns) + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			schema := pgTestSchema(t).ConnConfig.RuntimeParams["search_path"]
			app := "bound_" + strings.ReplaceAll(storage.NewID().String(), "-", "")
			u, err := url.Parse(base)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("search_path", schema)
			q.Set("application_name", app)
			if tc.query != "" {
				k, v, _ := strings.Cut(tc.query, "=")
				q.Set(k, v)
			}
			u.RawQuery = q.Encode()
			open := func() *pgStore {
				st, closeStore, err := OpenPostgresStoreMax(ctx, u.String(), tc.maxConns)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(closeStore)
				return st.(*pgStore)
			}
			a := open()
			// More queries at once than any bound: the pool opens all the
			// connections it may.
			var wg sync.WaitGroup
			for range 12 {
				wg.Go(func() {
					if _, err := a.pool.Exec(ctx, "select pg_sleep(0.2)"); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			admin, err := pgx.Connect(ctx, base)
			if err != nil {
				t.Fatal(redactPG(err))
			}
			defer admin.Close(ctx)
			var n int
			if err := admin.QueryRow(ctx, "select count(*) from pg_stat_activity where application_name = $1", app).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Fatalf("the store holds %d connections, want %d", n, tc.want)
			}

			// A replica on the same schema hears the first one's runs
			// through its listener.
			b := open()
			got := make(chan storeEvent, 16)
			defer b.Subscribe(func(ev storeEvent) { got <- ev })()
			th, r := newThreadRec(""), newRunRec("")
			r.ThreadID = th.ThreadID
			mustUpdate(t, a, func(tx Tx) error {
				return errors.Join(tx.PutThread(th), tx.PutRun(r), tx.IndexRun(th.ThreadID, r.RunID))
			})
			select {
			case ev := <-got:
				if ev.Run != r.RunID {
					t.Fatalf("the replica heard %+v, want run %s", ev, r.RunID)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the replica never heard the run")
			}
		})
	}
}

// TestPostgresStoreUnavailable: when the deployment's role has no
// connection left (its CONNECTION LIMIT reached: here by a connection from
// elsewhere, as a lost replica's would hold one), a unit of work that needs
// a new connection is refused as errs.Unavailable, which the API answers
// 503 with a detail that names neither the role nor the server, and not as
// an internal error; once the connection is free, the same unit commits.
func TestPostgresStoreUnavailable(t *testing.T) {
	base := pgTestURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(redactPG(err))
	}
	defer admin.Close(ctx)
	id := strings.ReplaceAll(storage.NewID().String(), "-", "")
	role, schema, pw := "lim_"+id, "lim_"+id, "pw_"+id
	for _, q := range []string{
		fmt.Sprintf("create role %s login password '%s' connection limit 2", role, pw),
		fmt.Sprintf("grant %s to current_user", role),
		fmt.Sprintf("create schema %s authorization %s", schema, role),
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(redactPG(err))
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{"drop schema " + schema + " cascade", "drop role " + role} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, pw)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	// Bound 2: the listener holds one of the pool's two connections.
	st, closeStore, err := OpenPostgresStoreMax(ctx, u.String(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	other, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("the role's second connection: %v", redactPG(err))
	}
	th := newThreadRec("")
	put := func() error { return st.Update(ctx, func(tx Tx) error { return tx.PutThread(th) }) }
	err = put()
	if !errors.Is(err, errs.Unavailable) {
		_ = other.Close(ctx)
		t.Fatalf("a unit of work without a connection free: %v, want errs.Unavailable", err)
	}
	status, _, _ := httpx.DomainStatus(err)
	if status != 503 || strings.Contains(err.Error(), role) || strings.Contains(err.Error(), u.Host) {
		t.Fatalf("answered %d %q; want 503 naming neither the role nor the server", status, err)
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The server frees the slot as the connection ends; a moment later
	// the same unit commits.
	deadline := time.Now().Add(5 * time.Second)
	for err = put(); errors.Is(err, errs.Unavailable) && time.Now().Before(deadline); err = put() {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("with the connection free again: %v", err)
	}
}
