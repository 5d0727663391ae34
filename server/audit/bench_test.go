package audit

import (
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// BenchmarkAuditedWrite measures what recording the event adds to a durable
// write: the same transaction as POST /v2/deployments makes (a ~1.5 KB
// record, a revision, three index entries, a tracing project), committed
// with fsync, with and without its audit event. Reproduce with:
//
//	go test -run '^$' -bench AuditedWrite -benchtime 3s ./server/audit/
func BenchmarkAuditedWrite(b *testing.B) {
	rec := make([]byte, 1500)
	for i := range rec {
		rec[i] = 'x'
	}
	for _, withAudit := range []bool{false, true} {
		name := "without-audit"
		if withAudit {
			name = "with-audit"
		}
		b.Run(name, func(b *testing.B) {
			l, db, _ := testLog(b)
			org := uuid.New()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := db.Update(func(tx *bolt.Tx) error {
					id, rev, ws := storage.NewID(), storage.NewID(), storage.NewID()
					if err := tx.Bucket([]byte("deployments")).Put(storage.Key(id), rec); err != nil {
						return err
					}
					if err := tx.Bucket([]byte("revisions")).Put(storage.Key(rev), rec[:700]); err != nil {
						return err
					}
					for _, bk := range []string{"idx_ws_deployments", "idx_deployment_revisions", "idx_pending_deployments"} {
						if err := tx.Bucket([]byte(bk)).Put(storage.Key(ws, id), nil); err != nil {
							return err
						}
					}
					if err := tx.Bucket([]byte("tracing_projects")).Put(storage.Key(storage.NewID()), rec[:200]); err != nil {
						return err
					}
					if withAudit {
						return l.Append(tx, entry(org, "create_deployment", i))
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend measures the audit log's own work per event, without the
// fsync that dominates BenchmarkAuditedWrite (and makes it noisy on a
// shared disk): one event per transaction, the database in no-sync mode.
//
//	go test -run '^$' -bench Append -benchtime 3s ./server/audit/
func BenchmarkAppend(b *testing.B) {
	l, db, _ := testLog(b)
	db.NoSync = true
	org := uuid.New()
	before := db.Stats().TxStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := db.Update(func(tx *bolt.Tx) error { return l.Append(tx, entry(org, "create_deployment", i)) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// Page writes do not depend on the machine's load, unlike the time.
	after := db.Stats().TxStats
	b.ReportMetric(float64(after.GetWrite()-before.GetWrite())/float64(b.N), "writes/op")
	b.ReportMetric(float64(after.GetPageAlloc()-before.GetPageAlloc())/4096/float64(b.N), "pages/op")
}

// BenchmarkAppendCPU measures the log's computation per event (record,
// MACs, head and manifest), with the commit amortized over 100 events.
func BenchmarkAppendCPU(b *testing.B) {
	l, db, _ := testLog(b)
	db.NoSync = true
	org := uuid.New()
	b.ResetTimer()
	for i := 0; i < b.N; i += 100 {
		if err := db.Update(func(tx *bolt.Tx) error {
			for j := i; j < i+100 && j < b.N; j++ {
				if err := l.Append(tx, entry(org, "create_deployment", j)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
