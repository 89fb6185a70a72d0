package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/store"
)

// Run control timings.
const (
	// killRequestTTL is the lease of a kill key (a kill of a fire without
	// a proc key); the node deletes the key once it acted on it.
	killRequestTTL = 60
	// systemInfoWait is how long GET /nodes/{uuid}/system waits for the node.
	systemInfoWait = 5 * time.Second
	// nodeOutputPath is the node's live output endpoint (agent.OutputPath).
	nodeOutputPath = "/runs/%s/output"
)

var (
	errRunFinished    = &statusError{http.StatusConflict, "run already finished"}
	errRunNoNode      = &statusError{http.StatusConflict, "run is not placed on a node yet"}
	errNodeNotFound   = &statusError{http.StatusNotFound, "node not found"}
	errNodeNoAnswer   = &statusError{http.StatusGatewayTimeout, "node did not answer in time"}
	errProcKeyChanged = errors.New("proc key changed while marking it killed")
)

// runControl serves kill, live output and node system info.
type runControl struct {
	*server
	// client reaches nodes' live output endpoints; no overall timeout, as
	// a followed stream lasts as long as the run.
	client *http.Client
}

// runControlRoutes registers its routes under v1.
func (s *server) runControlRoutes(r *mux.Router, v1 string) {
	rc := &runControl{server: s, client: &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ResponseHeaderTimeout: 10 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		TLSClientConfig:       s.nodeTLS,
	}}}
	r.Handle(v1+"/runs/{id:[0-9]+}/kill", s.user(MaxBodyBytes, rc.killRun)).Methods(http.MethodPost)
	r.Handle(v1+"/runs/{id:[0-9]+}/output", s.user(MaxBodyBytes, rc.runOutput)).Methods(http.MethodGet)
	r.Handle(v1+"/nodes/{uuid}/system", s.user(MaxBodyBytes, rc.nodeSystem)).Methods(http.MethodGet)
}

// killRun handles POST /api/v1/runs/{id}/kill: it marks the run's proc
// key(s) Killed, or, when the run has none yet, writes a kill key the node
// also watches. 202 {"status":"killing"}; the run's final status comes from
// the node ("killed").
func (rc *runControl) killRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "run")
	if err != nil {
		return err
	}
	ctx := r.Context()
	run, err := rc.store.GetRun(ctx, id)
	if err != nil {
		return public(err, "run %d not found", id)
	}
	if cluster.Terminal(run.Status) {
		return errRunFinished
	}
	if run.Node == "" {
		return errRunNoNode
	}
	marked, err := rc.markProcsKilled(ctx, run)
	if err != nil {
		return err
	}
	if !marked {
		lease, err := rc.etcd.Grant(ctx, killRequestTTL)
		if err != nil {
			return fmt.Errorf("grant kill request lease: %w", err)
		}
		req := cluster.KillRequest{FireID: run.FireID, RequestedAt: rc.now().UTC(), RequestedBy: userName(ctx)}
		if _, _, err := dispatch.SignedPut(ctx, rc.etcd, rc.keys, rc.ring, rc.keys.Kill(run.Node, run.FireID), req, nil,
			clientv3.WithLease(lease.ID)); err != nil {
			return fmt.Errorf("write kill request of fire %s: %w", run.FireID, err)
		}
	}
	rc.log.InfoContext(ctx, "run kill requested", "run_id", run.ID, "fire_id", run.FireID, "node", run.Node,
		"through_proc_key", marked, "user", userName(ctx))
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "killing"})
	return nil
}

// markProcsKilled sets Killed in every proc key of the run's fire on its
// node, each with a txn on the key's mod revision (retried when the node
// changed it meanwhile). It reports whether any proc key was found.
func (rc *runControl) markProcsKilled(ctx context.Context, run *store.Run) (bool, error) {
	for range 5 {
		resp, err := rc.etcd.Get(ctx, rc.keys.ProcPrefix(run.Node), clientv3.WithPrefix())
		if err != nil {
			return false, fmt.Errorf("list procs of node %s: %w", run.Node, err)
		}
		found := false
		var retry bool
		for _, kv := range resp.Kvs {
			var p cluster.ProcInfo
			if json.Unmarshal(cluster.RecordBody(kv.Value), &p) != nil || p.FireID != run.FireID {
				continue
			}
			found = true
			if p.Killed {
				continue
			}
			p.Killed = true
			key := string(kv.Key)
			// Signed, so the node knows the mark comes from a server.
			_, ok, err := dispatch.SignedPut(ctx, rc.etcd, rc.keys, rc.ring, key, p,
				[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)},
				clientv3.WithIgnoreLease())
			if err != nil {
				return false, fmt.Errorf("mark proc %s killed: %w", key, err)
			}
			if !ok {
				retry = true // changed or deleted meanwhile: look again
			}
		}
		if !retry {
			return found, nil
		}
	}
	return false, errProcKeyChanged
}

// runOutput handles GET /api/v1/runs/{id}/output[?follow=1]: a finished
// run's stored output; a running one's output so far from its node, and
// with follow=1 new output as it comes until the run ends (chunked
// text/plain). When the node does not hold the run any more, the stored
// output is returned.
func (rc *runControl) runOutput(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "run")
	if err != nil {
		return err
	}
	ctx := r.Context()
	run, err := rc.store.GetRun(ctx, id)
	if err != nil {
		return public(err, "run %d not found", id)
	}
	follow := r.URL.Query().Get("follow") == "1" || r.URL.Query().Get("follow") == "true"
	if !cluster.Terminal(run.Status) && run.Node != "" {
		ok, err := rc.proxyOutput(w, r, run, follow)
		if ok || err != nil {
			return err
		}
		// The node does not hold it (finished meanwhile, or unreachable).
		if run, err = rc.store.GetRun(ctx, id); err != nil {
			return public(err, "run %d not found", id)
		}
	}
	writeText(w, run.Output)
	return nil
}

func writeText(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, body)
}

// proxyOutput streams the run's output from its node. It reports false
// (and writes nothing) when the node is gone, unreachable or does not hold
// the run.
func (rc *runControl) proxyOutput(w http.ResponseWriter, r *http.Request, run *store.Run, follow bool) (bool, error) {
	ctx := r.Context()
	resp, err := rc.etcd.Get(ctx, rc.keys.Node(run.Node))
	if err != nil {
		return false, fmt.Errorf("read node %s: %w", run.Node, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	var node cluster.NodeInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &node); err != nil {
		return false, nil
	}
	u := node.BaseURL() + fmt.Sprintf(nodeOutputPath, url.PathEscape(run.FireID))
	if !follow {
		u += "?follow=0"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("build node output request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+rc.nodeToken)
	nresp, err := rc.client.Do(req)
	if err != nil {
		rc.log.WarnContext(ctx, "node output unreachable", "node", run.Node, "error", err)
		return false, nil
	}
	defer nresp.Body.Close()
	if nresp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(nresp.Body, 4096))
		return false, nil
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := nresp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return true, nil
			}
			_ = flusher.Flush()
		}
		if err != nil {
			return true, nil // EOF: the run ended; other errors: the stream is cut
		}
	}
}

// nodeSystem handles GET /api/v1/nodes/{uuid}/system: it asks the node
// through /Cronix/system/switch/<uuid>, waits up to 5s for its answer in
// /Cronix/system/get/<uuid>, returns it and removes the request.
func (rc *runControl) nodeSystem(w http.ResponseWriter, r *http.Request) error {
	uuid := mux.Vars(r)["uuid"]
	ctx := r.Context()
	resp, err := rc.etcd.Get(ctx, rc.keys.Node(uuid), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read node %s: %w", uuid, err)
	}
	if resp.Count == 0 {
		return errNodeNotFound
	}
	wctx, cancel := context.WithTimeout(ctx, systemInfoWait)
	defer cancel()
	switchKey, getKey := rc.keys.SystemSwitch(uuid), rc.keys.SystemGet(uuid)
	// Signed, so the node knows the request comes from a server.
	req := cluster.SystemRequest{RequestedAt: rc.now().UTC(), RequestedBy: userName(ctx)}
	putRev, _, err := dispatch.SignedPut(ctx, rc.etcd, rc.keys, rc.ring, switchKey, req, nil)
	if err != nil {
		return fmt.Errorf("ask node %s for system info: %w", uuid, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if _, err := rc.etcd.Delete(dctx, switchKey); err != nil {
			rc.log.Warn("deleting system info request", "key", switchKey, "error", err)
		}
	}()
	// Only an answer written after the request counts.
	wch := rc.etcd.Watch(clientv3.WithRequireLeader(wctx), getKey, clientv3.WithRev(putRev+1))
	for wresp := range wch {
		if err := wresp.Err(); err != nil {
			break
		}
		for _, ev := range wresp.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			var info cluster.SystemInfo
			if err := json.Unmarshal(ev.Kv.Value, &info); err != nil {
				return fmt.Errorf("decode system info of node %s: %w", uuid, err)
			}
			writeJSON(w, http.StatusOK, systemInfoResponse{SystemInfo: info, CollectedAt: Time{info.CollectedAt}})
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errNodeNoAnswer
}

// systemInfoResponse is the node's SystemInfo as the API writes it: its
// collected_at in TimeLayout, like every instant of the API (the record in
// etcd keeps the node's nanoseconds).
type systemInfoResponse struct {
	cluster.SystemInfo
	CollectedAt Time `json:"collected_at"`
}
