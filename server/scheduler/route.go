package scheduler

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// NodeOnline is the registration status of a healthy node (FAILOVER).
const NodeOnline = "online"

// ringReplicas is the number of virtual nodes per node on the
// CONSISTENT_HASH ring.
const ringReplicas = 160

// routeState is the replicated per-job state of the stateful route
// strategies, stored in raft (route state key routeKey(job id)) as JSON so
// it continues across leader changes and restarts.
type routeState struct {
	// Seq counts the job's routed fires: the ROUND cursor and the LRU clock.
	Seq uint64 `json:"seq,omitempty"`
	// Uses counts fires per node (LEAST_FREQUENTLY_USED).
	Uses map[string]uint64 `json:"uses,omitempty"`
	// Last is the Seq value of each node's latest fire (LEAST_RECENTLY_USED).
	Last map[string]uint64 `json:"last,omitempty"`
}

const routeKeyPrefix = "job/"

func routeKey(jobID int64) string { return routeKeyPrefix + strconv.FormatInt(jobID, 10) }

// loadRoutes decodes the route state entries of jobs read from raft.
func (l *loop) loadRoutes() {
	l.routes = map[int64]*routeState{}
	for k, v := range l.cfg.Cursors.RouteStates() {
		rest, ok := strings.CutPrefix(k, routeKeyPrefix)
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			continue
		}
		var rs routeState
		if err := json.Unmarshal(v, &rs); err != nil {
			l.log.Warn("ignoring malformed route state", "job_id", id, "err", err)
			continue
		}
		l.routes[id] = &rs
	}
}

// routeStateOf returns the job's route state for update and marks it to be
// written with the next tick's raft entry.
func (l *loop) routeStateOf(jobID int64) *routeState {
	rs, ok := l.routes[jobID]
	if !ok {
		rs = &routeState{}
		l.routes[jobID] = rs
	}
	l.routesDirty[jobID] = true
	return rs
}

// eligible is the live nodes of the job's group offering its handler: for
// a manual group the live nodes listed in its Addresses (whatever group
// they registered with), in list order; otherwise (auto, or a group not
// defined in SQL) the live nodes registered with the group, sorted by uuid.
func (l *loop) eligible(j *jobSpec) []cluster.NodeInfo {
	var out []cluster.NodeInfo
	if g, ok := l.defs[j.Group]; ok && g.AddressType == store.AddressManual {
		for _, uuid := range g.Addresses {
			if n, ok := l.nodes[uuid]; ok && n.HasHandler(j.Handler) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, n := range l.groups[j.Group] {
		if n.HasHandler(j.Handler) {
			out = append(out, n)
		}
	}
	return out
}

// target is one node a fire goes to; total > 0 for a shard of a
// SHARDING_BROADCAST fire.
type target struct {
	node         string
	index, total int
}

// route chooses the target node(s) of one fire of j by its route strategy,
// updating the strategy's route state. A non-empty message says why there
// is no target (the run is then recorded as failed).
func (l *loop) route(j *jobSpec) ([]target, string) {
	if j.NodeUUID != "" {
		n, ok := l.nodes[j.NodeUUID]
		switch {
		case !ok:
			return nil, fmt.Sprintf("pinned node %s is not live", j.NodeUUID)
		case !n.HasHandler(j.Handler):
			return nil, fmt.Sprintf("pinned node %s does not offer handler %q", j.NodeUUID, j.Handler)
		}
		return []target{{node: j.NodeUUID}}, ""
	}
	el := l.eligible(j)
	if len(el) == 0 {
		return nil, fmt.Sprintf("no live node of group %q offers handler %q", j.Group, j.Handler)
	}
	one := func(n cluster.NodeInfo) ([]target, string) { return []target{{node: n.UUID}}, "" }
	switch j.RouteStrategy {
	case "", cluster.RouteFirst:
		return one(el[0])
	case cluster.RouteLast:
		return one(el[len(el)-1])
	case cluster.RouteRound:
		rs := l.routeStateOf(j.ID)
		n := el[at(el, j.ID, rs.Seq)]
		rs.Seq++
		return one(n)
	case cluster.RouteRandom:
		return one(el[rand.IntN(len(el))])
	case cluster.RouteConsistentHash:
		return []target{{node: l.ring(j, el).get(j.ID)}}, ""
	case cluster.RouteLeastFrequentlyUse:
		return one(l.leastFrequentlyUsed(j.ID, el))
	case cluster.RouteLeastRecentlyUsed:
		return one(l.leastRecentlyUsed(j.ID, el))
	case cluster.RouteFailover:
		for _, n := range el {
			if n.Status == NodeOnline && l.beat.healthy(n.UUID) {
				return one(n)
			}
		}
		return nil, fmt.Sprintf("FAILOVER: no healthy (online, beating) node of group %q offers handler %q", j.Group, j.Handler)
	case cluster.RouteBusyover:
		for _, n := range el {
			if !l.runs.busy(n.UUID, j.ID) {
				return one(n)
			}
		}
		return nil, fmt.Sprintf("BUSYOVER: every node of group %q is running job %d", j.Group, j.ID)
	case cluster.RouteShardingBroadcast:
		ts := make([]target, len(el))
		for i, n := range el {
			ts[i] = target{node: n.UUID, index: i, total: len(el)}
		}
		return ts, ""
	default:
		l.log.Warn("unknown route strategy; using FIRST", "job_id", j.ID, "route_strategy", j.RouteStrategy)
		return one(el[0])
	}
}

// at is the index in el of the k-th node in the job's own order: el
// starting at the job's id modulo len(el), wrapping around. ROUND's cycle
// follows it, and LFU and LRU break ties by it, so many jobs on one
// schedule spread over the nodes in every tick, where starting each at the
// first node sent all of a tick's fires to one node, the next tick's all to
// the next.
func at(el []cluster.NodeInfo, jobID int64, k uint64) int {
	return int((uint64(jobID) + k) % uint64(len(el)))
}

// leastFrequentlyUsed picks the eligible node with the fewest fires of the
// job (ties: the first in the job's own order, at). A node new to
// the job starts at the current minimum, so a joining node shares the load
// instead of taking every fire until it caught up. Nodes no longer
// eligible are forgotten.
func (l *loop) leastFrequentlyUsed(jobID int64, el []cluster.NodeInfo) cluster.NodeInfo {
	rs := l.routeStateOf(jobID)
	if rs.Uses == nil {
		rs.Uses = map[string]uint64{}
	}
	pruneTo(rs.Uses, el)
	var floor uint64
	first := true
	for _, n := range el {
		if c, ok := rs.Uses[n.UUID]; ok && (first || c < floor) {
			floor, first = c, false
		}
	}
	best := -1
	for k := range el {
		i := at(el, jobID, uint64(k))
		if _, ok := rs.Uses[el[i].UUID]; !ok {
			rs.Uses[el[i].UUID] = floor
		}
		if best < 0 || rs.Uses[el[i].UUID] < rs.Uses[el[best].UUID] {
			best = i
		}
	}
	rs.Uses[el[best].UUID]++
	return el[best]
}

// leastRecentlyUsed picks the eligible node whose latest fire of the job is
// the oldest (never used first; ties: the first in the job's own order,
// at).
func (l *loop) leastRecentlyUsed(jobID int64, el []cluster.NodeInfo) cluster.NodeInfo {
	rs := l.routeStateOf(jobID)
	if rs.Last == nil {
		rs.Last = map[string]uint64{}
	}
	pruneTo(rs.Last, el)
	best := at(el, jobID, 0)
	for k := 1; k < len(el); k++ {
		if i := at(el, jobID, uint64(k)); rs.Last[el[i].UUID] < rs.Last[el[best].UUID] {
			best = i
		}
	}
	rs.Seq++
	rs.Last[el[best].UUID] = rs.Seq
	return el[best]
}

func pruneTo(m map[string]uint64, el []cluster.NodeInfo) {
	if len(m) <= len(el) {
		return
	}
	keep := make(map[string]bool, len(el))
	for _, n := range el {
		keep[n.UUID] = true
	}
	for k := range m {
		if !keep[k] {
			delete(m, k)
		}
	}
}

// hashRing is a consistent hash ring: ringReplicas points per node.
type hashRing struct {
	points []uint64
	nodes  []string // nodes[i] owns points[i]
}

// ring returns the (cached) ring of the job's eligible nodes. The cache is
// dropped whenever the live nodes change.
func (l *loop) ring(j *jobSpec, el []cluster.NodeInfo) *hashRing {
	key := j.Group + "\x00" + j.Handler
	if r, ok := l.rings[key]; ok {
		return r
	}
	r := newRing(el)
	l.rings[key] = r
	return r
}

func newRing(el []cluster.NodeInfo) *hashRing {
	type point struct {
		h    uint64
		node string
	}
	ps := make([]point, 0, len(el)*ringReplicas)
	for _, n := range el {
		for i := range ringReplicas {
			ps = append(ps, point{hashString(n.UUID + "#" + strconv.Itoa(i)), n.UUID})
		}
	}
	sort.Slice(ps, func(a, b int) bool {
		if ps[a].h == ps[b].h {
			return ps[a].node < ps[b].node
		}
		return ps[a].h < ps[b].h
	})
	r := &hashRing{points: make([]uint64, len(ps)), nodes: make([]string, len(ps))}
	for i, p := range ps {
		r.points[i], r.nodes[i] = p.h, p.node
	}
	return r
}

// get is the node owning the first point at or after the job's hash.
func (r *hashRing) get(jobID int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(jobID))
	h := mix(fnvSum(b[:]))
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.nodes[i]
}

func hashString(s string) uint64 { return mix(fnvSum([]byte(s))) }

func fnvSum(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// mix is the splitmix64 finaliser: it spreads FNV's similar outputs for
// similar inputs ("n1#1", "n1#2") over the ring.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// home is the node a job's config is placed on: its pinned node, the node
// of a stateless strategy (FIRST, LAST, CONSISTENT_HASH), else a stable
// consistent-hash choice among the eligible nodes. Placement never moves
// route state.
func (l *loop) home(j *jobSpec) (string, bool) {
	if j.NodeUUID != "" {
		n, ok := l.nodes[j.NodeUUID]
		return j.NodeUUID, ok && n.HasHandler(j.Handler)
	}
	el := l.eligible(j)
	if len(el) == 0 {
		return "", false
	}
	switch j.RouteStrategy {
	case "", cluster.RouteFirst:
		return el[0].UUID, true
	case cluster.RouteLast:
		return el[len(el)-1].UUID, true
	}
	return l.ring(j, el).get(j.ID), true
}
