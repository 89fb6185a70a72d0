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

// ProcPrefix is the directory of running processes on one node.
func (k Keys) ProcPrefix(nodeUUID string) string { return k.root() + "/proc/" + nodeUUID + "/" }

// Proc is the key of one running process.
func (k Keys) Proc(nodeUUID string, jobID int64, pid int) string {
	return fmt.Sprintf("%s%d/%d", k.ProcPrefix(nodeUUID), jobID, pid)
}

// Lock is the key of a named distributed lock.
func (k Keys) Lock(name string) string { return k.root() + "/lock/" + name }

// SystemSwitch is the key a replica writes to ask a node for system info.
func (k Keys) SystemSwitch(nodeUUID string) string { return k.root() + "/system/switch/" + nodeUUID }

// SystemGet is the key a node answers system info in.
func (k Keys) SystemGet(nodeUUID string) string { return k.root() + "/system/get/" + nodeUUID }

// ServerRegistration is the seed-004 registry key of a server replica.
func ServerRegistration(hostPort string) string { return RegistryRoot + hostPort + "/data" }

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
