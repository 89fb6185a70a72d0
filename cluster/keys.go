package cluster

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultRoot is the etcd root directory of every Cronix key.
const DefaultRoot = "/Cronix"

// RegistryRoot is the seed-004 service registry directory for server replicas.
const RegistryRoot = "/registry/cronix/server/"

// Keys builds etcd keys under one root. The zero value uses DefaultRoot.
type Keys struct {
	// Root is the root directory without a trailing slash, e.g. "/Cronix".
	Root string
}

// NewKeys returns Keys for root; an empty root means DefaultRoot. A trailing
// slash is removed.
func NewKeys(root string) Keys {
	root = strings.TrimRight(root, "/")
	if root == "" {
		root = DefaultRoot
	}
	return Keys{Root: root}
}

func (k Keys) root() string {
	if k.Root == "" {
		return DefaultRoot
	}
	return k.Root
}

// NodePrefix is the directory of all node registrations.
func (k Keys) NodePrefix() string { return k.root() + "/node/" }

// Node is the registration key of one node.
func (k Keys) Node(nodeUUID string) string { return k.NodePrefix() + nodeUUID }

// JobRoot is the directory of the job configs placed on every node (the
// parent of every JobPrefix); the leader's placement lists it.
func (k Keys) JobRoot() string { return k.root() + "/job/" }

// ParseJobKey splits a key built by Job into its node uuid and job id.
func (k Keys) ParseJobKey(key string) (nodeUUID string, jobID int64, err error) {
	rest, ok := strings.CutPrefix(key, k.JobRoot())
	if !ok {
		return "", 0, fmt.Errorf("cluster: %q is not a job key under %s", key, k.JobRoot())
	}
	node, id, ok := strings.Cut(rest, "/")
	if !ok || node == "" {
		return "", 0, fmt.Errorf("cluster: job key %q has no node", key)
	}
	jobID, err = strconv.ParseInt(id, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: job key %q has no job id: %w", key, err)
	}
	return node, jobID, nil
}

// JobPrefix is the directory of job configs placed on one node.
func (k Keys) JobPrefix(nodeUUID string) string { return k.root() + "/job/" + nodeUUID + "/" }

// Job is the key of one job config placed on one node.
func (k Keys) Job(nodeUUID string, jobID int64) string {
	return k.JobPrefix(nodeUUID) + strconv.FormatInt(jobID, 10)
}

// RunPrefix is the directory of runs dispatched to one node.
func (k Keys) RunPrefix(nodeUUID string) string { return k.root() + "/run/" + nodeUUID + "/" }

// Run is the key of one dispatched fire on one node.
func (k Keys) Run(nodeUUID, fireID string) string { return k.RunPrefix(nodeUUID) + fireID }

// RunRoot is the directory of the runs dispatched to every node (the parent
// of every RunPrefix); the leader watches it to learn when runs end.
func (k Keys) RunRoot() string { return k.root() + "/run/" }

// ParseRunKey splits a key built by Run into its node uuid and fire id.
func (k Keys) ParseRunKey(key string) (nodeUUID, fireID string, err error) {
	rest, ok := strings.CutPrefix(key, k.RunRoot())
	if !ok {
		return "", "", fmt.Errorf("cluster: %q is not a run key under %s", key, k.RunRoot())
	}
	node, fire, ok := strings.Cut(rest, "/")
	if !ok || node == "" || fire == "" || strings.Contains(fire, "/") {
		return "", "", fmt.Errorf("cluster: malformed run key %q", key)
	}
	return node, fire, nil
}

// Leader is the fence key: the current trigger leader's term and id.
func (k Keys) Leader() string { return k.root() + "/leader" }

// OncePrefix is the directory of "run once now" requests.
func (k Keys) OncePrefix() string { return k.root() + "/once/" }

// Once is the "run once now" request key of one job.
func (k Keys) Once(jobID int64) string { return k.OncePrefix() + strconv.FormatInt(jobID, 10) }

// JobSignalPrefix is the directory of job change signals.
func (k Keys) JobSignalPrefix() string { return k.root() + "/signal/job/" }

// JobSignal is the change signal key of one job.
func (k Keys) JobSignal(jobID int64) string {
	return k.JobSignalPrefix() + strconv.FormatInt(jobID, 10)
}

// GroupSignalPrefix is the directory of group change signals.
func (k Keys) GroupSignalPrefix() string { return k.root() + "/signal/group/" }

// GroupSignal is the change signal key of one group (by appname).
func (k Keys) GroupSignal(appName string) string { return k.GroupSignalPrefix() + appName }

// ProcPrefix is the directory of running processes on one node.
func (k Keys) ProcPrefix(nodeUUID string) string { return k.root() + "/proc/" + nodeUUID + "/" }

// ProcRoot is the directory of the running processes of every node (the
// parent of every ProcPrefix).
func (k Keys) ProcRoot() string { return k.root() + "/proc/" }

// ParseProcKey splits a key built by Proc into its node uuid, job id and pid.
func (k Keys) ParseProcKey(key string) (nodeUUID string, jobID int64, pid int, err error) {
	rest, ok := strings.CutPrefix(key, k.ProcRoot())
	if !ok {
		return "", 0, 0, fmt.Errorf("cluster: %q is not a proc key under %s", key, k.ProcRoot())
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" {
		return "", 0, 0, fmt.Errorf("cluster: malformed proc key %q", key)
	}
	if jobID, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return "", 0, 0, fmt.Errorf("cluster: proc key %q has no job id: %w", key, err)
	}
	if pid, err = strconv.Atoi(parts[2]); err != nil {
		return "", 0, 0, fmt.Errorf("cluster: proc key %q has no pid: %w", key, err)
	}
	return parts[0], jobID, pid, nil
}

// Proc is the key of one running process.
func (k Keys) Proc(nodeUUID string, jobID int64, pid int) string {
	return fmt.Sprintf("%s%d/%d", k.ProcPrefix(nodeUUID), jobID, pid)
}

// KillPrefix is the directory of kill requests for runs on one node.
func (k Keys) KillPrefix(nodeUUID string) string { return k.root() + "/kill/" + nodeUUID + "/" }

// Kill is the key asking a node to kill one fire that has no proc key yet
// (still queued, or younger than the proc threshold). A replica writes it
// under a short lease; the node deletes it once it acted on it.
func (k Keys) Kill(nodeUUID, fireID string) string { return k.KillPrefix(nodeUUID) + fireID }

// HandlerPrefix is the directory of every handler description published
// by nodes.
func (k Keys) HandlerPrefix() string { return k.root() + "/handler/" }

// HandlerNamePrefix is the directory of one handler's descriptions, one
// per node offering it.
func (k Keys) HandlerNamePrefix(name string) string { return k.HandlerPrefix() + name + "/" }

// Handler is the key of one handler's description published by one node.
func (k Keys) Handler(name, nodeUUID string) string { return k.HandlerNamePrefix(name) + nodeUUID }

// Lock is the key of a named distributed lock.
func (k Keys) Lock(name string) string { return k.root() + "/lock/" + name }

// SystemSwitch is the key a replica writes to ask a node for system info.
func (k Keys) SystemSwitch(nodeUUID string) string { return k.root() + "/system/switch/" + nodeUUID }

// SystemGet is the key a node answers system info in.
func (k Keys) SystemGet(nodeUUID string) string { return k.root() + "/system/get/" + nodeUUID }

// ServerRegistration is the seed-004 registry key of a server replica.
func ServerRegistration(hostPort string) string { return RegistryRoot + hostPort + "/data" }

// ServerStatus is the registry key where a replica that is a raft
// non-voter reports its raft progress (ServerRaftStatus), so the leader
// promotes it once it has caught up.
func ServerStatus(hostPort string) string { return RegistryRoot + hostPort + "/status" }

// LastSegment returns the part of key after its last "/".
func LastSegment(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// JobIDFromKey parses the trailing job id of a job, once or signal key.
func JobIDFromKey(key string) (int64, error) {
	id, err := strconv.ParseInt(LastSegment(key), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: key %q has no job id: %w", key, err)
	}
	return id, nil
}
