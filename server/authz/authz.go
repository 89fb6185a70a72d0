package authz

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cronix/cronix/server/store"
)

// Action is what a route does, as far as permissions go.
type Action string

// Actions, from the most open to the most restricted.
const (
	// Public routes need no credentials (login, health, the OpenAPI document).
	Public Action = "public"
	// Node routes accept only the node token (result intake).
	Node Action = "node"
	// Self routes are open to every authenticated user or API token: their
	// own session, password and tokens.
	Self Action = "self"
	// JobsRead reads jobs, runs, output, groups, handlers of the caller's groups.
	JobsRead Action = "jobs:read"
	// JobsWrite creates, updates, deletes, enables and disables jobs.
	JobsWrite Action = "jobs:write"
	// JobsRun triggers jobs and kills runs.
	JobsRun Action = "jobs:run"
	// NodesRead reads the node list and node system information.
	NodesRead Action = "nodes:read"
	// ClusterRead reads the server replicas, leader and term.
	ClusterRead Action = "cluster:read"
	// Admin is everything else: users, groups, cluster membership, audit log.
	Admin Action = "admin"
)

// Object is what the {id} variable of a route names, checked against the
// caller's groups before the handler runs.
type Object string

// Objects.
const (
	NoObject    Object = ""
	JobObject   Object = "job"
	RunObject   Object = "run"
	GroupObject Object = "group"
)

// Rule is what a route needs.
type Rule struct {
	Action Action
	Object Object
}

// Roles lists the roles from the most to the least powerful.
var Roles = []string{store.RoleAdmin, store.RoleOperator, store.RoleViewer}

// roleActions are the actions each role may take (Public and Node are not
// role actions: anyone resp. only the node token).
var roleActions = map[string][]Action{
	store.RoleViewer:   {Self, JobsRead},
	store.RoleOperator: {Self, JobsRead, JobsWrite, JobsRun, NodesRead, ClusterRead},
	store.RoleAdmin:    {Self, JobsRead, JobsWrite, JobsRun, NodesRead, ClusterRead, Admin},
}

// ValidRole reports whether role is one of Roles.
func ValidRole(role string) bool { return slices.Contains(Roles, role) }

// Rank orders roles: admin 3, operator 2, viewer 1, anything else 0.
func Rank(role string) int {
	if i := slices.Index(Roles, role); i >= 0 {
		return len(Roles) - i
	}
	return 0
}

// Lower returns the less powerful of two roles.
func Lower(a, b string) string {
	if Rank(a) <= Rank(b) {
		return a
	}
	return b
}

// Allows reports whether role may take action a.
func Allows(role string, a Action) bool {
	if a == Public {
		return true
	}
	return slices.Contains(roleActions[role], a)
}

// Routes maps "METHOD /path/{var}" to what the route needs. Add one line
// per route (see the package doc). "* /prefix/" entries are catch-alls of
// a path prefix.
var Routes = map[string]Rule{
	"GET /healthz":  {Action: Public},
	"HEAD /healthz": {Action: Public},
	"GET /readyz":   {Action: Public},
	"HEAD /readyz":  {Action: Public},
	// Prometheus metrics on the API port need any login or API token; the
	// separate --metrics-addr listener serves them without one.
	"GET /metrics":               {Action: Self},
	"GET /api/v1/openapi.json":   {Action: Public},
	"POST /api/v1/auth/login":    {Action: Public},
	"POST /api/v1/auth/logout":   {Action: Self},
	"GET /api/v1/auth/me":        {Action: Self},
	"POST /api/v1/auth/password": {Action: Self},

	"GET /api/v1/jobs":                    {Action: JobsRead},
	"POST /api/v1/jobs":                   {Action: JobsWrite},
	"POST /api/v1/jobs/batch":             {Action: JobsWrite}, // each job's group checked by the handler
	"GET /api/v1/jobs/{id}":               {Action: JobsRead, Object: JobObject},
	"PUT /api/v1/jobs/{id}":               {Action: JobsWrite, Object: JobObject},
	"DELETE /api/v1/jobs/{id}":            {Action: JobsWrite, Object: JobObject},
	"POST /api/v1/jobs/{id}/trigger":      {Action: JobsRun, Object: JobObject},
	"GET /api/v1/jobs/{id}/runs":          {Action: JobsRead, Object: JobObject},
	"GET /api/v1/jobs/{id}/versions":      {Action: JobsRead, Object: JobObject},
	"GET /api/v1/runs":                    {Action: JobsRead},
	"GET /api/v1/runs/{id}":               {Action: JobsRead, Object: RunObject},
	"GET /api/v1/runs/{id}/output":        {Action: JobsRead, Object: RunObject},
	"POST /api/v1/runs/{id}/kill":         {Action: JobsRun, Object: RunObject},
	"GET /api/v1/schedules/preview":       {Action: JobsRead},
	"GET /api/v1/handlers":                {Action: JobsRead},
	"GET /api/v1/groups":                  {Action: JobsRead},
	"POST /api/v1/groups":                 {Action: Admin},
	"GET /api/v1/groups/{id}":             {Action: JobsRead, Object: GroupObject},
	"PUT /api/v1/groups/{id}":             {Action: Admin, Object: GroupObject},
	"DELETE /api/v1/groups/{id}":          {Action: Admin, Object: GroupObject},
	"GET /api/v1/nodes":                   {Action: NodesRead},
	"GET /api/v1/nodes/{uuid}":            {Action: NodesRead},
	"GET /api/v1/nodes/{uuid}/system":     {Action: NodesRead},
	"GET /api/v1/cluster":                 {Action: ClusterRead},
	"POST /api/v1/cluster/servers":        {Action: Admin},
	"DELETE /api/v1/cluster/servers/{id}": {Action: Admin},

	"GET /api/v1/users":                {Action: Admin},
	"POST /api/v1/users":               {Action: Admin},
	"GET /api/v1/users/{id}":           {Action: Admin},
	"PATCH /api/v1/users/{id}":         {Action: Admin},
	"DELETE /api/v1/users/{id}":        {Action: Admin},
	"POST /api/v1/users/{id}/password": {Action: Admin},
	"GET /api/v1/users/{id}/groups":    {Action: Admin},
	"PUT /api/v1/users/{id}/groups":    {Action: Admin},
	"GET /api/v1/tokens":               {Action: Self},
	"POST /api/v1/tokens":              {Action: Self},
	"DELETE /api/v1/tokens/{id}":       {Action: Self},
	"GET /api/v1/audit":                {Action: Admin},

	// Alerts (server/api/alerts.go). The list is not filtered by group
	// yet, so it is for operators and admins, who see cluster status.
	"GET /api/v1/alerts":            {Action: ClusterRead},
	"POST /api/v1/alerts/test":      {Action: Admin},
	"GET /api/v1/settings/alerting": {Action: Admin},
	"PUT /api/v1/settings/alerting": {Action: Admin},

	// Daily report (server/api/reports.go), filtered to the caller's groups.
	"GET /api/v1/reports/daily": {Action: JobsRead},

	// The dashboard's figures (server/api/summary.go), filtered to the caller's groups.
	"GET /api/v1/stats/summary": {Action: JobsRead},

	// Security events (server/api/security.go): nodes report refused
	// records; admins read them.
	"GET /api/v1/security/events": {Action: Admin},

	"POST /api/v1/internal/results":         {Action: Node},
	"POST /api/v1/internal/security-events": {Action: Node},

	// The xxl-job-compatible API (server/compat).
	"GET /jobgroup/list":    {Action: JobsRead},
	"POST /jobgroup/list":   {Action: JobsRead},
	"GET /jobinfo/list":     {Action: JobsRead},
	"POST /jobinfo/list":    {Action: JobsRead},
	"POST /jobinfo/add":     {Action: JobsWrite},
	"POST /jobinfo/update":  {Action: JobsWrite},
	"POST /jobinfo/start":   {Action: JobsWrite},
	"POST /jobinfo/stop":    {Action: JobsWrite},
	"POST /jobinfo/remove":  {Action: JobsWrite},
	"POST /jobinfo/trigger": {Action: JobsRun},
	// Other paths under the compat prefixes reach the compat handler only
	// to be answered 404/405 in xxl-job's envelope.
	"* /jobinfo/":  {Action: Public},
	"* /jobgroup/": {Action: Public},
}

// varPattern matches the regular expression of a path template variable.
var varPattern = regexp.MustCompile(`\{([^:}]+):[^}]*\}`)

// Key is the Routes key of a method and a mux path template.
func Key(method, template string) string {
	return method + " " + varPattern.ReplaceAllString(template, "{$1}")
}

// Lookup returns the rule of a request's method and matched path template;
// HEAD falls back to GET, then any method to the "*" entry.
func Lookup(method, template string) (Rule, bool) {
	if r, ok := Routes[Key(method, template)]; ok {
		return r, true
	}
	if method == "HEAD" {
		if r, ok := Routes[Key("GET", template)]; ok {
			return r, true
		}
	}
	r, ok := Routes[Key("*", template)]
	return r, ok
}

// Kind is how a principal authenticated.
type Kind string

// Principal kinds.
const (
	KindSession Kind = "session" // a login session (bearer or cookie)
	KindToken   Kind = "token"   // an API token
)

// Principal is who is calling: a user through a session or an API token.
type Principal struct {
	Kind     Kind
	UserID   int64
	Username string
	// Role is the effective role (for a token, the lower of its role and its owner's).
	Role string
	// Groups are the group ids granted (for a token, its own groups that its owner still has).
	Groups []int64
	// Cookie is true when the session came from the cookie (CSRF applies).
	Cookie bool
	// SessionHash and CSRFToken identify the session (KindSession).
	SessionHash string
	CSRFToken   string
	// TokenID is the API token (KindToken).
	TokenID int64
}

// Allows reports whether p may take action a.
func (p *Principal) Allows(a Action) bool { return p != nil && Allows(p.Role, a) }

// AllGroups reports whether p sees every group (admins).
func (p *Principal) AllGroups() bool { return p != nil && p.Role == store.RoleAdmin }

// InGroup reports whether p may see the group with this id.
func (p *Principal) InGroup(id int64) bool {
	return p.AllGroups() || (p != nil && slices.Contains(p.Groups, id))
}

// Scope is the store filter of what p sees: nil for admins (everything).
func (p *Principal) Scope() *store.Scope {
	if p.AllGroups() {
		return nil
	}
	if p == nil {
		return &store.Scope{}
	}
	return &store.Scope{GroupIDs: append([]int64{}, p.Groups...)}
}

// Markdown renders the route table for docs/security.md: one row per route
// with the action it needs and which roles may call it.
func Markdown() string {
	keys := make([]string, 0, len(Routes))
	for k := range Routes {
		if strings.HasPrefix(k, "* ") {
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := routePath(keys[i]), routePath(keys[j])
		if pi != pj {
			return pi < pj
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	b.WriteString("| route | needs | viewer | operator | admin |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		r := Routes[k]
		need := string(r.Action)
		if r.Object != NoObject {
			need += " (" + string(r.Object) + " in caller's groups)"
		}
		cells := make([]string, 0, 3)
		for _, role := range []string{store.RoleViewer, store.RoleOperator, store.RoleAdmin} {
			switch {
			case r.Action == Node:
				cells = append(cells, "node token only")
			case Allows(role, r.Action):
				cells = append(cells, "yes")
			default:
				cells = append(cells, "—")
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", k, need, strings.Join(cells, " | "))
	}
	return b.String()
}

func routePath(key string) string {
	_, p, _ := strings.Cut(key, " ")
	return p
}
