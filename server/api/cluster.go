package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/raftha"
)

// ClusterInfo is the raft side of the cluster routes; *raftha.Node
// implements it.
type ClusterInfo interface {
	// Status is this replica's view of raft.
	Status() (raftha.Status, error)
	// AddNonvoter adds a non-voter, promoted to voter once caught up; only
	// the leader can (raftha.ErrNotLeader).
	AddNonvoter(ctx context.Context, id, address string) error
	// RemoveServer removes a member; only the leader can (raftha.ErrNotLeader).
	RemoveServer(ctx context.Context, id string) error
}

var _ ClusterInfo = (*raftha.Node)(nil)

// ClusterStatus is the body of GET /api/v1/cluster.
type ClusterStatus struct {
	// This is the raft id of the replica that answered.
	This string `json:"this"`
	// Leader is the known leader; empty id when there is none (election).
	Leader ClusterLeader `json:"leader"`
	// Term is the current raft term.
	Term uint64 `json:"term"`
	// State is this replica's raft state: Leader, Follower, Candidate or Shutdown.
	State string `json:"state"`
	// Replicas are the members of the raft configuration.
	Replicas []ClusterReplica `json:"replicas"`
	// Raft is this replica's raft progress.
	Raft ClusterRaft `json:"raft"`
}

// ClusterLeader names the raft leader.
type ClusterLeader struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// ClusterReplica is one member of the raft configuration.
type ClusterReplica struct {
	// ID is its raft id; Address its raft transport address.
	ID      string `json:"id"`
	Address string `json:"address"`
	// Suffrage is Voter, Nonvoter or Staging.
	Suffrage string `json:"suffrage"`
	// URL is its API URL from the etcd server registry ("" if not registered).
	URL string `json:"url"`
	// Alive is true when its registration (held by a 10 s etcd lease) exists.
	Alive bool `json:"alive"`
}

// ClusterRaft is a replica's raft progress.
type ClusterRaft struct {
	// LastContactMs is how long ago this follower heard from the leader (0 on
	// the leader, -1 if never).
	LastContactMs int64  `json:"last_contact_ms"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	FSMPending    uint64 `json:"fsm_pending"`
}

// AddServerRequest is the body of POST /api/v1/cluster/servers.
type AddServerRequest struct {
	// ID is the new replica's --id.
	ID string `json:"id"`
	// Address is its --raft-addr (host:port).
	Address string `json:"address"`
}

// MaxServerIDChars bounds a raft server id: a DNS name (at most 253
// characters), ":" and a port, as the default id (--raft-addr) is.
const MaxServerIDChars = 260

// serverIDPattern is what a raft server id may hold: every id a replica
// gives itself ("standalone", an --id, the default "host:port" of its
// --raft-addr, "[::1]:7946" for IPv6), and nothing that would make it
// unreachable as the {id} of DELETE /api/v1/cluster/servers/{id} (a "/",
// "%", "?", "#", spaces).
var serverIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:\[\]-]+$`)

// CheckServerID is what is wrong with a raft server id, "" if nothing.
func CheckServerID(id string) string {
	switch {
	case id == "":
		return "is required"
	case len(id) > MaxServerIDChars:
		return fmt.Sprintf("must be at most %d characters", MaxServerIDChars)
	case !serverIDPattern.MatchString(id) || strings.Trim(id, ".") == "":
		return "must be letters, digits and . _ : - [ ] (the new replica's --id; by default its --raft-addr)"
	}
	return ""
}

// checkRaftAddress is what is wrong with a raft transport address, "" if
// nothing: host:port with an IP address or a DNS name that other replicas
// can dial, and a numeric port from 1 to 65535.
func checkRaftAddress(addr string) string {
	const shape = "must be host:port (the new replica's --raft-addr)"
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return shape
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsUnspecified() {
			return fmt.Sprintf("%s: %s is no address other replicas can dial", shape, host)
		}
	} else if !validHostName(host) {
		return fmt.Sprintf("%s: %q is neither an IP address nor a host name", shape, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		return fmt.Sprintf("%s: the port must be a number from 1 to 65535, not %q", shape, port)
	}
	return ""
}

const hostNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// validHostName reports whether h is a DNS name: at most 253 characters,
// dot-separated labels of 1 to 63 letters, digits, "-" (not first or last)
// and "_" (as container names have).
func validHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if strings.TrimLeft(label, hostNameChars) != "" {
			return false
		}
	}
	return true
}

var errNoCluster = &statusError{http.StatusServiceUnavailable, "raft is not running on this replica"}

// clusterRoutes registers the cluster status and membership routes under v1.
func (s *server) clusterRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/cluster", s.user(MaxBodyBytes, s.getCluster)).Methods(http.MethodGet)
	r.Handle(v1+"/cluster/servers", s.user(MaxBodyBytes, s.addClusterServer)).Methods(http.MethodPost)
	r.Handle(v1+"/cluster/servers/{id}", s.user(MaxBodyBytes, s.removeClusterServer)).Methods(http.MethodDelete)
}

// getCluster handles GET /api/v1/cluster.
func (s *server) getCluster(w http.ResponseWriter, r *http.Request) error {
	out, err := s.clusterStatus(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) clusterStatus(ctx context.Context) (ClusterStatus, error) {
	if s.cluster == nil {
		return ClusterStatus{}, errNoCluster
	}
	st, err := s.cluster.Status()
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("read raft status: %w", err)
	}
	registered, err := s.registeredServers(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	out := ClusterStatus{
		This:     st.ID,
		Leader:   ClusterLeader{ID: st.LeaderID, Address: st.LeaderAddress},
		Term:     st.Term,
		State:    st.State,
		Replicas: make([]ClusterReplica, 0, len(st.Servers)),
		Raft: ClusterRaft{CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, FSMPending: st.FSMPending,
			LastContactMs: st.LastContact.Milliseconds()},
	}
	if st.LastContact < 0 {
		out.Raft.LastContactMs = -1
	}
	for _, m := range st.Servers {
		info, ok := registered[m.ID]
		out.Replicas = append(out.Replicas, ClusterReplica{
			ID: m.ID, Address: m.Address, Suffrage: m.Suffrage, URL: info.URL, Alive: ok,
		})
	}
	return out, nil
}

// registeredServers reads the server registry, by replica id.
func (s *server) registeredServers(ctx context.Context) (map[string]cluster.ServerInfo, error) {
	resp, err := s.etcd.Get(ctx, cluster.RegistryRoot, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read server registry from etcd: %w", err)
	}
	out := make(map[string]cluster.ServerInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if cluster.LastSegment(string(kv.Key)) != "data" {
			continue // a non-voter's raft status, not a registration
		}
		var info cluster.ServerInfo
		if err := json.Unmarshal(kv.Value, &info); err != nil || info.ID == "" {
			s.log.WarnContext(ctx, "skipping undecodable server registration",
				slog.String("key", string(kv.Key)), slog.Any("error", err))
			continue
		}
		out[info.ID] = info
	}
	return out, nil
}

// membershipError maps a raft membership error to a status.
func (s *server) membershipError(err error) error {
	switch {
	case errors.Is(err, raftha.ErrNotLeader):
		msg := "this replica is not the raft leader; send the request to the leader"
		if st, serr := s.cluster.Status(); serr == nil && st.LeaderID != "" {
			msg += " (" + st.LeaderID + ")"
		}
		return &statusError{http.StatusConflict, msg}
	case errors.Is(err, raftha.ErrUnknownServer):
		return &statusError{http.StatusNotFound, "no such server in the raft configuration"}
	}
	return err
}

// addClusterServer handles POST /api/v1/cluster/servers on the leader.
func (s *server) addClusterServer(w http.ResponseWriter, r *http.Request) error {
	if s.cluster == nil {
		return errNoCluster
	}
	var req AddServerRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body must be a JSON object"}
		}
		return err
	}
	fields := map[string]string{}
	req.ID, req.Address = strings.TrimSpace(req.ID), strings.TrimSpace(req.Address)
	if msg := CheckServerID(req.ID); msg != "" {
		fields["id"] = msg
	}
	if msg := checkRaftAddress(req.Address); msg != "" {
		fields["address"] = msg
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid request", Fields: fields}
	}
	// Raft refuses a configuration with one address twice; say so plainly
	// instead of failing inside the membership change.
	if st, err := s.cluster.Status(); err == nil {
		for _, m := range st.Servers {
			switch {
			case m.ID == req.ID:
				return &statusError{http.StatusConflict, fmt.Sprintf("server %q is already in the raft configuration (address %s); remove it first to change its address", m.ID, m.Address)}
			case m.Address == req.Address:
				return &statusError{http.StatusConflict, fmt.Sprintf("address %s already belongs to server %q; remove it first", m.Address, m.ID)}
			}
		}
	}
	if err := s.cluster.AddNonvoter(r.Context(), req.ID, req.Address); err != nil {
		return s.membershipError(err)
	}
	setAudit(r.Context(), func(a *auditRecord) {
		a.action, a.objectType, a.objectID, a.diff = "create", "cluster_server", req.ID, req
	})
	out, err := s.clusterStatus(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// removeClusterServer handles DELETE /api/v1/cluster/servers/{id} on the leader.
func (s *server) removeClusterServer(w http.ResponseWriter, r *http.Request) error {
	if s.cluster == nil {
		return errNoCluster
	}
	id := mux.Vars(r)["id"]
	// The audit entry names the address the removed member had, so the
	// log says which server left, not only under which id.
	removed := AddServerRequest{ID: id}
	if st, err := s.cluster.Status(); err == nil {
		for _, m := range st.Servers {
			if m.ID == id {
				removed.Address = m.Address
			}
		}
	}
	if err := s.cluster.RemoveServer(r.Context(), id); err != nil {
		return s.membershipError(err)
	}
	setAudit(r.Context(), func(a *auditRecord) {
		a.action, a.objectType, a.objectID, a.diff = "delete", "cluster_server", id, removed
	})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
