package controlplane

import (
	"fmt"

	"slipway/storage"
)

// A deployment's secrets are stored sealed, each under the master key
// with its deployment and name as associated data, so a sealed value
// copied to another deployment or name does not open. Handlers seal what
// a request brings; the reconciler opens a revision's for the runtime.

// sealSecrets seals the values of a deployment's secrets.
func sealSecrets(sealer *storage.Sealer, depID string, in []Secret) []Secret {
	out := make([]Secret, len(in))
	for i, sec := range in {
		out[i] = Secret{Name: sec.Name, Value: sealer.Seal(sec.Value, depID+"/"+sec.Name)}
	}
	return out
}

// openSecrets decrypts a deployment's or revision's sealed secrets for the
// runtime.
func openSecrets(sealer *storage.Sealer, depID string, sealed []Secret) (map[string]string, error) {
	env := make(map[string]string, len(sealed))
	for _, sec := range sealed {
		v, err := sealer.Open(sec.Value, depID+"/"+sec.Name)
		if err != nil {
			return nil, fmt.Errorf("secret %s of deployment %s: %w", sec.Name, depID, err)
		}
		env[sec.Name] = v
	}
	return env, nil
}
