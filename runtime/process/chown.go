package process

import (
	"fmt"
	"path/filepath"

	"slipway/runtime/build"
)

// chownTree gives the tree at top, which Slipway has just made in a
// directory of its own, to uid (and the gid of that number); nothing when
// uid is -1 (deployments run as Slipway's own user). See handOver.
func chownTree(top string, uid int) error {
	if uid < 0 {
		return nil
	}
	t, err := build.OpenTree(top)
	if err != nil {
		return fmt.Errorf("hand %s over to the deployment: %w", filepath.Base(top), err)
	}
	defer t.Close()
	return handOver(t, filepath.Base(top), uid)
}

// handOver gives the open tree t to uid. The change goes from the tree's
// descriptor down, each directory opened from its parent's descriptor
// without following links (build.Tree.Chown): code already running as uid
// (another revision of the deployment) can rename or link whatever it
// likes in the tree as soon as its first directory changes hands, and no
// such change can lead the rest anywhere else. A tree uid already owns was
// handed over before (or made by uid) and is left alone.
func handOver(t *build.Tree, what string, uid int) error {
	if uid < 0 {
		return nil
	}
	owner, err := t.Owner()
	if err != nil {
		return fmt.Errorf("hand %s over to the deployment: %w", what, err)
	}
	if owner == uid {
		return nil
	}
	if err := t.Chown(uid, uid); err != nil {
		return fmt.Errorf("hand %s over to the deployment: %w", what, err)
	}
	return nil
}
