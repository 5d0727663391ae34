package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// uidTable hands each deployment a uid (and the gid of the same number)
// of its own from a range, reused by all its revisions and freed when the
// deployment is removed. It lives in <Root>/uids.json, rewritten
// atomically (temporary file, fsync, rename, fsync of the directory), so a
// crash leaves the old table or the new one, never a torn one.
type uidTable struct {
	path   string
	lo, hi int

	mu   sync.Mutex
	byID map[string]int
}

func loadUIDs(path string, lo, hi int) (*uidTable, error) {
	t := &uidTable{path: path, lo: lo, hi: hi, byID: map[string]int{}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read deployment uids: %w", err)
	}
	if err := json.Unmarshal(raw, &t.byID); err != nil {
		return nil, fmt.Errorf("deployment uids %s: %w", path, err)
	}
	return t, nil
}

// get returns the deployment's uid, allocating the lowest free one.
func (t *uidTable) get(dep string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uid, ok := t.byID[dep]; ok {
		return uid, nil
	}
	used := make(map[int]bool, len(t.byID))
	for _, uid := range t.byID {
		used[uid] = true
	}
	for uid := t.lo; uid <= t.hi; uid++ {
		if used[uid] {
			continue
		}
		t.byID[dep] = uid
		if err := t.save(); err != nil {
			delete(t.byID, dep)
			return 0, err
		}
		return uid, nil
	}
	return 0, fmt.Errorf("no free deployment uid in %d-%d (SLIPWAY_SANDBOX_UID_RANGE)", t.lo, t.hi)
}

// free releases the deployment's uid. Call it only once its files are
// gone: a uid handed on must own nothing.
func (t *uidTable) free(dep string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.byID[dep]
	if !ok {
		return nil
	}
	delete(t.byID, dep)
	if err := t.save(); err != nil {
		t.byID[dep] = uid
		return err
	}
	return nil
}

func (t *uidTable) save() error {
	raw, err := json.Marshal(t.byID)
	if err != nil {
		return err
	}
	dir := filepath.Dir(t.path)
	f, err := os.CreateTemp(dir, ".uids-*.json")
	if err != nil {
		return fmt.Errorf("save deployment uids: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err = f.Write(raw); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), t.path)
	}
	if err != nil {
		return fmt.Errorf("save deployment uids: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
