// Package orgapi is the organization API (/api/v1/...): organizations,
// workspaces, members and invitations, basic-auth users and their login
// sessions, roles, API keys and personal access tokens, workspace secrets,
// retention (TTL) settings, the audit-log read API, and how a request's
// credential becomes an auth.Principal (identity.go).
//
// It owns the buckets of those records: each is named in a store*.go file
// and only the functions there touch it. Handlers, one file per resource,
// return domain errors that httpError (routes.go, which lists every route)
// turns into HTTP answers. The host administrator's operations
// (`slipway admin`) are the exported functions of admin.go.
package orgapi
