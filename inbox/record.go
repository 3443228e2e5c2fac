package inbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
)

// Record is what orch lead install keeps about one lead agent, in
// .orch/lead/<agent>.json.
type Record struct {
	Agent    string `json:"agent"`    // "claude"
	Consumer string `json:"consumer"` // the durable consumer's name
	// ID names this install; a consumer made by another is made again.
	ID string `json:"id"`
	// Since is when the inbox starts: callbacks stored before it are not
	// the lead agent's.
	Since time.Time `json:"since"`
	// Added are the settings entries the install added that were not
	// there before, for uninstall to take out exactly those.
	Added []string `json:"added,omitempty"`
}

var agentRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// NewRecord is a fresh record for agent, starting now.
func NewRecord(agent string, now time.Time) (Record, error) {
	if !agentRE.MatchString(agent) {
		return Record{}, fmt.Errorf("lead agent %q: want a short lower-case name such as claude", agent)
	}
	var b [8]byte
	rand.Read(b[:])
	return Record{Agent: agent, Consumer: "lead-" + agent, ID: hex.EncodeToString(b[:]), Since: now.UTC()}, nil
}

// Dir is the folder of the lead agents' records and locks.
func Dir(orchDir string) string { return filepath.Join(orchDir, orchdir.Lead) }

// RecordPath is where agent's record is kept.
func RecordPath(orchDir, agent string) string { return filepath.Join(Dir(orchDir), agent+".json") }

// LockPath is the takers' lock of agent's inbox: the one process taking
// from it holds it.
func LockPath(orchDir, agent string) string { return filepath.Join(Dir(orchDir), agent+".lock") }

// LoadRecord reads agent's record; ErrNotInstalled when there is none.
func LoadRecord(orchDir, agent string) (Record, error) {
	var r Record
	if !agentRE.MatchString(agent) {
		return r, fmt.Errorf("lead agent %q: %w", agent, ErrNotInstalled)
	}
	data, err := os.ReadFile(RecordPath(orchDir, agent))
	if errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("lead agent %s: %w", agent, ErrNotInstalled)
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w (orch lead install %s writes it again)", RecordPath(orchDir, agent), err, agent)
	}
	if r.Consumer == "" || r.ID == "" {
		return r, fmt.Errorf("%s: no consumer or id (orch lead install %s writes it again)", RecordPath(orchDir, agent), agent)
	}
	return r, nil
}

// Consumers names the consumers of the inboxes installed in orchDir (one
// record each), for the stream's trim to wait for. A record that cannot be
// read still names its agent's consumer, as NewRecord names it.
func Consumers(orchDir string) []string {
	paths, _ := filepath.Glob(filepath.Join(Dir(orchDir), "*.json"))
	var out []string
	for _, p := range paths {
		agent := strings.TrimSuffix(filepath.Base(p), ".json")
		if !agentRE.MatchString(agent) {
			continue // a taken list, a typing record: not a record
		}
		if r, err := LoadRecord(orchDir, agent); err == nil {
			out = append(out, r.Consumer)
		} else {
			out = append(out, "lead-"+agent)
		}
	}
	return out
}

// SaveRecord writes agent's record atomically, mode 0600.
func SaveRecord(orchDir string, r Record) error {
	if err := os.MkdirAll(Dir(orchDir), 0o700); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(r, "", "  ") // strings and a time
	return atomicfile.Write(RecordPath(orchDir, r.Agent), append(data, '\n'), 0o600)
}

// RemoveRecord deletes agent's record, its lock and its list of taken
// callbacks.
func RemoveRecord(orchDir, agent string) error {
	for _, p := range []string{RecordPath(orchDir, agent), LockPath(orchDir, agent), TakenPath(orchDir, agent), TakenPath(orchDir, agent) + ".lock"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
