package agent

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slipway/storage"
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
