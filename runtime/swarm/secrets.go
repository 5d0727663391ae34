package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"slipway/runtime"
	"slipway/runtime/docker"
)

// secrets makes the revision's own secrets Swarm secrets this install
// owns, and finds the existing Swarm secrets its secret_references name;
// it returns the service's references to both. Each is mounted at
// /run/secrets/env.<NAME> or ref.<NAME> (mode 0400, the agent's user), which the task
// entry loads into the agent's environment.
func (d *Driver) secrets(ctx context.Context, s runtime.Spec, log io.Writer) ([]*swarm.SecretReference, error) {
	var refs []*swarm.SecretReference
	ref := func(id, name, file string) *swarm.SecretReference {
		return &swarm.SecretReference{SecretID: id, SecretName: name,
			File: &swarm.SecretReferenceFileTarget{Name: file, UID: agentUID, GID: agentUID, Mode: 0o400}}
	}
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, env := range names {
		name := ownSecretName(s.DeploymentID, s.RevisionID, env)
		id, err := d.ensureSecret(ctx, name, s, env)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref(id, name, envSecretPrefix+env))
	}
	for _, r := range s.SecretReferences {
		name := referencedSecretName(r)
		res, err := d.Client.SecretInspect(ctx, name, client.SecretInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("secret reference %s: the swarm has no secret %s (a Swarm secret holds one value: <secret_name>.<secret_key>, created with docker secret create %s -)",
				r.Name, name, name)
		}
		if err != nil {
			return nil, fmt.Errorf("secret reference %s: inspect secret %q: %w", r.Name, name, err)
		}
		refs = append(refs, ref(res.Secret.ID, name, refSecretPrefix+r.Name))
	}
	if len(refs) > 0 {
		fmt.Fprintf(log, "secrets passed as Swarm secrets: %d\n", len(refs))
	}
	return refs, nil
}

// agentUID owns the secret files: the agent's user in every image Slipway
// builds.
const agentUID = "65534"

func (d *Driver) ensureSecret(ctx context.Context, name string, s runtime.Spec, env string) (string, error) {
	if res, err := d.Client.SecretInspect(ctx, name, client.SecretInspectOptions{}); err == nil {
		if !d.Docker.Ours(res.Secret.Spec.Labels, true) {
			return "", fmt.Errorf("secret %s: a Swarm secret of that name belongs to another install", env)
		}
		return res.Secret.ID, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("secret %s: inspect: %w", env, err)
	}
	l := d.Docker.Labels(s.DeploymentID, s.RevisionID, "secret")
	l[LabelEnv] = env
	res, err := d.Client.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: l}, Data: []byte(s.Env[env])}})
	if cerrdefs.IsConflict(err) {
		// Created meanwhile by a repeated call.
		again, ierr := d.Client.SecretInspect(ctx, name, client.SecretInspectOptions{})
		if ierr == nil {
			return again.Secret.ID, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("secret %s: create the Swarm secret: %w", env, err)
	}
	return res.ID, nil
}

// collectSecrets removes this install's secrets of dep that neither the
// service's spec nor its previous spec (what a rollback returns to) uses.
func (d *Driver) collectSecrets(ctx context.Context, dep string, claimed bool) {
	used := map[string]bool{}
	if res, err := d.Client.ServiceInspect(ctx, serviceName(dep), client.ServiceInspectOptions{}); err == nil {
		for _, spec := range []*swarm.ServiceSpec{&res.Service.Spec, res.Service.PreviousSpec} {
			if spec == nil || spec.TaskTemplate.ContainerSpec == nil {
				continue
			}
			for _, r := range spec.TaskTemplate.ContainerSpec.Secrets {
				used[r.SecretID] = true
			}
		}
	} else if !cerrdefs.IsNotFound(err) {
		return
	}
	if err := d.removeSecretsExcept(ctx, dep, claimed, used); err != nil {
		d.Log.Warn().Err(err).Str("deployment_id", dep).Msg("remove unused swarm secrets")
	}
}

func (d *Driver) removeSecrets(ctx context.Context, dep string, claimed bool) error {
	return d.removeSecretsExcept(ctx, dep, claimed, nil)
}

func (d *Driver) removeSecretsExcept(ctx context.Context, dep string, claimed bool, keep map[string]bool) error {
	res, err := d.Client.SecretList(ctx, client.SecretListOptions{Filters: client.Filters{}.
		Add("label", docker.LabelManaged+"=true").Add("label", docker.LabelDeployment+"="+dep)})
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	var errs []error
	for _, s := range res.Items {
		if keep[s.ID] || !d.Docker.Ours(s.Spec.Labels, claimed) {
			continue
		}
		if _, err := d.Client.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove secret %s: %w", s.Spec.Name, err))
		}
	}
	return errors.Join(errs...)
}
