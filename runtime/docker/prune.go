package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
)

// Pruning: what the docker runtime builds besides revision images (the
// Python and Node.js agent images, the Debian root filesystems they may be
// built on, the official images Slipway pulled for them, and the agent
// base images of earlier binaries) stays while a deployment of this
// install is built on it, and goes with the last one (Remove), or with
// `slipway images prune` (PruneImages). Only this install's objects are
// removed (LabelInstance), and a pulled official image only when no image
// of any install is built on it; an official image that was in the engine
// before Slipway needed it is the operator's and stays.

// languageRoles are the roles of the agent images of a language.
var languageRoles = map[string]bool{pythonLanguage.role: true, nodeLanguage.role: true}

// rootfsDirRe is a root filesystem's directory in the image cache.
var rootfsDirRe = regexp.MustCompile(`^rootfs-[a-z]+-[0-9a-f]{12}$`)

// PruneImages removes this install's images that no deployment uses any
// more, and the cached root filesystems they were made from; it waits for
// running builds. It returns what it removed (image tags, and cache
// directories as "<SLIPWAY_IMAGE_CACHE>/<dir>").
func (d *Driver) PruneImages(ctx context.Context) ([]string, error) {
	if d.Instance == "" {
		return nil, errors.New("the install has no id: nothing is known to be its own")
	}
	d.buildMu.Lock()
	defer d.buildMu.Unlock()
	removed, err := d.collectBases(ctx)
	lang, lerr := d.collectLanguage(ctx)
	return append(removed, lang...), errors.Join(err, lerr)
}

// collectAfterRemove runs collectLanguage after a deployment's deletion,
// unless a build is running (its language image may not be named by a
// revision image yet): the next deletion or prune collects then.
func (d *Driver) collectAfterRemove(ctx context.Context) {
	if d.Instance == "" || !d.buildMu.TryLock() {
		return
	}
	defer d.buildMu.Unlock()
	if _, err := d.collectLanguage(ctx); err != nil {
		d.Log.Warn().Err(err).Msg("removing the images no deployment uses")
	}
}

// collectLanguage removes this install's language images that no image
// names as its base (LabelBase), then its root filesystem images and the
// pulled official images no image is built on any more, then the cache
// directories of the removed root filesystems. The engine refuses to
// remove an image that another one is built on (a dependencies image of a
// failed build) or that a container runs: such an image stays.
func (d *Driver) collectLanguage(ctx context.Context) (removed []string, err error) {
	res, err := d.Client.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("label", LabelManaged+"=true")})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	images := res.Items
	gone := map[string]bool{} // image ids removed
	var errs []error
	// basedOn says whether an image that stays names ref as its base.
	basedOn := func(ref string) bool {
		for _, img := range images {
			if !gone[img.ID] && img.Labels[LabelBase] == ref {
				return true
			}
		}
		return false
	}
	remove := func(img image.Summary) bool {
		_, err := d.Client.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{PruneChildren: true})
		switch {
		case err == nil || cerrdefs.IsNotFound(err):
			gone[img.ID] = true
			removed = append(removed, strings.Join(img.RepoTags, " "))
			d.Log.Info().Strs("image", img.RepoTags).Msg("removed an image no deployment uses")
			return true
		case cerrdefs.IsConflict(err):
			return false // still the base of an image, or run by a container
		default:
			errs = append(errs, fmt.Errorf("remove image %s: %w", strings.Join(img.RepoTags, " "), err))
			return false
		}
	}
	mine := func(img image.Summary, role bool) bool {
		return role && img.Labels[LabelInstance] == d.Instance && len(img.RepoTags) > 0
	}
	var pulled []string
	for _, img := range images {
		if !mine(img, languageRoles[img.Labels[LabelRole]]) || basedOn(img.RepoTags[0]) {
			continue
		}
		if remove(img) && img.Labels[LabelPulled] == "true" && img.Labels[LabelBase] != "" {
			pulled = append(pulled, img.Labels[LabelBase])
		}
	}
	var dirs []string
	for _, img := range images {
		if !mine(img, img.Labels[LabelRole] == "rootfs") || basedOn(img.RepoTags[0]) {
			continue
		}
		// Only directories of this install's cache, as named there.
		dir := img.Labels[LabelRootfs]
		if remove(img) && filepath.Dir(dir) == filepath.Clean(d.imageCache()) && rootfsDirRe.MatchString(filepath.Base(dir)) {
			dirs = append(dirs, dir)
		}
	}
	for _, ref := range pulled {
		if basedOn(ref) {
			continue // another install's agent image is built on it
		}
		_, err := d.Client.ImageRemove(ctx, ref, client.ImageRemoveOptions{})
		switch {
		case err == nil:
			removed = append(removed, ref)
			d.Log.Info().Str("image", ref).Msg("removed an official image Slipway pulled and no deployment uses")
		case cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("remove image %s: %w", ref, err))
		}
	}
	for _, dir := range dirs {
		if rootfsInUse(images, gone, dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove the cached root filesystem %s: %w", filepath.Base(dir), err))
			continue
		}
		removed = append(removed, "<SLIPWAY_IMAGE_CACHE>/"+filepath.Base(dir))
		d.Log.Info().Str("directory", dir).Msg("removed a cached root filesystem no deployment uses")
	}
	return removed, errors.Join(errs...)
}

// rootfsInUse says whether an image that stays (another install's, using
// the same cache) was imported from the cache directory dir.
func rootfsInUse(images []image.Summary, gone map[string]bool, dir string) bool {
	for _, img := range images {
		if !gone[img.ID] && img.Labels[LabelRootfs] == dir {
			return true
		}
	}
	return false
}
