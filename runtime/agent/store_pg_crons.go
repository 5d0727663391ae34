package agent

import (
	"encoding/json"
	"fmt"
)

func decodeCron(raw []byte) (*Cron, error) {
	var c Cron
	if err := unmarshalStored(raw, &c); err != nil {
		return nil, fmt.Errorf("decode cron: %w", err)
	}
	return &c, nil
}

func (t *pgTx) GetCron(id string) (*Cron, error) {
	raw, err := t.body("get cron", "select body from crons where cron_id = $1", id)
	if err != nil {
		return nil, err
	}
	return decodeCron(raw)
}

func (t *pgTx) ForEachCron(fn func(*Cron, error) error) error {
	_, raws, err := t.pairs("scan crons", "select cron_id, body from crons order by cron_id")
	if err != nil {
		return err
	}
	for _, raw := range raws {
		if err := fn(decodeCron(raw)); err != nil {
			return err
		}
	}
	return nil
}

// pgCronSortCols are the sort key columns in cronSortFields' order.
var pgCronSortCols = [6]string{"k_c", "k_u", "k_n", "k_e", "k_a", "k_t"}

func (t *pgTx) PutCron(c *Cron) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("put cron: %w", err)
	}
	a := cronAttrOf(c)
	id := []byte(c.CronID)
	var k [6][]byte
	for i := range k {
		k[i] = cat(a.texts[i], []byte{0}, id)
	}
	return t.exec("put cron", `insert into crons (cron_id, body, assistant_id, thread_id, enabled, k_c, k_u, k_n, k_e, k_a, k_t, metas)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		on conflict (cron_id) do update set body = excluded.body, assistant_id = excluded.assistant_id, thread_id = excluded.thread_id,
			enabled = excluded.enabled, k_c = excluded.k_c, k_u = excluded.k_u, k_n = excluded.k_n, k_e = excluded.k_e,
			k_a = excluded.k_a, k_t = excluded.k_t, metas = excluded.metas`,
		c.CronID, raw, string(a.texts[4]), string(a.texts[5]), a.enabled, k[0], k[1], k[2], k[3], k[4], k[5], pgMetas(c.Metadata))
}

func (t *pgTx) DeleteCron(id string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete cron", "delete from crons where cron_id = $1", id)
}

// cronSearch plans f as the bbolt store does (store_cronindex.go): newest
// first by default, assistant, thread, enabled and scalar metadata by
// the indexed columns, other metadata on decoded records.
func (t *pgTx) cronSearch(f CronFilter) *pgSearch {
	s := &pgSearch{table: "crons", id: "cron_id", desc: f.Desc || f.SortBy == "", order: "k_c", refuse: func() error {
		return fmt.Errorf("%w: a metadata filter on an object, array, null or long value would read more than %d crons; "+
			"narrow the search with assistant_id, thread_id or metadata filters on strings, numbers or booleans", ErrInvalid, maxResidualScan)
	}}
	for i, sf := range cronSortFields {
		if sf.name == f.SortBy {
			s.order = pgCronSortCols[i]
		}
	}
	if f.SortBy == "cron_id" {
		s.order = "cron_id"
	}
	if f.AssistantID != "" {
		s.filter("assistant_id = $%d", f.AssistantID)
	}
	if f.ThreadID != "" {
		s.filter("thread_id = $%d", f.ThreadID)
	}
	if f.Enabled != nil {
		s.filter("enabled = $%d", *f.Enabled)
	}
	residual := s.metadata(f.Metadata)
	if len(residual) > 0 {
		s.residual = func(raw []byte) (bool, error) {
			c, err := decodeCron(raw)
			if err != nil {
				return false, err
			}
			return matches(c.Metadata, residual), nil
		}
	}
	return s
}

func (t *pgTx) SearchCrons(f CronFilter) ([]Cron, error) {
	raws, err := t.cronSearch(f).page(t, f.Offset, f.Limit)
	if err != nil {
		return nil, err
	}
	return decodeAll(raws, decodeCron)
}

func (t *pgTx) CountCrons(f CronFilter) (int, error) {
	f.SortBy = "cron_id"
	return t.cronSearch(f).count(t)
}

func (t *pgTx) CronsOf(assistant, thread string) ([]string, error) {
	if thread != "" {
		return t.strs("crons of a thread", "select cron_id from crons where thread_id = $1 order by k_c", thread)
	}
	return t.strs("crons of an assistant", "select cron_id from crons where assistant_id = $1 order by k_c", assistant)
}
