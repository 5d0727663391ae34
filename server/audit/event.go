package audit

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Native is the service's own audit record, carried whole in
// unmapped.original_audit_log as the hosted service does.
type Native struct {
	ID                 string      `json:"id"`
	OperationName      string      `json:"operation_name"`
	OperationSucceeded bool        `json:"operation_succeeded"`
	RequestTime        string      `json:"request_time"`
	APIKeyID           *string     `json:"api_key_id"`
	UserID             string      `json:"user_id"`
	OrganizationID     string      `json:"organization_id"`
	WorkspaceID        *string     `json:"workspace_id"`
	Enrichments        Enrichments `json:"enrichments"`
}

// Enrichments are the request facts of a native record.
type Enrichments struct {
	RequestMethod      string   `json:"request_method"`
	RequestPath        string   `json:"request_path"`
	ClientHost         string   `json:"client_host"`
	ClientPort         int      `json:"client_port"`
	XForwardedFor      *string  `json:"x_forwarded_for"`
	ResponseStatusCode int      `json:"response_status_code"`
	ResourceIDs        []string `json:"resource_ids"`
}

// Resource is an affected resource.
type Resource struct {
	UID  string `json:"uid"`
	Type string `json:"type,omitempty"`
	Name string `json:"name,omitempty"`
}

// Actor identifies who acted.
type Actor struct {
	OrgID        string  `json:"org"`
	WorkspaceID  string  `json:"ws,omitempty"` // "" when the request had no workspace
	UserID       string  `json:"user"`
	CredentialID *string `json:"cred,omitempty"` // nil for session authentication
	Service      bool    `json:"svc,omitempty"`  // a service identity rather than a person
	// Host marks the host administrator (`slipway admin` over the admin
	// socket), who is no account of the organization: UserID is HostAdmin.
	Host bool `json:"host,omitempty"`
	// HostUID is the unix uid of the process that connected to the admin
	// socket (SO_PEERCRED), when the socket told.
	HostUID *int `json:"huid,omitempty"`
}

// HostAdmin is the actor.user.uid of the host administrator's events: the
// nil UUID, which no account ever has (ids are random version 7 UUIDs).
const HostAdmin = "00000000-0000-0000-0000-000000000000"

// HostAdminService is the api.service.name of the host administrator's
// events, which arrive on the admin socket rather than the HTTP API.
const HostAdminService = "slipway-admin"

// Request is what the event records of the HTTP exchange.
type Request struct {
	ID        string   `json:"id,omitempty"`
	Method    string   `json:"m"`
	Path      string   `json:"p"`
	UserAgent string   `json:"ua,omitempty"`
	ClientIP  string   `json:"ip"`
	Port      int      `json:"port,omitempty"`
	Forwarded []string `json:"fwd,omitempty"` // X-Forwarded-For hops, when honoured
	Status    int      `json:"st"`            // HTTP status of the response
	// Hostname names the source when it has no address: the host itself,
	// for a request on the admin socket.
	Hostname string `json:"hn,omitempty"`
}

// event is an OCSF 1.7.0 API Activity event (class 6003).
type event struct {
	ActivityID   int            `json:"activity_id"`
	ActivityName string         `json:"activity_name"`
	CategoryUID  int            `json:"category_uid"`
	CategoryName string         `json:"category_name"`
	ClassUID     int            `json:"class_uid"`
	ClassName    string         `json:"class_name"`
	TypeUID      int            `json:"type_uid"`
	TypeName     string         `json:"type_name"`
	SeverityID   int            `json:"severity_id"`
	Severity     string         `json:"severity"`
	Time         int64          `json:"time"`
	StatusID     int            `json:"status_id"`
	Status       string         `json:"status"`
	StatusCode   string         `json:"status_code"`
	StatusDetail string         `json:"status_detail,omitempty"`
	Message      string         `json:"message"`
	Metadata     metadata       `json:"metadata"`
	Actor        actor          `json:"actor"`
	API          api            `json:"api"`
	SrcEndpoint  endpoint       `json:"src_endpoint"`
	HTTPRequest  httpRequest    `json:"http_request"`
	HTTPResponse httpResponse   `json:"http_response"`
	Resources    []Resource     `json:"resources"`
	Unmapped     map[string]any `json:"unmapped"`
}

type metadata struct {
	Version    string  `json:"version"`
	UID        string  `json:"uid"`
	LoggedTime int64   `json:"logged_time"`
	Product    product `json:"product"`
}

type product struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version"`
}

type actor struct {
	User user `json:"user"`
}

type user struct {
	UID           string  `json:"uid"`
	UIDAlt        string  `json:"uid_alt,omitempty"`
	Name          string  `json:"name,omitempty"`
	CredentialUID *string `json:"credential_uid"`
	Type          string  `json:"type"`
	TypeID        int     `json:"type_id"`
}

type api struct {
	Operation string      `json:"operation"`
	Request   apiRequest  `json:"request"`
	Response  apiResponse `json:"response"`
	Service   apiService  `json:"service"`
}

type apiRequest struct {
	UID string `json:"uid"`
}

type apiResponse struct {
	Code int `json:"code"`
}

type apiService struct {
	Name string `json:"name"`
}

type endpoint struct {
	IP              string   `json:"ip,omitempty"`
	Hostname        string   `json:"hostname,omitempty"`
	Port            int      `json:"port,omitempty"`
	IntermediateIPs []string `json:"intermediate_ips,omitempty"`
}

type httpRequest struct {
	HTTPMethod string `json:"http_method"`
	URL        url    `json:"url"`
	UserAgent  string `json:"user_agent,omitempty"`
}

type url struct {
	Path string `json:"path"`
}

type httpResponse struct {
	Code int `json:"code"`
}

// build assembles the OCSF event for one operation.
func build(id string, t time.Time, op string, ok bool, detail string, a Actor, req Request, res []Resource, version string) *event {
	act := ActivityID(op)
	e := &event{
		ActivityID: act, ActivityName: ActivityName(act),
		CategoryUID: 6, CategoryName: "Application Activity",
		ClassUID: 6003, ClassName: "API Activity",
		TypeUID: 600300 + act, TypeName: "API Activity: " + ActivityName(act),
		SeverityID: 1, Severity: "Informational",
		Time:       t.UnixMilli(),
		StatusCode: strconv.Itoa(req.Status),
		Metadata: metadata{Version: "1.7.0", UID: id, LoggedTime: t.UnixMilli(),
			Product: product{Name: "Slipway", VendorName: "Slipway", Version: version}},
		Actor: actor{User: user{UID: a.UserID, CredentialUID: a.CredentialID, Type: "User", TypeID: 1}},
		API: api{Operation: op, Request: apiRequest{UID: req.ID}, Response: apiResponse{Code: req.Status},
			Service: apiService{Name: "slipway"}},
		SrcEndpoint:  endpoint{IP: req.ClientIP, Hostname: req.Hostname, Port: req.Port, IntermediateIPs: req.Forwarded},
		HTTPRequest:  httpRequest{HTTPMethod: req.Method, URL: url{Path: req.Path}, UserAgent: req.UserAgent},
		HTTPResponse: httpResponse{Code: req.Status},
		Resources:    res,
	}
	if a.Service {
		e.Actor.User.Type, e.Actor.User.TypeID = "Other", 99
	}
	if a.Host {
		// OCSF's Admin account type is "Admin/root user account": the
		// host's owner, whose unix uid is the alternate id.
		e.Actor.User.UID, e.Actor.User.Name = HostAdmin, "host administrator"
		e.Actor.User.Type, e.Actor.User.TypeID = "Admin", 2
		if a.HostUID != nil {
			e.Actor.User.UIDAlt = "unix uid " + strconv.Itoa(*a.HostUID)
		}
		e.API.Service.Name = HostAdminService
	}
	if e.Resources == nil {
		e.Resources = []Resource{}
	}
	if ok {
		e.StatusID, e.Status, e.Message = 1, "Success", op+" succeeded"
	} else {
		e.StatusID, e.Status, e.Message = 2, "Failure", op+" was refused"
		e.StatusDetail = detail
	}
	ids := make([]string, len(e.Resources))
	for i, r := range e.Resources {
		ids[i] = r.UID
	}
	native := Native{ID: id, OperationName: op, OperationSucceeded: ok, RequestTime: t.Format(time.RFC3339Nano),
		APIKeyID: a.CredentialID, UserID: e.Actor.User.UID, OrganizationID: a.OrgID,
		Enrichments: Enrichments{RequestMethod: req.Method, RequestPath: req.Path, ClientHost: cmp.Or(req.ClientIP, req.Hostname),
			ClientPort: req.Port, ResponseStatusCode: req.Status, ResourceIDs: ids}}
	if a.WorkspaceID != "" {
		ws := a.WorkspaceID
		native.WorkspaceID = &ws
	}
	if len(req.Forwarded) > 0 {
		xff := strings.Join(req.Forwarded, ", ")
		native.Enrichments.XForwardedFor = &xff
	}
	e.Unmapped = map[string]any{"original_audit_log": native}
	return e
}

// Res is shorthand for a resource with a type.
func Res(uid any, typ string) Resource {
	switch v := uid.(type) {
	case uuid.UUID:
		return Resource{UID: v.String(), Type: typ}
	case string:
		return Resource{UID: v, Type: typ}
	}
	return Resource{UID: fmt.Sprint(uid), Type: typ}
}
