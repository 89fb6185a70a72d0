// Package cluster defines the etcd key layout and the records that Cronix
// servers and nodes exchange through etcd and the internal result API. It is
// the single definition both sides import; nothing else may build a key by hand.
//
// Key rules (seed 004): every key starts with "/"; a virtual directory (a
// prefix) ends with "/"; a leaf key never does; every purpose has one fixed
// directory under the root (default "/Cronix").
//
//	/Cronix/node/<node_uuid>                  NodeInfo JSON; node, under its lease; removed on graceful stop or lease expiry
//	/Cronix/job/<node_uuid>/<job_id>          JobConfig JSON; leader placement (only with --place-jobs); removed when the job is deleted/disabled/moved
//	/Cronix/run/<node_uuid>/<fire_id>         Dispatch JSON; leader, in a batched txn fenced on /Cronix/leader;
//	                                          removed by the node once the run's result was accepted by a server
//	/Cronix/leader                            LeaderRecord "<term %020d>/<server_id>"; written by a new raft leader only
//	                                          if its term is higher; every dispatch txn compares it
//	/Cronix/once/<job_id>                     OnceRequest JSON ("run once now"); any replica; leader fires it
//	                                          (fire id "<job_id>-m<mod_revision>") and deletes it
//	/Cronix/signal/job/<job_id>               job revision (decimal); any replica after a SQL write of the job,
//	                                          so the leader reloads it; removed with the job
//	/Cronix/signal/group/<appname>            group write time (RFC 3339); any replica after a SQL create/update/delete
//	                                          of the group, so the leader reloads the groups (manual address lists)
//	/Cronix/proc/<node_uuid>/<job_id>/<pid>   ProcInfo JSON; node, under its lease, for long runs
//	                                          (<pid> is the agent's per-process run number; Killed=true asks the node to kill it)
//	/Cronix/kill/<node_uuid>/<fire_id>        ""; a replica asking to kill a fire without a proc key, under a 60s lease;
//	                                          the node deletes it once acted on
//	/Cronix/handler/<name>/<node_uuid>        HandlerInfo JSON (name, version, description, params schema); node, under
//	                                          its own lease, for every loaded handler; servers read schemas from it
//	/Cronix/lock/<name>                       ""; any module; holder or lease expiry
//	/Cronix/system/switch/<node_uuid>         request marker; a replica asking for node info
//	/Cronix/system/get/<node_uuid>            system info JSON; node, under a 5-minute lease
//	/registry/cronix/server/<ip>:<port>/data  ServerInfo JSON; each server replica, under its lease (seed 004 layout)
//	/registry/cronix/server/<ip>:<port>/status ServerRaftStatus JSON; a replica while it is a raft non-voter, every
//	                                          second under its lease; the leader promotes it once caught up
package cluster
