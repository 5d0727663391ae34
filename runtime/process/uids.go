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
//
// A freed uid is not handed out again soon: allocation advances through
// the range from where the last one stopped (Next) and comes back to a uid
// only once the whole range has wrapped, and even then skips a uid that
// still owns a file or a process anywhere a deployment could have left one
// (inUse): what a removed deployment left behind never becomes another
// deployment's.
type uidTable struct {
	path   string
	lo, hi int
	// inUse reports whether uid still owns something outside the
	// deployments' directories; nil: nothing is checked (tests).
	inUse func(uid int) (bool, error)

	mu   sync.Mutex
	byID map[string]int
	next int // where the next allocation starts looking
}

// uidFile is uids.json. Versions before the allocator advanced stored the
// deployments map alone.
type uidFile struct {
	Next        int            `json:"next"`
	Deployments map[string]int `json:"deployments"`
}

func loadUIDs(path string, lo, hi int, inUse func(int) (bool, error)) (*uidTable, error) {
	t := &uidTable{path: path, lo: lo, hi: hi, inUse: inUse, byID: map[string]int{}, next: lo}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read deployment uids: %w", err)
	}
	var f uidFile
	if err := json.Unmarshal(raw, &f); err == nil && f.Deployments != nil {
		t.byID, t.next = f.Deployments, f.Next
	} else if err := json.Unmarshal(raw, &t.byID); err != nil {
		return nil, fmt.Errorf("deployment uids %s: %w", filepath.Base(path), err)
	} else {
		// The old format: go on after the highest uid in use.
		for _, uid := range t.byID {
			t.next = max(t.next, uid+1)
		}
	}
	return t, nil
}

// get returns the deployment's uid, allocating one: the first from Next
// on, around the range, that no deployment holds and that owns nothing.
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
	span := t.hi - t.lo + 1
	start := t.next
	if start < t.lo || start > t.hi {
		start = t.lo
	}
	quarantined := 0
	for i := range span {
		uid := t.lo + (start-t.lo+i)%span
		if used[uid] {
			continue
		}
		if t.inUse != nil {
			busy, err := t.inUse(uid)
			if err != nil {
				return 0, err
			}
			if busy {
				quarantined++
				continue
			}
		}
		t.byID[dep], t.next = uid, uid+1
		if err := t.save(); err != nil {
			delete(t.byID, dep)
			return 0, err
		}
		return uid, nil
	}
	return 0, fmt.Errorf("no free deployment uid in %d-%d (SLIPWAY_SANDBOX_UID_RANGE); %d of them still own files or processes", t.lo, t.hi, quarantined)
}

// lookup is the deployment's uid, if it has one; it allocates nothing.
func (t *uidTable) lookup(dep string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.byID[dep]
	return uid, ok
}

// free releases the deployment's uid. Call it only once its files are
// gone; get still checks before handing it out again.
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
	raw, err := json.Marshal(uidFile{Next: t.next, Deployments: t.byID})
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
