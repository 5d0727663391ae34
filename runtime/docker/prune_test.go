package docker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"
)

// pruneEngine is an engine's image store: images by id, with tags and
// labels, and the ids the engine refuses to remove (another image is
// built on them, or a container runs them). Removal is by id or by tag.
type pruneEngine struct {
	Engine
	images  []image.Summary
	refuse  map[string]bool
	removed []string // ids and tags, in order
}

func (e *pruneEngine) ImageList(context.Context, client.ImageListOptions) (client.ImageListResult, error) {
	// The driver asks for dev.slipway.managed=true; the engine filters.
	var out []image.Summary
	for _, img := range e.images {
		if img.Labels[LabelManaged] == "true" {
			out = append(out, img)
		}
	}
	return client.ImageListResult{Items: out}, nil
}

func (e *pruneEngine) ImageRemove(_ context.Context, ref string, _ client.ImageRemoveOptions) (client.ImageRemoveResult, error) {
	for i, img := range e.images {
		if img.ID == ref || slices.Contains(img.RepoTags, ref) {
			if e.refuse[img.ID] {
				return client.ImageRemoveResult{}, cerrdefs.ErrConflict
			}
			e.images = append(e.images[:i], e.images[i+1:]...)
			e.removed = append(e.removed, ref)
			return client.ImageRemoveResult{}, nil
		}
	}
	return client.ImageRemoveResult{}, cerrdefs.ErrNotFound
}

// TestCollectLanguage: of the agent images, only this install's that no
// image names as its base go (and not one the engine refuses), with the
// official images Slipway pulled for them unless another install's image
// is built on one, the operator's official images never, the root
// filesystem images no remaining image is built on, and their
// directories in this install's cache only.
func TestCollectLanguage(t *testing.T) {
	cache := t.TempDir()
	other := t.TempDir()
	for _, d := range []string{filepath.Join(cache, "rootfs-bookworm-0123456789ab"), filepath.Join(cache, "rootfs-trixie-0123456789ab"), filepath.Join(other, "rootfs-bookworm-0123456789ab")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lang := func(id, tag, inst, base string, pulled bool) image.Summary {
		l := map[string]string{LabelManaged: "true", LabelRole: "python-base", LabelInstance: inst, LabelBase: base}
		if pulled {
			l[LabelPulled] = "true"
		}
		return image.Summary{ID: id, RepoTags: []string{tag}, Labels: l}
	}
	rootfs := func(id, tag, inst, dir string) image.Summary {
		return image.Summary{ID: id, RepoTags: []string{tag}, Labels: map[string]string{LabelManaged: "true", LabelRole: "rootfs", LabelInstance: inst, LabelRootfs: dir}}
	}
	e := &pruneEngine{refuse: map[string]bool{"busy": true}, images: []image.Summary{
		// In use: a revision image of ours names it.
		lang("used", "slipway-python:3.11-used", "me", "python:3.11-slim-bookworm", true),
		{ID: "rev", RepoTags: []string{"slipway/dep:rev"}, Labels: map[string]string{LabelManaged: "true", LabelInstance: "me", LabelBase: "slipway-python:3.11-used"}},
		// Unused, on an official image Slipway pulled that the used one
		// is built on too: it goes, the official image stays.
		lang("shared-pull", "slipway-python:3.11-old", "me", "python:3.11-slim-bookworm", true),
		// Unused, on an official image it pulled alone: both go.
		lang("own-pull", "slipway-python:3.12-a", "me", "python:3.12-slim-bookworm", true),
		{ID: "py312", RepoTags: []string{"python:3.12-slim-bookworm"}},
		// Unused, on the operator's image: it goes, the image stays.
		lang("operator", "slipway-python:3.13-a", "me", "python:3.13-slim-bookworm", false),
		{ID: "py313", RepoTags: []string{"python:3.13-slim-bookworm"}},
		// Unused, on a pulled image another install's image is built on.
		lang("pull-other", "slipway-node:20-a", "me", "node:20-bookworm-slim", true),
		lang("theirs", "slipway-node:20-b", "them", "node:20-bookworm-slim", false),
		{ID: "node20", RepoTags: []string{"node:20-bookworm-slim"}},
		// Unused but the engine refuses (a dependencies image on it).
		lang("busy", "slipway-python:3.11-busy", "me", "slipway-rootfs:trixie-x", false),
		// Debian ones: this one's root filesystem goes with it, and its
		// directory; the busy one's stays; one naming a directory outside
		// the cache loses its image only.
		lang("deb", "slipway-python:3.11-deb", "me", "slipway-rootfs:bookworm-x", false),
		rootfs("rootfs-b", "slipway-rootfs:bookworm-x", "me", filepath.Join(cache, "rootfs-bookworm-0123456789ab")),
		rootfs("rootfs-t", "slipway-rootfs:trixie-x", "me", filepath.Join(cache, "rootfs-trixie-0123456789ab")),
		rootfs("rootfs-o", "slipway-rootfs:bookworm-o", "me", filepath.Join(other, "rootfs-bookworm-0123456789ab")),
	}}
	d := &Driver{Client: e, Instance: "me", ImageCache: cache}
	removed, err := d.collectLanguage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shared-pull", "own-pull", "operator", "pull-other", "deb", "rootfs-b", "rootfs-o", "python:3.12-slim-bookworm"}
	if !slices.Equal(e.removed, want) {
		t.Fatalf("removed %v, want %v", e.removed, want)
	}
	wantReport := []string{"slipway-python:3.11-old", "slipway-python:3.12-a", "slipway-python:3.13-a", "slipway-node:20-a", "slipway-python:3.11-deb",
		"slipway-rootfs:bookworm-x", "slipway-rootfs:bookworm-o", "python:3.12-slim-bookworm", "<SLIPWAY_IMAGE_CACHE>/rootfs-bookworm-0123456789ab"}
	if !slices.Equal(removed, wantReport) {
		t.Fatalf("reported %v, want %v", removed, wantReport)
	}
	for dir, want := range map[string]bool{filepath.Join(cache, "rootfs-bookworm-0123456789ab"): false, filepath.Join(cache, "rootfs-trixie-0123456789ab"): true,
		filepath.Join(other, "rootfs-bookworm-0123456789ab"): true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", dir, err == nil, want)
		}
	}

	// Another install's image imported from a directory keeps it, and
	// stays itself.
	os.MkdirAll(filepath.Join(cache, "rootfs-bookworm-0123456789ab"), 0o755)
	e.images = append(e.images, lang("deb2", "slipway-python:3.11-deb2", "me", "slipway-rootfs:bookworm-y", false),
		rootfs("rootfs-y", "slipway-rootfs:bookworm-y", "me", filepath.Join(cache, "rootfs-bookworm-0123456789ab")),
		rootfs("rootfs-them", "slipway-rootfs:bookworm-them", "them", filepath.Join(cache, "rootfs-bookworm-0123456789ab")))
	if _, err := d.collectLanguage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache, "rootfs-bookworm-0123456789ab")); err != nil {
		t.Fatalf("the directory another install's image was imported from: %v", err)
	}
	if slices.Contains(e.removed, "rootfs-them") || !slices.Contains(e.removed, "rootfs-y") {
		t.Fatalf("removed %v", e.removed)
	}
}

// TestBaseRef: the configured templates, or the official images, with the
// project's version.
func TestBaseRef(t *testing.T) {
	tests := []struct {
		d       *Driver
		l       language
		version string
		want    string
	}{
		{&Driver{}, pythonLanguage, "3.11", "python:3.11-slim-bookworm"},
		{&Driver{}, nodeLanguage, "22", "node:22-bookworm-slim"},
		{&Driver{PythonBaseImage: "127.0.0.1:5000/library/python:{version}-slim-bookworm"}, pythonLanguage, "3.13", "127.0.0.1:5000/library/python:3.13-slim-bookworm"},
		{&Driver{PythonBaseImage: "mirror/python:{version}"}, nodeLanguage, "20", "node:20-bookworm-slim"},
		{&Driver{NodeBaseImage: "mirror/node:lts"}, nodeLanguage, "20", "mirror/node:lts"},
	}
	for _, tc := range tests {
		if got, _ := tc.d.baseRef(tc.l, tc.version); got != tc.want {
			t.Errorf("baseRef(%s %s) with %q %q = %q, want %q", tc.l.name, tc.version, tc.d.PythonBaseImage, tc.d.NodeBaseImage, got, tc.want)
		}
	}
}

// TestLanguageRecipeCerts: the tools are pointed at a trust store only
// where the image has one.
func TestLanguageRecipeCerts(t *testing.T) {
	tests := []struct {
		ca, certs, want bool
	}{{true, false, true}, {false, true, true}, {false, false, false}, {true, true, true}}
	for _, tc := range tests {
		df := languageRecipe("node:20-bookworm-slim", tc.ca, tc.certs)
		if got := slices.ContainsFunc([]string{"NODE_EXTRA_CA_CERTS=", "SSL_CERT_FILE="}, func(s string) bool { return strings.Contains(df, s) }); got != tc.want {
			t.Errorf("ca=%v certs=%v: cert settings %v, want %v:\n%s", tc.ca, tc.certs, got, tc.want, df)
		}
	}
}
