// Package orchdir is the layout of a repo's .orch/ directory: the one place
// that names its files, for orch serve, the CLI, the broker and the
// worker's orch-notify alike. It holds names and the broker's endpoint
// record, nothing that runs.
package orchdir

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Name is the directory under the repo root that holds orch's runtime files.
const Name = ".orch"

// Files and folders directly under .orch/.
const (
	Broker        = "broker.json" // where the running broker can be reached (Endpoint)
	Creds         = "creds"       // NKey seeds, one file per role
	WorkerCreds   = "worker.nk"   // in Creds: the shared worker seed of orch before per-worker keys (unused)
	WorkerKeys    = "workers"     // in Creds: one seed per worker, <wN>.nk
	LeadCreds     = "lead.nk"     // in Creds: the lead role's seed
	Spool         = "spool"       // events written while the broker was unreachable
	State         = "state.json"  // orch serve's record; only orch serve writes it
	ServeLock     = "serve.lock"  // claimed by one orch serve; only another orch serve tries it
	ServePID      = "serve.pid"   // held by that orch serve, its pid inside; what clients probe
	GitLock       = "git.lock"    // serialises orch's own commits across processes
	JetStream     = "jetstream"   // the embedded broker's store
	Logs          = "logs"        // headless agents' output, one file per plan attempt
	Worktrees     = "worktrees"   // one git worktree per worker (worktree isolation)
	Gates         = "gates"       // scratch worktrees the acceptance gates run in
	Integrate     = "integrate"   // orch integrate's scratch worktree
	IntegrateLock = "integrate.lock"
	Stack         = "stack"          // scratch worktrees where a plan's dependencies' branches are merged into its base
	Agents        = "agents"         // per-worker agent configuration, agents/<wN>/
	BoardURL      = "board.url"      // the web board's URL with its token (orch serve --http), mode 0600
	Hosts         = "hosts"          // the lead's register of other hosts, one <name>.json each (package hosts)
	HostLock      = "host.lock"      // claimed by the one orch host of a host's clone
	HostRuns      = "host-runs.json" // in a host's clone: the runs its orch host started and has not seen end
	Lead          = "lead"           // lead agents' inbox records, locks and taken lists (package inbox)
	Bus           = "bus.md"         // orch serve's copy of the workers' bus (package bus)
)

// WorkerKey is the path of worker id's seed in the .orch directory dir.
func WorkerKey(dir, id string) string { return filepath.Join(dir, Creds, WorkerKeys, id+".nk") }

// PrivateDirs are the folders of .orch/ no worker has any business writing:
// everything but the worktrees they work in.
var PrivateDirs = []string{Agents, Creds, Gates, Hosts, Integrate, JetStream, Lead, Logs, Spool, Stack}

// PrivateFiles are the files directly in .orch/ that only orch writes.
var PrivateFiles = []string{BoardURL, Broker, Bus, GitLock, HostLock, HostRuns, IntegrateLock, ServeLock, ServePID, State}

// Of returns the .orch directory of a repo root.
func Of(root string) string { return filepath.Join(root, Name) }

// Endpoint is what broker.json records about a running broker. It holds no
// secret.
type Endpoint struct {
	URL    string `json:"url"`
	Prefix string `json:"prefix"`
	Stream string `json:"stream"`
	PID    int    `json:"pid,omitempty"`
	// Upstream lists the external cluster's URLs (orch serve --nats) the
	// broker at URL links to; empty when the broker keeps the stream itself.
	Upstream []string `json:"upstream,omitempty"`
	// Leaf is where other hosts link to the lead (orch serve --leaf).
	Leaf string `json:"leaf,omitempty"`
}

// ReadEndpoint reads broker.json from an .orch directory. A record without
// a prefix gets defaultPrefix.
func ReadEndpoint(dir, defaultPrefix string) (Endpoint, error) {
	var ep Endpoint
	data, err := os.ReadFile(filepath.Join(dir, Broker))
	if err != nil {
		return ep, err
	}
	if err := json.Unmarshal(data, &ep); err != nil {
		return ep, err
	}
	if ep.Prefix == "" {
		ep.Prefix = defaultPrefix
	}
	return ep, nil
}
