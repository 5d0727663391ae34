package swarm

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
)

// EncodeAuth is the X-Registry-Auth value for a registry's credentials
// ("" without a username).
func EncodeAuth(server, username, password string) (string, error) {
	if username == "" {
		return "", nil
	}
	raw, err := json.Marshal(registry.AuthConfig{Username: username, Password: password, ServerAddress: server})
	if err != nil {
		return "", fmt.Errorf("encode registry credentials: %w", err)
	}
	return base64.URLEncoding.EncodeToString(raw), nil
}

// repository is where a revision's image goes in the registry.
func (d *Driver) repository(dep string) string { return d.Registry + "/slipway/" + dep }

// push tags the local image for the registry, pushes it and returns its
// reference by digest.
func (d *Driver) push(ctx context.Context, local, dep, rev string, log io.Writer) (string, error) {
	if d.Registry == "" {
		return "", fmt.Errorf("the swarm runtime needs SLIPWAY_REGISTRY: the swarm's nodes pull images from it")
	}
	repo := d.repository(dep)
	target := repo + ":" + rev
	if _, err := d.Client.ImageTag(ctx, client.ImageTagOptions{Source: local, Target: target}); err != nil {
		return "", fmt.Errorf("tag the image for the registry: %w", err)
	}
	fmt.Fprintf(log, "pushing %s\n", target)
	// Engines before API 1.44 refuse a push without X-Registry-Auth, even
	// to a registry that asks for none: "{}" is no credentials.
	res, err := d.Client.ImagePush(ctx, target, client.ImagePushOptions{RegistryAuth: cmp.Or(d.RegistryAuth, "e30=")})
	if err != nil {
		return "", fmt.Errorf("push the image to %s: %w", d.Registry, err)
	}
	defer res.Close()
	var digest string
	for m, err := range res.JSONMessages(ctx) {
		if err != nil {
			return "", fmt.Errorf("push the image to %s: %w", d.Registry, err)
		}
		if m.Error != nil {
			return "", fmt.Errorf("push the image to %s: %s", d.Registry, m.Error.Message)
		}
		if m.Aux != nil {
			var aux struct{ Digest string }
			if json.Unmarshal(*m.Aux, &aux) == nil && aux.Digest != "" {
				digest = aux.Digest
			}
		}
	}
	if digest == "" {
		digest = strings.TrimPrefix(d.digestOf(ctx, target, repo), repo+"@")
	}
	if !strings.HasPrefix(digest, "sha256:") {
		return "", fmt.Errorf("the registry at %s returned no digest for %s", d.Registry, target)
	}
	ref := repo + "@" + digest
	fmt.Fprintf(log, "pushed %s\n", ref)
	return ref, nil
}

// digestOf is image's reference by digest from the engine's record of it
// (in repository repo, or the image's own when ""), or image itself when
// the engine knows none.
func (d *Driver) digestOf(ctx context.Context, image, repo string) string {
	res, err := d.Client.ImageInspect(ctx, image)
	if err != nil {
		return image
	}
	if repo == "" {
		repo, _, _ = strings.Cut(image, "@")
		if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
	}
	for _, rd := range res.RepoDigests {
		if r, _, _ := strings.Cut(rd, "@"); r == repo {
			return rd
		}
	}
	return image
}

// isSlipwayImage says whether the image runs Slipway's agent (its
// entrypoint is /slipway agent): then the task entry and health probe are
// in it.
func (d *Driver) isSlipwayImage(ctx context.Context, image string) bool {
	res, err := d.Client.ImageInspect(ctx, image)
	if err != nil || res.Config == nil {
		return false
	}
	return slices.Equal(res.Config.Entrypoint, []string{"/slipway", "agent"})
}

// ensureNetwork creates the deployment's overlay network: attachable, so
// that a container outside the swarm's services (a debugging shell, or
// Slipway itself when it runs in a container) can join it.
func (d *Driver) ensureNetwork(ctx context.Context, dep, name string) error {
	l := d.Docker.Labels(dep, "", "network")
	l[docker.LabelName] = name
	if _, err := d.Client.NetworkInspect(ctx, networkName(dep), client.NetworkInspectOptions{}); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect network: %w", err)
	}
	_, err := d.Client.NetworkCreate(ctx, networkName(dep), client.NetworkCreateOptions{Driver: "overlay", Attachable: true, Labels: l,
		Scope: "swarm"})
	if err != nil && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("create overlay network: %w", err)
	}
	return nil
}
