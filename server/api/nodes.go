package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// liveNodes reads every node registration from etcd, in key order. A
// registration that does not decode is logged and skipped.
func (s *server) liveNodes(ctx context.Context) ([]cluster.NodeInfo, error) {
	resp, err := s.etcd.Get(ctx, s.keys.NodePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read nodes from etcd: %w", err)
	}
	nodes := make([]cluster.NodeInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var n cluster.NodeInfo
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			s.log.WarnContext(ctx, "skipping undecodable node registration",
				slog.String("key", string(kv.Key)), slog.Any("error", err))
			continue
		}
		if n.UUID == "" {
			n.UUID = cluster.LastSegment(string(kv.Key))
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// listNodes handles GET /api/v1/nodes.
func (s *server) listNodes(w http.ResponseWriter, r *http.Request) error {
	nodes, err := s.liveNodes(r.Context())
	if err != nil {
		return err
	}
	out := NodeList{Items: make([]Node, 0, len(nodes))}
	for _, n := range nodes {
		out.Items = append(out.Items, nodeFromCluster(n))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getNode handles GET /api/v1/nodes/{uuid}: one live node with the state
// of its plugins (refused ones with the reason).
func (s *server) getNode(w http.ResponseWriter, r *http.Request) error {
	uuid := mux.Vars(r)["uuid"]
	resp, err := s.etcd.Get(r.Context(), s.keys.Node(uuid))
	if err != nil {
		return fmt.Errorf("read node %s from etcd: %w", uuid, err)
	}
	if len(resp.Kvs) == 0 {
		return errNodeNotFound
	}
	var n cluster.NodeInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &n); err != nil {
		return fmt.Errorf("decode node %s: %w", uuid, err)
	}
	if n.UUID == "" {
		n.UUID = uuid
	}
	writeJSON(w, http.StatusOK, nodeFromCluster(n))
	return nil
}
