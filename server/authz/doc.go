// Package authz decides who may call what: the roles, the actions each
// role may take, the principal of a request, and the route table mapping
// every HTTP route Cronix serves to the action it needs. The API enforces
// the table in one middleware (server/api, authorize); handlers never check
// roles themselves.
//
// # Roles
//
//	admin     everything: users, groups, nodes, cluster membership, audit log,
//	          every job and run in every group
//	operator  in the groups granted to them: create, update, delete, enable,
//	          disable and trigger jobs, kill runs, read runs and output;
//	          read-only on nodes and cluster status
//	viewer    in the groups granted to them: read jobs, runs and output
//
// API tokens carry a role no higher than their owner's and groups that are
// a subset of the owner's; a token never acts beyond its owner's current
// role either (the lower of the two wins).
//
// # Adding a route
//
// Every route registered on the API router needs one line in Routes, keyed
// "METHOD /path/{var}" with the route's path template (regular expressions
// of variables left out: "/api/v1/jobs/{id:[0-9]+}" is "/api/v1/jobs/{id}").
// The value says which Action the caller needs and, when the path's {id}
// names a job, run or group, which Object kind to check against the
// caller's groups:
//
//	"GET /api/v1/things":      {Action: JobsRead},
//	"POST /api/v1/things":     {Action: Admin},
//	"GET /api/v1/jobs/{id}/x": {Action: JobsRead, Object: JobObject},
//
// A route without an entry answers 500 to everyone (deny by default), and
// the tests in server/api that walk the router fail. The route table in
// docs/security.md is generated from Routes; after changing Routes, run
//
//	go test ./server/authz -run TestSecurityDoc -update
//
// (TestSecurityDoc fails while the document is stale). The authorization
// matrix test (server/api, TestAuthorizationMatrix) then needs a sample
// request for the new route in its build function.
//
// # Outcomes
//
// No or invalid credentials: 401. A role without the route's action: 403.
// An object ({id} of a job, run or group) outside the caller's groups: 404,
// exactly as if it did not exist, so ids do not leak. Lists are filtered to
// the caller's groups by the handlers through Principal.Scope. Creating or
// moving a job into a group the caller has no grant for is a 403, checked
// where jobs are saved (api.Jobs), which the xxl-job-compatible API shares.
package authz
