package agent

import "fmt"

// bCrons holds cron id → Cron.
const bCrons = "crons"

// cronReads are a unit of work's reads of crons.
type cronReads interface {
	// GetCron returns the cron, or an error wrapping ErrNotFound.
	GetCron(id string) (*Cron, error)
	// ForEachCron calls fn for every cron in id order until fn returns
	// an error, which it returns. A record that cannot be decoded is
	// passed as a nil cron with its error: fn decides whether the scan
	// stops (a search) or goes on (the scheduler looking for due crons).
	ForEachCron(fn func(c *Cron, err error) error) error
	// SearchCrons returns the page of crons f selects, in its order
	// (store_cronindex.go says what is indexed).
	SearchCrons(f CronFilter) ([]Cron, error)
	// CountCrons counts them (f's limit and offset ignored).
	CountCrons(f CronFilter) (int, error)
	// CronsOf returns the ids of the crons of a thread (thread not "")
	// or else of an assistant.
	CronsOf(assistant, thread string) ([]string, error)
}

// cronWrites are a unit of work's writes of crons.
type cronWrites interface {
	// PutCron creates or replaces the cron.
	PutCron(c *Cron) error
	// DeleteCron deletes the cron (a missing one is no error).
	DeleteCron(id string) error
}

func (t *boltTx) GetCron(id string) (*Cron, error) {
	var c Cron
	if err := getJSON(t.tx.Bucket([]byte(bCrons)), id, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (t *boltTx) ForEachCron(fn func(*Cron, error) error) error {
	return t.tx.Bucket([]byte(bCrons)).ForEach(func(_, v []byte) error {
		var c Cron
		if err := unmarshalStored(v, &c); err != nil {
			return fn(nil, err)
		}
		return fn(&c, nil)
	})
}

func (t *boltTx) PutCron(c *Cron) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.reindexCron(c.CronID, c); err != nil {
		return fmt.Errorf("put cron: %w", err)
	}
	return putJSON(t.tx.Bucket([]byte(bCrons)), c.CronID, c)
}

func (t *boltTx) DeleteCron(id string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.reindexCron(id, nil); err != nil {
		return fmt.Errorf("delete cron: %w", err)
	}
	return t.tx.Bucket([]byte(bCrons)).Delete([]byte(id))
}
