package oteltrace

import (
	"slices"
	"strings"
)

// AgentEnv picks, from the control plane's environment (os.Environ form),
// the OTEL_* variables every agent it starts is given, so that agents
// export where the control plane does. OTEL_SERVICE_NAME stays behind:
// an agent reports itself as slipway-agent, not as the control plane. They
// are the operator's settings, not a deployment's secrets; a deployment
// that sets one of them itself keeps its own (see WithAgentEnv).
func AgentEnv(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "OTEL_") || k == "OTEL_SERVICE_NAME" || v == "" {
			continue
		}
		out[k] = v
	}
	return out
}

// WithAgentEnv adds pass to env (a deployment's variables, from its
// secrets) where env, and the names in taken (its secret references), do
// not set the variable already: inside its agent, a deployment's own
// OTEL_* settings win over the operator's. env is modified and returned
// (made when nil and there is something to add).
func WithAgentEnv(env, pass map[string]string, taken []string) map[string]string {
	if len(pass) == 0 {
		return env
	}
	for k, v := range pass {
		if _, ok := env[k]; ok || slices.Contains(taken, k) {
			continue
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env
}
