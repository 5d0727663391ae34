package audit

import "strings"

// OCSF API Activity activity ids.
const (
	ActivityCreate = 1
	ActivityRead   = 2
	ActivityUpdate = 3
	ActivityDelete = 4
	ActivityOther  = 99
)

// Operations is every api.operation value the spec lists, in its order,
// then Slipway's own.
// Queries validate `operations` against it, so a filter on an operation
// Slipway does not (yet) perform is valid and simply matches nothing.
var Operations = []string{
	// API keys and credentials
	"create_api_key", "delete_api_key", "create_personal_access_token", "delete_personal_access_token",
	"create_service_key", "delete_service_key",
	// Roles
	"create_role", "update_role", "delete_role",
	// Organization members
	"invite_user_to_org", "invite_users_to_org_batch", "update_org_member", "delete_org_member",
	"delete_org_pending_member", "add_basic_auth_users_to_org", "update_basic_auth_user",
	// SSO and authentication
	"create_sso_settings", "update_sso_settings", "delete_sso_settings", "update_login_methods",
	"update_default_sso_provision_organization",
	// SCIM provisioning
	"create_scim_token", "update_scim_token", "delete_scim_token", "create_scim_user", "update_scim_user",
	"delete_scim_user", "create_scim_group", "update_scim_group", "delete_scim_group",
	// Billing and business info
	"update_organization_info", "update_business_info", "update_payment_plan", "update_payment_method",
	"create_payment_setup_intent", "create_payment_checkout_session", "confirm_payment_checkout_session",
	"create_payment_account_link",
	// Workspaces
	"create_workspace", "update_workspace", "delete_workspace", "add_member_to_workspace",
	"add_members_to_workspace_batch", "delete_workspace_member", "update_workspace_member",
	"delete_workspace_pending_member", "update_workspace_secrets", "unshare_entities", "set_tenant_handle",
	// Data retention
	"update_ttl_settings", "update_usage_limit", "delete_usage_limit",
	// Tracing projects
	"update_tracer_session", "delete_tracer_session", "delete_tracer_sessions",
	// Datasets
	"create_dataset", "create_csv_dataset", "update_dataset", "delete_dataset", "delete_datasets",
	"update_dataset_version", "update_dataset_splits", "share_dataset", "unshare_dataset", "clone_dataset",
	"create_experiment_via_upload", "create_playground_experiment", "create_comparative_experiment",
	"delete_comparative_experiment",
	// Examples
	"create_example", "create_examples", "update_example", "update_examples", "delete_example", "delete_examples",
	// Deployments
	"create_deployment", "update_deployment", "delete_deployment",
	// Prompt webhooks
	"create_prompt_webhook", "update_prompt_webhook", "delete_prompt_webhook", "test_prompt_webhook",
	// Bulk exports
	"create_bulk_export", "cancel_bulk_export", "read_bulk_export_destination", "create_bulk_export_destination",
	"update_bulk_export_destination",
	// Resource tags
	"create_tag_key", "update_tag_key", "delete_tag_key", "create_tag_value", "update_tag_value",
	"delete_tag_value", "create_tagging", "delete_tagging",
	// Access policies
	"create_access_policy", "delete_access_policy", "list_access_policies", "read_access_policy",
	"attach_access_policies", "read_role_access_policies",
	// Custom charts
	"create_chart", "update_chart", "delete_chart", "create_chart_section", "update_chart_section",
	"delete_chart_section", "clone_chart_section", "create_org_chart", "update_org_chart", "delete_org_chart",
	"create_org_chart_section", "update_org_chart_section", "delete_org_chart_section",
	// Model pricing
	"create_model_price_map", "update_model_price_map", "delete_model_price_map",
	// Slipway's own (the spec says the set may grow). Where the hosted
	// service's operation enum has a name for the action, it is used:
	// login (a sign-in, successful or refused, in the account's
	// organization) and create_organization (`slipway admin org create`).
	// logout, update_organization_config (`slipway admin org set-flag` and
	// `unset-flag`), delete_audit_logs (`slipway admin audit prune`) and
	// update_audit_index (`slipway admin audit reindex`) have no
	// counterpart there.
	"login", "logout", "create_organization", "update_organization_config", "delete_audit_logs",
	"update_audit_index",
}

var known = func() map[string]bool {
	m := make(map[string]bool, len(Operations))
	for _, op := range Operations {
		m[op] = true
	}
	return m
}()

// Known reports whether op is one of the spec's operations.
func Known(op string) bool { return known[op] }

// ActivityID derives the OCSF activity from the operation's verb. Reads
// (list_, read_) are Read; verbs that neither create, update nor delete
// (invite, add, attach, share, clone, test, cancel, confirm, set) are Other.
func ActivityID(op string) int {
	verb, _, _ := strings.Cut(op, "_")
	switch verb {
	case "create":
		return ActivityCreate
	case "update", "upsert":
		return ActivityUpdate
	case "delete":
		return ActivityDelete
	case "read", "list":
		return ActivityRead
	}
	return ActivityOther
}

// ActivityName is the OCSF caption of an activity id.
func ActivityName(id int) string {
	switch id {
	case ActivityCreate:
		return "Create"
	case ActivityRead:
		return "Read"
	case ActivityUpdate:
		return "Update"
	case ActivityDelete:
		return "Delete"
	}
	return "Other"
}
