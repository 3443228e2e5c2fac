package inbox

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/flock"
)

// maxTaken bounds the list of callbacks handed over and not acknowledged:
// the oldest go first.
const maxTaken = 1000

// TakenPath is the list of callbacks handed over to agent and not yet
// acknowledged by it (orch ack).
func TakenPath(orchDir, agent string) string { return filepath.Join(Dir(orchDir), agent+".taken.json") }

// LoadTaken reads the list; none is an empty list.
func LoadTaken(orchDir, agent string) ([]Item, error) {
	data, err := os.ReadFile(TakenPath(orchDir, agent))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Item
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AddTaken appends items to the list, once each by event id. The caller
// holds the takers' lock.
func AddTaken(orchDir, agent string, items []Item) error {
	unlock, err := lockTaken(orchDir, agent)
	if err != nil {
		return err
	}
	defer unlock()
	list, err := LoadTaken(orchDir, agent)
	if err != nil {
		list = nil // a damaged list is started again rather than block delivery
	}
	for _, it := range items {
		if !slices.ContainsFunc(list, func(o Item) bool { return o.Callback.Event == it.Callback.Event }) {
			list = append(list, it)
		}
	}
	if len(list) > maxTaken {
		list = list[len(list)-maxTaken:]
	}
	return saveTaken(orchDir, agent, list)
}

// AckTaken removes the callbacks with the given event ids (all with
// all) and returns those removed and the ids not found.
func AckTaken(orchDir, agent string, ids []string, all bool) (acked []Item, unknown []string, err error) {
	unlock, err := lockTaken(orchDir, agent)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	list, err := LoadTaken(orchDir, agent)
	if err != nil {
		return nil, nil, err
	}
	var keep []Item
	found := map[string]bool{}
	for _, it := range list {
		if all || slices.Contains(ids, it.Callback.Event) {
			acked = append(acked, it)
			found[it.Callback.Event] = true
			continue
		}
		keep = append(keep, it)
	}
	for _, id := range ids {
		if !found[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, unknown, nil
	}
	return acked, nil, saveTaken(orchDir, agent, keep)
}

// lockTaken serialises changes to the list between hooks and orch ack.
func lockTaken(orchDir, agent string) (func(), error) {
	if err := os.MkdirAll(Dir(orchDir), 0o700); err != nil {
		return nil, err
	}
	l, err := flock.Exclusive(TakenPath(orchDir, agent) + ".lock")
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}

func saveTaken(orchDir, agent string, list []Item) error {
	if err := os.MkdirAll(Dir(orchDir), 0o700); err != nil {
		return err
	}
	if list == nil {
		list = []Item{}
	}
	data, _ := json.MarshalIndent(list, "", "  ")
	return atomicfile.Write(TakenPath(orchDir, agent), append(data, '\n'), 0o600)
}
